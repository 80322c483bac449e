"""User-facing errors.

Anything a user can cause (a malformed file, a wrong config key, a missing dataset, a checkpoint that
does not fit) raises :class:`MemreadError` with one line that names the file, line or key. The CLI
prints that line and exits with status 2, without a traceback.
"""


class MemreadError(Exception):
    """An error caused by input, reported to the user as one clear line."""


def os_error_line(e: OSError, path: object = None) -> str:
    """One line for an operating-system error on a file: the file, what went wrong, and the way out."""
    import errno

    where = path if path is not None else (e.filename or "")
    what = e.strerror or str(e) or type(e).__name__
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        hint = "make it writable (and its folder), or choose another --run-dir / --data-root"
    elif e.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        hint = "free some space on that disk"
    elif e.errno == errno.ENOENT:
        hint = "check the path"
    else:
        hint = ""
    return f"{where}: {what}" + (f"; {hint}" if hint else "")


# what torch and the C++ runtime say when memory runs out: the CPU allocator, CUDA's and MPS's, std::bad_alloc
_ALLOCATION = ("can't allocate memory", "out of memory", "bad_alloc", "not enough memory", "cannot allocate memory")


def allocation_failure(e: BaseException) -> str | None:
    """The first line of an error that says memory ran out (``MemoryError``, torch's ``OutOfMemoryError``, the CPU
    allocator's RuntimeError, ``std::bad_alloc``); None for any other error."""
    text = str(e).strip()
    if not isinstance(e, (MemoryError, RuntimeError)):
        return None
    if not isinstance(e, MemoryError) and not any(s in text.lower() for s in _ALLOCATION):
        return None
    line = next((ln.strip() for ln in text.splitlines() if any(s in ln.lower() for s in _ALLOCATION)), "")
    line = line.split("DefaultCPUAllocator: ", 1)[-1]  # less the C++: "[enforce fail at alloc_cpu.cpp:127] ..."
    return (line or type(e).__name__)[:200]


def human_bytes(n: float) -> str:
    """``n`` bytes in binary units: 512 B, 3.2 GiB, 1.4e+04 PiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB" if abs(n) < 1024 ** 2 else f"{n:.2g} PiB"
