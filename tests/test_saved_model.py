"""Schema evolution: a TorchScript model saved by an earlier release still loads and runs.

tests/data/modelnew_v0_1.pt was saved before the op gained its keyword arguments (padding,
relu; see tests/data/README.md). Its code calls alexconv::conv1(x, w, b, allow_tf32=...);
loading it resolves that call against today's schema, whose new arguments take defaults.
"""

import pathlib
import subprocess

import pytest
import torch

import alexconv
from conftest import assert_matches_reference, make_input

# TorchScript is deprecated in recent torch but saved scripted models must keep working.
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")

FIXTURE = pathlib.Path(__file__).parent / "data" / "modelnew_v0_1.pt"
DEMO = pathlib.Path(alexconv.library_path()).parent / "bin" / "alexconv_demo"


def test_fixture_holds_the_seed_46_weights():
    """The file is what tests/data/README.md says it is (so the check below means something)."""
    loaded = torch.jit.load(str(FIXTURE))
    torch.manual_seed(46)
    fresh = alexconv.ModelNew()
    assert loaded.allow_tf32 is False
    assert torch.equal(loaded.conv1.weight, fresh.conv1.weight)
    assert torch.equal(loaded.conv1.bias, fresh.conv1.bias)


@pytest.mark.parametrize("n,h,w", [(2, 67, 45), (1, 224, 224)])
def test_v0_1_model_loads_and_matches_float64_conv2d(n, h, w, generator):
    loaded = torch.jit.load(str(FIXTURE))
    x = make_input(n, h, w, generator=generator)
    with torch.no_grad():
        out = loaded(x)
    assert_matches_reference(out, x, loaded.conv1.weight, loaded.conv1.bias)


def test_v0_1_model_runs_in_the_cpp_demo():
    res = subprocess.run([str(DEMO), str(FIXTURE), "--batch", "2", "--size", "99", "--iters", "1"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "OK: both paths match" in res.stdout, res.stdout
