"""User-facing errors.

Anything a user can cause (a malformed file, a wrong config key, a missing dataset, a checkpoint that
does not fit) raises :class:`MemreadError` with one line that names the file, line or key. The CLI
prints that line and exits with status 2, without a traceback.
"""


class MemreadError(Exception):
    """An error caused by input, reported to the user as one clear line."""
