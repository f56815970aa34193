"""`codesign board tracker`: apache-tvm's RPC tracker (the real one, `tvm.rpc.tracker`'s server),
started with one-line errors.

`python -m tvm.exec.rpc_tracker --port P` dies with a traceback for any P >= 9199, because its
`--port-end` defaults to 9199 and the port range [P, 9199) is then empty; a port in use, or a
host the machine does not have, are tracebacks too. Here the port range always contains --port,
and those failures are one line naming the flag.
"""

from __future__ import annotations

import errno
import socket
import struct
import threading

from codesign.board.lean_tvm import lean_tvm
from codesign.errors import BoardError

DEFAULT_TRACKER_PORT = 9190  # tvm's default tracker port (`tvm.exec.rpc_tracker`)


def check_ports(port: int, port_end: int | None) -> tuple[int, int]:
    """(first, last) port to try; `port_end` None: only `port` (boards and hosts need a known address)."""
    last = port if port_end is None else port_end
    if not 0 < port < 65536:
        raise BoardError(f"--port {port}: must be in 1..65535")
    if not port <= last < 65536:
        raise BoardError(f"--port-end {last}: must be in {port}..65535 (the last port to try, >= --port)")
    return port, last


def _bindable_port(host: str, first: int, last: int) -> int:
    """The first port in first..last that `host` can bind, checked here so that the reason of a
    failure (in use, no such address, permission) is an errno, not tvm's child-process traceback."""
    tried = f"{first}" if first == last else f"{first}..{last}"
    try:
        family = socket.getaddrinfo(host, first, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror as e:
        raise BoardError(f"--host {host}: unknown host ({e.strerror})") from e
    for port in range(first, last + 1):
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as tvm's tracker does
            try:
                sock.bind((host, port))
                return port
            except OSError as e:
                if e.errno == errno.EADDRINUSE:
                    continue
                if e.errno == errno.EADDRNOTAVAIL:
                    raise BoardError(f"--host {host}: not an address of this machine") from e
                if e.errno == errno.EACCES:
                    raise BoardError(f"--port {port}: permission denied (ports below 1024 need root)") from e
                raise BoardError(f"cannot bind {host}:{port}: {e.strerror or e}") from e
    raise BoardError(f"--port {tried}: already in use on {host}; pick a free --port (or a range with --port-end)")


class TrackerProcess:
    """A running tvm RPC tracker in this process: tvm's own tracker server (`PopenTrackerServerState`,
    what `tvm.rpc.tracker.Tracker` runs) on its thread. `Tracker` would run it in a second interpreter
    that imports all of tvm (and torch) again: ~5 s more per start on a 2-core host. `stop()` sends
    tvm's STOP request and joins the thread."""

    def __init__(self, host: str, port: int, port_end: int | None = None) -> None:
        lean_tvm()
        from tvm.rpc import tracker as tvm_tracker  # heavy; only the tracker needs it

        first, last = check_ports(port, port_end)
        chosen = _bindable_port(host, first, last)
        try:  # tvm: port_end exclusive
            state = tvm_tracker.PopenTrackerServerState(host, port=chosen, port_end=chosen + 1, silent=True)
        except Exception as e:  # lost a race for the port, or tvm failed: its last line, not its traceback
            last_line = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
            raise BoardError(f"cannot start the tracker on {host}:{chosen}: {last_line}") from e
        self._thread: threading.Thread | None = state.thread
        self._stop_key = state.stop_key
        self.host = host
        self.port = int(state.port)

    @property
    def addr(self) -> str:
        return f"{self.host}:{self.port}"

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is None or not thread.is_alive():
            return
        from tvm.rpc import base
        from tvm.rpc.base import RPC_TRACKER_MAGIC, TrackerCode

        # tvm's Tracker.terminate: the STOP request with the key only this process knows
        host = "127.0.0.1" if self.host in ("0.0.0.0", "", "localhost") else self.host
        with socket.create_connection((host, self.port), timeout=10) as sock:
            sock.sendall(struct.pack("<i", RPC_TRACKER_MAGIC))
            if struct.unpack("<i", base.recvall(sock, 4))[0] == RPC_TRACKER_MAGIC:
                base.sendjson(sock, [TrackerCode.STOP, self._stop_key])
                base.recvjson(sock)
        thread.join(10)


__all__ = ["TrackerProcess", "check_ports", "DEFAULT_TRACKER_PORT"]
