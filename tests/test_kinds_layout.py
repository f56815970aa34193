"""Data-movement and reduction kinds (codesign.network.kinds.layout, .shape, .pool): permute, reshape,
slices and multi-output items, stack, expand, pad, nearest upsample, sum / mean over any dims,
adaptive pools of any size. Each network goes through `run_net` on pynq_1x16: every op bit-exact
against its integer reference, the float reference equal to torch, SQNR above the floor."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from codesign.errors import ConfigError
from codesign.network import REGISTRY, import_network
from codesign.network.kinds.layout import nearest_index
from codesign.network.kinds.pool import adaptive_windows
from codesign.network.reference import run_float, run_int


@pytest.fixture(autouse=True)
def _seeded_weights() -> None:
    torch.manual_seed(0)  # the modules' initial weights: every test sees the same network


def rand(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def kinds_of(prep) -> dict[str, int]:
    return prep.network.counts()


def placement(prep, kind: str) -> set[str]:
    return {prep.plan.step_of(op.name).placement for op in prep.network.ops if op.kind == kind}


class ShuffleUnit(nn.Module):
    """A ShuffleNet-v2 unit (stride 1): channel split, 1x1 conv, depthwise 3x3, 1x1 conv, concat,
    channel shuffle by view / transpose / view."""

    def __init__(self, c: int = 32) -> None:
        super().__init__()
        h = c // 2
        self.branch = nn.Sequential(nn.Conv2d(h, h, 1, bias=False), nn.BatchNorm2d(h), nn.ReLU(),
                                    nn.Conv2d(h, h, 3, padding=1, groups=h, bias=False), nn.BatchNorm2d(h),
                                    nn.Conv2d(h, h, 1, bias=False), nn.BatchNorm2d(h), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = x.chunk(2, dim=1)
        y = torch.cat([a, self.branch(b)], dim=1)
        n, c, h, w = y.shape
        return y.view(n, 2, c // 2, h, w).transpose(1, 2).contiguous().view(n, c, h, w)


def test_shufflenet_unit_at_another_batch(run_net):
    """Calibrated at batch 8 (the graph is exported there), run at batch 2: the split's slices,
    the shuffle's reshapes and permute keep the batch axis first, so `at_batch` needs no rewrite."""
    calib = rand(8, 32, 8, 8).numpy()
    prep, exe = run_net(ShuffleUnit(), (torch.from_numpy(calib[:2]),), calibration=calib)
    counts = kinds_of(prep)
    assert counts["slice"] == 2 and counts["permute"] == 1 and counts["flatten"] == 2 and counts["concat"] == 1
    perm = next(op for op in prep.network.ops if op.kind == "permute")
    assert perm.attrs["dims"] == (0, 2, 1, 3, 4) and perm.shape[0] == 2
    a = next(op for op in prep.network.ops if op.kind == "slice")
    assert prep.qnet.frac[a.name] == prep.qnet.frac[a.inputs[0]]  # a slice keeps its input's exponent
    assert not REGISTRY["slice"].layout_free(prep.network, a)  # channels cut across VTA's blocks
    # the shuffle is a pure permutation of the concat's values
    env = exe.env
    cat = next(op.name for op in prep.network.ops if op.kind == "concat")
    shuffled = env[cat].reshape(2, 2, 16, 8, 8).transpose(0, 2, 1, 3, 4).reshape(2, 32, 8, 8)
    np.testing.assert_array_equal(env[prep.network.outputs[0]], shuffled)


class PatchTokens(nn.Module):
    """ViT-style: patch conv, (N, C, H, W) -> flatten(2) -> transpose(1, 2) -> linear on tokens,
    then the mean over tokens."""

    def __init__(self, mean: bool) -> None:
        super().__init__()
        self.patch, self.fc, self.mean = nn.Conv2d(16, 16, 2, stride=2), nn.Linear(16, 16), mean

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = self.fc(self.patch(x).flatten(2).transpose(1, 2))
        return t.mean(1) if self.mean else t


@pytest.mark.parametrize("mean", [False, True])
def test_vit_patch_flatten_transpose(run_net, mean):
    prep, _ = run_net(PatchTokens(mean), (rand(2, 16, 8, 8),))
    perm = next(op for op in prep.network.ops if op.kind == "permute")
    assert perm.attrs["dims"] == (0, 2, 1) and perm.shape == (2, 16, 16)
    if mean:  # mean over the tokens (dim 1 of (N, L, D)): the reduction kind, 16 = 2^4 -> >> 4
        red = next(op for op in prep.network.ops if op.kind == "mean")
        assert red.attrs == {"dims": (1,), "keepdim": False}
        assert (prep.qnet.params[red.name].mul, prep.qnet.params[red.name].shift) == (1, 4)


class Reduce(nn.Module):
    def __init__(self, how: str, dim: int | tuple[int, ...], keepdim: bool) -> None:
        super().__init__()
        self.conv, self.how, self.dim, self.keepdim = nn.Conv2d(16, 16, 3, padding=1), how, dim, keepdim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return y.mean(self.dim, keepdim=self.keepdim) if self.how == "mean" else y.sum(self.dim, keepdim=self.keepdim)


@pytest.mark.parametrize(("how", "dim", "keepdim", "count", "floor"), [
    ("mean", 1, True, 16, 15), ("mean", -1, False, 6, 15), ("sum", 1, False, 16, 15), ("sum", -1, True, 6, 15),
    # a mean keeps its input's exponent (as the average pools): the mean of 96 mixed-sign values is
    # several times smaller than they are, so bits of it are lost (measured 21.3 dB; 13 dB on other weights)
    ("mean", (1, 3), False, 96, 12)])
def test_mean_and_sum_over_any_dims(run_net, how, dim, keepdim, count, floor):
    prep, exe = run_net(Reduce(how, dim, keepdim), (rand(2, 16, 6, 6),), min_sqnr_db=floor)
    op = next(o for o in prep.network.ops if o.kind == how)
    p, fin = prep.qnet.params.get(op.name), prep.qnet.frac[op.inputs[0]]
    x = exe.env[op.inputs[0]].astype(np.int64).sum(axis=op.attrs["dims"], keepdims=keepdim)
    if how == "mean":  # the avg pool's rule: (mul, shift) of the count, exponent kept
        assert prep.qnet.frac[op.name] == fin and (p.mul, p.shift) == ((1, 4) if count == 16 else
                                                                      (round(2 ** 16 / count), 16))
        want = np.clip((x * p.mul + (1 << p.shift - 1)) >> p.shift, -128, 127)
    else:  # observed exponent, rounded shift of the int32 sum
        shift = p.shift if p is not None else 0
        assert prep.qnet.frac[op.name] == fin - shift
        want = np.clip((x + (1 << shift - 1 if shift else 0)) >> shift, -128, 127)
    np.testing.assert_array_equal(exe.env[op.name], want)


class PadConv(nn.Module):
    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode, self.conv = mode, nn.Conv2d(16, 16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.pad(x, (1, 2, 0, 1), mode=self.mode) if self.mode == "constant"
                         else F.pad(x, (1, 1, 1, 1), mode=self.mode))


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate"])
def test_pad_then_conv(run_net, mode):
    prep, exe = run_net(PadConv(mode), (rand(1, 16, 6, 6),))
    pad = next(op for op in prep.network.ops if op.kind == "pad")
    assert REGISTRY["pad"].layout_free(prep.network, pad)  # H, W only: VTA's blocks kept
    if mode == "constant":
        assert pad.attrs["pads"] == ((0, 0), (0, 0), (0, 1), (1, 2)) and pad.shape == (1, 16, 7, 9)
        out = exe.env[pad.name]
        assert not out[:, :, -1].any() and not out[:, :, :, :1].any() and not out[:, :, :, -2:].any()  # 0 is 0
    np.testing.assert_array_equal(exe.env[pad.name][:, :, :6, 1:7] if mode == "constant"
                                  else exe.env[pad.name][:, :, 1:7, 1:7], exe.env[pad.inputs[0]])


class UpConv(nn.Module):
    def __init__(self, interpolate: bool) -> None:
        super().__init__()
        self.up = (lambda x: F.interpolate(x, scale_factor=2, mode="nearest")) if interpolate else \
            nn.UpsamplingNearest2d(scale_factor=2)
        self.conv = nn.Conv2d(16, 16, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(self.up(x))


@pytest.mark.parametrize("interpolate", [True, False])
def test_nearest_upsample_then_conv(run_net, interpolate):
    prep, exe = run_net(UpConv(interpolate), (rand(1, 16, 4, 4),))
    up = next(op for op in prep.network.ops if op.kind == "upsample_nearest")
    assert REGISTRY["upsample_nearest"].layout_free(prep.network, up)  # H, W only: VTA's blocks kept
    x = exe.env[up.inputs[0]]
    np.testing.assert_array_equal(exe.env[up.name], x.repeat(2, axis=2).repeat(2, axis=3))


class AdaptivePools(nn.Module):
    def __init__(self, size: int, how: str) -> None:
        super().__init__()
        self.conv, self.size, self.how = nn.Conv2d(16, 16, 3, padding=1), size, how

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.conv(x))
        return F.adaptive_avg_pool2d(y, self.size) if self.how == "avg" else F.adaptive_max_pool2d(y, self.size)


@pytest.mark.parametrize(("size", "how", "kind"), [
    (3, "avg", "adaptive_avg_pool2d_uneven"), (3, "max", "adaptive_max_pool2d"), (7, "avg", "adaptive_avg_pool2d")])
def test_adaptive_pools_of_any_size(run_net, size, how, kind):
    """7 -> 3: windows [0,3) [2,5) [4,7) of 3 (overlapping); 7 -> 7 equal windows (the VTA kind)."""
    prep, exe = run_net(AdaptivePools(size, how), (rand(2, 16, 7, 7),))
    op = next(o for o in prep.network.ops if o.kind not in ("conv2d", "relu"))
    assert op.kind == kind and op.attrs["output_size"] == (size, size)
    if kind == "adaptive_avg_pool2d_uneven":
        assert adaptive_windows(7, 3) == [(0, 3), (2, 5), (4, 7)]
        x = exe.env[op.inputs[0]].astype(np.int64)
        s = x[:, :, 2:5, 4:7].sum(axis=(2, 3))  # window (1, 2): 9 elements -> (s·7282 + 2^15) >> 16
        np.testing.assert_array_equal(exe.env[op.name][:, :, 1, 2], np.clip((s * 7282 + (1 << 15)) >> 16, -128, 127))


def test_adaptive_max_pool_of_equal_windows_is_a_vta_max_pool(run_net):
    prep, _ = run_net(AdaptivePools(4, "max"), (rand(1, 16, 8, 8),))
    op = next(o for o in prep.network.ops if o.kind == "max_pool2d")
    assert op.attrs["kernel"] == (2, 2) == op.attrs["stride"]
    assert "vta" in prep.plan.step_of(op.name).alternatives  # VTA's ALU can pool it (cost decides where)


class StackUnbind(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(16, 16, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = self.conv(x).unbind(2)                       # 4 x (N, 16, 4)
        flipped = torch.stack(rows[::-1], dim=2)            # (N, 16, 4, 4)
        picked = torch.stack([x[:, :, 1], x.select(2, 3), x[:, :, 0, :]], dim=2)  # (N, 16, 3, 4)
        return torch.cat([flipped, picked, x[:, :, :1].expand(-1, -1, 2, -1)], dim=2)


def test_stack_unbind_select(run_net):
    prep, exe = run_net(StackUnbind(), (rand(2, 16, 4, 4),))
    counts = kinds_of(prep)
    assert counts["stack"] == 2 and counts["slice"] == 4 + 3 + 1 and counts["expand"] == 1  # x[:, :, 0, :]: 1 op
    conv = next(op.name for op in prep.network.ops if op.kind == "conv2d")
    flip = next(op for op in prep.network.ops if op.kind == "stack")
    assert prep.qnet.params[flip.name].in_shifts == (0, 0, 0, 0)  # all rows of one tensor: one exponent
    np.testing.assert_array_equal(exe.env[flip.name], exe.env[conv][:, :, ::-1])
    picked = [op for op in prep.network.ops if op.kind == "stack"][1]  # rows of the input: its exponent
    assert prep.qnet.frac[picked.name] == prep.qnet.frac["x"]
    np.testing.assert_array_equal(exe.env[picked.name], exe.env["x"][:, :, [1, 3, 0]])


class Module(nn.Module):
    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)


@pytest.mark.parametrize(("fn", "op", "why"), [
    (lambda x: x.sum(), r"aten\.sum\.default at node 'sum'", "a sum over every axis"),
    (lambda x: x.mean(0), r"aten\.mean\.dim at node 'mean'", "a mean over the batch axis"),
])
def test_batch_axis_ops_are_one_line_errors(fn, op, why):
    op = op.removesuffix("'") + r"(_\d+)?'"  # export numbers repeated node names
    with pytest.raises(ConfigError, match=rf"{op} \(module <root>: Module\) cannot be represented: {why}") as e:
        import_network(Module(fn), (rand(2, 16, 4, 4),))
    assert "\n" not in str(e.value)


class SequenceFirst(nn.Module):
    """nn.MultiheadAttention's layout moves: the batch to axis 1 and back, heads folded into axis 0."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, t, c = x.shape
        y = self.fc(x.transpose(0, 1))                              # (T, N, C)
        y = y.reshape(t, n * 2, c // 2).transpose(0, 1)             # (N·2, T, C/2): batch and heads on axis 0
        y = torch.relu(y[: n * 2 : 2] + y[1 : n * 2 : 2])           # slices of axis 0
        return y.reshape(n, t, c // 2)


def test_ops_that_move_the_batch_axis_fix_the_batch(run_net):
    """They import (`fixed_batch`), run bit-exact at the exported batch, and the references take
    another batch in chunks of it (the same values as one chunk at a time)."""
    torch.manual_seed(0)
    prep, _ = run_net(SequenceFirst(), rand(2, 8, 16), min_sqnr_db=20.0)
    net = prep.network
    assert net.fixed_batch and net.batch == 2
    x = np.random.default_rng(3).standard_normal((6, 8, 16)).astype(np.float32)
    whole = run_int(prep.qnet, x)[net.outputs[0]]
    parts = [run_int(prep.qnet, x[i:i + 2])[net.outputs[0]] for i in range(0, 6, 2)]
    np.testing.assert_array_equal(whole, np.concatenate(parts))
    with pytest.raises(ConfigError, match="runs at its exported batch 2 .* got 3 samples"):
        run_int(prep.qnet, x[:3])


@pytest.mark.parametrize("fn", [
    lambda x: F.interpolate(x, scale_factor=1.5, mode="nearest"),
    lambda x: F.interpolate(x, size=(7, 5), mode="nearest"),
    lambda x: F.interpolate(x, size=(9, 11), mode="nearest-exact"),
    lambda x: F.interpolate(x, scale_factor=2, mode="nearest-exact"),
    lambda x: F.pad(x, (2, 1, 1, 2), mode="circular"),
    lambda x: F.pad(x, (1, 0, 0, 1), value=0.25),
    lambda x: x.movedim(1, -1).mT,
    lambda x: x.repeat(1, 2, 1, 3) + x.unflatten(1, (1, 3)).flatten(1, 2).repeat(1, 2, 1, 3),
    lambda x: torch.split(x, [1, 3, 2], dim=2)[2] + x.chunk(3, dim=3)[1].transpose(2, 3),
    lambda x: F.adaptive_avg_pool2d(x, (4, 5)) + F.adaptive_max_pool2d(x, (4, 5)),
])
def test_float_references_equal_torch(fn):
    """The gathers' index rules (nearest, nearest-exact, pads, adaptive windows) as torch's."""
    x = rand(2, 3, 6, 6)
    net = import_network(Module(fn), (x,))
    np.testing.assert_allclose(run_float(net, x.numpy())[net.outputs[0]], fn(x).numpy(), rtol=1e-6, atol=1e-6)


def test_nearest_index_is_atens():
    assert nearest_index(6, 4, 1.5, False).tolist() == [0, 0, 1, 2, 2, 3]
    assert nearest_index(8, 4, None, False).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
