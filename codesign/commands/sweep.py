"""`codesign sweep`: the co-design outer loop (Ray Tune over hardware configs, inner schedule tuning
of every layer per config) and its Pareto front (default: latency per request, area, power)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from codesign.commands.report import format_table
from codesign.errors import ConfigError
from codesign.hw.resource_model import ResourceModel, load_resource_model
from codesign.hw.space import resolve_space_path
from codesign.pareto.io import read_pareto
from codesign.pareto.objectives import CATALOG, DEFAULT_OBJECTIVES, parse_objectives
from codesign.paths import SPACES
from codesign.schedule.knobs import FAMILIES
from codesign.sweep.confirm import DEFAULT_RETUNE, run_confirm
from codesign.sweep.options import (
    DEFAULT_BUDGET,
    DEFAULT_EXHAUSTIVE_S,
    DEFAULT_SCHEDULES,
    DEFAULT_SEARCH,
    DEFAULT_SEED,
    DEFAULT_TRIALS,
    DEFAULT_TUNER,
    DEFAULT_WORKLOAD,
    SEARCHES,
    SweepOptions,
    resources_json,
)
from codesign.tune.registry import TUNERS
from codesign.tune.tuner import parse_hparams

DEFAULT_SPACE = SPACES / "pynq-z1.yaml"
DEFAULT_OUT = Path("runs/sweep")

DESCRIPTION = """\
Explore VTA hardware configs for a workload. Each Ray Tune trial is one hardware config: it is
checked against the board's resources and clocks (infeasible ones are never simulated), every
unique layer of the workload is schedule-tuned on it (--tuner auto on the default --schedules vta:
every valid template schedule when they fit --exhaustive-budget, then --budget measurements per layer
of local search in the vta family from the template optimum, warm-started from the best schedules
of earlier trials -- never worse than the template, at more cost per trial than --schedules autotvm;
docs/schedules.md), and the trial reports the latency of one request through the whole network (the
VTA steps with their tuned schedules and the CPU steps on the board's CPU; a BATCH=4 design
serves a request in its padded batch's time), images per second at full batches, area (mean
utilization of LUT, FF, BRAM18 and DSP; docs/resources.md) and board power. The Pareto front of
--objectives (default latency, area, power) is kept in DIR/pareto.json as trials finish; DIR/trials.jsonl has one line per trial, DIR/records.jsonl
the schedule measurements resume, export and run read (the fastest per layer and a sample), and PNG plots are written at the end.
"""

EPILOG = """\
examples:
  codesign sweep                                  # small ResNet-18 sweep on PYNQ-Z1 into runs/sweep
  codesign sweep hw_configs/spaces/pynq-z1.yaml --workload resnet18 --trials 50 --budget 20
  codesign sweep --workload mobilenet --trials 8 --budget 10 --out runs/mobilenet
  codesign sweep --workload my_net.py:build --trials 8      # build() returns (module, example_inputs)
  codesign sweep --search motpe --tuner xgb --out runs/motpe --seed 1
  codesign sweep --objectives latency,throughput,area --out runs/serving   # maximize images/s too
  codesign sweep hw_configs/spaces/pynq-z1-small.yaml --search exhaustive --out runs/exh
  codesign sweep --resume runs/sweep              # continue an interrupted sweep (Ctrl-C is safe)
  codesign sweep --address 10.0.0.5:6379          # run the trials on an existing Ray cluster
  codesign sweep --trials 8 --json | jq .points   # front as JSON
  codesign sweep ultra96 --verified-clocks-only   # Ultra96 (ZU3EG) designs at verified clocks only
  codesign calibrate resources --catalog my.yaml -o res.json && codesign sweep --resources res.json
                                                  # score resources with the fit to your own builds
  codesign report runs/sweep                      # print the front of a sweep again
  codesign sweep --confirm-tracker 127.0.0.1:9190 --confirm-key pynq --confirm-top 3
                                                  # then re-measure the 3 fastest front designs on boards

searches: nsga2 and motpe (multi-objective Optuna), random, grid (every combination, --trials
caps it), exhaustive (every feasible config of a small space). nsga2/motpe/random never spend a
trial on an infeasible or already evaluated config: the search is answered at once and asked again
(infeasible proposals are listed with the reason in DIR/skipped.jsonl), and the sweep ends early
when every feasible config has been evaluated. The space's stock configs are evaluated first.
Ray: without --address the sweep starts a private Ray on this machine (never a cluster a `ray
start` left running); with --address HOST:PORT (or auto) its trials run on that cluster. Only the
driver (this process) touches DIR: trials get their inputs through Ray and send back their
results and records, so workers need no shared disk (docs/cluster.md).
"""


def register(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser("sweep", help=summary, description=DESCRIPTION, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("space", nargs="?", default=None, metavar="SPACE.yaml",
                   help=f"hardware search space (default: {DEFAULT_SPACE.relative_to(SPACES.parent.parent)})")
    p.add_argument("--workload", default=None,
                   help="zoo name (codesign workloads), path/to/file.py:factory, a torch.export .pt2 or an .onnx "
                        f"(default: {DEFAULT_WORKLOAD})")
    p.add_argument("--out", default=None, metavar="DIR", help=f"experiment directory (default: {DEFAULT_OUT})")
    p.add_argument("--trials", type=int, default=None,
                   help=f"hardware configs to evaluate (default: {DEFAULT_TRIALS}; grid/exhaustive: all)")
    p.add_argument("--budget", type=int, default=None,
                   help=f"schedule measurements per layer and config (default: {DEFAULT_BUDGET})")
    p.add_argument("--tuner", default=None,
                   help=f"inner schedule tuner (default: {DEFAULT_TUNER}: every valid template schedule when that fits "
                        f"--exhaustive-budget, else xgb with --budget measurements; on --schedules vta then "
                        f"--budget measurements of local search from the template optimum; one of {', '.join(TUNERS)})")
    p.add_argument("--hparam", action="append", default=None, metavar="KEY=VALUE",
                   help="hyper-parameter of the inner --tuner (repeatable; the HPARAMS dict at the top of "
                        "codesign/tune/<tuner>.py lists them), e.g. --tuner xgb --hparam batch_size=4")
    p.add_argument("--schedules", default=None, choices=FAMILIES,
                   help=f"schedule family of the inner tuning: vta (the larger family; --tuner auto there: "
                        f"the template's schedules first, then --budget measurements of local search from the "
                        f"template optimum, never worse than it) or autotvm (the VTA templates' knobs) "
                        f"(default {DEFAULT_SCHEDULES} with --tuner auto; autotvm with any other --tuner, which would enumerate the "
                        f"vta family's 10^5-10^6 schedules per layer or, ppo/dqn, act on the template's knobs only)")
    p.add_argument("--exhaustive-budget", type=float, default=None, metavar="SECONDS",
                   help=f"seconds of measuring per layer up to which --tuner auto searches exhaustively "
                        f"(valid schedules x measured seconds per measurement; default {DEFAULT_EXHAUSTIVE_S:g})")
    p.add_argument("--search", default=None, choices=SEARCHES,
                   help=f"outer search algorithm (default: {DEFAULT_SEARCH}; how the searches compare: "
                        "docs/results.md, benchmarks/sweep.py)")
    p.add_argument("--objectives", default=None, metavar="A,B[,C]",
                   help="what the Pareto front optimizes, comma-separated (default: "
                        f"{','.join(DEFAULT_OBJECTIVES)}): "
                        + "; ".join(f"{o.name} = {o.key} ({o.direction}imize)" for o in CATALOG.values()))
    p.add_argument("--seed", type=int, default=None,
                   help=f"seed of the outer search and inner tuners (default: {DEFAULT_SEED})")
    p.add_argument("--address", default=None, metavar="RAY_ADDRESS",
                   help="run the trials on this Ray cluster (HOST:PORT of its head, or auto: the cluster "
                        "`ray start` runs on this machine) instead of a private local Ray with all cores")
    p.add_argument("--max-concurrent", type=int, default=None, metavar="N",
                   help="at most N trials at once (default: one per CPU)")
    p.add_argument("--resume", nargs="?", const=True, default=False, metavar="DIR",
                   help="continue the interrupted sweep in DIR (or --out); no other flags needed. --trials "
                        "(more or fewer) and --max-concurrent may change; the options that define the sweep "
                        "may not")
    p.add_argument("--verified-clocks-only", action="store_true", default=None,
                   help="search only the clocks at which a VTA build is known to run on the board "
                        "(verified_clock_mhz in hw_configs/boards/<board>.yaml). Without it, designs at "
                        "other clocks are explored and marked 'unverified'")
    p.add_argument("--profile", metavar="NAME", default=None,
                   help="calibration profile for the simulated measurements (kept in sweep.json for --resume)")
    p.add_argument("--resources", metavar="FILE", default=None,
                   help="score feasibility and area with the resource model of this file (written by "
                        "`codesign calibrate resources -o FILE`: fitted coefficients and the boards' verified "
                        "clocks) instead of the shipped one; its numbers are kept in sweep.json for --resume")
    p.add_argument("--confirm", metavar="HOST:PORT", default=None,
                   help="after the sweep, deploy the front designs that have a catalog bitstream to this board "
                        "and re-measure their tuned schedules there (pareto.json gets measured latency and the "
                        "front on it; designs without a bitstream are listed with their build command)")
    p.add_argument("--confirm-tracker", metavar="HOST:PORT", default=None,
                   help="confirm on the boards of this tvm RPC tracker (in parallel) instead of --confirm")
    p.add_argument("--confirm-key", metavar="KEY", default=None, help="board type on --confirm-tracker (e.g. pynq)")
    p.add_argument("--confirm-top", metavar="K", type=int, default=None,
                   help="confirm only the K front designs with the lowest simulated latency (default: all)")
    p.add_argument("--confirm-retune", metavar="N", type=int, default=DEFAULT_RETUNE,
                   help=f"schedules per layer re-measured on the board: the simulator's N best "
                        f"(default: {DEFAULT_RETUNE})")
    p.add_argument("--catalog", metavar="FILE", default=None, help="your bitstream catalog (with --confirm)")
    p.add_argument("--json", action="store_true", help="print pareto.json and the file paths as one JSON object")
    p.set_defaults(func=run)


# Flags that define a sweep (saved in sweep.json): a resume refuses new values for them. --trials
# and --max-concurrent may change on resume; --address/--json/--out/--confirm* are about this run only.
FIXED_ON_RESUME = {"workload": "--workload", "exhaustive_s": "--exhaustive-budget", "budget": "--budget", "tuner": "--tuner",
                   "search": "--search", "seed": "--seed", "verified_clocks_only": "--verified-clocks-only",
                   "profile": "--profile", "hparams": "--hparam", "resources": "--resources",
                   "objectives": "--objectives", "schedules": "--schedules"}


def _check_resume_flags(args: argparse.Namespace, out: Path) -> None:
    """Refuse, in one line, flags a resume cannot apply; say which ones it can."""
    opts = SweepOptions.load(out)
    saved = opts.to_json()
    bad = []
    for key, flag in FIXED_ON_RESUME.items():
        given = getattr(args, {"exhaustive_s": "exhaustive_budget", "hparams": "hparam"}.get(key, key))
        if key == "hparams" and given is not None:
            given = parse_hparams(given)
        if key == "objectives" and given is not None:
            given = list(parse_objectives(given))
        if key == "resources":
            if given is not None:
                bad.extend(_resources_change(given, opts.resource_model()))
            continue
        if given is not None and given != saved.get(key):
            was = saved.get(key)
            bad.append(f"{flag} {given} (started " + ("without it)" if was is None else f"with {was})"))
    if args.space is not None:
        bad.append(f"SPACE.yaml {args.space} (the sweep keeps its copy {out / opts.space})")
    if bad:
        raise ConfigError(f"--resume {out}: cannot change " + "; ".join(bad) + ". A resume may change --trials and "
                          "--max-concurrent; start a new sweep (another --out) for other options")
    for key, flag in (("trials", "--trials"), ("max_concurrent", "--max-concurrent")):
        given = getattr(args, key)
        if given is not None and given < 1:
            raise ConfigError(f"{flag} {given}: must be a positive integer")
        if given is not None and given != saved.get(key):
            print(f"codesign sweep: resume applies {flag} {given} (was {saved.get(key)})", file=sys.stderr)


def _resources_change(path: str, saved: ResourceModel) -> list[str]:
    """`--resources FILE` on resume: refused unless its numbers are the ones the sweep started with."""
    model = load_resource_model(path)
    if model.coefficients == saved.coefficients and model.verified_clocks == saved.verified_clocks:
        return []
    return [f"--resources {path} (sha256 {model.sha256}; started with {saved.label()})"]


def _options(args: argparse.Namespace, resume: bool) -> SweepOptions:
    """The sweep's options from the flags (unset flags: `SweepOptions`'s defaults). On resume only
    --trials and --max-concurrent are read (the rest comes from sweep.json)."""
    search = args.search or DEFAULT_SEARCH
    # grid/exhaustive without --trials: every point
    trials = args.trials if args.trials is not None or search in ("grid", "exhaustive") else DEFAULT_TRIALS
    if resume:
        return SweepOptions(trials=args.trials, max_concurrent=args.max_concurrent)
    given = {"trials": trials, "budget": args.budget, "tuner": args.tuner, "exhaustive_s": args.exhaustive_budget,
             "search": search, "seed": args.seed, "max_concurrent": args.max_concurrent,
             "verified_clocks_only": args.verified_clocks_only, "profile": args.profile,
             "hparams": parse_hparams(args.hparam or []) or None, "resources": resources_json(args.resources),
             "objectives": parse_objectives(args.objectives) if args.objectives else None,
             "schedules": args.schedules}  # None: default_schedules(tuner)
    return SweepOptions(**{k: v for k, v in given.items() if v is not None or k == "trials"})


def run(args: argparse.Namespace) -> int:
    resume = args.resume is not False
    if isinstance(args.resume, str):
        if args.out is not None and Path(args.out) != Path(args.resume):
            raise ConfigError(f"--resume {args.resume} and --out {args.out} name different directories")
        out = Path(args.resume)
    else:
        out = Path(args.out) if args.out is not None else DEFAULT_OUT
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out}: is a file; --out names the sweep directory to write into")
    if resume:
        _check_resume_flags(args, out)
    space = resolve_space_path(args.space) if args.space else DEFAULT_SPACE  # path or shipped name
    if not resume and not space.exists():
        raise ConfigError(f"{space}: no such space file (spaces shipped: "
                          + ", ".join(sorted(p.name for p in SPACES.glob("*.yaml"))) + ")")
    confirming = bool(args.confirm or args.confirm_tracker)
    if confirming and args.confirm and args.confirm_tracker:
        raise ConfigError("--confirm HOST:PORT and --confirm-tracker HOST:PORT: give one of them")
    if args.confirm_tracker and not args.confirm_key:
        raise ConfigError(f"--confirm-tracker {args.confirm_tracker} needs --confirm-key (the board type, e.g. pynq)")
    if (args.confirm_top is not None and args.confirm_top < 1) or args.confirm_retune < 1:
        raise ConfigError(f"--confirm-top {args.confirm_top} / --confirm-retune {args.confirm_retune}: must be >= 1")
    progress = True  # on stderr (stdout stays the table or --json): a bar on a terminal, else a line per trial
    from codesign.sweep.runner import run_sweep  # Ray Tune (~1 s of import) only when a sweep runs

    result = run_sweep(space, args.workload or DEFAULT_WORKLOAD, out, _options(args, resume), resume=resume,
                       address=args.address, progress=progress)
    code = 130 if result.interrupted else 0  # Ctrl-C: the shell's "killed by SIGINT" status, as `tune`
    if confirming and result.complete:
        run_confirm(
            result.out_dir, board=args.confirm, tracker=args.confirm_tracker, key=args.confirm_key,
            top=args.confirm_top, retune=args.confirm_retune, user_catalog=Path(args.catalog) if args.catalog else None,
            on_step=None if args.json else (lambda s: print(s, file=sys.stderr)))
        result.pareto = read_pareto(result.out_dir / "pareto.json")  # with the measured columns
    if args.json:
        print(json.dumps({**result.pareto.to_json(), "paths": result.paths, "complete": result.complete,
                          "interrupted": result.interrupted, "planned_trials": result.planned, "retries": result.retries,
                          "wall_s": round(result.wall_s, 1)}))
        return code
    print(format_table(result.pareto))
    ok = [t for t in result.trials if t.ok]
    infeasible = sum(1 for t in ok if not t.feasible)
    configs = len({t.config for t in ok})
    line = f"\n{len(ok)} trials on {configs} distinct configs in {result.wall_s:.0f} s"
    if infeasible:
        line += f"; {infeasible} infeasible (never simulated)"
    if result.retries:
        line += f"; {result.retries} trial run(s) lost (a worker or node) and run again (trials.jsonl: retries)"
    if result.skipped:
        line += f"; {result.skipped} infeasible configs proposed by the search were skipped (skipped.jsonl)"
    print(line)
    print(f"results: {result.out_dir}/pareto.json, trials.jsonl, records.jsonl ({result.records_note})")
    for path in result.plots:
        print(f"plot: {path}")
    if confirming and result.complete:
        conf = result.pareto.confirm or {}
        for d in conf["missing_bitstream"]:
            print(f"no bitstream for front design {d['config']}: {d['build']}")
        print(f"confirmed on boards ({conf['boards']}): {len(conf['designs'])} design(s); front on measured "
              f"latency: {', '.join(conf['measured_front']) or '-'}; plot: {conf['plot']}")
    if not result.complete:
        if confirming:
            print("boards not used: the sweep is not complete (confirm runs after it)")
        print(f"sweep interrupted after {len(ok)} of {result.planned} trials; continue it with "
              f"`codesign sweep --resume {result.out_dir}`")
    return code
