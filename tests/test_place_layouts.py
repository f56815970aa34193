"""Packed layouts tracked through views (codesign.place.layouts, codesign.place.plan,
codesign.netrun.network): a GEMM reads an operand in place when a VTA buffer already holds it as
its form reads it, a softmax runs over the packed layout, and the runner executes exactly those
reads from the VTA steps' packed bytes, bit-exact against the integer reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch_cases import randn as _x
from torch_cases import seeded_weights  # noqa: F401 - autouse fixture: seeded module weights

from codesign.hw.config import HwConfig
from codesign.netrun import network as whole
from codesign.network.graph import Network, Op
from codesign.place.fusion import groups
from codesign.place.layouts import gemm_output, input_slots, through, unpack_input, window
from codesign.place.transforms import ENTRIES, TOKENS, entries_as_groups, rewrites
from codesign.workloads.layers import Dense

SDPA = "scaled_dot_product_attention"
# Ultra96 (1x16 blocks as pynq_1x16): there its residual adds are cheaper fused than on the A53
HW = HwConfig.resolve("ultra96_1x16_i8w8a32_15_15_18_17_250MHz")


class EncoderBlock(nn.Module):
    """torchvision's ViT encoder block: LayerNorm, nn.MultiheadAttention (batch first: sequence
    first inside, one QKV projection, heads split by views), residual, LayerNorm, GELU MLP."""

    def __init__(self, c: int, heads: int) -> None:
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(c, eps=1e-6), nn.LayerNorm(c, eps=1e-6)
        self.attn = nn.MultiheadAttention(c, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(c, 4 * c), nn.GELU(), nn.Linear(4 * c, c))

    def forward(self, inp: torch.Tensor) -> torch.Tensor:
        x = self.ln_1(inp)
        x = self.attn(x, x, x, need_weights=False)[0] + inp
        return x + self.mlp(self.ln_2(x))


def _producer(net: Network, tensor: str) -> Op:
    """The first op up a chain of views from `tensor` that is not a view."""
    op = net.op(tensor)
    while op.kind in ("flatten", "permute", "slice"):
        op = net.op(op.inputs[0])
    return op


def encoder(blocks: int = 2) -> nn.Module:
    """`blocks` encoder blocks in a row (the second's layer norms read the first's VTA outputs)."""
    return nn.Sequential(*(EncoderBlock(64, 4) for _ in range(blocks)))


@pytest.fixture(scope="module")
def block(run_net):
    return run_net(encoder(), (_x(1, 128, 64),), hw=HW.name, min_sqnr_db=15.0)


def test_attention_reads_its_operands_where_vta_left_them(block):
    """Q is read in place from the QKV projection's packed output, the probabilities from the
    softmax's, the head merge from A·V's: no pack or unpack between the QKV linear, the score
    matmul, the softmax, A·V and the out projection; only K and V (WGT) are gathered, in one pass each."""
    prep, _ = block
    net, plan = prep.network, prep.plan
    scores, soft, av = (plan.step_of(n) for n in (f"{SDPA}_scores", f"{SDPA}_attn", SDPA))
    qkv = _producer(net, net.op(scores.ops[0]).inputs[0])
    assert qkv.kind == "linear" and plan.step_of(qkv.name).placement == "vta"
    assert plan.step_of(qkv.name).transform == TOKENS
    q, k = net.op(scores.ops[0]).inputs
    assert scores.placement == av.placement == "vta" and scores.transform == av.transform == ENTRIES
    assert scores.reads == ((q, qkv.name, 0),) and "reads " + q + " in place" in scores.reason
    assert av.reads == ((soft.name, soft.name, 0),)
    assert soft.placement == "cpu" and soft.reads == ((scores.name, scores.name, -1),)
    assert "packed VTA layout in place" in soft.reason
    out_proj = next(s for s in plan.steps if s.placement == "vta" and s.reads and s.name not in (scores.name, av.name))
    assert _producer(net, out_proj.reads[0][0]).name == av.name and out_proj.reads[0][1] == av.name
    # the host passes from the QKV projection to the out projection: one gather each of K and V,
    # and the pack of the residual its epilogue adds (the graph input, on the host for the layer norm)
    i, j = plan.steps.index(plan.step_of(qkv.name)), plan.steps.index(out_proj)
    host = [s for s in plan.steps[i:j] if s.host]
    assert [(s.kind, s.inputs[0]) for s in host] == [("rewrite", k), ("rewrite", net.op(av.ops[0]).inputs[1]),
                                                      ("pack", out_proj.residual)]
    assert all("a gather from " + qkv.name in s.reason for s in host[:2])
    views = [s for s in plan.steps[i:j] if not s.host and s.placement == "cpu" and s is not soft]
    assert views and all(s.predicted_s == 0 and "no data moved" in s.reason for s in views)


def test_the_runner_reads_the_bytes_vta_wrote(block, run_net):
    """Executed again with an executor that records what each VTA step is given: the score
    matmul's input packs to exactly the QKV step's packed bytes at the plan's offset (pads
    included), A·V's to the softmax's buffer, whose pads are zero; every op bit-exact."""
    prep, _ = block
    seen = {}
    sim = whole.simulator_executor()

    def recording(step, config, hw, x, w, bias, residual):
        seen[step.name] = x
        return sim(step, config, hw, x, w, bias, residual)

    exe = whole.execute(prep, prep.example, recording)
    assert exe.bit_exact
    for name in (f"{SDPA}_scores", SDPA):
        step = prep.plan.step_of(name)
        (_, buffer, offset), = step.reads
        given = step.layer.pack_data(seen[name], HW).ravel()
        assert np.array_equal(given, exe.buffers[buffer][offset:offset + given.size])
    soft = exe.where(f"{SDPA}_attn")
    buf = exe.buffers[soft.buffer]
    pads = np.ones(buf.size, bool)
    pads[soft.positions.ravel()] = False
    assert pads.any() or buf.size == soft.positions.size
    assert not buf[pads].any()
    assert np.array_equal(buf[soft.positions], exe.reference[f"{SDPA}_attn"])


def test_window_of_a_head_split():
    """A 1x1-conv (tokens) projection of 3·C channels: the first C channels split into heads are
    exactly the grouped score conv's input (offset 0); the second C at offset C·T; transposed
    (K as the first operand, tokens as its contraction) they are not a window; a dense form's
    row-major output is not one either."""
    t, c, heads = 32, 64, 4
    d = c // heads
    qkv = Dense(t, c, 3 * c)
    tokens = next(r for r in rewrites(qkv, HW) if r.kind == TOKENS)
    loc = gemm_output(tokens, HW, (1, t, 3 * c), "qkv", False)
    dense = gemm_output(next(r for r in rewrites(qkv, HW) if r.kind is None), HW, (1, t, 3 * c), "qkv", False)

    def split(part: int, swap: bool, src=loc):
        ops = [Op("sl", "slice", ("qkv",), (1, t, c), {"dim": 2, "start": part * c, "stop": (part + 1) * c, "step": 1}),
               Op("v", "flatten", ("sl",), (1, t, heads, d), {"shape": (1, t, heads, d)}),
               Op("p", "permute", ("v",), (1, heads, t, d) if not swap else (1, heads, d, t),
                  {"dims": (0, 2, 1, 3) if not swap else (0, 2, 3, 1)})]
        for op in ops:
            src = through(op, src)
        return ops, src

    def slots(ops: list[Op]) -> np.ndarray:
        m, k = ops[-1].shape[-2:]
        mm = Op("mm", "matmul", ("p", "other"), (1, heads, m, m), {"contract": k, "transpose_b": True})
        net = Network("n", (("qkv", (1, t, 3 * c)), ("other", (1, heads, m, k))), (*ops, mm), ("mm",))
        return input_slots(net, mm, entries_as_groups(Dense(m, k, m), heads, HW), HW)

    for part in (0, 1, 2):
        ops, src = split(part, False)
        assert window(src, slots(ops)) == part * c * t
    for ops, src in (split(0, True), split(0, False, dense)):
        assert window(src, slots(ops)) is None


def test_unpack_input_inverts_pack_data():
    rw = entries_as_groups(Dense(16, 20, 16), 3, HW)
    x = np.random.default_rng(0).integers(-128, 128, rw.layer.data_shape(), dtype=np.int8)
    assert np.array_equal(unpack_input(rw.layer, rw.layer.pack_data(x, HW), HW), x)


def test_the_residual_add_fuses_into_the_out_projection_through_its_views(block):
    """The out projection's output is viewed back to batch-first (a reshape and a permute) before the
    residual add: the add and the views run in its epilogue, the residual loaded in the projection's
    output order; the sum lies in the projection's packed buffer behind the views, bit-exact, the
    next layer norm reads it there and the MLP's second linear reads it as its residual in place."""
    prep, exe = block
    net, plan = prep.network, prep.plan
    for out_proj, residual in (("linear_1", "input_1"), ("linear_5", "add_1")):
        fused = plan.step_of(out_proj)
        add = net.op(fused.ops[-1])
        assert fused.placement == "vta" and fused.kind == "linear+flatten+permute+add" and add.kind == "add"
        assert fused.residual == residual and residual in add.inputs
        where = exe.where(add.name)
        assert where.buffer == add.name
        assert np.array_equal(exe.buffers[add.name][where.positions], exe.reference[add.name])
        ln = plan.step_of(net.consumers(add.name)[0].name)
        assert ln.kind == "layer_norm" and ln.reads == ((add.name, add.name, -1),)
    # the first block's residual is the graph input (on the host for the layer norm): packed once
    assert [s.name for s in plan.steps if s.host and s.inputs == ("input_1",)] == ["quantize:input_1", "pack:input_1"]
    # the MLP's second linear adds the sum as its residual: read where it lies, as its ACC holds it
    fc2 = plan.step_of("linear_3")
    assert fc2.residual == "add" and ("add", "add", 0) in fc2.reads
    assert "reads its residual add in place" in fc2.reason
    assert not any(s.host and s.inputs == ("add",) for s in plan.steps)


def test_a_residual_add_behind_views_is_split_where_the_cpu_passes_are_cheaper(run_net):
    """On PYNQ-Z1 the fused residual costs VTA more than the CPU's passes: the out projection runs
    plain, its views are placed as views (0 ms), and the add is charged what its CPU pass needs, a
    gather of the view (its residual, the graph input, already on the host); bit-exact."""
    prep, _ = run_net(encoder(1), (_x(1, 128, 64),), hw="pynq_1x16", min_sqnr_db=15.0)
    net, plan = prep.network, prep.plan
    proj = plan.step_of("linear_1")
    assert proj.kind == "linear" and proj.ops == ("linear_1",) and proj.placement == "vta"
    chain = [net.consumers("linear_1")[0]]
    while chain[-1].kind != "add":
        step = plan.step_of(chain[-1].name)
        assert step.predicted_s == 0 and "no data moved" in step.reason
        chain.append(net.consumers(chain[-1].name)[0])
    add = plan.step_of(chain[-1].name)
    i = plan.steps.index(add)
    assert [(s.kind, s.inputs) for s in plan.steps[i - 1:i]] == [("unpack", (chain[-2].name,))]
    assert add.placement == "cpu" and "not fused: the plain GEMM" in add.reason


def test_layer_norm_and_gelu_run_over_the_packed_layout_their_linears_read_in_place(block):
    """Between two VTA linears of the second block no host pass is left: its first layer norm reads
    the first block's last output where VTA left it and writes its own buffer at the same positions
    (pads zero), the QKV linear reads that buffer in place through the head-split's transpose; the
    MLP's GELU does the same between its two linears."""
    prep, exe = block
    net, plan = prep.network, prep.plan
    ln, qkv = plan.step_of("layer_norm_2"), plan.step_of("linear_4")
    assert ln.reads == (("add_1", "add_1", -1),) and qkv.reads == ((net.op("linear_4").inputs[0], ln.name, 0),)
    i, j = plan.steps.index(plan.step_of("linear_3")), plan.steps.index(qkv)
    assert not [s.name for s in plan.steps[i:j] if s.host]
    gelu, fc2 = plan.step_of("gelu"), plan.step_of("linear_3")
    assert gelu.reads == (("linear_2", "linear_2", -1),) and fc2.reads[0] == ("gelu", "gelu", 0)
    assert "in place" in ln.reason and "in place" in gelu.reason
    for name in ("layer_norm_2", "gelu"):
        where = exe.where(name)
        buf = exe.buffers[where.buffer]
        assert np.array_equal(buf[where.positions], exe.reference[name])
        pads = np.ones(buf.size, bool)
        pads[where.positions.ravel()] = False
        assert not buf[pads].any()


def test_a_residual_add_fuses_through_element_keeping_views_only():
    """`fusion.groups`: linear -> reshape -> permute -> add fuses (views in order, the add reading
    the last view); a slice (drops elements) or a view with another consumer stops it."""
    t, c = 8, 16

    def net(middle: tuple[Op, ...], outputs: tuple[str, ...] = ("add",)) -> Network:
        lin = Op("lin", "linear", ("x",), (t, 1, c), {"in_features": c, "out_features": c})
        last = middle[-1].name
        add = Op("add", "add", (last, "r"), middle[-1].shape, {})
        return Network("n", (("x", (t, 1, c)), ("r", middle[-1].shape)), (lin, *middle, add), outputs)

    view = Op("v", "flatten", ("lin",), (t, c), {"shape": (t, c)})
    perm = Op("p", "permute", ("v",), (c, t), {"dims": (1, 0)})
    gs, _ = groups(net((view, perm)))
    assert [g.names for g in gs] == [("lin", "v", "p", "add")]
    assert gs[0].views == (view, perm) and gs[0].into_add == "p" and gs[0].residual == "r"
    cut = Op("s", "slice", ("v",), (t // 2, c), {"dim": 0, "start": 0, "stop": t // 2, "step": 1})
    assert [g.names for g in groups(net((view, cut)))[0]] == [("lin",), ("v",), ("s",), ("add",)]
    assert [g.names for g in groups(net((view, perm), ("add", "v")))[0]] == [("lin",), ("v",), ("p",), ("add",)]
