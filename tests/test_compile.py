"""torch.compile (fullgraph, static and dynamic shapes) and torch.export over ModelNew,
checked against the float64 reference (not against the eager op: both run our kernel)."""

import pytest
import torch

import alexconv
from conftest import assert_matches_reference, device_params, make_input, requires


def check(out, x, model):
    assert_matches_reference(out, x, model.conv1.weight, model.conv1.bias)


@requires("compile")
@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_compile_fullgraph(device, dynamic):
    torch._dynamo.reset()
    model = alexconv.ModelNew().to(device).eval()
    compiled = torch.compile(model, fullgraph=True, dynamic=dynamic)
    with torch.no_grad():
        for n, h, w, layout in [(2, 64, 64, "contiguous"), (3, 71, 90, "contiguous"),
                                (1, 71, 90, "channels_last"), (0, 64, 64, "contiguous")]:
            x = make_input(n, h, w, torch.float32, device, layout)
            out = compiled(x)
            check(out, x, model)
            fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
            assert out.is_contiguous(memory_format=fmt)


@requires("export")
def test_export_contains_the_custom_op():
    model = alexconv.ModelNew().eval()
    x = torch.randn(2, 3, 64, 64)
    batch = torch.export.Dim("batch", min=1, max=1024)
    exported = torch.export.export(model, (x,), dynamic_shapes={"x": {0: batch}})
    targets = [str(n.target) for n in exported.graph.nodes if n.op == "call_function"]
    assert "alexconv.conv1.default" in targets
    y = torch.randn(5, 3, 64, 64)
    with torch.no_grad():
        check(exported.module()(y), y, model)
