"""Loading the library: loading it again is harmless, and a saved TorchScript model needs
`import alexconv` (which registers the op) before it can be loaded in a fresh process."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

import alexconv
from conftest import assert_matches_reference, conv1, device_params, make_input, make_weight

# TorchScript is deprecated in recent torch but saved scripted models must keep working.
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")


def test_loading_library_again_is_harmless():
    path = alexconv.library_path()
    assert path in torch.ops.loaded_libraries, "import alexconv loaded a different file"
    # torch keeps one handle per path, so this must not run the registrations again (a
    # second TORCH_LIBRARY(alexconv) would abort the process, not raise).
    torch.ops.load_library(path)
    assert alexconv.load_library() == path
    x = make_input(2, 40, 33)
    w, b = make_weight()
    assert_matches_reference(conv1(x, w, b), x, w, b)
    assert_matches_reference(conv1(x, w, b), x, w, b)


def run_python(code, cwd):
    """A fresh interpreter, outside the repository (so nothing imports alexconv by accident)."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture
def saved_model(tmp_path):
    model = torch.jit.script(alexconv.ModelNew())
    path = tmp_path / "model.pt"
    model.save(str(path))
    return model, path


def test_saved_model_needs_import_alexconv(saved_model, tmp_path):
    _, path = saved_model
    rc, out = run_python(f"""
        import sys, torch
        try:
            torch.jit.load({str(path)!r})
        except RuntimeError as e:
            print("LOAD FAILED:", e)
        else:
            print("LOADED")
        print("alexconv imported:", "alexconv" in sys.modules)
        """, tmp_path)
    assert rc == 0, out
    assert "LOAD FAILED:" in out and "Unknown builtin op: alexconv::conv1" in out, out
    assert "alexconv imported: False" in out, out


@pytest.mark.parametrize("device", device_params())
def test_saved_model_runs_after_import_alexconv(saved_model, tmp_path, device):
    model, path = saved_model
    x = make_input(2, 57, 61)
    torch.save(x, tmp_path / "x.pt")
    rc, out = run_python(f"""
        import torch, alexconv
        model = torch.jit.load({str(path)!r}, map_location={device!r})
        x = torch.load({str(tmp_path / "x.pt")!r}).to({device!r})
        from alexconv import _compat
        if _compat.has("fill_uninitialized_memory"):  # NaN-poisoned output allocations
            torch.use_deterministic_algorithms(True)
            torch.utils.deterministic.fill_uninitialized_memory = True
        out = model(x)
        assert out.device.type == {device!r}, out.device
        torch.save(out.cpu(), {str(tmp_path / "out.pt")!r})
        print("OK")
        """, tmp_path)
    assert rc == 0 and "OK" in out, out
    result = torch.load(tmp_path / "out.pt")
    w, b = model.conv1.weight.detach(), model.conv1.bias.detach()
    assert_matches_reference(result, x, w, b)


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("readelf") is None,
                    reason="needs Linux and readelf")
def test_library_links_the_shared_cpp_runtime():
    """A static copy of libstdc++ inside the library, beside the process's shared one, crashed
    the first error message it built (seen with GCC 13 on the GPU machines): CMake links the
    shared runtime explicitly, and this checks it."""
    dynamic = subprocess.run(["readelf", "-d", alexconv.library_path()], capture_output=True,
                             text=True, check=True).stdout
    assert "libstdc++.so" in dynamic, dynamic


def test_build_info_describes_the_loaded_library():
    """The package records the torch the library was built against, and whether it has a CUDA
    kernel: the dispatcher's table must agree."""
    from alexconv import _build_info
    from alexconv._library import _release

    assert _release(_build_info.TORCH_VERSION) == _release(torch.__version__)
    has_cuda_kernel = torch._C._dispatch_has_kernel_for_dispatch_key("alexconv::conv1", "CUDA")
    assert _build_info.WITH_CUDA == has_cuda_kernel


@pytest.mark.parametrize("built, with_cuda, built_cuda, running, cuda, error", [
    ("2.13.0", False, "", "2.13.0+cpu", None, None),
    ("2.11.0", True, "13.0.88", "2.11.0+cu130", "13.0", None),
    ("2.11.0", True, "13.0.88", "2.11.0", "13.2", None),  # one libcudart.so.13
    ("2.11.0", False, "", "2.11.0+cu130", "13.0", None),  # CPU-only build in a CUDA torch
    ("", True, "", "2.13.0+cu130", "13.0", None),  # CMake found no versions: unchecked
    ("2.13.0", False, "", "2.12.1+cpu", None, "built against torch 2.13.0, but torch 2.12.1+cpu"),
    ("2.13.0", False, "", "2.13.1", None, "built against torch 2.13.0, but torch 2.13.1"),
    ("2.11.0", True, "13.0.88", "2.11.0+cpu", None,
     "built with CUDA, but the installed torch 2.11.0+cpu has none"),
    ("2.11.0", True, "13.0.88", "2.11.0+cu128", "12.8",
     "built with CUDA 13.0.88, but the installed torch 2.11.0+cu128 has CUDA 12.8"),
    ("2.11.0", False, "", "nightly", None, "cannot read a version from 'nightly'"),
])
def test_build_and_torch_mismatch_is_named(built, with_cuda, built_cuda, running, cuda, error):
    from alexconv._library import check_build_matches_torch

    if error is None:
        check_build_matches_torch(built, with_cuda, built_cuda, running, cuda)
    else:
        with pytest.raises(ImportError, match=re.escape(error)) as info:
            check_build_matches_torch(built, with_cuda, built_cuda, running, cuda)
        assert "pip install --no-build-isolation" in str(info.value)


def test_import_refuses_a_library_built_for_another_torch(tmp_path):
    """End to end, in a fresh interpreter: the check runs before the library loads."""
    rc, out = run_python("""
        import sys, types
        sys.modules["alexconv._build_info"] = types.SimpleNamespace(
            TORCH_VERSION="1.0.0", WITH_CUDA=False, CUDA_VERSION="")
        try:
            import alexconv
        except ImportError as e:
            print("IMPORT FAILED:", e)
        import torch
        print("op registered:", hasattr(torch.ops.alexconv, "conv1"))
        """, tmp_path)
    assert rc == 0, out
    assert "IMPORT FAILED: alexconv: libalexconv.so was built against torch 1.0.0" in out
    assert "op registered: False" in out
