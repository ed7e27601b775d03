"""The AOTInductor route: alexconv-export MODEL.pt2 -> alexconv_aoti_demo (C++) and alexconv.load_package.

Each package takes AOTInductor 10-15 s to compile on a 2-core CPU machine, so CI builds two
(float32, bfloat16), once per module; CUDA adds its own where a GPU is present.
"""

import importlib.util
import json
import os
import pathlib
import secrets
import subprocess
import sys
import sysconfig
import zipfile

import pytest
import torch

import alexconv
from alexconv import _toolchain
from alexconv import export as export_model
from conftest import assert_matches_reference, device_params

REPO = pathlib.Path(__file__).resolve().parents[1]
# The installed entry point, as a user runs it.
EXPORT = pathlib.Path(sysconfig.get_path("scripts")) / "alexconv-export"
DEMO = pathlib.Path(alexconv.library_path()).parent / "bin" / "alexconv_aoti_demo"

# The one capability gate: a torch that cannot build the package skips the module, saying why.
UNSUPPORTED = export_model.aoti_unsupported()
pytestmark = pytest.mark.skipif(UNSUPPORTED is not None, reason=f"AOTInductor route: {UNSUPPORTED}")


@pytest.fixture(scope="module", autouse=True)
def shared_libstdcxx_compiler():
    """Packages compiled by a g++ that links libstdc++.so.6, as docs/deployment.md tells users:
    where inductor's default does not (the GPU machines' /opt/gcc g++), the one that does. The
    refusal of the other is tests/test_toolchain.py's."""
    compiler = _toolchain.find_compiler_linking_shared_libstdcxx()
    if compiler is None:
        pytest.skip("no C++ compiler here links libstdc++.so.6: AOTInductor packages would not load")
    patch = pytest.MonkeyPatch()
    patch.setenv("CXX", compiler)  # alexconv-export in a child process
    with importlib.import_module("torch._inductor.config").patch({"cpp.cxx": (None, compiler)}):
        yield compiler
    patch.undo()


@pytest.fixture(scope="module", params=[
    pytest.param((device.values[0], dtype), id=f"{device.id}-{dtype}",
                 # bfloat16: a second package, 12 s more on 2 cores
                 marks=[*device.marks, *([pytest.mark.slow] if dtype == "bfloat16" else [])])
    for device in device_params() for dtype in ["float32", "bfloat16"]])
def package(request, tmp_path_factory, shared_libstdcxx_compiler):
    device, dtype = request.param
    if (device, dtype) == ("cpu", "float32"):
        # The README's own `alexconv-export model.pt2`, run as written (tests/conftest.py).
        path, res = request.getfixturevalue("readme_aoti_package")
        assert res.returncode == 0, res.stdout + res.stderr
        assert res.stdout.startswith("saved AOTInductor package of ModelNew (cpu, float32"), res.stdout
        return path, device, dtype, 0
    seed = secrets.randbits(31)  # fresh weights per run, printed for a replay
    print(f"alexconv-export --seed {seed}")
    folder = tmp_path_factory.mktemp("aoti")
    path = folder / f"model-{device}-{dtype}.pt2"
    env = None
    if dtype == "bfloat16":
        # As on the GPU machines, inductor's compiler links libstdc++ statically: the export
        # must take one that does not, say which, and its package must load and run below.
        static = folder / "g++-static"
        static.write_text(f'#!/bin/sh\nexec {shared_libstdcxx_compiler} -static-libstdc++ "$@"\n')
        static.chmod(0o755)
        env = dict(os.environ, CXX=str(static))
    res = subprocess.run([str(EXPORT), str(path), "--device", device, "--dtype", dtype, "--seed", str(seed)],
                         capture_output=True, text=True, timeout=900, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    notes = [line for line in res.stderr.splitlines() if line.startswith("note: ")]
    if env is None:
        assert res.stderr == "" or res.stderr.startswith("note: inductor's compiler"), res.stderr  # no warning
    else:
        assert len(notes) == 1 and f"inductor's compiler {static} links libstdc++ statically" in notes[0], res.stderr
        assert "compiling with /" in notes[0] and "instead (set CXX to choose another)" in notes[0], notes
        assert res.stderr.splitlines() == notes, res.stderr
    assert res.stdout.startswith(f"saved AOTInductor package of ModelNew ({device}, {dtype}"), res.stdout
    return path, device, dtype, seed


def _runner_extracts_constants() -> bool:
    """Whether torch's AOTI runner has extract_constants_map (>= 2.8), as CMakeLists.txt checks:
    then the demo also checks the package's own weights."""
    from torch.utils.cpp_extension import include_paths
    header = "torch/csrc/inductor/aoti_runner/model_container_runner.h"
    return any("extract_constants_map(" in (pathlib.Path(d) / header).read_text()
               for d in include_paths() if (pathlib.Path(d) / header).is_file())


def _run(*args):
    return subprocess.run([str(DEMO), *map(str, args)], capture_output=True, text=True, timeout=600)


def test_aoti_demo_is_installed():
    # This torch has the loader (the gate above passed): CMake must have built the demo.
    assert DEMO.is_file(), f"{DEMO} missing: the package build installs it where torch has the AOTI loader"


def test_package_calls_the_op(package):
    # The package must run alexconv::conv1 (through the proxy executor), not a decomposition.
    path = package[0]
    with zipfile.ZipFile(path) as z:
        graphs = [json.loads(z.read(n)) for n in z.namelist() if n.endswith(".wrapper.json")]
    targets = [node["node"]["target"] for g in graphs for node in g["nodes"]]
    assert targets == ["alexconv::conv1"], targets


@pytest.mark.parametrize("batch,size", [(3, 99), (1, 11)])
def test_aoti_demo_end_to_end(package, batch, size):
    path, device, _, _ = package
    res = _run(path, "--device", device, "--batch", batch, "--size", size, "--iters", 2)
    assert res.returncode == 0, res.stdout + res.stderr
    out = (size + 4 - 11) // 4 + 1
    assert f"device {device}" in res.stdout
    assert f"output [{batch}, 96, {out}, {out}]" in res.stdout, res.stdout
    assert "OK: the package matches the float64 reference" in res.stdout, res.stdout
    assert "AOTI package, loaded weights: max abs error" in res.stdout, res.stdout
    assert ("AOTI package, package weights: max abs error" in res.stdout) == _runner_extracts_constants()


def test_aoti_demo_check_can_fail(package):
    # With no tolerance the float32/bfloat16 output cannot equal float64: the check must say so.
    path = package[0]
    res = _run(path, "--batch", 2, "--size", 40, "--iters", 1, "--atol", 0, "--rtol", 0)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "MISMATCH" in res.stderr


def test_aoti_demo_device_must_be_the_packages(package):
    path, device, _, _ = package
    other = "cuda" if device == "cpu" else "cpu"
    res = _run(path, "--device", other, "--batch", 1, "--size", 11)
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"was exported for {device}, not --device {other}" in res.stderr, res.stderr
    assert f"alexconv-export MODEL.pt2 --device {other}" in res.stderr, res.stderr


# Loads a package with alexconv.load_package, runs it on a saved input, saves the output.
_PYTHON_LOAD = """
import sys, torch, alexconv
runner = alexconv.load_package(sys.argv[1])
x = torch.load(sys.argv[2], weights_only=True)
with torch.no_grad():
    torch.save(runner(x.to(sys.argv[4])).cpu(), sys.argv[3])
"""


def test_python_loads_package(package, tmp_path):
    # The same package from Python, on a non-square input; its weights are ModelNew's under the
    # export's seed. In a child process: a crash while loading (issue 47: a CUDA package
    # segfaulted in aoti_load_package on torch 2.11) fails this test instead of the session.
    path, device, dtype, seed = package
    conv = export_model._model(None, False, dtype, seed).conv1.to(device)
    x = torch.rand(2, 3, 57, 45, dtype=conv.weight.dtype)
    torch.save(x, tmp_path / "x.pt")
    res = subprocess.run([sys.executable, "-c", _PYTHON_LOAD, str(path), str(tmp_path / "x.pt"),
                          str(tmp_path / "out.pt"), device], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"load_package and run exited with {res.returncode}:\n{res.stderr}"
    assert res.stderr == "", res.stderr  # no warning reaches the user
    out = torch.load(tmp_path / "out.pt", weights_only=True).to(device)
    with torch.no_grad():
        assert_matches_reference(out, x.to(device), conv.weight, conv.bias)


@pytest.mark.parametrize("args,message", [
    ([], "no package given"),
    (["m.pt2", "--size", "10"], "--size needs an integer >= 11"),
    (["m.pt2", "--batch", "0"], "--batch needs an integer >= 1"),
    (["m.pt2", "--device", "gpu"], "--device must be cpu or cuda, got gpu"),
    (["m.pt2", "--dev", "cpu"], "unknown option --dev"),
    (["a.pt2", "b.pt2"], "more than one package given: 'a.pt2' and 'b.pt2'"),
])
def test_aoti_demo_rejects_bad_arguments(args, message):
    res = _run(*args)
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.splitlines()[0].startswith(f"error: {message}"), res.stderr
    assert "usage: alexconv_aoti_demo MODEL.pt2" in res.stderr


def test_aoti_demo_reports_unloadable_package(tmp_path):
    res = _run(tmp_path / "absent.pt2")
    assert res.returncode == 1 and "could not load" in res.stderr, res.stderr
    torchscript = tmp_path / "model.pt"  # a TorchScript file is not a package
    export_model.export(str(torchscript))
    res = _run(torchscript)
    assert res.returncode == 1 and "could not load" in res.stderr, res.stdout + res.stderr


_ALEXNETS = REPO / "tests" / "alexnets.py"


@pytest.mark.slow  # a whole network through AOTInductor: 18-27 s on 2 cores
def test_converted_alexnet_package(tmp_path):
    """A whole model after alexconv.convert goes the same route: torchvision's AlexNet layout
    (small classifier) exported with a dynamic batch, packaged, loaded from Python in a child
    process (with alexconv.load_package; torch alone cannot), and equal to the unconverted model
    on the same weights."""
    spec = importlib.util.spec_from_file_location("alexnets", _ALEXNETS)
    alexnets = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(alexnets)
    torch.manual_seed(secrets.randbits(31))
    model = alexnets.TorchvisionAlexNet(num_classes=10, hidden=32).eval()
    converted, report = alexconv.convert(model)
    assert isinstance(converted.features[0], alexconv.AlexConv2d), report
    example = torch.rand(2, 3, 96, 96)
    batch = torch.export.Dim("batch", min=1)
    with torch.no_grad():
        program = torch.export.export(converted, (example,), dynamic_shapes={"x": {0: batch}})
    targets = {str(n.target) for n in program.graph.nodes if n.op == "call_function"}
    assert "alexconv.conv1.default" in targets, targets
    path = torch._inductor.aoti_compile_and_package(program, package_path=str(tmp_path / "alexnet.pt2"))
    # What the README warns of: without the op registered, torch cannot load the package.
    bare = subprocess.run([sys.executable, "-c", f"import torch; torch._inductor.aoti_load_package({path!r})"],
                          capture_output=True, text=True, timeout=600)
    assert bare.returncode != 0 and "Could not find schema for alexconv::conv1" in bare.stderr, bare.stderr
    x = torch.rand(3, 3, 96, 96)
    torch.save(x, tmp_path / "x.pt")
    res = subprocess.run([sys.executable, "-c", _PYTHON_LOAD, path, str(tmp_path / "x.pt"),
                          str(tmp_path / "out.pt"), "cpu"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"load_package and run exited with {res.returncode}:\n{res.stderr}"
    out = torch.load(tmp_path / "out.pt", weights_only=True)
    with torch.no_grad():
        expected = model.double()(x.double())
    assert out.shape == (3, 10)
    torch.testing.assert_close(out.double(), expected, atol=1e-4, rtol=1e-4)


def test_load_package_says_what_is_wrong(tmp_path):
    with pytest.raises(FileNotFoundError, match="alexconv.load_package: no package at"):
        alexconv.load_package(tmp_path / "absent.pt2")

