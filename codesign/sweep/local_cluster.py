"""A real multi-node Ray cluster on 127.0.0.1 for tests and benchmarks (`ray start` processes).

Each node is one `ray start --block` in a process group of its own, so stopping a node kills every
process it started (GCS, raylet, workers) at once -- the way a machine is lost. A worker node can
see a filesystem of its own at given paths (a private mount namespace with a tmpfs there,
`unshare -m`, root only), as a second machine without the driver's disk would.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ray_cli() -> str:
    """The `ray` script of this Python environment (nodes must run the driver's Ray and codesign)."""
    here = Path(sys.executable).parent / "ray"
    return str(here) if here.exists() else (shutil.which("ray") or "ray")


def private_mounts_unavailable(path: str | Path) -> str | None:
    """Why a node cannot get a private tmpfs at `path` here (None: it can)."""
    if shutil.which("unshare") is None:
        return "no `unshare` command"
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                            'mount -t tmpfs tmpfs "$0" && test ! -e "$0/.probe"', str(path)],
                           capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"private mount namespace with a tmpfs refused: {(probe.stderr or probe.stdout).strip()[:200]}"
    return None


class LocalCluster:
    """`with LocalCluster(nodes=2, cpus=1, private=[dir]) as c:` ... `ray.init(address=c.address)`.

    `private`: paths every node but the head sees as an empty tmpfs. The nodes keep their files in
    a temp dir of their own (RAY_TMPDIR), so the `ray_current_cluster` file of this head never
    reaches another Ray user of the machine; `env`: more environment of the nodes."""

    def __init__(self, nodes: int = 2, cpus: int = 1, *, head_cpus: int | None = None,
                 private: Sequence[str | Path] = (), env: dict[str, str] | None = None,
                 start_timeout_s: float = 60.0) -> None:
        self.nodes = nodes
        self.cpus = cpus
        self.head_cpus = cpus if head_cpus is None else head_cpus  # 0: the head runs only the driver's actors
        self.private = [str(p) for p in private]
        # Short: Ray's socket paths under it must stay within the 107 bytes of a Unix socket name.
        self.tmp = Path(tempfile.mkdtemp(prefix="rc", dir="/tmp"))
        self.env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0",
                    "RAY_TMPDIR": str(self.tmp), **(env or {})}
        self.env.pop("RAY_ADDRESS", None)
        self.timeout = start_timeout_s
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen] = []
        self.node_ids: list[str] = []  # Ray's node id of each process in `procs` (0: the head)
        self.startup_s: float | None = None
        self._gcs = None  # Ray's GCS client of this cluster, made on first use

    def _spawn(self, args: list[str], private: bool) -> subprocess.Popen:
        cpus = self.cpus if private or self.procs else self.head_cpus
        cmd = [_ray_cli(), *args, "--node-ip-address", "127.0.0.1", "--num-cpus", str(cpus),
               "--disable-usage-stats", "--block"]
        if private and self.private:
            # sh mounts a tmpfs on each path, then becomes `ray start` (exec): the node's processes
            # all live in this mount namespace.
            mounts = " && ".join(f'mount -t tmpfs tmpfs "${i + 1}"' for i in range(len(self.private)))
            cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c", f'{mounts} && shift {len(self.private)} '
                   '&& exec "$@"', "sh", *self.private, *cmd]
        with open(self.tmp / f"node{len(self.procs)}.log", "wb") as log:
            proc = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        return proc

    def start(self) -> LocalCluster:
        t0 = time.perf_counter()
        try:
            self._spawn(["start", "--head", "--port", str(self.port), "--include-dashboard=false"], private=False)
            self._wait(lambda: self._gcs_up(), "the head's GCS")
            self._wait(lambda: self._new_node(), "the head")
            # `ray start --head` writes the cluster's address file once its own start-up is done
            # (after the GCS lists the node): a started head is one that wrote it
            self._wait(lambda: (self.tmp / "ray" / "ray_current_cluster").exists(), "the head's ray_current_cluster")
            for i in range(1, self.nodes):  # one at a time: which node id is which process
                self._spawn(["start", "--address", self.address], private=True)
                self._wait(lambda: self._new_node(), f"node {i}")
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.perf_counter() - t0
        return self

    def _gcs_up(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def alive_nodes(self) -> list[str]:
        """Ids of the nodes the GCS lists as alive: asked of the GCS directly (milliseconds; no
        `ray.init`, so this process may hold a Ray of its own), else by a driver in a subprocess
        (seconds: it imports Ray and joins the cluster) should Ray's GCS client API move."""
        try:
            from ray._raylet import GcsClient, InnerGcsClient  # GcsClient forwards to InnerGcsClient
            from ray.core.generated.gcs_pb2 import GcsNodeInfo
        except ImportError:
            GcsClient = InnerGcsClient = None
        if hasattr(InnerGcsClient, "get_all_node_info"):
            if self._gcs is None:
                self._gcs = GcsClient(address=self.address)
            try:
                info = self._gcs.get_all_node_info(timeout=10)
            except Exception:  # noqa: BLE001 - not answering yet: asked again while waiting
                return []
            return [node_id.hex() for node_id, node in info.items() if node.state == GcsNodeInfo.ALIVE]
        code = (f"import ray; ray.init(address={self.address!r}, log_to_driver=False, logging_level='ERROR'); "
                "print(' '.join(n['NodeID'] for n in ray.nodes() if n['Alive']))")
        out = subprocess.run([sys.executable, "-c", code], env=self.env, capture_output=True, text=True,
                             timeout=60)
        lines = out.stdout.strip().splitlines()
        return lines[-1].split() if out.returncode == 0 and lines else []

    def _new_node(self) -> bool:
        """Whether the node started last is up; records its id."""
        new = [n for n in self.alive_nodes() if n not in self.node_ids]
        if len(new) == 1:
            self.node_ids.append(new[0])
        return len(self.node_ids) == len(self.procs)

    def _wait(self, ready, what: str) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            dead = [p for p in self.procs if p.poll() is not None]
            if dead:
                i = self.procs.index(dead[0])
                log = (self.tmp / f"node{i}.log").read_text(errors="replace").strip()
                raise RuntimeError(f"Ray node {i} exited with {dead[0].returncode} before {what} was up: "
                                   f"{log[-500:]}")
            if ready():
                return
            time.sleep(0.5)
        raise RuntimeError(f"{what} not up within {self.timeout:g} s")

    def kill_node(self, i: int | str) -> None:
        """SIGKILL node `i`'s whole process group (an index, 0 = head, or a node id): a machine lost."""
        proc = self.procs[self.node_ids.index(i) if isinstance(i, str) else i]
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)

    def stop(self, *, keep_files: bool = False) -> float:
        """Kill every node's process group (workers first) and, unless `keep_files` (a test of what
        an uncleanly stopped head leaves behind), remove the nodes' temp dir; returns the seconds
        the kill took."""
        t0 = time.perf_counter()
        for i in reversed(range(len(self.procs))):
            self.kill_node(i)
        self.procs = []
        took = time.perf_counter() - t0
        if not keep_files:
            shutil.rmtree(self.tmp, ignore_errors=True)
        return took

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
