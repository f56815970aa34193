"""Deploy a config's bitstream to a PYNQ board and check it, and run layers on boards
(`codesign deploy`, `codesign run --board/--tracker`).

deploy: the catalog entry for (config, the board's type) -> download into VTA's cache with sha256
and size checked here -> upload; the board checks sha256 and part again and programs it -> a smoke
test: a dense and a conv2d layer compiled for the config, run on the board, compared bit for bit
with NumPy. Prints device times and "ok", or which check failed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from codesign.bitstream import catalog, fetch
from codesign.board.client import BoardClient
from codesign.errors import BoardError, ConfigError
from codesign.evaluate.compiler import compile_layer
from codesign.evaluate.fused import compile_fused
from codesign.evaluate.pool import compile_pool
from codesign.evaluate.run import random_inputs
from codesign.hw.config import HwConfig
from codesign.place import Step
from codesign.schedule import ScheduleSpace
from codesign.workloads import Conv2D, parse_layer

REPEAT = 3


def connect(board: str | None, tracker: str | None, key: str | None) -> BoardClient:
    """A client for `--board HOST:PORT` or a free board from `--tracker HOST:PORT --key KEY`."""
    if bool(board) == bool(tracker):
        raise ConfigError("say which board: --board HOST:PORT, or --tracker HOST:PORT --key KEY")
    if tracker:
        if not key:
            raise ConfigError("--tracker needs --key (the board type the servers registered, e.g. pynq)")
        return BoardClient.from_tracker(tracker, key)
    return BoardClient(str(board))


def run_on_board(client: BoardClient, program: Any, layer: Any, hw: HwConfig, repeat: int = REPEAT
                 ) -> tuple[np.ndarray, float, float]:
    """(int8 output, median device seconds, call seconds) of one compiled layer on the board."""
    reply = client.run(program.to_bytes(), number=1, repeat=repeat)
    if "output" not in reply.outputs:
        raise BoardError(f"board {client.name} returned no 'output' region (got {', '.join(reply.outputs)})")
    out = layer.unpack_output(np.asarray(reply.outputs["output"]).view(np.int8), hw)
    return out, reply.device_median_s, reply.call_s


def board_executor(client: BoardClient, repeat: int = REPEAT) -> Callable[..., tuple[np.ndarray, float, float]]:
    """A `codesign.netrun` executor that runs every layer on `client`'s board."""

    def run(layer: Any, config: Any, hw: HwConfig, data: np.ndarray, weight: np.ndarray):
        program = compile_layer(layer, config, hw, data=data, weight=weight)
        return run_on_board(client, program, layer, hw, repeat)

    return run


def fused_board_executor(client: BoardClient, repeat: int = REPEAT) -> Callable[..., tuple[np.ndarray, float, float]]:
    """A `codesign.netrun.network` executor: each VTA step of a placed network (a conv/dense with
    its fused epilogue) compiled and run on `client`'s board."""

    def run(step: Step, config: Any, hw: HwConfig, x: np.ndarray, w: np.ndarray | None, bias: np.ndarray | None,
            residual: np.ndarray | None):
        pool = step.pool
        if pool is not None:  # a pool on VTA's ALU; its output has a 1x1 conv's packed layout
            program = compile_pool(pool, hw, x)
            out_layout = Conv2D(pool.batch, pool.channels, pool.out_h, pool.out_w, pool.channels, 1, 1, 1, 0)
            return run_on_board(client, program, out_layout, hw, repeat)
        program = compile_fused(step.layer, config, hw, step.epilogue, x, w, bias, residual)
        return run_on_board(client, program, step.layer, hw, repeat)

    return run


def smoke_layers(hw: HwConfig) -> list[Any]:
    """A small dense and a small conv2d layer that fit `hw` (shapes multiples of its blocks)."""
    b, ci, co = hw.batch, hw.block_in, hw.block_out
    return [parse_layer(f"dense:{b},{2 * ci},{2 * co}"), parse_layer(f"conv2d:{b},{2 * ci},8,8,{2 * co},3,3,1,1")]


@dataclass(frozen=True)
class SmokeRow:
    layer: str
    index: int
    device_s: float
    call_s: float
    ok: bool
    mismatches: int


def smoke_test(client: BoardClient, hw: HwConfig) -> list[SmokeRow]:
    rows = []
    for layer in smoke_layers(hw):
        space = ScheduleSpace(layer, hw)
        config = space.get(int(space.valid_indices()[0]))
        data, weight = random_inputs(layer, seed=1)
        program = compile_layer(layer, config, hw, data=data, weight=weight)
        out, dev, call = run_on_board(client, program, layer, hw)
        bad = int(np.count_nonzero(out != layer.reference(data, weight)))
        rows.append(SmokeRow(layer.name, int(config.index), dev, call, bad == 0, bad))
    return rows


def deploy(client: BoardClient, hw: HwConfig, user_catalog: Path | None = None,
           on_step: Callable[[str], None] | None = None) -> dict[str, Any]:
    say = on_step or (lambda _s: None)
    info = client.info()
    board = str(info.get("board"))
    hits = catalog.find(catalog.load(user_catalog), hw, board)
    if not hits:
        raise ConfigError(f"no bitstream for {hw.name} on {board} in the catalog; build one: "
                          f"codesign bitstream build {hw.name} --board {board} --vta-hw PATH")
    entry = hits[0]
    path, downloaded = fetch.fetch(entry)
    say(f"{'downloaded' if downloaded else 'cached'} {path} (sha256 {entry.sha256[:16]}.. verified)")
    state = client.program_file(path, hw.name)
    loaded = state.get("bitstream", state)
    if loaded.get("sha256") != entry.sha256:
        raise BoardError(f"board {client.name} reports sha256 {loaded.get('sha256')} after programming, "
                         f"expected {entry.sha256}")
    say(f"programmed {client.name} ({board}{', emulated' if info.get('emulated') else ''}) with {hw.name}")
    rows = smoke_test(client, hw)
    return {"board": board, "addr": client.name, "emulated": bool(info.get("emulated")), "hw": hw.name,
            "bitstream": {"path": str(path), "sha256": entry.sha256, "hw_ver": entry.hw_ver, "source": entry.source},
            "smoke": [r.__dict__ for r in rows], "ok": all(r.ok for r in rows)}


def check_loaded(client: BoardClient, hw: HwConfig) -> dict[str, Any]:
    """The board must already run `hw` (deploy first)."""
    info = client.info()
    loaded = info.get("bitstream") or {}
    if loaded.get("config") != hw.name:
        raise BoardError(f"board {client.name} runs {loaded.get('config') or 'no VTA bitstream'}, not {hw.name}; "
                         f"deploy first: codesign deploy {hw.name} --board ADDR")
    return info


__all__ = ["connect", "deploy", "smoke_test", "smoke_layers", "board_executor", "fused_board_executor", "run_on_board", "check_loaded"]
