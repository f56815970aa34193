"""Where the wall time of a short `codesign sweep` goes (issue 9): start-up (imports, workload,
ray.init, Tune set-up, Ray's workers) before the first trial starts, the trials, and shutdown
after the last trial ends (Ray's shutdown, pareto.json, plots). Prints one JSON summary on stdout
(medians over --repeats runs).

Measured from outside, as a user sees it: the sweep runs as `codesign sweep ... --json` in a fresh
process; start-up = first trial's start (its `timestamp - wall_s` in trials.jsonl) minus the
process start, shutdown = process exit minus the last trial's end.

`--cache warm` (default) is every sweep after the first on a machine: the traced zoo network is
in the workload cache; `--cache cold` gives each run an empty cache (the first sweep ever).
`--compare DIR` times another checkout (e.g. `git worktree add /tmp/old <commit>`) in alternation
with this one, so both see the same machine load, and reports the ratio of medians.

    python benchmarks/sweep_overhead.py                                  # 20 trials, 3 repeats
    python benchmarks/sweep_overhead.py --trials 8 --budget 8 --repeats 5 --compare /tmp/old
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KEYS = ("total_s", "startup_s", "trials_s", "shutdown_s", "overhead_fraction")


def one_run(repo: Path, trials: int, budget: int, space: str, cache_dir: Path) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "sweep"
        cmd = [sys.executable, "-c", "import sys, codesign.cli; sys.exit(codesign.cli.main())", "sweep", space,
               "--trials", str(trials), "--budget", str(budget), "--out", str(out), "--json"]
        env = {**os.environ, "PYTHONPATH": str(repo), "CODESIGN_CACHE_DIR": str(cache_dir)}
        t0 = time.time()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600, cwd=tmp)
        t1 = time.time()
        if done.returncode != 0:
            raise SystemExit(f"{repo}: {done.stderr[-2000:]}")
        rows = [json.loads(line) for line in (out / "trials.jsonl").read_text().splitlines() if line.strip()]
        starts = [r["timestamp"] - r.get("wall_s", 0.0) for r in rows]
        ends = [r["timestamp"] for r in rows]
        total = t1 - t0
        startup, shutdown = min(starts) - t0, t1 - max(ends)
        return {"total_s": total, "startup_s": startup, "trials_s": max(ends) - min(starts), "shutdown_s": shutdown,
                "overhead_fraction": (startup + shutdown) / total, "trials": len(rows)}


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: round(statistics.median(r[k] for r in runs), 3) for k in KEYS}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--space", default="pynq-z1")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cache", choices=("warm", "cold"), default="warm",
                    help="workload cache: warm = every sweep after the first (default), cold = the first sweep")
    ap.add_argument("--compare", type=Path, help="another checkout to time in alternation with this one")
    args = ap.parse_args()
    repos = {"this": REPO} | ({"compare": args.compare.resolve()} if args.compare else {})
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in repos}
    with tempfile.TemporaryDirectory() as caches:
        shared = Path(caches) / "warm"
        for i in range(args.repeats):
            for name, repo in repos.items():
                cache_dir = shared if args.cache == "warm" else Path(caches) / f"cold-{name}-{i}"
                if args.cache == "warm" and i == 0:  # fill the cache outside the timed run
                    subprocess.run([sys.executable, "-c", "from codesign.workloads import get_workload; "
                                    "get_workload('resnet18')"], check=True, cwd=caches,
                                   env={**os.environ, "PYTHONPATH": str(repo), "CODESIGN_CACHE_DIR": str(cache_dir)})
                runs[name].append(one_run(repo, args.trials, args.budget, args.space, cache_dir))
                print(f"{name} run {i + 1}: " + json.dumps({k: round(v, 2) for k, v in runs[name][-1].items()}),
                      file=sys.stderr)
    summary: dict[str, object] = {"benchmark": "sweep_overhead", "trials": args.trials, "budget": args.budget,
                                  "repeats": args.repeats, "cache": args.cache, "machine": f"{os.cpu_count()} cores",
                                  "load_average_end": os.getloadavg()[0]}
    for name in repos:
        summary[name] = {"repo": str(repos[name]), "median": medians(runs[name]), "runs": runs[name]}
    if args.compare:
        a, b = medians(runs["this"]), medians(runs["compare"])
        summary["ratio_this_over_compare"] = {k: round(a[k] / b[k], 3) if b[k] else None for k in KEYS[:4]}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
