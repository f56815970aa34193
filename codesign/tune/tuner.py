"""The tuner interface (AutoTVM's `Tuner`): every hook the tuning loop may call is declared here
with its default, so the loop never probes a tuner for optional methods. Tuner files import only
this module and `codesign.tune.view`."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import numpy as np

from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.schedule.knobs import Config
from codesign.schedule.space import ScheduleSpace
from codesign.tune.measure import MeasureResult, Runner
from codesign.tune.records import MeasureRecord
from codesign.tune.view import SpaceView
from codesign.workloads.layers import Layer

DEFAULT_BUDGET = 50  # measurements per layer when neither the caller nor the tuner says


def parse_hparams(items: list[str]) -> dict[str, str]:
    """`--hparam key=value` flags as a dict (values are converted by the tuner, `resolve_hparams`)."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--hparam {item!r}: expected KEY=VALUE, e.g. --hparam lr=3e-4")
        if key.strip() in out:
            raise ConfigError(f"--hparam {key.strip()}: given twice ({out[key.strip()]!r} and {value.strip()!r}); "
                              "give each hyper-parameter once")
        out[key.strip()] = value.strip()
    return out


def resolve_hparams(tuner: str, defaults: dict[str, Any], overrides: dict[str, Any] | None,
                    ranges: dict[str, tuple[float, float | None]] | None = None) -> dict[str, Any]:
    """`defaults` updated with `overrides`, each converted to its default's type (so the strings of
    `--hparam key=value` work); ConfigError naming the allowed keys for an unknown one, or the
    allowed range for a value out of it: `ranges` (the `HPARAM_RANGES` beside a tuner's `HPARAMS`,
    inclusive, None = no upper bound), else a finite number >= 0 (no hyper-parameter is negative) —
    so a value the tuner cannot run with fails here, not inside a sweep trial."""
    out = dict(defaults)
    for key, value in (overrides or {}).items():
        if key not in defaults:
            allowed = ", ".join(sorted(defaults)) or "none"
            raise ConfigError(f"--hparam {key}: tuner {tuner} has no such hyper-parameter; allowed: {allowed}")
        kind = type(defaults[key])
        try:
            if kind is bool and isinstance(value, str):
                out[key] = value.strip().lower() in ("1", "true", "yes", "on")
            elif kind in (int, float, str, bool):
                out[key] = kind(value)
            else:
                out[key] = value
        except (TypeError, ValueError):
            raise ConfigError(f"--hparam {key}={value!r}: must be {'an' if kind.__name__[0] in 'aeiou' else 'a'} {kind.__name__} "
                              f"(default {defaults[key]!r})") from None
        _check_range(key, value, out[key], defaults[key], (ranges or {}).get(key))
    return out


def _check_range(key: str, given: Any, value: Any, default: Any, bounds: tuple[float, float | None] | None) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return
    lo, hi = bounds or (0, None)
    if not math.isfinite(value) or value < lo or (hi is not None and value > hi):
        allowed = (f"between {lo} and {hi}" if hi is not None
                   else f">= {lo}" if bounds else f"a finite number >= {lo}")
        raise ConfigError(f"--hparam {key}={given}: must be {allowed} (default {default!r})")


class Tuner:
    """Base tuner. Subclasses implement `propose`; `observe` keeps `self.results` (index ->
    MeasureResult, including unmeasured invalid ones) which most tuners consult."""

    name = "base"
    batch_size = 8  # configs the loop asks for per round
    agent: Any = None  # the learned model an RL tuner carries from task to task (None otherwise)
    #: The tuner's hyper-parameters and their defaults: the `HPARAMS` dict at the top of its file.
    #: `hparams` (`codesign tune --hparam key=value`) overrides them; `self.hp` is the result.
    HPARAMS: ClassVar[dict[str, Any]] = {}
    #: Inclusive (low, high or None) of the hyper-parameters that need more than ">= 0".
    HPARAM_RANGES: ClassVar[dict[str, tuple[float, float | None]]] = {}

    def __init__(self, space: ScheduleSpace, seed: int = 0, view: SpaceView | None = None,
                 hparams: dict[str, Any] | None = None) -> None:
        self.hp = resolve_hparams(self.name, self.HPARAMS, hparams, self.HPARAM_RANGES)
        self.space = space
        self.view = view or SpaceView(space)
        self.seed = int(seed)
        self.rng = np.random.default_rng(seed)
        self.results: dict[int, MeasureResult] = {}

    @property
    def measured(self) -> set[int]:
        return set(self.results)

    def propose(self, n: int) -> list[Config]:
        raise NotImplementedError

    def observe(self, results: Sequence[MeasureResult]) -> None:
        for r in results:
            self.results[int(r.config.index)] = r

    def set_task(self, layer: Layer, hw: HwConfig) -> None:
        """Called once before the first proposal with the task being tuned (learned tuners build
        their observation of it here). Default: nothing."""

    def plan_budget(self, budget: int | None, runner: Runner) -> int:
        """Called once after `set_task`, before warm start, with the loop's measurement budget
        (None: the tuner's own) and the runner: the budget the loop uses. Default: the given
        budget, else DEFAULT_BUDGET (`exhaustive` defaults to every valid config; `auto` picks
        its search from the runner's cost)."""
        return DEFAULT_BUDGET if budget is None else int(budget)

    def exact_pending(self) -> int:
        """Measurements of an exact phase the tuner makes before it searches (`auto`'s template
        points on a larger family): the task scheduler runs them first and outside its pool, so
        the guarantee they give is not traded away. Default: 0."""
        return 0

    def warm_start(self, results: Sequence[MeasureResult]) -> None:
        """Results from earlier runs of the same layer/hw (records). Default: plain observations."""
        self.observe(results)

    def transfer(self, records: Sequence[MeasureRecord]) -> None:
        """Records of other layers and hardware configs (cross-task learning). Default: ignored."""

    # helpers ------------------------------------------------------------------------------
    def unmeasured_valid(self) -> np.ndarray:
        """Every valid config not measured yet (enumerates the space: exhaustive and grid only)."""
        if not self.results:
            return self.view.valid
        mask = ~np.isin(self.view.valid, np.fromiter(self.results, dtype=np.int64))
        return self.view.valid[mask]

    def random_unmeasured(self, n: int, exclude: Iterable[int] = ()) -> list[int]:
        """Up to `n` random valid configs neither measured nor in `exclude` (`SpaceView.sample_valid`)."""
        ex = set(exclude)
        ex.update(self.results)
        return self.view.sample_valid(n, self.rng, exclude=ex)

    def best(self) -> MeasureResult | None:
        ok = [r for r in self.results.values() if r.ok]
        return min(ok, key=lambda r: r.seconds) if ok else None


__all__ = ["DEFAULT_BUDGET", "Tuner", "parse_hparams", "resolve_hparams"]
