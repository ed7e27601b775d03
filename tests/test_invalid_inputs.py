"""Invalid calls fail loudly with a message that names the argument, the expectation and
what was passed; valid but unusual calls (empty batch, odd strides, NaN/Inf, meta tensors)
give F.conv2d's answer. After every rejected call a valid call on the same device must
still be right, so a failed check leaves no broken state behind."""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from typing import Callable

import pytest
import torch
import torch.nn.functional as F

import alexconv
from conftest import (
    DTYPES,
    HAS_CUDA,
    assert_matches_reference,
    conv1,
    device_params,
    expected_memory_format,
    make_input,
    make_weight,
    reference,
    rel_norm_error,
    requires,
    requires_cuda,
)

ACCEPTED = "float32, float16 or bfloat16"
TWO_GPUS = pytest.mark.skipif(
    not HAS_CUDA or torch.cuda.device_count() < 2, reason="needs two CUDA devices"
)


@dataclass
class Case:
    id: str
    build: Callable[[str], tuple[tuple, dict]]  # device -> (args, kwargs) for alexconv.conv1
    match: str  # regex the error message must match
    devices: tuple[str, ...] = ("cpu", "cuda", "meta")
    marks: list = field(default_factory=list)


def rnd(*shape, dtype=torch.float32):
    """Builder of a random tensor (cast to any dtype, even bool) on the case's device."""
    return lambda d: torch.randn(shape, device=d).to(dtype)


def call(x=None, w=None, b=None, **kwargs):
    """Builder: defaults to a valid [2, 3, 19, 23] float32 call; kwargs go to the op as given."""
    x = x or rnd(2, 3, 19, 23)
    w = w or rnd(96, 3, 11, 11)

    def build(d):
        return (x(d), w(d), None if b is None else b(d)), kwargs

    return build


def quantized(shape):
    def make(d):
        try:
            with warnings.catch_warnings():  # quantized tensors are deprecated in torch
                warnings.simplefilter("ignore", UserWarning)
                return torch.quantize_per_tensor(torch.randn(*shape, device=d), 0.1, 0, torch.quint8)
        except (RuntimeError, NotImplementedError) as e:  # no quantized support on this device
            pytest.skip(f"cannot make a quantized tensor on {d}: {e}")
    return make


def nested(*shapes, layout=torch.strided):
    """Builder of a nested tensor of random components (the prototype API warns)."""
    def make(d):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            # torch 1.13's nested_tensor has no layout argument (strided is all it makes).
            kwargs = {} if layout is torch.strided else {"layout": layout}
            return torch.nested.nested_tensor([torch.randn(s, device=d) for s in shapes], **kwargs)
    return make


def mkldnn(shape):
    def make(d):
        if not torch.backends.mkldnn.is_available():
            pytest.skip("this torch has no MKL-DNN")
        return torch.randn(*shape, device=d).to_mkldnn()
    return make


def on(device, shape):
    return lambda d: torch.randn(*shape, device=device)


def ndim_msg(k, shape):
    return rf"^alexconv::conv1: input must be 4-D \[N, 3, H, W\], got {k}-D with shape {re.escape(shape)}"


def shape_msg(name, want, got):
    return rf"^alexconv::conv1: {name} must have shape {re.escape(want)}, got {re.escape(got)}"


def hw_msg(shape, least=7, padding=2):
    return (rf"^alexconv::conv1: input height and width must be at least {least} \(kernel 11, "
            rf"padding {padding}\), got shape {re.escape(shape)}")


def bias_msg(channels, got):
    return (rf"^alexconv::conv1: bias must have shape \[{channels}\] \(the weight's output channels\), "
            rf"got {re.escape(got)}$")


def padding_msg(got):
    return rf"^alexconv::conv1: padding must be in \[0, 5\], got {got}$"


def dtype_msg(name, got):
    return rf"^alexconv::conv1: {name} must have dtype {ACCEPTED}, got {got}$"


W_SHAPE = "[C_out, 3, 11, 11] with C_out in [1, 256]"
BAD_DTYPES = [(torch.int32, "int32"), (torch.int64, "int64"), (torch.uint8, "uint8"),
              (torch.bool, "bool"), (torch.float64, "float64"), (torch.complex64, "complex64")]

CASES = [
    # ---- input rank, channels, spatial size
    Case("input_3d", call(x=rnd(3, 19, 23)), ndim_msg(3, "[3, 19, 23]")),
    Case("input_5d", call(x=rnd(1, 2, 3, 19, 23)), ndim_msg(5, "[1, 2, 3, 19, 23]")),
    Case("input_0d", call(x=rnd()), ndim_msg(0, "[]")),
    Case("input_1_channel", call(x=rnd(2, 1, 19, 23)),
         r"^alexconv::conv1: input must have 3 channels \(dim 1\), got shape \[2, 1, 19, 23\]"),
    Case("input_4_channels", call(x=rnd(2, 4, 19, 23)),
         r"^alexconv::conv1: input must have 3 channels \(dim 1\), got shape \[2, 4, 19, 23\]"),
    Case("input_h6", call(x=rnd(2, 3, 6, 23)), hw_msg("[2, 3, 6, 23]")),
    Case("input_w6", call(x=rnd(2, 3, 19, 6)), hw_msg("[2, 3, 19, 6]")),
    Case("input_h0_w0", call(x=rnd(2, 3, 0, 0)), hw_msg("[2, 3, 0, 0]")),
    # ---- weight shape
    Case("weight_3d", call(w=rnd(96, 3, 11)), shape_msg("weight", W_SHAPE, "[96, 3, 11]")),
    Case("weight_5d", call(w=rnd(1, 96, 3, 11, 11)), shape_msg("weight", W_SHAPE, "[1, 96, 3, 11, 11]")),
    Case("weight_0_out", call(w=rnd(0, 3, 11, 11)), shape_msg("weight", W_SHAPE, "[0, 3, 11, 11]")),
    Case("weight_257_out", call(w=rnd(257, 3, 11, 11), b=rnd(257)),
         shape_msg("weight", W_SHAPE, "[257, 3, 11, 11]")),
    Case("weight_1_in", call(w=rnd(96, 1, 11, 11)), shape_msg("weight", W_SHAPE, "[96, 1, 11, 11]")),
    Case("weight_kh10", call(w=rnd(96, 3, 10, 11)), shape_msg("weight", W_SHAPE, "[96, 3, 10, 11]")),
    Case("weight_kw12", call(w=rnd(96, 3, 11, 12)), shape_msg("weight", W_SHAPE, "[96, 3, 11, 12]")),
    Case("weight_3x3", call(w=rnd(96, 3, 3, 3)), shape_msg("weight", W_SHAPE, "[96, 3, 3, 3]")),
    # ---- bias shape
    Case("bias_95", call(b=rnd(95)), bias_msg(96, "[95]")),
    Case("bias_2d", call(b=rnd(1, 96)), bias_msg(96, "[1, 96]")),
    Case("bias_0d", call(b=rnd()), bias_msg(96, "[]")),
    Case("bias_96_weight_64", call(w=rnd(64, 3, 11, 11), b=rnd(96)), bias_msg(64, "[96]")),
    Case("bias_64_weight_96", call(b=rnd(64)), bias_msg(96, "[64]")),
    # ---- padding: 0 to 5, and the input must cover the kernel at that padding
    Case("padding_minus_1", call(padding=-1), padding_msg(-1)),
    Case("padding_6", call(padding=6), padding_msg(6)),
    Case("padding_7_relu", call(padding=7, relu=True), padding_msg(7)),
    Case("padding_6_weight_64", call(w=rnd(64, 3, 11, 11), b=rnd(64), padding=6), padding_msg(6)),
    Case("input_h10_padding_0", call(x=rnd(2, 3, 10, 23), padding=0), hw_msg("[2, 3, 10, 23]", 11, 0)),
    Case("input_w8_padding_1", call(x=rnd(2, 3, 19, 8), padding=1), hw_msg("[2, 3, 19, 8]", 9, 1)),
    # ---- unsupported dtypes (input, weight, bias)
    *[Case(f"input_{dt}".replace("torch.", ""), call(x=rnd(2, 3, 19, 23, dtype=dt),
                                                     w=rnd(96, 3, 11, 11, dtype=dt)),
           dtype_msg("input", name)) for dt, name in BAD_DTYPES],
    *[Case(f"weight_{dt}".replace("torch.", ""), call(w=rnd(96, 3, 11, 11, dtype=dt)),
           dtype_msg("weight", name)) for dt, name in BAD_DTYPES],
    Case("bias_float64", call(b=rnd(96, dtype=torch.float64)), dtype_msg("bias", "float64")),
    Case("bias_int64", call(b=rnd(96, dtype=torch.int64)), dtype_msg("bias", "int64")),
    # ---- mixed (supported) dtypes
    Case("input_f32_weight_f16", call(w=rnd(96, 3, 11, 11, dtype=torch.float16)),
         r"^alexconv::conv1: weight must have the input's dtype float32, got float16$"),
    Case("input_f16_weight_bf16", call(x=rnd(2, 3, 19, 23, dtype=torch.float16),
                                       w=rnd(96, 3, 11, 11, dtype=torch.bfloat16)),
         r"^alexconv::conv1: weight must have the input's dtype float16, got bfloat16$"),
    Case("bias_bf16", call(b=rnd(96, dtype=torch.bfloat16)),
         r"^alexconv::conv1: bias must have the input's dtype float32, got bfloat16$"),
    # ---- mixed devices (the dispatcher picks the CUDA kernel, which must check)
    Case("input_cuda_weight_cpu", call(w=on("cpu", (96, 3, 11, 11))),
         r"^alexconv::conv1: weight must be on the input's device cuda:0, got cpu$", ("cuda",)),
    Case("input_cpu_weight_cuda", call(x=on("cpu", (2, 3, 19, 23))),
         r"^alexconv::conv1: weight must be on the input's device cpu, got cuda:0$", ("cuda",)),
    Case("bias_cpu", call(b=on("cpu", (96,))),
         r"^alexconv::conv1: bias must be on the input's device cuda:0, got cpu$", ("cuda",)),
    Case("bias_cuda1", call(b=on("cuda:1", (96,))),
         r"^alexconv::conv1: bias must be on the input's device cuda:0, got cuda:1$", ("cuda",),
         [TWO_GPUS]),
    Case("weight_cuda1", call(w=on("cuda:1", (96, 3, 11, 11))),
         r"^alexconv::conv1: weight must be on the input's device cuda:0, got cuda:1$", ("cuda",),
         [TWO_GPUS]),
    Case("input_meta_weight_cpu", call(w=on("cpu", (96, 3, 11, 11))),
         r"^alexconv::conv1: weight must be on the input's device meta, got cpu$", ("meta",)),
    # ---- non-dense tensors: their dispatch keys reach op/unsupported/, which names the argument
    Case("input_sparse_coo", call(x=lambda d: torch.randn(2, 3, 19, 23, device=d).to_sparse()),
         r"^alexconv::conv1: input must be a dense \(strided\) tensor, got layout Sparse",
         ("cpu", "cuda")),
    Case("weight_sparse_coo", call(w=lambda d: torch.randn(96, 3, 11, 11, device=d).to_sparse()),
         r"^alexconv::conv1: weight must be a dense \(strided\) tensor, got layout Sparse",
         ("cpu", "cuda")),
    Case("bias_sparse_coo", call(b=lambda d: torch.randn(96, device=d).to_sparse()),
         r"^alexconv::conv1: bias must be a dense \(strided\) tensor, got layout Sparse",
         ("cpu", "cuda")),
    Case("input_nested", call(x=nested((3, 19, 23), (3, 27, 31))),
         r"^alexconv::conv1: input must be a dense \(strided\) tensor, got a nested tensor$", ("cpu", "cuda")),
    Case("input_nested_requires_grad", call(x=lambda d: nested((3, 19, 23))(d).requires_grad_()),
         r"^alexconv::conv1: input must be a dense \(strided\) tensor, got a nested tensor$", ("cpu", "cuda")),
    Case("weight_nested", call(w=nested((96, 3, 11, 11))),
         r"^alexconv::conv1: weight must be a dense \(strided\) tensor, got a nested tensor$", ("cpu", "cuda")),
    Case("bias_nested", call(b=nested((96,))),
         r"^alexconv::conv1: bias must be a dense \(strided\) tensor, got a nested tensor$", ("cpu", "cuda")),
    Case("input_jagged", call(x=nested((3, 19, 23), (3, 27, 23), layout=getattr(torch, "jagged", None))),
         r"^alexconv::conv1: input must be a dense \(strided\) tensor, got layout Jagged$", ("cpu", "cuda"),
         marks=[requires("jagged_layout")]),
    Case("input_mkldnn", call(x=mkldnn((2, 3, 19, 23))),
         r"^alexconv::conv1: input must be a dense \(strided\) tensor, got layout Mkldnn$", ("cpu",)),
    Case("weight_mkldnn", call(w=mkldnn((96, 3, 11, 11))),
         r"^alexconv::conv1: weight must be a dense \(strided\) tensor, got layout Mkldnn$", ("cpu",)),
    Case("input_quantized", call(x=quantized((2, 3, 19, 23))),
         r"^alexconv::conv1: input must not be quantized, got dtype quint8", ("cpu", "cuda")),
    Case("weight_quantized", call(w=quantized((96, 3, 11, 11))),
         r"^alexconv::conv1: weight must not be quantized, got dtype quint8", ("cpu", "cuda")),
]
assert len({c.id for c in CASES}) == len(CASES) >= 25


def case_params():
    device_marks = {p.values[0]: p.marks for p in device_params()}
    device_marks["meta"] = []
    return [
        pytest.param(case, device, id=f"{case.id}-{device}",
                     marks=[*device_marks[device], *case.marks])
        for case in CASES for device in case.devices
    ]


def check_valid_call(device):
    """A correct call right after a rejected one: nothing was left broken."""
    x = make_input(2, 31, 27, device=device)
    w, b = make_weight(device=device)
    if device == "meta":
        out = alexconv.conv1(x, w, b)
        assert out.shape == (2, 96, 7, 6) and out.dtype == x.dtype and out.is_meta
    else:
        assert_matches_reference(conv1(x, w, b), x, w, b)


@pytest.mark.parametrize("case,device", case_params())
def test_invalid_call_is_rejected_with_named_message(case, device):
    args, kwargs = case.build(device)
    with pytest.raises(RuntimeError, match=case.match):
        alexconv.conv1(*args, **kwargs)
    check_valid_call(device)


@pytest.mark.parametrize("case", [c for c in CASES if "cpu" in c.devices and "meta" in c.devices],
                         ids=lambda c: c.id)
def test_meta_and_cpu_messages_agree(case):
    """The Meta kernel (used by torch.compile/export) rejects exactly what CPU rejects."""
    cpu_args, kw = case.build("cpu")
    meta_args = tuple(None if a is None else a.to("meta") for a in cpu_args)
    messages = []
    for args in (cpu_args, meta_args):
        with pytest.raises(RuntimeError) as info:
            alexconv.conv1(*args, **kw)
        messages.append(str(info.value).splitlines()[0].replace("meta", "cpu"))
    assert messages[0] == messages[1]


# ---------------------------------------------------------------- valid meta inputs

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(0, 3, 7, 7), (1, 3, 7, 7), (3, 3, 224, 224), (2, 3, 8, 300),
                                   (1, 3, 227, 11)])
@pytest.mark.parametrize("channels_last", [False, True])
def test_meta_gives_shape_dtype_and_layout(shape, dtype, channels_last):
    """Shapes/dtype/memory format from the Meta kernel match F.conv2d on meta tensors."""
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = torch.empty(shape, device="meta", dtype=dtype).contiguous(memory_format=fmt)
    w = torch.empty(96, 3, 11, 11, device="meta", dtype=dtype)
    b = torch.empty(96, device="meta", dtype=dtype)
    out = alexconv.conv1(x, w, b)
    ref = F.conv2d(x, w, b, stride=4, padding=2)
    assert out.is_meta and out.dtype == dtype
    assert out.shape == ref.shape == (shape[0], 96, (shape[2] - 7) // 4 + 1, (shape[3] - 7) // 4 + 1)
    assert out.is_contiguous(memory_format=expected_memory_format(x, w))


# ---------------------------------------------------------------- valid but unusual inputs

def overlapping_view(device):
    """Rows overlap in memory: stride(H)=3 < W=20, and channels share storage too."""
    base = torch.randn(2 * 60 + 2 * 40 + 3 * 21 + 20, device=device)
    x = base.as_strided((2, 3, 21, 20), (60, 40, 3, 1), 1)
    assert x.stride(2) < x.shape[3]
    return x


def transposed_hw(device):
    return torch.randn(2, 3, 29, 17, device=device).transpose(2, 3)


UNUSUAL = {
    "batch0": lambda d: (torch.randn(0, 3, 32, 32, device=d), None),
    "h7_w7": lambda d: (torch.randn(3, 3, 7, 7, device=d), None),
    "h7_w200": lambda d: (torch.randn(1, 3, 7, 200, device=d), None),
    "sliced": lambda d: (make_input(2, 33, 21, device=d, layout="sliced"), None),
    "channels_last": lambda d: (make_input(2, 33, 21, device=d, layout="channels_last"), None),
    "transposed_hw": lambda d: (transposed_hw(d), None),
    "batch_expanded_zero_stride": lambda d: (torch.randn(1, 3, 25, 25, device=d).expand(4, -1, -1, -1), None),
    "overlapping_strides": lambda d: (overlapping_view(d), None),
    "weight_zero_stride": lambda d: (None, (torch.randn(96, 3, 11, 1, device=d) * 0.05).expand(96, 3, 11, 11)),
    "weight_expanded_channels": lambda d: (None, (torch.randn(96, 1, 11, 11, device=d) * 0.05).expand(96, 3, 11, 11)),
    "weight_channels_last": lambda d: (None, make_weight(device=d)[0].contiguous(memory_format=torch.channels_last)),
    "weight_sliced": lambda d: (None, (torch.randn(96, 3, 11, 21, device=d) * 0.05)[..., ::2]),
}


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("kind", list(UNUSUAL))
def test_unusual_but_valid_inputs(kind, device):
    x, w = UNUSUAL[kind](device)
    x = make_input(2, 19, 23, device=device) if x is None else x
    w_default, b = make_weight(device=device)
    w = w_default if w is None else w
    assert kind in ("batch0", "h7_w7", "h7_w200") or not (x.is_contiguous() and w.is_contiguous())
    assert kind != "weight_zero_stride" or w.stride(3) == 0
    out = conv1(x, w, b)
    assert_matches_reference(out, x, w, b)
    assert out.is_contiguous(memory_format=expected_memory_format(x, w))


@pytest.mark.parametrize("device", device_params())
def test_zero_stride_bias(device):
    x = make_input(2, 19, 23, device=device)
    w, _ = make_weight(device=device)
    b = torch.randn(1, device=device).expand(96)
    assert_matches_reference(conv1(x, w, b), x, w, b)


def assert_special_values_like_conv2d(out, x, w, b, limit):
    """NaN and +-Inf exactly where (and with the sign) the float64 F.conv2d has them; the
    finite rest within `limit` relative norm error."""
    ref = reference(x, w, b)
    assert ref.isnan().any() and ref.isinf().any()
    assert torch.equal(out.isnan(), ref.isnan()), "NaN positions differ from F.conv2d"
    assert torch.equal(out.isinf(), ref.isinf()), "Inf positions differ from F.conv2d"
    inf = ref.isinf()
    assert torch.equal(out[inf].double(), ref[inf]), "Inf signs differ from F.conv2d"
    finite = ref.isfinite()
    # Enough finite outputs for the error check to mean something: the injected values'
    # windows can cover half of a small output (one seed in a device run made exactly half).
    assert finite.sum() >= ref.numel() // 4
    assert rel_norm_error(out[finite], ref[finite]) <= limit


def inject_nonfinite(x, generator):
    """NaN, +Inf and -Inf at random places and at the first and last image's corners, plus a
    +Inf/-Inf pair under the same windows of image 1 (-> NaN there)."""
    flat = x.view(-1)
    picks = torch.randperm(flat.numel(), generator=generator)[:12].tolist()
    picks += [0, flat.numel() - 1]
    for i, p in enumerate(picks):
        flat[p] = [float("nan"), float("inf"), float("-inf")][i % 3]
    x[1, 0, 20, 20] = float("inf")
    x[1, 0, 21, 22] = float("-inf")


def special_values_limit(dtype, device, allow_tf32, infinite_weight=False):
    """Relative norm error allowed on the finite outputs. An infinite weight makes the
    fp32-accurate CUDA path split its inputs toward zero as well (mma::Round): about
    1.3e-5 instead of 7.6e-6 (emulated), inside the 1e-4 contract but over 1e-5."""
    if device == "cuda":
        fp32 = 1e-3 if allow_tf32 else 1e-4 if infinite_weight else 1e-5
    else:
        fp32 = 1e-5
    return {torch.float32: fp32, torch.float16: 2e-3, torch.bfloat16: 1e-2}[dtype]


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("allow_tf32", [False, True], ids=["ieee", "tf32"])
def test_nan_and_inf_propagate_like_conv2d(device, dtype, allow_tf32, generator):
    """NaN/Inf land exactly where the float64 F.conv2d puts them; other values stay right.
    Injections cluster so some outputs see +Inf and -Inf (-> NaN), and touch the borders."""
    x = make_input(2, 45, 38, dtype=dtype, device=device, generator=generator)
    w, b = make_weight(dtype, device, generator=generator)
    inject_nonfinite(x, generator)
    limit = special_values_limit(dtype, device, allow_tf32)
    assert_special_values_like_conv2d(conv1(x, w, b, allow_tf32=allow_tf32), x, w, b, limit)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("allow_tf32", [False, True], ids=["ieee", "tf32"])
def test_infinite_and_nan_weights_propagate_like_conv2d(device, dtype, allow_tf32, generator):
    """The fp32-accurate CUDA path splits operands in two; an infinite weight must still give
    +-inf (not inf - inf = NaN) wherever F.conv2d does, and a NaN weight NaN. Two of the
    three lie over the padding for the first row or column of outputs (0 * inf = NaN)."""
    x = make_input(2, 45, 38, dtype=dtype, device=device, generator=generator)
    w, b = make_weight(dtype, device, generator=generator)
    w[5, 0, 3, 4] = float("inf")
    w[17, 2, 10, 0] = float("-inf")
    w[40, 1, 0, 0] = float("nan")
    limit = special_values_limit(dtype, device, allow_tf32, infinite_weight=True)
    assert_special_values_like_conv2d(conv1(x, w, b, allow_tf32=allow_tf32), x, w, b, limit)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("allow_tf32", [False, True], ids=["ieee", "tf32"])
def test_nonfinite_inputs_with_nonfinite_weights_over_padding(device, dtype, allow_tf32, generator):
    """Tiles whose input holds Inf or NaN take an exact fallback on CUDA; it must still
    multiply the padding, so an infinite or NaN weight over it gives NaN as in F.conv2d.
    47 x 39 makes the last windows reach the bottom and right padding too."""
    x = make_input(2, 47, 39, dtype=dtype, device=device, generator=generator)
    w, b = make_weight(dtype, device, generator=generator)
    inject_nonfinite(x, generator)
    w[5, 0, 0, 0] = float("inf")  # top-left padding
    w[17, 2, 10, 10] = float("-inf")  # bottom-right padding
    w[40, 1, 0, 5] = float("nan")  # top padding only
    limit = special_values_limit(dtype, device, allow_tf32, infinite_weight=True)
    assert_special_values_like_conv2d(conv1(x, w, b, allow_tf32=allow_tf32), x, w, b, limit)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("allow_tf32", [False, True], ids=["ieee", "tf32"])
def test_finite_inputs_at_the_top_of_float32s_range(device, allow_tf32, generator):
    """Finite inputs past bf16's largest finite value (0x1.fep127) give the finite outputs
    F.conv2d gives: from 0x1.ff0p127 on they round to Inf in bf16, which the fp32-accurate CUDA
    split must not multiply (mma::split_bf16x2 clamps its high part, the space-to-depth
    producers send such a tile to the exact store); from 0x1.ffep127 on cvt.rna rounds them to
    Inf in TF32, which mma::to_tf32 keeps at TF32's largest finite value. One such value per
    window region, the weights' ~0.05 keep every output finite."""
    x = make_input(2, 45, 38, dtype=torch.float32, device=device, generator=generator)
    w, b = make_weight(torch.float32, device, generator=generator)
    top = torch.finfo(torch.float32).max
    for (n, c, y, xx), v in zip([(0, 0, 6, 7), (0, 1, 30, 20), (1, 2, 5, 30), (1, 0, 40, 3), (0, 2, 22, 33)],
                                [top, -top, float.fromhex("0x1.ff0p127"), -float.fromhex("0x1.ff8p127"),
                                 float.fromhex("0x1.fefffep127")]):
        x[n, c, y, xx] = v
    ref = reference(x, w, b)
    assert ref.isfinite().all() and ref.abs().max() > 1e36
    assert_matches_reference(conv1(x, w, b, allow_tf32=allow_tf32), x, w, b, allow_tf32=allow_tf32)


@requires_cuda
@pytest.mark.cuda
def test_cuda_valid_after_device_mismatch_keeps_current_device():
    """A rejected mixed-device call neither changes the current device nor poisons the next call."""
    before = torch.cuda.current_device()
    with pytest.raises(RuntimeError, match="weight must be on the input's device"):
        alexconv.conv1(torch.randn(1, 3, 16, 16, device="cuda"), torch.randn(96, 3, 11, 11))
    assert torch.cuda.current_device() == before
    check_valid_call("cuda")
