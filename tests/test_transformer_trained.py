"""A small vision transformer trained here on scikit-learn's 8x8 digits (conftest
`trained_transformer`: benchmarks/network_quant.py's `DigitsTransformer`), quantized with PT2E,
placed on pynq_1x16 and run end to end: its linears over the tokens on VTA (the functional
simulator), attention, softmax, LayerNorm and GELU on the CPU, every op bit-exact against the
integer reference; the integer network keeps the float model's accuracy on held-back digits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from codesign.hw.config import HwConfig
from codesign.netrun import network as whole
from codesign.network.quantized import dequantize
from codesign.network.reference import int_outputs

HW = HwConfig.resolve("pynq_1x16")
BATCH = 16  # images per run: the exported graph's batch (attention moves the batch axis: fixed)


@pytest.fixture(scope="module")
def vit(trained_transformer):
    """The trained transformer placed on `HW`, calibrated on 512 training images."""
    d = trained_transformer
    example = (torch.from_numpy(d["x_test"][:BATCH]),)
    prep = whole.prepare(d["net"], example, "digits_vit", HW, calibration=d["x_train"][:512])
    return {**d, "prep": prep}


def test_trained_transformer_runs_bit_exact_on_the_simulator(vit):
    """A batch of held-back digits through the placed network: every op's output, on VTA or the
    CPU, equals the integer reference's bit for bit."""
    prep = vit["prep"]
    net = prep.network
    kinds = {op.kind for op in net.ops}
    assert {"linear", "matmul", "softmax", "layer_norm", "gelu", "mean", "add"} <= kinds
    vta = [s for s in prep.plan.steps if s.placement == "vta" and not s.host]
    assert any(net.op(s.ops[0]).kind == "linear" for s in vta)  # the simulator runs real work
    sim = whole.simulator_executor()
    x = vit["x_test"][BATCH:2 * BATCH]  # not the calibration example `prepare` keeps
    exe = whole.execute(prep, x, sim)
    assert exe.bit_exact, [r.name for r in exe.rows if not r.bit_exact]
    assert {r.name for r in exe.rows if not r.host and r.placement == "vta"} == {o for s in vta for o in s.ops}
    out = net.outputs[0]
    np.testing.assert_array_equal(dequantize(exe.env[out], prep.qnet.frac[out]), int_outputs(prep.qnet, x)[0])


def test_trained_transformer_keeps_its_accuracy(vit):
    """On every whole batch of the 297 held-back digits, the integer reference (what the simulator
    equals bit for bit) agrees with the float model's top-1 on >= 95% and loses <= 2 points of
    accuracy; the benchmark's `judge` reports the same figures and each op's SQNR."""
    n = len(vit["x_test"]) // BATCH * BATCH
    x, y = vit["x_test"][:n], vit["y_test"][:n]
    with torch.no_grad():
        ref = vit["net"](torch.from_numpy(x)).numpy().argmax(1)
    pred = int_outputs(vit["prep"].qnet, x)[0].argmax(1)
    acc_float, acc_int = float(np.mean(ref == y)), float(np.mean(pred == y))
    assert acc_float > 0.9  # a trained model, not chance
    assert abs(acc_int - acc_float) <= 0.02 and float(np.mean(pred == ref)) >= 0.95, (acc_int, acc_float)
    judged = vit["bench"].judge(vit["net"], vit)
    assert (judged["accuracy_float"], judged["accuracy_int"], judged["samples"]) == (acc_float, acc_int, n)
    assert judged["distinct_float_classes"] == 10
    assert set(judged["op_sqnr_db"]) == {op.name for op in vit["prep"].network.ops}
    assert judged["output_sqnr_db"] >= 20 and judged["lowest_op_sqnr_db"] >= 15
