"""The board server: apache-tvm's `tvm.rpc` server whose sessions expose this project's three
functions and nothing else (`codesign board serve`).

- `codesign.board.info()`: board, FPGA part, pynq version, loaded bitstream (config, sha256),
  emulated or not, codesign version, payload limit.
- `codesign.board.program(bitstream, sha256, config)`: verifies the checksum, the .bit header and
  its FPGA die against the board's part, then downloads it.
- `codesign.board.run(program_blob, number, repeat, timeout_s)`: runs a `Program` blob (CRC
  checked, compiled for the loaded config) with the driver; returns outputs, device and call times.

Security: tvm's server would let any client upload and load shared libraries (arbitrary code).
Here every session removes ALL global functions except the three above and the session
constructor the RPC protocol needs, before serving -- so `upload`, `load_module`, remote device
memory and every other TVM function are unknown to clients. Requests above `max_payload` bytes are
refused, replies are JSON + raw bytes (`protocol`), nothing is unpickled, and the server binds
127.0.0.1 unless told otherwise. One log line per request goes to stderr.

Process layout (tvm's): the listener runs in tvm's Popen worker; each client session is a forked
child of it. What must outlive a session (which bitstream is loaded) lives in `state_dir`.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import socket
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from codesign import __version__
from codesign.bitstream.bitfile import die_of, parse_header
from codesign.board import protocol
from codesign.board.driver import DEFAULT_TIMEOUT_S, PynqApi, VTADriver, check_hw
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
    """Check the board, the emulated config and pynq here, in the caller's process: inside tvm's
    server process a failure would reach the user as that process's whole traceback."""
    Board.named(opts.board)
    if opts.emulate:
        HwConfig.resolve(opts.emulate)
    elif importlib.util.find_spec("pynq") is None:
        PynqApi.real()  # raises the one-line "pynq is not installed" error without importing pynq


class BoardService:
    """The three functions, as plain Python (the RPC layer only adds encoding and logging)."""

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
                "max_payload": self.opts.max_payload, "functions": list(protocol.FUNCTIONS)}

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

    def run(self, blob: bytes, number: int, repeat: int, timeout_s: float) -> tuple[dict[str, Any], bytes]:
        self._check_size("program", blob)
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
        header = {"outputs": [{"name": n, "nbytes": int(res.outputs[n].size)} for n in names],
                  "device_s": res.device_s, "call_s": res.call_s, "n_insns": res.n_insns,
                  "hw": program.hw.name, "bitstream_sha256": state.get("sha256"), "board": self.board.name,
                  "emulated": self.api.emulated}
        return header, b"".join(res.outputs[n].tobytes() for n in names)


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
        else:
            header, payload = service.run(bytes(args[0]), int(args[1]), int(args[2]), float(args[3]))
            # server_s: the whole request on the board (decode, checks, driver call) before the reply
            reply = protocol.encode({"ok": True, **header, "server_s": time.perf_counter() - start}, payload)
        outcome = "ok"
    except BoardError as exc:
        kind = "timeout" if "did not signal done" in str(exc) else getattr(exc, "kind", "refused")
        reply, outcome = protocol.error(str(exc), kind), f"{kind}: {exc}"
    except CodesignError as exc:
        reply, outcome = protocol.error(str(exc), "refused"), f"refused: {exc}"
    except Exception as exc:  # noqa: BLE001 - a device failure must reach the client, not kill the session
        msg = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        reply, outcome = protocol.error(msg, "runtime"), f"runtime: {msg}"
    _log(f"{name.rsplit('.', 1)[-1]} in={size}B out={len(reply)}B {1e3 * (time.perf_counter() - start):.1f}ms {outcome}")
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

    state = tvm_server.PopenRPCServerState.current  # the listener this session was forked from
    register(BoardService(opts, port=getattr(state, "port", None)))
    expose_only(set(protocol.FUNCTIONS) | {protocol.SESSION_CONSTRUCTOR})


def init_server(opts_json: str) -> None:
    """tvm's `server_init_callback`: runs in the listener process before it accepts sessions."""
    from tvm.rpc import server as tvm_server  # heavy; board server only

    opts = ServeOptions(**json.loads(opts_json))
    service = BoardService(opts)  # fails early (no pynq, bad board) instead of in every session
    if service.emulated_hw is not None:
        _warm_emulator(service)
    tvm_server._server_env = functools.partial(_session_env, opts)
    _log(f"serving {service.board.name} ({'emulated ' + service.emulated_hw.name if service.emulated_hw else 'pynq ' + service.api.version}), "
         f"functions {', '.join(protocol.FUNCTIONS)}, max payload {opts.max_payload} B, state {opts.state_dir}")


def _warm_emulator(service: BoardService) -> None:
    """Load the simulator's compiled kernels once in the listener, so every forked session has them."""
    b = ProgramBuilder(service.emulated_hw)
    b.finish()
    service.driver.run(b.build())


class BoardServer:
    """A running board server (tvm.rpc.Server in its own process). `stop()` ends it."""

    def __init__(self, opts: ServeOptions, host_given: bool = False) -> None:
        import tvm.rpc  # heavy; board server only

        check_bind(opts, host_given)
        check_setup(opts)
        if not opts.state_dir:
            opts = ServeOptions(**{**asdict(opts), "state_dir": tempfile.mkdtemp(prefix="codesign-board-")})
        self.opts = opts
        tracker = parse_addr(opts.tracker, "--tracker") if opts.tracker else None
        self.server = tvm.rpc.Server(opts.host, opts.port, opts.port_end, tracker_addr=tracker, key=opts.key,
                                     custom_addr=opts.custom_addr, silent=True,
                                     server_init_callback=functools.partial(init_server, json.dumps(asdict(opts))))
        self.port = int(self.server.port)

    @property
    def addr(self) -> str:
        return f"{self.opts.host}:{self.port}"

    def stop(self) -> None:
        if self.server is not None:
            self.server.terminate()
            self.server = None


__all__ = ["ServeOptions", "BoardService", "BoardServer", "check_bind", "check_setup", "parse_addr", "handle", "expose_only"]
