"""The CUDA kernels' tiling plans, checked on the host (plain C++ shared with the kernels):
exact pixel coverage and windows that fit their shared-memory slot (and, where TMA copies
them, their box; for the space-to-depth kernel, every tap's cell the right one), over the
canonical sizes, ragged and extreme aspect ratios, and 1..132 resident CTAs."""

import pathlib
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

SRC = pathlib.Path(__file__).parent / "cpp" / "tiling_check.cpp"
FIXED = [(1, 224, 224, 132), (8, 224, 224, 132), (256, 224, 224, 132), (3, 227, 227, 132),
         (2, 256, 256, 114), (1, 512, 512, 132), (1, 7, 7, 132), (4, 300, 257, 132),
         (1, 2000, 7, 132), (2, 7, 4000, 132), (5, 11, 12, 1), (3, 1031, 13, 78)]


@pytest.fixture(scope="module")
def checker(tmp_path_factory):
    cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    exe = tmp_path_factory.mktemp("tiling") / "tiling_check"
    subprocess.run([cxx, "-std=c++17", "-O2", str(SRC), "-o", str(exe)], check=True)
    return exe


def run(checker, shapes):
    text = "".join(f"{n} {h} {w} {sms}\n" for n, h, w, sms in shapes)
    res = subprocess.run([str(checker)], input=text, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stdout + res.stderr


def test_canonical_and_extreme_shapes(checker):
    run(checker, FIXED)


@pytest.mark.slow  # 200 shapes through the checker: 18 s on 2 cores
@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 6), h=st.integers(7, 700), w=st.integers(7, 700), sms=st.integers(1, 132))
def test_random_shapes(checker, n, h, w, sms):
    run(checker, [(n, h, w, sms)])
