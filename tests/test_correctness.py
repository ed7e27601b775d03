"""conv1 against the float64 reference over shapes, dtypes, layouts and bias, on every device."""

import pytest
import torch

from conftest import (DTYPES, LAYOUTS, assert_matches_reference, conv1, device_params,
                      expected_memory_format, make_input, make_weight)

# (N, H, W): batch 0, 1, 2 and 5; the smallest legal size, sizes one past a tile
# or stride boundary, the canonical 224 and its neighbours, and H != W.
SHAPES = [
    (1, 7, 7), (2, 8, 11), (5, 11, 8), (1, 31, 31), (2, 31, 227), (5, 230, 7),
    (1, 224, 224), (2, 227, 230), (1, 230, 224), (0, 224, 224), (0, 7, 8),
    (2, 15, 16), (5, 11, 12),  # even W on CUDA: 16-bit windows copied in pairs
    (1, 300, 257),  # CUDA: two strips, the narrower ending in an empty tile
    (1, 40, 1100),  # CUDA: five strips, windows starting at both 16-bit copy skews
    (2, 40, 256), (1, 24, 512),  # CUDA: 16-bit boxes wider than 256 columns (16-byte units)
]


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("n,h,w", SHAPES, ids=lambda v: str(v))
def test_matches_reference(device, dtype, layout, bias, n, h, w, generator):
    x = make_input(n, h, w, dtype, device, layout, generator=generator)
    wt, b = make_weight(dtype, device, bias, generator=generator)
    out = conv1(x, wt, b)
    assert_matches_reference(out, x, wt, b)
    assert out.shape == (n, 96, (h - 7) // 4 + 1, (w - 7) // 4 + 1)
    if n > 0:
        assert out.is_contiguous(memory_format=expected_memory_format(x, wt))


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("dist", ["rand", "randn"])
def test_kernelbench_style_inputs_fp32_contract(device, dist, generator):
    """The float32 contract on both input distributions the README names."""
    x = make_input(4, 224, 224, torch.float32, device, dist=dist, generator=generator)
    wt, b = make_weight(torch.float32, device, generator=generator)
    assert_matches_reference(conv1(x, wt, b), x, wt, b)


@pytest.mark.parametrize("device", device_params())
def test_allow_tf32_flag_accepted_and_accurate(device, generator):
    """allow_tf32 changes nothing on CPU; on CUDA it stays within the TF32 contract."""
    x = make_input(2, 64, 64, torch.float32, device, generator=generator)
    wt, b = make_weight(torch.float32, device, generator=generator)
    out = conv1(x, wt, b, allow_tf32=True)
    assert_matches_reference(out, x, wt, b, allow_tf32=True)
    if device == "cpu":
        assert torch.equal(out, conv1(x, wt, b))


@pytest.mark.parametrize("device", device_params())
def test_channels_last_weight_gives_channels_last_output(device, generator):
    x = make_input(2, 40, 40, torch.float32, device, generator=generator)
    wt, b = make_weight(torch.float32, device, generator=generator)
    wt = wt.contiguous(memory_format=torch.channels_last)
    out = conv1(x, wt, b)
    assert_matches_reference(out, x, wt, b)
    assert out.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_bias_far_larger_than_the_sum(device, dtype, generator):
    """CUDA accumulates on top of the bias (accumulators start there): a bias ~100x the
    products' sum must still meet the contract."""
    x = make_input(2, 35, 35, dtype, device, generator=generator)
    wt, _ = make_weight(dtype, device, generator=generator)
    b = ((torch.rand(96, generator=generator) * 2 - 1) * 64).to(device, dtype)
    assert_matches_reference(conv1(x, wt, b), x, wt, b)
