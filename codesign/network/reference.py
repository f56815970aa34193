"""NumPy references of a whole network: the integer network (bit-exact semantics VTA and the CPU
must match) and the float network (the module's arithmetic on the IR, for agreement figures).

Each kind's semantics is its entry's `int_ref` / `float_ref` (`codesign.network.kinds`);
`codesign.network.qplan` says how exponents are chosen. For the first kinds:
- conv2d / linear: int8 x int8 products accumulated in int32 (wrapping, as VTA's ACC), + int32
  bias, arithmetic shift right, clip to [-128, 127];
- relu: max(q, 0) in int8; clamp (relu6, hardtanh): clip to its bounds rounded to the tensor's
  scale; max pool: max over the window in int8 (padding is -128, below every value);
- add: int32 (a << la) + (b << lb), + 2^(s-1), >> s, clip;
- avg pool / adaptive avg pool: int32 window sum (zero padding counted, as count_include_pad),
  times `mul`, + 2^(s-1), >> s, clip;
- flatten: reshape; concat: each input (q + 2^(r-1)) >> r to the common exponent, then concatenate.
The batch is the inputs' (the IR's shapes carry the example batch).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from codesign.errors import ConfigError
from codesign.network.graph import Network, Op
from codesign.network.kernels import conv2d_int, conv2d_sums, linear_int, round_shift
from codesign.network.kinds import get
from codesign.network.quantized import QParams, QuantizedNetwork, dequantize, quantize_array

_round_shift = round_shift  # the name codesign.evaluate.fused imports


def _int_op(op: Op, p: QParams, xs: list[np.ndarray], frac: int = 0) -> np.ndarray:
    """One op of the integer network (`frac`: its output's fractional bits, for clamp bounds)."""
    return get(op.kind, op.where()).int_ref(op, p, xs, frac)


def _float_op(op: Op, xs: list[np.ndarray]) -> np.ndarray:
    return get(op.kind, op.where()).float_ref(op, xs)


def _bind(net: Network, inputs: Any) -> list[np.ndarray]:
    arrays = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    if len(arrays) != len(net.inputs):
        raise ConfigError(f"network {net.name!r} takes {len(net.inputs)} input(s), got {len(arrays)}")
    out = []
    for arr, (name, shape) in zip(arrays, net.inputs):
        arr = np.asarray(arr)
        if arr.shape[1:] != tuple(shape[1:]):
            raise ConfigError(f"network {net.name!r}: input {name!r} has shape {arr.shape}, expected "
                              f"(N, {', '.join(map(str, shape[1:]))})")
        out.append(arr)
    return out


def _chunks(net: Network, arrays: list[np.ndarray]) -> list[list[np.ndarray]]:
    """The inputs as one batch, or, for a network whose ops move the batch axis (`fixed_batch`),
    as chunks of its exported batch (every tensor of the chunks is then concatenated on axis 0)."""
    n = arrays[0].shape[0]
    if not net.fixed_batch or n == net.batch:
        return [arrays]
    if n % net.batch:
        raise ConfigError(f"network {net.name!r} runs at its exported batch {net.batch} (an op moves the batch "
                          f"axis); got {n} samples, not a multiple of it")
    return [[a[i:i + net.batch] for a in arrays] for i in range(0, n, net.batch)]


def _evaluate(net: Network, arrays: list[np.ndarray], one: Any) -> dict[str, np.ndarray]:
    envs = [one(chunk) for chunk in _chunks(net, arrays)]
    if len(envs) == 1:
        return envs[0]
    return {k: np.concatenate([e[k] for e in envs], axis=0) for k in envs[0]}


def int_op(qnet: QuantizedNetwork, op: Op, xs: list[np.ndarray]) -> np.ndarray:
    """One op of the integer network on int8 inputs `xs` (what a CPU step of a placed network runs)."""
    return _int_op(op, qnet.params.get(op.name, QParams()), xs, qnet.frac[op.name])


def run_int(qnet: QuantizedNetwork, inputs: Any, quantized: bool = False) -> dict[str, np.ndarray]:
    """Every tensor of the integer network (int8) on `inputs` (float arrays, quantized here with
    the inputs' exponents; or int8 arrays when `quantized`)."""
    net = qnet.network

    def one(arrays: list[np.ndarray]) -> dict[str, np.ndarray]:
        env: dict[str, np.ndarray] = {}
        for arr, (name, _) in zip(arrays, net.inputs):
            env[name] = arr.astype(np.int8) if quantized else quantize_array(arr, qnet.frac[name])
        for op in net.ops:
            env[op.name] = _int_op(op, qnet.params.get(op.name, QParams()), [env[t] for t in op.inputs],
                                   qnet.frac[op.name])
        return env

    return _evaluate(net, _bind(net, inputs), one)


def run_float(net: Network, inputs: Any) -> dict[str, np.ndarray]:
    """Every tensor of the float network (float64) on `inputs`."""
    if not net.has_weights:
        raise ConfigError(f"network {net.name!r} has no weights (built on the meta device)")

    def one(arrays: list[np.ndarray]) -> dict[str, np.ndarray]:
        env = {name: arr.astype(np.float64) for arr, (name, _) in zip(arrays, net.inputs)}
        for op in net.ops:
            env[op.name] = _float_op(op, [env[t] for t in op.inputs])
        return env

    return _evaluate(net, _bind(net, inputs), one)


def int_outputs(qnet: QuantizedNetwork, inputs: Any) -> list[np.ndarray]:
    """The network's outputs, dequantized (float64)."""
    env = run_int(qnet, inputs)
    return [dequantize(env[t], qnet.frac[t]) for t in qnet.network.outputs]


def sqnr_db(reference: np.ndarray, approx: np.ndarray) -> float:
    """Signal-to-quantization-noise ratio of `approx` against `reference` in dB: 10·log10(Σref² /
    Σ(approx-ref)²); inf when they are equal, 0 dB when the error is as large as the signal."""
    ref = np.asarray(reference, dtype=np.float64)
    err = np.asarray(approx, dtype=np.float64) - ref
    noise = float(np.sum(err * err))
    if noise == 0.0:
        return float("inf")
    return 10.0 * float(np.log10(max(float(np.sum(ref * ref)), 1e-300) / noise))


def op_sqnr(qnet: QuantizedNetwork, inputs: Any, after_relu: bool = False) -> dict[str, float]:
    """Per op, the SQNR (dB) of the integer network's dequantized output against the float
    network's on the same `inputs`: where quantization loses signal, op by op.

    `after_relu`: an op whose only consumer is a ReLU at its own exponent (a conv observed after
    its ReLU, `qplan`) is compared after that ReLU, as the network consumes it. Its int8 output
    clips negative values at the post-ReLU range, which the ReLU discards anyway: compared before
    the ReLU, a conv whose float output is mostly negative scores low for no loss downstream."""
    net = qnet.network
    ints, floats = run_int(qnet, inputs), run_float(net, inputs)
    out = {}
    for op in net.ops:
        ref, got = floats[op.name], dequantize(ints[op.name], qnet.frac[op.name])
        users = net.consumers(op.name)
        if after_relu and len(users) == 1 and users[0].kind == "relu" and qnet.frac[users[0].name] == qnet.frac[op.name]:
            ref, got = np.maximum(ref, 0.0), np.maximum(got, 0.0)
        out[op.name] = sqnr_db(ref, got)
    return out


def agreement(reference: np.ndarray, quantized: np.ndarray, labels: np.ndarray | None = None) -> dict[str, Any]:
    """Integer vs float outputs (N, classes): output SQNR, max abs error, top-1 agreement with the
    number of distinct classes the float model chose (agreement over inputs that all get one class
    says nothing: a model with random weights often does that), accuracies with labels."""
    ref, q = np.asarray(reference, dtype=np.float64), np.asarray(quantized, dtype=np.float64)
    out: dict[str, Any] = {"samples": int(ref.shape[0]), "max_abs_error": float(np.max(np.abs(ref - q))),
                           "output_range": float(np.max(np.abs(ref))), "sqnr_db": sqnr_db(ref, q)}
    if ref.ndim == 2 and ref.shape[1] > 1:
        top_ref, top_q = ref.argmax(1), q.argmax(1)
        out["top1_agreement"] = float(np.mean(top_ref == top_q))
        out["distinct_classes"] = int(len(np.unique(top_ref)))
        if labels is not None:
            out["accuracy_float"] = float(np.mean(top_ref == labels))
            out["accuracy_int"] = float(np.mean(top_q == labels))
    return out


__all__ = ["agreement", "conv2d_int", "conv2d_sums", "int_op", "int_outputs", "linear_int", "op_sqnr", "run_float",
           "run_int", "sqnr_db"]
