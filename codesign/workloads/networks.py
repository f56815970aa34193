"""Built-in workloads: the layers VTA offloads for a network, each with its repeat count.

Batch convention (team contract, "Batch"): workloads are defined for one sample (`batch=1`);
`with_batch(n)` scales every layer's batch, `for_hw(hw)` picks the smallest batch every layer of
which is a multiple of the hardware's BATCH (so a 4x8 config runs ResNet-18 at batch 4), and
per-sample latency is latency / `Workload.batch`.
"""

from __future__ import annotations

from dataclasses import dataclass

from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.workloads.layers import Conv2D, Dense, Layer, parse_layer


@dataclass(frozen=True)
class Workload:
    """A network as (layer, count) entries; `batch` = samples per run (layer batches include it)."""

    name: str
    entries: tuple[tuple[Layer, int], ...]
    batch: int = 1
    description: str = ""

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
        return Workload(self.name, entries, n, self.description)

    def for_hw(self, hw: HwConfig) -> Workload:
        """This workload at the smallest batch >= its own that the config's BATCH divides."""
        n = self.batch
        while any((layer.batch // self.batch * n) % hw.batch for layer in self.layers):
            n += 1
        return self.with_batch(n)


def _conv(hw_in: int, c: int, o: int, k: int, s: int, p: int) -> Conv2D:
    return Conv2D(1, c, hw_in, hw_in, o, k, k, s, p)


def resnet18() -> Workload:
    # The conv2d layers VTA offloads for ResNet-18 at 224x224 (issue 3 §1); the 7x7 stem (3 input
    # channels) stays on the CPU. The first 10 entries are the 10 layers of the tophub records.
    entries = (
        (_conv(56, 64, 64, 3, 1, 1), 4),
        (_conv(56, 64, 128, 3, 2, 1), 1),
        (_conv(56, 64, 128, 1, 2, 0), 1),
        (_conv(28, 128, 128, 3, 1, 1), 3),
        (_conv(28, 128, 256, 3, 2, 1), 1),
        (_conv(28, 128, 256, 1, 2, 0), 1),
        (_conv(14, 256, 256, 3, 1, 1), 3),
        (_conv(14, 256, 512, 3, 2, 1), 1),
        (_conv(14, 256, 512, 1, 2, 0), 1),
        (_conv(7, 512, 512, 3, 1, 1), 3),
    )
    return Workload("resnet18", entries, 1, "ResNet-18 conv2d layers offloaded to VTA (batch 1, 224x224)")


def lstm() -> Workload:
    # One LSTM cell step, hidden 256, input 256: the four gates as ONE fused GEMM
    # [x; h] (512) -> [i, f, g, o] (4*256 = 1024), the usual fused formulation. Batch 1 sequence.
    return Workload("lstm", ((Dense(1, 512, 1024), 1),), 1,
                    "LSTM cell step, hidden 256, input 256: fused gate GEMM 512 -> 1024")


def transformer() -> Workload:
    # One transformer encoder block (d_model 512, 8 heads, FFN 2048) on a 16-token sequence; the
    # GEMM batch is the token count. Only the weight GEMMs are offloaded: Q, K, V and output
    # projections (512 -> 512, x4), FFN up (512 -> 2048) and down (2048 -> 512). The attention
    # score/context matmuls multiply two activations, which dense_packed.vta does not express.
    tokens = 16
    entries = (
        (Dense(tokens, 512, 512), 4),
        (Dense(tokens, 512, 2048), 1),
        (Dense(tokens, 2048, 512), 1),
    )
    return Workload("transformer", entries, 1,
                    "transformer encoder block projections, 16 tokens, d_model 512, FFN 2048")


# Registry of the built-in workloads (immutable, so shared instances are safe).
WORKLOADS: dict[str, Workload] = {
    "resnet18": resnet18(),
    "lstm": lstm(),
    "transformer": transformer(),
}


def get_workload(name: str) -> Workload:
    """A built-in workload by name (case-insensitive)."""
    key = str(name).strip().lower().replace("-", "").replace("_", "")
    for known, workload in WORKLOADS.items():
        if known.replace("_", "") == key:
            return workload
    raise ConfigError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}")
