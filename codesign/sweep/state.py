"""What travels between the sweep's driver and its trials, so a trial never touches the experiment
directory (on a cluster it may run on a machine that does not have it):

- driver -> trial: `SweepState`, the finished trials' results by config (a searcher that proposes a
  config again gets the known result) and the best record of each (layer, config) (the inner
  tuner's warm start). The driver keeps one copy in a Ray actor on its own node and adds each
  trial's as it finishes; a trial asks it once, when it starts.
- trial -> driver: the trial's schedule records, packed into its result (`pack_records`); the
  driver appends them to records.jsonl (`RecordsLog`, each (config, layer, schedule) once) before
  the trial's line in trials.jsonl.
"""

from __future__ import annotations

import base64
import json
import os
import zlib
from collections.abc import Iterable
from pathlib import Path

from codesign.sweep.rows import TrialRow
from codesign.tune.records import MeasureRecord, best_records, load_records

RecordKey = tuple[str, str, int]  # (config, layer, schedule index): measured once per sweep


def record_key(r: MeasureRecord) -> RecordKey:
    return (r.hw, r.layer, int(r.index))


def pack_records(records: Iterable[MeasureRecord]) -> str:
    """Records as one compact string (JSON lines, zlib, base64): ~20x smaller than the lines, so a
    ResNet-18 trial's ~1,500 exhaustive measurements travel and sit in Tune's state as ~45 kB."""
    text = "".join(r.to_json() + "\n" for r in records)
    return base64.b64encode(zlib.compress(text.encode(), 6)).decode("ascii")


def unpack_records(packed: str | None) -> list[MeasureRecord]:
    if not packed:
        return []
    text = zlib.decompress(base64.b64decode(packed)).decode()
    return [MeasureRecord.from_dict(json.loads(line)) for line in text.splitlines() if line]


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

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._keys: set[RecordKey] | None = None

    def existing(self) -> list[MeasureRecord]:
        return load_records(self.path) if self.path.exists() else []  # a line cut by a crash is skipped

    def append(self, records: Iterable[MeasureRecord]) -> int:
        """Append the records not in the file yet; returns how many were written."""
        if self._keys is None:
            self._keys = {record_key(r) for r in self.existing()}
        new = []
        for r in records:
            key = record_key(r)
            if key not in self._keys:
                self._keys.add(key)
                new.append(r)
        if not new:
            return 0
        data = "".join(r.to_json() + "\n" for r in new).encode()
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
        return len(new)
