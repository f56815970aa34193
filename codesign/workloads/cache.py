"""On-disk cache of traced zoo workloads: a zoo network's layer list as JSON, so a command that
names `resnet18` does not import torch and re-trace the network every time (issue 9: torch's
import and the trace were 2-4 s of every sweep's start-up on 2 cores).

Only zoo networks are cached: their whole definition is codesign's own source, so the key covers
everything the result depends on -- the source of `codesign/workloads/*.py`, the torch version and
the network name. A user's `file.py:factory` may import anything, so it is always traced.

Where: `$CODESIGN_CACHE_DIR`, else `$XDG_CACHE_HOME/vta-codesign`, else `~/.cache/vta-codesign`;
`CODESIGN_CACHE_DIR=off` disables the cache. A cache is never a source of truth: an unreadable or
mismatched entry is traced again and rewritten, and a cache that cannot be written is skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from codesign.errors import CodesignError
from codesign.fileio import atomic_write_json
from codesign.workloads.layers import parse_layer
from codesign.workloads.networks import CpuOp, Workload

CACHE_ENV = "CODESIGN_CACHE_DIR"
FORMAT = 1  # bump when the JSON layout below changes


def cache_dir() -> Path | None:
    """The cache directory, or None when `CODESIGN_CACHE_DIR=off`."""
    given = os.environ.get(CACHE_ENV)
    if given:
        return None if given.lower() in ("off", "0", "none") else Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "vta-codesign"


@cache
def _source_key() -> str:
    """sha256 over the workload package's source and the torch version (read from the package
    metadata: importing torch is what the cache avoids)."""
    h = hashlib.sha256(f"format {FORMAT}\n".encode())
    for path in sorted(Path(__file__).parent.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    try:
        h.update(f"torch {metadata.version('torch')}".encode())
    except metadata.PackageNotFoundError:
        h.update(b"torch none")
    return h.hexdigest()[:16]


def _path(name: str) -> Path | None:
    root = cache_dir()
    return None if root is None else root / "workloads" / f"{name}-{_source_key()}.json"


def to_json(workload: Workload) -> dict[str, Any]:
    return {"format": FORMAT, "name": workload.name, "batch": workload.batch, "description": workload.description,
            "entries": [[layer.spec, count] for layer, count in workload.entries],
            "cpu_ops": [[op.name, op.macs, op.reason, count] for op, count in workload.cpu_ops]}


def from_json(doc: dict[str, Any]) -> Workload:
    if doc.get("format") != FORMAT:
        raise ValueError(f"format {doc.get('format')!r}, expected {FORMAT}")
    return Workload(str(doc["name"]), tuple((parse_layer(s), int(c)) for s, c in doc["entries"]),
                    int(doc["batch"]), str(doc["description"]),
                    tuple((CpuOp(str(n), int(m), str(r)), int(c)) for n, m, r, c in doc["cpu_ops"]))


def load(name: str) -> Workload | None:
    """The cached workload of zoo network `name`, or None (no cache, a miss or an unusable entry)."""
    path = _path(name)
    if path is None or not path.is_file():
        return None
    try:
        return from_json(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError, CodesignError) as exc:
        print(f"codesign: note: ignoring the workload cache entry {path} ({exc}); tracing again", file=sys.stderr)
        return None


def store(workload: Workload) -> None:
    """Write `workload` (a zoo network) to the cache; a cache that cannot be written is skipped."""
    path = _path(workload.name)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, to_json(workload))
    except (OSError, CodesignError) as exc:
        # read-only home, full disk: the cache is an optimisation, the workload is already here. A
        # directory the user named is expected to work, so say why it does not.
        if os.environ.get(CACHE_ENV):
            reason = getattr(exc, "strerror", None) or exc
            print(f"codesign: note: cannot write the workload cache in {CACHE_ENV}={os.environ[CACHE_ENV]} "
                  f"({reason}); tracing every time ({CACHE_ENV}=off silences this)", file=sys.stderr)
