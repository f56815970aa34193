"""Local board processes for tests, benchmarks and demos: emulated board servers and a tvm RPC
tracker on 127.0.0.1, each in its own process group, stopped by their own process id only.

    with local_tracker() as trk, local_board("pynq_1x16", tracker=trk.addr, key="pynq") as b:
        ...   # BoardClient(b.addr) or BoardClient.from_tracker(trk.addr, "pynq")
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from codesign.errors import BoardError


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalProcess:
    """A child process in its own session (process group); its log goes to `log_path`."""

    def __init__(self, argv: list[str], addr: str, ready: str | None, timeout_s: float = 120.0) -> None:
        self.addr = addr
        fd, self.log_path = tempfile.mkstemp(prefix="codesign-local-", suffix=".log")
        self._log = os.fdopen(fd, "w")
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        try:
            self._wait_ready(ready, timeout_s)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, ready: str | None, timeout_s: float) -> None:
        host, port = self.addr.rsplit(":", 1)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BoardError(f"{self.addr}: process exited with {self.proc.returncode}: {self.log()[-500:]}")
            if ready is not None:
                if ready in self.log():
                    return
            else:
                try:
                    socket.create_connection((host, int(port)), timeout=0.5).close()
                    return
                except OSError:
                    pass
            time.sleep(0.1)
        raise BoardError(f"{self.addr}: not ready after {timeout_s:g} s: {self.log()[-500:]}")

    def log(self) -> str:
        return Path(self.log_path).read_text(errors="replace")

    def kill(self) -> None:
        """Kill the whole process group at once (a board that dies: listener and sessions)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        # sessions forked by the listener are in the same group; make sure none is left
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)
        self._log.close()

    def __enter__(self) -> LocalProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        Path(self.log_path).unlink(missing_ok=True)


def local_board(emulate: str, *, port: int | None = None, tracker: str | None = None, key: str = "",
                board: str = "pynq-z1", max_payload: int | None = None, cache_bytes: int | None = None,
                extra: list[str] | None = None) -> LocalProcess:
    port = port or free_port()
    argv = [sys.executable, "-m", "codesign.cli", "board", "serve", "--emulate", emulate, "--port", str(port),
            "--port-end", str(port + 1), "--board", board]
    if tracker:
        argv += ["--tracker", tracker, "--key", key]
    if max_payload is not None:
        argv += ["--max-payload", str(max_payload)]
    if cache_bytes is not None:
        argv += ["--cache-bytes", str(cache_bytes)]
    return LocalProcess(argv + list(extra or []), f"127.0.0.1:{port}", ready="serving on")


def local_tracker(port: int | None = None) -> LocalProcess:
    port = port or free_port()
    argv = [sys.executable, "-m", "codesign.cli", "board", "tracker", "--port", str(port)]
    return LocalProcess(argv, f"127.0.0.1:{port}", ready="codesign board tracker on")


__all__ = ["local_board", "local_tracker", "LocalProcess", "free_port"]
