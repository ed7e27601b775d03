"""torch.autocast (op/autocast): conv1 runs in the autocast dtype, as nn.Conv2d does."""

import pytest
import torch

import alexconv
from conftest import assert_matches_reference, conv1, device_params, make_input, make_weight, skip_unless

HALF_TYPES = [torch.float16, torch.bfloat16]


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("dtype", HALF_TYPES, ids=str)
def test_runs_in_the_autocast_dtype(device, dtype, generator):
    if device == "cpu" and dtype == torch.float16:
        skip_unless("cpu_autocast_float16")
    x = make_input(2, 45, 39, torch.float32, device, generator=generator)
    w, b = make_weight(torch.float32, device, generator=generator)
    with torch.autocast(device, dtype=dtype):
        out = conv1(x, w, b)
        expected_dtype = torch.nn.functional.conv2d(x, w, b, stride=4, padding=2).dtype
    assert out.dtype == expected_dtype == dtype
    # Exactly the op on the cast operands.
    assert_matches_reference(out, x.to(dtype), w.to(dtype), b.to(dtype))
    assert torch.equal(out, conv1(x.to(dtype), w.to(dtype), b.to(dtype)))


@pytest.mark.parametrize("device", device_params())
def test_model_new_follows_model(device):
    ref = alexconv.Model().to(device)
    new = alexconv.ModelNew().to(device)
    new.load_state_dict(ref.state_dict())
    x = make_input(2, 64, 64, device=device)
    with torch.autocast(device, dtype=torch.bfloat16):
        assert new(x).dtype == ref(x).dtype == torch.bfloat16
        assert new(x.bfloat16()).dtype == torch.bfloat16  # a half input with float32 weights
        with torch.autocast(device, enabled=False):
            assert new(x).dtype == torch.float32


@pytest.mark.parametrize("device", device_params())
def test_gradients_reach_float32_parameters(device):
    model = alexconv.ModelNew().to(device)
    with torch.autocast(device, dtype=torch.bfloat16):
        out = model(make_input(2, 40, 40, device=device))
    out.float().sum().backward()
    assert model.conv1.weight.grad.dtype == torch.float32
    assert model.conv1.weight.grad.abs().sum() > 0


def test_leaves_what_autocast_leaves():
    """float64 is not cast by autocast: the op's own check names it."""
    x = torch.randn(1, 3, 16, 16, dtype=torch.float64)
    w, b = make_weight(torch.float64)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with pytest.raises(RuntimeError, match="input must have dtype float32, float16 or bfloat16, got float64"):
            alexconv.conv1(x, w, b)
