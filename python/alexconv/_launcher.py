"""``alexconv_demo`` and ``alexconv_aoti_demo`` on PATH: console scripts (pyproject.toml) that run
the C++ binaries the build installs in ``alexconv/bin``, with the same arguments.

Going through ``import alexconv`` first costs a second but checks that the library matches the
installed torch, with a message that names both, where the binary would die of an undefined
symbol."""

from __future__ import annotations

import os
import pathlib
import sys

import torch

from ._library import library_path


def binary(name: str) -> pathlib.Path:
    """The path of an installed C++ binary; SystemExit with the reason where it is missing."""
    path = pathlib.Path(library_path()).parent / "bin" / name
    if not path.is_file():
        why = ""
        if name == "alexconv_aoti_demo":
            why = (f": the build makes it where torch has the AOTInductor package loader (torch "
                   f">= 2.6), and torch {torch.__version__} is installed; alexconv_demo runs "
                   "TorchScript models on every torch")
        raise SystemExit(f"error: {path} is not installed{why}")
    return path


def _run(name: str) -> None:
    path = binary(name)
    sys.stdout.flush()
    os.execv(path, [name, *sys.argv[1:]])


def demo() -> None:
    _run("alexconv_demo")


def aoti_demo() -> None:
    _run("alexconv_aoti_demo")
