"""Reading user files with one-line errors, and writing results atomically — in one place.

Readers raise `ConfigError` naming the file (missing, a directory, unreadable, malformed); writers
go through a temp file in the same folder + `os.replace`, so a reader or a crash never sees half a
file, and the file gets the permissions of a plain `open()` (0666 less the user's umask; an
existing file keeps its mode) — `mkstemp` alone would leave it 0600.
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


def atomic_write_json(path: str | Path, obj: Any, default: Callable[[Any], Any] | None = None) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, default=default) + "\n")
