"""The `vta` family's programs are pinned like the template family's (test_lowering_equivalence.py):
for 40 sampled valid configs (seed 0; the test checks 12 of them) of 4 layers x 2 hardware configs, the full program's bytes
(`compile_insns`), the block form the timing fast path times (`compile_blocks`) and the cycles
`measure` reports equal `tests/data/vta_family_digests.json`, written by running this file as a
script before the fast path was reworked (rerun it only for an intended change of the programs).

Each config is compiled from a fresh process state per layer (caches cleared), then once more with
the caches warm, so a cache keyed on less than what a program depends on shows up here."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from test_lowering_equivalence import _h

from codesign.evaluate.blocks import compile_blocks
from codesign.evaluate.compiler import compile_insns
from codesign.evaluate.run import measure
from codesign.hw.config import HwConfig
from codesign.schedule import get_space
from codesign.schedule.vta import producer
from codesign.tune.env import sample_valid_pool
from codesign.vta import isa, timing
from codesign.workloads import Conv2D

DIGESTS = Path(__file__).parent / "data" / "vta_family_digests.json"
PARAMS = timing.TimingParams.from_dict(
    json.loads((Path(__file__).parent / "data" / "pinned_timing_params.json").read_text())["params"])
HWS = ("pynq_1x16", "pynq_4x8")


def layers(n: int) -> tuple[Conv2D, ...]:
    """3x3 s1 and s2 (odd input: edge tiles), 1x1, 5x5 p2 with channels that tile unevenly."""
    return (Conv2D(n, 64, 14, 14, 64, 3, 3, 1, 1), Conv2D(n, 64, 15, 15, 128, 3, 3, 2, 1),
            Conv2D(n, 128, 7, 7, 64, 1, 1, 1, 0), Conv2D(n, 32, 10, 10, 48, 5, 5, 1, 2))


def digest(layer, config, hw: HwConfig) -> list:
    comp = compile_insns(layer, config, hw)
    b = compile_blocks(layer, config, hw)
    return [_h(isa.encode_insns(comp.insns, hw), isa.encode_uops(comp.uops, hw)),
            _h(isa.encode_insns(b.rows, hw), b.block_start.tobytes(), b.pair_class.tobytes(),
               b.periods.tobytes(), int(b.n_insns).to_bytes(8, "little")),
            int(measure(layer, config, hw, PARAMS).cycles)]


def compute(hw_name: str, check: int = 40) -> dict[str, dict[str, list]]:
    """Digests of the first `check` of the 40 sampled configs per layer (the same draw)."""
    hw = HwConfig.resolve(hw_name)
    out: dict[str, dict[str, list]] = {}
    for layer in layers(hw.batch):
        get_space.cache_clear()
        producer.row_mapping.cache_clear()
        space = get_space(layer, hw, "vta")
        idx = sample_valid_pool(space, 40, np.random.default_rng(0))
        configs = [space.get(int(i)) for i in idx[:check]]
        first = {str(c.index): digest(layer, c, hw) for c in configs}
        again = {str(c.index): digest(layer, c, hw) for c in configs}
        assert first == again, layer.name
        out[layer.name] = first
    return out


@pytest.mark.parametrize("hw_name", HWS)
def test_vta_family_emits_the_reference_bytes_and_cycles(hw_name):
    """12 of the 40 pinned configs per layer: every one checked costs ~50 s of the suite."""
    ref = json.loads(DIGESTS.read_text())[hw_name]
    got = compute(hw_name, check=12)
    assert got.keys() == ref.keys()
    for name, configs in got.items():
        assert len(configs) == 12 and all(configs[k] == ref[name][k] for k in configs), (hw_name, name)


if __name__ == "__main__":  # regenerate the reference (only for an intended change)
    data = {name: compute(name) for name in HWS}
    DIGESTS.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n")
    print({k: sum(len(v) for v in d.values()) for k, d in data.items()}, file=sys.stderr)
