"""Where the wall time of a short `codesign sweep` goes (issue 9): start-up (imports, ray.init, Tune
set-up) before the first trial starts, the trials, and shutdown after the last trial ends. Prints
one JSON summary on stdout (medians over --repeats runs).

Measured from outside, as a user sees it: the sweep runs as `codesign sweep ... --json` in a fresh
process; start-up = first trial's start (its `timestamp - wall_s` in trials.jsonl) minus the
process start, shutdown = process exit minus the last trial's end.

    /work/venv/bin/python benchmarks/sweep_overhead.py                 # 20 trials, 3 repeats
    /work/venv/bin/python benchmarks/sweep_overhead.py --trials 8 --repeats 1
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


def one_run(trials: int, budget: int, space: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "sweep"
        cmd = [sys.executable, "-c", "import sys, codesign.cli; sys.exit(codesign.cli.main())", "sweep", space,
               "--trials", str(trials), "--budget", str(budget), "--out", str(out), "--json"]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        t0 = time.time()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
        t1 = time.time()
        if done.returncode != 0:
            raise SystemExit(done.stderr[-2000:])
        rows = [json.loads(line) for line in (out / "trials.jsonl").read_text().splitlines() if line.strip()]
        starts = [r["timestamp"] - r.get("wall_s", 0.0) for r in rows]
        ends = [r["timestamp"] for r in rows]
        total = t1 - t0
        startup, shutdown = min(starts) - t0, t1 - max(ends)
        return {"total_s": total, "startup_s": startup, "trials_s": max(ends) - min(starts), "shutdown_s": shutdown,
                "overhead_fraction": (startup + shutdown) / total, "trials": len(rows)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--space", default="pynq-z1")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    runs = [one_run(args.trials, args.budget, args.space) for _ in range(args.repeats)]
    summary = {k: round(statistics.median(r[k] for r in runs), 3) for k in runs[0]}
    print(json.dumps({"benchmark": "sweep_overhead", "trials": args.trials, "budget": args.budget,
                      "repeats": args.repeats, "median": summary, "runs": runs, "machine": "2 shared cores"}))


if __name__ == "__main__":
    main()
