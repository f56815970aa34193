"""What travels between the sweep's driver and its trials, so a trial never touches the experiment
directory (on a cluster it may run on a machine that does not have it):

- driver -> trial: `SweepState`, the finished trials' results by config (a searcher that proposes a
  config again gets the known result) and the best record of each (layer, config) (the inner
  tuner's warm start). The driver keeps one copy in a Ray actor on its own node and adds each
  trial's as it finishes; a trial asks it once, when it starts.
- trial -> driver: the trial's schedule records, packed into its result (`pack_records`); the
  driver appends them to records.jsonl (`RecordsLog`, each (config, layer, schedule) once) before
  the trial's line in trials.jsonl.

records.jsonl keeps what its readers use (`kept_records`): per (config, layer, schedule family) the
`KEEP_BEST` fastest schedules -- a resume's warm start and `codesign run --records` read the fastest
(the next fastest when its knobs are no longer valid), `export autotvm` the fastest template one,
`--confirm` the `--confirm-retune` (default 4) fastest -- and a systematic sample of the rest (every
`SAMPLE_EVERY`-th schedule index) for looking at the spread. An exhaustive ResNet-18 trial measures
1,300-2,000 schedules; all of them made 53 MB for 48 trials, and no command read more than the best.
"""

from __future__ import annotations

import base64
import json
import os
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from codesign.evaluate.fused import DEMANDS, FUSED_CANDIDATES, fused_invalid, fused_reason
from codesign.hw.config import HwConfig
from codesign.schedule import get_space
from codesign.sweep.rows import TrialRow
from codesign.tune.records import DEFAULT_FAMILY, MeasureRecord, best_records, load_records, resolve_config
from codesign.workloads.layers import parse_layer

RecordKey = tuple[str, str, str, int]  # (config, layer, schedule family, index): measured once per sweep
KEEP_BEST = 8  # fastest schedules kept per (config, layer, family): >= --confirm-retune's default 4, with room
SAMPLE_EVERY = 32  # of the other schedules, those whose index is a multiple of this are kept


def record_key(r: MeasureRecord) -> RecordKey:
    return (r.hw, r.layer, r.family, int(r.index))


def record_line(r: MeasureRecord) -> str:
    """`r.to_json()`, the same text, without `dataclasses.asdict`'s deep copy (~10x faster: a
    ResNet-18 trial packs ~1,900 records)."""
    d: dict[str, Any] = {"layer": r.layer, "layer_spec": r.layer_spec, "hw": r.hw, "knobs": r.knobs,
                         "index": r.index, "seconds": r.seconds, "cycles": r.cycles, "error": r.error,
                         "tuner": r.tuner, "seed": r.seed, "timestamp": r.timestamp}
    if not (r.source == "simulator" and r.device_s is None and r.call_s is None):
        d.update(source=r.source, device_s=r.device_s, call_s=r.call_s)
    if r.family != "autotvm":
        d["family"] = r.family
    return json.dumps(d, separators=(", ", ": "))


def pack_records(records: Iterable[MeasureRecord]) -> str:
    """Records as one compact string (JSON lines, zlib, base64): ~13x smaller than the lines, so a
    ResNet-18 trial's 1,300-2,000 exhaustive measurements travel and sit in Tune's state as 40-60 kB."""
    text = "".join(record_line(r) + "\n" for r in records)
    return base64.b64encode(zlib.compress(text.encode(), 6)).decode("ascii")


def unpack_lines(packed: str | None) -> list[str]:
    """The JSON lines of `pack_records` (what the driver appends, as they are)."""
    if not packed:
        return []
    return [line for line in zlib.decompress(base64.b64decode(packed)).decode().splitlines() if line]


def unpack_records(packed: str | None) -> list[MeasureRecord]:
    return [MeasureRecord.from_dict(json.loads(line)) for line in unpack_lines(packed)]


def kept_records(records: list[dict[str, Any]], keep_best: int = KEEP_BEST,
                 sample_every: int = SAMPLE_EVERY) -> list[bool]:
    """Which of one trial's record dicts records.jsonl keeps (see the module docstring): in each
    (config, layer, family) the `keep_best` fastest successful ones and every schedule whose index
    is a multiple of `sample_every`; a group of at most `keep_best` records is kept whole. The
    choice depends only on the records, so a trial run again keeps the same ones."""
    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, d in enumerate(records):
        groups.setdefault((d["hw"], d["layer"], d.get("family", DEFAULT_FAMILY)), []).append(i)
    keep = [False] * len(records)
    for members in groups.values():
        if len(members) <= keep_best:
            for i in members:
                keep[i] = True
            continue
        ok = [i for i in members if records[i].get("error") is None and records[i].get("seconds") is not None]
        ok.sort(key=lambda i: (records[i]["seconds"], int(records[i]["index"])))
        for i in ok[:max(keep_best, _fitting_prefix([records[i] for i in ok]))]:
            keep[i] = True
        for i in members:
            if int(records[i]["index"]) % sample_every == 0:
                keep[i] = True
    return keep


def _fitting_prefix(ranked: list[dict[str, Any]]) -> int:
    """How many of one (config, layer, family)'s records, fastest first, `codesign run` may walk:
    of the `FUSED_CANDIDATES` fastest whose knobs are still a valid schedule that fits the fused
    epilogue the layer's op needs it takes the fastest fused op (`netrun.schedules`), so every
    record up to the `FUSED_CANDIDATES`-th that fits each of `DEMANDS` is kept. All of them when
    the layer or config cannot be rebuilt here."""
    if not ranked:
        return 0
    first = ranked[0]
    try:
        layer, hw = parse_layer(first["layer_spec"]), HwConfig.from_name(first["hw"])
        space = get_space(layer, hw, first.get("family", DEFAULT_FAMILY))
        wanted = [epi for epi in DEMANDS if fused_reason(layer, epi, hw) is None]
    except Exception:  # noqa: BLE001 - not rebuildable here: keep the whole group
        return len(ranked)
    depth, fitted = 0, dict.fromkeys(wanted, 0)
    for n, d in enumerate(ranked, 1):
        config = resolve_config(space, d["knobs"])
        if config is None:
            continue
        for epi in [e for e in fitted if fused_invalid(layer, config, hw, e) is None]:
            depth, fitted[epi] = n, fitted[epi] + 1
            if fitted[epi] == FUSED_CANDIDATES:
                del fitted[epi]
        if not fitted:
            return depth
    return len(ranked)  # an epilogue no record fits: `run` walks them all


class SweepState:
    """The driver's answer to a starting trial (plain Python; the runner wraps it in a Ray actor)."""

    def __init__(self, rows: Iterable[TrialRow] = (), records: Iterable[MeasureRecord] = ()) -> None:
        self._rows: dict[str, TrialRow] = {}
        self._best: dict[tuple[str, str], MeasureRecord] = {}
        self.add(list(rows), list(records))

    def add(self, rows: list[TrialRow], records: list[MeasureRecord]) -> None:
        for row in rows:
            if row.ok and row.config:
                self._rows[row.config] = row  # the last evaluation of a config wins, as in trials.jsonl
        for key, r in best_records(records).items():
            if key not in self._best or r.seconds < self._best[key].seconds:  # type: ignore[operator]
                self._best[key] = r  # the fastest record of each (layer, config): transfer_configs reads no more

    def lookup(self, config: str) -> tuple[TrialRow | None, list[MeasureRecord]]:
        """(the finished trial of `config` if any, the warm-start records)."""
        return self._rows.get(config), list(self._best.values())


class RecordsLog:
    """records.jsonl as the driver appends it: one write per trial, and a (config, layer, schedule)
    already in the file is not written again (a trial re-run after the driver died between its
    records and its trials.jsonl line, or a retried trial)."""

    def __init__(self, path: str | Path, prune: bool = True) -> None:
        self.path = Path(path)
        self.prune = prune  # keep only what the readers use (`kept_records`)
        self.received = 0  # record lines handed to append_lines (kept or not)
        self._keys: set[RecordKey] | None = None

    def existing(self) -> list[MeasureRecord]:
        return load_records(self.path) if self.path.exists() else []  # a line cut by a crash is skipped

    def append(self, records: Iterable[MeasureRecord]) -> int:
        """Append the records not in the file yet; returns how many were written."""
        return self.append_lines(record_line(r) for r in records)[0]

    def append_lines(self, lines: Iterable[str]) -> tuple[int, list[MeasureRecord]]:
        """Append the record lines (`pack_records`'s) not in the file yet, as they are; returns how
        many were written and the fastest successful record of each (layer, config) among all."""
        if self._keys is None:
            self._keys = {record_key(r) for r in self.existing()}
        new: list[str] = []
        best: dict[tuple[str, str], tuple[float, dict[str, Any]]] = {}
        lines = list(lines)
        parsed = [json.loads(line) for line in lines]
        self.received += len(lines)
        for line, d, kept in zip(lines, parsed, kept_records(parsed) if self.prune else [True] * len(lines)):
            key = (d["hw"], d["layer"], d.get("family", DEFAULT_FAMILY), int(d["index"]))
            if kept and key not in self._keys:
                self._keys.add(key)
                new.append(line)
            if d.get("error") is None and d.get("seconds") is not None:
                pair = (d["layer"], d["hw"])
                if pair not in best or d["seconds"] < best[pair][0]:
                    best[pair] = (d["seconds"], d)
        fastest = [MeasureRecord.from_dict(d) for _s, d in best.values()]
        if not new:
            return 0, fastest
        data = "".join(line + "\n" for line in new).encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":  # a crash cut the last line: ours start anew
                data = b"\n" + data
            view = memoryview(data)
            while view:  # one write() normally; a short write continues where it stopped
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        return len(new), fastest
