"""The training loop's clock: wall seconds, less the pauses a run was given with SIGTSTP.

A run's ``seconds`` (its train logs, ``loop.seconds_trained``, ``train.max_minutes``) are wall time, what a run
cost. A process stopped with ``kill -STOP`` cannot see that it was stopped: every clock but the CPU-time ones runs
on, so the pause counts as training. Stopped with ``kill -TSTP`` instead (or Ctrl-Z in its terminal), a run stops
just the same, but :meth:`PausableClock.counting_pauses` has a handler note the time, stop the process with SIGSTOP
itself, and on SIGCONT take the pause out of the clock (and say so on stderr). CPU time is no answer: it counts
every thread of a multi-threaded step and none of the wait for a GPU.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator


def _stop_this_process() -> None:
    os.kill(os.getpid(), signal.SIGSTOP)  # returns once a SIGCONT has continued the process


class PausableClock:
    """``clock()``: ``time.perf_counter()`` less every pause taken with SIGTSTP while :meth:`counting_pauses` is on.
    ``stop``: what a SIGTSTP does (the process stops itself; a test may pass a stand-in)."""

    def __init__(self, stop: Callable[[], None] = _stop_this_process) -> None:
        self.paused_s = 0.0
        self._stop = stop

    def __call__(self) -> float:
        return time.perf_counter() - self.paused_s

    def _on_tstp(self, signum: int, frame: object) -> None:
        start = time.perf_counter()
        self._stop()
        pause = time.perf_counter() - start
        self.paused_s += pause
        print(f"memread: paused {pause:.1f} s by SIGTSTP; not counted in the run's seconds", file=sys.stderr,
              flush=True)

    @contextmanager
    def counting_pauses(self) -> Iterator[None]:
        """Take SIGTSTP pauses out of the clock inside the block (from the main thread of a platform with SIGTSTP;
        elsewhere the block runs as it is: a pause counts)."""
        tstp = getattr(signal, "SIGTSTP", None)
        if tstp is None or threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.signal(tstp, self._on_tstp)
        try:
            yield
        finally:
            signal.signal(tstp, previous)
