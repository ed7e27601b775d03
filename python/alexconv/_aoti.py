"""AOTInductor packages: whether this torch can build and load them, and loading one that calls
alexconv::conv1 (``alexconv.load_package``). Building one is alexconv.export's."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import warnings

import torch


@contextlib.contextmanager
def _quiet_torch():
    """Silences torch's warnings that ask nothing of the user of this route: torch 2.13 marks
    torch.jit deprecated (it works, and is the route for torch 1.13: docs/deployment.md), and
    torch.export's pytree warns about its own LeafSpec use (FutureWarning) on every export."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"`torch\.jit\.", category=DeprecationWarning)
        warnings.filterwarnings("ignore", message=r".*LeafSpec", category=FutureWarning)
        yield


def aoti_unsupported() -> str | None:
    """Why this torch cannot build the AOTInductor package, or None when it can.

    Checked by capability: torch.export, aoti_compile_and_package taking the program alone
    (2.5's form also wanted its example inputs), and the package metadata that carries
    allow_tf32 to C++ (aot_inductor.metadata); all three are in torch 2.6 and later."""
    if not hasattr(torch, "export") or not hasattr(torch.export, "Dim"):
        return f"torch {torch.__version__} has no torch.export (AOTInductor packages need torch >= 2.6)"
    try:
        inductor = importlib.import_module("torch._inductor")
        inductor_config = importlib.import_module("torch._inductor.config")
    except ImportError as e:
        return f"torch {torch.__version__} has no usable inductor ({e})"
    compile_and_package = getattr(inductor, "aoti_compile_and_package", None)
    if compile_and_package is None:
        return f"torch {torch.__version__} has no torch._inductor.aoti_compile_and_package (needs torch >= 2.6)"
    params = inspect.signature(compile_and_package).parameters
    if any(p.default is inspect.Parameter.empty and p.kind is p.POSITIONAL_OR_KEYWORD
           for name, p in params.items() if name != "exported_program"):
        return (f"torch {torch.__version__}'s aoti_compile_and_package is the 2.5 form "
                "(example inputs required); alexconv's package needs torch >= 2.6")
    if not hasattr(inductor_config.aot_inductor, "metadata"):
        return f"torch {torch.__version__} has no aot_inductor.metadata (needs torch >= 2.6)"
    return None


def load_package(path: str | os.PathLike, **kwargs):
    """Loads an AOTInductor package that calls alexconv::conv1 (alexconv-export model.pt2, or
    any torch.export of a converted model): the op is registered (this module's package is
    imported), then torch._inductor.aoti_load_package(path, **kwargs). Returns its runner: call
    it with the input tensors. Loading a package without ``import alexconv`` first fails with
    ``Could not find schema for alexconv::conv1``; this cannot."""
    reason = aoti_unsupported()
    if reason is not None:
        raise RuntimeError(f"alexconv.load_package: cannot load an AOTInductor package: {reason}; "
                           "the TorchScript route (alexconv-export model.pt, torch.jit.load) works here")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"alexconv.load_package: no package at {path}")
    with _quiet_torch():
        return importlib.import_module("torch._inductor").aoti_load_package(os.fspath(path), **kwargs)
