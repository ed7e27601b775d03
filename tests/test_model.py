"""Model / ModelNew as KernelBench and TorchScript users meet them."""

import pytest
import torch

import alexconv
from conftest import assert_matches_reference, device_params, make_input


def _pair(seed):
    torch.manual_seed(seed)
    ref = alexconv.Model(*alexconv.get_init_inputs())
    torch.manual_seed(seed)
    new = alexconv.ModelNew(*alexconv.get_init_inputs())
    return ref, new


def test_seed_identical_initialisation(fresh_seed):
    ref, new = _pair(fresh_seed)
    assert ref.state_dict().keys() == new.state_dict().keys()
    for k, v in ref.state_dict().items():
        assert torch.equal(v, new.state_dict()[k]), k


def test_state_dicts_load_both_ways(fresh_seed):
    ref, new = _pair(fresh_seed)
    other = alexconv.ModelNew()
    other.load_state_dict(ref.state_dict())
    back = alexconv.Model()
    back.load_state_dict(new.state_dict())
    x = torch.randn(2, 3, 64, 64)
    assert torch.allclose(other(x), ref(x), atol=1e-5)
    assert torch.allclose(back(x), new(x), atol=1e-5)


def test_kernelbench_check(fresh_seed):
    """KernelBench's protocol: same seed, get_inputs(), allclose(1e-4) against Model."""
    ref, new = _pair(fresh_seed)
    torch.manual_seed(fresh_seed)
    (x,) = alexconv.get_inputs()
    assert x.shape == (256, 3, 224, 224)
    with torch.no_grad():
        expected, got = ref(x), new(x)
    assert torch.allclose(got, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("device", device_params())
def test_kernelbench_check_on_device(device, fresh_seed):
    ref, new = _pair(fresh_seed)
    ref, new = ref.to(device), new.to(device)
    x = alexconv.get_inputs()[0][:32].to(device)
    with torch.no_grad():
        if device == "cuda":
            torch.backends.cudnn.allow_tf32 = False  # an exact reference
        assert torch.allclose(new(x), ref(x), atol=1e-4, rtol=1e-4)
    torch.backends.cudnn.allow_tf32 = True


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_script_save_load_round_trip(tmp_path, device, dtype):
    model = alexconv.ModelNew().to(device, dtype).eval()
    scripted = torch.jit.script(model)
    path = tmp_path / "model.pt"
    scripted.save(str(path))
    loaded = torch.jit.load(str(path), map_location=device)
    x = make_input(2, 67, 45, dtype, device)
    with torch.no_grad():
        out = loaded(x)
        assert torch.equal(out, model(x))
        assert torch.equal(out, scripted(x))
    assert_matches_reference(out, x, model.conv1.weight.detach(), model.conv1.bias.detach())


def test_scripted_model_keeps_allow_tf32_attribute(tmp_path):
    scripted = torch.jit.script(alexconv.ModelNew(allow_tf32=True))
    scripted.save(str(tmp_path / "m.pt"))
    assert torch.jit.load(str(tmp_path / "m.pt")).allow_tf32 is True


def test_module_conversions_behave():
    model = alexconv.ModelNew()
    assert model.half().conv1.weight.dtype == torch.float16
    assert model.bfloat16().conv1.weight.dtype == torch.bfloat16
    x = torch.randn(1, 3, 32, 32, dtype=torch.bfloat16)
    assert model(x).dtype == torch.bfloat16
