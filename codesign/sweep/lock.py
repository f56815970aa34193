"""One sweep per experiment directory: an exclusive lock held while a sweep (or its resume) runs.

The lock is `fcntl.flock` on `DIR/sweep.lock`, so the kernel drops it when the holder dies however
it dies (SIGKILL, power loss of a local disk): a lock can never outlive its process. The file also
records who holds it (pid, host, start time); when we take a lock whose file names a process that
is gone, the previous sweep died without cleaning up, and we say so. A second sweep or `--resume`
while one is running is refused with the holder's pid. On a network filesystem without flock
(some NFS set-ups) a second host could still take the lock; run one driver per directory there.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from codesign.errors import ConfigError

LOCK_FILE = "sweep.lock"


def _holder(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def _who(info: dict[str, Any]) -> str:
    when = info.get("started")
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when)) if isinstance(when, (int, float)) else "?"
    return f"pid {info.get('pid', '?')} on {info.get('host', '?')}, started {since}"


class SweepLock:
    """`with SweepLock(out_dir) as lock:` — raises ConfigError if another sweep holds it;
    `lock.stale` describes a previous holder that died without releasing it (None otherwise)."""

    def __init__(self, out_dir: str | Path) -> None:
        self.path = Path(out_dir) / LOCK_FILE
        self.stale: str | None = None
        self._fd: int | None = None

    def acquire(self) -> SweepLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            info = _holder(self.path)
            raise ConfigError(f"{self.path.parent} is in use by another sweep ({_who(info)}); wait for it to "
                              "finish or stop it, or choose another --out") from None
        previous = _holder(self.path)
        pid = previous.get("pid")
        if isinstance(pid, int) and pid != os.getpid():  # a clean release leaves the file empty
            gone = previous.get("host") != socket.gethostname() or not _alive(pid)
            self.stale = (f"the previous sweep in {self.path.parent} ({_who(previous)}) ended without releasing "
                          f"its lock ({'process gone' if gone else 'pid now used by another process'}); "
                          "its unfinished trials run again")
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)  # a clean end: nothing stale for the next sweep to report
        os.close(self._fd)  # closing drops the flock
        self._fd = None

    def __enter__(self) -> SweepLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


__all__ = ["LOCK_FILE", "SweepLock"]
