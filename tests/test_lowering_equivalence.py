"""The lowering is a regression-tested rewrite: for every valid config of 12 layers x 4 hardware
configs it emits exactly the bytes and cycles the compiler emitted before the mapping/lowering
split (`tests/data/lowering_digests.json`, written from that compiler by running this file as a
script at commit c72c3cb; rerun it only for an intended change of the programs).

Per config the digest covers the encoded instruction stream and micro-op array of the full
program (`compile_insns`), the block form the timing fast path times (`compile_blocks`: rows,
block bounds, class of every pair, periods, instruction count) where the template has one, and
the cycles `measure` reports (the fast path; tests/test_timing_fast.py ties it to the full
program's instruction-level timing)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from codesign.evaluate.compiler import compile_insns
from codesign.evaluate.run import measure
from codesign.hw.config import HwConfig
from codesign.schedule import get_space
from codesign.vta import isa, timing
from codesign.workloads import Conv2D, Conv2DTranspose, Dense

DIGESTS = Path(__file__).parent / "data" / "lowering_digests.json"
# The cycles pin the timing model, not the fitted default: they are the model's under the parameters
# shipped when the digests were written (the default has been refit on more data since).
PARAMS = timing.TimingParams.from_dict(
    json.loads((Path(__file__).parent / "data" / "pinned_timing_params.json").read_text())["params"])

# BATCH 1/2/4 x BLOCK 8/16; the last has a 128-uop buffer, so the micro-op ring evicts and reloads.
HWS = {
    "1x16": HwConfig.resolve("pynq_1x16"),
    "4x8": HwConfig.resolve("pynq_4x8"),
    "2x16": HwConfig.resolve("pynq_1x16").with_(LOG_BATCH=1),
    "1x8_uop128": HwConfig.resolve("pynq_4x8").with_(LOG_BATCH=0, LOG_UOP_BUFF_SIZE=9, LOG_INP_BUFF_SIZE=13,
                                                       LOG_WGT_BUFF_SIZE=16, LOG_ACC_BUFF_SIZE=16),
}


def layers(batch: int) -> list:
    """12 small layers (batch = 2 batch blocks where it varies tile_b) covering 3x3 s1/s2 padded,
    strided and unstrided 1x1, 5x5 p2, odd sizes, dense, grouped and transposed convs."""
    b2 = 2 * batch
    return [
        Conv2D(batch, 32, 8, 8, 32, 3, 3, 1, 1),
        Conv2D(batch, 32, 9, 9, 32, 3, 3, 2, 1),
        Conv2D(b2, 32, 8, 8, 64, 1, 1, 2, 0),
        Conv2D(b2, 64, 6, 6, 32, 1, 1, 1, 0),
        Conv2D(batch, 16, 10, 10, 32, 5, 5, 1, 2),
        Conv2D(batch, 64, 7, 7, 64, 3, 3, 1, 1),
        Dense(batch, 256, 128),
        Dense(b2, 128, 64),
        Conv2D(batch, 64, 6, 6, 32, 3, 3, 1, 1, groups=2),
        Conv2D(batch, 64, 4, 4, 64, 1, 1, 1, 0, groups=2),
        Conv2DTranspose(batch, 32, 4, 4, 16, 4, 4, 2, 1),
        Conv2DTranspose(batch, 16, 3, 3, 32, 3, 3, 1, 1),
    ]


def _h(*parts: bytes) -> str:
    d = hashlib.sha256()
    for p in parts:
        d.update(len(p).to_bytes(8, "little"))
        d.update(p)
    return d.hexdigest()[:20]


def digest(layer, config, hw: HwConfig) -> list:
    """[full program bytes, block form bytes or None, cycles] of one config."""
    from codesign.evaluate.blocks import compile_blocks

    comp = compile_insns(layer, config, hw)
    full = _h(isa.encode_insns(comp.insns, hw), isa.encode_uops(comp.uops, hw))
    blocks = None
    if layer.template in ("conv2d_packed.vta", "dense_packed.vta"):  # the block form of the old compiler
        b = compile_blocks(layer, config, hw)
        blocks = _h(isa.encode_insns(b.rows, hw), b.block_start.tobytes(), b.pair_class.tobytes(),
                    b.periods.tobytes(), int(b.n_insns).to_bytes(8, "little"))
    return [full, blocks, int(measure(layer, config, hw, PARAMS).cycles)]


def compute(hw_name: str) -> dict[str, dict[str, list]]:
    hw = HWS[hw_name]
    out: dict[str, dict[str, list]] = {}
    for layer in layers(hw.batch):
        space = get_space(layer, hw)
        out[layer.name] = {str(int(i)): digest(layer, space.get(int(i)), hw) for i in space.valid_indices()}
    return out


@pytest.mark.parametrize("hw_name", list(HWS))
def test_lowering_emits_the_reference_bytes_and_cycles(hw_name):
    ref = json.loads(DIGESTS.read_text())[hw_name]
    got = compute(hw_name)
    assert len(got) == 12 and all(got.values())  # every layer has valid configs
    assert sum(len(v) for v in got.values()) >= 100
    assert got.keys() == ref.keys()
    for name, configs in ref.items():
        assert got[name].keys() == configs.keys(), name
        for index, want in configs.items():
            assert got[name][index] == want, (hw_name, name, index)


if __name__ == "__main__":  # regenerate the reference (only for an intended change)
    data = {name: compute(name) for name in HWS}
    DIGESTS.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n")
    print({k: sum(len(v) for v in d.values()) for k, d in data.items()}, file=sys.stderr)
