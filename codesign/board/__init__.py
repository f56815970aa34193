"""PYNQ boards: the VTA driver over the pynq API (`driver`), an emulated PYNQ over the simulator
for tests (`emulated`), the tvm.rpc board server (`server`) and its client (`client`).
See docs/board.md."""
