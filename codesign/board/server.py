"""The board server: apache-tvm's `tvm.rpc` server whose sessions expose this project's
functions and nothing else (`codesign board serve`).

- `codesign.board.info()`: board, FPGA part, pynq version, loaded bitstream (config, sha256),
  emulated or not, codesign version, payload limit.
- `codesign.board.program(bitstream, sha256, config)`: verifies the checksum, the .bit header and
  its FPGA die against the board's part, then downloads it.
- `codesign.board.run(program_blob, number, repeat, timeout_s)`: runs a `Program` blob (CRC
  checked, compiled for the loaded config) with the driver; returns outputs, device and call times.
- `codesign.board.run_cached(request)`: the same run, with the blob's large parts (inputs,
  weights, instructions) named by sha256 once the session holds them (`protocol`, `cache`): every
  part received is checked against its sha256 before it is kept or used, the cache is bounded in
  bytes, and a part the session does not hold is a `missing` refusal, never a guess.
- `codesign.board.load_network(bundle)` / `codesign.board.infer(request)`: a deployed network
  (`.vtanet`, `codesign.board.network`): verified against the loaded bitstream, held by the session;
  one inference per `infer`, only its input and output on the wire (docs/board.md).

Security: tvm's server would let any client upload and load shared libraries (arbitrary code).
Here every session removes ALL global functions except those above and the session
constructor the RPC protocol needs, before serving -- so `upload`, `load_module`, remote device
memory and every other TVM function are unknown to clients. Requests above `max_payload` bytes are
refused, replies are JSON + raw bytes (`protocol`), nothing is unpickled, and the server binds
127.0.0.1 unless told otherwise. One log line per request goes to stderr.

Process layout: tvm's listener loop runs on a thread of the serving process, each client session
is a forked child of it (as in tvm's own server, minus its second interpreter). What must outlive a session (which bitstream is loaded) lives in `state_dir`.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import importlib.util
import json
import logging
import multiprocessing
import signal
import socket
import sys
import tempfile
import threading
import time
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from codesign import __version__
from codesign.bitstream.bitfile import die_of, parse_header
from codesign.board import protocol
from codesign.board.cache import BlobCache
from codesign.board.driver import DEFAULT_TIMEOUT_S, PynqApi, VTADriver, check_hw
from codesign.board.lean_tvm import lean_tvm
from codesign.board.network import Network
from codesign.errors import BoardError, CodesignError
from codesign.fileio import atomic_write_bytes, atomic_write_json
from codesign.hw.board import Board
from codesign.hw.config import HwConfig
from codesign.vta.program import Program, ProgramBuilder

LOOPBACK = ("127.0.0.1", "localhost", "::1")
MAX_RUNS = 1000  # number * repeat per request: bounds the time one request can hold a board


@dataclass(frozen=True)
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = protocol.DEFAULT_PORT
    port_end: int = protocol.DEFAULT_PORT + 100
    tracker: str | None = None  # HOST:PORT
    key: str = ""
    board: str = "pynq-z1"
    emulate: str | None = None  # hardware config of the emulated board (tests and demos)
    max_payload: int = protocol.DEFAULT_MAX_PAYLOAD
    cache_bytes: int = protocol.DEFAULT_CACHE_BYTES  # per session; 0: run_cached keeps nothing
    # contiguous memory a loaded network may take: PYNQ-Z1's default CMA pool is 128 MB
    network_bytes: int = 128 << 20
    state_dir: str = ""
    custom_addr: str | None = None  # address reported to the tracker


def parse_addr(text: str, what: str = "address") -> tuple[str, int]:
    host, sep, port = str(text).rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise BoardError(f"{what} {text!r}: expected HOST:PORT, e.g. 127.0.0.1:9091")
    return host, int(port)


def check_bind(opts: ServeOptions, host_given: bool) -> None:
    """Refuse set-ups that would expose the board, or strand it, without an explicit --host."""
    if opts.host not in LOOPBACK and not host_given:
        raise BoardError(f"refusing to bind {opts.host}: the board server binds 127.0.0.1 unless "
                         "--host says otherwise (e.g. --host 0.0.0.0 on a trusted lab network)")
    if opts.tracker and opts.host in LOOPBACK and not opts.custom_addr:
        thost, _ = parse_addr(opts.tracker, "--tracker")
        if thost not in LOOPBACK:
            raise BoardError(f"--tracker {opts.tracker} is on another machine but the server binds "
                             f"{opts.host}: clients sent there could not reach it; pass --host 0.0.0.0 "
                             "(or this board's address)")
    if opts.tracker and not opts.key:
        raise BoardError("--tracker needs --key (the board type clients ask the tracker for, e.g. pynq)")


def check_setup(opts: ServeOptions) -> None:
    """Check the board, the emulated config and pynq before anything listens: a failure is one line,
    not a traceback from the listener or a session."""
    Board.named(opts.board)
    if opts.cache_bytes < 0 or opts.max_payload < 1:
        raise BoardError(f"--cache-bytes {opts.cache_bytes} / --max-payload {opts.max_payload}: the cache "
                         "must be >= 0 bytes (0 keeps nothing), the payload limit >= 1 byte")
    if opts.network_bytes < 1:
        raise BoardError(f"--network-bytes {opts.network_bytes}: must be >= 1 byte")
    if opts.emulate:
        HwConfig.resolve(opts.emulate)
    elif importlib.util.find_spec("pynq") is None:
        PynqApi.real()  # raises the one-line "pynq is not installed" error without importing pynq


class CacheMiss(BoardError):
    """A `run_cached` request named parts this session does not hold (`missing`: their digests)."""

    kind = "missing"

    def __init__(self, missing: list[str]) -> None:
        super().__init__(f"{len(missing)} program part(s) named by sha256 are not in this session's cache "
                         "(evicted, or never sent here): send them inline")
        self.missing = missing


class BoardService:
    """The session functions, as plain Python (the RPC layer only adds encoding and logging)."""

    def __init__(self, opts: ServeOptions, api: PynqApi | None = None, port: int | None = None) -> None:
        self.opts = opts
        self.server_id = f"{opts.custom_addr or socket.gethostname()}:{port or opts.port}"
        self.board = Board.named(opts.board)
        self.emulated_hw = HwConfig.resolve(opts.emulate) if opts.emulate else None
        if api is None:
            api = _emulated_api(self.emulated_hw, self.board) if self.emulated_hw else PynqApi.real()
        self.api = api
        self.driver = VTADriver(api)
        self.state_dir = Path(opts.state_dir)
        self.state_path = self.state_dir / "state.json"
        self.cache = BlobCache(opts.cache_bytes)
        self.last_cache: dict[str, Any] = {}  # what the last run_cached did (for the log line)
        self.network: Network | None = None  # this session's deployed network (load_network)

    # -- state that outlives a session ----------------------------------------------------------
    def loaded(self) -> dict[str, Any]:
        try:
            return json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            if self.emulated_hw is not None:  # an emulated board comes up with its config loaded
                return {"config": self.emulated_hw.name, "sha256": None, "source": "emulated (preloaded)"}
            return {"config": None, "sha256": None, "source": None}

    def _check_size(self, what: str, data: bytes) -> None:
        if len(data) > self.opts.max_payload:
            raise BoardError(f"{what} of {len(data)} bytes exceeds this board's payload limit of "
                             f"{self.opts.max_payload} bytes (codesign board serve --max-payload)")

    # -- the functions ----------------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        return {"board": self.board.name, "server": self.server_id, "fpga_part": self.board.fpga_part, "target": self.board.target,
                "pynq_version": self.api.version, "emulated": self.api.emulated,
                "emulated_config": self.emulated_hw.name if self.emulated_hw else None,
                "bitstream": self.loaded(), "codesign_version": __version__,
                "max_payload": self.opts.max_payload, "cache_bytes": self.cache.limit_bytes,
                "network_bytes": self.opts.network_bytes,
                "functions": list(protocol.FUNCTIONS)}

    def program(self, bitstream: bytes, sha256: str, config: str) -> dict[str, Any]:
        self._check_size("bitstream", bitstream)
        got = hashlib.sha256(bitstream).hexdigest()
        if got != str(sha256).lower():
            raise BoardError(f"bitstream checksum mismatch: expected sha256 {sha256}, the received "
                             f"{len(bitstream)} bytes hash to {got} (corrupted upload or wrong file)")
        hw = HwConfig.resolve(str(config))
        header = parse_header(bitstream, "bitstream", file_size=len(bitstream))
        if header.die != die_of(self.board.fpga_part):
            raise BoardError(f"bitstream is for part {header.part}, but this board ({self.board.name}) "
                             f"is a {self.board.fpga_part}")
        if self.emulated_hw is not None and hw.name != self.emulated_hw.name:
            raise BoardError(f"this emulated board implements only {self.emulated_hw.name}; it cannot "
                             f"load a bitstream for {hw.name}")
        path = atomic_write_bytes(self.state_dir / "bitstreams" / f"{got}.bit", bitstream)
        start = time.perf_counter()
        self.driver.program_bitstream(path)
        state = {"config": hw.name, "sha256": got, "part": header.part, "design": header.design,
                 "date": header.date, "source": "program", "loaded_at": time.time()}
        atomic_write_json(self.state_path, state)
        return {"bitstream": state, "seconds": time.perf_counter() - start}

    def run(self, blob: bytes, number: int, repeat: int, timeout_s: float,
            outputs: str = "bytes") -> tuple[dict[str, Any], bytes]:
        self._check_size("program", blob)
        if outputs not in protocol.OUTPUT_MODES:
            raise BoardError(f"outputs={outputs!r}; allowed: {', '.join(protocol.OUTPUT_MODES)}")
        number, repeat = int(number), int(repeat)
        if not (1 <= number and 1 <= repeat and number * repeat <= MAX_RUNS):
            raise BoardError(f"number={number}, repeat={repeat}: need number, repeat >= 1 and "
                             f"number * repeat <= {MAX_RUNS}")
        program = Program.from_bytes(blob, source="program")
        state = self.loaded()
        check_hw(program, state.get("config"))
        timeout_s = float(timeout_s) if timeout_s and timeout_s > 0 else DEFAULT_TIMEOUT_S
        res = self.driver.run(program, number, repeat, timeout_s)
        names = list(res.outputs)
        described = [{"name": n, "nbytes": int(res.outputs[n].size)} for n in names]
        if outputs == "sha256":  # the caller needs to know what came out, not the bytes themselves
            for d in described:
                d["sha256"] = hashlib.sha256(res.outputs[d["name"]]).hexdigest()
        header = {"outputs": described,
                  "device_s": res.device_s, "call_s": res.call_s, "n_insns": res.n_insns,
                  "hw": program.hw.name, "bitstream_sha256": state.get("sha256"), "board": self.board.name,
                  "emulated": self.api.emulated}
        if outputs == "sha256":
            return header, b""
        return header, b"".join(res.outputs[n].tobytes() for n in names)

    def load_network(self, blob: bytes) -> dict[str, Any]:
        """Verify a .vtanet bundle against the loaded bitstream and load it, replacing this
        session's network (whose buffers are freed first)."""
        self._check_size("bundle", blob)
        state = self.loaded()
        if not state.get("config") or not state.get("sha256"):
            raise BoardError("the board's bitstream is unknown (none programmed): program the bundle's bitstream "
                             "first (codesign deploy HW --board ADDR)")
        if self.network is not None:
            self.network.close()
            self.network = None
        start = time.perf_counter()
        net = Network(bytes(blob), driver=self.driver, bitstream=(state["config"], state["sha256"]),
                      memory_bytes=self.opts.network_bytes, name="bundle")
        self.network = net
        return {"network": net.doc["name"], "hw": net.hw.name, "bytes": net.nbytes,
                "resident_bytes": net.resident_bytes, "load_s": time.perf_counter() - start,
                "steps": [{"name": s.name, "unit": s.unit, "predicted_ms": s.predicted_ms} for s in net.steps],
                "inputs": net.inputs, "outputs": net.outputs}

    def infer(self, request: bytes) -> tuple[dict[str, Any], bytes]:
        """One inference of the loaded network: the input's bytes in, the int8 outputs' out."""
        net = self.network
        if net is None:
            raise BoardError("no network loaded in this session: load_network first")
        self._check_size("input", request)
        head, payload = protocol.decode(request, "request", magic=protocol.REQUEST_MAGIC)
        dtype, shape = head.get("dtype"), head.get("shape")
        spec = net.inputs[0] if len(net.inputs) == 1 else None
        if spec is None:
            raise BoardError(f"the loaded network takes {len(net.inputs)} inputs; infer passes one")
        if dtype not in protocol.INFER_DTYPES:
            raise BoardError(f"input dtype {dtype!r}; allowed: {', '.join(protocol.INFER_DTYPES)}")
        if not isinstance(shape, list) or shape != list(spec["shape"]):
            raise BoardError(f"input shape {shape}, the network {net.doc['name']!r} takes {list(spec['shape'])}")
        want = int(np.prod(shape)) * np.dtype(dtype).itemsize
        if len(payload) != want:
            raise BoardError(f"input of {len(payload)} bytes; a {dtype} {tuple(shape)} input is {want} bytes")
        x = np.frombuffer(payload, dtype=dtype).reshape(shape)
        start = time.perf_counter()
        ys, times = net.run(x)
        run_ms = (time.perf_counter() - start) * 1e3
        ran = [s for s in net.steps if s.unit != "host"]
        header = {"outputs": [list(y.shape) for y in ys], "run_ms": round(run_ms, 6), "step_ms": [round(times[s.name], 6) for s in ran],
                  "device_ms": [round(net.last_device_ms.get(s.name, 0.0), 6) for s in ran]}
        return header, b"".join(np.ascontiguousarray(y).tobytes() for y in ys)

    def run_cached(self, request: bytes) -> tuple[dict[str, Any], bytes]:
        """`run` of a program blob sent as parts, some named by sha256 only (`protocol`)."""
        self._check_size("request", request)
        head, payload = protocol.decode(request, "request", magic=protocol.REQUEST_MAGIC)
        parts = head.get("parts")
        if not isinstance(parts, list) or not parts:
            raise BoardError("request: `parts` must be a non-empty list of {nbytes, sha256, inline}")
        sizes, chunks = [], [None] * len(parts)
        for i, part in enumerate(parts):
            part = part if isinstance(part, dict) else {}
            n, digest, inline = part.get("nbytes"), part.get("sha256"), part.get("inline")
            zipped = part.get("zlib")
            if not isinstance(n, int) or n < 0 or not (digest is None or protocol.is_sha256(digest)) \
                    or not isinstance(inline, bool) or (digest is None and not inline) \
                    or not (zipped is None or (inline and isinstance(zipped, int) and zipped >= 0)):
                raise BoardError(f"request: part {i} must be {{nbytes: int >= 0, sha256: 64 lowercase hex "
                                 "digits or null, inline: bool, zlib: compressed size (inline parts only)}; "
                                 "a part without sha256 must be inline")
            sizes.append(n)
        if sum(sizes) > self.opts.max_payload:  # the assembled program, like a `run` blob
            raise BoardError(f"program of {sum(sizes)} bytes exceeds this board's payload limit of "
                             f"{self.opts.max_payload} bytes (codesign board serve --max-payload)")
        # 1. the inline parts: each one that carries a digest must hash to it
        pos, fresh = 0, {}
        for i, part in enumerate(parts):
            if not part["inline"]:
                continue
            wire = part.get("zlib")
            wire = sizes[i] if wire is None else wire
            data = bytes(payload[pos:pos + wire])
            pos += wire
            if len(data) != wire:
                raise BoardError(f"request: part {i} says {wire} bytes but the payload ends after {len(data)}")
            if part.get("zlib") is not None:
                data = _inflate(data, sizes[i], f"request: part {i}")
            digest = part["sha256"]
            if digest is not None:
                got = hashlib.sha256(data).hexdigest()
                if got != digest:
                    raise BoardError(f"request: part {i} ({sizes[i]} bytes) hashes to sha256 {got}, not the "
                                     f"{digest} it was sent with (corrupted or mismatched); refused, nothing cached")
                fresh[digest] = data
            chunks[i] = data
        if pos != len(payload):
            raise BoardError(f"request: {len(payload) - pos} payload bytes beyond its inline parts")
        # 2. the parts named by digest: from this request, else from the cache
        missing, hits = [], 0
        for i, part in enumerate(parts):
            if part["inline"]:
                continue
            digest = part["sha256"]
            data = fresh.get(digest)
            if data is None:
                data = self.cache.get(digest)
                hits += data is not None
            if data is None:
                missing.append(digest)
            elif len(data) != sizes[i]:
                raise BoardError(f"request: part {i} says {sizes[i]} bytes, but sha256 {digest} names {len(data)}")
            chunks[i] = data
        if missing:
            raise CacheMiss(sorted(set(missing)))
        number, repeat = head.get("number", 1), head.get("repeat", 1)
        timeout_s, outputs = head.get("timeout_s", 0.0), head.get("outputs", "bytes")
        if not all(isinstance(v, int) for v in (number, repeat)) or not isinstance(timeout_s, (int, float)):
            raise BoardError("request: number and repeat must be integers, timeout_s a number")
        header, out = self.run(b"".join(chunks), number, repeat, timeout_s, str(outputs))
        # 3. only after a run that worked: keep the fresh parts (the reply says what went out)
        evicted: list[str] = []
        for digest, data in fresh.items():
            evicted += self.cache.put(digest, data)
        self.last_cache = {"hits": hits, "sent": len(fresh), "sent_bytes": len(payload), "evicted": evicted,
                           "held_bytes": self.cache.held_bytes, "limit_bytes": self.cache.limit_bytes}
        return {**header, "cache": self.last_cache}, out


def _inflate(data: bytes, nbytes: int, what: str) -> bytes:
    """zlib data that must inflate to exactly `nbytes` (inflating stops there: no zip bombs)."""
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data, nbytes) if nbytes else inflater.decompress(data, 1)
    except zlib.error as exc:
        raise BoardError(f"{what}: not zlib data ({exc})") from None
    if len(out) != nbytes or inflater.unconsumed_tail or inflater.unused_data or not inflater.eof:
        raise BoardError(f"{what}: zlib data does not inflate to exactly the {nbytes} bytes it declares")
    return out


def _emulated_api(hw: HwConfig, board: Board) -> PynqApi:
    # The emulator loads the numba simulator; a real board has no numba, so it is imported only
    # when --emulate asks for it (allow-listed in tests/test_structure.py).
    from codesign.board.emulated import EmulatedPynq

    return PynqApi(EmulatedPynq(hw, board))


def _log(line: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} codesign-board {line}", file=sys.stderr, flush=True)


def handle(service: BoardService, name: str, *args: Any) -> bytes:
    """Run one request; every outcome becomes a reply blob and one log line."""
    start = time.perf_counter()
    size = sum(len(a) for a in args if isinstance(a, (bytes, bytearray)))
    try:
        if name == protocol.INFO:
            reply = protocol.encode({"ok": True, **service.info()})
        elif name == protocol.PROGRAM:
            reply = protocol.encode({"ok": True, **service.program(bytes(args[0]), str(args[1]), str(args[2]))})
        elif name == protocol.LOAD_NETWORK:
            reply = protocol.encode({"ok": True, **service.load_network(args[0])})
        elif name == protocol.INFER:
            header, payload = service.infer(args[0])
            reply = protocol.encode({"ok": True, **header}, payload)
        else:
            if name == protocol.RUN_CACHED:
                header, payload = service.run_cached(args[0])
            else:
                header, payload = service.run(bytes(args[0]), int(args[1]), int(args[2]), float(args[3]))
            # server_s: the whole request on the board (decode, checks, driver call) before the reply
            reply = protocol.encode({"ok": True, **header, "server_s": time.perf_counter() - start}, payload)
        outcome = "ok"
        if name == protocol.RUN_CACHED:
            c = service.last_cache
            outcome += (f" parts: {c['hits']} cached, {c['sent']} sent ({c['sent_bytes']}B), {len(c['evicted'])} "
                        f"evicted, cache {c['held_bytes']}/{c['limit_bytes']}B")
    except CacheMiss as exc:
        reply, outcome = protocol.error(str(exc), "missing", missing=exc.missing), f"missing: {len(exc.missing)} part(s)"
    except BoardError as exc:
        kind = "timeout" if "did not signal done" in str(exc) else getattr(exc, "kind", "refused")
        reply, outcome = protocol.error(str(exc), kind), f"{kind}: {exc}"
    except CodesignError as exc:
        reply, outcome = protocol.error(str(exc), "refused"), f"refused: {exc}"
    except Exception as exc:  # noqa: BLE001 - a device failure must reach the client, not kill the session
        msg = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        reply, outcome = protocol.error(msg, "runtime"), f"runtime: {msg}"
    label = "run" if name == protocol.RUN_CACHED else name.rsplit(".", 1)[-1]  # one word per measurement
    _log(f"{label} in={size}B out={len(reply)}B {1e3 * (time.perf_counter() - start):.1f}ms {outcome}")
    return reply


def expose_only(keep: set[str]) -> None:
    """Remove every global function of this process except `keep`."""
    import tvm_ffi  # tvm's FFI registry; heavy, board server only

    remove = tvm_ffi.get_global_func("ffi.FunctionRemoveGlobal")
    for name in list(tvm_ffi.registry.list_global_func_names()):
        if name not in keep and name != "ffi.FunctionRemoveGlobal":
            remove(name)
    remove("ffi.FunctionRemoveGlobal")


def register(service: BoardService) -> None:
    import tvm_ffi  # tvm's FFI registry; heavy, board server only

    for name in protocol.FUNCTIONS:
        tvm_ffi.register_global_func(name, functools.partial(handle, service, name), override=True)


def _session_env(opts: ServeOptions, load_library: Any = None, work_path: Any = None) -> None:
    """Replaces tvm's `_server_env` in each session process: our functions, nothing else."""
    from tvm.rpc import server as tvm_server  # heavy; board server only

    # forked from the serving process: its Ctrl-C / SIGTERM handlers (which only set its stop event)
    # must not keep a session alive after the server is told to stop
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    state = tvm_server.PopenRPCServerState.current  # the listener this session was forked from
    register(BoardService(opts, port=getattr(state, "port", None)))
    expose_only(set(protocol.FUNCTIONS) | {protocol.SESSION_CONSTRUCTOR})


def init_server(opts_json: str) -> None:
    """Runs in the listener process before it accepts sessions (tvm's `server_init_callback`)."""
    from tvm.rpc import server as tvm_server  # heavy; board server only

    opts = ServeOptions(**json.loads(opts_json))
    service = BoardService(opts)  # fails early (no pynq, bad board) instead of in every session
    if service.emulated_hw is not None:
        _warm_emulator(service)
    tvm_server._server_env = functools.partial(_session_env, opts)
    _log(f"serving {service.board.name} ({'emulated ' + service.emulated_hw.name if service.emulated_hw else 'pynq ' + service.api.version}), "
         f"functions {', '.join(protocol.FUNCTIONS)}, max payload {opts.max_payload} B, "
         f"cache {opts.cache_bytes} B per session, state {opts.state_dir}")


def _warm_emulator(service: BoardService) -> None:
    """Load the simulator's compiled kernels once in the listener, so every forked session has them."""
    b = ProgramBuilder(service.emulated_hw)
    b.finish()
    service.driver.run(b.build())


class BoardServer:
    """A running board server in this process: tvm.rpc's own listener loop on a thread, each client
    session a forked child of this process (tvm's `_listen_loop` and `_serving`, the protocol as
    `tvm.rpc.Server` speaks it). `tvm.rpc.Server` would run the listener in a second interpreter that
    imports all of tvm (and torch) again: ~5 s more per board start on a 2-core host. `stop()` ends
    the sessions; the listener thread ends with the process."""

    def __init__(self, opts: ServeOptions, host_given: bool = False) -> None:
        lean_tvm()
        from tvm.rpc import server as tvm_server  # heavy; board server only

        check_bind(opts, host_given)
        check_setup(opts)
        if not opts.state_dir:
            opts = ServeOptions(**{**asdict(opts), "state_dir": tempfile.mkdtemp(prefix="codesign-board-")})
        self.opts = opts
        tracker = parse_addr(opts.tracker, "--tracker") if opts.tracker else None
        tvm_server.logger.setLevel(logging.ERROR)  # tvm.rpc.Server(silent=True)
        init_server(json.dumps(asdict(opts)))
        self._sock, self.port = _listen_socket(opts.host, opts.port, opts.port_end)
        tvm_server.PopenRPCServerState.current = self  # what `_session_env` reads the port from
        self._listener = threading.Thread(target=tvm_server._listen_loop, name="codesign-board-listener", daemon=True,
                                          args=(self._sock, self.port, opts.key, tracker, None, opts.custom_addr))
        self._listener.start()

    @property
    def addr(self) -> str:
        return f"{self.opts.host}:{self.port}"

    def stop(self) -> None:
        """End every session (forked children of this process); the daemon listener thread ends with
        the process, its socket closed by the OS."""
        for child in multiprocessing.active_children():
            child.terminate()
            child.join(5)


def _listen_socket(host: str, port: int, port_end: int) -> tuple[socket.socket, int]:
    """A listening socket on the first free port of [port, port_end), as tvm's server binds it."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    for candidate in range(port, port_end):
        try:
            sock.bind((host, candidate))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                continue
            sock.close()
            raise BoardError(f"cannot bind {host}:{candidate}: {exc.strerror or exc}") from exc
        sock.listen(1)
        return sock, candidate
    sock.close()
    raise BoardError(f"--port {port}..{port_end - 1}: every port is in use on {host}; pick a free --port "
                     "(or a wider --port-end)")


__all__ = ["ServeOptions", "BoardService", "CacheMiss", "BoardServer", "check_bind", "check_setup", "parse_addr", "handle", "expose_only"]
