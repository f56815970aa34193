"""Sweeps on a real Ray cluster (issue 22): throughput on two nodes vs one, records identical, and
the wall time of the default `codesign sweep`. Prints one JSON summary on stdout.

(a) scaling: the default sweep's space, workload and inner search (PYNQ-Z1, ResNet-18, `auto`),
    48 trials, on a local Ray cluster of ONE node with 1 CPU and of TWO nodes with 1 CPU each
    (`codesign.sweep.local_cluster`: `ray start` processes on 127.0.0.1; the second node sees an
    empty tmpfs at the experiment directory where the kernel allows a private mount namespace).
    The outer search is `exhaustive` (the first 48 feasible configs, stock ones first) so both runs
    evaluate the same configs whatever order trials finish in, and their records.jsonl must be
    equal as sets of (config, layer, schedule, seconds, cycles). Trials per minute = trials / the
    span from the first trial's start to the last trial's end (also given over `run_sweep`'s whole
    wall time, which adds its fixed set-up and finish to both). Target: >= 1.7x.
(b) the default `codesign sweep` (48 trials, motpe, 2 cores), as a user runs it: a fresh process,
    wall time from start to exit including Ray's start-up and shutdown. Target: <= 60 s.
(c) costs: Ray start-up and shutdown of a private local instance, start-up of the 2-node cluster,
    joining it, and stopping it (kill of the nodes' process groups).

The machine is shared: the load average (1 min) before and after each part is in the summary.

    python benchmarks/sweep_cluster.py                 # all three parts (~6 min on 2 loaded cores)
    python benchmarks/sweep_cluster.py --trials 16 --skip-default
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _log(msg: str) -> None:
    print(f"[sweep_cluster] {msg}", file=sys.stderr, flush=True)


def _record_set(path: Path) -> set[tuple]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {(r["hw"], r["layer"], r["index"], r["seconds"], r["cycles"]) for r in rows}


def scaling(tmp: Path, trials: int) -> dict:
    from codesign.paths import SPACES
    from codesign.sweep import run_sweep
    from codesign.sweep.local_cluster import LocalCluster, private_mounts_unavailable
    from codesign.sweep.options import SweepOptions

    options = SweepOptions(trials=trials, search="exhaustive")
    out: dict = {"trials": trials, "search": "exhaustive", "space": "pynq-z1.yaml", "workload": "resnet18",
                 "inner": options.tuner}
    runs = {}
    for nodes in (1, 2):
        exp = tmp / f"nodes{nodes}"
        exp.mkdir()
        private = [exp] if nodes > 1 and private_mounts_unavailable(exp) is None else []
        load0 = _load()
        cluster = LocalCluster(nodes=nodes, cpus=1, private=private)
        cluster.start()
        try:
            _log(f"(a) {nodes} node(s) x 1 CPU up in {cluster.startup_s:.1f} s; sweeping {trials} trials")
            res = run_sweep(SPACES / "pynq-z1.yaml", "resnet18", exp, options, address=cluster.address,
                            progress=False)
        finally:
            stop_s = cluster.stop()
        ok = [t for t in res.trials if t.ok]
        span = max(t.timestamp for t in ok) - min(t.timestamp - (t.wall_s or 0.0) for t in ok)
        runs[nodes] = {"nodes": nodes, "cpus_per_node": 1, "private_fs_on_second_node": bool(private),
                       "cluster_startup_s": round(cluster.startup_s or 0.0, 2), "cluster_stop_s": round(stop_s, 2),
                       "sweep_wall_s": round(res.wall_s, 1), "trials_ok": len(ok),
                       # a trial's own wall time: it grows when the trials share the cores with
                       # each other, the driver and the machine's other jobs
                       "mean_trial_s": round(sum(t.wall_s or 0.0 for t in ok) / len(ok), 2),
                       "trials_span_s": round(span, 1), "trials_per_min": round(len(ok) / span * 60, 2),
                       "trials_per_min_incl_setup": round(len(ok) / res.wall_s * 60, 2),
                       "nodes_used": len({t.node for t in ok if t.node}), "retries": res.retries,
                       "records": len(_record_set(exp / "records.jsonl")), "load_before": load0,
                       "load_after": _load()}
        _log(f"(a) {nodes} node(s): {runs[nodes]}")
    out["one_node"], out["two_nodes"] = runs[1], runs[2]
    # Throughput while trials run (first trial's start to last trial's end); the run_sweep wall
    # adds ~5-8 s of fixed set-up and finish (Ray connect, Tune, plots) to both.
    out["speedup"] = round(runs[2]["trials_per_min"] / runs[1]["trials_per_min"], 2)
    out["speedup_incl_setup"] = round(runs[2]["trials_per_min_incl_setup"] / runs[1]["trials_per_min_incl_setup"], 2)
    out["records_identical"] = _record_set(tmp / "nodes1" / "records.jsonl") == _record_set(
        tmp / "nodes2" / "records.jsonl")
    out["target"] = "speedup >= 1.7 with identical records"
    out["met"] = out["speedup"] >= 1.7 and out["records_identical"]
    return out


def default_sweep(tmp: Path) -> dict:
    """`codesign sweep --out DIR --json` in a fresh process (the workload cache warmed first, as on
    every sweep after a machine's first)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-m", "codesign.cli", "workloads", "resnet18"], env=env, capture_output=True,
                   check=True, timeout=600)  # trace once: the cache a user's second sweep finds
    out = tmp / "default"
    load0 = _load()
    t0 = time.time()
    done = subprocess.run([sys.executable, "-m", "codesign.cli", "sweep", "--out", str(out), "--json"], env=env,
                          capture_output=True, text=True, timeout=3600, cwd=tmp)
    wall = time.time() - t0
    if done.returncode != 0:
        raise SystemExit(f"codesign sweep failed: {done.stderr[-2000:]}")
    doc = json.loads(done.stdout)
    rows = [json.loads(line) for line in (out / "trials.jsonl").read_text().splitlines() if line.strip()]
    starts = [r["timestamp"] - r.get("wall_s", 0.0) for r in rows]
    ends = [r["timestamp"] for r in rows]
    return {"command": "codesign sweep --out DIR --json", "trials": len(rows), "wall_s": round(wall, 1),
            "sweep_wall_s": doc["wall_s"], "startup_s": round(min(starts) - t0, 1),
            "trials_s": round(max(ends) - min(starts), 1), "shutdown_s": round(t0 + wall - max(ends), 1),
            "mean_trial_s": round(sum(r.get("wall_s", 0.0) for r in rows) / max(1, len(rows)), 2),
            "cpus": os.cpu_count(), "load_before": load0, "load_after": _load(),
            "baseline": "87 s of sweep time plus start-up (2026-11-24, before issue 22)",
            "target": "<= 60 s wall including Ray start-up", "met": wall <= 60}


def costs() -> dict:
    """Seconds of Ray's own start-up and shutdown, outside any sweep."""
    code = """
import json, os, time
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
t0 = time.perf_counter(); import ray; t1 = time.perf_counter()
ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
t2 = time.perf_counter()
ray.get(ray.remote(lambda: 1).remote()); t3 = time.perf_counter()
ray.shutdown(); t4 = time.perf_counter()
print(json.dumps({"import_ray_s": t1 - t0, "local_init_s": t2 - t1, "first_task_s": t3 - t2, "local_shutdown_s": t4 - t3}))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True)
    local = {k: round(v, 2) for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}
    from codesign.sweep.local_cluster import LocalCluster

    cluster = LocalCluster(nodes=2, cpus=1)
    cluster.start()
    try:
        code = ("import time, os; os.environ.setdefault('RAY_AUTH_MODE', 'disabled'); import ray; "
                f"t0 = time.perf_counter(); ray.init(address={cluster.address!r}, log_to_driver=False); "
                "t1 = time.perf_counter(); ray.shutdown(); print(t1 - t0, time.perf_counter() - t1)")
        done = subprocess.run([sys.executable, "-c", code], env=cluster.env, capture_output=True, text=True,
                              timeout=600, check=True)
        join_s, leave_s = (float(x) for x in done.stdout.split()[-2:])
    finally:
        stop_s = cluster.stop()
    return {"private_local": local, "two_node_cluster_startup_s": round(cluster.startup_s or 0.0, 2),
            "join_cluster_s": round(join_s, 2), "leave_cluster_s": round(leave_s, 2),
            "two_node_cluster_stop_s": round(stop_s, 2), "load": _load()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=48, help="trials of the scaling sweeps (default: 48)")
    ap.add_argument("--skip-scaling", action="store_true")
    ap.add_argument("--skip-default", action="store_true")
    ap.add_argument("--skip-costs", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    summary: dict = {"benchmark": "sweep_cluster", "cpus": os.cpu_count(), "load_start": _load()}
    with tempfile.TemporaryDirectory(prefix="sweep_cluster") as tmp:
        if not args.skip_costs:
            summary["costs"] = costs()
            _log(f"(c) {summary['costs']}")
        if not args.skip_scaling:
            summary["scaling"] = scaling(Path(tmp), args.trials)
        if not args.skip_default:
            summary["default_sweep"] = default_sweep(Path(tmp))
            _log(f"(b) {summary['default_sweep']}")
    summary["load_end"] = _load()
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
