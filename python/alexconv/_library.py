"""Locating and loading the compiled operator library."""

from __future__ import annotations

import importlib.resources
import os
import re

import torch

_LIBRARY_NAME = "libalexconv.so"
_REBUILD = ("Rebuild it against the installed torch: `pip install --no-build-isolation .` "
            "(or `-e .`) from the repository root; see README.md.")
_loaded: str | None = None


def library_path() -> str:
    """Path of the ``libalexconv.so`` that ships inside this package."""
    resource = importlib.resources.files(__package__) / _LIBRARY_NAME
    if not resource.is_file():
        raise ImportError(
            f"alexconv: {_LIBRARY_NAME} is missing from the installed package ({resource}). "
            "Build and install it with `pip install --no-build-isolation .` (or `-e .`) "
            "from the repository root, with torch already installed; see README.md."
        )
    return str(resource)


def _release(version: str, parts: int = 3) -> tuple[int, ...]:
    """The leading numbers of a version: "2.13.0+cpu" and "2.13.0" are one torch release."""
    match = re.match(r"\.".join([r"(\d+)"] * parts), version)
    if match is None:
        raise ImportError(f"alexconv: cannot read a version from {version!r}. " + _REBUILD)
    return tuple(int(part) for part in match.groups())


def check_build_matches_torch(built_torch: str, built_with_cuda: bool, built_cuda: str,
                              torch_version: str, torch_cuda: str | None) -> None:
    """Raises ImportError where the library cannot load into this torch: libtorch's C++
    ABI changes between releases, and a CUDA build links the CUDA runtime of its toolkit's
    major version, which torch must ship. Loading anyway fails with an undefined symbol or
    a missing libcudart that names neither cause. An empty recorded version (CMake found
    none) is not checked."""
    if built_torch and _release(built_torch) != _release(torch_version):
        raise ImportError(
            f"alexconv: libalexconv.so was built against torch {built_torch}, but torch "
            f"{torch_version} is installed. " + _REBUILD)
    if built_with_cuda and torch_cuda is None:
        raise ImportError(
            f"alexconv: libalexconv.so was built with CUDA, but the installed torch "
            f"{torch_version} has none. " + _REBUILD)
    if built_cuda and torch_cuda and _release(built_cuda, 1) != _release(torch_cuda, 1):
        raise ImportError(
            f"alexconv: libalexconv.so was built with CUDA {built_cuda}, but the installed "
            f"torch {torch_version} has CUDA {torch_cuda}. " + _REBUILD)


def load_library() -> str:
    """Registers the operator with PyTorch (once per process) and returns the library's path."""
    global _loaded
    if _loaded is None:
        path = library_path()
        try:
            from . import _build_info as build
        except ImportError as e:
            raise ImportError(f"alexconv: _build_info.py is missing next to {path}. "
                              + _REBUILD) from e
        check_build_matches_torch(build.TORCH_VERSION, build.WITH_CUDA, build.CUDA_VERSION,
                                  torch.__version__, torch.version.cuda)
        torch.ops.load_library(path)
        _loaded = path
    return _loaded


def cmake_prefix_path() -> str:
    """Folder to put on ``CMAKE_PREFIX_PATH`` for ``find_package(alexconv)`` in a C++ project.

    It holds the package's CMake files; they give the target ``alexconv::alexconv``
    (this ``libalexconv.so`` and ``alexconv/conv1.h``). Like torch.utils.cmake_prefix_path.
    """
    folder = os.path.dirname(library_path())
    config = os.path.join(folder, "share", "cmake", "alexconv", "alexconvConfig.cmake")
    if not os.path.isfile(config):
        raise FileNotFoundError(f"alexconv: {config} is missing; reinstall the package (see README.md)")
    return folder
