"""Building memread's optional compiled loops (C++ sources next to the Python modules that use them).

Each source registers a ``torch.ops`` namespace and is compiled on first use with
``torch.utils.cpp_extension`` (a C++ compiler and ``ninja`` are needed; ``pip install memread[fast]``
brings ninja), cached by torch in its extensions folder (``TORCH_EXTENSIONS_DIR``), with the vector
instructions torch itself found on this CPU and, under torch's OpenMP backend, ``-fopenmp`` so that
``at::parallel_for`` splits work between torch's threads. The shared vector helpers are in
``csrc/simd_math.h``.

When a source cannot be built its caller uses its Python path, which computes the same values (to
float32 precision): silently when there is no compiler or no ninja, with a warning when the build
fails. ``MEMREAD_NO_EXTENSIONS=1`` forces the Python paths.
"""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import torch

DISABLE_ENV = "MEMREAD_NO_EXTENSIONS"
INCLUDE = Path(__file__).with_name("csrc")

# vector instructions for the plain loops, by what torch itself found the CPU supports
_ARCH_FLAGS = {
    "AVX512": ["-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl", "-mavx2", "-mfma"],
    "AVX2": ["-mavx2", "-mfma"],
}


def disabled() -> bool:
    return os.environ.get(DISABLE_ENV, "") not in ("", "0")


def build(name: str, source: Path, namespace: str, what: str):
    """``torch.ops.<namespace>`` from ``source``, compiled as extension ``name`` (suffixed with the CPU's
    vector capability); None when disabled, when nothing can build it, or (with a warning naming
    ``what``) when the build fails."""
    if disabled():
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
            name=f"{name}_{capability.lower()}",
            sources=[str(source)],
            extra_include_paths=[str(INCLUDE)],
            # -fno-trapping-math lets the compiler vectorise the branch-free float tanh; -fopenmp makes
            # at::parallel_for split the rows between torch's threads (torch's OpenMP backend: it links
            # the libgomp that torch has already loaded)
            extra_cflags=["-O3", *openmp, "-fopenmp-simd", "-fno-math-errno", "-fno-trapping-math",
                          *_ARCH_FLAGS.get(capability, [])],
            extra_ldflags=openmp,
            is_python_module=False,
            verbose=False,
        )
        return getattr(torch.ops, namespace)
    except Exception as e:  # a failed build must not stop training: the Python path computes the same
        warnings.warn(f"memread: the compiled {what} could not be built ({type(e).__name__}: {e}); "
                      f"using the Python path", RuntimeWarning, stacklevel=3)
        return None


class CompiledOps:
    """One source's ops, built on the first call (``ops()``: the ``torch.ops`` namespace, or None when the
    compiled path is unavailable or disabled); the outcome is kept, so a failed build is tried once."""

    def __init__(self, name: str, source: Path, namespace: str, what: str):
        self.name, self.source, self.namespace, self.what = name, source, namespace, what
        self._ops = None
        self._tried = False

    def __call__(self):
        if not self._tried:
            self._tried = True
            self._ops = build(self.name, self.source, self.namespace, self.what)
        return self._ops

    def for_tensor(self, like: torch.Tensor, enabled: bool = True):
        """The ops for computing on ``like`` (CPU, float32 or float64, and ``enabled``), else None."""
        if not enabled or like.device.type != "cpu" or like.dtype not in (torch.float32, torch.float64):
            return None
        return self()

