"""Shared test helpers: inputs, the float64 reference, the numerical contract, poisoning."""

from __future__ import annotations

import collections
import contextlib
import math
import os
import pathlib
import secrets
import subprocess
import sysconfig

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch._prims_common import suggest_memory_format

import alexconv
from alexconv import _compat

HAS_CUDA = torch.cuda.is_available()
# The GPU check (scripts/device/device_check.sh) sets this: there, a CUDA runtime that cannot see
# its GPU must fail the run, not skip every CUDA test.
if os.environ.get("ALEXCONV_REQUIRE_CUDA") == "1" and not HAS_CUDA:
    raise pytest.UsageError("ALEXCONV_REQUIRE_CUDA=1 but torch.cuda.is_available() is False")
requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")


def requires(capability):
    """Skips a test where torch lacks `capability` (alexconv._compat decides, and the reason names it)."""
    return pytest.mark.skipif(not _compat.has(capability), reason=_compat.missing_reason(capability))


def skip_unless(capability):
    """Inside a test: skips it, naming the capability, where torch lacks it."""
    if not _compat.has(capability):
        pytest.skip(_compat.missing_reason(capability))


def pytest_report_header(config):
    lacking = [_compat.missing_reason(c) for c in _compat.missing()]
    lines = [f"alexconv: torch {torch.__version__}; " + ("; ".join(lacking) if lacking else "every capability")]
    if not _compat.has("fill_uninitialized_memory"):
        lines.append("alexconv: outputs are not NaN-poisoned here: an element a kernel leaves unwritten "
                     "shows only where it differs from the reference")
    return lines


def pytest_report_teststatus(report, config):
    """Skipped tests print no letter in the progress line (without a GPU, a thousand CUDA cases
    would print a wall of 's'); their count is in the closing line, their reasons below."""
    if report.skipped and not hasattr(report, "wasxfail"):
        return "skipped", "", "SKIPPED"
    return None


def _runs_slow_tests(config) -> bool:
    """Tests marked slow run in CI, where asked (ALEXCONV_SLOW_TESTS=1), where -m chooses the tests
    or a test is named (path::test); a plain run here leaves them out."""
    return (os.environ.get("CI") == "true" or os.environ.get("ALEXCONV_SLOW_TESTS") == "1"
            or bool(config.getoption("markexpr")) or any("::" in arg for arg in config.args))


def pytest_collection_modifyitems(config, items):
    if _runs_slow_tests(config):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]
    config.stash[_SLOW_LEFT_OUT] = len(slow)


_SLOW_LEFT_OUT = pytest.StashKey[int]()


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return reason[len("Skipped: "):] if reason.startswith("Skipped: ") else reason


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The skips summed up by reason, one line each (-ra still lists every test), and the slow
    tests left out."""
    reasons = collections.Counter(_skip_reason(r) for r in terminalreporter.stats.get("skipped", [])
                                  if not hasattr(r, "wasxfail"))
    if reasons:
        terminalreporter.write_sep("-", f"{sum(reasons.values())} skipped, by reason")
        for reason, count in reasons.most_common():
            terminalreporter.write_line(f"{count:5d}  {reason}")
    left_out = config.stash.get(_SLOW_LEFT_OUT, 0)
    if left_out:
        terminalreporter.write_line(f"{left_out} test{'s' if left_out > 1 else ''} marked slow not run "
                                    "(deselected): CI runs them, and so does ALEXCONV_SLOW_TESTS=1 here")


# The environment as the run started (fixtures patch CXX and the like), with this environment's
# bin first on PATH: what a user who follows the README has.
_SESSION_ENV = dict(os.environ)
SCRIPTS = pathlib.Path(sysconfig.get_path("scripts"))


def user_env() -> dict:
    return dict(_SESSION_ENV, PATH=f"{SCRIPTS}{os.pathsep}{_SESSION_ENV.get('PATH', '')}")


# What the op (and ATen's CPU kernels) read once per process to pick a path.
PATH_VARIABLES = ("ALEXCONV_CPU_KERNEL", "ALEXCONV_CUDA_KERNEL", "ALEXCONV_EMULATE_DEVICE", "ATEN_CPU_CAPABILITY")


def child_env(**env) -> dict:
    """This process's environment for a child process, without the path variables this run
    may have been given, then `env`: a child picks its path from `env` alone."""
    child = {k: v for k, v in os.environ.items() if k not in PATH_VARIABLES}
    child.update(env)
    return child


@pytest.fixture(scope="session")
def readme_scratch(tmp_path_factory):
    """The folder where tests/test_readme.py follows the README."""
    return tmp_path_factory.mktemp("readme")


README_AOTI_EXPORT = "alexconv-export model.pt2"


@pytest.fixture(scope="session")
def readme_aoti_package(readme_scratch):
    """The README's `alexconv-export model.pt2`, run once as written in its walkthrough's folder:
    tests/test_readme.py checks the command, tests/test_aoti.py uses the package as its CPU
    float32 one (ModelNew under the export's default seed, 0). A package compile is 12 s."""
    from alexconv import _aoti
    if _aoti.aoti_unsupported():
        pytest.skip(f"AOTInductor: {_aoti.aoti_unsupported()}")
    res = subprocess.run(["bash", "-c", f"set -e; {README_AOTI_EXPORT}"], cwd=readme_scratch, env=user_env(),
                         capture_output=True, text=True, timeout=900)
    return readme_scratch / "model.pt2", res


DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def cpu_flags() -> set:
    """This machine's CPU flags (/proc/cpuinfo; empty where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def forced_aten_bfloat16_unreliable() -> bool:
    """ALEXCONV_CPU_KERNEL=aten is nn.Conv2d's convolution, and on CPUs with bfloat16 dot products
    (AVX512-BF16, AMX-BF16) oneDNN's bfloat16 convolution breaks the op's contract (wrong sums at
    one output column, NaN where F.conv2d in float64 has none: docs/perf-notes.md, "The CPU
    kernel"). The unforced op never takes it; the forced path is left as nn.Conv2d is."""
    return os.environ.get("ALEXCONV_CPU_KERNEL") == "aten" and bool({"avx512_bf16", "amx_bf16"} & cpu_flags())
# What alexconv.conv1_kernel names on CPU: one of our micro-kernels, or ATen's convolution
# (tests/test_cpu_kernel.py pins which, per dtype and CPU).
CPU_KERNELS = ("cpu_baseline", "cpu_avx2", "cpu_avx512", "cpu_avx512_bf16", "cpu_avx512_bf16_emulated", "aten")
LAYOUTS = ["contiguous", "channels_last", "sliced", "cropped"]


def device_params():
    """cpu always; cuda marked so that it skips where there is no GPU."""
    return [
        pytest.param("cpu", id="cpu"),
        pytest.param("cuda", id="cuda", marks=[requires_cuda, pytest.mark.cuda]),
    ]


def make_weight(dtype=torch.float32, device="cpu", bias=True, generator=None, out_channels=96):
    """nn.Conv2d's default initialisation: U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    bound = 1.0 / math.sqrt(3 * 11 * 11)
    w = (torch.rand(out_channels, 3, 11, 11, generator=generator) * 2 - 1) * bound
    b = (torch.rand(out_channels, generator=generator) * 2 - 1) * bound if bias else None
    return w.to(device, dtype), (b.to(device, dtype) if b is not None else None)


def make_input(n, h, w, dtype=torch.float32, device="cpu", layout="contiguous",
               dist="randn", generator=None):
    """Fresh random input [n, 3, h, w] in the given memory layout (never zeros)."""
    draw = torch.randn if dist == "randn" else torch.rand
    if layout == "sliced":
        # A non-contiguous view: every other column of a wider tensor, odd offset.
        big = draw(n, 3, h, 2 * w + 1, generator=generator).to(device, dtype)
        x = big[:, :, :, 1::2]
        assert (x.numel() == 0 or not x.is_contiguous()) and x.shape[-1] == w
        return x
    if layout == "cropped":
        # Unit-stride rows padded to a multiple of 8 elements plus 8: rows stay 16-byte
        # aligned while the image's right edge falls inside a 16-byte copy unit (CUDA).
        big = draw(n, 3, h, (w + 7) // 8 * 8 + 8, generator=generator).to(device, dtype)
        x = big[:, :, :, :w]
        assert x.numel() == 0 or not x.is_contiguous()
        return x
    x = draw(n, 3, h, w, generator=generator).to(device, dtype)
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    return x


def reference(x, w, b, padding=2, relu=False):
    """F.conv2d (then F.relu) in float64 on copies of the inputs: the ground truth."""
    if x.shape[0] == 0 and not _compat.has("empty_batch_conv2d"):
        w = w.contiguous()  # the same (empty) result, by a path torch 1.13 has
    out = F.conv2d(x.double(), w.double(), None if b is None else b.double(), stride=4, padding=padding)
    return F.relu(out) if relu else out


def expected_memory_format(x, w):
    """F.conv2d's rule (and the op's): channels_last if the input or the weight suggests it."""
    cl = torch.channels_last
    suggested = (suggest_memory_format(x), suggest_memory_format(w))
    return cl if cl in suggested else torch.contiguous_format


def rel_norm_error(out, ref):
    diff = (out.double() - ref).norm().item()
    denom = ref.norm().item()
    return diff / denom if denom > 0 else diff


# Per-element error bound for the rounded paths: |out - ref| <= u * |ref| + c * |x|*|w| + tiny.
# u is the output's unit roundoff (the final rounding, half an ulp), c the products' own
# error: 0 for 16-bit operands (exact in fp32) plus fp32 accumulation over <= 432 terms,
# bounded by 3e-5 (~n * 2^-24 / 3); for TF32 each operand rounds to 11 significant bits,
# 2 * 2^-11 per product. tiny is the output's subnormal spacing.
_ROUNDED_BOUND = {  # dtype, tf32 -> (u, c)
    (torch.float16, False): (2.0**-11, 3e-5),
    (torch.bfloat16, False): (2.0**-8, 3e-5),
    (torch.float32, True): (2.0**-24, 2 * 2.0**-11 + 3e-5),
}
# Where the op hands a call to ATen (cuDNN: GPUs or sizes none of our kernels can run), cuDNN's
# algorithms (Winograd, FFT, split reductions, TF32 operands truncated) round each element their
# own way: the contract there is the relative norm alone, as for nn.Conv2d itself.


def reference_magnitude(x, w, b, padding=2):
    """sum |x| * |w| + |b| per output element: the scale of its accumulation error."""
    return reference(x.abs(), w.abs(), None if b is None else b.abs(), padding)


def assert_matches_reference(out, x, w, b, allow_tf32=False, padding=2, relu=False):
    """The numerical contract of README.md, against the float64 reference, plus (for the
    rounded paths, whose contract is a norm) a per-element bound that a wrong element or
    a channel's missing bias cannot hide under. With relu the reference is F.relu of the
    convolution's; relu moves no value further from it, so the bounds stay those of the
    convolution (taken from its magnitude before the relu)."""
    unrelu = reference(x, w, b, padding)
    ref = F.relu(unrelu) if relu else unrelu
    assert out.shape == ref.shape
    assert out.dtype == x.dtype and out.device == x.device
    if out.numel() == 0:
        return 0.0, 0.0
    assert not out.isnan().any(), "output has NaN (unwritten or wrong) elements"
    err = (out.double() - ref).abs()
    max_err = err.max().item()
    rel = rel_norm_error(out, ref)
    tf32 = allow_tf32 and out.is_cuda and x.dtype == torch.float32  # no effect on 16-bit
    if x.dtype == torch.float32 and not tf32:
        assert torch.allclose(out.double(), ref, atol=1e-4, rtol=1e-4), (max_err, rel)
        return max_err, rel
    limit = {torch.float32: 1e-3, torch.float16: 2e-3, torch.bfloat16: 1e-2}[x.dtype]
    u, c = _ROUNDED_BOUND[(x.dtype, tf32)]
    if out.is_cuda and alexconv.conv1_kernel(x, w, b, allow_tf32=allow_tf32, padding=padding) == "aten":
        # cuDNN's algorithms may round partial sums to the output's precision: besides the
        # relative norm, an error up to that rounding of the terms' magnitude (an fp16 output
        # cancelled to 6.7e-5 from terms of ~0.4 came back as 2^-14: relative error 9%).
        slack = max(u, c) * reference_magnitude(x, w, b, padding).norm().item()
        diff = (out.double() - ref).norm().item()
        assert diff <= limit * ref.norm().item() + slack, (
            f"relative norm error {rel:.3g} > {limit}, beyond the terms' rounding (max abs {max_err:.3g})")
        return max_err, rel
    assert rel <= limit, f"relative norm error {rel:.3g} > {limit} (max abs {max_err:.3g})"
    info = torch.finfo(x.dtype)
    bound = u * unrelu.abs() + c * reference_magnitude(x, w, b, padding) + info.tiny * info.eps
    over = err > bound
    if over.any():
        i = int((err - bound).argmax())
        idx = tuple(int(k) for k in np.unravel_index(i, tuple(err.shape)))
        raise AssertionError(
            f"{int(over.sum())} elements past the per-element bound; worst at {idx}: "
            f"out {out[idx].item():.6g}, reference {ref[idx].item():.6g}, bound {bound[idx].item():.3g}")
    return max_err, rel


@contextlib.contextmanager
def poisoned_outputs():
    """Every new allocation (the op's output included) starts as NaN, so an
    element the kernel forgets to write shows up as NaN. A torch without
    fill_uninitialized_memory (1.13) cannot: the report header says so."""
    if not _compat.has("fill_uninitialized_memory"):
        yield
        return
    prev_det = torch.are_deterministic_algorithms_enabled()
    prev_fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(prev_det)
        torch.utils.deterministic.fill_uninitialized_memory = prev_fill


def conv1(x, w, b=None, allow_tf32=False, padding=2, relu=False):
    """Runs the op with poisoned output memory."""
    with poisoned_outputs():
        return alexconv.conv1(x, w, b, allow_tf32=allow_tf32, padding=padding, relu=relu)


@pytest.fixture(autouse=True)
def fresh_seed(request):
    """Fresh random inputs on every run; the seed is printed so that a failure can be replayed
    (ALEXCONV_TEST_SEED=<seed> pytest ...)."""
    seed = int(os.environ.get("ALEXCONV_TEST_SEED", secrets.randbits(62)))
    torch.manual_seed(seed)
    request.node.user_properties.append(("seed", seed))
    print(f"ALEXCONV_TEST_SEED={seed}")
    return seed


@pytest.fixture
def generator(fresh_seed):
    return torch.Generator().manual_seed(fresh_seed)
