"""Quantization the PyTorch way: torchao's PT2E flow with a VTA `Quantizer`.

`quantize(module, example_inputs, calibration)` exports the module, runs torchao's
`prepare_pt2e` with `VTAQuantizer` (which also folds batch norm into convs), feeds the
calibration batches through the observers, and reads the observed ranges into the integer
network of `codesign.network.quantized.plan` -- so a user quantizes for VTA the way they do for
an ExecuTorch backend, and `convert_pt2e` on the same prepared model gives torch's own Q/DQ model.

VTAQuantizer annotates int8 symmetric per-tensor specs with power-of-two scales
(`PowerOfTwoMinMaxObserver`): graph inputs; conv2d and linear (weights, and the output -- after
the ReLU that alone consumes it, as XNNPACK's quantizer does for conv-relu); residual adds. ReLU,
pools, flatten and concat keep or derive their input's scale (the module doc of `quantized`).
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
from typing import Any

import numpy as np

from codesign.errors import ConfigError
from codesign.network.importer import aten_name, check_inputs, export_module, walk
from codesign.network.kinds import REGISTRY
from codesign.network.qplan import plan
from codesign.network.quantized import QuantizedNetwork, frac_bits
from codesign.network.reference import run_float

RELU_OPS = ("relu",)


@contextlib.contextmanager
def _quiet() -> Any:
    """torchao logs a warning per optional CUDA kernel library it cannot load on a CPU machine."""
    loggers = [logging.getLogger(n) for n in ("torchao", "torch")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _torchao() -> Any:
    try:
        with _quiet():
            from torchao.quantization.pt2e import observer, quantize_pt2e, quantizer  # heavy
    except ImportError as exc:
        raise ConfigError(f"quantization needs torchao (pip install 'torchao>=0.18'): {exc}") from None
    return observer, quantize_pt2e, quantizer


def observed(node: Any) -> Any:
    """The op kind whose output PT2E observes for `node` (`OpKind.observe`), or None."""
    if node.op != "call_function":
        return None
    name = aten_name(node)
    return next((k for k in REGISTRY.values() if k.observe and name in k.aten), None)


def vta_quantizer() -> Any:
    """A torchao PT2E `Quantizer` for VTA (class built on first use: torchao is heavy)."""
    import torch  # heavy; only quantization needs it

    observer, _, qz = _torchao()

    class PowerOfTwoMinMaxObserver(observer.MinMaxObserver):
        """MinMax, symmetric int8, scale rounded up to a power of two (VTA requantizes by shift)."""

        def calculate_qparams(self) -> tuple[Any, Any]:
            amax = float(torch.max(self.min_val.abs(), self.max_val.abs()))
            scale = torch.tensor([2.0 ** -frac_bits(amax)], dtype=torch.float32)
            return scale, torch.zeros(1, dtype=torch.int32)

    spec = qz.QuantizationSpec(dtype=torch.int8, quant_min=-128, quant_max=127, qscheme=torch.per_tensor_symmetric,
                               is_dynamic=False, observer_or_fake_quant_ctr=PowerOfTwoMinMaxObserver)

    class VTAQuantizer(qz.Quantizer):
        def annotate(self, model: Any) -> Any:
            for node in model.graph.nodes:
                if node.op == "placeholder" and node.users:
                    node.meta["quantization_annotation"] = qz.QuantizationAnnotation(output_qspec=spec, _annotated=True)
                kind = observed(node)
                if kind is None:
                    continue
                inputs = {}
                if kind.weight_arg is not None and len(node.args) > kind.weight_arg:
                    inputs[node.args[kind.weight_arg]] = spec  # the weight
                users = list(node.users)
                out = node
                if len(users) == 1 and aten_name(users[0]) in RELU_OPS:  # conv-relu: observe after the ReLU
                    out = users[0]
                    node.meta["quantization_annotation"] = qz.QuantizationAnnotation(
                        input_qspec_map=inputs, _annotated=True)
                    out.meta["quantization_annotation"] = qz.QuantizationAnnotation(output_qspec=spec, _annotated=True)
                else:
                    node.meta["quantization_annotation"] = qz.QuantizationAnnotation(
                        input_qspec_map=inputs, output_qspec=spec, _annotated=True)
            return model

        def validate(self, model: Any) -> None:
            pass

    return VTAQuantizer()


def calibration_batches(calibration: np.ndarray | None, example_inputs: tuple[Any, ...], what: str,
                        size: int) -> list[tuple]:
    """Calibration inputs as batches of torch tensors (at most `size` samples each): the array
    (N, *example shape[1:]), or the example inputs themselves."""
    import torch  # heavy; only quantization needs it

    if calibration is None:
        return [tuple(example_inputs)]
    if len(example_inputs) != 1:
        raise ConfigError(f"{what}: --calibration gives one input array; the network takes {len(example_inputs)} inputs")
    want = tuple(example_inputs[0].shape[1:])
    arr = np.asarray(calibration)
    if arr.ndim != len(want) + 1 or tuple(arr.shape[1:]) != want or arr.shape[0] < 1:
        raise ConfigError(f"{what}: calibration data has shape {arr.shape}, expected (N, {', '.join(map(str, want))}) "
                          f"like the example input {tuple(example_inputs[0].shape)}")
    t = torch.as_tensor(arr.astype(np.float32))
    size = min(size, t.shape[0])
    # The exported graph is specialized to one batch size: the last batch is filled up with its
    # own first samples (repeats change no min/max range).
    batches = []
    for i in range(0, t.shape[0], size):
        chunk = t[i:i + size]
        reps = -(-size // chunk.shape[0])
        batches.append((chunk.repeat(reps, *([1] * (chunk.dim() - 1)))[:size],))
    return batches


def _amax(obs: Any) -> float:
    lo, hi = float(obs.min_val), float(obs.max_val)
    return max(abs(lo), abs(hi)) if math.isfinite(lo) and math.isfinite(hi) else 0.0


def quantize(module: Any, example_inputs: Any, calibration: np.ndarray | None = None,
             name: str = "network", per_channel: bool = False) -> QuantizedNetwork:
    """The integer network of `module`, calibrated on `calibration` (else the example inputs);
    `per_channel`: per-output-channel weight exponents for conv / linear (`quantized` module doc)."""
    return prepare_and_calibrate(module, example_inputs, calibration, name, per_channel)[1]


def prepare_and_calibrate(module: Any, example_inputs: Any, calibration: np.ndarray | None = None,
                          name: str = "network", per_channel: bool = False) -> tuple[Any, QuantizedNetwork]:
    """(the calibrated PT2E model, its integer network). torchao's `convert_pt2e` turns the first
    into torch's own quantize/dequantize model with the same power-of-two scales (at the exported
    batch size: `calibration_batches`)."""
    import torch  # heavy; only quantization needs it

    what = f"network {name!r}"
    inputs = check_inputs(example_inputs, what)
    # Exported and calibrated at the example inputs' batch, so the integer network has the shapes
    # it runs with (a network whose ops move the batch axis runs only at its exported batch).
    batches = calibration_batches(calibration, inputs, what, size=len(inputs[0]))
    gm = export_module(module, batches[0], what)
    _, pt2e, _ = _torchao()
    with _quiet():
        prepared = pt2e.prepare_pt2e(gm, vta_quantizer())
    with torch.no_grad():
        for batch in batches:
            prepared(*batch)
    observers: dict[str, Any] = {}
    net = walk(prepared, what, observers)
    amax = {k: _amax(v) for k, v in observers.items()}
    return prepared, plan(net, {**amax, **unobserved_ranges(net, amax, batches)}, per_channel)


def unobserved_ranges(net: Any, amax: dict[str, float], batches: list[tuple]) -> dict[str, float]:
    """max |x| on the calibration batches, by the float IR, of the ops whose kind asks to be
    observed but that no fx node is (the intermediates of a node decomposed into several ops:
    attention's scores and softmax); PT2E's observers see the same float values."""
    missing = [op.name for op in net.ops if REGISTRY[op.kind].observe and op.name not in amax]
    out = dict.fromkeys(missing, 0.0)
    for batch in batches if missing else ():
        env = run_float(net, [t.detach().cpu().numpy() for t in batch])
        out.update({name: max(out[name], float(np.max(np.abs(env[name])))) for name in missing})
    return out


def convert(prepared: Any) -> Any:
    """torch's own quantize/dequantize model of a calibrated PT2E model (torchao `convert_pt2e`):
    the ExecuTorch-style artifact, with the scales the integer network uses."""
    _, pt2e, _ = _torchao()
    with _quiet():
        return pt2e.convert_pt2e(prepared)
