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
