"""Optional compiled kernels for the NSE / MMA-NSE time loop (``_nse_kernels.cpp``).

The C++ source runs the per-step loop of :mod:`memread.readers.nse` (forward and hand-written backward)
on the CPU with no Python per step: per row, the memory passes (scores, masked softmax, the read, the
erase/write and their gradients) are single loops over the row's slots, and each step's products with
the weights (compose, the write LSTM's gates) are one ATen matmul each; the batch is split into blocks
of rows between torch's intra-op threads, each running the whole time loop over its rows. How it is
built, and what happens where it cannot be: :mod:`memread._compiled` (``MEMREAD_NO_EXTENSIONS=1`` forces
the Python path).
"""

from __future__ import annotations

from pathlib import Path

from memread._compiled import DISABLE_ENV, CompiledOps

__all__ = ["DISABLE_ENV", "SOURCE", "kernels"]

SOURCE = Path(__file__).with_name("_nse_kernels.cpp")

# ``kernels()``: ``torch.ops.memread_nse`` (ops ``forward`` and ``backward``), built on first call; None
# when the compiled path is unavailable or disabled
kernels = CompiledOps("memread_nse", SOURCE, "memread_nse", "NSE kernels")
