"""The on-disk cache of traced zoo workloads (codesign/workloads/cache.py): a cached network is the
traced one, a later process does not import torch, and a bad or unwritable cache never changes a
result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codesign.workloads import WORKLOADS, cache, get_workload
from codesign.workloads.torch_import import zoo_workload

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture()
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path))
    zoo_workload.cache_clear()  # the per-process cache would hide the disk
    yield tmp_path
    zoo_workload.cache_clear()


def _traced(name: str, monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.setenv(cache.CACHE_ENV, "off")
    zoo_workload.cache_clear()
    return zoo_workload(name)


@pytest.mark.parametrize("name", WORKLOADS)
def test_cached_network_equals_the_traced_one(name: str, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = zoo_workload(name)  # traced, then stored
    entries = list((cache_dir / "workloads").glob(f"{name}-*.json"))
    assert len(entries) == 1
    zoo_workload.cache_clear()
    again = zoo_workload(name)  # from the disk
    assert again == first == _traced(name, monkeypatch)
    assert cache.from_json(json.loads(entries[0].read_text())) == first


def _load_in_subprocess(cache_root: Path) -> tuple[bool, list[str]]:
    code = ("import json, sys; from codesign.workloads import get_workload; w = get_workload('resnet18'); "
            "print('torch' in sys.modules); print(json.dumps([l.spec for l in w.layers]))")
    env = {**os.environ, "PYTHONPATH": str(REPO), cache.CACHE_ENV: str(cache_root)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, check=True)
    torch_loaded, specs = out.stdout.splitlines()
    return torch_loaded == "True", json.loads(specs)


def test_a_later_process_reads_the_cache_without_torch(tmp_path: Path) -> None:
    cold_torch, cold = _load_in_subprocess(tmp_path)
    warm_torch, warm = _load_in_subprocess(tmp_path)
    assert cold_torch and not warm_torch
    assert warm == cold and len(cold) == 12


def test_a_corrupt_entry_is_traced_again_and_rewritten(cache_dir: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    good = zoo_workload("dcgan")
    entry = next((cache_dir / "workloads").glob("dcgan-*.json"))
    doc = json.loads(entry.read_text())
    doc["entries"][0][0] = "conv2d:nonsense"
    entry.write_text(json.dumps(doc))
    zoo_workload.cache_clear()
    assert zoo_workload("dcgan") == good
    assert "ignoring the workload cache entry" in capsys.readouterr().err
    assert cache.from_json(json.loads(entry.read_text())) == good  # rewritten


def test_an_unwritable_or_disabled_cache_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(cache.CACHE_ENV, str(blocker))
    zoo_workload.cache_clear()
    unwritable = get_workload("lstm")
    assert unwritable == _traced("lstm", monkeypatch)
    assert not list(tmp_path.rglob("*.json"))
    zoo_workload.cache_clear()


def test_a_cache_dir_the_user_named_but_cannot_be_written_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # CODESIGN_CACHE_DIR=<a file>: every command traced again and nothing said why
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(cache.CACHE_ENV, str(blocker))
    zoo_workload.cache_clear()
    get_workload("lstm")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "note:" in err[0] and cache.CACHE_ENV in err[0] and str(blocker) in err[0], err
    zoo_workload.cache_clear()
