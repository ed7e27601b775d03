"""scripts/test.sh's decisions: when the CUDA compile-only check runs (scripts/dev/cuda_check_reason.sh)
and how a failing stage reports (scripts/dev/stage.sh)."""

import os
import pathlib
import shutil
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
REASON = REPO / "scripts" / "dev" / "cuda_check_reason.sh"


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                   check=True, capture_output=True)


@pytest.fixture
def clone(tmp_path):
    """A repository with kernel sources, committed: what a fresh clone looks like."""
    if shutil.which("git") is None:
        pytest.skip("no git")
    (tmp_path / "op").mkdir()
    (tmp_path / "op" / "kernel.cu").write_text("// a kernel\n")
    (tmp_path / "tests" / "cuda_harness").mkdir(parents=True)
    (tmp_path / "tests" / "cuda_harness" / "harness.cu").write_text("// the harness\n")
    (tmp_path / "README.md").write_text("readme\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "first")
    return tmp_path


def _reason(repo, *args, **env):
    base = {k: v for k, v in os.environ.items()
            if k not in ("CI", "ALEXCONV_CUDA_CHECK", "ALEXCONV_SKIP_CUDA_CHECK")}
    res = subprocess.run(["bash", str(REASON), *args], cwd=repo, env={**base, **env},
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def test_cuda_check_runs_in_ci_when_asked_or_when_the_kernels_changed(clone):
    assert _reason(clone) == ""  # a fresh clone: a newcomer's first run skips it
    assert _reason(clone, CI="true") == "CI=true"
    assert _reason(clone, CI="true", ALEXCONV_SKIP_CUDA_CHECK="1") == "CI=true"  # CI never skips it
    assert _reason(clone, ALEXCONV_CUDA_CHECK="1") == "ALEXCONV_CUDA_CHECK=1"
    (clone / "README.md").write_text("edited\n")
    assert _reason(clone) == ""  # not a kernel source
    (clone / "op" / "kernel.cu").write_text("// edited\n")
    assert _reason(clone) == "op/ has uncommitted changes"
    assert _reason(clone, ALEXCONV_SKIP_CUDA_CHECK="1") == ""
    # Committed: what the last passing check saw decides.
    _git(clone, "commit", "-qam", "kernel")
    assert _reason(clone) == ""  # no check has passed here: nothing to compare with
    (clone / "build").mkdir()
    (clone / "build" / "cuda-compile-check.passed").write_text(_reason(clone, "--tree") + "\n")
    assert _reason(clone) == ""
    (clone / "tests" / "cuda_harness" / "harness.cu").write_text("// edited\n")
    _git(clone, "commit", "-qam", "harness")
    assert _reason(clone) == "op/ changed since the last check"


def test_a_failing_stage_shows_its_log_and_status(tmp_path):
    script = f'source {REPO / "scripts" / "dev" / "stage.sh"}\nstage ok "passes" true\nstage bad "fails" bash -c "echo why; exit 3"\necho unreached\n'
    res = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert res.returncode == 3, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("== ok       passes ... ") and lines[0].endswith(" s"), lines
    assert lines[1].startswith("== bad      fails ... FAILED after ") and "(exit 3)" in lines[1], lines
    assert lines[2:] == ["why"] and (tmp_path / "build" / "logs" / "bad.log").read_text() == "why\n"
