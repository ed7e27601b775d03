"""The installed CMake package: a downstream C++ project finds it and runs the operator.

tests/cmake_consumer is built against this installation (alexconv.cmake_prefix_path()
and torch's), once per session; its two programs check their result against at::conv2d.
"""

import pathlib
import shutil
import subprocess

import pytest
import torch.utils

import alexconv

CONSUMER = pathlib.Path(__file__).resolve().parent / "cmake_consumer"


@pytest.fixture(scope="module")
def consumer_build(tmp_path_factory):
    if shutil.which("cmake") is None:
        pytest.fail("cmake not found: the package's test dependencies install it")
    build = tmp_path_factory.mktemp("cmake_consumer")
    prefix = f"{alexconv.cmake_prefix_path()};{torch.utils.cmake_prefix_path}"
    for cmd in (["cmake", "-S", str(CONSUMER), "-B", str(build), f"-DCMAKE_PREFIX_PATH={prefix}",
                 "-DCMAKE_BUILD_TYPE=Release"] + (["-G", "Ninja"] if shutil.which("ninja") else []),
                ["cmake", "--build", str(build)]):
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        assert res.returncode == 0, f"{' '.join(cmd)} failed:\n{res.stdout}\n{res.stderr}"
    return build


def test_package_files_are_installed():
    root = pathlib.Path(alexconv.cmake_prefix_path())
    assert (root / "share" / "cmake" / "alexconv" / "alexconvConfigVersion.cmake").is_file()
    assert (root / "include" / "alexconv" / "conv1.h").is_file()


@pytest.mark.parametrize("mode", ["header", "dispatcher"])
def test_downstream_project_runs_the_op(consumer_build, mode):
    res = subprocess.run([str(consumer_build / f"consumer_{mode}")], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "output [2, 96, 8, 9]" in res.stdout, res.stdout
