"""One writer per run directory: an OS-level advisory lock held for the life of ``train`` (fresh or resumed).

The lock is ``RUN_DIR/.lock``, taken with ``filelock`` (``flock`` on Unix, ``LockFileEx`` on Windows), so
the operating system releases it when the holder dies, however it dies: a stale lock of a killed process
never blocks the next run. The holder also writes ``RUN_DIR/.lock.json`` (pid, host, command, start time),
which a refused second writer quotes; that file is only a description, the lock is the OS's.

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


def _holder(run_dir: Path) -> str:
    try:
        owner = json.loads((run_dir / OWNER_NAME).read_text(encoding="utf-8"))
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(owner["started"]))
        return f"pid {owner['pid']} on {owner['host']}, since {since}: {owner['command']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process (its pid is not recorded yet)"


def writer(run_dir: Path) -> str | None:
    """Who is writing ``run_dir`` now ("pid N on HOST, since ...: COMMAND"), or None when no other process holds
    its lock (a run that ended, or one whose process was killed: ``train --resume`` takes it on)."""
    path = Path(run_dir) / LOCK_NAME
    if not path.exists():
        return None
    probe = filelock.FileLock(str(path), blocking=False, is_singleton=True)
    try:
        probe.acquire()
    except filelock.Timeout:
        return _holder(Path(run_dir))
    probe.release()
    return None


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
        if self._lock.lock_counter == 1:  # first hold in this process: say who holds it
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

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
