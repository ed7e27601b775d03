"""The C++ app: alexconv_demo loads a scripted model with torch::jit::load and checks it (ModelNew against
float64, any other model against a reference file or by checksum)."""

import pathlib
import subprocess
import sys
import sysconfig

import pytest
import torch

import alexconv
from alexnets import TorchvisionAlexNet
from conftest import device_params

REPO = pathlib.Path(__file__).resolve().parents[1]
DEMO = pathlib.Path(alexconv.library_path()).parent / "bin" / "alexconv_demo"


def _export(tmp_path, *extra):
    path = tmp_path / "model.pt"
    subprocess.run([sys.executable, "-m", "alexconv.export", str(path), *extra],
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


def _converted_alexnet(tmp_path):
    """A whole network after alexconv.convert, scripted: what the demo runs as it is."""
    model, report = alexconv.convert(TorchvisionAlexNet(num_classes=10, hidden=32).eval())
    assert report.replaced, report
    path = tmp_path / "alexnet.pt"
    torch.jit.script(model).save(str(path))
    return model, path


def test_demo_runs_any_model_against_a_reference(tmp_path, generator):
    model, path = _converted_alexnet(tmp_path)
    x = torch.rand(2, 3, 96, 80, generator=generator)
    with torch.no_grad():
        ref = model(x)
    torch.save(x, tmp_path / "x.pt")
    torch.save(ref, tmp_path / "ref.pt")
    res = _run(path, "--input", tmp_path / "x.pt", "--reference", tmp_path / "ref.pt", "--iters", 1)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "-> output [2, 10] Float" in res.stdout, res.stdout
    assert "OK: output matches the reference" in res.stdout
    torch.save(ref + 1e-2 * ref.abs().max(), tmp_path / "wrong.pt")
    res = _run(path, "--input", tmp_path / "x.pt", "--reference", tmp_path / "wrong.pt", "--iters", 1)
    assert res.returncode == 1 and "MISMATCH" in res.stderr, res.stdout + res.stderr
    res = _run(path, "--input", tmp_path / "absent.pt", "--iters", 1)
    assert res.returncode == 1 and "cannot read" in res.stderr, res.stderr


def test_demo_reports_the_checksum_of_any_model(tmp_path, fresh_seed):
    # The seed gives C++ the input Python draws: the checksum can be compared by hand.
    model, path = _converted_alexnet(tmp_path)
    seed = fresh_seed % 2**31
    res = _run(path, "--batch", 3, "--size", 96, "--seed", seed, "--iters", 1)
    assert res.returncode == 0, res.stdout + res.stderr
    line = next(line for line in res.stdout.splitlines() if line.startswith("checksum:"))
    total, abs_total = (float(part.split()[-1]) for part in line[len("checksum:"):].split(","))
    torch.manual_seed(seed)
    with torch.no_grad():
        out = model(torch.rand(3, 3, 96, 96)).double()
    assert abs(total - out.sum().item()) <= 1e-5 * out.abs().sum().item()
    assert abs(abs_total - out.abs().sum().item()) <= 1e-5 * out.abs().sum().item()


@pytest.mark.parametrize("name", ["alexconv_demo", "alexconv_aoti_demo"])
def test_binaries_are_on_the_environments_path(name):
    """pip installs launchers by the binaries' names in the environment's bin (pyproject.toml's
    [project.scripts]): the README's command lines run as written."""
    launcher = pathlib.Path(sysconfig.get_path("scripts")) / name
    assert launcher.is_file(), f"{launcher} missing: reinstall the package"
    if name == "alexconv_aoti_demo" and not (DEMO.parent / name).is_file():
        res = subprocess.run([str(launcher), "--help"], capture_output=True, text=True, timeout=120)
        assert res.returncode == 1 and "is not installed: the build makes it where torch has" in res.stderr
        return
    # The binary's own status and output come through: a usage error, exit 2.
    res = subprocess.run([str(launcher), "--iters", "0"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and res.stderr.startswith("error: --iters needs an integer >= 1"), res.stderr
    assert f"usage: {name} " in res.stderr, res.stderr
