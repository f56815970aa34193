"""`run_sweep`: the co-design outer loop on Ray Tune (one trial per hardware config).

Experiment directory layout (everything appended or replaced atomically while the sweep runs):
    sweep.json      options of the sweep (resume reads them)
    space.yaml      copy of the hardware space file the sweep started with
    trials.jsonl    one line per finished trial (objectives, resources, per-layer results)
    records.jsonl   the inner tuners' schedule measurements (`codesign.tune` records) that resume, warm
                    starts, export, run and confirm read: the fastest of each (config, layer, family)
                    and a sample (`codesign.sweep.state.kept_records`)
    pareto.json     the current Pareto front, its hypervolume and reference point
    skipped.jsonl   infeasible configs the searcher proposed (answered without a trial), with the reason
    sweep.lock      held while a sweep runs here (`codesign.sweep.lock`): one sweep per directory
    *.png           plots, written at the end
    ray/sweep/      Ray Tune's own experiment state (what `Tuner.restore` reads)
    ray/sweep-more-K/  a continuation after K finished trials (a resume that raised --trials or
                    changed --max-concurrent; its searcher is preloaded with trials.jsonl)
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shutil
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codesign.calibrate.profiles import resolve_params
from codesign.errors import ConfigError
from codesign.fileio import count_unreadable
from codesign.hw.space import HwSpace, exclusion_kind
from codesign.pareto import ParetoDoc, space_power_bound
from codesign.sweep.filtering import SKIPPED_FILE
from codesign.sweep.lock import SweepLock
from codesign.sweep.network import network_from_json, network_to_json, timing_network
from codesign.sweep.options import OPTIONS_FILE, SPACE_COPY, SweepOptions, load_space
from codesign.sweep.plots import write_plots
from codesign.sweep.results import SweepCallback, design_points, read_trials, write_pareto
from codesign.sweep.rows import TRIALS_FILE, TrialRow
from codesign.sweep.search import build_search
from codesign.sweep.state import KEEP_BEST, SAMPLE_EVERY, RecordsLog, SweepState
from codesign.sweep.trial import RECORDS_FILE, InnerTuning, TrialContext, sweep_trial
from codesign.tune.records import best_records
from codesign.tune.registry import TUNERS, tuner_class
from codesign.tune.tuner import resolve_hparams
from codesign.workloads import Workload, get_workload

RAY_DIR = "ray"
EXPERIMENT = "sweep"
# Ray Tune runs a failed trial again this many times (a worker or node lost mid-trial; a trial
# that raises fails as often). Its records travel with its final result, so none is written twice.
MAX_FAILURES = 2


@dataclass
class SweepResult:
    out_dir: Path
    options: SweepOptions
    trials: list[TrialRow]  # finished trials in completion order (trials.jsonl)
    pareto: ParetoDoc  # pareto.json
    plots: list[Path] = field(default_factory=list)
    planned: int = 0  # trials the search was asked for
    wall_s: float = 0.0
    exhausted: bool = False  # stopped early because every feasible config had been evaluated
    interrupted: bool = False  # Ctrl-C (SIGINT): Ray stopped the running trials and saved its state

    @property
    def skipped(self) -> int:
        """Infeasible configs the searcher proposed, answered without a trial (skipped.jsonl)."""
        path = self.out_dir / SKIPPED_FILE
        return sum(1 for line in path.read_text().splitlines() if line.strip()) if path.exists() else 0

    @property
    def records_note(self) -> str:
        """'1.4 MB, 3,019 records: the 8 fastest schedules of each (config, layer, schedule family) and
        1 in 32 of the rest (...)' -- what records.jsonl holds (`codesign.sweep.state.kept_records`)."""
        path = self.out_dir / RECORDS_FILE
        if not path.exists():
            return "no records"
        size = path.stat().st_size
        with open(path, "rb") as f:
            lines = sum(1 for line in f if line.strip())
        return (f"{size / 1e6:.1f} MB, {lines:,} records: the {KEEP_BEST} fastest schedules of each (config, layer, "
                f"schedule family) and 1 in {SAMPLE_EVERY} of the rest (schedule index a multiple of {SAMPLE_EVERY})")

    @property
    def complete(self) -> bool:
        return self.exhausted or sum(1 for t in self.trials if t.ok) >= self.planned

    @property
    def retries(self) -> int:
        """Trial runs Ray Tune started again after a failure (a lost worker or node)."""
        return sum(t.retries for t in self.trials)

    @property
    def paths(self) -> dict[str, str]:
        d = self.out_dir
        return {"dir": str(d), "trials": str(d / TRIALS_FILE), "records": str(d / RECORDS_FILE),
                "pareto": str(d / "pareto.json"), "skipped": str(d / "skipped.jsonl"),
                "plots": [str(p) for p in self.plots]}  # type: ignore[dict-item]


# -- workloads in the options file ----------------------------------------------------------------
def _network_options(workload: str | Workload) -> tuple[dict[str, Any] | None, str | None]:
    """(the workload's graph as JSON, None) or (None, why the sweep costs only its offloaded layers)."""
    if not isinstance(workload, str):
        return None, "the workload was given as layers, without its network graph"
    net, why = timing_network(workload)
    return (network_to_json(net), None) if net is not None else (None, why)


def _workload_options(workload: str | Workload) -> tuple[str, tuple[tuple[str, int], ...] | None]:
    """Workload name and its layer list (specs and counts)."""
    if isinstance(workload, str):
        workload = get_workload(workload)
    # The layer list is always stored: trials (Ray workers) and --resume never re-trace a torch
    # module, and a file.py:factory workload stays what it was when the sweep started.
    return workload.name, tuple((layer.spec, int(count)) for layer, count in workload.entries)


def workload_from_options(options: SweepOptions) -> Workload:
    if options.layers:
        return Workload(options.workload, tuple((s, int(c)) for s, c in options.layers))
    return get_workload(options.workload)


# -- Ray -------------------------------------------------------------------------------------------
def _init_ray(address: str | None, num_cpus: int | None) -> bool:
    """Start (or join) Ray unless the caller already did; returns whether we own the session."""
    import ray

    if ray.is_initialized():
        return False
    # Token auth stays as Ray has it (on by default since 2.60, token in ~/.ray/auth_token): Ray's gRPC
    # servers listen on every interface even for a private instance, so the token is what keeps other
    # machines out (docs/cluster.md §Security). A user who set RAY_AUTH_MODE keeps their choice.
    kw: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING,
                              configure_logging=True)
    if address:
        _probe_address(address)
        try:
            with _deadline(ADDRESS_TIMEOUT_S, f"--address {address}: the Ray cluster did not accept the "
                                              f"connection within {ADDRESS_TIMEOUT_S:g} s"):
                ray.init(address=address, **kw)
        except BaseException:
            ray.shutdown()  # a half-made connection must not outlive the error
            raise
    else:
        # "local": a private instance, never the cluster /tmp/ray/ray_current_cluster names (a
        # `ray start` on this machine, running or stale); joining one is what --address is for.
        ray.init(address="local", num_cpus=num_cpus or os.cpu_count() or 1, **kw)
    return True


ADDRESS_TIMEOUT_S = 30.0  # joining a cluster: Ray's own retries would wait for minutes


def _probe_address(address: str, timeout_s: float = 5.0) -> None:
    """One line, in seconds, when nothing listens at `address` (Ray itself retries for minutes,
    printing only warnings)."""
    if address in ("auto", "local"):
        return  # Ray finds the cluster through its own files
    if address.startswith("ray://"):
        # Ray Client runs Tune's driver loop -- our callbacks that write DIR -- on the head node.
        raise ConfigError(f"--address {address}: Ray Client addresses are not supported (Tune would write the "
                          "experiment directory on the head); run `codesign sweep --address auto` on a node of the "
                          "cluster, e.g. with `ray job submit` (docs/cluster.md)")
    hostport = address.split("://", 1)[-1]
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ConfigError(f"--address {address!r}: expected HOST:PORT of a Ray head node (e.g. 127.0.0.1:6379)")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        why = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or type(exc).__name__)
        raise ConfigError(f"--address {address}: no Ray cluster answers there ({why}); start one with "
                          "`ray start --head` on that host, or drop --address to run Ray locally") from None


@contextlib.contextmanager
def _deadline(seconds: float, message: str) -> Any:
    """ConfigError(message) if the block runs longer than `seconds` (SIGALRM; main thread only)."""

    def expire(sig: int, frame: Any) -> None:
        raise ConfigError(message)

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _concurrency(max_concurrent: int | None) -> int:
    """Trials at once: `max_concurrent`, else one per CPU of the Ray cluster. Ray Tune's default
    ("auto") keeps a single pending trial for a custom searcher, so trials ran one at a time in most
    runs while Ray started and dropped a second worker; the pending limit follows the concurrency."""
    import ray

    n = max_concurrent or max(1, int(ray.cluster_resources().get("CPU", 1)))
    os.environ["TUNE_MAX_PENDING_TRIALS_PG"] = str(n)  # read when the Tuner starts its controller
    return n


def _trial_dirname(trial: Any) -> str:
    return f"trial_{trial.trial_id}"  # Ray's default name lists every parameter (too long)


def _quiet_ray() -> None:
    # Ray Tune's console table would fight with our progress bar; the results are in our files.
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    # Tune's per-trial CSV/JSON/TensorBoard loggers would write a second copy of what trials.jsonl
    # holds (TensorBoardX also imports at set-up); resume uses Tune's experiment state, not these.
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    logging.getLogger("ray.tune").setLevel(logging.ERROR)


# -- the sweep -------------------------------------------------------------------------------------
def validate_new(space: str | Path, workload: Any, options: SweepOptions) -> HwSpace:
    """Check a new sweep's inputs without creating anything; returns the parsed space."""
    hw_space = load_space(space, options.resources)
    searched = hw_space.verified_clocks_only() if options.verified_clocks_only else hw_space  # raises if none
    if not searched.enumerate():
        raise ConfigError(searched.why_empty())  # which rule removed how many points
    _validate_tuner(options.tuner, options.hparams)
    if isinstance(workload, str):
        get_workload(workload)
    return hw_space


def prepare(space: str | Path, workload: Any, out_dir: Path, options: SweepOptions) -> tuple[SweepOptions, HwSpace]:
    """Create the experiment directory of a new sweep: the space copy and sweep.json (`options`
    with the space copy's name and the workload's name and layers filled in). Returns those options
    and the parsed space (parsed once here; the trials get this object). The caller holds the
    directory's lock."""
    src = Path(space)
    hw_space = validate_new(space, workload, options)
    if (out_dir / TRIALS_FILE).exists() or (out_dir / RAY_DIR).exists():
        raise ConfigError(f"{out_dir} already holds a sweep; continue it with `codesign sweep --resume {out_dir}` "
                          "or choose another --out")
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, out_dir / SPACE_COPY)
    name, layers = _workload_options(workload)
    network, note = _network_options(workload)
    opts = dataclasses.replace(options, space=SPACE_COPY, workload=name, layers=layers, network=network,
                               network_note=note)
    opts.save(out_dir)
    return opts, hw_space


def _fit(tuner_obj: Any) -> bool:
    """`tuner_obj.fit()`; returns whether it was interrupted. Ray Tune catches the first SIGINT
    itself (it stops the trials, saves its state and returns normally) and then puts back the
    handler it found; so we install a handler of our own first: finding it back in place after
    fit means Ray saw a SIGINT. A second Ctrl-C reaches our handler: KeyboardInterrupt."""

    def second_interrupt(sig: int, frame: Any) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():  # pragma: no cover - checked by run_sweep
        tuner_obj.fit()
        return False
    previous = signal.signal(signal.SIGINT, second_interrupt)
    try:
        tuner_obj.fit()
        return signal.getsignal(signal.SIGINT) is second_interrupt
    finally:
        signal.signal(signal.SIGINT, previous)


def run_sweep(space: str | Path | None, workload: str | Workload | None, out_dir: str | Path,
              options: SweepOptions | None = None, *, resume: bool = False, address: str | None = None,
              progress: bool = True, callbacks: list[Any] | None = None) -> SweepResult:
    """Run (or with `resume=True` continue) a co-design sweep into `out_dir`; see module docstring.

    `space`: path of a hardware space YAML; `workload`: registry name or `Workload`; `options`:
    what defines the sweep (`SweepOptions`; its space/workload/layers are filled in from the first
    two arguments; None: the defaults). On resume `space` and `workload` are not used and the
    options come from `out_dir/sweep.json`, except `options.trials` and `options.max_concurrent`,
    which may differ (`resume_changes`): they are saved and the sweep goes on as a continuation
    experiment. `address`: a Ray cluster to join (HOST:PORT or auto; None: a private local Ray).
    `callbacks`: extra Ray Tune callbacks (tests use one to interrupt a sweep). One sweep at a
    time per directory (`SweepLock`); a stale lock is reported on stderr.
    """
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("run_sweep makes Ray calls and must run on the main thread")
    start = time.perf_counter()
    out = Path(out_dir).resolve()
    if resume:
        SweepOptions.load(out)  # before the lock: no directory is created for a wrong path
    else:
        options = options or SweepOptions()
        if space is None or workload is None:
            raise ConfigError("a new sweep needs a space file and a workload (or resume=True)")
        validate_new(space, workload, options)  # user mistakes are one line before anything is created
    lock = SweepLock(out).acquire()
    try:
        if lock.stale:
            print(f"codesign sweep: note: {lock.stale}", file=sys.stderr)
        if resume:
            opts = SweepOptions.load(out)
            changed = resume_changes(opts, trials=options.trials if options else None,
                                     max_concurrent=options.max_concurrent if options else None)
            if changed:
                opts = dataclasses.replace(opts, **changed)
                opts.save(out)
            hw_space = opts.load_space(out)
        else:
            changed = {}
            opts, hw_space = prepare(space, workload, out, options)  # type: ignore[arg-type]
        return _run_locked(out, opts, hw_space, resume=resume, continuation=bool(changed), address=address,
                           progress=progress, callbacks=callbacks, start=start)
    finally:
        lock.release()


def resume_changes(opts: SweepOptions, **given: Any) -> dict[str, Any]:
    """The options a resume may change (`trials`, `max_concurrent`) that differ from sweep.json."""
    out = {}
    for key, value in given.items():
        if value is not None and value != getattr(opts, key):
            out[key] = value
    return out


def _run_locked(out: Path, opts: SweepOptions, hw_space: HwSpace, *, resume: bool, continuation: bool,
                address: str | None, progress: bool, callbacks: list[Any] | None, start: float) -> SweepResult:
    if opts.verified_clocks_only:  # the search proposes only the board's verified clocks
        hw_space = hw_space.verified_clocks_only()
    _validate_tuner(opts.tuner, opts.hparams)

    _quiet_ray()
    import ray
    from ray import tune

    plan = build_search(opts.search, hw_space, trials=opts.trials, seed=opts.seed, out_dir=str(out),
                        objectives=opts.objectives)
    planned = plan.num_samples
    stock_names = tuple(hw.name for hw in hw_space.stock_configs())
    power_bound = space_power_bound(hw_space)
    own = _init_ray(address, None)
    try:
        concurrent = _concurrency(opts.max_concurrent)
        hub = _start_hub(out)
        ctx = trial_context(opts, hw_space, hub)
        trainable = tune.with_resources(tune.with_parameters(sweep_trial, ctx=ctx), {"cpu": 1})
        cbs = [SweepCallback(str(out), plan.num_samples, stock_names=stock_names, power_bound=power_bound,
                             progress=progress, hub=hub, objectives=opts.objectives), *(callbacks or [])]
        exp_path = out / RAY_DIR / EXPERIMENT
        interrupted = False
        if resume and continuation:
            pass  # straight to the continuation below
        elif resume and tune.Tuner.can_restore(str(exp_path)):
            tuner_obj = tune.Tuner.restore(str(exp_path), trainable, resume_errored=True)
            # Ray restores the callbacks it pickled at the start; ours must reflect this run
            # (progress flag, no stale test hooks).
            run_config = tuner_obj._local_tuner.get_run_config()
            run_config.callbacks = cbs
            interrupted = _fit(tuner_obj)
        else:
            if hasattr(plan.search_alg, "preload"):
                plan.search_alg.preload(read_trials(out))
            tuner_obj = tune.Tuner(
                trainable,
                param_space=plan.param_space,
                tune_config=tune.TuneConfig(
                    search_alg=plan.search_alg, num_samples=plan.num_samples,
                    max_concurrent_trials=concurrent, reuse_actors=True,
                    trial_dirname_creator=_trial_dirname,
                ),
                run_config=tune.RunConfig(name=EXPERIMENT, storage_path=str(out / RAY_DIR), callbacks=cbs,
                                          verbose=0, failure_config=tune.FailureConfig(max_failures=MAX_FAILURES)),
            )
            interrupted = _fit(tuner_obj)
        done = sum(1 for r in read_trials(out) if r.ok)
        if resume and not interrupted and done < planned:
            # A resume that asked for more trials (or a new --max-concurrent): go on with a fresh
            # experiment whose searcher knows every finished trial, for the trials still missing.
            more = _continuation(opts, hw_space, out, planned - done)
            if more is not None:
                cbs[0] = SweepCallback(str(out), planned, stock_names=stock_names, power_bound=power_bound,
                                       progress=progress, hub=hub, objectives=opts.objectives)
                tuner_obj = tune.Tuner(
                    trainable, param_space=more.param_space,
                    tune_config=tune.TuneConfig(search_alg=more.search_alg, num_samples=more.num_samples,
                                                max_concurrent_trials=concurrent, reuse_actors=True,
                                                trial_dirname_creator=_trial_dirname),
                    run_config=tune.RunConfig(name=f"{EXPERIMENT}-more-{done}", storage_path=str(out / RAY_DIR),
                                              callbacks=cbs, verbose=0,
                                              failure_config=tune.FailureConfig(max_failures=MAX_FAILURES)),
                )
                interrupted = _fit(tuner_obj)
    except BaseException:
        if own:
            ray.shutdown()
        raise
    # Ray's processes take ~1 s to stop; the final pareto.json and plots do not need them, so both
    # happen at once (the processes were started by this thread, so stopping them elsewhere is safe).
    stopping = threading.Thread(target=ray.shutdown, name="ray-shutdown") if own else None
    if stopping is not None:
        stopping.start()
    try:
        result = finish(out, opts, planned, time.perf_counter() - start, stock_names=stock_names,
                        power_bound=power_bound, space=hw_space)
    finally:
        if stopping is not None:
            stopping.join()
    result.interrupted = interrupted
    return result


def trial_context(opts: SweepOptions, hw_space: HwSpace, state: Any) -> TrialContext:
    """Everything a trial gets from the driver (through Ray's object store): the parsed space, the
    workload's layers, the inner tuning with the profile's timing parameters resolved here (a
    worker may not see the user's files), and `state` (the `SweepState` actor)."""
    params, _source = resolve_params(opts.profile)
    tuning = InnerTuning(tuner=opts.tuner, budget=opts.budget, seed=opts.seed, exhaustive_s=opts.exhaustive_s,
                         params=params, hparams=opts.hparams, schedules=opts.schedules)
    # Every search but grid sends only usable points, checked once in the driver (see TrialContext).
    network = network_from_json(opts.network, f"{OPTIONS_FILE} network") if opts.network else None
    return TrialContext(space=hw_space, workload=workload_from_options(opts), tuning=tuning,
                        checked=opts.search != "grid", state=state, objectives=opts.objectives,
                        network=network, scope_note=None if network is not None else opts.network_note)


def _start_hub(out: Path) -> Any:
    """The driver's `SweepState` as a Ray actor on the driver's node (it outlives any worker node),
    loaded from the driver's trials.jsonl and records.jsonl: what a starting trial asks for."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = ray.get_runtime_context().get_node_id()
    actor = ray.remote(SweepState).options(
        num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=here, soft=False))
    warm = best_records(RecordsLog(out / RECORDS_FILE).existing()).values()  # all a trial reads of them
    return actor.remote(read_trials(out), list(warm))


def _continuation(opts: SweepOptions, hw_space: HwSpace, out: Path, missing: int) -> Any:
    """A search plan for `missing` more trials that skips the configs already in trials.jsonl
    (None when no config is left): Optuna searchers preloaded with the finished trials, or the
    grid/exhaustive points not evaluated yet."""
    rows = read_trials(out)
    if opts.search in ("grid", "exhaustive"):
        plan = build_search(opts.search, hw_space, trials=None, seed=opts.seed, out_dir=str(out),
                            objectives=opts.objectives)
        seen = {tuple(sorted(r.params.items())) for r in rows if r.ok and r.params}
        points = [p for p in plan.search_alg._points_to_evaluate if tuple(sorted(p.items())) not in seen]
        if not points:
            return None
        from ray.tune.search.basic_variant import BasicVariantGenerator

        n = min(missing, len(points))
        plan.search_alg = BasicVariantGenerator(points_to_evaluate=points[:n], random_state=opts.seed)
        plan.num_samples = n
        return plan
    plan = build_search(opts.search, hw_space, trials=missing, seed=opts.seed + len(rows), out_dir=str(out),
                        objectives=opts.objectives)
    plan.search_alg.preload(rows)
    return plan


def _validate_tuner(name: str, hparams: dict[str, str] | None = None) -> None:
    if name not in TUNERS:
        raise ConfigError(f"--tuner {name!r}: allowed: {', '.join(TUNERS)}")
    if hparams:
        if name in ("auto", "exhaustive"):
            # auto picks exhaustive, the shipped bandit or xgb per layer: overrides would reach a
            # tuner the user did not name.
            raise ConfigError(f"--hparam needs the tuner named: --tuner {name} has none of its own; "
                              f"give one of {', '.join(t for t in TUNERS if t not in ('auto', 'exhaustive'))}")
        cls = tuner_class(name)
        resolve_hparams(name, cls.HPARAMS, hparams, cls.HPARAM_RANGES)  # one line for a bad key or value


def skipped_note(out: Path, space: HwSpace) -> str | None:
    """'the search proposed 5 configs outside the usable space, answered without a trial
    (DIR/skipped.jsonl): 3 need more LUT than pynq-z1 has; 2 ...' (None when it proposed none)."""
    path = out / SKIPPED_FILE
    if not path.exists():
        return None
    kinds: dict[str, int] = {}
    for line in path.read_text().splitlines():
        try:
            kind = exclusion_kind(str(json.loads(line)["reason"]))
        except (ValueError, KeyError, TypeError):
            continue  # a line cut by a crash
        kinds[kind] = kinds.get(kind, 0) + 1
    if not kinds:
        return None
    why = "; ".join(f"{n} {k}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
    total = sum(kinds.values())
    return (f"the search proposed {total} config{'s' if total != 1 else ''} outside the usable space of "
            f"{space.source}, answered without a trial ({path}): {why}")


def finish(out: Path, opts: SweepOptions, planned: int, wall_s: float, *, stock_names: tuple[str, ...],
           power_bound: float, space: HwSpace) -> SweepResult:
    """Final pareto.json and plots from the trials on disk."""
    rows = read_trials(out)
    unreadable = count_unreadable(out / TRIALS_FILE)  # nothing appends now: these lines are cut, not in flight
    if unreadable:
        print(f"codesign sweep: note: {out / TRIALS_FILE}: skipped {unreadable} unreadable line(s) (cut by an "
              f"interrupted write); the front uses the {len(rows)} readable trial(s)", file=sys.stderr)
    note = skipped_note(out, space)
    if note:
        print(f"codesign sweep: note: {note}", file=sys.stderr)
    doc = write_pareto(out, rows, stock_names=stock_names, power_bound=power_bound, objectives=opts.objectives)
    plots = write_plots(out, rows, doc)
    result = SweepResult(out, opts, rows, doc, plots, planned, wall_s)
    if not result.complete and opts.search in ("nsga2", "motpe", "random"):
        # The searcher ends the sweep early once no feasible config is left to evaluate.
        result.exhausted = len(design_points(rows)) >= len(space.enumerate())
    return result
