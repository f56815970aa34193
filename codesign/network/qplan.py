"""Exponents and integer parameters of a network from calibrated ranges (`plan`).

Every tensor is int8 with a power-of-two scale (`codesign.network.quantized`); each op kind's
`quant` rule (`codesign.network.kinds`) gives its output exponent and integer parameters from its
inputs' exponents and the ranges PT2E observed. Graph inputs take their observed range.
"""

from __future__ import annotations

from collections.abc import Mapping

from codesign.errors import ConfigError
from codesign.network.graph import Network
from codesign.network.kinds import QuantContext, get
from codesign.network.quantized import QParams, QuantizedNetwork, frac_bits


def plan(net: Network, amax: Mapping[str, float], per_channel: bool = False) -> QuantizedNetwork:
    """Exponents and integer parameters from calibrated ranges: `amax[tensor]` = max |x| observed
    for graph inputs and op outputs, `amax["<op>.weight"]` for weights. `per_channel`: GEMM
    weights get per-output-channel exponents, their per-tensor parameters kept as the fallback."""
    if not net.has_weights:
        raise ConfigError(f"network {net.name!r} has no weights (built on the meta device): build it with weights")
    ctx = QuantContext(net, amax, {}, per_channel)
    for name, _ in net.inputs:
        if name not in amax:
            raise ConfigError(f"no calibrated range for the graph input {name!r} of network {net.name!r}")
        ctx.frac[name] = frac_bits(amax[name])
    params: dict[str, QParams] = {}
    fallback: dict[str, QParams] = {}
    for op in net.ops:
        kind = get(op.kind, op.where())
        frac, p = kind.quant(ctx, op)
        ctx.frac[op.name] = frac
        if p != QParams() or p.weight is not None or p.table is not None:
            params[op.name] = p
        if p.shifts is not None:  # the same op per tensor: same output exponent (gemm.channel_quant)
            ctx.per_channel = False
            tensor_frac, fallback[op.name] = kind.quant(ctx, op)
            ctx.per_channel = True
            assert tensor_frac == frac, (op.name, tensor_frac, frac)
    return QuantizedNetwork(net, ctx.frac, params, fallback)


__all__ = ["plan"]
