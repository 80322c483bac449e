"""The reproduction's tests' fixtures (pytest runs them from the repository root: ``python -m pytest -q -n auto``):
the library's own (tests/conftest.py: real-data tests read ``$MEMREAD_DATA`` and skip, saying what is missing,
when it is not there; every test runs torch on one thread), loaded from that file rather than written again."""

from __future__ import annotations

import importlib.util

from reproduction import REPO


_spec = importlib.util.spec_from_file_location("memread_tests_conftest", REPO / "tests" / "conftest.py")
_library = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_library)
one_thread, real_data = _library.one_thread, _library.real_data  # the fixtures, as pytest finds them here
real_data_root, subprocess_env = _library.real_data_root, _library.subprocess_env
TINY = _library.TINY  # the tiny stories LM a row of the tests trains, as the library's fault tests train it
