"""`RPCRunner`: measure schedules on PYNQ boards over tvm.rpc, behind the same `Runner` interface
as the simulator (AutoTVM's RPCRunner, for this project's board server).

- Boards: `boards=["HOST:PORT", ...]` (direct) or `tracker="HOST:PORT", key="pynq"` (sessions from
  a tvm RPC tracker; `n_sessions` of them, default: the tracker's free boards of that key).
- One worker thread per board session pulls configs from a shared queue, so measurements spread
  over all boards in parallel. The worker compiles the program on the host (with fixed-seed
  data), while the other boards run theirs. It sends the program to the board, where it runs
  `number` x `repeat` times; the layer's inputs and weights go once per session, because
  `BoardClient.run` names the parts the board already holds by sha256. The measurement's
  seconds are the median device seconds (start to done, measured on the board), with the
  board's call time kept beside them.
- Before measuring a config the board is made to run the hardware config's bitstream
  (`bitstream=FILE`, programmed when the board's loaded sha256 differs).
- Faults: a per-measurement deadline (the board's own done-timeout plus a host-side watchdog), a
  lost board is reconnected and its measurement re-queued for any board (up to `retries` times),
  and a board that fails `max_failures` times in a row is quarantined while the others go on.
  Every input gets exactly one result.
- Errors carry AutoTVM's MeasureErrorNo names: COMPILE_HOST, RUNTIME_DEVICE, RUN_TIMEOUT,
  WRONG_ANSWER (with `check_correctness`, against the NumPy reference), plus BOARD_LOST.
- Results say where they were measured (`source`: board name, address, emulated or not,
  bitstream sha256).
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codesign.board.client import BoardClient, BoardLost
from codesign.board.protocol import RemoteError
from codesign.errors import BoardError, CodesignError, ConfigError
from codesign.evaluate.compiler import compile_layer
from codesign.evaluate.run import random_inputs
from codesign.tune.measure import MeasureInput, MeasureResult, Runner

# Error kinds (AutoTVM MeasureErrorNo names; BOARD_LOST has no AutoTVM number).
COMPILE_HOST, RUNTIME_DEVICE, RUN_TIMEOUT, WRONG_ANSWER, BOARD_LOST = (
    "COMPILE_HOST", "RUNTIME_DEVICE", "RUN_TIMEOUT", "WRONG_ANSWER", "BOARD_LOST")
ERROR_KINDS = (COMPILE_HOST, RUNTIME_DEVICE, RUN_TIMEOUT, WRONG_ANSWER, BOARD_LOST)


@dataclass
class _Slot:
    """One board session and its failure count."""

    label: str  # HOST:PORT, or "KEY@TRACKER #i"
    addr: str | None  # None: sessions come from the tracker
    client: BoardClient | None = None
    source: str = ""
    config: str | None = None  # hw config the board was made to run
    failures: int = 0
    quarantined: bool = False
    measured: int = 0
    events: list[str] = field(default_factory=list)


class _Lost(Exception):
    """The board (not the config) failed: re-queue the measurement elsewhere. `sent`: the program
    had reached the board (counts as an attempt of that measurement)."""

    def __init__(self, message: str, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


class RPCRunner(Runner):
    def __init__(self, boards: Sequence[str] = (), tracker: str | None = None, key: str = "", *,
                 n_sessions: int | None = None, bitstream: str | None = None, number: int = 1, repeat: int = 1,
                 timeout_s: float = 10.0, max_failures: int = 3, retries: int = 2,
                 check_correctness: bool = False, connect_timeout_s: float = 10.0) -> None:
        super().__init__(1, timeout_s)
        if not boards and not tracker:
            raise ConfigError("RPCRunner needs --board HOST:PORT (repeatable) or --tracker HOST:PORT --key KEY")
        if tracker and not key:
            raise ConfigError(f"--tracker {tracker} needs --key (the board type registered there, e.g. pynq)")
        if number < 1 or repeat < 1 or max_failures < 1 or retries < 0:
            raise ConfigError(f"number={number}, repeat={repeat}, max_failures={max_failures}: must be >= 1; "
                              f"retries={retries} must be >= 0")
        self.tracker, self.key, self.bitstream = tracker, key, bitstream
        self.number, self.repeat = int(number), int(repeat)
        self.max_failures, self.retries = int(max_failures), int(retries)
        self.check_correctness = check_correctness
        self.connect_timeout_s = connect_timeout_s
        if tracker:
            n = n_sessions or _free_boards(tracker, key) or 1
            self.slots = [_Slot(f"{key}@{tracker} #{i}", None) for i in range(n)]
        else:
            self.slots = [_Slot(b, b) for b in dict.fromkeys(boards)]
        self._inputs: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._inputs_lock = threading.Lock()
        self._abandoned: list[Any] = []  # sessions of timed-out calls: kept, never waited for

    # -- compile on the host ----------------------------------------------------------------------
    def _compile(self, inp: MeasureInput) -> tuple[bytes, np.ndarray | None]:
        layer, hw = inp.layer, inp.hw
        with self._inputs_lock:  # workers compile in parallel; one set of inputs per layer
            if layer.name not in self._inputs:
                self._inputs[layer.name] = random_inputs(layer)
            data, weight = self._inputs[layer.name]
        program = compile_layer(layer, inp.config, hw, data=data, weight=weight)
        expected = layer.reference(data, weight) if self.check_correctness else None
        return program.to_bytes(), expected

    # -- one board ----------------------------------------------------------------------------------
    def _connect(self, slot: _Slot, hw_name: str) -> BoardClient:
        if slot.client is not None and slot.config == hw_name:
            return slot.client
        try:
            if slot.client is None:
                slot.client = (BoardClient(slot.addr, connect_timeout_s=self.connect_timeout_s) if slot.addr
                               else BoardClient.from_tracker(self.tracker, self.key, timeout_s=self.connect_timeout_s))
            info = slot.client.info()
        except BoardError as exc:
            slot.client = None
            raise _Lost(str(exc), sent=False) from None
        try:
            loaded = slot.client.ensure_bitstream(hw_name, self.bitstream)
        except BoardLost as exc:
            slot.client = None
            raise _Lost(str(exc), sent=False) from None
        except BoardError as exc:  # wrong config and no --bitstream, or a bad file: retrying cannot help
            raise ConfigError(str(exc)) from None
        kind = "emulated-board" if info.get("emulated") else "board"
        where = slot.addr or info.get("server") or slot.label
        slot.source = f"{kind}:{info.get('board')}@{where} bitstream:{loaded.get('sha256') or 'preloaded'}"
        slot.config = hw_name
        return slot.client

    def _measure(self, slot: _Slot, inp: MeasureInput, blob: bytes, expected: np.ndarray | None) -> MeasureResult:
        client = self._connect(slot, inp.hw.name)
        deadline = self.timeout_s * self.number * self.repeat + 10.0 + len(blob) / 1e6  # +transfer
        box: dict[str, Any] = {}

        def call() -> None:
            try:
                # without a correctness check only the times matter: the outputs come back as sha256
                box["reply"] = client.run(blob, self.number, self.repeat, self.timeout_s,
                                          outputs="bytes" if expected is not None else "sha256")
            except Exception as exc:  # noqa: BLE001 - classified below
                box["error"] = exc

        start = time.perf_counter()
        thread = threading.Thread(target=call, daemon=True, name=f"board-run {slot.label}")
        thread.start()
        thread.join(deadline)
        wall = time.perf_counter() - start
        if thread.is_alive():  # the board stopped answering: abandon the session, never wait for it
            self._abandoned.append(client)
            slot.client = None
            return self._error(inp, RUN_TIMEOUT, f"no reply from {slot.label} within {deadline:.0f} s", wall, slot)
        err = box.get("error")
        if isinstance(err, BoardLost):
            slot.client = None
            raise _Lost(str(err), sent=True)
        if isinstance(err, RemoteError):
            kind = RUN_TIMEOUT if err.kind == "timeout" else RUNTIME_DEVICE
            return self._error(inp, kind, str(err), wall, slot)
        if err is not None:
            return self._error(inp, RUNTIME_DEVICE, f"{type(err).__name__}: {err}", wall, slot)
        reply = box["reply"]
        device = reply.device_median_s
        if expected is not None:
            packed = reply.outputs["output"].view(np.int8)
            got = inp.layer.unpack_output(packed, inp.hw)
            if got.shape != expected.shape or not np.array_equal(got, expected):
                bad = int(np.count_nonzero(got != expected)) if got.shape == expected.shape else got.size
                return MeasureResult(inp.config, None, None, f"{WRONG_ANSWER}: {bad} of {expected.size} output "
                                     "values differ from the NumPy reference", True, wall, {}, device,
                                     reply.call_s, slot.source)
        return MeasureResult(inp.config, device, None, None, True, wall, {}, device, reply.call_s, slot.source)

    @staticmethod
    def _error(inp: MeasureInput, kind: str, msg: str, wall: float, slot: _Slot) -> MeasureResult:
        return MeasureResult(inp.config, None, None, f"{kind}: {msg}"[:300], True, wall, {}, None, None,
                             slot.source or f"board:{slot.label}")

    # -- the batch --------------------------------------------------------------------------------
    def run(self, inputs: Sequence[MeasureInput]) -> list[MeasureResult]:
        results: list[MeasureResult | None] = [None] * len(inputs)
        jobs: collections.deque[int] = collections.deque(range(len(inputs)))
        # Each worker compiles the config it takes, so the host compiles one program while the
        # other boards run theirs (compiling everything first left every board idle meanwhile).
        compiled: dict[int, tuple[bytes, np.ndarray | None]] = {}
        attempts = collections.Counter()
        lock = threading.Lock()
        fatal: list[ConfigError] = []

        def worker(slot: _Slot) -> None:
            while True:
                with lock:
                    if slot.quarantined or not jobs:
                        return
                    i = jobs.popleft()
                if i not in compiled:  # (a re-queued measurement keeps its program)
                    try:
                        compiled[i] = self._compile(inputs[i])
                    except CodesignError as exc:
                        with lock:
                            results[i] = MeasureResult(inputs[i].config, None, None, f"{COMPILE_HOST}: {exc}"[:300],
                                                       True, 0.0, {}, None, None, "host")
                        continue
                try:
                    res = self._measure(slot, inputs[i], *compiled[i])
                except ConfigError as exc:  # the user must act: stop every board, report it once
                    with lock:
                        fatal.append(exc)
                        jobs.clear()
                    return
                except _Lost as exc:
                    with lock:
                        attempts[i] += exc.sent
                        slot.failures += 1
                        slot.events.append(f"lost: {exc}")
                        if attempts[i] > self.retries:
                            results[i] = self._error(inputs[i], BOARD_LOST, f"{attempts[i]} boards lost: {exc}",
                                                     0.0, slot)
                        else:
                            jobs.appendleft(i)  # the next free board retries it
                        if slot.failures >= self.max_failures:
                            slot.quarantined = True
                            slot.events.append(f"quarantined after {slot.failures} consecutive failures")
                            return
                    time.sleep(min(0.2 * slot.failures, 1.0))  # let a restarting board come back
                    continue
                with lock:
                    results[i] = res
                    slot.measured += 1
                    failed = res.error is not None and not res.error.startswith(WRONG_ANSWER)
                    slot.failures = slot.failures + 1 if failed else 0
                    if slot.failures >= self.max_failures:
                        slot.quarantined = True
                        slot.events.append(f"quarantined after {slot.failures} consecutive failures ({res.error})")
                        return

        threads = [threading.Thread(target=worker, args=(s,), daemon=True, name=f"board {s.label}")
                   for s in self.slots if not s.quarantined]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if fatal:
            raise fatal[0]
        if jobs:  # every board is quarantined: nothing can measure the rest, so stop with the reason
            why = "; ".join(f"{s.label}: {_last_failure(s.events)}" for s in self.slots if s.events)
            raise BoardError(f"every board is quarantined, {len(jobs)} measurement(s) left unmeasured ({why})")
        return [r for r in results if r is not None]

    # -- status -------------------------------------------------------------------------------------
    def status(self) -> list[dict[str, Any]]:
        return [{"board": s.label, "source": s.source, "measured": s.measured, "quarantined": s.quarantined,
                 "events": list(s.events)} for s in self.slots]

    def close(self, kill: bool = False) -> None:
        for slot in self.slots:
            if slot.client is not None:
                slot.client.close()
                slot.client = None
            slot.config = None

    def __getstate__(self) -> dict:
        raise TypeError("RPCRunner holds board sessions and measures in threads; it does not go to worker processes")


def _last_failure(events: list[str]) -> str:
    """The last event that says what went wrong (not the quarantine notice itself)."""
    return next((e for e in reversed(events) if not e.startswith("quarantined")), events[-1])


def _free_boards(tracker: str, key: str) -> int:
    """Free boards of `key` on the tracker (its summary), 0 when unknown."""
    import tvm.rpc  # heavy; board flow only

    from_host, port = tracker.rsplit(":", 1)
    try:
        summary = tvm.rpc.connect_tracker(from_host, int(port)).summary()
    except Exception:  # noqa: BLE001 - the first session request reports the tracker problem
        return 0
    for entry in summary.get("queue_info", {}).items():
        name, info = entry
        if name == key:
            return int(info.get("free", 0))
    return 0


__all__ = ["RPCRunner", "ERROR_KINDS", "COMPILE_HOST", "RUNTIME_DEVICE", "RUN_TIMEOUT", "WRONG_ANSWER", "BOARD_LOST"]
