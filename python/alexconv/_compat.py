"""What the installed torch can do, decided in one place (issue 45: torch 1.13 up to 2.13).

Each capability is probed on torch itself, not read from its version string, so a backport or
a build without a feature is judged by what it has. The operator works on every supported
torch (its Meta kernel, which torch.compile and torch.export trace through, is C++ and needs
no Python registration); these decide which of torch's own tools can be used with it:

- ``compile``: ``torch.compile`` (torch 2.0+).
- ``export``: ``torch.export.export`` with ``torch.export.Dim`` dynamic shapes (2.2+).
- ``opcheck``: ``torch.library.opcheck``, torch's custom-op conformance test (2.4+).
- ``jagged_layout``: ``torch.jagged`` nested tensors (2.1+).
- ``fill_uninitialized_memory``: ``torch.utils.deterministic.fill_uninitialized_memory``, which
  makes new allocations NaN (2.1+); the tests use it to catch outputs a kernel leaves unwritten.
- ``cpu_capability``: ``torch.backends.cpu.get_cpu_capability()`` (2.1+).
- ``cpu_autocast_float16``: ``torch.autocast("cpu", dtype=torch.float16)``; 1.13 autocasts CPU
  code to bfloat16 only.
- ``cpu_float16_conv2d``: ATen's own float16 convolution on CPU (``F.conv2d``), which tests use
  as a judge of layouts; 1.13 has none (alexconv's CPU kernel takes float16 on every torch).
- ``empty_batch_conv2d``: ``F.conv2d`` on an empty batch with a channels_last weight; 1.13
  raises "view size is not compatible" there (alexconv.conv1 does not).

torch 1.13.1 has none of them.
"""

from __future__ import annotations

import functools
import importlib
import warnings

import torch
import torch.nn.functional as F


def _has_attr(module: str, *names: str) -> bool:
    try:
        obj = importlib.import_module(module)
    except ImportError:
        return False
    return all(hasattr(obj, name) for name in names)


def _cpu_autocast_float16() -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # 1.13 warns, then raises on entering
            with torch.autocast("cpu", dtype=torch.float16):
                return True
    except RuntimeError:
        return False


def _cpu_float16_conv2d() -> bool:
    one = torch.ones(1, 1, 1, 1, dtype=torch.float16)
    try:
        F.conv2d(one, one)
    except RuntimeError:  # "slow_conv2d_cpu" not implemented for 'Half'
        return False
    return True


def _cpu_float16_relu() -> bool:
    try:
        torch.relu(torch.ones(1, dtype=torch.float16))
        return True
    except RuntimeError:  # torch 1.13: "clamp_min_cpu" not implemented for 'Half'
        return False


def _empty_batch_conv2d() -> bool:
    weight = torch.zeros(2, 2, 3, 3).contiguous(memory_format=torch.channels_last)
    try:
        F.conv2d(torch.zeros(0, 2, 3, 3), weight)
    except RuntimeError:
        return False
    return True


# Probed on first use: importing torch.export costs seconds, which `import alexconv` must not.
_PROBES = {
    "compile": lambda: hasattr(torch, "compile"),
    "export": lambda: _has_attr("torch.export", "export", "Dim"),
    "opcheck": lambda: _has_attr("torch.library", "opcheck"),
    "jagged_layout": lambda: hasattr(torch, "jagged"),
    "fill_uninitialized_memory": lambda: _has_attr("torch.utils.deterministic", "fill_uninitialized_memory"),
    "cpu_capability": lambda: _has_attr("torch.backends.cpu", "get_cpu_capability"),
    "cpu_autocast_float16": _cpu_autocast_float16,
    "cpu_float16_conv2d": _cpu_float16_conv2d,
    "cpu_float16_relu": _cpu_float16_relu,
    "empty_batch_conv2d": _empty_batch_conv2d,
}

# What each capability is, as a reason names it.
_WHAT = {
    "compile": "torch.compile",
    "export": "torch.export (export, Dim)",
    "opcheck": "torch.library.opcheck",
    "jagged_layout": "torch.jagged (nested tensor layout)",
    "fill_uninitialized_memory": "torch.utils.deterministic.fill_uninitialized_memory",
    "cpu_capability": "torch.backends.cpu.get_cpu_capability",
    "cpu_autocast_float16": "float16 autocast on CPU",
    "cpu_float16_conv2d": "float16 F.conv2d on CPU",
    "cpu_float16_relu": "float16 torch.relu on CPU",
    "empty_batch_conv2d": "F.conv2d on an empty batch with a channels_last weight",
}


def has(capability: str) -> bool:
    """Whether the installed torch has ``capability`` (one of ``CAPABILITIES``)."""
    if capability not in _PROBES:
        raise KeyError(f"alexconv._compat: unknown capability {capability!r}; "
                       f"known: {', '.join(CAPABILITIES)}")
    return _probe(capability)


@functools.lru_cache(maxsize=None)
def _probe(capability: str) -> bool:
    return bool(_PROBES[capability]())


CAPABILITIES = tuple(_PROBES)


def missing_reason(capability: str) -> str:
    """Why something needing ``capability`` cannot run here, naming it and this torch."""
    has(capability)  # validates the name
    return f"torch {torch.__version__} has no {_WHAT[capability]}"


def missing() -> list[str]:
    """The capabilities this torch lacks."""
    return [name for name in CAPABILITIES if not has(name)]
