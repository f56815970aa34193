"""Packaging hook: the wheel carries the repository's data folders.

The repository keeps `hw_configs/`, `sim/` and `bitstreams/` at the top level (the layout the README
promises, and what an editable install reads in place). A built wheel copies them into
`codesign/_data/`, where `codesign/paths.py` finds them when the package is installed without the
source tree. Everything else about the package is declared in pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
DATA_DIRS = ("hw_configs", "sim", "bitstreams")  # keep in step with codesign/paths.py and MANIFEST.in


class build_py_with_data(build_py):  # noqa: N801 - setuptools command naming
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads the folders in the source tree
        target = Path(self.build_lib) / "codesign" / "_data"
        for name in DATA_DIRS:
            src = HERE / name
            if not src.is_dir():
                raise SystemExit(f"setup.py: {src} is missing; the wheel would lack its data")
            shutil.rmtree(target / name, ignore_errors=True)
            shutil.copytree(src, target / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": build_py_with_data})
