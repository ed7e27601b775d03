"""The version has one place, pyproject.toml: CMake reads it, alexconv.__version__ and the
installed metadata follow, and CHANGELOG.md's latest release names it."""

import importlib.metadata
import pathlib
import re

import alexconv

REPO = pathlib.Path(__file__).resolve().parents[1]


def _pyproject_version():
    versions = re.findall(r'^version = "([0-9]+\.[0-9]+\.[0-9]+)"$', (REPO / "pyproject.toml").read_text(), re.M)
    assert len(versions) == 1, versions  # the line CMakeLists.txt reads
    return versions[0]


def test_python_and_metadata_follow_pyproject():
    version = _pyproject_version()
    assert alexconv.__version__ == version
    assert importlib.metadata.version("alexconv") == version


def test_cmake_package_follows_pyproject():
    config = pathlib.Path(alexconv.cmake_prefix_path()) / "share" / "cmake" / "alexconv" / "alexconvConfigVersion.cmake"
    assert f'set(PACKAGE_VERSION "{_pyproject_version()}")' in config.read_text()
    # No second copy: project() takes what it read from pyproject.toml.
    cmake = (REPO / "CMakeLists.txt").read_text()
    assert re.search(r"project\(alexconv LANGUAGES CXX VERSION \$\{CMAKE_MATCH_1\}\)", cmake)
    assert not re.search(r"VERSION [0-9]+\.[0-9]+\.[0-9]+", cmake.split("project(alexconv", 1)[1].split(")")[0])


def test_changelog_latest_release_is_this_version():
    text = (REPO / "CHANGELOG.md").read_text()
    releases = re.findall(r"^## \[([0-9][^\]]*)\] - (\d{4}-\d{2}-\d{2})$", text, re.M)
    assert releases, "CHANGELOG.md has no '## [X.Y.Z] - YYYY-MM-DD' release"
    assert releases[0][0] == _pyproject_version(), releases[0]
    assert [v for v, _ in releases] == sorted({v for v, _ in releases},
                                              key=lambda v: tuple(map(int, v.split("."))), reverse=True)
    assert text.index("## [Unreleased]") < text.index(f"## [{releases[0][0]}]")
