"""The bitstream catalog: which VTA hardware configs have a bitstream, for which board, where it
comes from (URL or local file) and what it is (sha256, size, header fields, utilization, timing).

Two files, read together: the shipped `bitstreams/catalog.yaml` (the published vta-distro files,
never written) and the user's catalog (`$CODESIGN_CATALOG`, default
`~/.local/share/vta-codesign/catalog.yaml`), where `codesign bitstream add` appends local builds.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import yaml

from codesign.errors import ConfigError
from codesign.fileio import atomic_write_text, read_document
from codesign.hw.config import HwConfig
from codesign.paths import BITSTREAMS

SHIPPED_CATALOG = BITSTREAMS / "catalog.yaml"
CATALOG_ENV = "CODESIGN_CATALOG"
_SHA = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Entry:
    config: str  # HwConfig.name, e.g. pynq_1x16_i8w8a32_15_15_18_17
    board: str  # hw_configs/boards/<board>.yaml
    target: str  # VTA TARGET
    hw_ver: str  # VTA HW_VER (download URL and cache path)
    sha256: str
    size: int
    part: str  # from the .bit header
    design: str = ""
    tool_version: str | None = None
    date: str = ""  # header date and time
    clock_mhz: float | None = None  # PL clock the design runs at
    url: str | None = None
    local: str | None = None  # a file on this machine (local builds)
    utilization: dict[str, Any] | None = None  # {lut, ff, bram18, dsp, ...} from report_utilization
    timing: dict[str, Any] | None = None  # {wns_ns, period_ns, clock_mhz, met, ...} from report_timing_summary
    source: str = ""
    provenance: str = ""
    catalog: str = ""  # which catalog file the entry came from (not stored)

    @property
    def bitstream_name(self) -> str:
        return HwConfig.from_name(self.config).bitstream

    @property
    def cache_relpath(self) -> str:
        """VTA's cache layout (docs/vta.md §5.5): <TARGET>/<HW_VER with . -> _>/<BITSTREAM>.bit."""
        return f"{self.target}/{self.hw_ver.replace('.', '_')}/{self.bitstream_name}.bit"

    def to_yaml_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("catalog")
        return {k: v for k, v in d.items() if v not in (None, "")}


def user_catalog() -> Path:
    env = os.environ.get(CATALOG_ENV)
    return Path(env) if env else Path.home() / ".local" / "share" / "vta-codesign" / "catalog.yaml"


def _entry(raw: Any, source: Path, k: int) -> Entry:
    where = f"{source}: bitstreams[{k}]"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping")
    allowed = {f.name for f in fields(Entry)} - {"catalog"}
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; allowed: {', '.join(sorted(allowed))}")
    for key in ("config", "board", "target", "hw_ver", "sha256", "size", "part"):
        if key not in raw:
            raise ConfigError(f"{where}: missing key {key!r}")
    if not isinstance(raw["sha256"], str) or not _SHA.match(raw["sha256"]):
        raise ConfigError(f"{where}: sha256={raw['sha256']!r}: expected 64 lowercase hex digits")
    if not isinstance(raw["size"], int) or raw["size"] <= 0:
        raise ConfigError(f"{where}: size={raw['size']!r}: expected a positive number of bytes")
    if not raw.get("url") and not raw.get("local"):
        raise ConfigError(f"{where}: needs a url or a local file")
    HwConfig.from_name(str(raw["config"]))  # the name must be a valid config
    return Entry(**{**raw, "hw_ver": str(raw["hw_ver"]), "catalog": str(source)})


def read_catalog(path: Path) -> list[Entry]:
    if not path.exists():
        return []
    doc = read_document(path, "bitstream catalog") or {}
    if not isinstance(doc, dict) or not isinstance(doc.get("bitstreams", []), list):
        raise ConfigError(f"{path}: expected a mapping with a 'bitstreams' list")
    return [_entry(raw, path, k) for k, raw in enumerate(doc.get("bitstreams") or [])]


def load(user: Path | None = None) -> list[Entry]:
    """Every entry: shipped first, then the user's."""
    return read_catalog(SHIPPED_CATALOG) + read_catalog(user or user_catalog())


def find(entries: list[Entry], hw: HwConfig, board: str | None = None) -> list[Entry]:
    """Entries for `hw` (by name) on `board` (any board if None), the config's HW_VER first, then
    newest HW_VER first, the user's catalog before the shipped one."""
    hits = [e for e in entries if e.config == hw.name and (board is None or e.board == board)]
    shipped = str(SHIPPED_CATALOG)
    # Same HW_VER in both catalogs: the user's entry (a local build or mirror) wins.
    return sorted(hits, key=lambda e: (e.hw_ver != str(hw.HW_VER), tuple(-int(x) for x in e.hw_ver.split(".")
                                                                         if x.isdigit()), e.catalog == shipped))


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def add(entry: Entry, user: Path | None = None) -> Path:
    """Append (or replace: same config, board, hw_ver) an entry in the user's catalog."""
    path = user or user_catalog()
    if path.resolve() == SHIPPED_CATALOG.resolve():
        raise ConfigError(f"{path}: the shipped catalog is never written; use your catalog (--catalog)")
    existing = read_catalog(path)
    kept = [e for e in existing if (e.config, e.board, e.hw_ver) != (entry.config, entry.board, entry.hw_ver)]
    kept.append(replace(entry, catalog=str(path)))
    text = ("# vta-codesign user bitstream catalog (codesign bitstream add)\n"
            + yaml.safe_dump({"bitstreams": [e.to_yaml_dict() for e in kept]}, sort_keys=False))
    atomic_write_text(path, text)
    return path


__all__ = ["Entry", "SHIPPED_CATALOG", "user_catalog", "read_catalog", "load", "find", "add", "sha256_file"]
