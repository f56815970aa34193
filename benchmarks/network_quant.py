"""Whole-network import and quantization benchmark (codesign.network, issue 20 §1-2).

For each zoo network, or torchvision model re-implemented in `benchmarks/tv_models.py` (named
`tv:<name>`) (seeded random weights: the zoo has architectures, not trained weights):
`import_network` time and op counts, PT2E calibration + `plan` time on `--calibration` random
standard-normal images, the NumPy integer reference's seconds per image, and its agreement with
the float module on `--eval` other random images: output SQNR, the lowest per-op SQNR (which op
loses the most signal; and with an op observed after its ReLU compared after it, `op_sqnr`'s
`after_relu`), max abs error relative to the largest output, and top-1 agreement with
the number of distinct classes the float model chose — random weights often send every input to
one class, and then agreement says nothing. Random weights and inputs make this a check of the
integer arithmetic, not of a model's accuracy (tests/test_network.py trains one for that).

`--trained` judges a model whose accuracy means something instead: `DigitsTransformer`, a small
vision transformer trained here (seeded, ~10 s on one core) on scikit-learn's 8x8 digits (each
image 8 tokens of 8 pixels: a token-embedding linear, a positional embedding, two pre-norm encoder
blocks of two-head attention and a GELU MLP, a final LayerNorm, mean pool over the tokens, a
linear classifier), and `DigitsCNN`, the residual CNN of tests/conftest.py's `small_cnn` trained
as its `trained_digits` trains it (4 epochs). For each, on the held-back images (288 of 297: whole
batches of 16), per tensor and per channel: the float model's accuracy, the integer reference's,
their top-1 agreement, the output SQNR and every op's SQNR.

`--per-channel` quantizes conv / linear weights with per-output-channel power-of-two exponents
(`codesign.network.quantize(..., per_channel=True)`) instead of per tensor; `--trained` reports both.

Prints one JSON object. Usage: `python benchmarks/network_quant.py [--networks resnet18 tv:vit_b_16 ...]
[--calibration 8] [--eval 4] [--per-channel]` or `python benchmarks/network_quant.py --trained`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

TV_PREFIX = "tv:"
DIGITS_TRAIN = 1500    # of scikit-learn's 1,797 digits; the other 297 are held back
TRANSFORMER_EPOCHS = 20


class EncoderBlock(nn.Module):
    """Pre-norm transformer encoder block: x + attention(LN(x)), then x + MLP(LN(x)) with GELU."""

    def __init__(self, dim: int, heads: int, mlp: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Linear(mlp, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class DigitsTransformer(nn.Module):
    """A vision transformer for (N, 1, 8, 8) digits: the 8 image rows are the tokens."""

    def __init__(self, dim: int = 32, heads: int = 2, mlp: int = 64, blocks: int = 2) -> None:
        super().__init__()
        self.embed = nn.Linear(8, dim)
        self.pos = nn.Parameter(torch.zeros(1, 8, dim))
        self.blocks = nn.Sequential(*(EncoderBlock(dim, heads, mlp) for _ in range(blocks)))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = self.blocks(self.embed(x.reshape(x.shape[0], 8, 8)) + self.pos)
        return self.head(self.ln(t).mean(1))


class DigitsCNN(nn.Module):
    """A small CNN: conv-BN-ReLU stem, a residual block, max pool, average pool, a dense classifier
    (the tests' `small_cnn` and `trained_digits` are this model)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem, self.bn = nn.Conv2d(1, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16)
        self.c1, self.c2 = nn.Conv2d(16, 16, 3, 1, 1), nn.Conv2d(16, 16, 3, 1, 1)
        self.mp, self.ap = nn.MaxPool2d(2), nn.AvgPool2d(2)
        self.fc = nn.Linear(16 * 2 * 2, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn(self.stem(x)))
        y = torch.relu(self.c2(torch.relu(self.c1(y))) + y)
        return self.fc(torch.flatten(self.ap(self.mp(y)), 1))


def train_cnn(data: dict[str, np.ndarray], epochs: int = 4, seed: int = 0) -> nn.Module:
    """`DigitsCNN` trained as the tests' `trained_digits` (Adam lr 1e-2, batches of 50 in order)."""
    return _fit(DigitsCNN, data, 1e-2, epochs, seed, shuffle=False)


def _fit(make: type[nn.Module], data: dict[str, np.ndarray], lr: float, epochs: int, seed: int,
         shuffle: bool) -> nn.Module:
    """`make()` seeded with `seed`, trained with Adam at `lr` on batches of 50 (in order, or in a
    fresh permutation each epoch), in eval mode."""
    torch.manual_seed(seed)
    net = make()
    opt = torch.optim.Adam(net.parameters(), lr)
    x, y = torch.from_numpy(data["x_train"]), torch.from_numpy(data["y_train"])
    net.train()
    with _one_thread():
        for _ in range(epochs):
            order = torch.randperm(len(x)) if shuffle else torch.arange(len(x))
            for i in range(0, len(x), 50):
                batch = order[i:i + 50]
                loss = nn.functional.cross_entropy(net(x[batch]), y[batch])
                opt.zero_grad()
                loss.backward()
                opt.step()
    return net.eval()


def digits() -> dict[str, np.ndarray]:
    """scikit-learn's 8x8 digits scaled to [0, 1] as (N, 1, 8, 8), split by a seeded permutation
    into DIGITS_TRAIN training images and the rest held back (the split tests/conftest.py uses)."""
    from sklearn.datasets import load_digits

    data = load_digits()
    x = (data.images / 16.0).astype(np.float32)[:, None]
    y = data.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(x))
    train, test = order[:DIGITS_TRAIN], order[DIGITS_TRAIN:]
    return {"x_train": x[train], "y_train": y[train], "x_test": x[test], "y_test": y[test]}


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Train on one thread: on a shared 2-core machine torch's thread pool makes this tiny model's
    steps ~20x slower, not faster."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def train_transformer(data: dict[str, np.ndarray], epochs: int = TRANSFORMER_EPOCHS, seed: int = 0) -> nn.Module:
    """`DigitsTransformer` trained with Adam (lr 3e-3, batches of 50, shuffled per epoch), in eval mode."""
    return _fit(DigitsTransformer, data, 3e-3, epochs, seed, shuffle=True)


def judge(module: nn.Module, data: dict[str, np.ndarray], calibration: int = 512, batch: int = 16,
          **quant: Any) -> dict[str, Any]:
    """Quantize `module` on the first `calibration` training images (exported at `batch`) and judge
    the integer reference on the held-back images: float and integer accuracy, top-1 agreement,
    output SQNR, per-op SQNR (dB) and the lowest op."""
    from codesign.network import agreement, int_outputs, quantize
    from codesign.network.reference import op_sqnr

    example = (torch.from_numpy(data["x_test"][:batch]),)
    q = quantize(module, example, data["x_train"][:calibration], "digits", **quant)
    n = len(data["x_test"]) // batch * batch  # the integer network runs at its exported batch (attention)
    x, y = data["x_test"][:n], data["y_test"][:n]
    with torch.no_grad():
        ref = module(torch.from_numpy(x)).numpy()
    a = agreement(ref, int_outputs(q, x)[0], y)
    sqnr = op_sqnr(q, x)
    worst = min(sqnr, key=lambda k: sqnr[k])
    return {"samples": a["samples"], "accuracy_float": a["accuracy_float"], "accuracy_int": a["accuracy_int"],
            "top1_agreement": a["top1_agreement"], "distinct_float_classes": a["distinct_classes"],
            "output_sqnr_db": round(a["sqnr_db"], 2), "lowest_op_sqnr_db": round(sqnr[worst], 2),
            "lowest_sqnr_op": worst, "op_sqnr_db": {k: round(v, 2) for k, v in sqnr.items()}}


def trained() -> dict[str, Any]:
    """Both trained models, each judged per tensor and per channel."""
    data = digits()
    rows = []
    for name, train in (("DigitsTransformer", train_transformer), ("DigitsCNN", train_cnn)):
        t0 = time.perf_counter()
        module = train(data)
        rows.append({"model": name, "train_s": round(time.perf_counter() - t0, 2), "per_tensor": judge(module, data),
                     "per_channel": judge(module, data, per_channel=True)})
    return {"trained": rows}


def load(name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...], str]:
    """A zoo network (seeded weights), or `tv:<name>` from benchmarks/tv_models.py."""
    from codesign.network import load_model

    if name.startswith(TV_PREFIX):
        sys.path.insert(0, str(Path(__file__).resolve().parent))  # tv_models next to this file
        from tv_models import MODELS

        module, inputs = MODELS[name[len(TV_PREFIX):]]()
        return module.eval(), tuple(inputs), name
    return load_model(name, seed=0)


def bench(name: str, n_cal: int, n_eval: int, per_channel: bool = False) -> dict:
    from codesign.network import agreement, import_network, int_outputs, quantize
    from codesign.network.reference import op_sqnr

    module, inputs, key = load(name)
    t0 = time.perf_counter()
    net = import_network(module, inputs, key)
    t_import = time.perf_counter() - t0
    shape = tuple(inputs[0].shape[1:])
    cal = np.random.default_rng(1).standard_normal((n_cal, *shape)).astype(np.float32)
    x = np.random.default_rng(2).standard_normal((n_eval, *shape)).astype(np.float32)
    t0 = time.perf_counter()
    q = quantize(module, inputs, cal, key, per_channel=per_channel)
    t_quant = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = int_outputs(q, x)[0]
    t_int = (time.perf_counter() - t0) / n_eval
    with torch.no_grad():
        ref = module(torch.from_numpy(x)).numpy()
    a = agreement(ref, out)
    sqnr = op_sqnr(q, x)
    worst = min(sqnr, key=lambda k: sqnr[k])
    consumed = op_sqnr(q, x, after_relu=True)
    worst_consumed = min(consumed, key=lambda k: consumed[k])
    # How far apart the float top-2 logits are, in output LSBs: below ~1 LSB top-1 is a coin toss
    # (random weights without batch norm give near-constant logits, e.g. MobileNet).
    top2 = np.sort(ref, axis=1)[:, -2:]
    gap = float(np.median((top2[:, 1] - top2[:, 0]) / q.scale(q.network.outputs[0])))
    return {"network": key, "weights": "per channel" if per_channel else "per tensor", "ops": len(net.ops), "counts": net.counts(), "gmacs": round(net.macs / 1e9, 3),
            "import_s": round(t_import, 2), "calibrate_s": round(t_quant, 2), "int_reference_s_per_image": round(t_int, 2),
            "output_sqnr_db": round(a["sqnr_db"], 2), "lowest_op_sqnr_db": round(sqnr[worst], 2), "lowest_sqnr_op": worst,
            "lowest_op_sqnr_after_relu_db": round(consumed[worst_consumed], 2),
            "lowest_sqnr_op_after_relu": worst_consumed,
            "top1_agreement": a.get("top1_agreement"), "distinct_float_classes": a.get("distinct_classes"),
            "top2_gap_lsb_median": round(gap, 2),
            "max_abs_error": a["max_abs_error"],
            "relative_max_abs_error": a["max_abs_error"] / a["output_range"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--networks", nargs="+", default=["resnet18"])
    ap.add_argument("--calibration", type=int, default=8, help="calibration images")
    ap.add_argument("--eval", type=int, default=4, help="images compared with the float module")
    ap.add_argument("--per-channel", action="store_true", help="per-output-channel weight exponents")
    ap.add_argument("--trained", action="store_true", help="judge the digits transformer trained here instead")
    args = ap.parse_args()
    if args.trained:
        print(json.dumps(trained(), indent=1))
        return
    print(json.dumps({"networks": [bench(n, args.calibration, args.eval, args.per_channel) for n in args.networks]},
                     indent=1))


if __name__ == "__main__":
    main()
