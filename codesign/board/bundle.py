"""The `.vtanet` bundle: one file holding everything a placed network needs to run on a board
(docs/board.md, "The bundle"). Data only: a zip of JSON documents and `.npy` arrays (read with
`allow_pickle=False`), no pickle, no code.

    manifest.json        {"format": "vtanet", "schema": SCHEMA, "parts": {member: {"sha256", "nbytes"}}}
    network.json         the network: version, hw config, bitstream sha256, graph, quantization, plan
    arrays/<name>.npy    every array network.json names as {"array": "<name>"}

`read` checks, before anything is used: the file is a whole zip, the manifest's schema is one this
reader knows, every member is listed in the manifest and hashes to its sha256 (and nothing listed
is missing). `check_target` then refuses a bundle compiled for another hw config or bitstream.
Every refusal is one `ConfigError` line naming the file and what is wrong.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from codesign.errors import ConfigError
from codesign.fileio import atomic_write_bytes

FORMAT = "vtanet"
SCHEMA = 4  # 2: a VTA step may take its weight region from an activation (`weight`, `weight_map`);
# 3: a VTA step may read its input in place from an earlier step's packed buffer (`reads`, no
# `input_map`), a positional CPU op run over one (`in_place`): a schema-2 reader would refuse it;
# 4: its residual region too (`reads` region "residual", no `residual_map`)
SCHEMAS = (1, 2, 3, 4)  # the schema versions this reader understands
MANIFEST, DOCUMENT, ARRAYS = "manifest.json", "network.json", "arrays/"
MAX_MEMBERS = 100_000  # a bundle of more members is not one this writer made


@dataclass(frozen=True)
class Bundle:
    """A verified bundle: its network document and its arrays by name."""

    doc: dict[str, Any]
    arrays: Mapping[str, np.ndarray]
    source: str
    nbytes: int

    def array(self, ref: Any) -> np.ndarray:
        """The array a document value {"array": name} names."""
        if not isinstance(ref, dict) or set(ref) != {"array"} or ref["array"] not in self.arrays:
            raise ConfigError(f"{self.source}: network.json names an array it does not hold: {ref!r}")
        return self.arrays[ref["array"]]


# -- values with tuples and arrays, as JSON --------------------------------------------------------
def encode(value: Any, arrays: dict[str, np.ndarray], name: str) -> Any:
    """`value` as JSON: tuples tagged {"tuple": [...]}, arrays stored in `arrays` as {"array": key}."""
    if isinstance(value, np.ndarray):
        key = name
        while key in arrays:
            key += "_"
        arrays[key] = value
        return {"array": key}
    if isinstance(value, (np.integer, np.bool_)):
        return value.item()
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, tuple):
        return {"tuple": [encode(v, arrays, f"{name}.{i}") for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [encode(v, arrays, f"{name}.{i}") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise ConfigError(f"bundle: {name} has non-string keys; a bundle holds JSON")
        if set(value) in ({"tuple"}, {"array"}):
            raise ConfigError(f"bundle: {name} is a mapping with the reserved key {next(iter(value))!r}")
        return {k: encode(v, arrays, f"{name}.{k}") for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ConfigError(f"bundle: {name} is a {type(value).__name__}; a bundle holds JSON values and arrays only")


def decode(value: Any, bundle: Bundle) -> Any:
    if isinstance(value, list):
        return [decode(v, bundle) for v in value]
    if isinstance(value, dict):
        if set(value) == {"tuple"}:
            return tuple(decode(v, bundle) for v in value["tuple"])
        if set(value) == {"array"}:
            return bundle.array(value)
        return {k: decode(v, bundle) for k, v in value.items()}
    return value


# -- writing -----------------------------------------------------------------------------------
def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(arr), allow_pickle=False)
    return buf.getvalue()


def to_bytes(doc: dict[str, Any], arrays: Mapping[str, np.ndarray]) -> bytes:
    """The bundle of `doc` (JSON) and `arrays` (names without '/'), manifest last."""
    members: dict[str, bytes] = {DOCUMENT: json.dumps(doc, sort_keys=True).encode()}
    for key, arr in arrays.items():
        if "/" in key or key.startswith("."):
            raise ConfigError(f"bundle: array name {key!r} must not contain '/' or start with '.'")
        if arr.dtype.hasobject:
            raise ConfigError(f"bundle: array {key!r} holds Python objects; a bundle holds numbers only")
        members[f"{ARRAYS}{key}.npy"] = _npy(arr)
    manifest = {"format": FORMAT, "schema": SCHEMA,
                "parts": {n: {"sha256": hashlib.sha256(b).hexdigest(), "nbytes": len(b)} for n, b in members.items()}}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:  # .npy data compresses poorly; stored loads faster
        for name, data in members.items():
            z.writestr(name, data)
        z.writestr(MANIFEST, json.dumps(manifest, sort_keys=True))
    return out.getvalue()


def write(path: str | Path, doc: dict[str, Any], arrays: Mapping[str, np.ndarray]) -> int:
    data = to_bytes(doc, arrays)
    atomic_write_bytes(Path(path), data)
    return len(data)


# -- reading -----------------------------------------------------------------------------------
def read(source: str | Path | bytes | bytearray | memoryview, name: str | None = None) -> Bundle:
    """A bundle file (or its bytes), verified part by part against its manifest."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data, where = bytes(source), name or "bundle"
    else:
        where = name or str(source)
        try:
            data = Path(source).read_bytes()
        except FileNotFoundError:
            raise ConfigError(f"{where}: bundle not found") from None
        except OSError as exc:
            raise ConfigError(f"{where}: cannot read the bundle ({exc.strerror})") from None
    try:
        z = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError, OSError):
        raise ConfigError(f"{where}: not a whole .vtanet bundle (truncated, or not a zip of a bundle)") from None
    with z:
        infos = z.infolist()
        if len(infos) > MAX_MEMBERS:
            raise ConfigError(f"{where}: {len(infos)} members; a bundle has at most {MAX_MEMBERS}")
        names = [i.filename for i in infos]
        if len(set(names)) != len(names):
            raise ConfigError(f"{where}: a member appears twice (tampered bundle)")
        if MANIFEST not in names:
            raise ConfigError(f"{where}: no {MANIFEST} (not a .vtanet bundle)")

        def member(n: str) -> bytes:
            try:
                return z.read(n)
            except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
                raise ConfigError(f"{where}: member {n} is corrupt ({str(exc).splitlines()[0]})") from None

        try:
            manifest = json.loads(member(MANIFEST))
        except ValueError:
            raise ConfigError(f"{where}: {MANIFEST} is not JSON (corrupt bundle)") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise ConfigError(f"{where}: {MANIFEST} is not a .vtanet manifest (format {manifest.get('format')!r})"
                              if isinstance(manifest, dict) else f"{where}: {MANIFEST} is not a JSON object")
        if manifest.get("schema") not in SCHEMAS:
            raise ConfigError(f"{where}: schema version {manifest.get('schema')!r}; this codesign reads "
                              f"{', '.join(map(str, SCHEMAS))} (deploy the bundle again with this version)")
        parts = manifest.get("parts")
        if not isinstance(parts, dict):
            raise ConfigError(f"{where}: {MANIFEST} has no parts table")
        extra = sorted(set(names) - set(parts) - {MANIFEST})
        missing = sorted(set(parts) - set(names))
        if extra or missing:
            raise ConfigError(f"{where}: members not in the manifest: {', '.join(extra[:3]) or 'none'}; "
                              f"listed but missing: {', '.join(missing[:3]) or 'none'}")
        blobs = {}
        for n in names:
            if n == MANIFEST:
                continue
            blob = member(n)
            want = parts[n] if isinstance(parts[n], dict) else {}
            got = hashlib.sha256(blob).hexdigest()
            if got != want.get("sha256") or len(blob) != want.get("nbytes"):
                raise ConfigError(f"{where}: member {n} hashes to sha256 {got[:16]}.. ({len(blob)} bytes), the "
                                  f"manifest says {str(want.get('sha256'))[:16]}.. ({want.get('nbytes')} bytes): "
                                  "tampered or corrupt bundle")
            blobs[n] = blob
    if DOCUMENT not in blobs:
        raise ConfigError(f"{where}: no {DOCUMENT} (not a .vtanet bundle)")
    try:
        doc = json.loads(blobs.pop(DOCUMENT))
    except ValueError:
        raise ConfigError(f"{where}: {DOCUMENT} is not JSON") from None
    arrays = {}
    for n, blob in blobs.items():
        if not (n.startswith(ARRAYS) and n.endswith(".npy")):
            raise ConfigError(f"{where}: unexpected member {n} (a bundle holds {DOCUMENT} and {ARRAYS}*.npy)")
        try:
            arrays[n[len(ARRAYS):-4]] = np.load(io.BytesIO(blob), allow_pickle=False)
        except ValueError as exc:
            raise ConfigError(f"{where}: {n} is not a plain .npy array ({str(exc).splitlines()[0]})") from None
    return Bundle(doc, arrays, where, len(data))


def check_target(bundle: Bundle, config: str | None, sha256: str | None, hw: Mapping[str, Any] | None = None) -> None:
    """Refuse a bundle compiled for another hw config, bitstream (sha256) or config contents."""
    doc, where = bundle.doc, bundle.source
    if config is not None and doc.get("hw_name") != config:
        raise ConfigError(f"{where}: compiled for hw config {doc.get('hw_name')}, but the board runs {config} "
                          "(deploy the network for this config)")
    if hw is not None and doc.get("hw") != dict(hw):
        diff = sorted(k for k in set(doc.get("hw") or {}) | set(hw) if (doc.get("hw") or {}).get(k) != hw.get(k))
        raise ConfigError(f"{where}: its hw config differs from the board's {config} in {', '.join(diff[:5])}")
    if sha256 is not None and doc.get("bitstream_sha256") != sha256:
        raise ConfigError(f"{where}: compiled for the bitstream with sha256 {str(doc.get('bitstream_sha256'))[:16]}.., "
                          f"but the board's bitstream is {sha256[:16]}.. (program that bitstream, or deploy again)")


__all__ = ["Bundle", "FORMAT", "SCHEMA", "SCHEMAS", "read", "write", "to_bytes", "encode", "decode", "check_target"]
