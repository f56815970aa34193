"""Reading user files with one-line errors, and writing results atomically — in one place.

Readers raise `ConfigError` naming the file (missing, unreadable, malformed); writers go through a
temp file in the same folder + `os.replace`, so a reader or a crash never sees half a file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from codesign.errors import ConfigError


def read_document(path: str | Path, what: str = "file", missing_hint: str = "") -> Any:
    """Parse a YAML (`.yaml`/`.yml`) or JSON (anything else) file."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such {what}{missing_hint}") from None
    except (IsADirectoryError, UnicodeDecodeError, PermissionError) as exc:
        raise ConfigError(f"{path}: cannot read this {what} ({exc.__class__.__name__})") from None
    if path.suffix in (".yaml", ".yml"):
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML ({exc})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from None


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
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


def atomic_write_json(path: str | Path, obj: Any, default: Callable[[Any], Any] | None = None) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, default=default) + "\n")
