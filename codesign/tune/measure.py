"""Measuring schedules: `MeasureInput` -> `Runner` -> `MeasureResult` (AutoTVM's measure split).

A `Runner` measures batches of configs. Subclasses implement `measure_one`; the base class adds
batching, optional parallel worker processes, a per-measurement timeout and error capture, so a
crash or hang of one measurement becomes an error result instead of killing the tuning run. The
simulator is the runner today; a PYNQ board runner plugs in behind the same interface.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from codesign import interrupts
from codesign.evaluate.run import Measurement, measure
from codesign.hw.config import HwConfig
from codesign.schedule.knobs import Config
from codesign.vta.timing import TimingParams
from codesign.workloads.layers import Layer

# Error strings recorded for failures; anything else is the exception text.
TIMEOUT = "timeout"
INVALID = "invalid"


@dataclass(frozen=True)
class MeasureInput:
    """One schedule to measure: layer, hardware config and the schedule `Config`."""

    layer: Layer
    hw: HwConfig | None
    config: Config


@dataclass(frozen=True)
class MeasureResult:
    """Outcome of one measurement. `seconds`/`cycles` are None when `error` is set; `busy`
    (cycles per module), `device_s` and `call_s` are what the runner measured besides (see
    `codesign.evaluate.run.Measurement`)."""

    config: Config
    seconds: float | None
    cycles: int | None
    error: str | None = None
    measured: bool = True  # False for invalid configs penalized without running them
    wall_s: float = 0.0  # seconds the measurement itself took
    busy: dict[str, int] = field(default_factory=dict, hash=False)
    device_s: float | None = None
    call_s: float | None = None
    source: str = "simulator"  # where it was measured: "simulator", or "board:<name>@<addr> bitstream:<sha256>"

    @property
    def ok(self) -> bool:
        return self.error is None and self.seconds is not None


def _run_one(runner: Runner, inp: MeasureInput) -> tuple[Measurement | None, str | None, float]:
    """Measure one input, turning any exception into an error string (runs in workers too)."""
    start = time.perf_counter()
    try:
        return runner.measure_one(inp), None, time.perf_counter() - start
    except Exception as exc:  # noqa: BLE001 - error capture is the point: one bad config must not stop tuning
        msg = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        return None, msg, time.perf_counter() - start


def _run_chunk(runner: Runner, inputs: Sequence[MeasureInput]) -> list[tuple[Measurement | None, str | None, float]]:
    """`_run_one` over a chunk in one worker call (measurements cheaper than a pool round trip)."""
    return [_run_one(runner, inp) for inp in inputs]


def _measurement(value: tuple[float, int | None]) -> Measurement:
    seconds, cycles = value
    return Measurement(float(seconds), None if cycles is None else int(cycles))


def _worker_init() -> None:
    # Workers share 2 cores with everything else; never let BLAS/OpenMP spawn thread pools.
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["NUMBA_NUM_THREADS"] = "1"


def _warmup(runner: Runner) -> int:
    """Started once per worker so that process start-up and imports are not charged to the
    first measurement's timeout."""
    time.sleep(0.05)
    runner.warmup()
    return os.getpid()


class Runner:
    """Base runner. `n_parallel > 1` measures in worker processes; `timeout_s` bounds each
    measurement (enforced by killing the worker when parallel; checked after the fact in-process,
    where a running measurement cannot be interrupted)."""

    #: Inputs sent to a worker at once when parallel (1: one at a time, each with its own timeout).
    chunk = 1
    #: In-process, time the first measurement again when it exceeded the timeout: it may carry the
    #: process's one-time JIT compilation (the simulator's numba kernels: 20-60 s on an empty cache
    #: on a loaded 2-core machine, past the 60 s timeout, which then dropped a valid schedule).
    retry_first_timeout = False

    def __init__(self, n_parallel: int = 1, timeout_s: float | None = None,
                 cost_s: float | None = None) -> None:
        self.n_parallel = max(1, int(n_parallel))
        self.timeout_s = timeout_s
        self.cost_s = cost_s
        self._pool: cf.ProcessPoolExecutor | None = None
        self._warm = False  # a measurement has run in this process (its JIT kernels are compiled)

    def seconds_per_measurement(self, inputs: Sequence[MeasureInput]) -> float:
        """Wall seconds one measurement costs with this runner (its parallelism counted): `cost_s`
        when given (a board's measured cost, a benchmark's parameter), else the median time of
        measuring `inputs` here after one warm-up run (JIT caches, tables; a probe: the results
        are not kept)."""
        if self.cost_s is not None:
            return float(self.cost_s) / self.n_parallel
        if not inputs:
            return 0.0
        _run_one(self, inputs[0])
        walls = sorted(_run_one(self, inp)[2] for inp in inputs)
        return walls[len(walls) // 2] / self.n_parallel

    def measure_one(self, inp: MeasureInput) -> Measurement:
        """Measure one config; raise on failure."""
        raise NotImplementedError

    def warmup(self) -> None:
        """Hook run once in each worker process before measurements (imports, JIT loading)."""

    # -- batching ---------------------------------------------------------------------------
    def run(self, inputs: Sequence[MeasureInput]) -> list[MeasureResult]:
        if not inputs:
            return []
        if self.n_parallel == 1:
            raw = []
            for inp in inputs:
                interrupts.check()  # a Ctrl-C a JIT compile's ctypes callback swallowed
                one = _run_one(self, inp)
                if not self._warm:  # `retry_first_timeout`
                    self._warm = True
                    if self.retry_first_timeout and one[1] is None and self.timeout_s is not None \
                            and one[2] > self.timeout_s:
                        one = _run_one(self, inp)  # timed again, compiled
                raw.append(one)
        else:
            raw = self._run_parallel(inputs)
            interrupts.check()
        out = []
        for inp, (m, error, wall) in zip(inputs, raw):
            if error is None and self.timeout_s is not None and wall > self.timeout_s:
                m, error = None, TIMEOUT
            if m is None:
                out.append(MeasureResult(inp.config, None, None, error, True, wall))
            else:
                out.append(MeasureResult(inp.config, float(m.seconds), m.cycles, None, True, wall, dict(m.busy),
                                         m.device_s, m.call_s))
        return out

    def _run_parallel(self, inputs: Sequence[MeasureInput]) -> list[tuple]:
        if self.chunk > 1 and len(inputs) > self.chunk:
            return self._run_chunked(inputs)
        pool = self._get_pool()
        futures = [pool.submit(_run_one, self, inp) for inp in inputs]
        raw: list[tuple] = []
        broken = False
        for fut in futures:
            if broken:
                fut.cancel()
            try:
                # A timeout per measurement: each future gets the full budget once it is its turn.
                raw.append(fut.result(timeout=self.timeout_s))
            except cf.TimeoutError:
                raw.append((None, TIMEOUT, float(self.timeout_s or 0.0)))
                broken = True  # the stuck worker must be killed; remaining ones are retried below
            except Exception as exc:  # noqa: BLE001 - worker died (segfault, OOM): record, go on
                raw.append((None, f"worker failed: {type(exc).__name__}: {exc}"[:300], 0.0))
                broken = True
            if broken:
                break
        if broken:
            self.close(kill=True)
            done = len(raw)
            rest = list(inputs[done:])
            raw.extend(self._run_parallel(rest) if rest else [])
        return raw

    def _run_chunked(self, inputs: Sequence[MeasureInput]) -> list[tuple]:
        """Chunks of `chunk` inputs per worker call; if a chunk times out or its worker dies,
        the rest is measured one input at a time (each with its own timeout)."""
        pool = self._get_pool()
        size = max(self.chunk, -(-len(inputs) // (4 * self.n_parallel)))
        parts = [inputs[i:i + size] for i in range(0, len(inputs), size)]
        futures = [pool.submit(_run_chunk, self, part) for part in parts]
        raw: list[tuple] = []
        for part, fut in zip(parts, futures):
            try:
                raw.extend(fut.result(timeout=None if self.timeout_s is None else self.timeout_s * len(part)))
            except Exception:  # noqa: BLE001 - timeout or dead worker: redo the rest one by one
                self.close(kill=True)
                chunk, self.chunk = self.chunk, 1
                try:
                    raw.extend(self._run_parallel(list(inputs[len(raw):])))
                finally:
                    self.chunk = chunk
                break
        return raw

    def _get_pool(self) -> cf.ProcessPoolExecutor:
        if self._pool is None:
            # forkserver: never fork a process that already holds torch/numba threads.
            ctx = mp.get_context("forkserver")
            self._pool = cf.ProcessPoolExecutor(self.n_parallel, mp_context=ctx, initializer=_worker_init)
            for fut in [self._pool.submit(_warmup, self) for _ in range(self.n_parallel)]:
                fut.result()
        return self._pool

    def close(self, kill: bool = False) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if kill:
            # Only the worker processes this runner started (by pid), never by name.
            for proc in list(getattr(pool, "_processes", {}).values()):
                if proc.is_alive():
                    proc.kill()
        pool.shutdown(wait=not kill, cancel_futures=True)

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_pool"] = None  # pools do not travel to workers
        return state


class SimulatorRunner(Runner):
    """Times schedules with the VTA timing model (`codesign.evaluate.run.measure`). A measurement
    takes ~0.1-1 ms, so parallel workers get them in chunks."""

    chunk = 64
    retry_first_timeout = True

    def __init__(self, hw: HwConfig | None = None, n_parallel: int = 1, timeout_s: float | None = 60.0,
                 params: TimingParams | None = None, cost_s: float | None = None) -> None:
        super().__init__(n_parallel, timeout_s, cost_s)
        self.hw = hw
        self.params = params

    # No warmup hook needed: unpickling this runner in a worker imports `codesign.evaluate.run` (module
    # level), which loads the numba timing kernel from its cache before the first measurement.

    def measure_one(self, inp: MeasureInput) -> Measurement:
        return measure(inp.layer, inp.config, inp.hw if inp.hw is not None else self.hw, self.params)


class FunctionRunner(Runner):
    """Runner around a picklable function `fn(layer, config, hw) -> (seconds, cycles)`."""

    def __init__(self, fn: Callable[[Layer, Config, HwConfig], tuple[float, int | None]], n_parallel: int = 1,
                 timeout_s: float | None = None) -> None:
        super().__init__(n_parallel, timeout_s)
        self.fn = fn

    def measure_one(self, inp: MeasureInput) -> Measurement:
        return _measurement(self.fn(inp.layer, inp.config, inp.hw))


class TableRunner(Runner):
    """Looks measurements up in a precomputed {config index: (seconds, cycles)} table (from
    `exhaustive_table`): benchmarks replay many tuner seeds without re-simulating. A lookup costs
    nothing (`cost_s=0`); benchmarks pass the cost of the runner they stand for."""

    def __init__(self, table: dict[int, tuple[float, int | None]], cost_s: float | None = 0.0) -> None:
        super().__init__(1, None, cost_s)
        self.table = table

    def measure_one(self, inp: MeasureInput) -> Measurement:
        try:
            return _measurement(self.table[int(inp.config.index)])
        except KeyError:
            raise RuntimeError(f"config {inp.config.index} is not in the table (it failed to measure)") from None
