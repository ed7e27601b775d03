"""Guards for code that AOTInductor compiles and links into a package.

A shared object that carries its own copy of libstdc++ (linked with a compiler whose
``g++`` links it statically, as the GCC under /opt/gcc on our GPU machines does) crashes
when loaded into a torch process, which already uses the shared ``libstdc++.so.6``:
the package's std::regex (``torch::aot_inductor::parse_device_str``, run while loading)
reaches a locale facet of the other copy and segfaults. Seen with torch 2.11 on plain
``nn.Conv2d`` packages, CPU and CUDA alike, and gone with a ``g++`` that links
``libstdc++.so.6``; docs/deployment.md has the reproduction. These helpers find such a
compiler or object before anything loads it.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import struct
import subprocess
import tempfile

_SHT_DYNAMIC, _DT_NULL, _DT_NEEDED = 6, 0, 1


def needed_libraries(path: str | os.PathLike) -> list[str]:
    """The DT_NEEDED entries of a 64-bit little-endian ELF shared object (x86-64, aarch64)."""
    data = pathlib.Path(path).read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError(f"{path} is not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    needed = []
    for _, sh_type, _, _, offset, size, link, _, _, entsize in sections:
        if sh_type != _SHT_DYNAMIC:
            continue
        strtab = sections[link][4]  # the .dynstr section the dynamic section links to
        for at in range(offset, offset + size, entsize or 16):
            tag, value = struct.unpack_from("<qQ", data, at)
            if tag == _DT_NULL:
                break
            if tag == _DT_NEEDED:
                end = data.index(b"\0", strtab + value)
                needed.append(data[strtab + value:end].decode())
    return needed


def links_shared_libstdcxx(path: str | os.PathLike) -> bool:
    return any(name.startswith("libstdc++.so") for name in needed_libraries(path))


def static_libstdcxx_error(compiler: str, what: str) -> str:
    found = find_compiler_linking_shared_libstdcxx(exclude=compiler)
    hint = f"CXX={found}, found here" if found else "e.g. CXX=/usr/bin/g++"
    return (f"{what} was linked by {compiler} without the shared libstdc++ (libstdc++.so.6): "
            "that compiler links its own copy of libstdc++ in, and loading such a package into "
            "torch, which uses the shared one, crashes (segfault in std::regex while the package "
            f"loads). Point CXX at a g++ that links libstdc++.so.6 ({hint}) and "
            "export again; docs/deployment.md has the details.")


# Where a system compiler usually is, after whatever CXX and PATH name first.
_CANDIDATES = ("g++", "c++", "/usr/bin/g++", "/usr/bin/c++", "clang++", "/usr/bin/clang++",
               *(f"/usr/bin/g++-{v}" for v in range(15, 8, -1)))


def find_compiler_linking_shared_libstdcxx(exclude: str | None = None) -> str | None:
    """The first C++ compiler here (CXX, then the usual names) whose shared objects use
    libstdc++.so.6, as a resolved path; None when there is none."""
    skip = {os.path.realpath(shutil.which(exclude) or exclude)} if exclude else set()
    for name in (os.environ.get("CXX"), *_CANDIDATES):
        path = name and shutil.which(name)
        if not path or os.path.realpath(path) in skip:
            continue
        skip.add(os.path.realpath(path))
        try:
            check_compiler_links_shared_libstdcxx(path)
        except (RuntimeError, OSError):
            continue
        return path
    return None


def check_compiler_links_shared_libstdcxx(compiler: str) -> None:
    """Raises RuntimeError when `compiler` would link C++ code with a private libstdc++.

    Builds a one-line C++ shared object the way a package's is built (g++ -shared -fPIC)
    and reads what it needs: a second or so, against the minutes of a package compile."""
    with tempfile.TemporaryDirectory() as tmp:
        source, library = pathlib.Path(tmp, "probe.cpp"), pathlib.Path(tmp, "probe.so")
        # std::string forces real libstdc++ code into the object.
        source.write_text("#include <string>\nstd::string alexconv_probe(int n) { return std::to_string(n); }\n")
        res = subprocess.run([compiler, "-shared", "-fPIC", str(source), "-o", str(library)],
                             capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(f"the C++ compiler {compiler} could not build a shared library:\n"
                               f"{res.stderr.strip()}")
        if not links_shared_libstdcxx(library):
            raise RuntimeError(static_libstdcxx_error(compiler, "a probe library"))
