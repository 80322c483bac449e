"""Optional compiled kernels for the LSTMN recurrence (``_lstmn_kernels.cpp``).

The C++ source runs the per-step loops of :mod:`memread.readers.lstmn` (forward and hand-written
backward) on the CPU with the same buffers and equations as the Python path, so no Python runs per
step and the attention passes over each window are single loops; the batch is split into blocks of rows
between torch's intra-op threads, each running the whole time loop over its rows. It is compiled on first use with
``torch.utils.cpp_extension`` (a C++ compiler and ``ninja`` are needed; ``pip install memread[fast]``
brings ninja) and cached by torch in its extensions folder (``TORCH_EXTENSIONS_DIR``).

When it cannot be built the reader uses the Python path, which computes the same values (to float32
precision; see :mod:`memread.readers.lstmn`): silently when there is no compiler or no ninja, with a
warning when the build fails. ``MEMREAD_NO_EXTENSIONS=1`` forces that path.
"""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import torch

SOURCE = Path(__file__).with_name("_lstmn_kernels.cpp")
DISABLE_ENV = "MEMREAD_NO_EXTENSIONS"

# vector instructions for the plain loops, by what torch itself found the CPU supports
_ARCH_FLAGS = {
    "AVX512": ["-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl", "-mavx2", "-mfma"],
    "AVX2": ["-mavx2", "-mfma"],
}

_ops = None
_tried = False


def kernels():
    """``torch.ops.memread_lstmn`` (ops ``forward`` and ``backward``), built on first call; None
    when the compiled path is unavailable or disabled."""
    global _ops, _tried
    if _tried:
        return _ops
    _tried = True
    if os.environ.get(DISABLE_ENV, "") not in ("", "0"):
        return None
    try:
        from torch.utils import cpp_extension

        if shutil.which(os.environ.get("CXX", "c++")) is None or not cpp_extension.is_ninja_available():
            return None  # nothing to build with: the Python path
        capability = torch.backends.cpu.get_cpu_capability()
        # at::parallel_for runs its chunks on torch's threads only when compiled with OpenMP, and only
        # torch's OpenMP backend is driven by -fopenmp (the native backend, a thread pool, needs no flag)
        openmp = ["-fopenmp"] if "parallel backend: OpenMP" in torch.__config__.parallel_info() else []
        cpp_extension.load(
            name=f"memread_lstmn_blk_{capability.lower()}",
            sources=[str(SOURCE)],
            # -fno-trapping-math lets the compiler vectorise the branch-free float tanh; -fopenmp makes
            # at::parallel_for split the rows between torch's threads (torch's OpenMP backend: it links
            # the libgomp that torch has already loaded)
            extra_cflags=["-O3", *openmp, "-fopenmp-simd", "-fno-math-errno", "-fno-trapping-math",
                          *_ARCH_FLAGS.get(capability, [])],
            extra_ldflags=openmp,
            is_python_module=False,
            verbose=False,
        )
        _ops = torch.ops.memread_lstmn
    except Exception as e:  # a failed build must not stop training: the Python path computes the same
        warnings.warn(f"memread: the compiled LSTMN kernels could not be built ({type(e).__name__}: {e}); "
                      f"using the Python path", RuntimeWarning, stacklevel=2)
        _ops = None
    return _ops
