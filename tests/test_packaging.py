"""A built wheel (not an editable install) carries the data folders and works outside the source
tree: `codesign --help` and `codesign replay` from another directory, importing only the wheel.

CI also installs the wheel into a fresh venv with its dependencies and runs a 2-trial sweep
(.ci/wheel_smoke.sh); this test is the fast, offline half of that check.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SOURCES = ("codesign", "hw_configs", "sim", "bitstreams", "pyproject.toml", "setup.py", "MANIFEST.in",
           "README.md")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    # Build from a copy so the test never writes build/ or *.egg-info into the checkout.
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "_data"))
        elif path.exists():
            shutil.copy(path, src / name)
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(dist), str(src)], check=True, capture_output=True, timeout=300)
    (whl,) = dist.glob("vta_codesign-*.whl")
    return whl


def test_wheel_carries_the_data_folders(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for rel in ("hw_configs/boards/pynq-z1.yaml", "hw_configs/spaces/pynq-z1.yaml", "hw_configs/pynq_1x16.yaml",
                "hw_configs/power/default.yaml", "sim/timing_params.json", "sim/calibration/pynq_resnet18.log",
                "bitstreams/catalog.yaml"):
        assert f"codesign/_data/{rel}" in names, rel
        assert (REPO / rel).is_file(), f"{rel} must stay at the top of the repository"


def test_installed_wheel_runs_outside_the_source_tree(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}

    def cli(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", "import sys, codesign.cli; sys.exit(codesign.cli.main())",
                               *argv], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300)

    where = subprocess.run([sys.executable, "-c", "import codesign.paths as p; print(p.ROOT)"], cwd=elsewhere,
                           env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where) == site / "codesign" / "_data"
    helped = cli("--help")
    assert helped.returncode == 0, helped.stderr
    assert "sweep" in helped.stdout and "Traceback" not in helped.stderr
    sweep_help = cli("sweep", "--help")
    assert sweep_help.returncode == 0 and "hw_configs/spaces/pynq-z1.yaml" in sweep_help.stdout
    # numba compiles and caches from the wheel's location: one kernel, compiled, its cache index written
    # next to it (cold, every kernel takes ~25 s on 2 cores: CI's wheel smoke runs a sweep compiled)
    kernel = subprocess.run([sys.executable, "-c", "import numpy as np; from codesign.lower.access import _add; "
                             "print(_add(np.array([[2, 1, 1, 3]]), 1, (0, 0, 0, 0)))"], cwd=elsewhere, env=env,
                            capture_output=True, text=True, timeout=300)
    assert kernel.stdout.strip() == "(0, 3, 0, 0)", kernel.stderr
    assert list((site / "codesign" / "lower" / "__pycache__").glob("access._add-*.nbi"))
    # the replay reads the wheel's data folders; its kernels run as Python (the same numbers, ~2 s)
    env["NUMBA_DISABLE_JIT"] = "1"
    log = site / "codesign" / "_data" / "sim" / "calibration" / "pynq_resnet18.log"
    replayed = cli("replay", str(log), "--json")
    assert replayed.returncode == 0, replayed.stderr
    summary = json.loads(replayed.stdout)["summary"]
    assert summary["records"] == 20 and summary["mape"] < 5  # percent; the shipped fit is ~1.6%
