"""Tuning records: one JSON line per measurement (format: `RECORD_KEYS`, checked by tests/test_records.py).

`{"layer", "layer_spec", "hw", "knobs", "index", "seconds", "cycles", "error", "tuner", "seed",
"timestamp"}`, plus the optional `"source", "device_s", "call_s"` (where it was measured; a board's
device and call seconds) and `"family"` (the schedule family of `knobs`/`index`: "autotvm", the
default, or "vta") that readers default when absent, so older files read unchanged. Lines are appended and flushed one at a time, so the file can be read while tuning
runs and survives a crash: at worst the last line is truncated, and `load_records` skips it.
AutoTVM logs (docs/vta.md §8) convert to records with `import_autotvm_log`; the log format itself
lives only in `codesign.autotvm`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from codesign import autotvm
from codesign.errors import ConfigError
from codesign.fileio import check_output_path, read_text
from codesign.hw.config import HwConfig
from codesign.schedule import ScheduleSpace, get_space
from codesign.schedule.knobs import FAMILIES, Config, plain_knobs
from codesign.workloads.layers import Layer, parse_layer

DEFAULT_FAMILY = FAMILIES[0]  # the schedule family of records that name none (AutoTVM's templates)
RECORD_KEYS = ("layer", "layer_spec", "hw", "knobs", "index", "seconds", "cycles", "error", "tuner",
               "seed", "timestamp")


def layer_spec(layer: Layer) -> str:
    """The `--layer` string that rebuilds `layer` with `codesign.workloads.parse_layer`."""
    spec = getattr(layer, "spec", None)
    if isinstance(spec, str):
        return spec
    if hasattr(layer, "kernel_h"):
        return (f"conv2d:{layer.batch},{layer.in_channels},{layer.height},{layer.width},"
                f"{layer.out_channels},{layer.kernel_h},{layer.kernel_w},{layer.stride},{layer.padding}")
    if hasattr(layer, "in_features"):
        return f"dense:{layer.batch},{layer.in_features},{layer.out_features}"
    raise ConfigError(f"layer {layer!r}: only Conv2D and Dense layers have a layer spec")


@dataclass(frozen=True)
class MeasureRecord:
    """One line of a records file."""

    layer: str
    layer_spec: str
    hw: str
    knobs: dict = field(hash=False)
    index: int
    seconds: float | None
    cycles: int | None
    error: str | None
    tuner: str
    seed: int
    timestamp: float
    # Optional (older files lack them): where the measurement came from ("simulator", or
    # "board:..."/"emulated-board:..." with the bitstream sha256) and a board's device time (start
    # to done) and driver call time.
    source: str = "simulator"
    device_s: float | None = None
    call_s: float | None = None
    # The schedule family whose space `knobs` and `index` belong to (older files: "autotvm").
    family: str = DEFAULT_FAMILY

    @property
    def ok(self) -> bool:
        return self.error is None and self.seconds is not None

    def to_json(self) -> str:
        # The fields in order, as `asdict` gives them but without its deep copy of every value
        # (json.dumps only reads them): that copy was most of the cost of a records line.
        d = {name: getattr(self, name) for name in _RECORD_FIELDS}
        # Simulated lines stay exactly the contract's keys; board measurements add their extras.
        if d["source"] == "simulator" and d["device_s"] is None and d["call_s"] is None:
            for key in ("source", "device_s", "call_s"):
                del d[key]
        if d["family"] == DEFAULT_FAMILY:  # template records keep the original line format
            del d["family"]
        return json.dumps(d, separators=(", ", ": "))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MeasureRecord:
        missing = [k for k in RECORD_KEYS if k not in data]
        if missing:
            raise ValueError(f"missing key {missing[0]!r}")
        seconds = data["seconds"]
        cycles = data["cycles"]
        return cls(
            layer=str(data["layer"]), layer_spec=str(data["layer_spec"]), hw=str(data["hw"]),
            knobs=dict(data["knobs"]), index=int(data["index"]),
            seconds=None if seconds is None else float(seconds),
            cycles=None if cycles is None else int(cycles),
            error=None if data["error"] is None else str(data["error"]),
            tuner=str(data["tuner"]), seed=int(data["seed"]), timestamp=float(data["timestamp"]),
            source=str(data.get("source", "simulator")),
            device_s=None if data.get("device_s") is None else float(data["device_s"]),
            call_s=None if data.get("call_s") is None else float(data["call_s"]),
            family=str(data.get("family", DEFAULT_FAMILY)),
        )

    @classmethod
    def make(cls, layer: Layer, hw: HwConfig, config: Config, seconds: float | None, cycles: int | None,
             error: str | None, tuner: str, seed: int, timestamp: float | None = None, *,
             source: str = "simulator", device_s: float | None = None, call_s: float | None = None) -> MeasureRecord:
        return cls(layer=layer.name, layer_spec=layer_spec(layer), hw=hw.name, knobs=plain_knobs(config.knobs),
                   index=int(config.index), seconds=seconds, cycles=cycles, error=error, tuner=tuner,
                   seed=int(seed), timestamp=time.time() if timestamp is None else float(timestamp),
                   source=source, device_s=device_s, call_s=call_s,
                   family=str(getattr(config, "family", DEFAULT_FAMILY)))


class RecordWriter:
    """Appends records to a JSONL file, one flushed line each (`with RecordWriter(path) as w`)."""

    def __init__(self, path: str | Path, fsync: bool = False) -> None:
        self.path = check_output_path(path, "records")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fsync = fsync
        # A crash may have left a truncated last line: start ours on a fresh line.
        needs_newline = False
        if self.path.exists() and self.path.stat().st_size > 0:
            with open(self.path, "rb") as f:
                f.seek(-1, os.SEEK_END)
                needs_newline = f.read(1) != b"\n"
        self._f = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        if needs_newline:
            self._f.write("\n")
            self._f.flush()

    def write(self, record: MeasureRecord) -> None:
        self._f.write(record.to_json() + "\n")
        self._f.flush()
        if self.fsync:
            os.fsync(self._f.fileno())

    def write_all(self, records: Iterable[MeasureRecord]) -> None:
        for r in records:
            self.write(r)

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class SkippedLine:
    """A line of a user file that was not used, and why (1-based line number)."""

    line: int
    reason: str


_RECORD_FIELDS = tuple(f.name for f in fields(MeasureRecord))


def read_records(path: str | Path) -> tuple[list[MeasureRecord], list[SkippedLine]]:
    """Records of a records file plus the non-blank, non-`#` lines that are not records (a
    crash-truncated last line, another format), so callers can say how much they skipped."""
    path = Path(path)
    text = read_text(path, "records file", errors="replace")
    out: list[MeasureRecord] = []
    skipped: list[SkippedLine] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            data = json.loads(line)
            if not isinstance(data, dict):
                raise ValueError(f"a JSON {type(data).__name__}, not an object")
            out.append(MeasureRecord.from_dict(data))
        except json.JSONDecodeError as exc:
            skipped.append(SkippedLine(lineno, f"not JSON ({exc.msg})"))
        except (ValueError, TypeError, AttributeError) as exc:
            skipped.append(SkippedLine(lineno, f"not a tuning record ({exc})"))
    return out, skipped


def load_records(path: str | Path, *, strict: bool = False) -> list[MeasureRecord]:
    """Read a records file. Malformed lines (a crash-truncated line) are skipped (`read_records`
    returns them); `strict=True` raises `ConfigError` naming the first one instead. Lines starting
    with `#` are comments."""
    records, skipped = read_records(path)
    if strict and skipped:
        raise ConfigError(f"{path}:{skipped[0].line}: not a tuning record ({skipped[0].reason}); expected keys "
                          + ", ".join(RECORD_KEYS))
    return records


def describe_skipped(path: str | Path, skipped: list[SkippedLine], total: int | None = None) -> str:
    """'FILE: skipped 3 lines (line 7: not JSON (...); ...)' — one line for the user."""
    first = "; ".join(f"line {s.line}: {s.reason}" for s in skipped[:2])
    more = f"; {len(skipped) - 2} more" if len(skipped) > 2 else ""
    of = f" of {total}" if total is not None else ""
    noun = "line" if (len(skipped) if total is None else total) == 1 else "lines"
    return f"{path}: skipped {len(skipped)}{of} {noun} ({first}{more})"


def family_space(layer: Layer, hw: HwConfig, family: str = DEFAULT_FAMILY) -> Any:
    """The (cached) schedule space of `layer` on `hw` in schedule family `family` ("autotvm": the
    template's `ScheduleSpace`; "vta": the vta family's space)."""
    # get_space is lru-cached on its arguments as given: the default family without the argument,
    # so callers that name no family share the space (built once per process)
    return get_space(layer, hw) if family == DEFAULT_FAMILY else get_space(layer, hw, family)


def best_records(records: Iterable[MeasureRecord], family: str | None = None) -> dict[tuple[str, str], MeasureRecord]:
    """The fastest successful record per (layer, hw), of any schedule family (`family=None`) or
    of one family."""
    best: dict[tuple[str, str], MeasureRecord] = {}
    for r in records:
        if not r.ok or (family is not None and r.family != family):
            continue
        key = (r.layer, r.hw)
        if key not in best or r.seconds < best[key].seconds:  # type: ignore[operator]
            best[key] = r
    return best


def best_any_family(records: Iterable[MeasureRecord], skipped: list[MeasureRecord] | None = None,
                    ) -> dict[tuple[str, str], tuple[MeasureRecord, Config]]:
    """What deploys (`codesign run`): per (layer, hw), the fastest successful record of any
    schedule family and its `Config` rebuilt in that family's space from its knobs
    (`resolve_config`: a vta record's index changes as the family grows). Records whose layer,
    hardware or knobs cannot be rebuilt, or are no longer valid, are passed over for the next
    fastest and appended to `skipped` (for the caller's one-line count)."""
    ranked = sorted((r for r in records if r.ok), key=lambda r: r.seconds)  # type: ignore[arg-type, return-value]
    out: dict[tuple[str, str], tuple[MeasureRecord, Config]] = {}
    for r in ranked:
        key = (r.layer, r.hw)
        if key in out:
            continue
        try:
            config = record_config(r)
        except Exception:  # noqa: BLE001 - not rebuildable here: the next fastest record
            if skipped is not None:
                skipped.append(r)
            continue
        out[key] = (r, config)
    return out


def resolve_config(space: Any, knobs: dict[str, Any]) -> Config | None:
    """The valid `Config` of stored `knobs` in `space` as it is now, or None. Records are
    resolved by knob values, never by their stored index: the vta family's index changes
    whenever a knob or a value is added. Knobs the space gained since the record was written are
    set to their first candidate — the shared rule for new vta knobs is that position 0 is the
    program the space had before the knob existed — so an old record keeps its program. A knob
    the space no longer has, a value that is no longer a candidate, or a config that breaks a
    rule now gives None (the caller skips and counts it)."""
    knobs = dict(knobs)
    if str(getattr(space, "family", DEFAULT_FAMILY)) != DEFAULT_FAMILY:
        for k in space.knobs:
            if k.name not in knobs:
                c = k.candidates[0]
                knobs[k.name] = list(c) if isinstance(c, (list, tuple)) else c
    try:
        config = space.from_knobs(knobs)
        return config if space.why_invalid(config) is None else None
    except Exception:  # noqa: BLE001 - unknown knob, value not a candidate: not in this space
        return None


def skipped_line(what: str, n_skipped: int, total: int) -> str:
    """'WHAT: skipped N of M records whose knobs are not a valid schedule of the current space
    (resolved by knob values; ...)' — the one line callers print."""
    return (f"{what}: skipped {n_skipped} of {total} records whose knobs are no longer a valid schedule of "
            "their family's space (records are matched by knob values; a knob or value the space dropped, "
            "or a rule the schedule now breaks)")


def record_config(record: MeasureRecord) -> Config:
    """The record's valid `Config` in its family's space as it is now (`resolve_config`);
    ConfigError naming the record when its knobs are no longer a valid schedule there."""
    layer, hw = parse_layer(record.layer_spec), HwConfig.resolve(record.hw)
    config = resolve_config(family_space(layer, hw, record.family), record.knobs)
    if config is None:
        raise ConfigError(f"record of {record.layer} on {record.hw} ({record.family}, stored index "
                          f"{record.index}): its knobs are no longer a valid schedule of the space")
    return config


def import_autotvm_log(path: str | Path) -> list[MeasureRecord]:
    """Convert the usable lines of an AutoTVM v0.2 log (conv2d_packed / dense_packed) to records
    with tuner "autotvm", so existing tuning history (e.g. the calibration log) seeds our tuners.
    Parsing is `codesign.autotvm`'s; records it cannot map to a layer, hw and config are skipped
    (e.g. the 8-argument 4x8 conv2d lines, or knobs that are not candidates): `read_autotvm_log`
    returns them."""
    return read_autotvm_log(path)[0]


def read_autotvm_log(path: str | Path, hw: HwConfig | None = None) -> tuple[list[MeasureRecord], list[SkippedLine]]:
    """`import_autotvm_log` plus the lines it could not use, with the reason. `hw` is the config
    of records whose `-model=` names none (v0.1 logs: `-model=pynq`, `sim`; `autotvm.resolve_hw`)."""
    records, bad = autotvm.parse_log(path)
    skipped = [SkippedLine(b.line, b.reason) for b in bad]
    out: list[MeasureRecord] = []
    for rec in records:
        try:
            rec_hw = autotvm.resolve_hw(rec, hw)
            layer = autotvm.layer_from_args(rec.task, rec.args, rec_hw)
            config = ScheduleSpace(layer, rec_hw).from_knobs(rec.knobs)
        except Exception as exc:  # noqa: BLE001 - a record we cannot map is skipped, never a crash
            skipped.append(SkippedLine(rec.line, str(exc) or type(exc).__name__))
            continue
        seconds = rec.cost if rec.ok else None
        error = None if rec.ok else f"autotvm {autotvm.ERROR_NAMES.get(rec.error_no, rec.error_no)}"
        out.append(MeasureRecord.make(layer, rec_hw, config, seconds, None, error, "autotvm", 0,
                                      timestamp=rec.timestamp))
    return out, sorted(skipped, key=lambda s: s.line)
