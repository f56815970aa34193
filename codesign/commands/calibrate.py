"""`codesign calibrate LOG...`: fit the timing model's physical parameters to measured records."""

from __future__ import annotations

import argparse
import json
import sys

from codesign.commands.replay import _clean

DESCRIPTION = """\
Fit the few physical parameters of the timing model (DMA port efficiency, per-DMA and per-row
latency, GEMM pipeline fill, host launch overhead per call and per instruction) to the
measured costs of AutoTVM v0.2 records, by least squares on log-latency with physical bounds.
The measured costs time the whole operator call on the board, so host overhead is an explicit
term (host_call_s + host_per_insn_s * instructions). Writes the parameters with their
provenance (data files and sha256, record count, date, before/after error, leave-one-out
error) and prints the before/after MAPE and Spearman rho.
"""

EPILOG = """\
examples:
  codesign calibrate sim/calibration/pynq_resnet18.log            # writes sim/timing_params.json
  codesign calibrate a.log b.log -o /tmp/params.json --no-loo
  codesign calibrate sim/calibration/pynq_resnet18.log --fit host_call_s,host_per_insn_s --json
  codesign replay my.log --params /tmp/params.json                # use the new parameters
"""


def register(sub: argparse._SubParsersAction, summary: str) -> None:
    from codesign.calibrate.fit import FIT_PARAMS

    p = sub.add_parser("calibrate", help=summary, description=DESCRIPTION, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("log", nargs="+", metavar="LOG", help="AutoTVM v0.2 log file(s) with board measurements")
    p.add_argument("-o", "--output", metavar="FILE", default=None,
                   help="where to write the fitted parameters (default: sim/timing_params.json)")
    p.add_argument("--params", metavar="FILE", default=None,
                   help="starting values and values of the parameters not fitted (default: the "
                        "documented defaults of TimingParams, so a fit is reproducible; "
                        "'shipped' = sim/timing_params.json)")
    p.add_argument("--fit", metavar="NAMES", default=",".join(FIT_PARAMS),
                   help="comma-separated parameters to fit (default: %(default)s)")
    p.add_argument("--no-loo", action="store_true", help="skip the leave-one-out refits")
    p.add_argument("--json", action="store_true", help="print one JSON object to stdout")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from codesign.calibrate.fit import FIT_PARAMS, calibrate
    from codesign.vta.timing import DEFAULT_PARAMS_PATH, TimingParams

    if args.params is None:
        base, start = TimingParams(), "documented defaults (TimingParams())"
    elif args.params == "shipped":
        base, start = TimingParams.load(), "sim/timing_params.json"
    else:
        base, start = TimingParams.load(args.params), str(args.params)
    names = [n.strip() for n in args.fit.split(",") if n.strip()]
    bar = None
    if not args.json and not args.no_loo and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=0, desc="leave-one-out", unit="fit", file=sys.stderr, leave=False)

    def on_fold(done: int, total: int) -> None:
        if bar is not None:
            bar.total = total
            bar.update(1)

    params, report = calibrate(args.log, base=base, names=names, loo=not args.no_loo, on_fold=on_fold)
    report["start"] = start
    report["command"] = "codesign calibrate " + " ".join(args.log) + (
        f" --params {args.params}" if args.params else "") + (
        f" --fit {args.fit}" if args.fit != ",".join(FIT_PARAMS) else "") + (" --no-loo" if args.no_loo else "")
    if bar is not None:
        bar.close()
    out = args.output or DEFAULT_PARAMS_PATH
    params.save(out, _clean(report))
    if args.json:
        print(json.dumps(_clean({"output": str(out), "params": params.to_dict(), "report": report})))
        return 0
    b, a = report["before"], report["after"]
    print(f"records used: {report['records_used']}  skipped: {len(report['records_skipped'])}")
    for s in report["records_skipped"]:
        print(f"  skipped {s['file']}:{s['line']}: {s['reason']}")
    print(f"before: MAPE {b['mape']:6.2f}%  rho {b['spearman']:.3f}  max |err| {b['max_abs_error_pct']:.1f}%")
    print(f"after:  MAPE {a['mape']:6.2f}%  rho {a['spearman']:.3f}  max |err| {a['max_abs_error_pct']:.1f}%")
    if "leave_one_out" in report:
        lo = report["leave_one_out"]
        print(f"leave-one-out: MAPE {lo['mape']:6.2f}%  rho {lo['spearman']:.3f}  "
              f"max |err| {lo['max_abs_error_pct']:.1f}%")
    for model, m in report.get("leave_one_config_out", {}).items():
        print(f"fit without {model}, predict it: MAPE {m['mape']:6.2f}%  rho {m['spearman']:.3f}")
    print("fitted parameters:")
    for n in report["fitted"]:
        print(f"  {n:<32} {getattr(params, n):.6g}")
    print(f"wrote {out}")
    return 0
