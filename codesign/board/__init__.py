"""PYNQ boards: the VTA driver over the pynq API (`driver`), an emulated PYNQ over the simulator
for tests (`emulated`), the tvm.rpc board server (`server`) and its client (`client`).
`Network`: a deployed network (`.vtanet` bundle) run on the board. See docs/board.md."""

from codesign.board.network import Network

__all__ = ["Network"]
