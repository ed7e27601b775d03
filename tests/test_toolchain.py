"""alexconv._toolchain: AOTInductor packages must not carry their own libstdc++.

A package linked with a private libstdc++ segfaults while it loads (docs/deployment.md), so the
export refuses the compiler that would build one, and any package that has one.
"""

import importlib
import os
import pathlib
import subprocess
import sys

import pytest

import alexconv
from alexconv import _toolchain

REPO = pathlib.Path(__file__).resolve().parents[1]
# A compiler whose shared objects use libstdc++.so.6: on the GPU machines the g++ on PATH
# (/opt/gcc) is not one, and the finder must pass it over.
CXX = _toolchain.find_compiler_linking_shared_libstdcxx()
needs_gxx = pytest.mark.skipif(CXX is None, reason="no C++ compiler here links libstdc++.so.6")


def _library(tmp_path, *flags):
    source = tmp_path / "lib.cpp"
    source.write_text("#include <string>\nstd::string f(int n) { return std::to_string(n); }\n")
    out = tmp_path / f"lib{len(flags)}.so"
    subprocess.run([CXX, "-shared", "-fPIC", *flags, str(source), "-o", str(out)], check=True)
    return out


def _static_compiler(tmp_path):
    """A "compiler" that links libstdc++ statically, as /opt/gcc's g++ does on the GPU machines."""
    wrapper = tmp_path / "g++-static"
    wrapper.write_text(f'#!/bin/sh\nexec {CXX} -static-libstdc++ "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def test_needed_libraries_of_our_library():
    needed = _toolchain.needed_libraries(alexconv.library_path())
    assert "libstdc++.so.6" in needed  # CMakeLists.txt links it by name
    assert any(name.startswith("libc10") for name in needed), needed


@needs_gxx
def test_static_and_shared_libstdcxx_told_apart(tmp_path):
    assert _toolchain.links_shared_libstdcxx(_library(tmp_path))
    static = _library(tmp_path, "-static-libstdc++")
    assert "libstdc++.so.6" not in _toolchain.needed_libraries(static)
    assert not _toolchain.links_shared_libstdcxx(static)


def test_not_an_elf_file(tmp_path):
    path = tmp_path / "x.so"
    path.write_bytes(b"#!/bin/sh\n")
    with pytest.raises(ValueError, match="not a 64-bit little-endian ELF"):
        _toolchain.needed_libraries(path)


@needs_gxx
def test_compiler_check(tmp_path):
    _toolchain.check_compiler_links_shared_libstdcxx(CXX)
    with pytest.raises(RuntimeError, match=r"without the shared libstdc\+\+.*CXX=") as refused:
        _toolchain.check_compiler_links_shared_libstdcxx(str(_static_compiler(tmp_path)))
    assert "found here" in str(refused.value)  # names the compiler that would do


@needs_gxx
def test_finder_passes_over_a_static_libstdcxx_compiler(tmp_path, monkeypatch):
    monkeypatch.setenv("CXX", str(_static_compiler(tmp_path)))
    found = _toolchain.find_compiler_linking_shared_libstdcxx()
    assert found is not None and found != os.environ["CXX"]
    _toolchain.check_compiler_links_shared_libstdcxx(found)
    assert _toolchain.find_compiler_linking_shared_libstdcxx(exclude=found) != found
    with pytest.raises(RuntimeError, match="could not build a shared library"):
        _toolchain.check_compiler_links_shared_libstdcxx("/bin/false")


@needs_gxx
def test_export_takes_another_compiler_and_says_which(tmp_path, monkeypatch):
    """Where inductor's compiler links libstdc++ statically, the export compiles with one that
    does not (the package it builds so is tests/test_aoti.py's float32 one)."""
    pytest.importorskip("torch._inductor.cpp_builder")
    from alexconv import export
    static = str(_static_compiler(tmp_path))
    notes = []
    with importlib.import_module("torch._inductor.config").patch({"cpp.cxx": (None, static)}):
        chosen = export.choose_compiler(notes.append)
    assert chosen != static
    _toolchain.check_compiler_links_shared_libstdcxx(chosen)
    assert notes == [f"note: inductor's compiler {static} links libstdc++ statically: its packages "
                     f"crash when they load; compiling with {chosen} instead (set CXX to choose another)"]
    with importlib.import_module("torch._inductor.config").patch({"cpp.cxx": (None, chosen)}):
        assert export.choose_compiler(notes.append) == chosen and len(notes) == 1  # nothing to say


# alexconv-export where the only compiler links libstdc++ statically: no other to take.
_ONLY_STATIC = """
import sys
from alexconv import _toolchain, export
_toolchain._CANDIDATES = ()
export.main(sys.argv[1:])
"""


@needs_gxx
def test_export_refuses_when_no_compiler_links_shared_libstdcxx(tmp_path):
    """Before compiling anything: the export stops at once, says why, and writes no package."""
    pytest.importorskip("torch._inductor.cpp_builder")
    package = tmp_path / "m.pt2"
    env = dict(os.environ, CXX=str(_static_compiler(tmp_path)))
    res = subprocess.run([sys.executable, "-c", _ONLY_STATIC, str(package)],
                         capture_output=True, text=True, timeout=300, env=env)
    if "cannot build an AOTInductor package" in res.stderr:
        pytest.skip(res.stderr.strip())
    assert res.returncode == 1, res.stdout + res.stderr
    assert res.stderr.startswith("error: a probe library was linked by"), res.stderr
    assert "without the shared libstdc++" in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert not package.exists()
