"""Whole-network import and quantization benchmark (codesign.network, issue 20 §1-2).

For each zoo network (seeded random weights: the zoo has architectures, not trained weights):
`import_network` time and op counts, PT2E calibration + `plan` time on `--calibration` random
standard-normal images, the NumPy integer reference's seconds per image, and its agreement with
the float module on `--eval` other random images: output SQNR, the lowest per-op SQNR (which op
loses the most signal), max abs error relative to the largest output, and top-1 agreement with
the number of distinct classes the float model chose — random weights often send every input to
one class, and then agreement says nothing. Random weights and inputs make this a check of the
integer arithmetic, not of a model's accuracy (tests/test_network.py trains one for that).

Prints one JSON object. Usage: `python benchmarks/network_quant.py [--networks resnet18 ...]
[--calibration 8] [--eval 4]`.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def bench(name: str, n_cal: int, n_eval: int) -> dict:
    import torch  # heavy; the benchmark needs it

    from codesign.network import agreement, import_network, int_outputs, load_model, quantize
    from codesign.network.reference import op_sqnr

    module, inputs, key = load_model(name, seed=0)
    t0 = time.perf_counter()
    net = import_network(module, inputs, key)
    t_import = time.perf_counter() - t0
    shape = tuple(inputs[0].shape[1:])
    cal = np.random.default_rng(1).standard_normal((n_cal, *shape)).astype(np.float32)
    x = np.random.default_rng(2).standard_normal((n_eval, *shape)).astype(np.float32)
    t0 = time.perf_counter()
    q = quantize(module, inputs, cal, key)
    t_quant = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = int_outputs(q, x)[0]
    t_int = (time.perf_counter() - t0) / n_eval
    with torch.no_grad():
        ref = module(torch.from_numpy(x)).numpy()
    a = agreement(ref, out)
    sqnr = op_sqnr(q, x)
    worst = min(sqnr, key=lambda k: sqnr[k])
    # How far apart the float top-2 logits are, in output LSBs: below ~1 LSB top-1 is a coin toss
    # (random weights without batch norm give near-constant logits, e.g. MobileNet).
    top2 = np.sort(ref, axis=1)[:, -2:]
    gap = float(np.median((top2[:, 1] - top2[:, 0]) / q.scale(q.network.outputs[0])))
    return {"network": key, "ops": len(net.ops), "counts": net.counts(), "gmacs": round(net.macs / 1e9, 3),
            "import_s": round(t_import, 2), "calibrate_s": round(t_quant, 2), "int_reference_s_per_image": round(t_int, 2),
            "output_sqnr_db": round(a["sqnr_db"], 2), "lowest_op_sqnr_db": round(sqnr[worst], 2), "lowest_sqnr_op": worst,
            "top1_agreement": a.get("top1_agreement"), "distinct_float_classes": a.get("distinct_classes"),
            "top2_gap_lsb_median": round(gap, 2),
            "max_abs_error": a["max_abs_error"],
            "relative_max_abs_error": a["max_abs_error"] / a["output_range"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--networks", nargs="+", default=["resnet18"])
    ap.add_argument("--calibration", type=int, default=8, help="calibration images")
    ap.add_argument("--eval", type=int, default=4, help="images compared with the float module")
    args = ap.parse_args()
    print(json.dumps({"networks": [bench(n, args.calibration, args.eval) for n in args.networks]}, indent=1))


if __name__ == "__main__":
    main()
