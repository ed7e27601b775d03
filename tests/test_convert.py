"""alexconv.AlexConv2d and alexconv.convert over whole models: torchvision's AlexNet layout
(64 channels, padding 2) and the original one (96 channels, padding 0, 227x227)."""

import copy
import json
import logging
import os
import subprocess
import sys

import pytest
import torch
import torch.nn as nn

import alexconv
from alexconv import _compat
from alexnets import TORCHVISION_STATE, OriginalAlexNet, TorchvisionAlexNet
from conftest import assert_matches_reference, child_env, device_params, make_input, rel_norm_error, requires_cuda

# TorchScript is deprecated in recent torch but scripted models must keep working.
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")


@pytest.fixture(autouse=True)
def exact_cudnn():
    """The unconverted model's cuDNN convolutions would otherwise round to TF32."""
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        yield


def small_torchvision(device="cpu", seed=0):
    torch.manual_seed(seed)
    return TorchvisionAlexNet(num_classes=10, hidden=64).to(device).eval()


def assert_close_to_float64(out, model, x):
    """Against the unconverted model run in float64: the float32 network's rounding only."""
    ref = copy.deepcopy(model).double()(x.double())
    assert out.dtype == x.dtype and out.shape == ref.shape
    assert rel_norm_error(out, ref) < 1e-5, rel_norm_error(out, ref)


def test_local_module_has_torchvisions_layout():
    state = TorchvisionAlexNet().state_dict()
    assert [(k, tuple(v.shape)) for k, v in state.items()] == TORCHVISION_STATE


@pytest.mark.parametrize("device", device_params())
def test_torchvision_alexnet_converts_with_fused_relu(device, generator, caplog):
    model = small_torchvision(device)
    with caplog.at_level(logging.INFO, logger="alexconv"):
        converted, report = alexconv.convert(model)
    assert [(r.name, r.relu) for r in report.replaced] == [("features.0", "features.1")]
    assert {s.name for s in report.skipped} == {"features.3", "features.6", "features.8", "features.10"}
    assert "replaced 1 nn.Conv2d, fused 1 ReLU, kept 4 nn.Conv2d" in caplog.text
    # The report names the kernel the op takes for the layer on the model's device.
    conv0 = model.features[0]
    kernel = alexconv.conv1_kernel(torch.empty(1, 3, 224, 224, device=device), conv0.weight.detach(),
                                   conv0.bias.detach(), padding=2, relu=True)
    assert report.replaced[0].kernel == kernel != "aten"
    assert f"-> {kernel} (batch 1, 224x224)" in str(report)
    conv = converted.features[0]
    assert type(conv) is alexconv.AlexConv2d and conv.relu and conv.padding == (2, 2)
    assert type(converted.features[1]) is nn.Identity
    # inplace=False: the model given is untouched.
    assert type(model.features[0]) is nn.Conv2d and type(model.features[1]) is nn.ReLU
    assert converted.state_dict().keys() == model.state_dict().keys()
    for key, value in model.state_dict().items():
        assert torch.equal(converted.state_dict()[key], value), key

    x = make_input(4, 67, 70, device=device, generator=generator)
    with torch.no_grad():
        out = converted(x)
        assert_close_to_float64(out, model, x)
        assert torch.equal(out.argmax(1), model(x).argmax(1))


def test_inplace_keeps_the_parameter_objects():
    model = small_torchvision()
    weight, bias = model.features[0].weight, model.features[0].bias
    converted, _ = alexconv.convert(model, inplace=True, allow_tf32=True)
    assert converted is model
    assert model.features[0].weight is weight and model.features[0].bias is bias
    assert model.features[0].allow_tf32
    assert [n for n, _ in model.named_parameters()] == [k for k, _ in TORCHVISION_STATE]


def test_pretrained_weights_load_before_or_after(generator):
    trained = small_torchvision(seed=1)
    before = small_torchvision(seed=2)
    before.load_state_dict(trained.state_dict())
    converted, _ = alexconv.convert(before)
    after, _ = alexconv.convert(small_torchvision(seed=3))
    after.load_state_dict(trained.state_dict())
    back = small_torchvision(seed=4)
    back.load_state_dict(after.state_dict())
    x = make_input(2, 64, 64, generator=generator)
    with torch.no_grad():
        expected = trained(x)
        for model in (converted, after, back):
            assert torch.allclose(model(x), expected, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("device", device_params())
def test_original_alexnet_96_channels_padding_0(device, generator):
    torch.manual_seed(0)
    model = OriginalAlexNet(num_classes=10, hidden=64).to(device).eval()
    first = model.features[0]
    kernel = alexconv.conv1_kernel(torch.empty(1, 3, 227, 227, device=device), first.weight.detach(),
                                   first.bias.detach(), padding=0, relu=True)
    if kernel == "aten":  # the op would call ATen's convolution itself: the layer stays
        with pytest.warns(UserWarning, match="replaced nothing"):
            converted, report = alexconv.convert(model)
        assert report.replaced == [] and type(converted.features[0]) is nn.Conv2d
        assert "ATen's convolution, as nn.Conv2d does" in report.skipped[0].reason
        return
    converted, report = alexconv.convert(model)
    assert [(r.name, r.relu) for r in report.replaced] == [("features.0", "features.1")]
    conv = converted.features[0]
    assert conv.out_channels == 96 and conv.padding == (0, 0) and conv.relu
    x = make_input(2, 227, 227, device=device, generator=generator)
    with torch.no_grad():
        assert_close_to_float64(converted(x), model, x)
        first = converted.features[:2](x)
    assert first.shape == (2, 96, 55, 55)
    assert_matches_reference(first, x, conv.weight.detach(), conv.bias.detach(), padding=0, relu=True)


@pytest.mark.slow  # torch.compile of a whole network: 45 s on 2 cores with a cold inductor cache
@pytest.mark.parametrize("device", device_params())
def test_converted_model_scripts_traces_compiles_exports(device, generator, tmp_path):
    model, _ = alexconv.convert(small_torchvision(device))
    x = make_input(2, 64, 72, device=device, generator=generator)
    y = make_input(3, 80, 64, device=device, generator=generator)
    with torch.no_grad():
        expected_x, expected_y = model(x), model(y)

        scripted = torch.jit.script(model)
        scripted.save(str(tmp_path / "converted.pt"))
        loaded = torch.jit.load(str(tmp_path / "converted.pt"), map_location=device)
        traced = torch.jit.trace(model, x)
        runs = [("script", scripted), ("load", loaded), ("trace", traced)]
        if _compat.has("compile"):  # torch 2.x
            torch._dynamo.reset()
            runs.append(("compile", torch.compile(model, fullgraph=True)))
        if _compat.has("export"):
            batch = torch.export.Dim("batch", min=1, max=64)
            exported = torch.export.export(model, (x,), dynamic_shapes={"x": {0: batch}})
            assert "alexconv.conv1.default" in [str(n.target) for n in exported.graph.nodes]
            runs.append(("export", exported.module()))

        for name, run in runs:
            assert torch.allclose(run(x), expected_x, atol=1e-5, rtol=1e-5), name
            if name != "export":  # exported with this input width
                assert torch.allclose(run(y), expected_y, atol=1e-5, rtol=1e-5), name


def exactly_summable_stem(model, generator):
    """Rounds conv1's weight and bias to multiples of 2**-12 (|w| <= 214 * 2**-12 under the default
    init) and returns a fitting input of integers in [-4, 4]: every product then has at most 11
    significant bits and every sum of 363 of them stays below 2**24 units, so any summation order
    (ours, ATen's, cuDNN's, bf16x3's hi/lo terms) gives the same float32 stem output bit for bit."""
    conv = model.features[0]
    with torch.no_grad():
        conv.weight.copy_(torch.round(conv.weight * 4096) / 4096)
        conv.bias.copy_(torch.round(conv.bias * 4096) / 4096)
    assert conv.weight.abs().max() * 4096 < 256
    return torch.randint(-4, 5, (4, 3, 64, 64), generator=generator).float()


@pytest.mark.parametrize("device", device_params())
def test_converted_model_trains_like_the_original(device, generator):
    """An SGD step in train mode (dropout drawn from the same seed) moves every parameter of the
    converted model as the original's. The stems compute exactly (exactly_summable_stem), so the
    rest of the network sees the same values and makes the same ReLU and max-pool picks; only
    the backward's summation order differs. With plain random inputs, float32 rounding in the
    stem flipped a near-tie in a later max-pool on 5 seeds of 300 (three steps on CPU) and moved
    conv1's update by up to 3%; at ALEXCONV_TEST_SEED=2211388059219562298 the unconverted float32
    model was the one off its float64 run."""
    original = small_torchvision().train()
    x = exactly_summable_stem(original, generator).to(device)
    original.to(device)
    converted, _ = alexconv.convert(original)
    before = copy.deepcopy(converted.state_dict())
    target = torch.randint(10, (4,), generator=generator).to(device)
    with torch.no_grad():
        assert torch.equal(converted.features[:2](x), original.features[:2](x))
    for model in (original, converted):
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        torch.manual_seed(0)
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), target).backward()
        opt.step()
    for (name, p), (_, q) in zip(converted.named_parameters(), original.named_parameters()):
        assert not torch.equal(p, before[name]), f"{name} did not move"
        moved, expected = p - before[name], q - before[name]
        assert rel_norm_error(moved, expected) < 1e-4, (name, rel_norm_error(moved, expected))


class Wrapper(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 96, 11, 4, 2)  # not in a Sequential: no fusion
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.stem(x))


class Conv2dSubclass(nn.Conv2d):
    def forward(self, x):
        return super().forward(x) * 2


class Doubled(nn.Module):
    def forward(self, weight):
        return 2 * weight


def test_what_is_replaced_kept_and_fused(caplog, generator):
    shared = nn.Conv2d(3, 32, 11, 4, 3)
    hooked = nn.Conv2d(3, 64, 11, 4, 2)
    hooked.register_forward_hook(lambda *args: None)
    hooked_relu = nn.ReLU()
    hooked_relu.register_forward_hook(lambda *args: None)
    # A parametrization of its own (torch 1.13 has parametrize, not parametrizations.weight_norm).
    parametrized = nn.Conv2d(3, 64, 11, 4, 2)
    nn.utils.parametrize.register_parametrization(parametrized, "weight", Doubled())
    model = nn.Sequential(
        nn.Sequential(shared, nn.ReLU(inplace=True)),
        nn.Sequential(shared, nn.ReLU6()),
        nn.Sequential(nn.Conv2d(3, 64, 11, 4, 5, bias=False), hooked_relu),
        Wrapper(),
        nn.ModuleList([
            nn.Conv2d(3, 64, 11, 4, 6),
            nn.Conv2d(3, 257, 11, 4, 2),
            nn.Conv2d(3, 64, 11, 2, 2),
            nn.Conv2d(3, 64, 11, 4, (2, 3)),
            nn.Conv2d(3, 64, 11, 4, 2, padding_mode="reflect"),
            nn.Conv2d(3, 64, 11, 4, 2, dilation=2),
            nn.Conv2d(4, 64, 11, 4, 2),
            nn.Conv2d(3, 64, 11, 4, 2).double(),
            hooked,
            nn.Conv2d(3, 64, 11, 4, "valid"),
            parametrized,
            Conv2dSubclass(3, 64, 11, 4, 2),
            nn.Conv2d(4, 64, 7, 2, 6, dilation=2, groups=2, padding_mode="circular"),
        ]),
    )
    with caplog.at_level(logging.INFO, logger="alexconv"):
        converted, report = alexconv.convert(model, inplace=True)
    assert {(r.name, r.relu) for r in report.replaced} == {
        ("0.0", "0.1"), ("1.0", None), ("2.0", None), ("3.stem", None), ("4.9", None)}
    skipped = {s.name: s.reason for s in report.skipped}
    assert skipped == {
        "4.0": "padding must be the same int in [0, 5] on both axes, got (6, 6)",
        "4.1": "out_channels must be in [1, 256], got 257",
        "4.2": "stride must be 4, got (2, 2)",
        "4.3": "padding must be the same int in [0, 5] on both axes, got (2, 3)",
        "4.4": "padding_mode must be 'zeros', got 'reflect'",
        "4.5": "dilation must be 1, got (2, 2)",
        "4.6": "in_channels must be 3, got 4",
        "4.7": "dtype must be float32, float16 or bfloat16, got torch.float64",
        "4.8": "it has hooks, which a replacement would not run",
        "4.10": "its parameters are parametrized (weight_norm, ...): a replacement would not run that",
        "4.11": "Conv2dSubclass is a subclass of nn.Conv2d: its forward may differ",
        # Every reason, not only the first.
        "4.12": "in_channels must be 3, got 4; kernel_size must be 11, got (7, 7); stride must be 4, "
                "got (2, 2); dilation must be 1, got (2, 2); padding must be the same int in [0, 5] "
                "on both axes, got (6, 6); groups must be 1, got 2; padding_mode must be 'zeros', "
                "got 'circular'",
    }
    assert len(report.skipped[-1].reasons) == 7
    assert "4.12: kept as nn.Conv2d (in_channels must be 3, got 4; kernel_size" in str(report)
    assert str(report).splitlines()[0] == caplog.records[-1].getMessage().splitlines()[0]
    # The shared conv: one replacement with relu, one without, both on its parameters.
    first, second = converted[0][0], converted[1][0]
    assert first.relu and not second.relu and first.weight is second.weight is shared.weight
    assert type(converted[1][1]) is nn.ReLU6 and type(converted[2][1]) is nn.ReLU
    assert converted[4][9].padding == (0, 0)
    x = make_input(2, 40, 40, generator=generator)
    with torch.no_grad():
        assert torch.equal(converted[0](x), converted[1][0](x).relu())
    # Idempotent: a second pass replaces nothing new, and says so.
    with pytest.warns(UserWarning, match=r"replaced nothing: none of its 12 nn.Conv2d .*already holds 5"):
        assert alexconv.convert(converted)[1].replaced == []


def test_nothing_converted_warns():
    with pytest.warns(UserWarning, match="alexconv.convert replaced nothing: it holds no nn.Conv2d"):
        alexconv.convert(nn.Sequential(nn.Linear(2, 2)))
    with pytest.warns(UserWarning, match=r"none of its 1 nn.Conv2d can run on alexconv::conv1"):
        _, report = alexconv.convert(nn.Sequential(nn.Conv2d(3, 8, 3)))
    assert str(report).splitlines()[1] == ("  0: kept as nn.Conv2d (kernel_size must be 11, got (3, 3); "
                                           "stride must be 4, got (1, 1))")


def test_model_that_is_a_conv_and_bad_arguments():
    conv = nn.Conv2d(3, 96, 11, 4, 2)
    converted, report = alexconv.convert(conv)
    assert type(converted) is alexconv.AlexConv2d and report.replaced[0].name == ""
    with pytest.raises(TypeError, match="model must be an nn.Module"):
        alexconv.convert("alexnet")
    with pytest.raises(TypeError, match="TorchScript"):
        alexconv.convert(torch.jit.script(nn.Sequential(nn.ReLU())))


def convert_in_child(**env) -> dict:
    """alexconv.convert of the small torchvision layout in a child process with `env` (the op
    reads ALEXCONV_CPU_KERNEL and ALEXCONV_EMULATE_DEVICE once per process)."""
    code = """
import json, warnings, torch, alexconv
from alexnets import TorchvisionAlexNet
device = "cuda" if %r else "cpu"
model = TorchvisionAlexNet(num_classes=10, hidden=64).to(device).eval()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    converted, report = alexconv.convert(model)
x = torch.rand(2, 3, 67, 67, device=device)
with torch.no_grad():
    same = torch.equal(converted(x), model(x))
print(json.dumps({"replaced": [r.name for r in report.replaced], "kernels": [r.kernel for r in report.replaced],
                  "kept": {s.name: s.reason for s in report.skipped}, "same": same,
                  "warned": [str(w.message) for w in caught], "first": type(converted.features[0]).__name__}))
""" % (env.pop("cuda", False),)
    done = subprocess.run([sys.executable, "-c", code], env=child_env(**env), capture_output=True, text=True,
                          timeout=600, cwd=os.path.dirname(os.path.abspath(__file__)))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def assert_kept_for_aten(got: dict, device: str):
    assert got["replaced"] == [] and got["first"] == "Conv2d", got
    assert f"on {device} alexconv's kernels do not run it" in got["kept"]["features.0"], got
    assert "ATen's convolution, as nn.Conv2d does" in got["kept"]["features.0"], got
    assert any("replaced nothing" in w for w in got["warned"]), got
    assert got["same"], got  # the model runs as it was: the same nn.Conv2d


def test_a_layer_the_op_would_send_to_aten_stays_nn_conv2d():
    """Forced onto ATen's convolution (ALEXCONV_CPU_KERNEL=aten), the op would gain nothing on
    the layer: convert keeps nn.Conv2d and says why; unforced it takes our kernel."""
    assert_kept_for_aten(convert_in_child(ALEXCONV_CPU_KERNEL="aten"), "cpu")
    got = convert_in_child()
    assert got["replaced"] == ["features.0"] and got["kernels"][0].startswith("cpu_"), got


@requires_cuda
@pytest.mark.cuda
def test_on_a_gpu_below_sm80_the_layer_stays_nn_conv2d():
    """Planned as a T4 (sm_75), where the op calls ATen's convolution for every call."""
    assert_kept_for_aten(convert_in_child(cuda=True, ALEXCONV_EMULATE_DEVICE="7.5"), "cuda:0")
