"""Records the source tree the package is built from (ccgraph/_build_info.py
in the built package) so that an installed package finds the build tree's
build/libccgraph.so beside those sources. Everything else is in
pyproject.toml."""
import os

from setuptools import setup
from setuptools.command.build_py import build_py

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class BuildPy(build_py):
    def run(self):
        super().run()
        if not self.dry_run:
            out = os.path.join(self.build_lib, "ccgraph", "_build_info.py")
            with open(out, "w", encoding="utf-8") as f:
                f.write('"""Written by setup.py at build time."""\n')
                f.write(f"SOURCE_DIR = {SOURCE_DIR!r}\n")


setup(cmdclass={"build_py": BuildPy})
