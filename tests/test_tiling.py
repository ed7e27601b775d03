"""The CUDA kernels' tiling plans, checked on the host (plain C++ shared with the kernels):
exact pixel coverage and windows that fit their shared-memory slot (and, where TMA copies
them, their box; for the space-to-depth kernel, every tap's cell the right one; the window's
origin at the call's padding), over the canonical sizes, ragged and extreme aspect ratios, every
padding, and 1..132 resident CTAs."""

import pathlib
import shutil
import subprocess

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

SRC = pathlib.Path(__file__).parent / "cpp" / "tiling_check.cpp"
# (batch, H, W, resident CTAs, padding)
FIXED = [(1, 224, 224, 132, 2), (8, 224, 224, 132, 2), (256, 224, 224, 132, 2), (3, 227, 227, 132, 2),
         (2, 256, 256, 114, 2), (1, 512, 512, 132, 2), (1, 7, 7, 132, 2), (4, 300, 257, 132, 2),
         (1, 2000, 7, 132, 2), (2, 7, 4000, 132, 2), (5, 11, 12, 1, 2), (3, 1031, 13, 78, 2),
         (256, 227, 227, 132, 0), (2, 11, 11, 132, 0), (1, 1, 1, 132, 5), (3, 37, 30, 132, 1),
         (2, 67, 99, 78, 3), (1, 40, 1100, 132, 4)]


@pytest.fixture(scope="module")
def checker(tmp_path_factory):
    cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    exe = tmp_path_factory.mktemp("tiling") / "tiling_check"
    subprocess.run([cxx, "-std=c++17", "-O2", str(SRC), "-o", str(exe)], check=True)
    return exe


def run(checker, shapes):
    text = "".join(f"{n} {h} {w} {sms} {pad}\n" for n, h, w, sms, pad in shapes)
    res = subprocess.run([str(checker)], input=text, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stdout + res.stderr


def test_canonical_and_extreme_shapes(checker):
    run(checker, FIXED)


@pytest.mark.slow  # 200 shapes through the checker: 18 s on 2 cores
@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 6), h=st.integers(1, 700), w=st.integers(1, 700), sms=st.integers(1, 132),
       pad=st.sampled_from([2, 0, 1, 3, 4, 5]))
def test_random_shapes(checker, n, h, w, sms, pad):
    assume(min(h, w) >= 11 - 2 * pad)  # one output pixel at least
    run(checker, [(n, h, w, sms, pad)])
