"""The compiled loops announce a real build on stderr (one line before, one after), say nothing when
torch's cache has them, and say in one line why the Python path is used when they cannot be built."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest
import torch
from torch.utils import cpp_extension

from memread import _compiled
from memread._compiled import CompiledOps, needs_build
from memread.readers import _lstmn_kernels as lstmn_kernels
from conftest import subprocess_env

TORCH_BUILD_ERROR = (
    "Error building extension 'memread_fake_avx2': [1/2] c++ -MMD -MF fake.o.d -O3 -c fake.cpp -o fake.o\n"
    "FAILED: fake.o\nc++ -MMD -MF fake.o.d -O3 -c fake.cpp -o fake.o\n"
    "fake.cpp:2:18: error: 'undefined_thing' was not declared in this scope\n"
    "ninja: build stopped: subcommand failed.\n"
)


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """No notices said yet, extensions enabled and not quiet, a fake source and an empty build folder."""
    monkeypatch.setattr(_compiled, "_said", set())
    monkeypatch.delenv(_compiled.DISABLE_ENV, raising=False)
    monkeypatch.delenv(_compiled.QUIET_ENV, raising=False)
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    source = tmp_path / "fake.cpp"
    source.write_text("// not compiled by these tests\n")
    return source


def memread_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("memread:")]


def test_a_failed_build_says_why_once_and_uses_the_python_path(fresh, monkeypatch, capsys):
    monkeypatch.setattr(shutil, "which", lambda cmd, *a, **k: "/usr/bin/" + cmd)
    monkeypatch.setattr(cpp_extension, "is_ninja_available", lambda: True)
    calls = []

    def failing_load(**kwargs):
        calls.append(kwargs["name"])
        raise RuntimeError(TORCH_BUILD_ERROR)

    monkeypatch.setattr(cpp_extension, "load", failing_load)
    ops = CompiledOps("memread_fake", fresh, "memread_fake", "fake kernels")
    assert ops() is None and ops() is None and len(calls) == 1  # tried once
    lines = memread_lines(capsys.readouterr().err)
    failed = [line for line in lines if "could not be compiled" in line]
    assert len(failed) == 1, lines
    assert "fake kernels" in failed[0] and "Python path" in failed[0]
    assert "Error building extension 'memread_fake_avx2'" in failed[0]
    assert "'undefined_thing' was not declared" in failed[0]  # the compiler's error, not its command line
    assert "-MMD" not in failed[0]
    # the build was announced (nothing was in the empty build folder), and no completion was claimed
    assert sum("compiling the fake kernels" in line for line in lines) == 1
    assert not any("done in" in line for line in lines)


def test_a_failed_build_is_reported_even_when_quiet(fresh, monkeypatch, capsys):
    monkeypatch.setenv(_compiled.QUIET_ENV, "1")
    monkeypatch.setattr(shutil, "which", lambda cmd, *a, **k: "/usr/bin/" + cmd)
    monkeypatch.setattr(cpp_extension, "is_ninja_available", lambda: True)

    def failing_load(**kwargs):
        raise RuntimeError(TORCH_BUILD_ERROR)

    monkeypatch.setattr(cpp_extension, "load", failing_load)
    assert CompiledOps("memread_fake", fresh, "memread_fake", "fake kernels")() is None
    lines = memread_lines(capsys.readouterr().err)
    assert len(lines) == 1 and "could not be compiled" in lines[0]


def test_no_ninja_is_said_once_for_all_sources(fresh, monkeypatch, capsys):
    monkeypatch.setattr(cpp_extension, "is_ninja_available", lambda: False)
    monkeypatch.setattr(cpp_extension, "load", lambda **kw: pytest.fail("nothing to build with"))
    assert CompiledOps("memread_a", fresh, "memread_a", "LSTMN kernels")() is None
    assert CompiledOps("memread_b", fresh, "memread_b", "window attention kernels")() is None
    lines = memread_lines(capsys.readouterr().err)
    assert len(lines) == 1, lines
    assert "ninja is not installed" in lines[0] and "Python path" in lines[0] and "pip install ninja" in lines[0]


def test_no_compiler_is_named(fresh, monkeypatch, capsys):
    monkeypatch.setenv("CXX", "no-such-compiler-here")
    assert CompiledOps("memread_a", fresh, "memread_a", "LSTMN kernels")() is None
    lines = memread_lines(capsys.readouterr().err)
    assert len(lines) == 1 and "'no-such-compiler-here'" in lines[0] and "Python path" in lines[0]


def test_quiet_and_disabled_say_nothing(fresh, monkeypatch, capsys):
    monkeypatch.setattr(cpp_extension, "is_ninja_available", lambda: False)
    monkeypatch.setenv(_compiled.QUIET_ENV, "1")
    assert CompiledOps("memread_a", fresh, "memread_a", "LSTMN kernels")() is None
    monkeypatch.delenv(_compiled.QUIET_ENV)
    monkeypatch.setenv(_compiled.DISABLE_ENV, "1")
    assert CompiledOps("memread_b", fresh, "memread_b", "LSTMN kernels")() is None
    assert memread_lines(capsys.readouterr().err) == []


@pytest.mark.parametrize("quiet", [False, True])
def test_a_build_is_announced_before_and_after_but_a_cached_load_is_not(fresh, monkeypatch, capsys, quiet):
    if quiet:
        monkeypatch.setenv(_compiled.QUIET_ENV, "1")
    monkeypatch.setattr(shutil, "which", lambda cmd, *a, **k: "/usr/bin/" + cmd)
    monkeypatch.setattr(cpp_extension, "is_ninja_available", lambda: True)
    capability = torch.backends.cpu.get_cpu_capability().lower()

    def fake_load(name, **kwargs):  # "builds" the shared library where torch would put it
        build_dir = cpp_extension._get_build_directory(name, False)
        open(os.path.join(build_dir, name + ".so"), "wb").close()

    monkeypatch.setattr(cpp_extension, "load", fake_load)
    loaded = []  # a current build is loaded as it is (no cpp_extension.load, so none of torch's build lock)
    monkeypatch.setattr(torch.ops, "load_library", loaded.append)
    assert CompiledOps("memread_fake", fresh, "memread_fake", "fake kernels")() is not None
    lines = memread_lines(capsys.readouterr().err)
    if quiet:
        assert lines == []
        return
    assert lines[0] == "memread: compiling the fake kernels (C++, once per machine; about 15-30 s) ..."
    assert len(lines) == 2 and lines[1].startswith("memread: ... done in ") and lines[1].endswith(" s")
    assert (fresh.parent / "ext" / f"memread_fake_{capability}" / f"memread_fake_{capability}.so").is_file()
    # a second process (here: a second CompiledOps) finds it in the cache: silent, and loads it without building
    assert loaded == []
    monkeypatch.setattr(cpp_extension, "load", lambda *a, **k: pytest.fail("a current build is not rebuilt"))
    assert CompiledOps("memread_fake", fresh, "memread_fake", "fake kernels")() is not None
    assert memread_lines(capsys.readouterr().err) == []
    assert loaded == [str(fresh.parent / "ext" / f"memread_fake_{capability}" / f"memread_fake_{capability}.so")]


def test_a_build_goes_ahead_past_a_stale_lock_and_says_it_removed_it(fresh, monkeypatch, capsys):
    monkeypatch.setattr(shutil, "which", lambda cmd, *a, **k: "/usr/bin/" + cmd)
    monkeypatch.setattr(cpp_extension, "is_ninja_available", lambda: True)
    build_dir = cpp_extension._get_build_directory(f"memread_fake_{torch.backends.cpu.get_cpu_capability().lower()}",
                                                  False)
    lock = os.path.join(build_dir, "lock")
    open(lock, "wb").close()
    old = time.time() - 3600
    os.utime(lock, (old, old))
    seen = []  # what torch's load would meet: it waits for as long as the lock is there
    monkeypatch.setattr(cpp_extension, "load", lambda name, **kw: seen.append(os.path.exists(lock)))
    assert CompiledOps("memread_fake", fresh, "memread_fake", "fake kernels")() is not None
    assert seen == [False]
    assert any("a build lock left by a process killed" in line for line in memread_lines(capsys.readouterr().err))


def test_a_build_lock_left_by_a_killed_process_is_removed_once_old(tmp_path):
    """torch's ``cpp_extension.load`` waits forever on a ``lock`` file in the build folder while it exists: one
    left by a process killed mid-build (a watchdog ended it) is taken away once it is older than any build."""
    from memread._compiled import stale_lock

    assert not stale_lock(tmp_path)  # none there
    lock = tmp_path / "lock"
    lock.write_bytes(b"")
    assert not stale_lock(tmp_path) and lock.exists()  # a build going on now
    old = time.time() - 601
    os.utime(lock, (old, old))
    assert stale_lock(tmp_path) and not lock.exists()


def test_needs_build_compares_the_library_with_its_sources(tmp_path):
    source = tmp_path / "k.cpp"
    source.write_text("//\n")
    assert needs_build(tmp_path, "k", [source])  # no library yet
    library = tmp_path / f"k{cpp_extension.LIB_EXT}"
    library.write_bytes(b"")
    now = time.time()
    os.utime(source, (now - 100, now - 100))
    os.utime(library, (now - 50, now - 50))
    headers_newer = any(p.stat().st_mtime > now - 50 for p in _compiled.INCLUDE.glob("*.h"))
    assert needs_build(tmp_path, "k", [source]) == headers_newer
    os.utime(library, (now + 10, now + 10))
    assert not needs_build(tmp_path, "k", [source])
    os.utime(source, (now + 20, now + 20))  # the source changed since the build
    assert needs_build(tmp_path, "k", [source])


@pytest.mark.slow
def test_a_real_build_is_announced_once_and_a_cached_load_is_silent(tmp_path):
    """Builds the LSTMN kernels into an empty TORCH_EXTENSIONS_DIR (15-30 s), then loads them again."""
    if shutil.which(os.environ.get("CXX", "c++")) is None or not cpp_extension.is_ninja_available():
        pytest.skip("no C++ compiler or no ninja: nothing to build with")
    code = f"from memread.readers._lstmn_kernels import kernels; assert kernels() is not None, {lstmn_kernels.__name__!r}"
    env = subprocess_env(TORCH_EXTENSIONS_DIR=str(tmp_path / "ext"))
    for var in (_compiled.DISABLE_ENV, _compiled.QUIET_ENV):
        env.pop(var, None)

    def run(timeout: float = 600) -> list[str]:
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, done.stderr
        return memread_lines(done.stderr)

    first = run()
    assert len(first) == 2, first
    assert first[0] == "memread: compiling the LSTMN kernels (C++, once per machine; about 15-30 s) ..."
    assert first[1].startswith("memread: ... done in ")
    assert float(first[1].split()[-2]) > 1.0  # it really compiled
    assert run() == []  # from torch's cache: silent
    # a lock left in the build folder by a process killed while torch held it: a current build loads regardless
    # (cpp_extension.load would wait for the lock to go, forever)
    (next((tmp_path / "ext").iterdir()) / "lock").write_bytes(b"")
    assert run(timeout=90) == []
