"""The CPU cost model: time = per-call overhead + MACs / rate(kind, dtype) + bytes / bandwidth.

A roofline with its two roofs added (an in-order pipeline overlaps little of a kernel's memory
traffic with its arithmetic); the parameters are per CPU (`cortex-a9`, `cortex-a53`, named by
each board's `cpu:` in hw_configs/boards/) and fitted to real measurements (`sim/cpu_params.json`,
written by `codesign calibrate cpu`). docs/cpu-model.md states the fit, its error and what is
assumed where the data say nothing.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codesign.cpu.work import (
    DENSE,
    DTYPES,
    PASS,
    SPATIAL_PACK,
    TRANSPOSE,
    ConvShape,
    CpuWork,
    conv_work,
    dense_work,
    shape_of,
)
from codesign.errors import ConfigError
from codesign.fileio import atomic_write_json, read_document
from codesign.hw.board import Board
from codesign.paths import SIM_DATA
from codesign.workloads import Conv2D, Conv2DTranspose, Dense

SHIPPED_PARAMS = SIM_DATA / "cpu_params.json"


def rate_key(kind: str, dtype: str) -> str:
    return f"{kind}/{dtype}"


@dataclass(frozen=True)
class CpuParams:
    """The fitted parameters of one CPU. `gmacs` maps "kind/dtype" to sustained GMAC/s of the
    kernels measured (multi-threaded, as TVM runs them); kinds and dtypes not measured are
    derived by `rate` and say so."""

    cpu: str
    call_overhead_s: float
    bytes_per_s: float
    gmacs: Mapping[str, float] = field(default_factory=dict)
    measured_on: str = ""
    # kind -> (its rate / spatial_pack's, the CPU that ratio was measured on): for a kind this CPU
    # has no record of (the A53's depthwise), filled in by `CpuModel.params` from the other CPUs
    peer_ratios: Mapping[str, tuple[float, str]] = field(default_factory=dict, compare=False)
    # the parameters the fit left at a bound of its search range (`fit.at_bound` of the parameter
    # file): its records did not determine them, so a figure built on one is an assumption
    at_bound: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        for name in ("call_overhead_s", "bytes_per_s"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ConfigError(f"CPU {self.cpu}: {name}={v!r} must be a finite number >= 0")
        if self.bytes_per_s <= 0:
            raise ConfigError(f"CPU {self.cpu}: bytes_per_s must be > 0")
        for k, v in self.gmacs.items():
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ConfigError(f"CPU {self.cpu}: gmacs[{k!r}]={v!r} must be a positive number")

    def rate(self, kind: str, dtype: str) -> tuple[float, str] | None:
        """(GMAC/s, basis) of a kernel kind in a dtype, or None if nothing supports a figure.
        Basis: "measured"; or derived — the same kind's other dtype scaled by the dtype ratio
        measured on another kind of this CPU; the other dtype unscaled when no kind has both
        (stated as an assumption); a dense layer at the spatial-pack rate (a dense is a 1x1 conv
        on a 1x1 image, and that is how TVM's arm_cpu records time it)."""
        if rate_key(kind, dtype) in self.gmacs:
            return self.gmacs[rate_key(kind, dtype)], "measured"
        if kind == DENSE:
            base = self.rate(SPATIAL_PACK, dtype)
            return None if base is None else (base[0], f"spatial_pack rate ({base[1]})")
        for other in DTYPES:
            if other == dtype or rate_key(kind, other) not in self.gmacs:
                continue
            ratios = [self.gmacs[rate_key(k, dtype)] / self.gmacs[rate_key(k, other)]
                      for k in {key.split("/")[0] for key in self.gmacs}
                      if rate_key(k, dtype) in self.gmacs and rate_key(k, other) in self.gmacs]
            if ratios:
                ratio = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
                return (self.gmacs[rate_key(kind, other)] * ratio,
                        f"derived: {kind}/{other} x {dtype}/{other} ratio {ratio:.2f} of the kinds measured in both")
            return (self.gmacs[rate_key(kind, other)],
                    f"assumed: {kind}/{other} rate, no {dtype} measurement on {self.cpu}")
        if kind in self.peer_ratios and kind != SPATIAL_PACK and (base := self.rate(SPATIAL_PACK, dtype)) is not None:
            ratio, peer = self.peer_ratios[kind]
            return (base[0] * ratio, f"assumed: spatial_pack rate ({base[1]}) x {ratio:.2f}, the {kind}/spatial_pack "
                                     f"ratio measured on {peer}; no {kind} measurement on {self.cpu}")
        return None

    @property
    def bandwidth_basis(self) -> str:
        """Where `bytes_per_s` comes from: "measured" (fitted), or "assumed: ..." when the fit left
        it at its bound (the Cortex-A9's records are compute-bound convs: they do not determine it)."""
        if "bytes_per_s" not in self.at_bound:
            return "measured"
        return (f"assumed: {self.bytes_per_s / 1e9:.2f} GB/s, the bound of the fit's range "
                f"(its records on {self.measured_on or self.cpu} do not determine it)")

    def kind_ratios(self) -> dict[str, float]:
        """Each measured kind's rate over spatial_pack's in the same dtype (what another CPU may borrow)."""
        out = {}
        for key, v in self.gmacs.items():
            kind, dtype = key.split("/")
            if kind != SPATIAL_PACK and rate_key(SPATIAL_PACK, dtype) in self.gmacs:
                out[kind] = v / self.gmacs[rate_key(SPATIAL_PACK, dtype)]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"measured_on": self.measured_on, "call_overhead_s": self.call_overhead_s,
                "bytes_per_s": self.bytes_per_s, "gmacs": dict(self.gmacs)}

    @classmethod
    def from_dict(cls, cpu: str, d: Mapping[str, Any], where: str = "") -> CpuParams:
        allowed = {"measured_on", "call_overhead_s", "bytes_per_s", "gmacs", "fit"}
        if not isinstance(d, Mapping):
            raise ConfigError(f"{where}: cpus.{cpu} must be a mapping")
        extra = set(d) - allowed
        if extra:
            raise ConfigError(f"{where}: cpus.{cpu}: unknown key {sorted(extra)[0]!r}; allowed: {', '.join(sorted(allowed))}")
        for key in ("call_overhead_s", "bytes_per_s", "gmacs"):
            if key not in d:
                raise ConfigError(f"{where}: cpus.{cpu}: missing key {key!r}")
        if not isinstance(d["gmacs"], Mapping):
            raise ConfigError(f"{where}: cpus.{cpu}.gmacs must map 'kind/dtype' to GMAC/s")
        fit = d.get("fit", {})
        at_bound = tuple(str(k) for k in fit.get("at_bound", ())) if isinstance(fit, Mapping) else ()
        return cls(cpu=cpu, call_overhead_s=d["call_overhead_s"], bytes_per_s=d["bytes_per_s"],
                   gmacs=dict(d["gmacs"]), measured_on=str(d.get("measured_on", "")), at_bound=at_bound)


@dataclass(frozen=True)
class CpuCost:
    """The predicted time of one op, with its terms and where its rate comes from."""

    name: str
    kind: str
    dtype: str
    cpu: str
    seconds: float
    compute_s: float
    memory_s: float
    overhead_s: float
    basis: str
    memory_basis: str = "measured"  # where the memory term's bytes_per_s comes from (`bandwidth_basis`)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def predict(work: CpuWork, params: CpuParams) -> CpuCost:
    """Seconds of one op on one CPU; ConfigError if no rate can be given for its kind/dtype."""
    if work.kind == PASS:
        compute, basis = 0.0, "bytes-bound pass"
    else:
        r = params.rate(work.kind, work.dtype)
        if r is None:
            known = ", ".join(sorted(params.gmacs)) or "none"
            raise ConfigError(f"no {work.kind}/{work.dtype} rate for {params.cpu} (measured: {known}); "
                              "measure it and refit: codesign calibrate cpu LOG -o FILE")
        compute, basis = work.macs / (r[0] * 1e9), r[1]
    memory = work.bytes / params.bytes_per_s
    total = params.call_overhead_s + compute + memory
    return CpuCost(work.name, work.kind, work.dtype, params.cpu, total, compute, memory,
                   params.call_overhead_s, basis, params.bandwidth_basis)


@dataclass(frozen=True)
class CpuModel:
    """The parameters of every CPU of a parameter file (`sim/cpu_params.json` or a user's)."""

    cpus: Mapping[str, CpuParams]
    source: str = ""
    provenance: Mapping[str, Any] = field(default_factory=dict)
    _peered: dict[str, CpuParams] = field(default_factory=dict, compare=False, repr=False)

    def params(self, cpu: str) -> CpuParams:
        """`cpu`'s parameters; a kernel kind it has no record of borrows its ratio to spatial_pack
        from a CPU that measured both (stated as an assumption in every cost that uses it)."""
        if cpu not in self.cpus:
            raise ConfigError(f"{self.source or 'CPU model'}: no parameters for CPU {cpu!r}; "
                              f"known: {', '.join(sorted(self.cpus))}")
        return self._with_peers(cpu)

    def _with_peers(self, cpu: str) -> CpuParams:
        if cpu not in self._peered:  # a model is immutable: derive once per CPU
            p = self.cpus[cpu]
            mine = {key.split("/")[0] for key in p.gmacs}
            borrowed = {kind: (ratio, other) for other in sorted(self.cpus) if other != cpu
                        for kind, ratio in self.cpus[other].kind_ratios().items() if kind not in mine}
            self._peered[cpu] = dataclasses.replace(p, peer_ratios=borrowed) if borrowed else p
        return self._peered[cpu]

    @classmethod
    def load(cls, path: str | Path | None = None) -> CpuModel:
        path = Path(path) if path is not None else SHIPPED_PARAMS
        doc = read_document(path, "CPU parameter file")
        if not isinstance(doc, dict) or not isinstance(doc.get("cpus"), dict) or not doc["cpus"]:
            raise ConfigError(f"{path}: expected {{\"cpus\": {{NAME: {{call_overhead_s, bytes_per_s, gmacs}}}}}} "
                              "as written by `codesign calibrate cpu`")
        cpus = {name: CpuParams.from_dict(name, d, str(path)) for name, d in doc["cpus"].items()}
        return cls(cpus=cpus, source=str(path), provenance=doc.get("provenance", {}))

    def save(self, path: str | Path, provenance: Mapping[str, Any] | None = None,
             fits: Mapping[str, Any] | None = None) -> None:
        cpus = {}
        for name, p in self.cpus.items():
            cpus[name] = p.to_dict()
            if fits and name in fits:
                cpus[name]["fit"] = fits[name]
        atomic_write_json(path, {"cpus": cpus, "provenance": dict(provenance or self.provenance)})


@functools.lru_cache(maxsize=1)
def shipped_model() -> CpuModel:
    """sim/cpu_params.json, read once per process (a network costs many ops)."""
    return CpuModel.load(SHIPPED_PARAMS)


@functools.lru_cache(maxsize=32)
def _named_board(name: str) -> Board:
    return Board.named(name)


def _board(board: Board | str) -> Board:
    return board if isinstance(board, Board) else _named_board(board)


def cpu_of(board: Board | str) -> str:
    b = _board(board)
    if not b.cpu:
        raise ConfigError(f"board {b.name} names no CPU (add `cpu:` to its hw_configs/boards file)")
    return b.cpu


def best_conv_cost(shape: ConvShape, params: CpuParams, dtype: str = "float32") -> CpuCost:
    """The fastest kernel kind the conv offers that this CPU has a rate for (TVM keeps the
    fastest tuned implementation)."""
    costs = []
    for kind in shape.kinds():
        if params.rate(kind, dtype) is not None:
            costs.append(predict(conv_work(shape, dtype, kind), params))
    if not costs and shape.transpose and params.rate(SPATIAL_PACK, dtype) is not None:
        # No transposed-conv rate on this CPU (the shipped Cortex-A9 has none): TVM's arm_cpu
        # transpose template is a direct conv over the dilated input, so its work (that input
        # materialized, every tap counted) at the spatial-pack rate, said in the basis.
        cost = predict(dataclasses.replace(conv_work(shape, dtype, TRANSPOSE), kind=SPATIAL_PACK), params)
        return dataclasses.replace(cost, kind=TRANSPOSE,
                                   basis=f"spatial_pack rate ({cost.basis}): no {TRANSPOSE}/{dtype} rate on {params.cpu}")
    if not costs:
        return predict(conv_work(shape, dtype), params)  # raises with the reason
    return min(costs, key=lambda c: c.seconds)


def layer_cost(op: Conv2D | Conv2DTranspose | Dense | ConvShape | CpuWork, board: Board | str,
               dtype: str = "float32", model: CpuModel | None = None) -> CpuCost:
    """Seconds of a conv, transposed conv, dense or bytes-bound pass (`pass_work`) on the CPU of
    `board`: the entry point the whole-network costing calls."""
    params = (model or shipped_model()).params(cpu_of(board))
    if isinstance(op, CpuWork):
        return predict(op, params)
    if isinstance(op, Dense):
        return predict(dense_work(op, dtype), params)
    shape = op if isinstance(op, ConvShape) else shape_of(op)
    return best_conv_cost(shape, params, dtype)


__all__ = ["SHIPPED_PARAMS", "shipped_model", "rate_key", "CpuParams", "CpuCost", "predict", "CpuModel", "cpu_of",
           "best_conv_cost", "layer_cost"]
