"""Building memread's optional compiled loops (C++ sources next to the Python modules that use them).

Each source registers a ``torch.ops`` namespace and is compiled on first use with
``torch.utils.cpp_extension`` (a C++ compiler and ``ninja`` are needed; ``pip install memread[fast]``
brings ninja), cached by torch in its extensions folder (``TORCH_EXTENSIONS_DIR``), with the vector
instructions torch itself found on this CPU and, under torch's OpenMP backend, ``-fopenmp`` so that
``at::parallel_for`` splits work between torch's threads. The shared vector helpers are in
``csrc/simd_math.h``.

A real build (the extension is not in torch's cache yet, or its sources changed since) takes 15-30 s, so
it is announced on stderr with one line before and one line after it; loading a cached build prints
nothing. When a source cannot be built its caller uses its Python path, which computes the same values
(to float32 precision), and one line on stderr says why (no compiler, no ninja, or the build failed).
``MEMREAD_NO_EXTENSIONS=1`` forces the Python paths (silently); ``MEMREAD_QUIET=1`` silences the build
announcement and the missing-compiler/ninja notice (a failed build is still reported).

**Backends.** A reader whose time loop has compiled and Python forms (the LSTMN, the NSE) takes the choice
as one option, its config's ``backend`` (:data:`Backend`; settable on a built reader as ``reader.backend``):
``"auto"`` runs the compiled loop where it can (CPU tensors in float32 or float64, and the source built),
else the hand-written ``torch.autograd.Function`` loop; ``"compiled"`` insists on the compiled loop (an
error where it cannot run); ``"function"`` always runs the hand-written Function loop (what a GPU runs);
``"autograd"`` (the NSE only) the same loop step by step under autograd. :meth:`CompiledOps.for_backend`
resolves it. All of them compute the same values (to float32 precision; equal in float64).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Literal

import torch

from memread.errors import MemreadError

DISABLE_ENV = "MEMREAD_NO_EXTENSIONS"
QUIET_ENV = "MEMREAD_QUIET"
INCLUDE = Path(__file__).with_name("csrc")

# vector instructions for the plain loops, by what torch itself found the CPU supports
# the time-loop backends (module docstring); a reader offers those of them it has
Backend = Literal["auto", "compiled", "function", "autograd"]
BACKENDS: tuple[str, ...] = ("auto", "compiled", "function", "autograd")

_ARCH_FLAGS = {
    "AVX512": ["-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl", "-mavx2", "-mfma"],
    "AVX2": ["-mavx2", "-mfma"],
}


def disabled() -> bool:
    return os.environ.get(DISABLE_ENV, "") not in ("", "0")


def quiet() -> bool:
    return os.environ.get(QUIET_ENV, "") not in ("", "0")


_said: set[str] = set()  # notices already printed by this process


def notice(line: str, always: bool = False, once: bool = False) -> None:
    """One line on stderr (above any progress bar); not under ``MEMREAD_QUIET=1`` unless ``always``, and
    with ``once`` not when this process has said it already."""
    if (quiet() and not always) or (once and line in _said):
        return
    _said.add(line)
    try:
        from tqdm import tqdm

        tqdm.write(line, file=sys.stderr)
    except ImportError:  # pragma: no cover - tqdm is a dependency
        print(line, file=sys.stderr, flush=True)


def needs_build(build_directory: Path, library: str, sources: list[Path]) -> bool:
    """Whether loading extension ``library`` from ``build_directory`` compiles it: its shared library
    is not there, or a source or shared header is newer than it. (Changed compiler flags also make
    ninja rebuild; such a build is noticed by its duration instead.)"""
    from torch.utils import cpp_extension

    built = build_directory / f"{library}{getattr(cpp_extension, 'LIB_EXT', '.so')}"
    if not built.is_file():
        return True
    mtime = built.stat().st_mtime
    return any(p.stat().st_mtime > mtime for p in [*sources, *INCLUDE.glob("*.h")] if p.is_file())


def stale_lock(build_directory: Path, max_age_s: float = 600.0) -> bool:
    """Remove the build lock torch's ``cpp_extension.load`` leaves in ``build_directory`` when the process holding
    it is killed (a watchdog, Ctrl-C while ninja runs): every later load would wait for it forever. A lock older
    than ``max_age_s`` (a build takes 15-30 s, a few minutes on a loaded machine) is taken for such a one.
    True if one was removed."""
    lock = Path(build_directory) / "lock"
    try:
        if time.time() - lock.stat().st_mtime <= max_age_s:
            return False
        lock.unlink()
    except FileNotFoundError:
        return False
    return True


def _reason(e: BaseException) -> str:
    """``e`` in one line: for a failed compile, torch's first line without the compiler command, and the
    compiler's first error."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    if not lines:
        return type(e).__name__
    head = lines[0]
    if m := re.match(r"(Error building extension '[^']*')", head):
        head = m.group(1)
        error = next((line for line in lines if "error:" in line.lower()), None)
        if error:
            head += f": {error}"
    if len(head) > 300:
        head = head[:297] + "..."
    return f"{type(e).__name__}: {head}"


def build(name: str, source: Path, namespace: str, what: str):
    """``torch.ops.<namespace>`` from ``source``, compiled as extension ``name`` (suffixed with the CPU's
    vector capability); None when disabled, when nothing can build it, or when the build fails (each
    said in one line on stderr naming ``what``)."""
    if disabled():
        return None
    try:
        from torch.utils import cpp_extension

        # nothing to build with: said once for all sources, since it holds for all of them
        cxx = os.environ.get("CXX", "c++")
        if shutil.which(cxx) is None:
            notice(f"memread: no C++ compiler ({cxx!r} is not on PATH), so the compiled loops are not built and "
                   f"the readers run their Python paths (same values, slower)", once=True)
            return None
        if not cpp_extension.is_ninja_available():
            notice("memread: ninja is not installed, so the compiled loops are not built and the readers run "
                   "their Python paths (same values, slower); `pip install ninja` (or memread[fast]) fixes it",
                   once=True)
            return None
        capability = torch.backends.cpu.get_cpu_capability()
        library = f"{name}_{capability.lower()}"
        build_directory = Path(cpp_extension._get_build_directory(library, False))
        announce = needs_build(build_directory, library, [source])
        if not announce:  # built and current: loaded as it is, without torch's build lock (see stale_lock)
            torch.ops.load_library(str(build_directory / f"{library}{getattr(cpp_extension, 'LIB_EXT', '.so')}"))
            return getattr(torch.ops, namespace)
        if stale_lock(build_directory):
            notice(f"memread: removed {build_directory / 'lock'}, a build lock left by a process killed while it "
                   f"built the {what}", always=True)
        if announce:
            notice(f"memread: compiling the {what} (C++, once per machine; about 15-30 s) ...")
        start = time.perf_counter()
        # at::parallel_for runs its chunks on torch's threads only when compiled with OpenMP, and only
        # torch's OpenMP backend is driven by -fopenmp (the native backend, a thread pool, needs no flag)
        openmp = ["-fopenmp"] if "parallel backend: OpenMP" in torch.__config__.parallel_info() else []
        cpp_extension.load(
            name=library,
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
        seconds = time.perf_counter() - start
        if announce:
            notice(f"memread: ... done in {seconds:.1f} s")
        elif seconds > 3.0:  # a rebuild that the file times did not predict (changed flags, another build's lock)
            notice(f"memread: compiled the {what} in {seconds:.1f} s (C++, once per machine)")
        return getattr(torch.ops, namespace)
    except Exception as e:  # a failed build must not stop training: the Python path computes the same
        notice(f"memread: the {what} could not be compiled ({_reason(e)}); using their Python path "
               f"instead (same values, slower)", always=True)
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

    def for_backend(self, like: torch.Tensor, backend: str, who: str):
        """The ops the time loop runs on for computing on ``like`` under ``backend``: with ``"auto"`` those
        of :meth:`for_tensor` (None where they cannot run: the Python loop is used), with ``"compiled"``
        the ops or a :class:`MemreadError` saying why they cannot run, otherwise None. ``who`` names the
        reader in the error."""
        if backend == "auto":
            return self.for_tensor(like)
        if backend != "compiled":
            return None
        if like.device.type != "cpu" or like.dtype not in (torch.float32, torch.float64):
            raise MemreadError(f"{who}: backend = 'compiled' runs on CPU tensors in float32 or float64, got "
                               f"{like.device.type} {str(like.dtype).removeprefix('torch.')}; use backend = 'auto' "
                               f"(the compiled loop where it can run, else 'function')")
        ops = self()
        if ops is None:
            why = f"{DISABLE_ENV} is set" if disabled() else "they could not be built (the line above says why)"
            raise MemreadError(f"{who}: backend = 'compiled' needs the {self.what}, but {why}; use "
                               f"backend = 'auto' or 'function'")
        return ops


def check_backend(backend: object, offered: tuple[str, ...], who: str) -> str:
    """``backend`` if it is one of the ``offered`` names (:data:`BACKENDS`), else a :class:`MemreadError`."""
    if backend not in offered:
        raise MemreadError(f"{who}: backend must be one of {', '.join(repr(b) for b in offered)}, got {backend!r}")
    return backend  # type: ignore[return-value]
