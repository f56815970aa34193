"""Reading user files with one-line errors, and writing results atomically — in one place.

Readers raise `ConfigError` naming the file (missing, a directory, unreadable, malformed); writers
go through a temp file in the same folder + `os.replace`, so a reader or a crash never sees half a
file, and the file gets the permissions of a plain `open()` (0666 less the user's umask; an
existing file keeps its mode) — `mkstemp` alone would leave it 0600. JSON
lines files (trials, skipped configs) are appended one whole line per `os.write` and read
tolerantly (a line cut by a crash, or being written right now, is skipped). `json_default` is the
one encoder of NumPy values for every JSON file the package writes.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from codesign.errors import ConfigError
from codesign.paths import shipped


def read_text(path: str | Path, what: str = "file", missing_hint: str = "", errors: str = "strict") -> str:
    """The text of a user file (or of the shipped file a repository path names, `paths.shipped`), or
    one `ConfigError` line: missing, a directory, unreadable, binary."""
    path = shipped(path)
    try:
        return path.read_text(encoding="utf-8", errors=errors)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such {what}{missing_hint}") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, expected a {what}") from None
    except PermissionError:
        raise ConfigError(f"{path}: cannot read this {what} (permission denied)") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file, expected a {what}") from None


def read_document(path: str | Path, what: str = "file", missing_hint: str = "") -> Any:
    """Parse a YAML (`.yaml`/`.yml`) or JSON (anything else) file."""
    path = Path(path)
    text = read_text(path, what, missing_hint)
    if path.suffix in (".yaml", ".yml"):
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML ({exc})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from None


def check_output_path(path: str | Path, what: str = "output") -> Path:
    """A path we may write a file to: not an existing directory, parent not a file (one line)."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{path}: is a directory; name the {what} file to write, e.g. {path / 'out'}")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ConfigError(f"{path}: {parent} is a file, not a directory")
            break
    return path


def new_file_mode(path: Path) -> int:
    """Mode for a file written at `path`: the existing file's, else 0666 less the process umask."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        mask = os.umask(0o022)  # reading the umask means setting it; put it back at once
        os.umask(mask)
        return 0o666 & ~mask


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    path = check_output_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = new_file_mode(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)  # mkstemp creates 0600
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)  # readers see the old or the new file, never half of one
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode())


def json_default(obj: Any) -> Any:
    """`json.dumps(default=...)` for NumPy scalars and arrays, tuples and sets."""
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def json_default_or_str(obj: Any) -> Any:
    """`json_default`, and `str(obj)` for anything else (free-form metadata)."""
    try:
        return json_default(obj)
    except TypeError:
        return str(obj)


def atomic_write_json(path: str | Path, obj: Any, default: Callable[[Any], Any] = json_default) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, default=default) + "\n")


def append_jsonl(path: str | Path, row: dict[str, Any]) -> None:
    """Append one JSON line with a single `os.write` on an O_APPEND descriptor: concurrent writers
    (Ray workers, the driver) never interleave and a crash loses at most this line."""
    data = (json.dumps(row, separators=(",", ":"), default=json_default) + "\n").encode()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":  # a crash cut the last line: end it first
            data = b"\n" + data
        os.write(fd, data)
    finally:
        os.close(fd)


def _json_object(line: str) -> dict[str, Any] | None:
    """The JSON object on `line`, or None (cut, not JSON, or not an object)."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError:
        return None
    return row if isinstance(row, dict) else None


def count_unreadable(path: str | Path) -> int:
    """Non-blank lines of `path` that `read_jsonl` skips (not a JSON object); 0 if it does not exist."""
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return 0
    return sum(1 for line in lines if line.strip() and _json_object(line) is None)


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """The JSON object lines of `path` (none if it does not exist); lines that do not parse — cut
    by a crash or being appended right now — are skipped."""
    try:
        f = open(path, encoding="utf-8")  # noqa: SIM115 - closed by the with below
    except FileNotFoundError:
        return
    with f:
        for line in f:
            row = _json_object(line)
            if row is not None:
                yield row
