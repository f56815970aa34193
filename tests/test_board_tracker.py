"""`codesign board tracker`: apache-tvm's RPC tracker on any port, one-line errors.
(`python -m tvm.exec.rpc_tracker --port P` is a traceback for P >= 9199: its --port-end is 9199.)"""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from codesign.board.local import free_port, local_tracker


def test_tracker_on_a_high_port_answers_a_tvm_client_and_stops():
    import tvm.rpc

    port = free_port()
    assert port >= 9199  # the range tvm's own entry point cannot serve
    with local_tracker(port) as trk:
        assert trk.addr == f"127.0.0.1:{port}"
        summary = tvm.rpc.connect_tracker("127.0.0.1", port).summary()
        assert summary == {"queue_info": {}, "server_info": []}
        assert trk.proc.poll() is None
    assert trk.proc.returncode == 0  # stopped by SIGTERM, cleanly
    with pytest.raises(OSError):  # nothing listens any more
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def _tracker_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "codesign.cli", "board", "tracker", *args],
                          capture_output=True, text=True, timeout=120)


def test_port_in_use_and_bad_flags_are_one_line():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = _tracker_cli("--port", str(port))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert f"--port {port}: already in use on 127.0.0.1" in r.stderr
    r = _tracker_cli("--port", "9300", "--port-end", "9200")
    assert r.returncode == 2 and "--port-end 9200: must be in 9300..65535" in r.stderr
    r = _tracker_cli("--host", "nosuchhost.invalid")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--host nosuchhost.invalid" in r.stderr
