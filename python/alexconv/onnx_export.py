"""ONNX export: ``torch.onnx.export`` writes ``alexconv::conv1`` as ONNX's standard ``Conv``
(kernel 11, strides 4, pads = padding, group 1), then ``Relu`` where ``relu=True``: the file
needs neither alexconv nor a custom domain to run (docs/deployment.md).

Both exporters are taught by :func:`register` (called by ``import alexconv``):

- TorchScript-based (``dynamo=False``, torch 1.13 on): ``torch.onnx.register_custom_op_symbolic``.
- dynamo-based (``dynamo=True``, torch 2.5 on, needs onnxscript): torch has no public registry
  that every export reads; it rebuilds its default one on each export from onnxscript's torchlib
  registry, which is where the translation goes. :func:`onnx_translation_table` is the public
  route (``custom_translation_table=``) should a torch or onnxscript stop reading it.

Each is added once its exporter's module is first imported, not at ``import alexconv``:
importing onnxscript takes about 2 s, which every import of alexconv would otherwise pay.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import warnings

import torch

_KERNEL, _STRIDES, _DILATIONS = [11, 11], [4, 4], [1, 1]
# ONNX's TensorProto data types. ONNX's Conv takes bfloat16 only from opset 22 (torch 2.13 writes
# 20 by default) and ONNX Runtime 1.32's CPU provider has no bfloat16 Conv even there, so bfloat16
# convolves in float32 between Casts: bfloat16 products are exact in float32 and the sum rounds
# to bfloat16 once, as in the op itself.
_FLOAT, _BFLOAT16 = 1, 16


def _conv1_onnx(input, weight, bias=None, allow_tf32: bool = False, padding: int = 2,
                relu: bool = False):
    """The dynamo-based exporter's translation (traced by onnxscript). allow_tf32 only permits
    a less exact float32 product, so a full-precision Conv keeps the op's contract."""
    from onnxscript import opset18 as op

    pads = [padding] * 4  # an int: torch.export specializes the op's int arguments
    bf16 = _BFLOAT16 in (input.dtype, weight.dtype)  # onnx_ir's DataType is an IntEnum
    tensors = [input, weight] + ([] if bias is None else [bias])
    if bf16:
        tensors = [op.Cast(t, to=_FLOAT) for t in tensors]
    out = op.Conv(*tensors, kernel_shape=_KERNEL, strides=_STRIDES, pads=pads,
                  dilations=_DILATIONS, group=1)
    if relu:
        out = op.Relu(out)
    return op.Cast(out, to=_BFLOAT16) if bf16 else out


def _torchscript_symbolic(g, input, weight, bias, allow_tf32: bool, padding: int, relu: bool):
    """The TorchScript-based exporter's translation (constants parsed by _register_torchscript's
    parse_args): the same nodes as _conv1_onnx."""
    pads = [padding] * 4
    bf16 = "BFloat16" in (input.type().scalarType(), weight.type().scalarType())
    tensors = [input, weight] + ([] if bias.node().mustBeNone() else [bias])
    if bf16:
        tensors = [g.op("Cast", t, to_i=_FLOAT) for t in tensors]
    out = g.op("Conv", *tensors, kernel_shape_i=_KERNEL, strides_i=_STRIDES, pads_i=pads,
               dilations_i=_DILATIONS, group_i=1)
    if relu:
        out = g.op("Relu", out)
    return g.op("Cast", out, to_i=_BFLOAT16) if bf16 else out


def onnx_translation_table() -> dict:
    """``{torch.ops.alexconv.conv1.default: translation}``, for
    ``torch.onnx.export(..., dynamo=True, custom_translation_table=alexconv.onnx_translation_table())``.
    Not needed while torch builds its registry from onnxscript's (tested: torch 2.13, onnxscript
    0.7), where ``import alexconv`` adds it; torch's documented way to pass it in anywhere."""
    return {torch.ops.alexconv.conv1.default: _conv1_onnx}


def _register_torchscript() -> None:
    # From sys.modules: this runs while torch.onnx is still being bound as torch's attribute.
    from torch.onnx import register_custom_op_symbolic, symbolic_helper

    # parse_args: the non-tensor arguments as Python constants ("i" refuses one computed in the
    # graph). Opset 7, the exporter's oldest: the symbolic then serves every opset it writes.
    symbolic = symbolic_helper.parse_args("v", "v", "v", "b", "i", "b")(_torchscript_symbolic)
    register_custom_op_symbolic("alexconv::conv1", symbolic, 7)


def _register_dynamo() -> None:
    from onnxscript.function_libs.torch_lib import registration

    registration.torch_op("alexconv::conv1", trace_only=True)(_conv1_onnx)


def _register_or_warn(register, exporter: str, fallback: str = "") -> None:
    # Runs inside the user's import of torch.onnx or onnxscript: a torch or onnxscript that has
    # moved these APIs must not break that import, only this exporter's translation of the op.
    try:
        register()
    except Exception as e:
        warnings.warn(f"alexconv: could not register alexconv::conv1's ONNX translation with the "
                      f"{exporter} exporter ({e!r}){fallback}")


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``then()`` right after module ``name`` first finishes importing, then leaves
    sys.meta_path. Its find_spec may be asked without an import following (importlib.util.find_spec),
    so it stays until the module's code has run."""

    def __init__(self, name: str, then):
        self.name, self.then = name, then

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        finders = [f for f in sys.meta_path if f is not self and hasattr(f, "find_spec")]
        spec = next(filter(None, (f.find_spec(fullname, path, target) for f in finders)), None)
        if spec is not None and hasattr(spec.loader, "exec_module"):
            exec_module = spec.loader.exec_module

            def exec_then(module):
                exec_module(module)
                if module.__name__ == self.name and self in sys.meta_path:
                    sys.meta_path.remove(self)
                    self.then()

            spec.loader.exec_module = exec_then  # this spec's own loader object
        return spec


def _after_import(name: str, then) -> None:
    if sys.modules.get(name) is not None:  # (None there blocks the import)
        then()
    else:
        sys.meta_path.insert(0, _AfterImport(name, then))


def register() -> None:
    """Teaches both exporters alexconv::conv1, each as soon as its module is imported."""
    _after_import("torch.onnx", lambda: _register_or_warn(_register_torchscript, "TorchScript-based"))
    _after_import("onnxscript", lambda: _register_or_warn(
        _register_dynamo, "dynamo-based",
        "; pass custom_translation_table=alexconv.onnx_translation_table() to torch.onnx.export"))
