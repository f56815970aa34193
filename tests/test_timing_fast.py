"""The timing fast path (`measure_seconds` = `blocks.compile_blocks` + `timing.time_blocks`)
gives exactly what the instruction-level model gives on the full program (`compile_insns` +
`time_program`): same cycles, same seconds, on every valid config of 10 layers x 3 hardware
configs (one of them with a small micro-op buffer, so kernels are evicted and reloaded)."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.evaluate.blocks import compile_blocks
from codesign.evaluate.compiler import compile_insns
from codesign.evaluate.run import layer_io_bytes, measure_seconds
from codesign.hw.config import HwConfig
from codesign.schedule import get_space
from codesign.vta import isa, timing
from codesign.workloads import Conv2D, Dense

# Small enough that timing every full program stays quick, varied enough to cover padding on
# both axes, strides, 1x1 kernels, virtual threads over h and co, and dense.
LAYERS = [
    Conv2D(1, 64, 14, 14, 64, 3, 3, 1, 1),
    Conv2D(1, 64, 14, 14, 128, 3, 3, 2, 1),
    Conv2D(1, 64, 14, 14, 128, 1, 1, 2, 0),
    Conv2D(1, 128, 7, 7, 128, 3, 3, 1, 1),
    Conv2D(1, 32, 16, 16, 32, 3, 3, 1, 1),
    Conv2D(1, 32, 16, 16, 64, 1, 1, 1, 0),
    Conv2D(1, 16, 28, 28, 32, 3, 3, 2, 1),
    Conv2D(1, 32, 8, 8, 64, 3, 3, 1, 1),
    Conv2D(1, 32, 12, 12, 32, 5, 5, 1, 2),
    Dense(1, 256, 128),
]
HWS = [HwConfig.resolve("pynq_1x16"), HwConfig.resolve("pynq_4x8"),
       HwConfig.resolve("pynq_1x16").with_(LOG_UOP_BUFF_SIZE=9)]  # 128 uops: the ring evicts


def _layer(layer, hw):
    """The layer with its batch scaled to the config's BATCH (4x8 packs 4 images)."""
    if hw.batch == 1:
        return layer
    if isinstance(layer, Dense):
        return Dense(hw.batch, layer.in_features, layer.out_features)
    return Conv2D(hw.batch, layer.in_channels, layer.height, layer.width, layer.out_channels,
                  layer.kernel_h, layer.kernel_w, layer.stride, layer.padding)


@pytest.mark.parametrize("hw", HWS, ids=["1x16", "4x8", "1x16_uop128"])
def test_fast_path_equals_instruction_level_model_on_every_valid_config(hw):
    params = timing.default_params()
    n = reloads = 0
    for base in LAYERS:
        layer = _layer(base, hw)
        space = get_space(layer, hw)
        for index in space.valid_indices():
            config = space.get(int(index))
            insns = compile_insns(layer, config, hw).insns
            ref = timing.time_program(insns, hw, params)
            seconds, cycles = measure_seconds(layer, config, hw, params)
            assert cycles == ref.cycles, (layer.name, int(index))
            assert seconds == timing.predict_seconds(ref.cycles, insns.shape[0], hw, params, *layer_io_bytes(layer))
            n += 1
            uop_loads = (insns[:, isa.COL["opcode"]] == isa.OP_LOAD) & (insns[:, isa.COL["memory_type"]] == isa.MEM_UOP)
            reloads += int(uop_loads.sum()) > 2 * 3 * 2 + 1  # more than each kernel once
    assert n > 300
    if hw.uop_depth == 128:
        assert reloads > 0  # the evicting ring was exercised


def test_blocks_are_the_assembled_rows_and_skip_most_pairs():
    """Each block is row for row the compiler's rows of that pair (the DRAM offsets of the
    pairs a block stands for differ, nothing else), and a big layer is timed from a few blocks
    with most pairs skipped by the periodic fast-forward."""
    hw = HWS[0]
    layer = Conv2D(1, 64, 56, 56, 64, 3, 3, 1, 1)
    space = get_space(layer, hw)
    for index in space.valid_indices()[::25]:
        config = space.get(int(index))
        blocks = compile_blocks(layer, config, hw)
        full = compile_insns(layer, config, hw).insns
        expanded = np.concatenate([blocks.rows[blocks.block_start[b]:blocks.block_start[b + 1]]
                                   for b in blocks.pair_class])
        assert expanded.shape == full.shape == (blocks.n_insns, isa.N_FIELDS)
        keep = [c for c in range(isa.N_FIELDS) if c != isa.COL["dram_base"]]
        assert np.array_equal(expanded[:, keep], full[:, keep])
        pairs = blocks.pair_class[:-1].reshape(-1, blocks.steps)  # the blocks of each pair's units
        assert len(np.unique(pairs, axis=0)) <= 12
        sizes = np.diff(blocks.block_start)[blocks.pair_class]
        offset = np.concatenate([[0], np.cumsum(sizes)])
        for b in range(len(blocks.block_start) - 1):  # the pair a block was emitted from: every field
            j = int(np.flatnonzero(blocks.pair_class == b)[0])
            own = blocks.rows[blocks.block_start[b]:blocks.block_start[b + 1]]
            assert np.array_equal(own, full[offset[j]:offset[j + 1]])


def test_time_blocks_without_periods_equals_with_periods():
    hw = HWS[1]
    layer = _layer(Conv2D(1, 64, 14, 14, 64, 3, 3, 1, 1), hw)
    space = get_space(layer, hw)
    for index in space.valid_indices()[::5]:
        b = compile_blocks(layer, space.get(int(index)), hw)
        fast = timing.time_blocks(b.rows, b.block_start, b.pair_class, b.periods, hw)
        slow = timing.time_blocks(b.rows, b.block_start, b.pair_class, np.zeros(0, dtype=np.int64), hw)
        assert (fast.cycles, fast.busy, fast.port_busy) == (slow.cycles, slow.busy, slow.port_busy)


def _same_but_places(expanded, full):
    """The block form expanded is row for row `full` but for DRAM offsets and micro-op places: a
    sub-step repeating another (`emit.emit`) runs its kernels' ranges there, of the same sizes."""
    c = isa.COL
    keep = [f for f in range(isa.N_FIELDS) if f not in (c["dram_base"], c["uop_bgn"], c["uop_end"])]
    return (expanded.shape == full.shape and np.array_equal(expanded[:, keep], full[:, keep])
            and np.array_equal(expanded[:, c["uop_end"]] - expanded[:, c["uop_bgn"]],
                               full[:, c["uop_end"]] - full[:, c["uop_bgn"]]))


def _span(rows, hw):
    """DRAM bytes each memory type's DMAs span (`timing._decode`'s footprint terms)."""
    c = isa.COL
    dma = np.isin(rows[:, c["opcode"]], (isa.OP_LOAD, isa.OP_STORE)) & (rows[:, c["x_size"]] > 0)
    out = {}
    for mem in np.unique(rows[dma, c["memory_type"]]):
        r = rows[dma & (rows[:, c["memory_type"]] == mem)]
        end = r[:, c["dram_base"]] + (r[:, c["y_size"]] - 1) * r[:, c["x_stride"]] + r[:, c["x_size"]]
        out[int(mem)] = (int(r[:, c["dram_base"]].min()), int(end.max()))
    return out


def _whole_pairs(blocks, full):
    """The full program's rows of the pairs a block was written from, every step (what the block
    form wrote before the step form) and the tail."""
    U = blocks.steps
    units = blocks.pair_class[:-1].reshape(-1, U)
    pair_rows = np.diff(blocks.block_start)[units].sum(axis=1)
    start = np.concatenate([[0], np.cumsum(pair_rows)])
    _, first = np.unique(units, axis=0, return_index=True)
    return np.concatenate([full[start[j]:start[j + 1]] for j in sorted(first)] + [full[-3:]])


VTA_LAYERS = [Conv2D(1, 176, 14, 14, 64, 3, 3, 1, 1),  # 11 ci blocks: the last reduction step an edge tile
              Conv2D(1, 128, 14, 14, 64, 3, 3, 1, 1)]


@pytest.mark.parametrize("hw", HWS, ids=["1x16", "4x8", "1x16_uop128"])
def test_step_form_of_long_pairs_times_as_the_full_program(hw):
    """`vta` schedules whose pairs run >= 3 sub-steps (reduction steps x ACC slots) are written sub-step
    by sub-step (the step form, `lower.PairBlocks`): a middle step repeating the last one written is
    not written, nor a sub-step repeating one 1 or an inner loop's period before in its step, the block
    sequence expanded is row for row the full program but for DRAM offsets and micro-op places, and the fast path's
    cycles, busy and port cycles are the instruction-level model's on the full program, with the
    ci edge step written apart and kernels reloaded by a small micro-op ring; the blocks' rows span
    the DRAM the pairs they were written from span (the footprint of the block form before), with
    the span rows the full program's."""
    from codesign.schedule.families import mapping_for
    from codesign.tune.env import sample_valid_pool
    from codesign.tune.view import SpaceView

    params = timing.default_params()
    n = skipped = edge = 0
    for base in VTA_LAYERS:
        layer = _layer(base, hw)
        space = get_space(layer, hw, "vta")
        for config in SpaceView(space).configs(sample_valid_pool(space, 16, np.random.default_rng(0))):
            m = mapping_for(layer, config, hw)
            blocks = compile_blocks(layer, config, hw)
            if blocks.steps == 1:
                continue
            # units: sub-steps (+ the rest, padded to whole steps), or steps when no sub-step repeats
            assert blocks.steps in ((m.n_steps + 1) * m.n_inner, m.n_steps + 1) and m.n_steps * m.n_inner >= 3
            full = compile_insns(layer, config, hw).insns
            expanded = np.concatenate([blocks.rows[blocks.block_start[b]:blocks.block_start[b + 1]]
                                       for b in blocks.pair_class])
            assert _same_but_places(expanded, full), config.index
            fast = timing.time_blocks(blocks.rows, blocks.block_start, blocks.pair_class, blocks.periods, hw, params)
            ref = timing.time_program(full, hw, params)
            assert (fast.cycles, fast.busy, fast.port_busy) == (ref.cycles, ref.busy, ref.port_busy), config.index
            end = blocks.block_start[-1]  # the blocks' rows; span rows after them (`lower.PairBlocks`)
            assert _span(blocks.rows[:end], hw) == _span(_whole_pairs(blocks, full), hw), config.index
            assert _span(blocks.rows, hw) == _span(full, hw), config.index
            n += 1
            written = len(blocks.block_start) - 2  # the units written (the tail block aside)
            pair_units = len(np.unique(blocks.pair_class[:-1].reshape(-1, blocks.steps), axis=0)) * blocks.steps
            skipped += written < pair_units
            edge += m.edges is not None and m.edges.last[3] >= 0
    assert n >= 8 and skipped >= 4 and edge >= 1, (n, skipped, edge)


def test_a_long_schedule_is_pinned_to_the_full_program():
    """One long pair (11 reduction steps of 28 ACC slots, 14 pairs): written in 2 of its steps per
    pair class (but the last pair), and of a step the sub-steps (ACC slots) that do not repeat the
    one 1 or 14 sub-steps before (the first, the edge tiles, the last): 388 rows where whole steps took 1,170;
    timed by skipping the repeated sub-steps and steps, the cycles of the full program."""
    hw = HWS[0]
    layer = VTA_LAYERS[0]
    config = get_space(layer, hw, "vta").get(3590181882)
    blocks = compile_blocks(layer, config, hw)
    full = compile_insns(layer, config, hw).insns
    assert blocks.steps == 12 * 28 and blocks.n_insns == full.shape[0] == 19520
    assert blocks.rows.shape[0] == 388
    expanded = np.concatenate([blocks.rows[blocks.block_start[b]:blocks.block_start[b + 1]]
                               for b in blocks.pair_class])
    assert _same_but_places(expanded, full)
    fast = timing.time_blocks(blocks.rows, blocks.block_start, blocks.pair_class, blocks.periods, hw)
    ref = timing.time_program(full, hw)
    assert (fast.cycles, fast.busy, fast.port_busy, fast.footprint_bytes) == (
        ref.cycles, ref.busy, ref.port_busy, ref.footprint_bytes)
    slow = timing.time_blocks(blocks.rows, blocks.block_start, blocks.pair_class, np.zeros(0, dtype=np.int64), hw)
    assert (fast.cycles, fast.busy, fast.port_busy) == (slow.cycles, slow.busy, slow.port_busy)


def test_footprint_counts_the_last_load_of_an_operand_kept_across_pairs():
    """A `vta` schedule whose weights are loaded every 7th of its 112 pairs (their residency loop
    outside the reduction, `access.loaded`): their last load, in pair 105, lies beyond the DRAM of
    every pair written (pair 7 stands for 105's class). Its rows that reach further follow the tail
    as span rows, so the block form's footprint (above the 512 KiB L2: it sets the port efficiency)
    and cycles are the full program's (they were 1,035,600 bytes and 3,675,737 cycles, not 1,256,784
    and 3,729,663)."""
    hw = HWS[0]
    layer = Conv2D(1, 256, 14, 14, 512, 3, 3, 2, 1)
    config = get_space(layer, hw, "vta").get(182259104)
    params = timing.default_params()
    blocks = compile_blocks(layer, config, hw)
    full = compile_insns(layer, config, hw).insns
    fast = timing.time_blocks(blocks.rows, blocks.block_start, blocks.pair_class, blocks.periods, hw, params)
    ref = timing.time_program(full, hw, params)
    assert (fast.cycles, fast.busy, fast.port_busy) == (ref.cycles, ref.busy, ref.port_busy)
    assert fast.footprint_bytes == ref.footprint_bytes > params.cache_bytes
    end = blocks.block_start[-1]
    assert blocks.rows.shape[0] > end and _span(blocks.rows[:end], hw) != _span(full, hw)
