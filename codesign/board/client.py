"""Host side of the board protocol: `BoardClient` talks to one board server over `tvm.rpc`,
directly (`BoardClient("HOST:PORT")`) or through a tracker (`BoardClient.from_tracker`).

    client = BoardClient("127.0.0.1:9091")
    client.info()                                   # dict: board, part, bitstream, emulated, ...
    client.program(bit_bytes, sha256, "pynq_1x16_i8w8a32_15_15_18_17")
    reply = client.run(program.to_bytes(), number=1, repeat=3)
    reply.outputs["output"], reply.device_s, reply.call_s, reply.rpc_s
    client.run(blob, outputs="sha256").output_sha256   # digests of the outputs, not their bytes

`run` uses the board's `run_cached` (docs/board.md, "The run protocol"): the program's parts of
at least `protocol.CACHE_MIN_PART` bytes go by sha256 once this session's board holds them, so
a layer's inputs and weights travel once per session, not once per measurement. The client keeps
the set of digests the board holds (it adds what it sent, drops what the board reports evicted);
should it be wrong, the board refuses with the missing digests and the client sends them again.
`BoardClient(addr, cache=False)` sends every blob whole (the board's plain `run`).

Every refusal or failure raises `protocol.RemoteError` (a `BoardError`) with one line; a lost
connection raises `BoardLost`.
"""

from __future__ import annotations

import hashlib
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from codesign.board import protocol
from codesign.board.server import parse_addr
from codesign.errors import BoardError
from codesign.network.quantized import quantize_array
from codesign.vta.program import Program


class BoardLost(BoardError):
    """The connection to a board failed or dropped."""


@dataclass(frozen=True)
class RunReply:
    outputs: dict[str, np.ndarray]
    device_s: list[float]
    call_s: float  # the board's whole driver call
    rpc_s: float  # the host's whole RPC round trip
    header: dict[str, Any] = field(default_factory=dict)

    @property
    def device_median_s(self) -> float:
        return float(np.median(self.device_s))

    @property
    def output_sha256(self) -> dict[str, str]:
        """sha256 per output region: the board's (outputs="sha256") or of the received bytes."""
        if self.outputs:
            return {n: hashlib.sha256(a).hexdigest() for n, a in self.outputs.items()}
        return {o["name"]: o["sha256"] for o in self.header.get("outputs", []) if "sha256" in o}


@dataclass(frozen=True)
class InferReply:
    outputs: list[np.ndarray]          # the network's int8 outputs
    step_ms: dict[str, float]          # wall ms per step on the board (host passes folded into VTA steps)
    device_ms: dict[str, float]        # VTA steps: device ms start to done
    rpc_s: float                       # the host's whole round trip
    sent_bytes: int                    # the request blob (input + header)
    received_bytes: int                # the reply blob (outputs + header)
    run_ms: float = 0.0                # the board's whole `Network.run` (the in-process path)


def _within(timeout_s: float, what: str, fn: Any) -> Any:
    """Run a blocking tvm connect in a thread: a tvm server serves one session at a time, so a
    busy (or hung) board would block the caller forever."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except Exception as exc:  # noqa: BLE001 - reported below as one line
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True, name="board-connect")
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise BoardLost(f"cannot connect to {what}: no session within {timeout_s:g} s (busy with another "
                        "client, hung, or not a board server)")
    if "error" in box:
        raise BoardLost(f"cannot connect to {what}: {_one_line(box['error'])}")
    return box["value"]


def _one_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[-1][:300] if lines else type(exc).__name__


class BoardClient:
    """One RPC session with one board. Not thread-safe: use one client per thread."""

    def __init__(self, addr: str, *, session: Any = None, connect_timeout_s: float = 10.0,
                 name: str | None = None, cache: bool = True) -> None:
        self.addr = addr
        self.name = name or addr
        self.cache = cache
        self._funcs: dict[str, Any] = {}
        self._held: set[str] = set()  # digests this session's board holds (its replies say so)
        self.network: dict[str, Any] | None = None  # the network load_network put on the board
        # what run_cached sent and named: bytes inline, bytes named by digest, `missing` refusals
        self.stats = {"sent_bytes": 0, "named_bytes": 0, "misses": 0}
        if session is None:
            import tvm.rpc  # heavy; board flow only

            host, port = parse_addr(addr, "board address")
            session = _within(connect_timeout_s, f"board {addr}", lambda: tvm.rpc.connect(host, port))
        self.session = session

    @classmethod
    def from_tracker(cls, tracker: str, key: str, *, priority: int = 1, timeout_s: float = 30.0) -> BoardClient:
        """A free board of type `key` from the tracker (waits up to `timeout_s` for one)."""
        import tvm.rpc  # heavy; board flow only

        host, port = parse_addr(tracker, "--tracker")
        session = _within(timeout_s, f"a {key!r} board from tracker {tracker}",
                          lambda: tvm.rpc.connect_tracker(host, port).request(key, priority=priority))
        return cls(f"{key}@{tracker}", session=session)

    # -- calls --------------------------------------------------------------------------------
    def _func(self, name: str) -> Any:
        if name not in self._funcs:
            try:
                self._funcs[name] = self.session.get_function(name)
            except Exception as exc:  # noqa: BLE001
                text = _one_line(exc)
                if "no function" in text or "Cannot find" in text:
                    raise protocol.RemoteError(f"board {self.name} does not serve {name!r}; it serves only "
                                               f"{', '.join(protocol.FUNCTIONS)}") from None
                raise BoardLost(f"board {self.name}: {text}") from None
        return self._funcs[name]

    def call(self, name: str, *args: Any) -> tuple[dict[str, Any], bytes]:
        """Call a board function by name; returns the checked (header, payload)."""
        fn = self._func(name)
        try:
            blob = fn(*[bytearray(a) if isinstance(a, (bytes, bytearray, memoryview)) else a for a in args])
        except Exception as exc:  # noqa: BLE001 - the session or socket broke
            self._funcs.clear()
            self._held.clear()
            raise BoardLost(f"board {self.name} lost during {name.rsplit('.', 1)[-1]}: {_one_line(exc)}") from None
        # A traceback that kept `fn` alive would keep the session open, and a tvm server serves
        # one session at a time: drop it before anything can raise.
        del fn
        header, payload = protocol.decode(blob, f"board {self.name}")
        return protocol.check(header, f"board {self.name}"), payload

    def info(self) -> dict[str, Any]:
        header, _ = self.call(protocol.INFO)
        return header

    def program(self, bitstream: bytes, sha256: str | None = None, config: str = "") -> dict[str, Any]:
        return self.call(protocol.PROGRAM, bytes(bitstream), sha256 or hashlib.sha256(bitstream).hexdigest(), str(config))[0]

    def program_file(self, path: str | Path, config: str) -> dict[str, Any]:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise BoardError(f"--bitstream {path}: cannot read ({exc.strerror})") from None
        return self.program(data, hashlib.sha256(data).hexdigest(), config)

    def ensure_bitstream(self, config: str, bitstream: str | Path | None = None) -> dict[str, Any]:
        """Make the board run `config`: program `bitstream` unless it is already loaded. Without a
        bitstream file the board must already run `config`."""
        loaded = self.info().get("bitstream") or {}
        if bitstream is not None:
            if Path(bitstream).is_dir():
                raise BoardError(f"--bitstream {bitstream}: is a directory, expected a .bit file")
            data = Path(bitstream).read_bytes() if Path(bitstream).is_file() else None
            if data is None:
                raise BoardError(f"--bitstream {bitstream}: no such file")
            sha = hashlib.sha256(data).hexdigest()
            if loaded.get("sha256") == sha and loaded.get("config") == config:
                return loaded
            return self.program(data, sha, config)["bitstream"]
        if loaded.get("config") != config:
            raise BoardError(f"board {self.name} runs {loaded.get('config') or 'no VTA bitstream'}, not {config}; "
                             "pass --bitstream FILE for that config")
        return loaded

    # -- a deployed network (docs/board.md, "Over RPC") -------------------------------------------
    def load_network(self, bundle: bytes) -> dict[str, Any]:
        """Send a .vtanet bundle; the board verifies it against its bitstream and loads it (the
        session's previous network is freed). Returns the board's description of it."""
        header, _ = self.call(protocol.LOAD_NETWORK, bytes(bundle))
        self.network = header
        return header

    def infer(self, x: np.ndarray) -> InferReply:
        """One inference of the loaded network: only `x`'s bytes and a small header go out, the
        int8 outputs' bytes and the per-step times come back."""
        net = self.network
        if net is None:
            raise BoardError(f"board {self.name}: load_network first")
        x = np.ascontiguousarray(x)
        if x.dtype != np.int8 and len(net["inputs"]) == 1 and list(x.shape) == list(net["inputs"][0]["shape"]):
            # quantized here with the bundle's exponent (what the board would do): a quarter of the bytes
            x = quantize_array(x, int(net["inputs"][0]["frac"]))
        dtype = "int8" if x.dtype == np.int8 else "float32"
        x = x if dtype == "int8" else x.astype(np.float32)
        request = protocol.encode({"dtype": dtype, "shape": list(x.shape)}, x.tobytes(), protocol.REQUEST_MAGIC)
        start = time.perf_counter()
        fn = self._func(protocol.INFER)
        try:
            blob = fn(bytearray(request))
        except Exception as exc:  # noqa: BLE001 - the session or socket broke
            self._funcs.clear()
            raise BoardLost(f"board {self.name} lost during infer: {_one_line(exc)}") from None
        del fn
        rpc_s = time.perf_counter() - start
        header, payload = protocol.decode(blob, f"board {self.name}")
        protocol.check(header, f"board {self.name}")
        outs, pos = [], 0
        for shape in header["outputs"]:
            n = int(np.prod(shape))
            outs.append(np.frombuffer(payload[pos:pos + n], dtype=np.int8).reshape(shape).copy())
            pos += n
        names = [s["name"] for s in net["steps"] if s["unit"] != "host"]
        return InferReply(outs, dict(zip(names, header["step_ms"])), dict(zip(names, header["device_ms"])),
                          rpc_s, len(request), len(blob), float(header.get("run_ms", 0.0)))

    def run(self, program_blob: bytes, number: int = 1, repeat: int = 1, timeout_s: float = 10.0,
            outputs: str = "bytes") -> RunReply:
        """Run a `Program.to_bytes()` blob. outputs="sha256": the reply carries each output's
        sha256 (`RunReply.output_sha256`) instead of its bytes (tuning without correctness checks)."""
        if outputs not in protocol.OUTPUT_MODES:
            raise BoardError(f"outputs={outputs!r}; allowed: {', '.join(protocol.OUTPUT_MODES)}")
        start = time.perf_counter()
        if self.cache:
            header, payload = self._run_cached(program_blob, int(number), int(repeat), float(timeout_s), outputs)
        else:
            header, payload = self.call(protocol.RUN, bytes(program_blob), int(number), int(repeat), float(timeout_s))
        rpc_s = time.perf_counter() - start
        arrays, pos = {}, 0
        if payload:
            for out in header["outputs"]:
                n = int(out["nbytes"])
                arrays[out["name"]] = np.frombuffer(payload[pos:pos + n], dtype=np.uint8).copy()
                pos += n
        return RunReply(arrays, [float(s) for s in header["device_s"]], float(header["call_s"]), rpc_s, header)

    def _run_cached(self, blob: bytes, number: int, repeat: int, timeout_s: float,
                    outputs: str) -> tuple[dict[str, Any], memoryview]:
        view = memoryview(blob)
        parts = [view[a:b] for a, b in Program.blob_parts(blob)]
        digests = [hashlib.sha256(p).hexdigest() if len(p) >= protocol.CACHE_MIN_PART else None for p in parts]
        for attempt in range(2):
            inline, named = [], set()
            for d in digests:  # name a part by digest when the board holds it or it is inline earlier here
                inline.append(d is None or (d not in self._held and d not in named))
                if d is not None:
                    named.add(d)
            described = [{"nbytes": len(p), "sha256": d, "inline": i} for p, d, i in zip(parts, digests, inline)]
            wire = [p for p, i in zip(parts, inline) if i]
            if inline[0] and len(parts[0]) >= protocol.CACHE_MIN_PART:
                # the code: it differs per schedule, so it travels each time, and instruction
                # rows are repetitive (about 10x smaller deflated, at ~100 MB/s)
                packed = zlib.compress(parts[0], 1)
                if len(packed) < len(parts[0]) * 3 // 4:
                    wire[0], described[0]["zlib"] = packed, len(packed)
            head = {"parts": described, "number": number, "repeat": repeat, "timeout_s": timeout_s,
                    "outputs": outputs}
            payload = b"".join(wire)
            try:
                header, out = self.call(protocol.RUN_CACHED, protocol.encode(head, payload, protocol.REQUEST_MAGIC))
            except protocol.RemoteError as exc:
                if exc.kind != "missing" or attempt:
                    raise
                # our view of the board's cache was wrong: forget those parts and send them again
                self.stats["misses"] += 1
                self._held.difference_update(exc.header.get("missing", []))
                continue
            self.stats["sent_bytes"] += len(payload)
            self.stats["named_bytes"] += sum(len(p) for p, i in zip(parts, inline) if not i)
            self._held.update(d for d, i in zip(digests, inline) if d is not None and i)
            self._held.difference_update(header.get("cache", {}).get("evicted", []))
            return header, out
        raise AssertionError("unreachable: the second attempt returns or raises")

    def close(self) -> None:
        self._funcs.clear()
        self.session = None

    def __enter__(self) -> BoardClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["BoardClient", "BoardLost", "RunReply"]
