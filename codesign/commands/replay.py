"""`codesign replay LOG`: re-simulate AutoTVM records and compare with the measured times."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from tqdm import tqdm

from codesign.calibrate.cpu_replay import is_arm_cpu_log, replay_cpu
from codesign.calibrate.profiles import hw_warning, load_profile, resolve_params, transfer_line
from codesign.calibrate.replay import replay
from codesign.cpu import CpuModel
from codesign.errors import ConfigError
from codesign.hw.config import HwConfig

DESCRIPTION = """\
Replay an AutoTVM v0.2 log (conv2d_packed.vta / dense_packed.vta records, any VTA hardware
config named by the target's -model=), or a v0.1 log (TVM 2018: topi_nn_conv2d records whose
-model= names a board or `sim`: the config is the one --hw names, else the shipped config the
tensor shapes use), on the timing model: each record's layer, hardware and
schedule are rebuilt from the log, the config index is recomputed, the schedule is checked
against VTA's rules, and the program is simulated in timing mode. Prints per record the
measured and predicted seconds, then MAPE and Spearman rank correlation. Records that cannot
be used (other templates, failed measurements, malformed lines) are skipped with a reason; a log
with no usable record is an error (exit status 2).

A log of TVM arm_cpu records (target -device=arm_cpu, e.g. tophub's arm_cpu_v0.08.log) is
replayed on the CPU cost model instead (docs/cpu-model.md): per record the kernel kind, dtype,
measured and predicted seconds; MAPE and Spearman rho per CPU and per kernel kind.
"""

EPILOG = """\
examples:
  codesign replay sim/calibration/pynq_resnet18.log
  codesign replay sim/calibration/pynq_resnet18.log --json | jq .summary
  codesign replay my_tuning.log --params my_timing_params.json
  codesign replay session.log --profile tophub-2019            # a calibration profile
  codesign replay sim/calibration/pynq_resnet18.log --rank   # does the model rank tuned configs first?
  codesign replay sim/calibration/arm_cpu_pynq_ultra96.log    # arm_cpu records on the CPU model
  codesign replay my_arm_cpu.log --cpu-params my_cpu_params.json
  codesign replay tests/data/autotvm_v0.1_sim_2018.log --hw pynq_1x16   # a 2018 v0.1 log
"""


def register(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser("replay", help=summary, description=DESCRIPTION, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("log", nargs="+", metavar="LOG", help="AutoTVM v0.2 log file(s)")
    p.add_argument("--params", metavar="FILE", default=None,
                   help="timing parameters JSON (default: the shipped sim/timing_params.json)")
    p.add_argument("--profile", metavar="NAME", default=None,
                   help="calibration profile (sim/profiles/ or yours, see `codesign calibrate --profile`)")
    p.add_argument("--rank", action="store_true",
                   help="also time every valid config of each record's layer and report where the "
                        "model ranks the recorded (board-tuned) config (slower)")
    p.add_argument("--hw", metavar="HW", default=None,
                   help="hardware config of records whose -model= names none (v0.1 logs: -model=pynq, "
                        "ultra96, sim); default: the shipped config their tensor shapes use")
    p.add_argument("--cpu-params", metavar="FILE", default=None,
                   help="arm_cpu logs: CPU model parameters (default: the shipped sim/cpu_params.json; "
                        "write your own with `codesign calibrate cpu LOG -o FILE`)")
    p.add_argument("--json", action="store_true", help="print one JSON object to stdout")
    p.set_defaults(func=run)


def _fmt_s(v: float | None) -> str:
    return "-" if v is None else f"{v * 1e3:9.3f}"


def _clean(obj: Any) -> Any:
    """NaN -> null so --json output is strict JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_clean(v) for v in obj]
    return obj


def _nothing_replayed(logs: list[str], skipped: list) -> str:
    first = f"; first: line {skipped[0].line}: {skipped[0].reason}" if skipped else ""
    return f"{', '.join(logs)}: no record could be replayed, nothing to compare ({len(skipped)} skipped{first})"


def _print_json(rows: list, skipped: list, summary: dict[str, Any]) -> None:
    """The --json document of either replay (VTA or arm_cpu): one entry per record, the skipped lines, the summary."""
    out = {"records": [r.to_dict() for r in rows],
           "skipped": [{"file": s.file, "line": s.line, "reason": s.reason} for s in skipped],
           "summary": summary}
    print(json.dumps(_clean(out)))


def run(args: argparse.Namespace) -> int:
    kind = is_arm_cpu_log(args.log)
    if kind is None:
        raise ConfigError(f"{', '.join(args.log)}: mixes arm_cpu records (CPU model) and VTA records; "
                          "replay them as separate logs")
    if kind:
        return _run_cpu(args)
    if args.cpu_params:
        raise ConfigError("--cpu-params goes with arm_cpu logs (this log has VTA records)")
    params, source = resolve_params(args.profile, args.params)
    bar = None
    if not args.json and sys.stderr.isatty():
        bar = tqdm(total=0, desc="replay", unit="rec", file=sys.stderr, leave=False)

    def on_case(done: int, total: int) -> None:
        if bar is not None:
            bar.total = total
            bar.update(1)

    hw = HwConfig.resolve(args.hw) if args.hw else None
    rows, skipped, summary = replay(args.log, params, on_case=on_case, rank=args.rank, hw=hw)
    if bar is not None:
        bar.close()
    summary["params"] = source
    doc = load_profile(args.profile)[1] if args.profile else None
    warning = hw_warning(doc, sorted({r.model for r in rows if r.model})) if doc else None
    if warning:
        print(warning, file=sys.stderr)
        summary["profile_warning"] = warning
    if doc:
        summary["profile_transfer"] = transfer_line(doc)
    if not summary["replayed"] and args.json:
        raise ConfigError(_nothing_replayed(args.log, skipped))
    if args.json:
        _print_json(rows, skipped, summary)
        return 0
    head = (f"{'line':>5} {'task':<18} {'model':<30} {'layer':<34} {'idx_rec':>7} {'idx_cmp':>7} "
            f"{'valid':<5} {'meas_ms':>9} {'pred_ms':>9} {'err%':>7}")
    if rows:
        print(head)
    for r in rows:
        err = "-" if r.error_pct is None else f"{r.error_pct:+7.1f}"
        print(f"{r.line:>5} {r.task:<18} {r.model:<30} {r.layer:<34} {r.index_recorded:>7} "
              f"{r.index_computed:>7} {'yes' if r.valid else 'NO':<5} {_fmt_s(r.measured_s)} "
              f"{_fmt_s(r.predicted_s)} {err:>7}")
        if not r.valid:
            print(f"      invalid here: {r.why_invalid}")
        if r.rank is not None:
            k = r.rank
            print(f"      rank: {k['faster_configs']} of {k['n_valid']} valid configs predicted faster "
                  f"({k['rank_pct']:.1f}%), recorded/best {k['recorded_over_best']:.3f}")
    for s in skipped:
        print(f"skipped {s.file}:{s.line}: {s.reason}")
    print(f"\nrecords {summary['records']}, replayed {summary['replayed']}, skipped {summary['skipped']}, "
          f"invalid {summary['invalid']}, index mismatches {summary['index_mismatch']}")
    if not summary["replayed"]:
        raise ConfigError(_nothing_replayed(args.log, skipped) + " (every line's reason above)")
    print(f"MAPE {summary['mape']:.2f}%   Spearman rho {summary['spearman']:.3f}   "
          f"(params: {summary['params']})")
    if doc:
        print(f"profile {doc.get('name', args.profile)}: {summary['profile_transfer']}")
    if summary["ranking"]:
        k = summary["ranking"]
        print(f"ranking: recorded config predicted fastest for {k['ranked_first']}/{k['records']} layers, "
              f"median rank {k['median_rank_pct']:.1f}%, worst {k['max_rank_pct']:.1f}%")
    for model, m in summary["per_model"].items():
        print(f"  {model}: {m['records']} records, MAPE {m['mape']:.2f}%, rho {m['spearman']:.3f}")
    return 0


def _run_cpu(args: argparse.Namespace) -> int:
    if args.params or args.profile or args.rank or args.hw:
        raise ConfigError("--params, --profile, --rank and --hw are for VTA logs; an arm_cpu log takes --cpu-params FILE")
    model = CpuModel.load(args.cpu_params)
    rows, skipped, summary = replay_cpu(args.log, model)
    summary["params"] = model.source
    if not rows:
        raise ConfigError(_nothing_replayed(args.log, skipped))
    if args.json:
        _print_json(rows, skipped, summary)
        return 0
    print(f"{'line':>5} {'cpu':<10} {'kind':<12} {'dtype':<7} {'layer':<44} {'GMAC':>7} {'meas_ms':>9} "
          f"{'pred_ms':>9} {'err%':>7}")
    for r in rows:
        print(f"{r.line:>5} {r.cpu:<10} {r.kind:<12} {r.dtype:<7} {r.layer:<44} {r.macs / 1e9:7.3f} "
              f"{_fmt_s(r.measured_s)} {_fmt_s(r.predicted_s)} {r.error_pct:+7.1f}")
    for s in skipped:
        print(f"skipped {s.file}:{s.line}: {s.reason}")
    print(f"\nrecords {summary['records']}, replayed {summary['replayed']}, skipped {summary['skipped']}")
    print(f"MAPE {summary['mape']:.2f}%   Spearman rho {summary['spearman']:.3f}   (CPU params: {summary['params']})")
    for cpu, m in summary["per_cpu"].items():
        print(f"  {cpu}: {m['records']} records, MAPE {m['mape']:.2f}%, rho {m['spearman']:.3f}")
    for key, m in summary["per_kind"].items():
        print(f"  {key}: {m['records']} records, MAPE {m['mape']:.2f}%, max |err| {m['max_abs_error_pct']:.1f}%")
    return 0
