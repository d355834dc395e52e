"""kvcanary.__version__ is the one version number: project(kvcanary VERSION ...) of CMakeLists.txt."""

import re
from pathlib import Path

import kvcanary


def test_version_is_the_cmake_project_version():
    cmake = (Path(__file__).resolve().parents[2] / "CMakeLists.txt").read_text()
    project_version = re.search(r"project\(kvcanary VERSION ([0-9.]+)", cmake).group(1)
    assert kvcanary.__version__ == project_version
