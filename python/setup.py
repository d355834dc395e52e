"""Builds the kvcanary package: the pure-Python files from kvcanary/ and the _kvcanary extension
from the project's own CMake build (python/CMakeLists.txt), so nothing is downloaded.

    python3 -m pip install --no-build-isolation ./python      (from the repository root)

Environment: KVCANARY_CMAKE_ARGS adds CMake arguments (e.g. "-DKVCANARY_CUDA=OFF");
KVCANARY_BUILD_DIR overrides the CMake build directory (default: <repo>/build/pip);
KVCANARY_SOURCE_DIR overrides the repository root (default: this file's parent directory).
"""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
SOURCE_DIR = Path(os.environ.get("KVCANARY_SOURCE_DIR", HERE.parent)).resolve()


class CMakeExtension(Extension):
    """An extension CMake builds; setuptools compiles nothing itself."""

    def __init__(self, name: str):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        # get_ext_fullpath is <output>/kvcanary/_kvcanary.<soabi>.so; CMake assembles the package
        # under KVC_PYTHON_OUTPUT_DIR/kvcanary with the same interpreter, hence the same suffix.
        output_dir = Path(self.get_ext_fullpath(ext.name)).resolve().parent.parent
        build_dir = Path(os.environ.get("KVCANARY_BUILD_DIR", SOURCE_DIR / "build" / "pip"))
        configure = [
            "cmake", "-S", str(SOURCE_DIR), "-B", str(build_dir),
            "-DCMAKE_BUILD_TYPE=Release",
            "-DKVCANARY_BUILD_PYTHON=ON", "-DKVCANARY_BUILD_TESTS=OFF", "-DKVCANARY_BUILD_CLI=OFF",
            "-DKVCANARY_BUILD_BENCH=OFF", "-DBUILD_SHARED_LIBS=OFF",  # the wheel holds one module
            f"-DPython3_EXECUTABLE={sys.executable}",
            f"-DKVC_PYTHON_OUTPUT_DIR={output_dir}",
        ]
        if not (build_dir / "CMakeCache.txt").exists() and _have("ninja"):
            configure += ["-G", "Ninja"]
        try:  # a pip-installed pybind11 (Debian's pybind11-dev is found without this)
            import pybind11

            configure.append(f"-Dpybind11_DIR={pybind11.get_cmake_dir()}")
        except ImportError:
            pass
        configure += shlex.split(os.environ.get("KVCANARY_CMAKE_ARGS", ""))
        subprocess.check_call(configure)
        jobs = str(self.parallel or os.cpu_count() or 1)
        subprocess.check_call(["cmake", "--build", str(build_dir), "--target", "_kvcanary",
                               "-j", jobs])
        if not Path(self.get_ext_fullpath(ext.name)).exists():
            raise RuntimeError(f"kvcanary: CMake did not produce {self.get_ext_fullpath(ext.name)}")


def _have(program: str) -> bool:
    return any((Path(p) / program).exists() for p in os.environ.get("PATH", "").split(os.pathsep))


def _project_version() -> str:
    """The one version number: project(kvcanary VERSION x.y.z) in the top-level CMakeLists.txt."""
    text = (SOURCE_DIR / "CMakeLists.txt").read_text()
    return re.search(r"project\(kvcanary VERSION ([0-9.]+)", text).group(1)


setup(version=_project_version(), ext_modules=[CMakeExtension("kvcanary._kvcanary")],
      cmdclass={"build_ext": CMakeBuild})
