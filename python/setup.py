"""Install-time step: copy libflashattn.so next to the package when one can be found.

Search: $FLASHATTN_LIBRARY, then <repo>/build/libflashattn.so (this file lives in <repo>/python).
Nothing is compiled or downloaded. Without a library the package still installs and looks for
one at import time ($FLASHATTN_LIBRARY or the repo's build folder, see flashattn/_lib.py).
"""
import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def _find_library():
    env = os.environ.get("FLASHATTN_LIBRARY")
    for cand in ([Path(env)] if env else []) + [HERE.parent / "build" / "libflashattn.so"]:
        if cand.is_file():
            return cand.resolve()  # follow libflashattn.so -> .so.0 -> .so.0.1.0
    return None


class BuildPyWithLibrary(build_py):
    def run(self):
        super().run()
        lib = _find_library()
        dest = Path(self.build_lib) / "flashattn" / "libflashattn.so"
        if lib is None:
            print("flashattn: libflashattn.so not found (set FLASHATTN_LIBRARY or build the "
                  "repo); installing without it")
            return
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(lib, dest)
        print(f"flashattn: bundled {lib} as {dest}")


try:  # a wheel holding a shared library is platform specific
    from wheel.bdist_wheel import bdist_wheel as _bdist_wheel

    class BdistWheel(_bdist_wheel):
        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            _, _, plat = super().get_tag()
            return "py3", "none", plat

    extra = {"bdist_wheel": BdistWheel}
except ImportError:
    extra = {}

setup(cmdclass={"build_py": BuildPyWithLibrary, **extra})
