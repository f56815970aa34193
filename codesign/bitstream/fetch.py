"""Download a catalog bitstream into VTA's cache and verify it (size limit, sha256, .bit header).

VTA's cache: `$VTA_CACHE_PATH` (default `~/.vta_cache`), `<TARGET>/<HW_VER with . -> _>/<BITSTREAM>.bit`
(docs/vta.md §5.5), so TVM's own `vta.program_fpga` finds the file too. The download goes to a
temporary file next to the target and is renamed only after the checks pass.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

from codesign.bitstream.bitfile import read_header
from codesign.bitstream.catalog import Entry, sha256_file
from codesign.errors import CodesignError, ConfigError
from codesign.fileio import new_file_mode

CACHE_ENV = "VTA_CACHE_PATH"
SCHEMES = ("https", "http", "file")
TIMEOUT_S = 60.0


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".vta_cache")


def cache_path(entry: Entry) -> Path:
    return cache_dir() / entry.cache_relpath


def verify(path: Path, entry: Entry) -> None:
    """Refuse a file whose size or sha256 differ from the catalog, or whose header is broken."""
    size = path.stat().st_size
    if size != entry.size:
        raise CodesignError(f"{path}: {size} bytes, the catalog says {entry.size} for {entry.config} "
                            f"{entry.hw_ver}; refusing it")
    digest = sha256_file(path)
    if digest != entry.sha256:
        raise CodesignError(f"{path}: bad checksum: sha256 {digest}, the catalog says {entry.sha256}; refusing it")
    read_header(path)


def fetch(entry: Entry, force: bool = False,
          on_progress: Callable[[int, int], None] | None = None) -> tuple[Path, bool]:
    """(path in the cache, downloaded?) for `entry`; a verified cached copy is reused."""
    dest = cache_path(entry)
    if dest.exists() and not force:
        try:
            verify(dest, entry)
            return dest, False
        except CodesignError:
            pass  # a stale or corrupt copy: download again
    if entry.local and not entry.url:
        src = Path(entry.local)
        if not src.exists():
            raise ConfigError(f"{entry.catalog}: {entry.config}: local file {src} does not exist")
        verify(src, entry)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        return dest, True
    url = str(entry.url)
    scheme = urllib.parse.urlparse(url).scheme
    if scheme not in SCHEMES:
        raise ConfigError(f"{entry.catalog}: url {url!r}: scheme {scheme!r} not allowed; allowed: {', '.join(SCHEMES)}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    os.fchmod(fd, new_file_mode(dest))  # the user's umask, not mkstemp's 0600
    h = hashlib.sha256()
    got = 0
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                resp = urllib.request.urlopen(url, timeout=TIMEOUT_S)  # noqa: S310 - scheme checked above
            except (urllib.error.URLError, OSError) as exc:
                raise CodesignError(f"cannot download {url}: {getattr(exc, 'reason', exc)}") from None
            with resp:
                while True:
                    chunk = resp.read(1 << 16)
                    if not chunk:
                        break
                    got += len(chunk)
                    if got > entry.size:  # never store more than the catalog promises
                        raise CodesignError(f"{url}: more than the {entry.size} bytes the catalog says; refusing it")
                    h.update(chunk)
                    out.write(chunk)
                    if on_progress is not None:
                        on_progress(got, entry.size)
        if got != entry.size:
            raise CodesignError(f"{url}: got {got} bytes, the catalog says {entry.size}; refusing it")
        if h.hexdigest() != entry.sha256:
            raise CodesignError(f"{url}: bad checksum: sha256 {h.hexdigest()}, the catalog says "
                                f"{entry.sha256}; refusing it")
        read_header(Path(tmp))
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return dest, True


__all__ = ["cache_dir", "cache_path", "fetch", "verify", "CACHE_ENV"]
