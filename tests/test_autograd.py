"""Gradients through conv1 (op/autograd): ATen's convolution backward behind our forward,
checked against F.conv2d's gradients in float64, and training through ModelNew."""

import pytest
import torch
import torch.nn.functional as F

import alexconv
from conftest import (assert_matches_reference, conv1, device_params, make_input, make_weight,
                      rel_norm_error, requires)

# TorchScript is deprecated in recent torch but saved scripted models must keep working.
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")


def reference_grads(x, w, b, grad_out):
    """d(sum(out * grad_out)) for F.conv2d in float64."""
    leaves = [t.detach().double().requires_grad_() for t in (x, w) + ((b,) if b is not None else ())]
    out = F.conv2d(leaves[0], leaves[1], leaves[2] if b is not None else None, stride=4, padding=2)
    return torch.autograd.grad(out, leaves, grad_out.double())


@pytest.fixture(autouse=True)
def exact_cudnn():
    """cuDNN's backward would otherwise round to TF32 (torch's default for convolutions)."""
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        yield


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "sliced"])
def test_gradients_match_float64_conv2d(device, bias, layout, generator):
    x = make_input(3, 45, 38, torch.float32, device, layout, generator=generator).requires_grad_()
    w, b = make_weight(torch.float32, device, bias, generator=generator)
    w.requires_grad_()
    if b is not None:
        b.requires_grad_()
    out = conv1(x, w, b)
    assert_matches_reference(out.detach(), x.detach(), w.detach(), None if b is None else b.detach())
    grad_out = torch.randn(out.shape, generator=generator).to(device)
    leaves = [x, w] + ([b] if b is not None else [])
    got = torch.autograd.grad(out, leaves, grad_out)
    for name, g, r in zip(["input", "weight", "bias"], got, reference_grads(x, w, b, grad_out)):
        assert g.dtype == torch.float32 and g.shape == r.shape, name
        assert rel_norm_error(g, r) < 1e-5, (name, rel_norm_error(g, r))


@pytest.mark.parametrize("device", device_params())
def test_only_the_leaves_that_require_grad_get_one(device, generator):
    """A frozen first layer (weights without grad) still passes gradients to its input,
    and a frozen input gives weight gradients only."""
    x = make_input(2, 23, 23, device=device, generator=generator)
    w, b = make_weight(device=device, generator=generator)
    w.requires_grad_()
    conv1(x, w, b).sum().backward()
    assert w.grad is not None and b.grad is None and x.grad is None
    x.requires_grad_()
    w.grad = None
    w.requires_grad_(False)
    conv1(x, w, b).sum().backward()
    assert x.grad is not None and w.grad is None


@pytest.mark.parametrize("device", device_params())
def test_double_backward_matches_conv2d(device, generator):
    x = make_input(2, 23, 27, device=device, generator=generator).requires_grad_()
    w, b = make_weight(device=device, generator=generator)
    w.requires_grad_()

    def grad_norm(conv):
        (gx,) = torch.autograd.grad(conv(x, w, b).square().sum(), x, create_graph=True)
        return torch.autograd.grad(gx.square().sum(), w)[0]

    ours = grad_norm(lambda *a: conv1(*a))
    theirs = grad_norm(lambda x, w, b: F.conv2d(x, w, b, stride=4, padding=2))
    assert rel_norm_error(ours, theirs.double()) < 1e-4


def test_gradients_in_half_types_run(generator):
    x = make_input(2, 23, 23, torch.bfloat16, generator=generator).requires_grad_()
    w, b = make_weight(torch.bfloat16, generator=generator)
    conv1(x, w, b).float().sum().backward()
    assert x.grad.dtype == torch.bfloat16 and x.grad.isfinite().all()


@pytest.mark.parametrize("device", device_params())
def test_training_step_matches_model(device):
    """One SGD step on ModelNew moves its parameters as on the reference Model."""
    ref = alexconv.Model().to(device)
    new = alexconv.ModelNew().to(device)
    new.load_state_dict(ref.state_dict())
    before = {k: v.clone() for k, v in ref.state_dict().items()}
    x = make_input(4, 64, 64, device=device)
    target = torch.randn(4, 96, 15, 15, device=device)
    for model in (ref, new):
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        F.mse_loss(model(x), target).backward()
        opt.step()
    for (name, p), q in zip(new.named_parameters(), ref.parameters()):
        assert not torch.equal(p, before[name]), f"{name} did not move"
        assert torch.allclose(p, q, atol=1e-5, rtol=1e-4), name


def test_scripted_model_backward():
    model = torch.jit.script(alexconv.ModelNew())
    model(make_input(2, 31, 31)).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


@requires("compile")
@pytest.mark.parametrize("device", device_params())
def test_compiled_training_matches_eager(device):
    torch._dynamo.reset()
    model = alexconv.ModelNew().to(device)
    compiled = torch.compile(model, fullgraph=True)
    x = make_input(2, 40, 40, device=device).requires_grad_()
    (gx_eager,) = torch.autograd.grad(model(x).square().sum(), x)
    (gx_compiled,) = torch.autograd.grad(compiled(x).square().sum(), x)
    assert torch.allclose(gx_compiled, gx_eager, atol=1e-5, rtol=1e-4)


@requires("opcheck")
@pytest.mark.parametrize("device", device_params())
def test_opcheck_with_gradients(device, generator):
    x = make_input(2, 31, 23, device=device, generator=generator).requires_grad_()
    w, b = make_weight(device=device, generator=generator)
    torch.library.opcheck(torch.ops.alexconv.conv1.default,
                          (x, w.requires_grad_(), b.requires_grad_()))
