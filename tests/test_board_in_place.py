"""A deployed network reads in place what the plan reads in place (docs/board.md, schema 3): two
ViT-style encoder blocks' bundle records the score matmul reading Q from the QKV projection's
packed output, the softmax running over the scores' buffer through its positions and A·V reading
the probabilities from the softmax's buffer, the layer norms and GELUs running over the buffers
before their linears, which read them in place; on an emulated board each reading step is fed
exactly the producer's packed bytes from the planned offset (no gather map, no host pack), the
out projection with its residual add fused through views adds its residual in its own output
order, and the outputs are bit-exact with the simulator's run."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch
from test_place_layouts import SDPA, encoder
from torch_cases import randn as _x

from codesign.board import Network
from codesign.board import bundle as fmt
from codesign.board.driver import PynqApi, VTADriver
from codesign.board.emulated import EmulatedPynq
from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.netrun import bundle
from codesign.netrun import network as whole

HW = HwConfig.resolve("ultra96_1x16_i8w8a32_15_15_18_17_250MHz")  # its residual adds fuse
SHA = hashlib.sha256(b"a bitstream").hexdigest()


class Recording(VTADriver):
    """The emulated board's driver, keeping what each run was fed and what it wrote."""

    def __init__(self) -> None:
        super().__init__(PynqApi(EmulatedPynq(HW)))
        self.fed: list[dict[str, np.ndarray]] = []
        self.wrote: list[np.ndarray] = []

    def run_resident(self, res, inputs, timeout_s=60.0):
        self.fed.append({k: np.array(v, copy=True).view(np.int8).ravel() for k, v in inputs.items()})
        outs, dev = super().run_resident(res, inputs, timeout_s)
        self.wrote.append(outs["output"].view(np.int8))
        return outs, dev


def _region(step, tensor: str) -> str:
    """The program region a VTA step's in-place read of `tensor` feeds."""
    return "residual" if tensor == step.residual else "data"


@pytest.fixture(scope="module")
def block(run_net):
    """Two encoder blocks placed on HW and run on the simulator (every op bit-exact with the reference)."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        module = encoder(2)
    prep, exe = run_net(module, (_x(1, 128, 64),), hw=HW.name, name="vit_block")
    doc, arrays = bundle.build(prep, SHA)
    return prep, exe, doc, arrays


def test_bundle_records_the_plans_in_place_reads(block) -> None:
    prep, _, doc, _ = block
    steps = {s["name"]: s for s in doc["steps"]}
    plan = prep.plan
    reading = [s for s in plan.steps if s.placement == "vta" and s.reads]
    assert {f"{SDPA}_scores", SDPA} <= {s.name for s in reading}
    for s in reading:
        v = steps[s.name]["vta"]
        want = [{"region": _region(s, tensor), "tensor": tensor, "buffer": buffer, "offset": offset,
                 "nbytes": int(np.prod(s.layer.packed_data_shape(HW) if _region(s, tensor) == "data"
                                       else s.layer.packed_output_shape(HW)))} for tensor, buffer, offset in s.reads]
        assert v["reads"] == want
        regions = {r["region"] for r in want}
        assert ("input_map" in v) == ("data" not in regions)  # nothing to pack a read operand with
        assert ("residual_map" in v) == (s.residual is not None and "residual" not in regions)
    # the MLP's second linear adds the out projection's residual sum where the projection left it
    assert steps["linear_3"]["vta"]["reads"][1] == {"region": "residual", "tensor": "add", "buffer": "add",
                                                    "offset": 0, "nbytes": steps["linear_3"]["vta"]["reads"][1]["nbytes"]}
    soft = steps[f"{SDPA}_attn"]["in_place"]
    assert soft["buffer"] == f"{SDPA}_scores" and soft["input"] == f"{SDPA}_scores"
    # every VTA step the plan packs on the host keeps its gather map
    assert all("input_map" in steps[s.name]["vta"] for s in plan.steps if s.placement == "vta" and not s.reads)


def test_deployed_block_reads_the_producers_bytes_and_equals_the_simulator(block) -> None:
    prep, exe, doc, arrays = block
    driver = Recording()
    net = Network(fmt.to_bytes(doc, arrays), driver=driver, bitstream=(HW.name, SHA))
    try:
        ys, _ = net.run(prep.example)
        assert all(np.array_equal(a, b) for a, b in zip(ys, exe.outputs(prep.qnet)))
        vta = [s for s in prep.plan.steps if s.placement == "vta"]
        run = dict(zip((s.name for s in vta), range(len(vta))))
        for s in vta:  # what VTA wrote is the simulator's packed buffer, byte for byte
            if s.ops[-1] in exe.buffers:
                want = exe.buffers[s.ops[-1]]
                assert np.array_equal(driver.wrote[run[s.name]][:want.size], want)
            feeds = net.last_feeds[s.name]
            if not any(_region(s, t) == "data" for t, _, _ in s.reads):
                assert feeds["data"][0] == "gather"
            for tensor, buffer, offset in s.reads:
                region = _region(s, tensor)
                assert feeds[region] == ("in place", buffer, offset)  # no host pack for this operand
                got = driver.fed[run[s.name]][region]
                assert np.array_equal(got, exe.buffers[buffer][offset:offset + got.size])
        assert net.last_feeds[f"{SDPA}_attn"] == {"input": ("through positions", f"{SDPA}_scores", None)}
        assert net.last_feeds[SDPA]["data"] == ("in place", f"{SDPA}_attn", 0)
        # the layer norm and GELU over the packed buffers the plan tracks, their linears fed in place
        for cpu, buffer, linear in (("layer_norm_2", "add_1", "linear_4"), ("gelu", "linear_2", "linear_3")):
            assert net.last_feeds[cpu] == {"input": ("through positions", buffer, None)}
            assert net.last_feeds[linear]["data"] == ("in place", cpu, 0)
        # the residual add fused through the out projection's views: its residual gathered in the
        # projection's output order (the plan's pack of it), the sum kept where the layer norm reads it
        out_proj = prep.plan.step_of("linear_1")
        assert out_proj.kind == "linear+flatten+permute+add"
        assert net.last_feeds["linear_1"]["residual"] == ("gather", out_proj.residual, None)
        assert any(s.kind == "pack" and s.inputs == (out_proj.residual,) for s in prep.plan.steps)
        assert net.last_feeds["layer_norm_1"] == {"input": ("through positions", "add", None)}
        # and the MLP's second linear reads that sum as its residual in place (no pack of it)
        assert net.last_feeds["linear_3"]["residual"] == ("in place", "add", 0)
        assert not any(s.host and s.inputs == ("add",) for s in prep.plan.steps)
        # a second input: still bit-exact with the simulator's run of it
        x2 = _x(1, 128, 64, seed=7).numpy()
        ys, _ = net.run(x2)
        want = whole.execute(prep, x2, whole.simulator_executor()).outputs(prep.qnet)
        assert all(np.array_equal(a, b) for a, b in zip(ys, want))
    finally:
        net.close()


def test_a_read_of_a_buffer_no_step_writes_is_refused_in_one_line(block) -> None:
    _, _, doc, arrays = block
    steps = [dict(s) for s in doc["steps"]]
    k = next(i for i, s in enumerate(steps) if s["name"] == SDPA)
    steps[k]["vta"] = {**steps[k]["vta"], "reads": [{**steps[k]["vta"]["reads"][0], "buffer": "nowhere"}]}
    with pytest.raises(ConfigError, match=f"step {SDPA} reads .* in place from nowhere's packed buffer, which no "
                                          "earlier step writes") as err:
        Network(fmt.to_bytes({**doc, "steps": steps}, arrays), driver=VTADriver(PynqApi(EmulatedPynq(HW))))
    assert len(str(err.value).splitlines()) == 1
