"""Builds rlx's Python module with CMake for `pip install .` (pyproject.toml).

The CMake build tree is ./build (as `make` uses), so an install after `make` only
relinks; RLX_BUILD_DIR picks another one. The module is built for Debian's python3
(3.11), or a venv made from it."""
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).parent.resolve()
# The one version (CMakeLists.txt's project() VERSION), so the wheel's metadata is the
# library's.
VERSION = re.search(r"project\(rlx VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt").read_text())[1]


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = pathlib.Path(os.environ.get("RLX_BUILD_DIR", ROOT / "build")).resolve()
        subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(build), "-G", "Ninja",
                               "-DCMAKE_BUILD_TYPE=Release"])
        subprocess.check_call(["cmake", "--build", str(build), "--target", "rlx_python", "-j",
                               os.environ.get("JOBS", str(os.cpu_count() or 1))])
        # The module and the shared libraries it loads (librlx, librlx_onnx), as CMake
        # installs them for Python (cmake/install.cmake, component python): the module
        # finds them beside itself. A wheel holds no symlinks, so each library is copied
        # once, under its SONAME (the link NAMELINK_SKIP leaves).
        stage = pathlib.Path(self.build_temp).resolve() / "cmake-stage"
        shutil.rmtree(stage, ignore_errors=True)
        subprocess.check_call(["cmake", "--install", str(build), "--component", "python",
                               "--prefix", str(stage)])
        # CMake builds for Debian's /usr/bin/python3 (its Python_EXECUTABLE); a venv made
        # from it shares its ABI, which the module's suffix names.
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        built = stage / "rlx" / f"_rlx{suffix}"
        if not built.exists():
            sys.exit(f"rlx: CMake built no {built.name} in {built.parent} (is pybind11-dev "
                     f"installed, and is {sys.executable} the Python 3.11 CMake found?)")
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, target)
        for lib in (stage / "rlx").glob("lib*.so*"):
            if lib.is_symlink():
                shutil.copyfile(lib, target.parent / lib.name)


setup(
    version=VERSION,
    packages=["rlx"],
    package_dir={"": "python"},
    ext_modules=[Extension("rlx._rlx", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": "build/setuptools"},
             "egg_info": {"egg_base": "build"}},
)
