"""A network as layers with their repeat counts (`Workload`), plus the compute ops that have no
VTA layer form (`CpuOp`: e.g. attention matmuls of two activations). Networks come from PyTorch
(`codesign.workloads.torch_import.from_torch`; the built-in zoo is `codesign.workloads.zoo`).

Batch convention: workloads are defined for one sample (`batch=1`);
`with_batch(n)` scales every layer's batch, `for_hw(hw)` picks the smallest batch every layer of
which is a multiple of the hardware's BATCH (so a 4x8 config runs ResNet-18 at batch 4), and
per-sample latency is latency / `Workload.batch`.
"""

from __future__ import annotations

from dataclasses import dataclass

from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.workloads.layers import Layer, parse_layer


@dataclass(frozen=True)
class CpuOp:
    """A compute op of a network that no VTA template expresses; it runs on the CPU."""

    name: str     # e.g. `matmul_8x16x64_16`
    macs: int     # multiply-accumulates at the workload's batch
    reason: str

    def with_batch_ratio(self, num: int, den: int) -> CpuOp:
        return CpuOp(self.name, self.macs * num // den, self.reason)


@dataclass(frozen=True)
class Workload:
    """A network as (layer, count) entries; `batch` = samples per run (layer batches include it).
    `cpu_ops` are (op, count) of compute ops no VTA layer expresses (reported, never offloaded)."""

    name: str
    entries: tuple[tuple[Layer, int], ...]
    batch: int = 1
    description: str = ""
    cpu_ops: tuple[tuple[CpuOp, int], ...] = ()

    def __post_init__(self) -> None:
        entries = tuple((parse_layer(layer), int(count)) for layer, count in self.entries)
        if not entries:
            raise ConfigError(f"workload {self.name!r}: no layers")
        for layer, count in entries:
            if count < 1:
                raise ConfigError(f"workload {self.name!r}: count of {layer.name} is {count}, must be >= 1")
            if layer.batch % self.batch:
                raise ConfigError(f"workload {self.name!r}: layer {layer.name} batch {layer.batch} is not a "
                                  f"multiple of the workload batch {self.batch}")
        object.__setattr__(self, "entries", entries)

    @property
    def layers(self) -> list[Layer]:
        return [layer for layer, _ in self.entries]

    def unique_layers(self) -> list[tuple[Layer, int]]:
        """Distinct layers in first-seen order with their summed counts."""
        counts: dict[Layer, int] = {}
        for layer, count in self.entries:
            counts[layer] = counts.get(layer, 0) + count
        return list(counts.items())

    @property
    def total_macs(self) -> int:
        return sum(layer.macs * count for layer, count in self.entries)

    def with_batch(self, n: int) -> Workload:
        """The same network run on `n` samples at once."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(f"workload batch={n!r}: must be an integer >= 1")
        if n == self.batch:
            return self
        entries = tuple((layer.with_batch(layer.batch // self.batch * n), count) for layer, count in self.entries)
        ops = tuple((op.with_batch_ratio(n, self.batch), count) for op, count in self.cpu_ops)
        return Workload(self.name, entries, n, self.description, ops)

    def for_hw(self, hw: HwConfig) -> Workload:
        """This workload at the smallest batch >= its own that the config's BATCH divides."""
        n = self.batch
        while any((layer.batch // self.batch * n) % hw.batch for layer in self.layers):
            n += 1
        return self.with_batch(n)
