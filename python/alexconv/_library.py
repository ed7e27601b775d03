"""Locating and loading the compiled operator library."""

from __future__ import annotations

import importlib.resources
import os

import torch

_LIBRARY_NAME = "libalexconv.so"
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


def load_library() -> str:
    """Registers the operator with PyTorch (once per process) and returns the library's path."""
    global _loaded
    if _loaded is None:
        path = library_path()
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
