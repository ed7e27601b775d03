"""ONNX export (issue 67): both torch.onnx exporters write alexconv::conv1 as standard Conv (+ Relu),
and ONNX Runtime's CPU provider runs the file to PyTorch's output.

onnx, onnxruntime and onnxscript are test extras (pyproject.toml): CI installs them, so there a
missing one fails the run; elsewhere the module, or the dynamo exporter's tests, skip.
"""

import importlib.util
import inspect
import io
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn as nn

import alexconv
from alexnets import TorchvisionAlexNet

CI = os.environ.get("CI") == "true"


def _missing(name):
    if importlib.util.find_spec(name) is not None:
        return None
    if CI:
        raise ImportError(f"{name} is not installed, but CI installs the test extra: pip install -e '.[test]'")
    return f"{name} is not installed (a test extra: pip install -e '.[test]')"


for _name in ("onnx", "onnxruntime"):
    if _missing(_name):
        pytest.skip(_missing(_name), allow_module_level=True)

import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as OrtNotImplemented  # noqa: E402

_EXPORT_ARGS = inspect.signature(torch.onnx.export).parameters
# torch 1.13 has the TorchScript-based exporter only (and no `dynamo` argument); 2.5 added the
# dynamo-based one, which needs onnxscript (imported by torch when it exports, not here: 2 s).
DYNAMO_UNSUPPORTED = (f"torch {torch.__version__} has no dynamo-based ONNX exporter"
                      if "dynamo" not in _EXPORT_ARGS else _missing("onnxscript"))
EXPORTERS = [
    pytest.param("torchscript"),
    pytest.param("dynamo", marks=pytest.mark.skipif(DYNAMO_UNSUPPORTED is not None,
                                                    reason=str(DYNAMO_UNSUPPORTED))),
]
# torch 2.13 deprecates the TorchScript-based exporter (it works); its torch.export warns about
# its own pytree use.
pytestmark = pytest.mark.filterwarnings(
    "ignore:You are using the legacy TorchScript-based ONNX export:DeprecationWarning",
    "ignore:The feature will be removed:DeprecationWarning",
    "ignore:`isinstance.treespec, LeafSpec.` is deprecated:FutureWarning")


def export(model, x, exporter, dynamic=False) -> onnx.ModelProto:
    """model(x) exported by `exporter`; with `dynamic`, batch, height and width stay free."""
    model.eval()
    if exporter == "dynamo":
        shapes = None
        if dynamic:
            dim = torch.export.Dim
            shapes = ({0: dim("batch"), 2: dim("height", min=11), 3: dim("width", min=11)},)
        return torch.onnx.export(model, (x,), dynamo=True, verbose=False, dynamic_shapes=shapes).model_proto
    f = io.BytesIO()
    kwargs = {"dynamo": False} if "dynamo" in _EXPORT_ARGS else {}
    if dynamic:
        kwargs["dynamic_axes"] = {"x": {0: "batch", 2: "height", 3: "width"}}
    torch.onnx.export(model, (x,), f, input_names=["x"], **kwargs)
    return onnx.load_from_string(f.getvalue())


def run_onnxruntime(proto, x):
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (name,) = [i.name for i in session.get_inputs()]
    return torch.from_numpy(session.run(None, {name: x.numpy()})[0])


def assert_standard_conv(proto, padding=2, relu=False):
    """Only standard ONNX nodes; the first Conv is the op's (strides 4, pads = padding), and a Relu
    takes its output exactly where relu is set."""
    onnx.checker.check_model(proto)
    nodes = list(proto.graph.node)
    assert all(n.domain in ("", "ai.onnx") for n in nodes), [(n.domain, n.op_type) for n in nodes]
    assert not any("alexconv" in o.domain for o in proto.opset_import)
    assert not proto.functions, [f.name for f in proto.functions]
    conv = next(n for n in nodes if n.op_type == "Conv")
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in conv.attribute}
    assert attrs["strides"] == [4, 4] and attrs["pads"] == [padding] * 4, attrs
    assert attrs.get("kernel_shape", [11, 11]) == [11, 11] and attrs.get("group", 1) == 1, attrs
    assert any(n.op_type == "Relu" and conv.output[0] in n.input for n in nodes) == relu


def random_input(batch, min_size=11):
    h, w = torch.randint(min_size, 80, (2,)).tolist()
    return torch.randn(batch, 3, h, w)


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_model_new_with_free_batch_and_size(exporter):
    model = alexconv.ModelNew().eval()
    proto = export(model, random_input(2), exporter, dynamic=True)
    assert_standard_conv(proto)
    x = random_input(int(torch.randint(1, 4, ())))  # another shape than the exported one
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(run_onnxruntime(proto, x), expected, rtol=1e-4, atol=1e-4)


# Every padding and bias/relu combination, and channel counts from 1 to 256, in few exports.
# allow_tf32 only permits a less exact float32 product: it exports as the same full-precision Conv.
@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("padding, out_channels, bias, relu, allow_tf32", [
    (0, 1, False, True, False), (1, 7, True, False, True), (3, 64, True, True, True),
    (4, 96, False, True, False), (5, 256, False, False, False)])
def test_alexconv2d_arguments(exporter, padding, out_channels, bias, relu, allow_tf32):
    model = alexconv.AlexConv2d(3, out_channels, padding=padding, bias=bias, relu=relu,
                                allow_tf32=allow_tf32).eval()
    x = random_input(2, min_size=11 - 2 * padding)
    proto = export(model, x, exporter)
    assert_standard_conv(proto, padding, relu)
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(run_onnxruntime(proto, x), expected, rtol=1e-4, atol=1e-4)


class InDtype(nn.Module):
    """`layer` in `dtype`, between float32 input and output (numpy has no bfloat16 to feed)."""

    def __init__(self, layer, dtype):
        super().__init__()
        self.layer, self.dtype = layer.to(dtype), dtype

    def forward(self, x):
        return self.layer(x.to(self.dtype)).float()


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_16_bit(exporter, dtype):
    model = InDtype(alexconv.AlexConv2d(3, 64, relu=True), dtype).eval()
    x = random_input(2)
    proto = export(model, x, exporter)
    assert_standard_conv(proto, relu=True)
    try:
        out = run_onnxruntime(proto, x)
    except OrtNotImplemented as e:  # bfloat16 convolves in float32 (onnx_export.py): never here
        assert dtype == torch.float16, e
        pytest.skip(f"ONNX Runtime {ort.__version__}'s CPU provider has no float16 Conv here: {e}")
    with torch.no_grad():
        expected = model(x)
    # One rounding to 16 bits on each side, of float32 sums taken in different orders: an ulp or
    # two apart (2**-10 relative for float16, 2**-7 for bfloat16).
    ulp = 2.0 ** (-10 if dtype == torch.float16 else -7)
    torch.testing.assert_close(out, expected, rtol=2 * ulp, atol=1e-3)


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_converted_torchvision_alexnet(exporter):
    # torchvision's layout with a small classifier (tests/alexnets.py; no weights downloaded).
    model, report = alexconv.convert(TorchvisionAlexNet(num_classes=10, hidden=64).eval())
    assert [(r.name, r.relu) for r in report.replaced] == [("features.0", "features.1")]
    x = torch.rand(2, 3, 224, 224)
    proto = export(model, x, exporter)
    assert_standard_conv(proto, relu=True)
    assert sum(n.op_type == "Conv" for n in proto.graph.node) == 5
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(run_onnxruntime(proto, x), expected, rtol=1e-4, atol=1e-4)


TABLE_UNSUPPORTED = DYNAMO_UNSUPPORTED or (
    None if "custom_translation_table" in _EXPORT_ARGS
    else f"torch {torch.__version__}'s torch.onnx.export takes no custom_translation_table")


@pytest.mark.skipif(TABLE_UNSUPPORTED is not None, reason=str(TABLE_UNSUPPORTED))
def test_translation_table_route():
    """The documented route for a torch whose exporter stops reading onnxscript's registry."""
    model = alexconv.AlexConv2d(3, 32, padding=1, relu=True).eval()
    x = random_input(1)
    proto = torch.onnx.export(model, (x,), dynamo=True, verbose=False,
                              custom_translation_table=alexconv.onnx_translation_table()).model_proto
    assert_standard_conv(proto, padding=1, relu=True)
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(run_onnxruntime(proto, x), expected, rtol=1e-4, atol=1e-4)


def _python(code, cwd):
    """A fresh interpreter, outside the repository (as tests/test_loading.py's)."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_import_alexconv_does_not_import_onnxscript(tmp_path):
    # onnxscript takes ~2 s to import: the translation waits for the exporter to import it.
    assert _python("""
        import sys, alexconv
        print("onnxscript" in sys.modules)
    """, tmp_path).split() == ["False"]


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_exporters_imported_before_alexconv(exporter, tmp_path):
    """The other order: torch.onnx (and onnxscript) already imported when alexconv registers."""
    out = _python(f"""
        import io, warnings
        import torch, torch.onnx
        {"import onnxscript" if exporter == "dynamo" else ""}
        import alexconv
        import onnx
        warnings.simplefilter("ignore")
        model, x = alexconv.AlexConv2d(3, 8, relu=True).eval(), torch.randn(1, 3, 31, 31)
        if {exporter == "dynamo"}:
            proto = torch.onnx.export(model, (x,), dynamo=True, verbose=False).model_proto
        else:
            f = io.BytesIO()
            torch.onnx.export(model, (x,), f, **({{"dynamo": False}} if {"dynamo" in _EXPORT_ARGS} else {{}}))
            proto = onnx.load_from_string(f.getvalue())
        print(*[n.op_type for n in proto.graph.node])
    """, tmp_path)
    assert out.split()[-2:] == ["Conv", "Relu"], out
