"""The CPU backend's own structure: bands of output rows and columns, threads, and its paths:
one micro-kernel per instruction set (baseline, avx2, avx512; avx512_bf16 adds bfloat16 dot
products where the CPU has AVX512-BF16, avx512_bf16_emulated the same pairs of taps through
FMAs on any AVX-512 CPU), chosen like ATen's own (ATEN_CPU_CAPABILITY steers both), or ATen's
convolution. ALEXCONV_CPU_KERNEL forces a path; it is read once per process, so each forced
path runs in a child, which runs this module's checks and a short fuzz on it."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import pytest
import torch

import alexconv
from conftest import (assert_matches_reference, child_env, conv1, cpu_flags, make_input, make_weight, reference,
                      requires)

HERE = os.path.dirname(os.path.abspath(__file__))
PATHS = ["baseline", "avx2", "avx512", "avx512_bf16", "avx512_bf16_emulated", "aten"]
# The paths that run bfloat16 as pairs of taps (float32 and float16 as avx512 does).
PAIR_PATHS = ("avx512_bf16", "avx512_bf16_emulated")


def kernel_name(path: str, dtype: torch.dtype = torch.float32) -> str:
    """What conv1_kernel says for a call of `dtype` on `path`."""
    if path in PAIR_PATHS and dtype != torch.bfloat16:
        return "cpu_avx512"
    return "aten" if path == "aten" else f"cpu_{path}"


# The path this process runs when a parent test forced one (None: the op chooses).
FORCED = os.environ.get("ALEXCONV_CPU_KERNEL") or None
if FORCED == "auto":
    FORCED = None

# Bands are at most 8 output rows by 64 columns, as many as the threads share evenly, their rows
# and columns split evenly; micro-tiles are 6 output pixels in any rows (SSE2, AVX2) or up to 12
# of one row (AVX-512, each row split evenly). These output sizes sit on and just past those
# edges: (N, H, W) -> output rows x columns.
BAND_SHAPES = [
    (1, 35, 259),  # 8 x 64: one band's full width
    (1, 39, 263),  # 9 x 65: one row and one column past a band (column bands of 32 and 33)
    (3, 71, 519),  # 17 x 129: three column bands
    (2, 7, 7),     # 1 x 1: a micro-tile with one real pixel
    (1, 227, 27),  # 56 x 6: one 6-pixel micro-tile per row, AVX-512 too
    (4, 44, 60),   # 10 x 14: two row bands; rows of 14 as two AVX-512 tiles of 7
    (1, 71, 71),   # 17 x 17: three row bands (four on 2 threads); rows as tiles of 8 and 9
    (1, 51, 51),   # 12 x 12: rows of exactly one 12-pixel micro-tile
]
# Output channels around the channel blocks: 8 (SSE2), 16 (AVX2) and 32 (AVX-512) per block.
CHANNELS = [1, 7, 16, 17, 31, 32, 33, 48, 64, 96, 100, 255, 256]


def current_path() -> str:
    """The path this process's calls take (float32; bfloat16 may go to ATen, see below)."""
    x, w = torch.rand(1, 3, 11, 11), torch.rand(8, 3, 11, 11)
    return alexconv.conv1_kernel(x, w)


def bfloat16_as_pairs() -> bool:
    """Whether this process's bfloat16 calls run as pairs of taps (their own summation order)."""
    x, w = torch.rand(1, 3, 11, 11, dtype=torch.bfloat16), torch.rand(8, 3, 11, 11, dtype=torch.bfloat16)
    return alexconv.conv1_kernel(x, w).startswith("cpu_avx512_bf16")


def rounded_paths_exact() -> bool:
    """Our micro-kernels round 16-bit outputs from the float32 result of the same sum; ATen's
    16-bit convolution sums in its own order."""
    return current_path() != "aten"


@pytest.fixture
def restore_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("n,h,w", BAND_SHAPES, ids=lambda v: str(v))
def test_band_edges_match_reference(n, h, w, dtype, layout, threads, restore_threads, generator):
    torch.set_num_threads(threads)
    x = make_input(n, h, w, dtype, "cpu", layout, generator=generator)
    wt, b = make_weight(dtype, "cpu", generator=generator)
    assert_matches_reference(conv1(x, wt, b), x, wt, b)


@pytest.mark.parametrize("padding", [0, 1, 2, 3, 4, 5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_channel_blocks_and_padding(padding, dtype, generator):
    """Every channel count around the blocks' edges, with and without bias and relu, at each
    padding; batch 0 and 1 and a sliced (non-contiguous) input among them."""
    for i, channels in enumerate(CHANNELS):
        bias, relu = i % 2 == 0, i % 3 == 0
        layout = ("contiguous", "channels_last", "sliced")[i % 3]
        n = (1, 2, 0)[i % 3] if i < 9 else 1
        x = make_input(n, 23 + i, 31 - i, dtype, "cpu", layout, generator=generator)
        w, b = make_weight(dtype, "cpu", bias, generator=generator, out_channels=channels)
        out = conv1(x, w, b, padding=padding, relu=relu)
        assert_matches_reference(out, x, w, b, padding=padding, relu=relu)


def test_same_bits_for_any_thread_count(restore_threads, generator):
    """Band heights follow the thread count; each output is still summed in one order."""
    x = make_input(1, 224, 224, generator=generator)
    wt, b = make_weight(generator=generator)
    outs = []
    for threads in (1, 2, 3):
        torch.set_num_threads(threads)
        outs.append(conv1(x, wt, b))
    assert_matches_reference(outs[0], x, wt, b)
    assert all(torch.equal(outs[0], o) for o in outs[1:])


def bits_equal(a, b):
    """Bitwise equality, any NaN matching any NaN (payloads may differ: vcvtps2ph keeps them)."""
    if a.dtype == torch.float32:
        same = a.view(torch.int32) == b.view(torch.int32)
    else:
        same = a.view(torch.int16) == b.view(torch.int16)
    return bool((same | (a.isnan() & b.isnan())).all())


def relu_rule(t):
    """at::relu's rule, v < 0 ? 0 : v (-0.0 and NaN unchanged), on any dtype (torch 1.13 has no
    float16 relu on CPU)."""
    return torch.where(t < 0, torch.zeros_like(t), t)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("relu", [False, True], ids=["linear", "relu"])
def test_16bit_outputs_are_the_float32_result_rounded(dtype, relu, generator):
    """The kernel sums 16-bit operands in float32 (exact products) and rounds each output once
    to nearest even, as Tensor.to does, then applies relu to the rounded value (-0.0 where a
    small negative value rounds to zero, as F.relu of the unfused op gives). Scales reach the
    subnormal, tie and overflow ranges of both formats; outputs of every layout."""
    if not rounded_paths_exact():
        pytest.skip("ATen's 16-bit convolution sums in its own order")
    # bfloat16 as pairs of taps sums in pair order (the float32 call cannot give its bits): the
    # contract instead, and the ties below, whose sums are exact in either order.
    pairs = dtype == torch.bfloat16 and bfloat16_as_pairs()
    info = torch.finfo(dtype)
    for scale in (1.0, info.tiny * 64, info.tiny / 64, info.max / 8, info.max):
        if pairs and scale > 1.0:  # where sums overflow depends on their order
            continue
        for layout in ("contiguous", "channels_last"):
            x = (make_input(2, 43, 47, torch.float32, "cpu", layout, generator=generator) * scale).to(dtype)
            w, b = make_weight(dtype, "cpu", generator=generator, out_channels=96)
            out = conv1(x, w, b, relu=relu)
            if pairs:
                assert_matches_reference(out, x, w, b, relu=relu)
                continue
            exact = conv1(x.float(), w.float(), b.float()).to(dtype)
            assert bits_equal(out, relu_rule(exact) if relu else exact), (scale, layout)
    # Ties: sums of two terms a + c * 2^-k land halfway between 16-bit neighbours, where round
    # to nearest even decides; the other taps' weights are zero.
    mantissa = {torch.float16: 10, torch.bfloat16: 7}[dtype]  # stored significand bits
    x = torch.randint(-64, 64, (3, 3, 30, 30), generator=generator).to(dtype) * 8
    w = torch.zeros(64, 3, 11, 11)
    w[:, 0, 0, 0] = 1
    w[:, 1, 0, 0] = torch.tensor([2.0 ** -(mantissa + k) for k in range(-2, 2)]).repeat(16)
    w = w.to(dtype)
    out = conv1(x, w, None, padding=0, relu=relu)
    exact = conv1(x.float(), w.float(), None, padding=0).to(dtype)
    assert bits_equal(out, relu_rule(exact) if relu else exact)


def run_child(args, timeout=900, **env):
    return subprocess.run([sys.executable, *args], env=child_env(**env), capture_output=True, text=True,
                          timeout=timeout, cwd=HERE)


@functools.lru_cache(maxsize=None)
def path_unavailable(path):
    """None where this CPU and build run `path`; otherwise the op's reason (the skip's)."""
    done = run_child(["-c", "import torch, alexconv; print(alexconv.conv1_kernel("
                            "torch.rand(1, 3, 11, 11), torch.rand(8, 3, 11, 11)))"],
                     timeout=120, ALEXCONV_CPU_KERNEL=path)
    if done.returncode == 0:
        assert done.stdout.split()[-1] == kernel_name(path), done.stdout
        return None
    for line in done.stderr.splitlines():
        if "ALEXCONV_CPU_KERNEL=" in line and ("lacks" in line or "has no" in line):
            return line.split("alexconv::conv1: ", 1)[-1].strip()
    raise AssertionError(done.stderr[-3000:])


@pytest.mark.slow  # this module and a short fuzz again in a child process per path
@pytest.mark.skipif(FORCED is not None, reason="the parent runs each path")
@pytest.mark.parametrize("path", PATHS)
def test_forced_path(path):
    """Each path this CPU can run, forced with ALEXCONV_CPU_KERNEL: conv1_kernel names it, and
    this module's checks plus a short fuzz (test_fuzz.py, profile 'path') pass on it."""
    reason = path_unavailable(path)
    if reason:
        pytest.skip(reason)
    suite = run_child(["-m", "pytest", "-q", "-p", "no:cacheprovider",
                       os.path.join(HERE, "test_cpu_kernel.py"), os.path.join(HERE, "test_fuzz.py"),
                       "-k", "not forced_path and not cuda"],
                      ALEXCONV_CPU_KERNEL=path, ALEXCONV_FUZZ_PROFILE="path")
    assert suite.returncode == 0 and " passed" in suite.stdout, suite.stdout[-4000:] + suite.stderr[-2000:]


def test_forced_path_is_reported():
    """Under a forced path, conv1_kernel names it for every dtype (bfloat16 included; the pair
    paths run float32 and float16 as avx512)."""
    if FORCED is None:
        pytest.skip("runs in the children of test_forced_path")
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x, w = torch.rand(2, 3, 20, 20, dtype=dtype), torch.rand(64, 3, 11, 11, dtype=dtype)
        assert alexconv.conv1_kernel(x, w) == kernel_name(FORCED, dtype)


@pytest.mark.skipif(FORCED is not None, reason="the parent checks it")
def test_unknown_forced_path_fails_clearly():
    done = run_child(["-c", """
import torch, alexconv
x, w = torch.rand(1, 3, 11, 11), torch.rand(8, 3, 11, 11)
for fn in (alexconv.conv1, alexconv.conv1_kernel):
    try:
        fn(x, w)
    except RuntimeError as e:
        print(str(e).splitlines()[0])
"""], timeout=120, ALEXCONV_CPU_KERNEL="avx1024")
    assert done.returncode == 0, done.stderr
    expected = ("ALEXCONV_CPU_KERNEL must be auto, baseline, avx2, avx512, avx512_bf16, avx512_bf16_emulated "
                "or aten, got 'avx1024'")
    assert done.stdout.count(expected) == 2, done.stdout


@pytest.mark.skipif(FORCED is not None, reason="the parent checks it")
@requires("cpu_capability")
@pytest.mark.parametrize("capability", ["default", "avx2", "avx512", None])
def test_auto_path_follows_aten(capability):
    """Unforced, every dtype takes the micro-kernel of ATen's CPU capability (ATEN_CPU_CAPABILITY
    steers both), bfloat16 too on CPUs with bfloat16 dot products (AVX512-BF16, AMX-BF16), where
    oneDNN's bfloat16 convolution gave wrong results (docs/perf-notes.md, "The CPU kernel"): as
    pairs of taps where the CPU has AVX512-BF16."""
    env = {} if capability is None else {"ATEN_CPU_CAPABILITY": capability}
    done = run_child(["-c", """
import json, torch, alexconv
x, w = torch.rand(1, 3, 11, 11), torch.rand(8, 3, 11, 11)
print(json.dumps([torch.backends.cpu.get_cpu_capability()] +
                 [alexconv.conv1_kernel(x.to(d), w.to(d)) for d in (torch.float32, torch.float16, torch.bfloat16)]))
"""], timeout=120, **env)
    assert done.returncode == 0, done.stderr[-3000:]
    aten_capability, fp32, fp16, bf16 = json.loads(done.stdout.splitlines()[-1])
    expected = {"AVX512": "avx512", "AVX2": "avx2"}.get(aten_capability, "baseline")
    if expected == "avx512" and not path_unavailable("avx512_bf16") and "amx_bf16" not in cpu_flags():
        expected = "avx512_bf16"  # without AMX: the dot products (conv1_cpu.cpp, choose_path)
    if expected == "avx512" and path_unavailable("avx512"):
        expected = "avx2"
    if expected == "avx2" and path_unavailable("avx2"):
        expected = "baseline"
    assert (fp32, fp16, bf16) == tuple(kernel_name(expected, d) for d in (torch.float32, torch.float16,
                                                                          torch.bfloat16)), aten_capability


@pytest.mark.skipif(FORCED is not None, reason="the parent checks it")
def test_paths_agree_where_they_should(tmp_path, generator):
    """Every path meets the contract on one case; the AVX2 and AVX-512 kernels give the same
    bits (each output is one FMA chain in tap order from the bias, whatever the vector width),
    and the baseline kernel (SSE2: multiply, then add) other bits than they do."""
    x = make_input(2, 100, 100, generator=generator)
    w, b = make_weight(generator=generator)
    torch.save((x, w, b), tmp_path / "case.pt")
    outs = {}
    dtypes = (torch.float32, torch.float16, torch.bfloat16)
    for path in PATHS:
        if path_unavailable(path):
            continue
        out = tmp_path / f"{path}.pt"
        done = run_child(["-c", f"""
import torch, alexconv
x, w, b = torch.load({str(tmp_path / 'case.pt')!r})
torch.save([alexconv.conv1(x.to(d), w.to(d), b.to(d), relu=True) for d in {dtypes!r}], {str(out)!r})
"""], timeout=300, ALEXCONV_CPU_KERNEL=path)
        assert done.returncode == 0, done.stderr[-3000:]
        for dtype, result in zip(dtypes, torch.load(out)):
            outs[path, dtype] = result
            xd, wd, bd = (t.to(dtype) for t in (x, w, b))
            assert_matches_reference(result, xd, wd, bd, relu=True)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        if ("avx2", dtype) in outs and ("avx512", dtype) in outs:
            assert bits_equal(outs["avx2", dtype], outs["avx512", dtype]), dtype
    # The pair paths: float32 and float16 are avx512's; bfloat16 sums in pair order, the same
    # with the dot products as with their emulation (no subnormal here).
    for path in PAIR_PATHS:
        for dtype in (torch.float32, torch.float16):
            if (path, dtype) in outs and ("avx512", dtype) in outs:
                assert bits_equal(outs[path, dtype], outs["avx512", dtype]), (path, dtype)
    if all((path, torch.bfloat16) in outs for path in PAIR_PATHS):
        assert bits_equal(*(outs[path, torch.bfloat16] for path in PAIR_PATHS))
    if ("avx2", torch.float32) in outs:
        assert not torch.equal(outs["baseline", torch.float32], outs["avx2", torch.float32])


@pytest.mark.parametrize("relu", [False, True], ids=["linear", "relu"])
def test_bfloat16_rows_of_tiny_magnitudes(relu, generator):
    """bfloat16 dot products flush subnormal operands and sums: output rows whose windows hold
    only values near 2^-100 (beside rows of ordinary ones) take the float kernel on the pair
    paths, and every path keeps the contract on both kinds of rows."""
    x = make_input(2, 67, 45, torch.float32, "cpu", generator=generator)
    x[:, :, :30] *= 2.0 ** -100
    x = x.to(torch.bfloat16)
    w, b = make_weight(torch.bfloat16, "cpu", bias=False, generator=generator)
    out = conv1(x, w, b, relu=relu)
    assert_matches_reference(out, x, w, b, relu=relu)
    # Rows 0-5 read input rows 0-28 only: their own contract, which the others' norm would hide.
    tiny = reference(x, w, b, 2, relu)[:, :, :6]
    assert tiny.abs().max() < 2.0 ** -90
    assert ((out[:, :, :6].double() - tiny).norm() / tiny.norm()).item() <= 1e-2
