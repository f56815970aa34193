"""Placement of whole networks (codesign.place): every op on VTA or the CPU, by cost, with a reason.

ResNet-18 from the zoo, built on the meta device (timing-only: shapes, no weights), on pynq_1x16
with the PYNQ-Z1's Cortex-A9: every op placed once, the stem offloaded through a host rewrite,
the residual adds fused into convs, the dense costed padded to BLOCK_OUT. Hand-built networks for
the CPU-is-cheaper and nobody-can-run-it cases."""

from __future__ import annotations

import math

import pytest

from codesign.evaluate.fused import measure_fused
from codesign.hw.config import HwConfig
from codesign.network.graph import Network, Op
from codesign.place import CPU, VTA, best_template_schedule, chooser, plan_network
from codesign.workloads import Conv2D, Dense

HW = HwConfig.resolve("pynq_1x16")


@pytest.fixture(scope="module")
def resnet18():
    import torch

    from codesign.network import import_network
    from codesign.workloads.zoo import ZOO

    with torch.device("meta"):
        module, inputs = ZOO["resnet18"][0]()
    net = import_network(module, inputs, "resnet18")
    assert not net.has_weights
    return net


@pytest.fixture(scope="module")
def plan18(resnet18):
    return plan_network(resnet18, HW, "pynq-z1", chooser(HW))


def _conv(name, inp, cin, cout, h, k=1, s=1, p=0, d=1):
    oh = (h + 2 * p - d * (k - 1) - 1) // s + 1
    return Op(name, "conv2d", (inp,), (1, cout, oh, oh), {"stride": (s, s), "padding": (p, p), "dilation": (d, d),
                                                          "groups": 1, "weight_shape": (cout, cin, k, k)})


def test_every_resnet18_op_is_placed_once(resnet18, plan18):
    ops = [s for s in plan18.steps if not s.host]
    placed = [name for s in ops for name in s.ops]
    assert sorted(placed) == sorted(op.name for op in resnet18.ops)
    assert all(s.placement in (VTA, CPU) and s.reason and "\n" not in s.reason for s in plan18.steps)
    # every conv of ResNet-18 runs on VTA; each of the 8 residual adds rides on a conv's epilogue or,
    # when that is dearer, is a CPU pass over the packed tensors whose reason compares the two
    assert all(plan18.step_of(op.name).placement == VTA for op in resnet18.ops if op.kind == "conv2d")
    adds = [op.name for op in resnet18.ops if op.kind == "add"]
    assert len(adds) == 8
    for a in adds:
        step = plan18.step_of(a)
        if step.placement == VTA:
            assert step.kind.startswith("conv2d+add") and step.epilogue.residual is not None
        else:
            # the add's ReLU rides in the same CPU pass: one step, the add's time
            assert step.kind == "add+relu" and step.ops == (a, plan18.step_of(a).ops[1])
            assert "not fused: the plain GEMM" in step.reason and "ReLU in the same pass" in step.reason
    # latency is one request through every step; VTA, CPU and host parts add up to it
    assert plan18.latency_s == pytest.approx(sum(s.predicted_s for s in plan18.steps))
    assert plan18.latency_s == pytest.approx(plan18.vta_s + plan18.cpu_s)
    assert plan18.throughput_ips == pytest.approx(1 / plan18.latency_s)


def test_the_stem_runs_on_vta_through_a_host_rewrite_cheaper_than_the_a9(plan18):
    stem = plan18.step_of("conv2d")
    assert stem.placement == VTA and stem.transform in ("space_to_depth", "im2col")
    assert stem.layer.in_channels % HW.block_in == 0 and stem.layer.padding == 0
    assert stem.alternatives["cpu"] > 5 * stem.alternatives[f"vta:{stem.transform}"]  # ~100 ms on the A9
    rewrite = [s for s in plan18.steps if s.kind == "rewrite"]
    assert len(rewrite) == 1 and rewrite[0].predicted_s > 0 and rewrite[0].inputs == ("input_1",)
    # its VTA time is the chosen schedule's time of the rewritten layer with its fused ReLU
    assert stem.predicted_s == pytest.approx(measure_fused(stem.layer, stem.config, HW, stem.epilogue).seconds)
    assert stem.epilogue.relu and stem.epilogue.residual is None


def test_the_dense_is_costed_padded_to_block_out(plan18):
    dense = plan18.step_of("linear")
    assert "vta:pad" in dense.alternatives and "cpu" in dense.alternatives
    chosen = "cpu" if dense.placement == CPU else f"vta:{dense.transform}"
    assert dense.alternatives[chosen] == min(dense.alternatives.values())
    # the VTA option is the schedule of the dense padded to 1008 outputs (+ its host passes)
    assert dense.alternatives["vta:pad"] >= best_template_schedule(Dense(1, 512, 1008), HW)[1]


def test_cpu_wins_a_tiny_conv_and_the_reason_names_both_costs():
    net = Network("tiny", (("x", (1, 16, 4, 4)),), (_conv("c", "x", 16, 16, 4),), ("c",))
    step = plan_network(net, HW, "pynq-z1", chooser(HW)).step_of("c")
    assert step.placement == CPU and step.alternatives["cpu"] < step.alternatives["vta"]
    assert step.reason.startswith(f"CPU {step.alternatives['cpu'] * 1e3:.3f} ms")
    assert f"VTA {step.alternatives['vta'] * 1e3:.3f} ms" in step.reason


def test_a_chooser_that_makes_vta_slow_moves_the_conv_to_the_cpu():
    net = Network("one", (("x", (1, 64, 28, 28)),), (_conv("c", "x", 64, 64, 28, 3, 1, 1),), ("c",))
    fast = plan_network(net, HW, "pynq-z1", chooser(HW)).step_of("c")
    assert fast.placement == VTA
    slow = plan_network(net, HW, "pynq-z1", lambda layer: (best_template_schedule(layer, HW)[0], 10.0)).step_of("c")
    assert slow.placement == CPU and "schedule 10000.0" in slow.reason


def test_an_op_vta_cannot_express_goes_to_the_cpu_with_a_one_line_reason():
    net = Network("dilated", (("x", (1, 16, 32, 32)),),
                  (_conv("c", "x", 16, 16, 32, 3, 1, 2, 2), Op("r", "relu", ("c",), (1, 16, 32, 32))), ("r",))
    step = plan_network(net, HW, "pynq-z1", chooser(HW)).step_of("c")
    assert step.placement == CPU and step.ops == ("c", "r")
    assert "VTA cannot run it" in step.reason and "dilation=2" in step.reason and "\n" not in step.reason
    assert set(step.alternatives) == {"cpu"}


def test_batch_4_runs_the_padded_batch_for_one_request(resnet18):
    hw = HwConfig.resolve("pynq_4x8")
    plan = plan_network(resnet18, hw, "pynq-z1", chooser(hw))
    assert plan.batch == hw.batch == 4 and plan.request_batch == 1
    vta = [s for s in plan.steps if s.placement == VTA]
    assert vta and all(s.layer.batch == 4 for s in vta)
    # a full batch costs more than one request only through the CPU and host steps
    assert plan.latency_s < plan.batch_latency_s < 4 * plan.latency_s
    assert plan.throughput_ips == pytest.approx(4 / plan.batch_latency_s)
    assert math.isclose(plan.vta_s, sum(s.predicted_s for s in vta))


def test_best_template_schedule_is_the_minimum_over_the_valid_configs():
    from codesign.evaluate.run import measure
    from codesign.schedule import get_space

    layer = Conv2D(1, 32, 14, 14, 32, 3, 3, 1, 1)
    config, seconds = best_template_schedule(layer, HW)
    space = get_space(layer, HW)
    times = [measure(layer, space.get(int(i)), HW).seconds for i in space.valid_indices()]
    assert seconds == min(times) and measure(layer, config, HW).seconds == seconds


def test_workloads_placement_cli_lists_every_op_with_where_why_and_ms(capsys):
    import json

    from codesign.cli import main

    assert main(["workloads", "resnet18", "--placement", "--hw", "pynq_1x16", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["board"] == "pynq-z1" and doc["cpu"] == "cortex-a9" and doc["cpu_dtype"] == "int8"
    ops = {r["name"]: r for r in doc["ops"] if not r["host"]}
    assert len(ops) == 49 and all(r["placement"] in ("vta", "cpu") and r["reason"] for r in ops.values())
    assert ops["conv2d"]["placement"] == "vta" and ops["relu"]["group"] == "conv2d"
    assert doc["latency_ms"] == pytest.approx(sum(r["predicted_ms"] for r in doc["ops"]))
    assert doc["latency_ms"] == pytest.approx(doc["vta_ms"] + doc["cpu_ms"])


def test_a_quantized_network_gets_its_shifts_in_each_epilogue_and_the_same_placement(resnet18, plan18):
    from codesign.network import load_model, quantize

    module, inputs, name = load_model("resnet18")
    qnet = quantize(module, inputs, None, name)
    plan = plan_network(qnet, HW, "pynq-z1", chooser(HW))
    assert plan.network is qnet and plan.graph.name == "resnet18"
    for step in (s for s in plan.steps if s.placement == VTA):
        head = qnet.params[step.ops[0]]
        assert step.epilogue.shift == head.shift and step.epilogue.bias
        if step.residual is not None:
            add = next(qnet.network.op(n) for n in step.ops if qnet.network.op(n).kind == "add")
            k = add.inputs.index(step.ops[0])
            p = qnet.params[add.name]
            assert step.epilogue.residual == (p.in_shifts[k], p.in_shifts[1 - k], p.shift)
            assert step.residual == add.inputs[1 - k]
    # the shapes-only plan places the same; its epilogues keep every optional ALU step (nonzero
    # shifts), so its time bounds the quantized network's
    assert [(s.name, s.placement, s.transform) for s in plan.steps] == \
        [(s.name, s.placement, s.transform) for s in plan18.steps]
    assert plan.latency_s <= plan18.latency_s * (1 + 1e-9)


def test_pools_are_costed_on_vta_when_the_alu_lowering_is_there(plan18):
    max_pool, global_pool = plan18.step_of("max_pool2d"), plan18.step_of("adaptive_avg_pool2d")
    assert set(max_pool.alternatives) == {CPU, VTA}
    assert max_pool.placement == min(max_pool.alternatives, key=max_pool.alternatives.get)
    # 7x7 = 49 elements: the mean needs a multiply, which VTA's ALU lacks
    assert global_pool.placement == CPU and "not a power of two" in global_pool.reason


def test_a_residual_add_is_fused_only_when_that_is_cheaper(resnet18, plan18, monkeypatch):
    """The planner costs fused (identity GEMM + ALU passes on VTA) against the plain GEMM plus CPU
    passes over the packed tensors and keeps the cheaper: always fusing is never faster."""
    from codesign.place import plan as plan_mod

    monkeypatch.setattr(plan_mod._Planner, "split_add", lambda self, group, layer, fused: None)
    always_fused = plan_network(resnet18, HW, "pynq-z1", chooser(HW))
    assert all(always_fused.step_of(op.name).kind.startswith("conv2d+add") for op in resnet18.ops if op.kind == "add")
    split = [op.name for op in resnet18.ops if op.kind == "add" and plan18.step_of(op.name).placement == CPU]
    assert plan18.latency_s <= always_fused.latency_s * (1 + 1e-9)
    if split:  # the adds it moved made the request strictly faster
        assert plan18.latency_s < always_fused.latency_s
