"""The C++ app: alexconv_demo loads a scripted model with torch::jit::load and checks it."""

import pathlib
import subprocess
import sys

import pytest

import alexconv
from conftest import device_params

REPO = pathlib.Path(__file__).resolve().parents[1]
DEMO = pathlib.Path(alexconv.library_path()).parent / "bin" / "alexconv_demo"


def _export(tmp_path, *extra):
    path = tmp_path / "model.pt"
    subprocess.run([sys.executable, str(REPO / "scripts" / "export_model.py"), str(path), *extra],
                   check=True, capture_output=True, text=True)
    return path


def _run(*args):
    return subprocess.run([str(DEMO), *map(str, args)], capture_output=True, text=True, timeout=600)


def test_demo_is_installed():
    assert DEMO.is_file(), f"{DEMO} missing: the package build installs it"


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_demo_end_to_end(tmp_path, device, dtype):
    model = _export(tmp_path, "--dtype", dtype)
    res = _run(model, "--device", device, "--batch", 3, "--size", 99, "--iters", 2)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "output [3, 96, 24, 24]" in res.stdout
    assert "OK: both paths match" in res.stdout
    # The header API rejects an invalid call with the op's message and keeps working.
    assert ('padding of 7 rejected with '
            '"alexconv::conv1: padding must be in [0, 5], got 7"') \
        in res.stdout, res.stdout
    assert ('undefined input rejected with '
            '"alexconv::conv1: input must be a defined tensor, got an undefined one"') \
        in res.stdout, res.stdout


def test_demo_loads_state_dict_of_reference_model(tmp_path):
    import torch
    weights = tmp_path / "ref.pt"
    torch.save(alexconv.Model().state_dict(), weights)
    model = _export(tmp_path, "--state-dict", weights)
    res = _run(model, "--batch", 1, "--iters", 1)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize("args,message", [
    ([], "no model path given"),
    (["m.pt", "--batch", "x"], "--batch needs an integer"),
    (["m.pt", "--device", "tpu"], "--device must be cpu or cuda"),
    (["m.pt", "--size", "3"], "--size needs an integer >= 7"),
    (["m.pt", "--bogus", "1"], "unknown option --bogus"),
])
def test_demo_rejects_bad_arguments(args, message):
    res = _run(*args)
    assert res.returncode == 2
    assert message in res.stderr


@pytest.mark.parametrize("args,message", [
    # An unknown option is named as unknown wherever it stands, last included.
    (["m.pt", "--bogus"], "unknown option --bogus"),
    (["--bogus", "m.pt"], "unknown option --bogus"),
    (["--bogus"], "unknown option --bogus"),
    (["m.pt", "--batch", "2", "--bogus"], "unknown option --bogus"),
    (["m.pt", "-x"], "unknown option -x"),
    # A known option without its value: at the end, or followed by another option.
    (["m.pt", "--batch"], "--batch needs a value"),
    (["m.pt", "--size", "9", "--atol"], "--atol needs a value"),
    (["m.pt", "--device", "--batch", "2"], "--device needs a value"),
    (["m.pt", "--iters", "--bogus"], "--iters needs a value"),
    # One model path only.
    (["a.pt", "b.pt"], "more than one model path given: 'a.pt' and 'b.pt'"),
    (["a.pt", "--batch", "2", "b.pt"], "more than one model path given: 'a.pt' and 'b.pt'"),
])
def test_demo_names_the_bad_argument_and_shows_usage(args, message):
    res = _run(*args)
    assert res.returncode == 2, res.stdout + res.stderr
    first = res.stderr.splitlines()[0]
    assert first == f"error: {message}", res.stderr
    assert "usage: alexconv_demo MODEL.pt" in res.stderr
    assert res.stdout == ""


def test_demo_reports_missing_model(tmp_path):
    res = _run(tmp_path / "absent.pt")
    assert res.returncode == 1
    assert "could not load" in res.stderr


def test_demo_help_is_not_an_error():
    res = _run("--help")
    assert res.returncode == 0 and res.stdout.startswith("usage: alexconv_demo")
