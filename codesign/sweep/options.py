"""The options of one sweep, saved as `<out>/sweep.json` so `--resume DIR` needs no other flags."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from codesign.errors import ConfigError
from codesign.fileio import atomic_write_json
from codesign.hw.resource_model import ResourceModel, load_resource_model
from codesign.hw.space import HwSpace
from codesign.pareto.objectives import OBJECTIVES, parse_objectives
from codesign.schedule.knobs import FAMILIES
from codesign.tune.auto import DEFAULT_EXHAUSTIVE_S
from codesign.tune.search import DEFAULT_SCHEDULES as DEFAULT_SCHEDULES  # re-exported (`codesign space`)
from codesign.tune.search import DEFAULT_TUNER, SWEEP_BUDGET, TEMPLATE_SCHEDULES, default_schedules

SEARCHES = ("nsga2", "motpe", "random", "grid", "exhaustive")
OPTIONS_FILE = "sweep.json"
SPACE_COPY = "space.yaml"  # the space file as it was when the sweep started (resume reads this copy)
# Defaults of `codesign sweep` (and of `SweepOptions`, `run_sweep`, `evaluate_hw`): a ResNet-18
# sweep of a few minutes on 2 cores (README main job).
DEFAULT_WORKLOAD = "resnet18"
DEFAULT_TRIALS = 48
# The inner search's defaults are the default search's (codesign.tune.search): one place.
DEFAULT_BUDGET = SWEEP_BUDGET
# motpe: on a 256-config PYNQ-Z1 space it reached 0.99 of the exhaustive hypervolume in 50 trials,
# NSGA-II 0.90 (benchmarks/sweep.py).
DEFAULT_SEARCH = "motpe"
DEFAULT_SEED = 0


@dataclass(frozen=True)
class SweepOptions:
    """Everything that defines a sweep. `trials=None` means "every point" for grid/exhaustive.
    `space`, `workload` and `layers` are filled in by `run_sweep` from its space and workload."""

    space: str = SPACE_COPY  # path of the hardware space YAML (the copy inside the experiment directory)
    workload: str = DEFAULT_WORKLOAD  # registry name, or the name of a workload with `layers` set
    trials: int | None = DEFAULT_TRIALS
    budget: int = DEFAULT_BUDGET
    tuner: str = DEFAULT_TUNER
    # `auto` searches a layer exhaustively when its valid configs x the measured cost fit this.
    exhaustive_s: float = DEFAULT_EXHAUSTIVE_S
    search: str = DEFAULT_SEARCH
    seed: int = DEFAULT_SEED
    max_concurrent: int | None = None
    # Search only the clocks at which a VTA build is known to run on the board (HwSpace.verified_clocks_only).
    verified_clocks_only: bool = False
    # Custom workloads (tests, benchmarks): [(layer_spec, count), ...] in `parse_layer` syntax.
    layers: tuple[tuple[str, int], ...] | None = None
    # Calibration profile the simulated measurements use (codesign.calibrate.profiles); None = shipped.
    profile: str | None = None
    # `--hparam key=value` of the inner tuner (strings; `resolve_hparams` converts and checks them).
    hparams: dict[str, str] | None = None
    # The resource model that scores feasibility and area (`ResourceModel.to_json`: the calibrated
    # file's coefficients, verified clocks, path and sha256), so a resume uses the same numbers
    # even if the file changed or is gone; None = the shipped coefficients.
    resources: dict[str, Any] | None = None
    # What the front optimizes (`--objectives`): point keys, codesign.pareto.objectives.CATALOG.
    objectives: tuple[str, ...] = OBJECTIVES
    # The workload's graph, shapes only (`codesign.sweep.network.network_to_json`), taken once when
    # the sweep starts: every trial costs the whole network. None: its offloaded layers only, and
    # `network_note` says why (a graph op the network IR has no kind for; a layers-only workload).
    network: dict[str, Any] | None = None
    network_note: str | None = None
    # Schedule family of the inner tuning (`--schedules`; None: `default_schedules(tuner)`;
    # sweep.json without it: TEMPLATE_SCHEDULES).
    schedules: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "objectives", parse_objectives(self.objectives, "objectives"))
        if self.schedules is None:
            object.__setattr__(self, "schedules", default_schedules(self.tuner))
        if self.search not in SEARCHES:
            raise ConfigError(f"--search {self.search!r}: allowed: {', '.join(SEARCHES)}")
        if self.trials is not None and (not isinstance(self.trials, int) or self.trials < 1):
            raise ConfigError(f"--trials {self.trials!r}: must be a positive integer")
        if not isinstance(self.budget, int) or self.budget < 1:
            raise ConfigError(f"--budget {self.budget!r}: must be a positive integer")
        if not isinstance(self.exhaustive_s, (int, float)) or not self.exhaustive_s >= 0:
            raise ConfigError(f"--exhaustive-budget {self.exhaustive_s!r}: must be a number of seconds >= 0")
        if self.schedules not in FAMILIES:
            raise ConfigError(f"--schedules {self.schedules!r}: allowed: {', '.join(FAMILIES)}")
        if self.max_concurrent is not None and self.max_concurrent < 1:
            raise ConfigError(f"max_concurrent={self.max_concurrent!r}: must be a positive integer")

    def resource_model(self) -> ResourceModel:
        return ResourceModel.from_json(self.resources, f"{OPTIONS_FILE} resources")

    def load_space(self, out_dir: Path) -> HwSpace:
        """The sweep's copy of its space, scored with its resource model (`load_space`)."""
        return load_space(Path(out_dir) / self.space, self.resources)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["layers"] = [list(e) for e in self.layers] if self.layers else None
        out["objectives"] = list(self.objectives)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any], source: str = "") -> SweepOptions:
        allowed = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise ConfigError(f"{source}: unknown key {unknown[0]!r}; allowed: {', '.join(sorted(allowed))}")
        kw = dict(data)
        kw.setdefault("schedules", TEMPLATE_SCHEDULES)  # saved before the field: the templates' family
        if kw.get("layers"):
            kw["layers"] = tuple((str(s), int(c)) for s, c in kw["layers"])
        return cls(**kw)

    def save(self, out_dir: Path) -> Path:
        return atomic_write_json(Path(out_dir) / OPTIONS_FILE, self.to_json())

    @classmethod
    def load(cls, out_dir: Path) -> SweepOptions:
        path = Path(out_dir) / OPTIONS_FILE
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise ConfigError(
                f"{out_dir}: not a sweep directory (no {OPTIONS_FILE}); start one with `codesign sweep --out {out_dir}`"
            ) from None
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: not valid JSON ({exc})") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a JSON object of sweep options")
        return cls.from_json(data, source=str(path))


def load_space(path: str | Path, resources: dict[str, Any] | None) -> HwSpace:
    """A sweep's space scored with the sweep's resource model (sweep.json `resources`): the one
    place the driver's filtering, the reference point, every trial and pareto.json's board clock
    get their coefficients and verified clock from."""
    return HwSpace.load(Path(path)).with_resource_model(ResourceModel.from_json(resources))


def resources_json(resources: str | Path | ResourceModel | None) -> dict[str, Any] | None:
    """`SweepOptions.resources` of a `codesign calibrate resources -o` file (or a loaded model):
    its numbers, kept in sweep.json; None for the shipped model."""
    if resources is None:
        return None
    model = resources if isinstance(resources, ResourceModel) else load_resource_model(resources)
    return None if model.shipped else model.to_json()
