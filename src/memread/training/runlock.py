"""One writer per run directory: an OS-level advisory lock held for the life of ``train`` (fresh or resumed).

The lock is ``RUN_DIR/.lock``, taken with ``filelock`` (``flock`` on Unix, ``LockFileEx`` on Windows), so
the operating system releases it when the holder dies, however it dies: a stale lock of a killed process
never blocks the next run. The holder also writes ``RUN_DIR/.lock.json`` (pid, host, command, start time),
which a refused second writer quotes, and removes it when it gives the lock back. It is also a second check:
a ``.lock`` deleted while its holder trains (an ``rm``, a sync tool) no longer locks anything, so a writer that
takes a fresh lock still refuses while ``.lock.json`` names a live process on this host that is not itself
(one started before the description was written: a pid the OS gave to another process since does not count).

Readers of a run (``eval``, ``attend``, ``curves``) do not take it: checkpoints are replaced atomically,
so a reader never sees half a file. In one process the lock is re-entrant (the same path gives the same
lock), so a library user may hold a trainer and resume the same run in one script.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

import filelock

from memread.errors import MemreadError

LOCK_NAME = ".lock"
OWNER_NAME = ".lock.json"


def _owner(run_dir: Path) -> dict | None:
    """``.lock.json``: who took the lock last (None when there is none, or it is not readable)."""
    try:
        owner = json.loads((Path(run_dir) / OWNER_NAME).read_text(encoding="utf-8"))
        return owner if isinstance(owner, dict) else None
    except (OSError, ValueError):
        return None


def _describe(owner: dict | None) -> str:
    try:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(owner["started"]))
        return f"pid {owner['pid']} on {owner['host']}, since {since}: {owner['command']}"
    except (ValueError, KeyError, TypeError, OverflowError, OSError):
        return "another process (its pid is not recorded yet)"


def _holder(run_dir: Path) -> str:
    return _describe(_owner(run_dir))


def _process_start(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch), where the OS says (Linux's /proc); else None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        ticks = int(stat[stat.rindex(")") + 2:].split()[19])  # field 22, starttime, after "pid (comm) "
        boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    if os.name == "nt":  # os.kill(pid, 0) would end it there
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    except (OSError, OverflowError):
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2:][:1] != "Z"
    except (OSError, ValueError):
        return True


def live_owner(run_dir: Path) -> dict | None:
    """The process ``.lock.json`` names, when it is another process on this host that still lives and started
    before the description was written (not a pid reused since); None otherwise (a process on another host
    cannot be asked: its lock is the OS's alone)."""
    owner = _owner(run_dir)
    if owner is None:
        return None
    pid, started = owner.get("pid"), owner.get("started")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or pid == os.getpid():
        return None
    if owner.get("host") != socket.gethostname() or not _alive(pid):
        return None
    birth = _process_start(pid)
    if birth is not None and isinstance(started, (int, float)) and birth > started + 2.0:
        return None  # the pid belongs to a process started after the holder wrote it: the holder is gone
    return owner


def writer(run_dir: Path) -> str | None:
    """Who is writing ``run_dir`` now ("pid N on HOST, since ...: COMMAND"), or None when no other process holds
    its lock (a run that ended, or one whose process was killed: ``train --resume`` takes it on)."""
    path = Path(run_dir) / LOCK_NAME
    if not path.exists():  # a holder whose .lock was deleted still writes
        live = live_owner(Path(run_dir))
        return None if live is None else _describe(live)
    probe = filelock.FileLock(str(path), blocking=False, is_singleton=True)
    try:
        probe.acquire()
    except filelock.Timeout:
        return _holder(Path(run_dir))
    try:
        live = live_owner(Path(run_dir))
    finally:
        probe.release()
    return None if live is None else _describe(live)


class RunLock:
    """The writer's lock on ``run_dir`` (which must exist). ``acquire`` refuses with one line naming the
    holder when another process holds it; ``release`` (or the end of the process) gives it back."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self._lock = filelock.FileLock(str(self.run_dir / LOCK_NAME), blocking=False, is_singleton=True)

    def acquire(self) -> "RunLock":
        try:
            self._lock.acquire()
        except filelock.Timeout:
            raise MemreadError(f"{self.run_dir}: another memread process is writing this run ({_holder(self.run_dir)}); "
                               f"wait for it to end or stop it, or choose another --run-dir") from None
        if self._lock.lock_counter == 1:  # first hold in this process: no other live holder, then say who holds it
            live = live_owner(self.run_dir)
            if live is not None:  # its .lock was deleted under it: the OS lock no longer tells, its description does
                self._lock.release()
                raise MemreadError(f"{self.run_dir}: another memread process is writing this run ({_describe(live)}; "
                                   f"its {LOCK_NAME} file was deleted); wait for it to end or stop it, or choose "
                                   f"another --run-dir")
            owner = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(),
                     "command": " ".join(sys.argv)[:300]}
            try:
                (self.run_dir / OWNER_NAME).write_text(json.dumps(owner) + "\n", encoding="utf-8")
            except OSError:
                pass  # the description is a courtesy; the lock itself is held
        return self

    @property
    def held(self) -> bool:
        return self._lock.is_locked

    def release(self) -> None:
        if self._lock.is_locked:
            self._lock.release()
            if not self._lock.is_locked:  # given back: the description goes with it (a live process it names would
                owner = _owner(self.run_dir)  # otherwise keep refusing writers after the run ended)
                if owner is not None and owner.get("pid") == os.getpid():
                    try:
                        (self.run_dir / OWNER_NAME).unlink()
                    except OSError:
                        pass

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
