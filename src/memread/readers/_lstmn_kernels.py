"""Optional compiled kernels for the LSTMN recurrence (``_lstmn_kernels.cpp``).

The C++ source runs the per-step loops of :mod:`memread.readers.lstmn` (forward and hand-written
backward) on the CPU with the same buffers and equations as the Python path, so no Python runs per
step and the attention passes over each window are single loops; the batch is split into blocks of rows
between torch's intra-op threads, each running the whole time loop over its rows. How it is built, and
what happens where it cannot be: :mod:`memread._compiled` (``MEMREAD_NO_EXTENSIONS=1`` forces the
Python path).
"""

from __future__ import annotations

from pathlib import Path

from memread._compiled import DISABLE_ENV, CompiledOps

__all__ = ["DISABLE_ENV", "SOURCE", "kernels"]

SOURCE = Path(__file__).with_name("_lstmn_kernels.cpp")

# ``kernels()``: ``torch.ops.memread_lstmn`` (ops ``forward`` and ``backward``), built on first call; None
# when the compiled path is unavailable or disabled
kernels = CompiledOps("memread_lstmn_blk", SOURCE, "memread_lstmn", "LSTMN kernels")
