"""Fusion groups: which ops of a network one VTA GEMM call can compute.

A GEMM op (a kind with `vta=GEMM`: conv2d, conv_transpose2d, linear) takes with it (its bias always):
- a ReLU or a clamp (relu6, hardtanh) that alone consumes it: the epilogue's last MIN/MAX with
  the clamp's bounds (MAX 0 for a ReLU);
- else a residual `add` that alone consumes it, when the add's other input is ready before the
  GEMM runs (a graph input or an earlier op's output: it is loaded into ACC), then a ReLU that
  alone consumes the add. Between the GEMM and the add may lie a chain of views that each alone
  consume the one before and keep every element (permute, reshape: a ViT block's out projection
  is viewed back to batch-first before its residual add): the epilogue adds the residual where
  the GEMM's output lies, so the residual is loaded in the GEMM's output order (the views
  inverted, `views`) and the add's output lies in the GEMM's packed buffer, behind the views.
The epilogue computes ReLU last, so a GEMM whose own output goes through a ReLU before an add
takes the ReLU only. A matmul of two activations (`MATMUL`: per batch entry a dense whose
weight is the second operand) takes a ReLU or a clamp, never an add (its residual would be per
entry too). Everything else is one op per group. `why_not_fused` says, for every relu
and add left alone, why no GEMM took it (shown as the op's reason).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from codesign.network import kinds
from codesign.network.graph import Network, Op
from codesign.network.kinds import REGISTRY
from codesign.network.kinds.base import GEMM

GEMM_KINDS = tuple(k.name for k in REGISTRY.values() if k.vta == GEMM)
MATMUL = "matmul"  # a GEMM kind without a bias or a fused residual add


@dataclass(frozen=True)
class Group:
    """Ops computed by one step, in order; `head` the first. For a GEMM group, `relu` and
    `add` / `residual` (the tensor the add reads besides the GEMM's output); `views`: the
    element-keeping views between the GEMM and its add (`ops[1:1 + len(views)]`)."""

    ops: tuple[Op, ...]
    relu: bool = False
    add: Op | None = None
    residual: str | None = None
    views: tuple[Op, ...] = ()

    @property
    def into_add(self) -> str:
        """The tensor the add reads from the GEMM (its output, or the last view of it)."""
        return (self.views[-1] if self.views else self.head).name

    @property
    def head(self) -> Op:
        return self.ops[0]

    @property
    def output(self) -> str:
        return self.ops[-1].name

    @property
    def kind(self) -> str:
        return "+".join(op.kind for op in self.ops)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(op.name for op in self.ops)

    def without_add(self) -> Group:
        """The GEMM alone (its views, if any, are then placed as views of its output)."""
        return Group(self.ops[:1])


def _is_clip(op: Op) -> bool:
    """A clip the epilogue's last MIN/MAX computes: ReLU, or a clamp to constant bounds."""
    return op.kind in ("relu", "clamp")


def _sole_user(net: Network, op: Op) -> Op | None:
    if op.name in net.outputs:
        return None
    users = net.consumers(op.name)
    return users[0] if len(users) == 1 else None


def _keeps_elements(net: Network, op: Op) -> bool:
    """A view that only reorders its one input's elements (a permute, a reshape): a bijection."""
    return (kinds.get(op.kind).view and len(op.inputs) == 1
            and math.prod(op.shape) == math.prod(net.shape(op.inputs[0])))


def _views_to_add(net: Network, op: Op) -> tuple[tuple[Op, ...], Op | None]:
    """(the element-keeping views, each the sole user of the one before, from `op` on; the sole
    user of the last of them, or of `op` when there are none)."""
    views: list[Op] = []
    user = _sole_user(net, op)
    while user is not None and _keeps_elements(net, user):
        views.append(user)
        user = _sole_user(net, user)
    return tuple(views), user


def groups(net: Network) -> tuple[list[Group], dict[str, str]]:
    """(groups in execution order, {op name: why no GEMM fused it} for lone relu/add ops)."""
    pos = {op.name: i for i, op in enumerate(net.ops)}
    inputs = {n for n, _ in net.inputs}
    taken: set[str] = set()
    out: list[Group] = []
    why: dict[str, str] = {}
    for i, op in enumerate(net.ops):
        if op.name in taken:
            continue
        if op.kind not in GEMM_KINDS:
            out.append(Group((op,)))
            continue
        user = _sole_user(net, op)
        views, past = _views_to_add(net, op) if op.kind != MATMUL else ((), None)
        group = Group((op,))
        if user is not None and _is_clip(user):
            group = Group((op, user), relu=True)
        elif past is not None and past.kind == "add" and len(set(past.inputs)) == 2:
            into = (views[-1] if views else op).name
            other = next(t for t in past.inputs if t != into)
            if other in inputs or pos.get(other, len(pos)) < i:
                after = _sole_user(net, past)
                if after is not None and _is_clip(after):
                    group = Group((op, *views, past, after), relu=True, add=past, residual=other, views=views)
                else:
                    group = Group((op, *views, past), add=past, residual=other, views=views)
        taken.update(group.names)
        out.append(group)
    for op in net.ops:
        if op.name in taken or op.kind not in ("relu", "clamp", "add"):
            continue
        producers = [net.op(t) for t in op.inputs if t not in inputs]
        gemms = [p for p in producers if p.kind in GEMM_KINDS]
        if op.kind == "add" and gemms:
            reasons = []
            for p in gemms:
                other = next((t for t in op.inputs if t != p.name), p.name)
                if p.kind == MATMUL:
                    reasons.append(f"{p.name} is a matrix product (its epilogue takes no residual add)")
                elif _sole_user(net, p) is not op:
                    reasons.append(f"{p.name}'s output has other consumers")
                elif other not in inputs and pos[other] > pos[p.name]:
                    reasons.append(f"{other} is computed after {p.name}")
                else:
                    reasons.append(f"{p.name} took a ReLU first")
            why[op.name] = "not fused: " + "; ".join(reasons)
        elif gemms:
            why[op.name] = f"not fused: {gemms[0].name}'s output has other consumers"
        else:
            why[op.name] = "not fused: its input is not a conv/dense/matmul output"
    return out, why


__all__ = ["GEMM_KINDS", "MATMUL", "Group", "groups"]
