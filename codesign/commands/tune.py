"""`codesign tune`: tune layer schedules with an RL agent or a baseline tuner."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from tqdm import tqdm

from codesign.calibrate.profiles import resolve_params
from codesign.errors import ConfigError
from codesign.fileio import check_output_path
from codesign.hw.board import Board
from codesign.hw.config import HwConfig
from codesign.netrun.schedules import ScheduleChooser
from codesign.network.graph import Network
from codesign.place import plan_network
from codesign.place.refine import refine
from codesign.plotting import pyplot, save_figure
from codesign.schedule.knobs import FAMILIES
from codesign.schedule.support import partition, unsupported_reason
from codesign.sweep.network import timing_network
from codesign.tune import template_local
from codesign.tune.auto import DEFAULT_EXHAUSTIVE_S, AutoTuner
from codesign.tune.loop import RecordCallback, TaskRun, tune_layer
from codesign.tune.measure import SimulatorRunner
from codesign.tune.records import (
    MeasureRecord,
    RecordWriter,
    describe_skipped,
    read_autotvm_log,
    read_records,
    skipped_line,
)
from codesign.tune.registry import TUNERS
from codesign.tune.rpc_runner import RPCRunner
from codesign.tune.scheduler import POLICIES
from codesign.tune.search import (
    DEFAULT_SCHEDULES,
    DEFAULT_TUNER,
    RL_TUNERS,
    TUNE_BUDGET,
    Search,
    default_schedules,
    network_alternatives,
    network_layers,
)
from codesign.tune.task import TuneTask
from codesign.tune.tuner import parse_hparams
from codesign.workloads import get_workload, parse_layer

DEFAULT_HW = "pynq_1x16_i8w8a32_15_15_18_17"
LEARNED_TRIALS = TUNE_BUDGET  # --budget default (codesign.tune.search: the default search's defaults)

DESCRIPTION = """\
Find the fastest valid schedule (of the vta family by default, --schedules; the AutoTVM knobs of
conv2d_packed.vta / dense_packed.vta with --schedules autotvm) of a layer, or of every offloaded layer of a workload, on one VTA hardware config, within a budget of
--budget measurements on the timing simulator. Invalid schedules are ruled out analytically and
never measured; no schedule is measured twice. Every measurement can be appended to a JSONL
records file (--records), which can warm-start later runs (--warm-start, also AutoTVM logs) and
be exported with `codesign export autotvm`.

tuners:  auto    (default) on the vta family: template+local -- the template's schedules first
                 (as auto on autotvm), then --budget measurements per layer of local search
                 (best-first neighbours) from the template optimum's point of the family: never
                 worse than the template; with --budget 64 or more (as the default --budget) the
                 first 24 of them local, then the learned search (xgb), seeded with the template's
                 results and those 24 ("template+xgb"). On autotvm: every valid schedule when valid schedules x
                 the measured cost of one measurement fit --exhaustive-budget seconds, else
                 the pretrained agent shipped in
                 sim/agents/ (a measurement on a board costs seconds), or xgb, within --budget
         exhaustive  every valid schedule (the exact optimum; --parallel spreads it over cores)
         xgb     XGBoost rank model + simulated annealing (AutoTVM's default)
         bandit  neural contextual bandit (a whole knob vector per action)
         ppo     PPO, multi-step knob moves (-1/0/+1 per knob, horizon 20; research on the agents)
         dqn     double DQN with one Q-head per knob, multi-step (research on the agents)
         evo     evolutionary search ranked by the XGBoost model (Ansor's)
         ga      genetic algorithm;  random;  grid (config-index order)
A workload's layers share --budget x layers measurements, spent where the expected gain is
largest (--task-scheduler gain: weight x recent improvement + UCB on the headroom above the
layer's roofline bound; `even`: --budget per layer, in order). Exhaustive layers are not scheduled.
--schedules picks the schedule family: vta (default with --tuner auto) or autotvm (the TVM VTA
templates' knobs; the default with every other tuner, which on vta would enumerate the family's
10^5-10^6 valid schedules per layer or, ppo/dqn, cannot act on its knobs).
RL agents (bandit/ppo/dqn) condition on layer and hardware features: --agent loads a pretrained
checkpoint, --save-agent writes the agent after tuning (train on some layers, reuse on others).
A workload on a config with BATCH > 1 is tuned at that batch; seconds_per_image = seconds / batch.
"""

EPILOG = """\
examples:
  codesign tune --layer conv2d:1,64,56,56,64,3,3,1,1                  # auto: template, then local search
  codesign tune --workload resnet18 --tuner exhaustive --parallel 2
  codesign tune --workload resnet18 --tuner evo --budget 40 --exhaustive-budget 0
  codesign tune --layer conv2d:1,64,56,56,64,3,3,1,1 --tuner xgb --budget 50
  codesign tune --layer conv2d:1,256,14,14,512,1,1,2,0 --tuner xgb --budget 100 --plot curve.png
  codesign tune --workload resnet18 --hw pynq_4x8 --tuner bandit --records runs/r18_4x8.jsonl
  codesign tune --workload resnet18 --tuner bandit --save-agent agents/bandit.pt --json
  codesign tune --layer dense:1,256,128 --tuner bandit --agent agents/bandit.pt --budget 20
  codesign tune --layer conv2d:1,128,28,28,128,3,3,1,1 --warm-start sim/calibration/pynq_resnet18.log
  # on PYNQ boards (docs/board.md): one board, or every free board of a key on a tracker
  codesign tune --layer conv2d:1,64,56,56,64,3,3,1,1 --board 192.168.2.99:9091 --bitstream vta.bit
  codesign tune --workload resnet18 --tracker 10.0.0.1:9190 --key pynq --check-correctness
"""


def register(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser("tune", help=summary, description=DESCRIPTION, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--layer", metavar="SPEC",
                      help="conv2d:N,C,H,W,O,KH,KW,stride,pad or dense:N,IN,OUT")
    what.add_argument("--workload", metavar="NAME",
                      help="zoo name (codesign workloads), path/to/file.py:factory, a .pt2 or an .onnx, e.g. resnet18")
    p.add_argument("--hw", default=DEFAULT_HW, metavar="NAME",
                   help=f"hardware config name, alias (pynq_1x16, pynq_4x8) or YAML/JSON path (default {DEFAULT_HW})")
    p.add_argument("--tuner", default=DEFAULT_TUNER, choices=TUNERS, help=f"search algorithm (default {DEFAULT_TUNER})")
    p.add_argument("--schedules", default=None, choices=FAMILIES,
                   help=f"schedule family: vta (the larger family that contains the templates' schedules; "
                        f"auto there: template+local) or autotvm (the VTA templates' knobs) (default {DEFAULT_SCHEDULES} "
                        "with --tuner auto; autotvm with any other tuner, which would enumerate the vta family's "
                        "10^5-10^6 schedules per layer or, ppo/dqn, act on the template's knobs only)")
    p.add_argument("--task-scheduler", default="gain", choices=POLICIES,
                   help="--workload: spend measurements where the expected gain is largest (gain) or "
                        "--budget per layer in order (even) (default gain)")
    p.add_argument("--exhaustive-budget", type=float, default=DEFAULT_EXHAUSTIVE_S, metavar="SECONDS",
                   help=f"--tuner auto: seconds of measuring per layer up to which the search is exhaustive "
                        f"(default {DEFAULT_EXHAUSTIVE_S:g})")
    p.add_argument("--budget", type=int, default=None, metavar="N",
                   help=f"measurements per layer (default {LEARNED_TRIALS}; auto and exhaustive: every valid "
                        "schedule when the search is exhaustive). In a sweep, trials are hardware configs")
    p.add_argument("--trials", dest="budget", type=int, help=argparse.SUPPRESS)  # the old name of --budget
    p.add_argument("--hparam", action="append", default=[], metavar="KEY=VALUE",
                   help="override one hyper-parameter of the tuner (repeatable); the HPARAMS dict at the top "
                        "of codesign/tune/<tuner>.py lists them, e.g. --hparam lr=3e-4 for ppo")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default 0)")
    p.add_argument("--agent", metavar="PATH", help="pretrained agent checkpoint (bandit/ppo/dqn)")
    p.add_argument("--save-agent", metavar="PATH", help="save the RL agent after tuning (bandit/ppo/dqn)")
    p.add_argument("--records", metavar="FILE", help="append every measurement to this JSONL file")
    p.add_argument("--warm-start", metavar="FILE", action="append", default=[],
                   help="records JSONL or AutoTVM log whose results seed the tuner (repeatable); "
                        "the bandit also learns from records of other layers and configs")
    p.add_argument("--patience", type=int, metavar="N", help="stop after N measurements without improvement")
    p.add_argument("--parallel", type=int, default=1, metavar="N", help="measurement worker processes (default 1)")
    p.add_argument("--timeout", type=float, default=60.0, metavar="S", help="seconds per measurement (default 60)")
    b = p.add_argument_group("measuring on PYNQ boards (instead of the simulator; see `codesign board`)")
    where = b.add_mutually_exclusive_group()
    where.add_argument("--board", metavar="HOST:PORT", action="append", default=[],
                       help="a board server (repeatable: measurements spread over all boards)")
    where.add_argument("--tracker", metavar="HOST:PORT", help="a tvm RPC tracker; use its free boards of --key")
    b.add_argument("--key", default="", help="board type on the tracker, e.g. pynq")
    b.add_argument("--bitstream", metavar="FILE", help="the .bit of --hw, programmed on each board if not loaded")
    b.add_argument("--number", type=int, default=1, help="runs averaged per board timing (default 1)")
    b.add_argument("--repeat", type=int, default=3, help="board timings per measurement; the median is kept (default 3)")
    b.add_argument("--check-correctness", action="store_true",
                   help="compare board outputs with the NumPy reference (WRONG_ANSWER otherwise)")
    b.add_argument("--max-failures", type=int, default=3, metavar="N",
                   help="quarantine a board after N consecutive failures (default 3)")
    p.add_argument("--profile", metavar="NAME", default=None,
                   help="calibration profile for the simulated measurements (see `codesign calibrate --profile`)")
    p.add_argument("--json", action="store_true",
                   help="print JSON: one object for --layer, a list of objects for --workload")
    p.add_argument("--plot", metavar="FILE.png",
                   help="write the tuning curve (best latency vs measurements) to this PNG file; takes a path, "
                        "e.g. --plot curve.png")
    p.set_defaults(func=run)


def _warm_records(paths: list[str], hw: HwConfig | None = None) -> list[Any]:
    """Records of every --warm-start file (our JSONL, else an AutoTVM v0.2 or v0.1 log; `hw` is
    the config of v0.1 records whose -model= names only a board or `sim`). Skipped lines are
    counted on stderr; a file with nothing usable is refused."""
    out: list[Any] = []
    for path in paths:
        try:
            recs, skipped = read_records(path)
            lines = len(recs) + len(skipped)
            if lines == 0:
                raise ConfigError(f"{path}: empty (no tuning records and no AutoTVM log lines)")
            if not recs:  # not our JSONL: try it as an AutoTVM log
                first = skipped[0]
                recs, skipped = read_autotvm_log(path, hw)
                if not recs:
                    why = f"line {skipped[0].line}: {skipped[0].reason}" if skipped else "no records"
                    raise ConfigError(f"{path}: nothing usable in {lines} lines: neither tuning records JSONL "
                                      f"(line {first.line}: {first.reason}) nor AutoTVM records ({why})")
        except ConfigError as exc:
            raise ConfigError(f"--warm-start {exc}") from None
        if skipped:
            print(f"codesign tune: warm start: {describe_skipped(path, skipped, lines)}; using {len(recs)} records",
                  file=sys.stderr)
        out += recs
    return out


def _layers(args: argparse.Namespace, hw: Any) -> tuple[list[tuple[Any, int]], int, list[str], Network | None]:
    """[(layer, count)], batch, notes, the workload's graph (None: a layer, or layers only). A `--workload` is tuned as its network plan asks: the layers
    `codesign.place.choose_layers` names (the stem through space-to-depth, the padded dense, every
    fused epilogue's layer), exactly what a sweep trial tunes and `codesign run` then looks up."""
    if args.layer is not None:  # `--layer ""` is a bad layer, not "no layer"
        layer = parse_layer(args.layer)
        reason = unsupported_reason(layer, hw)
        if reason:
            raise ConfigError(f"--layer {args.layer}: cannot run on {hw.name}: {reason}")
        return [(layer, 1)], layer.batch, [], None
    net, why = timing_network(args.workload)
    if net is not None:
        layers = network_layers(net, hw)
        if not layers:
            raise ConfigError(f"--workload {args.workload}: nothing to tune, the network plan on {hw.name} asks "
                              "VTA about no layer (every conv/linear stays on the CPU)")
        batch = int(net.inputs[0][1][0]) if net.inputs and net.inputs[0][1] else 1
        return layers, batch, [f"the {len(layers)} layers the network plan of {net.name} asks VTA about on {hw.name} "
                               "(host rewrites included), as a sweep trial tunes them"], net
    wl = get_workload(args.workload).for_hw(hw)
    vta, cpu = partition(wl, hw)
    notes = [f"{why}: tuning the workload's offloaded layers only"]
    notes += [f"{layer.name} x{count} stays on the CPU: {reason}" for layer, count, reason in cpu]
    if not vta:
        raise ConfigError(f"--workload {args.workload}: nothing to tune, no layer runs on {hw.name} "
                          f"({len(cpu)} layer(s) stay on the CPU, e.g. {cpu[0][0].name}: {cpu[0][2]})")
    return vta, wl.batch, notes, None


def run(args: argparse.Namespace) -> int:
    if not args.exhaustive_budget >= 0:
        raise ConfigError(f"--exhaustive-budget {args.exhaustive_budget:g}: must be a number of seconds >= 0")
    if args.budget is not None and args.budget < 1:
        raise ConfigError(f"--budget {args.budget}: must be >= 1")
    trials = args.budget if args.budget is not None else LEARNED_TRIALS
    budget = None if args.budget is None and args.tuner in ("auto", "exhaustive") else trials
    hparams = parse_hparams(args.hparam)
    args.schedules = args.schedules or default_schedules(args.tuner)
    if not args.timeout > 0:  # 0 would time out every measurement and report "no valid schedule"
        raise ConfigError(f"--timeout {args.timeout:g}: must be a positive number of seconds")
    if (args.agent or args.save_agent) and args.tuner not in RL_TUNERS:
        raise ConfigError(f"--agent/--save-agent need an RL tuner (bandit, ppo, dqn), not --tuner {args.tuner}")
    if args.plot:
        check_output_path(args.plot, "PNG")  # before the tuning, not after it
    hw = HwConfig.resolve(args.hw)
    layers, batch, notes, net = _layers(args, hw)
    warm = _warm_records(args.warm_start, hw) if args.warm_start else None
    progress = not args.json and sys.stderr.isatty()
    agent: Any = args.agent
    results = []
    searched: dict[str, str] = {}
    params, _source = resolve_params(args.profile, hw=hw.vta_model)
    if args.board or args.tracker:
        runner: Any = RPCRunner(args.board, args.tracker, args.key, bitstream=args.bitstream, number=args.number,
                                repeat=args.repeat, timeout_s=args.timeout, max_failures=args.max_failures,
                                check_correctness=args.check_correctness)
    else:
        runner = SimulatorRunner(hw, n_parallel=args.parallel, timeout_s=args.timeout, params=params)
    search = Search(tuner=args.tuner, family=args.schedules, budget=trials, seed=args.seed,
                    exhaustive_s=args.exhaustive_budget, hparams=hparams, policy=args.task_scheduler,
                    cap=args.budget is not None)
    try:
        if args.tuner in RL_TUNERS:  # one agent learns layer after layer
            for k, (layer, _count) in enumerate(layers):
                task = search.task(layer, hw, k, agent=agent)
                res = tune_layer(layer, hw, tuner=task.tuner, budget=budget, seed=args.seed + k,
                                 records=args.records, warm_start=warm, progress=progress, runner=runner,
                                 patience=args.patience)
                if task.tuner.agent is not None:
                    agent = task.tuner.agent  # one agent keeps learning across the layers
                results.append((layer, _count, res))
        else:
            results = _search(args, search, layers, hw, runner, warm, progress, searched,
                              network_alternatives(net, hw) if net is not None else ())
    finally:
        runner.close()
    stale = sum(res.warm_skipped for _layer, _count, res in results)
    if stale:  # vta records are matched by knob values; those no longer in the space are counted
        mine = sum(1 for r in warm or () if any(r.layer == layer.name and r.hw == hw.name for layer, _c in layers))
        print(skipped_line("codesign tune: --warm-start", stale, mine), file=sys.stderr)
    if args.save_agent and agent is not None and not isinstance(agent, str):
        agent.save(args.save_agent)
    if args.plot:
        _plot(results, args.plot, hw, args.tuner)
    if args.json:
        objs = [dict(res.to_json(), count=count) for _layer, count, res in results]
        print(json.dumps(objs[0] if args.layer is not None else objs))
        return 0
    for note in notes:
        print(f"note: {note}")
    total = 0.0
    for layer, count, res in results:
        if res.best is None:
            print(f"{layer.name}: no valid schedule measured ({res.measurements} measurements)")
            total = math.nan
            continue
        total += count * res.best_seconds / batch
        knobs = " ".join(f"{k}={v}" for k, v in res.best.knobs.items())
        print(f"{layer.name} x{count}: {res.best_seconds * 1e3:.4f} ms  index {res.best.index}  "
              f"[{knobs}]  after {res.measurements} measurements ({res.stopped}{searched.get(layer.name, '')})")
    if net is not None and not math.isnan(total):
        print(_whole(net, hw, results, params))
    elif len(results) > 1:
        print(f"total offloaded latency: {total * 1e3:.3f} ms per image (batch {batch}, {hw.name}, "
              f"tuner {args.tuner})")
    if args.save_agent:
        print(f"agent saved to {args.save_agent}")
    if args.plot:
        print(f"tuning curve written to {args.plot}")
    return 0


def _whole(net: Network, hw: HwConfig, results: list[tuple[Any, int, Any]], params: Any) -> str:
    """The whole-network latency `codesign run --records` will predict from these results: the
    network plan with `run`'s schedule chooser over every successful measurement (per op, the
    fastest fused op of a layer's best records, `netrun.refine`), not the layers' sum: the stem's
    forms are alternatives and a layer's best plain schedule is not always its best fused one."""
    recs = [MeasureRecord.make(layer, hw, r.config, r.seconds, r.cycles, r.error, res.tuner, res.seed)
            for layer, _count, res in results for r in res.history if r.ok]
    chooser = ScheduleChooser(hw, recs, params=params)
    plan, _chosen = refine(plan_network(net, hw, Board.for_target(hw.TARGET), chooser), chooser)
    return (f"whole network (its plan with these schedules, as `codesign run --records` picks them): "
            f"{plan.latency_s * 1e3:.3f} ms per request "
            f"(VTA {plan.vta_s * 1e3:.3f} ms + CPU {plan.cpu_s * 1e3:.3f} ms; batch {plan.batch}, {hw.name})")


def _search(args: argparse.Namespace, search: Search, layers: list[tuple[Any, int]], hw: HwConfig, runner: Any,
            warm: Any, progress: bool, searched: dict[str, str],
            alternatives: Sequence[Mapping[Any, int]] = ()) -> list[tuple[Any, int, Any]]:
    """The layers tuned by the default search's one loop (`codesign.tune.search.Search.tune`, as a
    sweep trial): `auto` on the vta family is template+local (template+learned from 64 per layer),
    any other tuner one task per layer under the task scheduler; `alternatives`: the network plan
    groups' forms (`network_alternatives`)."""
    writer = RecordWriter(args.records) if args.records else None
    bar = tqdm(desc=f"{search.tuner} ({search.label}) {len(layers)} layers", unit="meas", leave=False) \
        if progress else None
    tasks: dict[int, TuneTask] = {}

    def make_run(task: TuneTask, k: int, budget: int | None, first: Any) -> TaskRun:
        tasks[k] = task
        seed = int(task.tuner.seed)
        cbs = [RecordCallback(writer, task.layer, hw, task.tuner.name, seed)] if writer else []
        return TaskRun(task, budget=budget, seed=seed, runner=runner, warm_start_records=warm, seeds=first,
                       patience=args.patience, callbacks=cbs)

    try:
        done = search.tune(layers, hw, make_run, on_round=(lambda _k, made: bar.update(made)) if bar else None,
                           alternatives=alternatives)
    finally:
        if bar is not None:
            bar.close()
        if writer:
            writer.close()
    for k, ((layer, _count), res) in enumerate(zip(layers, done)):
        if search.two_stage:
            # a form another form of its op outclasses keeps its template stage's result (tuner "auto")
            label = ("template only (another form of its op is faster)" if res.tuner == "auto"
                     else template_local.search_name(None if res.tuner == "local" else res.tuner))
            searched[layer.name] = f", auto: {label}"
        elif isinstance(tasks[k].tuner, AutoTuner):
            searched[layer.name] = f", auto: {tasks[k].tuner.choice['search']}"
    return [(layer, count, res) for (layer, count), res in zip(layers, done)]


def _plot(results: list[tuple[Any, int, Any]], path: str, hw: Any, tuner: str) -> None:
    """Best latency so far vs measurements, in ms, one curve per layer (absolute: each curve
    normalized to its own final best would end at 1.0 and hide which layer costs what); a log
    axis when the layers' latencies span more than 20x."""
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    finals = []
    for layer, count, res in results:
        curve = res.curve()
        if curve.size == 0 or not (curve < math.inf).any():
            continue
        x = range(1, curve.size + 1)
        ms = curve * 1e3
        finals.append(float(ms[ms < math.inf].min()))
        times = f" x{count}" if count > 1 else ""
        ax.step(x, ms, where="post", label=f"{layer.name}{times}: {finals[-1]:.3f} ms")
    if finals and max(finals) > 20 * min(finals):
        ax.set_yscale("log")
    ax.set_xlabel("measurements")
    ax.set_ylabel("best latency so far (ms, one call of the layer)")
    ax.set_title(f"{tuner} on {hw.name}")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, frameon=False)
    save_figure(fig, path, dpi=120)
