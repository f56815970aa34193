"""The schedule `codesign run` gives each VTA layer of a placed network (`choose` of
`codesign.place.plan_network`).

Per layer, first hit wins:
1. records: of the `FUSED_CANDIDATES` fastest successful records of `--records` for (layer, hw), of
   any schedule family (`MeasureRecord.family`; `--schedules autotvm|vta` keeps one family), whose
   knobs make a valid config of that family's space that fits the epilogue below, the one whose
   fused op is fastest on the timing model (records time the plain layer; the epilogue's ALU passes
   and the residual tile reorder a tuning's best schedules);
2. tophub: the record VTA itself applies (AutoTVM's tophub log for the published PYNQ configs,
   `sim/calibration/pynq_resnet18.log`);
3. template: the fastest AutoTVM template schedule by the timing model (what
   `codesign.place.best_template_schedule` picks, among the schedules that fit the epilogue below).

`choose` sees a layer, not the epilogue its op fuses (one layer serves several ops: ResNet's 3x3
convs with and without a residual add), so a schedule must fit the most demanding epilogue VTA
can run on that layer -- bias, residual add and ReLU when `fused_reason` allows them: the residual
tile takes INP SRAM a tophub schedule may have given to its input tile. A record or tophub
schedule that does not fit falls through to the next source (its reason is kept in `skipped`).
The seconds returned are the timing model's plain layer call; the planner times the fused op.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from codesign.errors import CodesignError
from codesign.evaluate.fused import (
    FUSED_CANDIDATES,
    Epilogue,
    demand,
    fused_invalid,
    measure_fused,
)
from codesign.evaluate.run import measure_seconds
from codesign.hw.config import HwConfig
from codesign.netrun.layers import TOPHUB_LOG, record_family
from codesign.place.refine import Chosen
from codesign.schedule.space import SPACES, get_space
from codesign.tune.records import MeasureRecord, import_autotvm_log, resolve_config
from codesign.vta import timing
from codesign.workloads.layers import Layer

FAMILIES = tuple(SPACES)  # schedule families: "autotvm" (the templates), "vta"


def _ranked(records: Sequence[MeasureRecord]) -> dict[tuple[str, str], list[MeasureRecord]]:
    """Successful records per (layer, hw), fastest first."""
    out: dict[tuple[str, str], list[MeasureRecord]] = {}
    for r in sorted((r for r in records if r.ok), key=lambda r: r.seconds):  # type: ignore[arg-type, return-value]
        out.setdefault((r.layer, r.hw), []).append(r)
    return out


class ScheduleChooser:
    """`choose(layer) -> (config, seconds)` with the sources above; remembers what it chose."""

    def __init__(self, hw: HwConfig, records: Sequence[MeasureRecord] = (), family: str | None = None,
                 params: timing.TimingParams | None = None) -> None:
        self.hw, self.params = hw, params or timing.default_params()
        mine = [r for r in records if family is None or record_family(r) == family]
        self.records = _ranked(mine)
        self.tophub = _ranked(import_autotvm_log(TOPHUB_LOG))
        self.chosen: dict[tuple[Layer, Epilogue], Chosen] = {}
        self.skipped: dict[str, str] = {}  # layer -> why its record / tophub schedule was not used
        self.stale: set[int] = set()  # ids of records whose knobs no longer resolve (`resolve_config`)
        self.n_records = len(mine)

    def __call__(self, layer: Layer) -> tuple[Any, float]:
        got = self.choose(layer)
        return got.config, got.seconds

    def choose(self, layer: Layer) -> Chosen:
        """The schedule of `layer` for any op it serves: it fits the layer's most demanding epilogue."""
        return self.for_epilogue(layer, self.demand(layer))

    def for_epilogue(self, layer: Layer, epi: Epilogue) -> Chosen:
        """The schedule of `layer` for an op with epilogue `epi` (what a placed step re-chooses)."""
        key = (layer, _footprint(epi))
        if key not in self.chosen:
            self.chosen[key] = self._choose(layer, key[1])
        return self.chosen[key]

    def demand(self, layer: Layer) -> Epilogue:
        """The most demanding epilogue VTA can run on `layer` with some template schedule."""
        return demand(layer, self.hw)

    def _choose(self, layer: Layer, epi: Epilogue) -> Chosen:
        key = (layer.name, self.hw.name)
        got = self._fastest_fused(layer, epi, self.records.get(key, ()))
        if got is not None:
            return got
        for rec in self.tophub.get(key, ()):  # fastest first: the first that fits the fused epilogue
            family = record_family(rec)
            config = resolve_config(get_space(layer, self.hw, family), rec.knobs)
            if config is None:
                self.skipped.setdefault(layer.name, f"tophub record ({family}, stored index {rec.index}): its "
                                        "knobs are no longer a valid schedule of the space")
                continue
            why = fused_invalid(layer, config, self.hw, epi)
            if why is None:
                seconds = measure_seconds(layer, config, self.hw, self.params)[0]
                return Chosen(config, float(seconds), "tophub", family, rec.seconds)
            self.skipped.setdefault(layer.name, f"tophub schedule #{config.index} ({family}): {why}")
        return self._template(layer, epi)

    def _fastest_fused(self, layer: Layer, epi: Epilogue, recs: Sequence[MeasureRecord]) -> Chosen | None:
        """Of the `FUSED_CANDIDATES` fastest records (plain layer seconds) whose schedule fits the fused
        epilogue, the one whose fused op is fastest on the timing model: the epilogue's ALU passes and
        the residual tile change the ranking of a tuning's best schedules (the records time the
        plain layer). None when no record fits."""
        best: tuple[float, int, Any, MeasureRecord, str] | None = None
        fits = 0
        for k, rec in enumerate(recs):
            family = record_family(rec)
            space = get_space(layer, self.hw, family)
            config = resolve_config(space, rec.knobs)  # by knob values: a vta index changes as the family grows
            if config is None:
                self.stale.add(id(rec))
                self.skipped.setdefault(layer.name, f"records record ({family}, stored index {rec.index}): its "
                                        "knobs are no longer a valid schedule of the space")
                continue
            why = fused_invalid(layer, config, self.hw, epi)
            if why is not None:
                self.skipped.setdefault(layer.name, f"records schedule #{config.index} ({family}): {why}")
                continue
            fused = measure_fused(layer, config, self.hw, epi, self.params).seconds
            if best is None or fused < best[0]:
                best = (float(fused), k, config, rec, family)
            fits += 1
            if fits >= FUSED_CANDIDATES:
                break
        if best is None:
            return None
        _fused, _k, config, rec, family = best
        seconds = measure_seconds(layer, config, self.hw, self.params)[0]
        return Chosen(config, float(seconds), "records", family, rec.seconds)

    def _template(self, layer: Layer, epi: Epilogue) -> Chosen:
        space = get_space(layer, self.hw)
        best: tuple[float, Any] | None = None
        for i in space.valid_indices():
            config = space.get(int(i))
            if fused_invalid(layer, config, self.hw, epi) is not None:
                continue
            s = measure_fused(layer, config, self.hw, epi, self.params).seconds
            if best is None or s < best[0]:
                best = (s, config)
        if best is None:
            raise CodesignError(f"layer {layer.name}: no template schedule on {self.hw.name} fits a fused {epi}")
        config = best[1]
        return Chosen(config, float(measure_seconds(layer, config, self.hw, self.params)[0]), "template", "autotvm", None)


def _footprint(epi: Epilogue) -> Epilogue:
    """`epi` with every non-zero shift as 1: the same program shape, SRAM use and time (a shift
    amount is an immediate), so one choice serves every op of that shape."""
    res = None if epi.residual is None else tuple(min(1, int(v)) for v in epi.residual)
    return Epilogue(shift=min(1, int(epi.shift)), bias=epi.bias, relu=epi.relu, residual=res)  # type: ignore[arg-type]


__all__ = ["Chosen", "ScheduleChooser", "FAMILIES", "record_family"]
