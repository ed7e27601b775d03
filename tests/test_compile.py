"""torch.compile (fullgraph, static and dynamic shapes) and torch.export over ModelNew."""

import pytest
import torch

import alexconv
from conftest import device_params, make_input


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_compile_fullgraph(device, dynamic):
    torch._dynamo.reset()
    model = alexconv.ModelNew().to(device).eval()
    compiled = torch.compile(model, fullgraph=True, dynamic=dynamic)
    with torch.no_grad():
        for n, h, w in [(2, 64, 64), (3, 71, 90)]:
            x = make_input(n, h, w, torch.float32, device)
            assert torch.allclose(compiled(x), model(x), atol=1e-5, rtol=1e-5)


def test_export_contains_the_custom_op():
    model = alexconv.ModelNew().eval()
    x = torch.randn(2, 3, 64, 64)
    batch = torch.export.Dim("batch", min=1, max=1024)
    exported = torch.export.export(model, (x,), dynamic_shapes={"x": {0: batch}})
    targets = [str(n.target) for n in exported.graph.nodes if n.op == "call_function"]
    assert "alexconv.conv1.default" in targets
    y = torch.randn(5, 3, 64, 64)
    assert torch.allclose(exported.module()(y), model(y), atol=1e-6)
