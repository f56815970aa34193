"""Sweeps on real Ray clusters (issue 22): a plain sweep never joins a cluster it was not given, a
trial writes nothing under the experiment directory, and a sweep on two Ray nodes -- the second
seeing its own empty filesystem at the experiment directory, as a second machine without a shared
disk does, and lost mid-trial -- records exactly what the same sweep records on one node."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

# Starts Ray: one Ray module at a time (xdist_group, pyproject addopts) so two local clusters never
# compete for the ports, /tmp/ray and ~/.ray/auth_token of the machine; every test here starts or joins
# its own, so the Ray the group's other modules share is stopped first (conftest).
pytestmark = [pytest.mark.xdist_group("ray"), pytest.mark.usefixtures("no_ray_in_process")]

SPACE = """\
board: pynq-z1
description: four feasible configs (two GEMM shapes x two clocks)
params:
  LOG_BLOCK: [3, 4]
  clock_mhz: [100, 142]
fixed:
  LOG_INP_BUFF_SIZE: 14
  LOG_WGT_BUFF_SIZE: 16
  LOG_ACC_BUFF_SIZE: 16
"""
LAYER = "conv2d:1,32,8,8,32,3,3,1,1"


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _rows(path: Path) -> set[tuple]:
    """records.jsonl as a set of (config, layer, schedule) rows with what was measured."""
    return {(r["hw"], r["layer"], r["index"], json.dumps(r["knobs"], sort_keys=True), r["seconds"], r["cycles"])
            for r in _lines(path)}


@pytest.fixture()
def space_file(tmp_path: Path) -> Path:
    path = tmp_path / "space.yaml"
    path.write_text(SPACE)
    return path


def test_a_plain_sweep_starts_its_own_ray_beside_a_stale_cluster(tmp_path: Path, space_file: Path) -> None:
    """`ray start --head` then kill -9: /tmp/ray/ray_current_cluster stays behind. A plain
    `codesign sweep` must start a private Ray, not try to join it (it raised "When connecting to an
    existing cluster, num_cpus and num_gpus must not be provided")."""
    from codesign.sweep.local_cluster import LocalCluster

    cluster = LocalCluster(nodes=1, cpus=1).start()
    cluster.stop(keep_files=True)  # SIGKILL: nothing cleans up
    try:
        stale = cluster.tmp / "ray" / "ray_current_cluster"
        assert stale.read_text().strip().endswith(f":{cluster.port}")
        env = {**cluster.env, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        out = tmp_path / "out"
        proc = subprocess.run(
            [sys.executable, "-m", "codesign.cli", "sweep", str(space_file), "--workload", f"{_write_net(tmp_path)}",
             "--trials", "2", "--search", "grid", "--schedules", "autotvm", "--tuner", "exhaustive",  # the best
             "--out", str(out), "--json"],  # template schedule: VTA beats the CPU on both configs, so trials are ok
            env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr
        assert [r["status"] for r in _lines(out / "trials.jsonl")] == ["ok", "ok"]
        assert stale.exists()  # the file was there all along: the sweep did not need it gone
    finally:
        cluster.stop()


def _write_net(tmp_path: Path) -> str:
    """A one-layer network as a `file.py:factory` workload (the CLI takes no layer list)."""
    net = tmp_path / "net.py"
    net.write_text("import torch\n\n\ndef build():\n"
                   "    return torch.nn.Conv2d(32, 32, 3, padding=1, bias=False), (torch.zeros(1, 32, 8, 8),)\n")
    return f"{net}:build"


# -- a trial writes nothing under the experiment directory ---------------------------------------
_WATCH: list[tuple[str, str]] = []  # (event, path) of writes under the watched directory
_WATCHED: list[str] = []


def _audit(event: str, args: tuple) -> None:
    if not _WATCHED or event not in ("open", "os.mkdir", "os.rename", "os.replace", "os.remove", "shutil.copyfile"):
        return
    path = args[0] if event != "shutil.copyfile" else args[1]
    if isinstance(path, int) or path is None:
        return
    path = os.path.abspath(os.fsdecode(path))
    if not path.startswith(_WATCHED[0]):
        return
    if event == "open":
        mode, flags = args[1], args[2]
        writes = (any(c in mode for c in "wax+") if isinstance(mode, str)
                  else bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC)))
        if not writes:
            return
    _WATCH.append((event, path))


def test_a_trial_writes_nothing_under_the_experiment_directory(tmp_path: Path, space_file: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The trial of a real sweep directory (driver-made context, as `run_sweep` makes it), run with
    an audit hook on every open/mkdir/rename: no write under the directory. Its records come back
    with its result; a second trial warm-starts from the driver's state, not from a file."""
    from codesign.sweep.options import SweepOptions
    from codesign.sweep.rows import TrialRow
    from codesign.sweep.runner import prepare, trial_context
    from codesign.sweep.state import SweepState
    from codesign.sweep.trial import run_trial
    from codesign.workloads import Workload

    out = tmp_path / "sweep"
    opts, space = prepare(space_file, Workload("tiny", ((LAYER, 1),)), out,
                          SweepOptions(trials=None, budget=4, tuner="random", search="grid", seed=0))
    state = SweepState()
    ctx = trial_context(opts, space, state)
    monkeypatch.chdir(out)  # relative paths would land here
    before = sorted(p.name for p in out.rglob("*"))
    if not _WATCHED:
        sys.addaudithook(_audit)  # hooks cannot be removed: it is inert while _WATCHED is empty
    _WATCHED.append(str(out.resolve()))
    try:
        first, records = run_trial({"LOG_BLOCK": 4, "clock_mhz": 100}, ctx)
        state.add([TrialRow.from_json({"trial_id": "a", **first})], records)
        second, more = run_trial({"LOG_BLOCK": 4, "clock_mhz": 142}, ctx)
    finally:
        _WATCHED.clear()
    assert _WATCH == []
    assert sorted(p.name for p in out.rglob("*")) == before
    assert first["feasible"] and len(records) == first["measurements"] == 4
    assert {r.hw for r in records} == {first["config"]} and {r.hw for r in more} == {second["config"]}
    # The first trial's best schedule is transferred into the second's (warm start through the state).
    assert first["layers"][0]["index"] in {r.index for r in more}


# -- Ray nodes with their own filesystem, one lost mid-trial ----------------------------------------
def test_a_sweep_on_two_nodes_records_what_one_node_records(tmp_path: Path, space_file: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Records of a grid sweep on one node == those of the same sweep whose trials all run on nodes
    that see an empty tmpfs at the experiment directory (a head with 0 CPUs runs only the driver's
    actors) == those of that sweep when the node running a trial is killed mid-trial (the trial
    runs again on the other node, counted once); then --resume from the driver's files alone
    finds nothing left to do."""
    ray = pytest.importorskip("ray")

    from codesign.sweep import run_sweep
    from codesign.sweep.local_cluster import LocalCluster, private_mounts_unavailable
    from codesign.sweep.options import SweepOptions
    from codesign.workloads import Workload

    # The cluster's nodes run without token auth (LocalCluster); so must this driver. Unset, the
    # first, private Ray below turns token auth on for this process when ~/.ray/auth_token
    # exists, and the driver then rejects the nodes' calls: every trial dies before it runs.
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    assert not ray.is_initialized()
    wl = Workload("tiny", ((LAYER, 1), ("conv2d:1,32,8,8,32,1,1,1,0", 1)))
    kw = dict(options=SweepOptions(trials=None, budget=2, tuner="exhaustive", search="grid", seed=0), progress=False)
    one, two, lost = tmp_path / "one", tmp_path / "two", tmp_path / "lost"
    run_sweep(space_file, wl, one, **kw)  # a private local Ray, all cores
    assert not ray.is_initialized()
    for d in (two, lost):
        d.mkdir()
    why = private_mounts_unavailable(two)
    if why:
        pytest.skip(f"the worker nodes cannot get their own filesystem at the experiment directory: {why}")

    killed: list[tuple[str, str]] = []  # (trial id, node id)
    with LocalCluster(nodes=3, cpus=1, head_cpus=0, private=[two, lost]) as cluster:
        head = cluster.node_ids[0]
        run_sweep(space_file, wl, two, address=cluster.address, **kw)
        result = run_sweep(space_file, wl, lost, address=cluster.address,
                           callbacks=[_NodeChaos(head, kill=cluster.kill_node, killed=killed)], **kw)
    assert not ray.is_initialized()

    reference = _rows(one / "records.jsonl")
    rows = _lines(two / "trials.jsonl")
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows)
    assert head not in {r["node"] for r in rows}  # every trial ran where the directory is an empty tmpfs
    assert _rows(two / "records.jsonl") == reference

    rows = _lines(lost / "trials.jsonl")
    assert killed and len(rows) == 4 and all(r["status"] == "ok" for r in rows) and result.complete
    (tid, node), = killed
    again = [r for r in rows if r["trial_id"] == tid]  # the trial running there when it was killed
    # Retried elsewhere -- unless the trial's result had reached the driver just before its node died
    # (Tune still listed it RUNNING): then it finished on that node and needed no retry.
    retried = again[0].get("retries", 0) == 1 and again[0]["node"] not in (node, head)
    assert retried or (again[0].get("retries", 0) == 0 and again[0]["node"] == node)
    keys = [(r["hw"], r["layer"], r["index"]) for r in _lines(lost / "records.jsonl")]
    assert len(keys) == len(set(keys))  # nothing recorded twice
    assert _rows(lost / "records.jsonl") == reference
    # --resume works from the driver's files alone (the cluster is gone): nothing left to run.
    resumed = run_sweep(None, None, lost, resume=True, progress=False)
    assert resumed.complete and len(_lines(lost / "trials.jsonl")) == 4
    assert _rows(lost / "records.jsonl") == reference


class _NodeChaos:
    """A Ray Tune callback (made a subclass on first use: Ray imports lazily). It holds the driver,
    once, until two trial actors are up -- the first worker of a fresh Ray is warm, the second is
    not, so short trials would all run on the first -- and, given `kill`, kills the node of the
    first trial seen running on a node other than `head`, recording (trial id, node id) in
    `killed`. Its state stays out of Tune's pickled experiment state."""

    def __new__(cls, head: str, kill=None, killed: list | None = None):
        from ray import tune

        class Chaos(tune.Callback):
            def __init__(self, head: str, kill, killed: list | None) -> None:  # no closure: Tune pickles
                self.head, self.kill, self.killed, self.gated = head, kill, killed, False

            def __getstate__(self) -> dict:
                return {}

            def on_step_begin(self, iteration: int, trials: list, **info) -> None:
                if not self.gated and len(_trial_actors()) >= 2:
                    deadline = time.monotonic() + 120
                    while time.monotonic() < deadline and sum(a["State"] == "ALIVE" for a in _trial_actors()) < 2:
                        time.sleep(0.2)
                    self.gated = True
                if self.kill is None or self.killed:
                    return
                for t in trials:
                    actor = getattr(t.temporary_state, "ray_actor", None)
                    node = _actor(actor).get("NodeID") if actor is not None and t.status == "RUNNING" else None
                    if node and node != self.head:
                        self.killed.append((t.trial_id, node))
                        self.kill(node)
                        return

        return Chaos(head, kill, killed)


def _actors() -> list[dict]:
    import ray

    table = ray._private.state.actors()  # the GCS actor table (no dashboard needed)
    job = ray.get_runtime_context().get_job_id()
    return [{"id": k, "State": a.get("State"), "NodeID": (a.get("Address") or {}).get("NodeID"),
             "class": a.get("ActorClassName", "")} for k, a in table.items() if a.get("JobID") == job]


def _trial_actors() -> list[dict]:
    return [a for a in _actors() if "SweepState" not in a["class"] and a["State"] != "DEAD"]


def _actor(handle) -> dict:
    return next((a for a in _actors() if a["id"] == handle._actor_id.hex()), {})


def test_the_driver_records_an_infeasible_first_trial_and_each_record_once(tmp_path: Path) -> None:
    """The driver's callback: a first finished trial without a feasible design is recorded (it
    raised computing a reference point, and Ray Tune ran the trial again); a trial's records are
    appended once, even when the same trial's result arrives twice (a retried or resumed trial)."""
    from types import SimpleNamespace

    from codesign.sweep.results import SweepCallback
    from codesign.sweep.state import pack_records
    from codesign.sweep.trial import infeasible_result
    from codesign.tune.records import MeasureRecord

    cb = SweepCallback(str(tmp_path), 2, stock_names=(), power_bound=1.0, progress=False)
    bad = infeasible_result(None, "invalid point", name="invalid:LOG_BLOCK=9")
    cb.on_trial_complete(0, [], SimpleNamespace(trial_id="a", config={"LOG_BLOCK": 9}, num_failures=0,
                                                last_result={"payload": json.dumps(bad), "records": ""}))
    assert [r["config"] for r in _lines(tmp_path / "trials.jsonl")] == ["invalid:LOG_BLOCK=9"]
    rec = MeasureRecord(layer="l", layer_spec=LAYER, hw="h", knobs={}, index=3, seconds=1e-3, cycles=10, error=None,
                        tuner="random", seed=0, timestamp=0.0)
    row = {**bad, "config": "h"}
    for tid in ("b", "b", "c"):  # "c": another trial that measured the same (config, layer, schedule)
        cb.on_trial_complete(0, [], SimpleNamespace(trial_id=tid, config={}, num_failures=1,
                                                    last_result={"payload": json.dumps(row),
                                                                 "records": pack_records([rec])}))
    assert len(_lines(tmp_path / "records.jsonl")) == 1
    assert [(r["trial_id"], r.get("retries")) for r in _lines(tmp_path / "trials.jsonl")] == [
        ("a", None), ("b", 1), ("c", 1)]


def test_a_ray_client_address_is_refused_in_one_line() -> None:
    """Under Ray Client Tune runs its driver loop -- the callbacks that write the experiment
    directory -- on the head, not where the command runs: refused, with what to do instead."""
    from codesign.errors import ConfigError
    from codesign.sweep.runner import _probe_address

    with pytest.raises(ConfigError, match=r"--address ray://10\.0\.0\.5:10001: Ray Client .* `ray job submit`"):
        _probe_address("ray://10.0.0.5:10001")


def test_a_packed_record_line_is_the_records_file_line() -> None:
    """Trials pack their records with a fast serializer: the driver appends those lines as they
    are, so they must be exactly `MeasureRecord.to_json` (the records file format)."""
    import dataclasses

    from codesign.sweep.state import pack_records, record_line, unpack_lines, unpack_records
    from codesign.tune.records import MeasureRecord

    sim = MeasureRecord(layer="l", layer_spec=LAYER, hw="h", knobs={"tile_h": [7, 8], "oc_nthread": 2}, index=3,
                        seconds=1.25e-3, cycles=10, error=None, tuner="random", seed=0, timestamp=1.5)
    board = dataclasses.replace(sim, source="board:pynq", device_s=1e-3, call_s=2e-3, error="x", seconds=None)
    assert [record_line(r) for r in (sim, board)] == [sim.to_json(), board.to_json()]
    assert unpack_lines(pack_records([sim, board])) == [sim.to_json(), board.to_json()]
    assert unpack_records(pack_records([sim, board])) == [sim, board]
