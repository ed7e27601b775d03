"""Property tests: for random shapes, dtypes, layouts, bias, allow_tf32, output channels (64 and
96, the counts users run, or any in [1, 256]), padding (0-5) and relu, the op matches the
float64 F.conv2d (+ F.relu) reference (README's numerical contract) and F.conv2d's memory format.

Profiles, chosen with ALEXCONV_FUZZ_PROFILE (default "ci"):
  ci      60 cases on CPU, 300 on CUDA   (a quick run anywhere)
  device  300 cases on CPU, 2500 on CUDA (the full run on a GPU machine)
  path    25 cases on CPU, 100 on CUDA   (each forced CPU path, tests/test_cpu_kernel.py)
Cases are fresh each run (derandomize=False); a failure prints the case, its tensor seed and
a @reproduce_failure blob. The number of cases run is printed at the end of the module.
"""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alexconv import _compat

from conftest import (
    DTYPES,
    assert_matches_reference,
    conv1,
    expected_memory_format,
    forced_aten_bfloat16_unreliable,
    make_input,
    make_weight,
    requires_cuda,
)

EXAMPLES = {"ci": {"cpu": 60, "cuda": 300}, "device": {"cpu": 300, "cuda": 2500},
            "path": {"cpu": 25, "cuda": 100}}
MAX_HW = {"cpu": 80, "cuda": 520}
for _name, _counts in EXAMPLES.items():
    settings.register_profile(
        _name, max_examples=_counts["cpu"], deadline=None, derandomize=False, print_blob=True,
        # fresh_seed (autouse) is function-scoped; it only seeds torch, which cases do not use.
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    settings.register_profile(f"{_name}-cuda", settings.get_profile(_name),
                              max_examples=_counts["cuda"])
PROFILE = os.environ.get("ALEXCONV_FUZZ_PROFILE", "ci")
if PROFILE not in EXAMPLES:
    raise ValueError(f"ALEXCONV_FUZZ_PROFILE must be one of {sorted(EXAMPLES)}, got {PROFILE!r}")

CASES_RUN = {"cpu": 0, "cuda": 0}


class _CaseCountReport:
    """Writes the case counts into pytest's final summary (teardown output would be captured
    or land in the middle of the progress line)."""

    def pytest_terminal_summary(self, terminalreporter):
        terminalreporter.write_line(
            f"fuzz: {CASES_RUN['cpu']} cases on cpu, {CASES_RUN['cuda']} on cuda "
            f"(profile {PROFILE})")


@pytest.fixture(scope="module", autouse=True)
def report_case_counts(request):
    """Reports how many fuzz cases actually ran, whatever the profile and test selection."""
    plugins = request.config.pluginmanager
    if not plugins.has_plugin("alexconv-fuzz-counts"):
        plugins.register(_CaseCountReport(), name="alexconv-fuzz-counts")
    yield


@st.composite
def cases(draw, device):
    h_max = MAX_HW[device]
    padding = draw(st.one_of(st.sampled_from([0, 2]), st.integers(0, 5)))
    return dict(
        n=draw(st.integers(0, 4)),
        h=draw(st.integers(11 - 2 * padding, h_max)),
        w=draw(st.integers(11 - 2 * padding, h_max)),
        channels=draw(st.one_of(st.sampled_from([64, 96]), st.integers(1, 256))),
        padding=padding,
        relu=draw(st.booleans()),
        dtype=draw(st.sampled_from([d for d in DTYPES if not (device == "cpu" and d == torch.bfloat16 and
                                                               forced_aten_bfloat16_unreliable())])),
        layout=draw(st.sampled_from(["contiguous", "channels_last", "sliced", "permuted"])),
        perm=draw(st.permutations(range(4))),
        weight_channels_last=draw(st.booleans()),
        bias=draw(st.booleans()),
        allow_tf32=draw(st.booleans()),
        dist=draw(st.sampled_from(["randn", "rand"])),
        seed=draw(st.integers(0, 2**62)),  # tensor values: the case replays exactly
    )


def build_input(case, device, g):
    n, h, w, dtype = case["n"], case["h"], case["w"], case["dtype"]
    if case["layout"] != "permuted":
        return make_input(n, h, w, dtype, device, case["layout"], case["dist"], generator=g)
    # Dense storage in a random dimension order, viewed back as [n, 3, h, w].
    perm = case["perm"]
    shape = (n, 3, h, w)
    draw = torch.randn if case["dist"] == "randn" else torch.rand
    stored = draw([shape[p] for p in perm], generator=g).to(device, dtype)
    x = stored.permute([perm.index(d) for d in range(4)])
    assert x.shape == shape
    return x


def eager_memory_format(x, w, b, padding):
    """The memory format F.conv2d itself returns for these tensors (same dtype and device).
    conftest.expected_memory_format says channels_last for some N=1 permuted inputs where
    F.conv2d (and the op) return contiguous, so eager F.conv2d is the judge here. Where ATen has
    no float16 convolution on CPU (torch 1.13), float32 copies with the same strides judge; where
    it fails on an empty batch (torch 1.13, channels_last weight), the op's documented rule does."""
    if x.shape[0] == 0 and not _compat.has("empty_batch_conv2d"):
        return expected_memory_format(x, w)
    if x.dtype == torch.float16 and x.device.type == "cpu" and not _compat.has("cpu_float16_conv2d"):
        x, w, b = (None if t is None else t.float() for t in (x, w, b))
    eager = F.conv2d(x, w, b, stride=4, padding=padding)
    cl = torch.channels_last
    return cl if eager.is_contiguous(memory_format=cl) and not eager.is_contiguous() else torch.contiguous_format


def check_case(case, device):
    g = torch.Generator().manual_seed(case["seed"])
    x = build_input(case, device, g)
    w, b = make_weight(case["dtype"], device, case["bias"], generator=g, out_channels=case["channels"])
    if case["weight_channels_last"]:
        w = w.contiguous(memory_format=torch.channels_last)
    padding, relu = case["padding"], case["relu"]
    out = conv1(x, w, b, allow_tf32=case["allow_tf32"], padding=padding, relu=relu)
    assert_matches_reference(out, x, w, b, case["allow_tf32"], padding=padding, relu=relu)
    fmt = eager_memory_format(x, w, b, padding)
    assert out.is_contiguous(memory_format=fmt), (fmt, out.stride())
    CASES_RUN[device] += 1


@settings(settings.get_profile(PROFILE))
@given(case=cases("cpu"))
def test_fuzz_cpu(case):
    check_case(case, "cpu")


@requires_cuda
@pytest.mark.cuda
@settings(settings.get_profile(f"{PROFILE}-cuda"))
@given(case=cases("cuda"))
def test_fuzz_cuda(case):
    check_case(case, "cuda")
