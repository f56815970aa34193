"""The board's content cache (`run_cached`): a program's repeated parts (inputs, weights) travel
once per session and are named by sha256 after that. Cached runs are bit-identical to cold ones
and to the simulator; a part whose bytes do not hash to its digest is refused; eviction under a
small byte limit re-sends and stays correct; a stale client view is an explicit `missing`
refusal that the client recovers from; a board restarted mid-tuning (empty cache) is survived.
Servers listen on 127.0.0.1 and every process started here is stopped."""

from __future__ import annotations

import hashlib
import zlib

import numpy as np
import pytest

from codesign.board import protocol
from codesign.board.cache import BlobCache
from codesign.board.client import BoardClient
from codesign.board.local import free_port, local_board
from codesign.errors import BoardError
from codesign.evaluate.compiler import compile_layer
from codesign.hw.config import HwConfig
from codesign.schedule.space import ScheduleSpace
from codesign.tune.loop import TuneCallback, tune_layer
from codesign.tune.measure import MeasureInput, SimulatorRunner
from codesign.tune.rpc_runner import RPCRunner
from codesign.vta.program import Program
from codesign.vta.simulator import simulate
from codesign.workloads import parse_layer

HW = HwConfig.resolve("pynq_1x16")
# data 6272 B and weight 9216 B: both above CACHE_MIN_PART, so both are cached parts
LAYER = parse_layer("conv2d:1,32,14,14,32,3,3,1,1")


def _programs(n: int = 4, seed: int = 0) -> list[Program]:
    """`n` schedules of LAYER compiled with the same inputs and weights (as in tuning)."""
    space = ScheduleSpace(LAYER, HW)
    valid = [int(i) for i in space.valid_indices()]
    rng = np.random.default_rng(seed)
    data = rng.integers(-128, 128, LAYER.data_shape(), dtype=np.int8)
    weight = rng.integers(-128, 128, LAYER.weight_shape(), dtype=np.int8)
    return [compile_layer(LAYER, space.get(i), HW, data=data, weight=weight) for i in valid[:: len(valid) // n][:n]]


def _request(parts: list[tuple[bytes, str | None, bool]], **head) -> bytes:
    header = {"parts": [{"nbytes": len(b), "sha256": d, "inline": i} for b, d, i in parts],
              "number": 1, "repeat": 1, "timeout_s": 10.0, "outputs": "bytes", **head}
    return protocol.encode(header, b"".join(b for b, _, i in parts if i), protocol.REQUEST_MAGIC)


def _wire(code: bytes) -> int:
    """Bytes the client sends for an inline code part (deflated when that saves a quarter)."""
    packed = len(zlib.compress(code, 1))
    return packed if packed < len(code) * 3 // 4 else len(code)


def _split(blob: bytes) -> list[tuple[bytes, str | None]]:
    parts = [blob[a:b] for a, b in Program.blob_parts(blob)]
    return [(p, hashlib.sha256(p).hexdigest() if len(p) >= protocol.CACHE_MIN_PART else None) for p in parts]


# -- no RPC -----------------------------------------------------------------------------------------
def test_blob_parts_cut_code_regions_and_crc():
    program = _programs(1)[0]
    blob = program.to_bytes()
    cuts = Program.blob_parts(blob)
    assert b"".join(blob[a:b] for a, b in cuts) == blob and cuts[0][0] == 0
    assert all(b0 == a1 for (_, b0), (a1, _) in zip(cuts, cuts[1:]))  # in order, no gaps
    with_data = [r for r in program.regions if r.data is not None]
    assert [blob[a:b] for a, b in cuts[1:-1]] == [r.data.tobytes() for r in with_data]
    assert len(cuts) == len(with_data) + 2 and cuts[-1][1] - cuts[-1][0] == 4  # code ... CRC
    # a blob whose header does not parse travels whole (the board refuses it with the reason)
    for bad in (b"junk", blob[:200], b"VTAPROG\x01" + b"\xff" * 64):
        assert Program.blob_parts(bad) == [(0, len(bad))]


def test_blob_cache_is_lru_and_bounded_in_bytes():
    cache = BlobCache(100)
    assert cache.put("a", b"x" * 40) == [] and cache.put("b", b"y" * 40) == []
    assert cache.get("a") == b"x" * 40  # a is now the most recently used
    assert cache.put("c", b"z" * 40) == ["b"]  # so b goes
    assert "b" not in cache and "a" in cache and cache.held_bytes == 80
    assert cache.put("big", b"w" * 101) == ["big"] and "big" not in cache  # alone above the limit
    assert cache.put("d", b"v" * 100) == ["a", "c"] and cache.held_bytes == 100 and len(cache) == 1
    assert BlobCache(0).put("e", b"u") == ["e"]


# -- over tvm.rpc -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def board():
    with local_board("pynq_1x16") as proc:
        yield proc


def test_cache_hits_are_bit_identical_to_a_cold_run_and_the_simulator(board):
    programs = _programs(3)
    blobs = [p.to_bytes() for p in programs]
    with BoardClient(board.addr, cache=False) as plain:
        cold = [plain.run(b) for b in blobs]
    with BoardClient(board.addr) as client:
        assert client.info()["cache_bytes"] == protocol.DEFAULT_CACHE_BYTES
        first = client.run(blobs[0])
        sent_first = client.stats["sent_bytes"]
        warm = [client.run(b, repeat=2) for b in blobs]
        digests = [client.run(b, outputs="sha256") for b in blobs]
    inputs = sum(r.nbytes for r in programs[0].regions_with_role("input"))
    assert first.header["cache"]["hits"] == 0 and sent_first >= inputs
    named_code = [_split(b)[0][1] is not None for b in blobs]  # code parts below CACHE_MIN_PART go inline
    for i, (p, c, w, d) in enumerate(zip(programs, cold, warm, digests)):
        ref = simulate(p)
        # data and weight, plus the code of the program sent before (the first one)
        assert w.header["cache"]["hits"] == 2 + (i == 0 and named_code[0]) and w.header["cache"]["evicted"] == []
        assert d.header["cache"]["hits"] == 2 + named_code[i] and d.header["cache"]["sent"] == 0
        assert c.outputs.keys() == w.outputs.keys() == ref.outputs.keys()
        for name in ref.outputs:
            assert np.array_equal(w.outputs[name], c.outputs[name]) and np.array_equal(w.outputs[name], ref.outputs[name])
        assert w.device_s == pytest.approx([c.device_s[0]] * 2, rel=1e-12, abs=0)  # device clock rounding
        # outputs="sha256": no output bytes travel, their digests are the cold run's
        assert d.outputs == {} and d.output_sha256 == c.output_sha256
        assert d.device_s == pytest.approx(c.device_s, rel=1e-12, abs=0)
    # after the first run only what the board did not hold travelled: the code of the two other
    # programs (deflated), and the parts too small to name (micro-ops, CRC) of every request
    assert client.stats["misses"] == 0
    small = [sum(len(b) for b, d in _split(blob) if d is None) for blob in blobs]
    codes = [_wire(_split(blob)[0][0]) * named for blob, named in zip(blobs, named_code)]
    assert client.stats["sent_bytes"] - sent_first == 2 * sum(small) + codes[1] + codes[2]
    assert client.stats["named_bytes"] >= 2 * len(blobs) * inputs
    assert "ok parts: 2 cached, 1 sent" in board.log()


def test_mismatched_or_malformed_parts_are_refused_and_nothing_is_cached(board):
    blob = _programs(1, seed=5)[0].to_bytes()
    parts = _split(blob)
    with BoardClient(board.addr) as client:
        # a part whose bytes do not hash to the digest it names (corrupted, or a lie)
        (code, dcode), (data, ddata) = parts[0], parts[1]
        forged = [(code, dcode, True), (data[:-1] + bytes([data[-1] ^ 1]), ddata, True)] + \
            [(p, d, True) for p, d in parts[2:]]
        with pytest.raises(BoardError, match=r"part 1 \(6272 bytes\) hashes to sha256 [0-9a-f]{64}, not the "
                                              f"{ddata} it was sent with .*refused, nothing cached") as exc:
            client.call(protocol.RUN_CACHED, _request(forged))
        assert exc.value.kind == "refused" and "\n" not in str(exc.value)
        # ... so that digest names nothing on the board: referring to it is an explicit miss
        named = [(code, dcode, True), (data, ddata, False)] + [(p, d, True) for p, d in parts[2:]]
        with pytest.raises(protocol.RemoteError, match="not in this session's cache") as exc:
            client.call(protocol.RUN_CACHED, _request(named))
        assert exc.value.kind == "missing" and exc.value.header["missing"] == [ddata]
        # a digest naming other bytes of the right size is refused too (weight named as data)
        with pytest.raises(BoardError, match="part 1 .* hashes to sha256"):
            client.call(protocol.RUN_CACHED, _request([(code, dcode, True), (data, parts[2][1], True)]
                                                       + [(p, d, True) for p, d in parts[2:]]))
        for bad, says in [
            (_request([(code, "ABC", True)]), "part 0 must be"),
            (_request([(code, None, False)]), "a part without sha256 must be inline"),
            (_request([(code, dcode, True)], number=0), "number=0"),
            (_request([(code, dcode, True)], outputs="all"), "outputs='all'; allowed: bytes, sha256"),
            (protocol.encode({"parts": []}, b"", protocol.REQUEST_MAGIC), "non-empty list"),
            (bytes(_request([(p, d, True) for p, d in parts]))[:-1] + b"\0", "request checksum mismatch"),
            (protocol.encode({"parts": [{"nbytes": 10, "sha256": None, "inline": True}]}, b"short",
                             protocol.REQUEST_MAGIC), "payload ends after 5"),
            (blob, "request is not a codesign board request"),
        ]:
            with pytest.raises(BoardError, match=says):
                client.call(protocol.RUN_CACHED, bad)
        # deflated parts must inflate to exactly their declared size: no more (no zip bombs), no less
        rest = [{"nbytes": len(p), "sha256": d, "inline": True} for p, d in parts[1:]]
        for wire, nbytes, says in [(zlib.compress(code + b"\0" * 10**6, 1), len(code), "zlib data does not inflate to exactly"),
                                   (zlib.compress(code[:-1], 1), len(code), "zlib data does not inflate to exactly"),
                                   (b"not zlib at all", len(code), "not zlib data")]:
            head = {"parts": [{"nbytes": nbytes, "sha256": dcode, "inline": True, "zlib": len(wire)}] + rest}
            with pytest.raises(BoardError, match=f"part 0: {says}"):
                client.call(protocol.RUN_CACHED, protocol.encode(head, wire + b"".join(p for p, _ in parts[1:]),
                                                                 protocol.REQUEST_MAGIC))
        # the session is fine afterwards and holds nothing from the refused requests
        reply = client.run(blob)
        assert reply.header["cache"]["hits"] == 0 and reply.header["cache"]["sent"] == 3


def test_assembled_program_obeys_the_payload_limit(board):
    """A small request may not name (by digest) a program larger than the board's payload limit."""
    code, dcode = _split(_programs(1)[0].to_bytes())[0]
    head = {"parts": [{"nbytes": len(code), "sha256": dcode, "inline": True},
                      {"nbytes": protocol.DEFAULT_MAX_PAYLOAD, "sha256": "0" * 64, "inline": False}]}
    with BoardClient(board.addr) as client:
        with pytest.raises(BoardError, match=rf"program of {len(code) + protocol.DEFAULT_MAX_PAYLOAD} bytes "
                                             "exceeds this board's payload limit"):
            client.call(protocol.RUN_CACHED, protocol.encode(head, code, protocol.REQUEST_MAGIC))


def test_eviction_under_a_small_limit_resends_and_stays_correct():
    programs = _programs(3, seed=7)
    # 10 000 bytes hold the weight (9216 B) or the data (6272 B), never both: every run evicts
    with local_board("pynq_1x16", cache_bytes=10_000) as small:
        with BoardClient(small.addr) as client:
            assert client.info()["cache_bytes"] == 10_000
            replies = [client.run(p.to_bytes()) for p in programs * 2]
        log = small.log()
    evicted = [d for r in replies for d in r.header["cache"]["evicted"]]
    assert evicted and all(r.header["cache"]["held_bytes"] <= 10_000 for r in replies)
    assert client.stats["misses"] == 0  # the replies' eviction lists kept the client's view exact
    inputs = sum(r.nbytes for r in programs[0].regions_with_role("input"))
    assert client.stats["sent_bytes"] > 6 * inputs // 2  # evicted inputs were sent again
    for p, r in zip(programs * 2, replies):
        ref = simulate(p)
        assert all(np.array_equal(r.outputs[n], ref.outputs[n]) for n in ref.outputs)
    assert "evicted, cache" in log


def test_a_stale_client_view_is_an_explicit_miss_and_recovered(board):
    program = _programs(1, seed=11)[0]
    blob = program.to_bytes()
    with BoardClient(board.addr) as client:
        # this client believes the board holds the inputs; this new session holds nothing
        client._held.update(d for _, d in _split(blob) if d is not None)
        reply = client.run(blob)
    assert client.stats["misses"] == 1 and reply.header["cache"]["sent"] == 3
    ref = simulate(program)
    assert all(np.array_equal(reply.outputs[n], ref.outputs[n]) for n in ref.outputs)
    assert "missing: 3 part(s)" in board.log()


class _RestartAfterFirstRound(TuneCallback):
    """Kill the board (listener and sessions at once) and start a new one on the same port: the
    runner's session breaks and the new board's cache is empty."""

    def __init__(self, port: int) -> None:
        self.port, self.rounds, self.board = port, 0, None

    def __call__(self, result, measured) -> None:
        self.rounds += 1
        if self.rounds == 1:
            self.board.kill()
            self.board = local_board("pynq_1x16", port=self.port)


def test_board_restart_mid_tuning_is_survived():
    layer = parse_layer("conv2d:1,64,56,56,64,3,3,1,1")
    port = free_port()
    restart = _RestartAfterFirstRound(port)
    restart.board = local_board("pynq_1x16", port=port)
    try:
        runner = RPCRunner([f"127.0.0.1:{port}"], check_correctness=True, max_failures=3)
        try:
            res = tune_layer(layer, HW, tuner="grid", budget=16, runner=runner, callbacks=[restart])
            status = runner.status()[0]
        finally:
            runner.close()
        log = restart.board.log()
    finally:
        restart.board.stop()
    assert restart.rounds >= 2 and res.measurements == 16
    assert all(r.ok for r in res.history), [r.error for r in res.history]  # check_correctness: bit-exact
    assert any("lost" in e for e in status["events"]) and not status["quarantined"]
    # the new board got the inputs again (its first run_cached had no hits) and measured the rest
    runs = [line for line in log.splitlines() if " run in=" in line and " ok parts: " in line]
    assert runs and "0 cached" in runs[0] and all("0 cached" not in line for line in runs[1:])
    sim = SimulatorRunner(HW).run([MeasureInput(layer, HW, r.config) for r in res.history])
    assert [r.seconds for r in res.history] == pytest.approx([s.cycles / HW.clock_hz for s in sim], rel=1e-12, abs=0)


def test_runner_compiles_in_its_workers_and_reports_compile_errors_per_config(board):
    """Workers compile while other boards run; a config that does not compile is COMPILE_HOST,
    in its place, and the others are measured (their inputs sent once per session)."""
    space = ScheduleSpace(LAYER, HW)
    valid = [int(i) for i in space.valid_indices()]
    bad = next(i for i in range(len(space)) if i not in set(valid))
    inputs = [MeasureInput(LAYER, HW, space.get(i)) for i in (valid[0], bad, valid[-1], valid[len(valid) // 2])]
    runner = RPCRunner([board.addr], check_correctness=True)
    try:
        res = runner.run(inputs)
    finally:
        runner.close()
    assert [r.config.index for r in res] == [inp.config.index for inp in inputs]
    assert res[1].error.startswith("COMPILE_HOST: ") and res[1].source == "host"
    assert all(r.ok for i, r in enumerate(res) if i != 1), [r.error for r in res]
    sim = SimulatorRunner(HW).run([inputs[i] for i in (0, 2, 3)])
    assert [res[i].seconds for i in (0, 2, 3)] == pytest.approx([s.cycles / HW.clock_hz for s in sim], rel=1e-12, abs=0)
