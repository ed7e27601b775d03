"""alexconv.AlexConv2d: nn.Conv2d's parameters, attributes and initialisation, the op's forward
(with its fused relu), TorchScript and export."""

import pytest
import torch
import torch.nn as nn

import alexconv
from alexconv import _compat
from conftest import assert_matches_reference, device_params, make_input

# TorchScript is deprecated in recent torch but scripted models must keep working.
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")


def test_alexconv2d_matches_conv2d_initialisation_and_attributes(fresh_seed):
    torch.manual_seed(fresh_seed)
    ref = nn.Conv2d(3, 64, 11, 4, 2)
    torch.manual_seed(fresh_seed)
    ours = alexconv.AlexConv2d(3, 64, 11, 4, 2)
    assert ours.state_dict().keys() == ref.state_dict().keys()
    for key, value in ref.state_dict().items():
        assert torch.equal(ours.state_dict()[key], value), key
    for attr in ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation",
                 "groups", "padding_mode"):
        assert getattr(ours, attr) == getattr(ref, attr), attr
    with pytest.raises(ValueError, match=r"AlexConv2d: padding must be the same int in \[0, 5\]"):
        alexconv.AlexConv2d(3, 64, 11, 4, 7)
    with pytest.raises(ValueError, match="AlexConv2d: kernel_size must be 11, got 5"):
        alexconv.AlexConv2d(3, 64, 5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_alexconv2d_follows_module_dtype_conversions(dtype, generator):
    module = alexconv.AlexConv2d(3, 64, padding=0, relu=True).to(dtype)
    x = make_input(2, 47, 39, dtype, generator=generator)
    out = module(x)
    assert out.dtype == dtype
    assert_matches_reference(out, x, module.weight.detach(), module.bias.detach(), padding=0, relu=True)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_from_conv2d_shares_parameters_and_runs_the_op(device, bias, generator):
    conv = nn.Conv2d(3, 64, 11, 4, 2, bias=bias).to(device)
    module = alexconv.AlexConv2d.from_conv2d(conv, relu=True)
    assert module.weight is conv.weight and module.bias is conv.bias
    assert module.state_dict().keys() == conv.state_dict().keys()
    x = make_input(2, 50, 43, device=device, generator=generator)
    with torch.no_grad():
        out = module(x)
        assert_matches_reference(out, x, conv.weight, conv.bias, padding=2, relu=True)
        # nn.Conv2d itself with TF32 off (cuDNN's default rounds to TF32), within the op's contract.
        with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
            assert torch.allclose(out, torch.relu(conv(x)), atol=1e-4, rtol=1e-4)
        scripted = torch.jit.script(module)
        assert torch.equal(scripted(x), out)
        if _compat.has("export"):
            exported = torch.export.export(module, (x,))
            assert torch.equal(exported.module()(x), out)
    with pytest.raises(ValueError, match="AlexConv2d.from_conv2d: in_channels must be 3, got 4"):
        alexconv.AlexConv2d.from_conv2d(nn.Conv2d(4, 64, 11, 4, 2))


def test_repr_names_the_fused_relu():
    assert repr(alexconv.AlexConv2d(3, 64, 11, 4, 0, bias=False, relu=True)) == (
        "AlexConv2d(3, 64, kernel_size=(11, 11), stride=(4, 4), padding=(0, 0), bias=False, relu=True)")
