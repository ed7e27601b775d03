"""The op family (issue 46): any output-channel count in [1, 256], padding 0-5 and a fused relu,
on every backend, against the float64 F.conv2d (+ F.relu) reference."""

import os

import pytest
import torch
import torch.nn.functional as F

import alexconv
from alexconv import _compat
from conftest import (CPU_KERNELS, DTYPES, assert_matches_reference, conv1, device_params,
                      expected_memory_format, make_input, make_weight, reference, rel_norm_error,
                      requires, requires_cuda)

OP = torch.ops.alexconv.conv1.default
# 64: torchvision's AlexNet; 96: the original (padding 0) and KernelBench's (padding 2); the
# range's ends and a count that is no multiple of the CPU kernel's channel block (1 and 17: the
# CUDA kernels store a partial n-tile); 40 and 88, which leave a channel group of the split fits
# empty (40) or partly used (88).
CHANNELS = [64, 96, 1, 17, 256, 40, 88]
# "other": a padding drawn per run from the rest of the range.
PADDINGS = [0, 2, "other"]


def pick_padding(padding, generator):
    if padding != "other":
        return padding
    return [1, 3, 4, 5][int(torch.randint(4, (1,), generator=generator))]


def out_size(size, padding):
    return (size + 2 * padding - 11) // 4 + 1


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("relu", [False, True], ids=["linear", "relu"])
@pytest.mark.parametrize("padding", PADDINGS, ids=lambda p: f"pad{p}")
@pytest.mark.parametrize("channels", CHANNELS, ids=lambda c: f"c{c}")
def test_family_matches_reference(device, dtype, relu, padding, channels, generator):
    padding = pick_padding(padding, generator)
    x = make_input(2, 37, 30, dtype, device, generator=generator)
    w, b = make_weight(dtype, device, generator=generator, out_channels=channels)
    out = conv1(x, w, b, padding=padding, relu=relu)
    assert_matches_reference(out, x, w, b, padding=padding, relu=relu)
    assert out.shape == (2, channels, out_size(37, padding), out_size(30, padding))


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layout", ["channels_last", "sliced", "cropped"])
@pytest.mark.parametrize("padding", [0, 2], ids=lambda p: f"pad{p}")
@pytest.mark.parametrize("channels", [64, 96], ids=lambda c: f"c{c}")
def test_family_layouts(device, dtype, layout, padding, channels, generator):
    x = make_input(3, 45, 51, dtype, device, layout, generator=generator)
    w, b = make_weight(dtype, device, generator=generator, out_channels=channels)
    out = conv1(x, w, b, padding=padding, relu=True)
    assert_matches_reference(out, x, w, b, padding=padding, relu=True)
    assert out.is_contiguous(memory_format=expected_memory_format(x, w))


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("mode", ["fp32", "tf32", "fp16", "bf16"])
@pytest.mark.parametrize("padding", range(6))
def test_aligned_rows_at_every_padding(device, mode, padding, generator):
    """Rows of whole 16-byte units (64 columns), where the Hopper space-to-depth kernel copies
    windows as TMA boxes: at odd paddings a window starts at an odd element of its box row,
    which those boxes' aligned pair reads cannot take (they go to row spans instead)."""
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(mode, torch.float32)
    x = make_input(3, 37, 64, dtype, device, generator=generator)
    w, b = make_weight(dtype, device, generator=generator, out_channels=40)
    out = conv1(x, w, b, padding=padding, allow_tf32=mode == "tf32")
    assert_matches_reference(out, x, w, b, padding=padding, allow_tf32=mode == "tf32")


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("padding", range(6))
def test_smallest_input_at_each_padding(device, padding, generator):
    """H = W = 11 - 2 * padding gives one output pixel; one less is rejected."""
    size = 11 - 2 * padding
    x = make_input(2, size, size, device=device, generator=generator)
    w, b = make_weight(device=device, generator=generator, out_channels=64)
    out = conv1(x, w, b, padding=padding)
    assert out.shape == (2, 64, 1, 1)
    assert_matches_reference(out, x, w, b, padding=padding)
    if size > 1:
        with pytest.raises(RuntimeError, match=f"must be at least {size} \\(kernel 11, padding {padding}\\)"):
            alexconv.conv1(x[:, :, 1:, :], w, b, padding=padding)


@pytest.mark.parametrize("device", device_params())
def test_original_alexnet_geometry(device, generator):
    """96 channels, padding 0, 227x227: 55x55 outputs (Krizhevsky et al.)."""
    x = make_input(1, 227, 227, device=device, generator=generator)
    w, b = make_weight(device=device, generator=generator)
    out = conv1(x, w, b, padding=0, relu=True)
    assert out.shape == (1, 96, 55, 55)
    assert_matches_reference(out, x, w, b, padding=0, relu=True)


def tiny_negative_sums(dtype, device, generator):
    """Input and weights whose channel 0 sums to -1 + 1 - tiny at most pixels: a negative
    value that rounds to -0.0 in 16-bit outputs (CPU's F.relu keeps -0.0), plus NaN inputs."""
    tiny = {torch.float32: 2.0**-15, torch.float16: 2.0**-15, torch.bfloat16: 2.0**-70}[dtype]
    x = make_input(2, 40, 36, generator=generator)
    x[:, 0] = 1.0
    x[:, 1] = -tiny
    x[0, 2, 17, 9] = float("nan")
    w, b = make_weight(generator=generator, out_channels=24)
    w[0] = 0.0
    w[0, 0, 5, 5] = 1.0
    w[0, 1, 5, 5] = tiny
    b[0] = -1.0
    return x.to(device, dtype), w.to(device, dtype), b.to(device, dtype)


def bits(t):
    return t.view({4: torch.int32, 2: torch.int16}[t.element_size()])


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("padding", [0, 2], ids=lambda p: f"pad{p}")
def test_fused_relu_is_torch_relu_of_the_unfused_op(device, dtype, padding, generator):
    """Bit for bit torch.relu on the same device: NaN stays NaN; 16-bit outputs round small
    negative sums to -0.0, which torch.relu keeps on CPU (relu applied before the rounding
    would give +0.0) and turns into +0.0 on CUDA (a GPU max orders -0.0 below +0.0: the fused
    epilogues must do the same). NaN payloads are not compared: torch.relu itself changes
    bfloat16 NaN bits (0x7fc0 -> 0xffff on this CPU)."""
    x, w, b = tiny_negative_sums(dtype, device, generator)
    plain = conv1(x, w, b, padding=padding)
    fused = conv1(x, w, b, padding=padding, relu=True)
    # torch 1.13 has no float16 relu on CPU: float32 relu, rounded back, is the same bits.
    exact_relu = device != "cpu" or dtype != torch.float16 or _compat.has("cpu_float16_relu")
    expected = torch.relu(plain) if exact_relu else torch.relu(plain.float()).to(dtype)
    assert fused.isnan().any() and torch.equal(fused.isnan(), reference(x, w, b, padding).isnan())
    assert torch.equal(fused.isnan(), expected.isnan())
    number = ~fused.isnan()
    assert torch.equal(bits(fused)[number], bits(expected)[number])
    # CPU sums in float32 in IEEE order, so channel 0 gets -2^-30 (-2^-140) and rounds to -0.0;
    # tensor cores may drop the tiny product while adding it, so CUDA is held to the bits only.
    negative_zero = (fused == 0) & fused.signbit()
    if dtype != torch.float32 and device == "cpu":
        assert negative_zero[:, 0].any(), "the case made no -0.0: it would not tell the orders apart"


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nonfinite_inputs_with_64_channels_and_relu(device, dtype, generator):
    """NaN and Inf through the 64-channel kernels and the fused relu (on CUDA, tiles holding
    them may take the exact fallback, which stores through the same rule): as F.relu of the
    float64 F.conv2d, NaN stays NaN, +Inf stays, -Inf (and +Inf - Inf = NaN) follow."""
    x = make_input(2, 45, 38, dtype, device, generator=generator)
    w, b = make_weight(dtype, device, generator=generator, out_channels=64)
    flat = x.view(-1)
    picks = torch.randperm(flat.numel(), generator=generator)[:15].to(device)
    flat[picks] = torch.tensor([float("nan"), float("inf"), float("-inf")] * 5, dtype=dtype, device=device)
    out = conv1(x, w, b, relu=True)
    ref = reference(x, w, b, relu=True)
    assert ref.isnan().any() and ref.isinf().any()
    assert torch.equal(out.isnan(), ref.isnan()) and torch.equal(out.isinf(), ref.isinf())
    assert (out[ref.isinf()] > 0).all() and (out[~ref.isnan()] >= 0).all()
    finite = ref.isfinite()
    limit = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}[dtype]
    assert rel_norm_error(out[finite], ref[finite]) <= limit


def test_meta_shapes_follow_channels_and_padding():
    for channels in (1, 64, 256):
        for padding in range(6):
            x = torch.empty(2, 3, 39, 30, device="meta")
            w = torch.empty(channels, 3, 11, 11, device="meta")
            out = OP(x, w, torch.empty(channels, device="meta"), padding=padding, relu=True)
            assert out.shape == F.conv2d(x, w, stride=4, padding=padding).shape
            assert out.shape == (2, channels, out_size(39, padding), out_size(30, padding))


@requires("opcheck")
@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("channels,padding,relu", [(64, 2, False), (64, 0, True), (96, 0, True),
                                                   (96, 2, True), (5, 5, True)])
def test_opcheck_family(device, channels, padding, relu, generator):
    x = make_input(2, 31, 23, device=device, generator=generator).requires_grad_()
    w, b = make_weight(device=device, generator=generator, out_channels=channels)
    torch.library.opcheck(OP, (x, w.requires_grad_(), b.requires_grad_()),
                          {"padding": padding, "relu": relu})


@pytest.fixture
def exact_cudnn():
    """cuDNN's backward would otherwise round to TF32 (torch's default for convolutions)."""
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        yield


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("channels,padding,relu", [(64, 2, True), (64, 0, False), (96, 0, True),
                                                   (96, 2, True), (33, 4, True)])
def test_gradients_with_padding_and_relu(device, channels, padding, relu, generator, exact_cudnn):
    """Against F.conv2d's float64 gradients. relu's mask is the op's output > 0 (as F.relu's
    backward): the float64 reference takes that mask, which must agree with its own sign
    wherever the two outputs are not within rounding of zero."""
    x = make_input(3, 45, 38, device=device, generator=generator).requires_grad_()
    w, b = make_weight(device=device, generator=generator, out_channels=channels)
    leaves = [x, w.requires_grad_(), b.requires_grad_()]
    out = conv1(x, w, b, padding=padding, relu=relu)
    grad_out = torch.randn(out.shape, generator=generator).to(device)
    got = torch.autograd.grad(out, leaves, grad_out)

    ref_leaves = [t.detach().double().requires_grad_() for t in leaves]
    ref_out = F.conv2d(*ref_leaves, stride=4, padding=padding)
    mask = (out.detach() > 0).double() if relu else torch.ones_like(ref_out)
    if relu:
        clear = ref_out.detach().abs() > 1e-4
        assert torch.equal((ref_out.detach() > 0)[clear], (out.detach() > 0)[clear])
        assert (out.detach()[~(out.detach() > 0)] == 0).all()
    expected = torch.autograd.grad(ref_out, ref_leaves, grad_out.double() * mask)
    for name, g, r in zip(["input", "weight", "bias"], got, expected):
        assert g.dtype == torch.float32 and g.shape == r.shape, name
        assert rel_norm_error(g, r) < 1e-5, (name, rel_norm_error(g, r))


@pytest.mark.parametrize("device", device_params())
def test_double_backward_with_relu(device, generator, exact_cudnn):
    x = make_input(2, 27, 31, device=device, generator=generator).requires_grad_()
    w, b = make_weight(device=device, generator=generator, out_channels=64)
    w.requires_grad_()

    def grad_norm(conv):
        (gx,) = torch.autograd.grad(conv(x, w, b).square().sum(), x, create_graph=True)
        return torch.autograd.grad(gx.square().sum(), w)[0]

    ours = grad_norm(lambda *a: conv1(*a, padding=0, relu=True))
    theirs = grad_norm(lambda x, w, b: F.relu(F.conv2d(x, w, b, stride=4, padding=0)))
    assert rel_norm_error(ours, theirs.double()) < 1e-4


@pytest.mark.parametrize("device", device_params())
def test_autocast_forwards_padding_and_relu(device, generator):
    dtype = torch.bfloat16
    x = make_input(2, 40, 44, device=device, generator=generator)
    w, b = make_weight(device=device, generator=generator, out_channels=64)
    with torch.autocast(device, dtype=dtype):
        out = alexconv.conv1(x, w, b, padding=0, relu=True)
    assert out.dtype == dtype and out.shape == (2, 64, 8, 9)
    assert_matches_reference(out, x.to(dtype), w.to(dtype), b.to(dtype), padding=0, relu=True)


def test_cpu_kernel_name_for_the_family(generator):
    x = make_input(1, 40, 40, generator=generator)
    w, b = make_weight(generator=generator, out_channels=64)
    assert alexconv.conv1_kernel(x, w, b, padding=0, relu=True) in CPU_KERNELS


@requires_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("relu", [False, True], ids=["linear", "relu"])
def test_which_calls_our_cuda_kernels_run(relu, generator):
    """Our CUDA kernels run every padding with 1 to 96 output channels (relu fused in their
    epilogues); 97-256 channels run on ATen's convolution (under the op's contract, checked
    above). The register gather's K order pairs even window columns: odd paddings take another
    of our kernels."""
    x = make_input(2, 64, 64, device="cuda", generator=generator)
    weights = {c: make_weight(device="cuda", generator=generator, out_channels=c)
               for c in (96, 64, 8, 100, 17, 256)}
    kernel = {c: alexconv.conv1_kernel(x, *weights[c], relu=relu) for c in weights}
    pads = {pad: alexconv.conv1_kernel(x, *weights[96], padding=pad, relu=relu) for pad in range(6)}
    if kernel[96] == "aten":  # below sm_80 (or forced): ATen runs the whole family
        assert set(pads.values()) == {"aten"}, pads
    else:
        assert "aten" not in pads.values(), pads
        gather = {"wgmma", "mma_sync", "mma_sync_n48", "mma_sync_n24"}
        assert not gather & {pads[1], pads[3], pads[5]}, pads
    assert kernel[100] == kernel[256] == "aten", kernel
    # The covered counts take the kernel 96 channels take, whatever it is on this GPU (a CUDA 11.8
    # build covers multiples of 8 only: kAnyChannelCount).
    assert kernel[64] == kernel[8] == kernel[96], kernel
    if int(torch.version.cuda.split(".")[0]) >= 12:
        assert kernel[17] == kernel[96], kernel
    planned_freely = (os.environ.get("ALEXCONV_CUDA_KERNEL", "auto") in ("", "auto")
                      and not os.environ.get("ALEXCONV_EMULATE_DEVICE"))
    if planned_freely and torch.cuda.get_device_capability() >= (8, 0):
        assert kernel[64] not in ("aten", "direct"), kernel
