"""`codesign calibrate LOG... (-o FILE | --profile NAME)`: fit the timing model's physical
parameters, or a profile's host terms, to measured records. Never writes over shipped files."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tqdm import tqdm

from codesign.bitstream import catalog
from codesign.calibrate.cpu_fit import calibrate_cpu
from codesign.calibrate.fit import FIT_PARAMS, calibrate
from codesign.calibrate.profiles import (
    calibrate_profile,
    is_protected,
    save_profile,
    selection_lines,
    transfer_line,
    write_path,
)
from codesign.calibrate.resources_fit import calibrate_resources
from codesign.calibrate.sessions import calibrate_default
from codesign.commands.replay import _clean
from codesign.cpu import SHIPPED_PARAMS as SHIPPED_CPU_PARAMS
from codesign.errors import ConfigError
from codesign.fileio import atomic_write_json
from codesign.hw.config import HwConfig
from codesign.vta.timing import TimingParams

DESCRIPTION = """\
Fit the few physical parameters of the timing model (DMA port efficiency, per-DMA and per-row
latency, GEMM pipeline fill, host launch overhead per call and per instruction) to the
measured costs of AutoTVM v0.2 records, by least squares on log-latency with physical bounds.
The measured costs time the whole operator call on the board, so host overhead is an explicit
term (host_call_s + host_per_insn_s * instructions). Writes the parameters with their
provenance (data files and sha256, record count, date, before/after error, leave-one-out
error) and prints the before/after MAPE and Spearman rho.

With --profile NAME it fits a calibration profile instead: only the environment (host/runtime)
terms -- per call, per instruction, per input byte, per output byte -- on top of the shipped
device parameters. The terms are chosen by evidence: every subset of the four is fitted and
scored by leave-one-out error, the comparison is printed (and in --json), and the fewest terms
that do as well as the best are kept, never worse than the best single-term fit (priors and
rule: docs/calibration-profiles.md). --device refits the device parameters too. Profiles are written
to $CODESIGN_PROFILE_DIR (default ~/.local/share/vta-codesign/profiles); the shipped ones in
sim/profiles/ (tophub-2019) and sim/timing_params.json are never overwritten.

`codesign calibrate default -o FILE` refits the shipped default (sim/timing_params.json) on every
shipped VTA log (or the LOGs given after `default`): device and call/instruction terms shared,
the output-byte host cost per session, the value for an unseen session chosen by
leave-one-session-out error; leave-one-network-out error is reported too (docs/calibration-profiles.md).

`codesign calibrate resources` fits the resource model's fixed terms and the boards' verified
clocks to the builds in the bitstream catalog (`codesign bitstream add --utilization --timing`);
`codesign sweep --resources FILE` scores a sweep with the file it writes (docs/resources.md).

`codesign calibrate cpu LOG... -o FILE` fits the CPU cost model (per CPU: call overhead,
bandwidth, GMAC/s per kernel kind and dtype) to AutoTVM arm_cpu records measured on boards
(docs/cpu-model.md); `codesign replay LOG --cpu-params FILE` uses the file it writes.

A fit with more free parameters than the records can pin is refused, naming them and how many
records would be needed.
"""

EPILOG = """\
examples:
  codesign calibrate sim/calibration/pynq_resnet18.log -o /tmp/params.json
  codesign calibrate --profile lab-pynq session.log              # host terms chosen by leave-one-out
  codesign calibrate --profile r50 sim/calibration/pynq_1x16_resnet50.log --json
  codesign calibrate --profile lab-pynq session.log --terms host_call_s,host_per_out_byte_s
  codesign replay session.log --profile lab-pynq                 # use it (also tune/sweep/run)
  codesign calibrate a.log b.log -o /tmp/params.json --no-loo
  codesign calibrate default -o /tmp/timing_params.json   # the shipped default, from every shipped log
  codesign calibrate resources -o /tmp/resources.json   # resource model + verified clocks vs builds
  codesign calibrate sim/calibration/pynq_resnet18.log --fit host_call_s,host_per_insn_s --json
  codesign replay my.log --params /tmp/params.json                # use the new parameters
  codesign calibrate cpu sim/calibration/arm_cpu_pynq_ultra96.log -o /tmp/cpu.json   # CPU cost model
  codesign replay my_arm_cpu.log --cpu-params /tmp/cpu.json
"""


def register(sub: argparse._SubParsersAction, summary: str) -> None:
    p = sub.add_parser("calibrate", help=summary, description=DESCRIPTION, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("log", nargs="+", metavar="LOG", help="AutoTVM v0.2 log file(s) with board measurements")
    p.add_argument("-o", "--output", metavar="FILE", default=None,
                   help="where to write the fitted parameters (required unless --profile; the shipped "
                        "sim/timing_params.json is never overwritten)")
    p.add_argument("--profile", metavar="NAME", default=None,
                   help="fit a calibration profile (host terms on top of the shipped device model) "
                        "and save it under this name")
    p.add_argument("--terms", metavar="NAMES", default=None,
                   help="with --profile: environment terms to fit, each must be pinned by the data "
                        "(default: chosen by leave-one-out error; "
                        "host_call_s,host_per_insn_s,host_per_in_byte_s,host_per_out_byte_s)")
    p.add_argument("--device", action="store_true",
                   help="with --profile: refit the device parameters too")
    p.add_argument("--params", metavar="FILE", default=None,
                   help="starting values and values of the parameters not fitted (default: the "
                        "documented defaults of TimingParams, so a fit is reproducible; "
                        "'shipped' = sim/timing_params.json)")
    p.add_argument("--fit", metavar="NAMES", default=",".join(FIT_PARAMS),
                   help="comma-separated parameters to fit (default: %(default)s)")
    p.add_argument("--catalog", metavar="FILE", default=None,
                   help="with `calibrate resources`: your bitstream catalog (default: $CODESIGN_CATALOG)")
    p.add_argument("--hw", metavar="HW", default=None,
                   help="hardware config of records whose -model= names none (v0.1 logs: -model=pynq, "
                        "ultra96, sim); default: the shipped config their tensor shapes use")
    p.add_argument("--no-loo", action="store_true", help="skip the leave-one-out refits")
    p.add_argument("--json", action="store_true", help="print one JSON object to stdout")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.log == ["resources"]:
        return _run_resources(args)
    if args.log[0] == "cpu":
        return _run_cpu(args)
    if args.log[0] == "default":
        return _run_default(args)
    if args.hw and args.profile:
        raise ConfigError("--hw goes with a device fit (-o FILE) or replay; a profile fit takes the config its "
                          "records' -model= names")
    if args.profile:
        return _run_profile(args)
    if args.terms or args.device:
        raise ConfigError("--terms and --device go with --profile NAME")
    if not args.output:
        raise ConfigError("say where to write the fit: -o FILE, or --profile NAME for host terms "
                          "(the shipped sim/timing_params.json is never overwritten)")
    if is_protected(Path(args.output)):
        raise ConfigError(f"-o {args.output}: a shipped file is never overwritten; write elsewhere and pass "
                          "it with --params, or use --profile NAME")
    return _run_device(args)


def _loo_progress(args: argparse.Namespace) -> tuple[Any, Callable[[int, int], None]]:
    """A leave-one-out progress bar on a terminal (none for --json, --no-loo or a pipe) and its fold callback."""
    bar = None
    if not args.json and not args.no_loo and sys.stderr.isatty():
        bar = tqdm(total=0, desc="leave-one-out", unit="fit", file=sys.stderr, leave=False)

    def on_fold(done: int, total: int) -> None:
        if bar is not None:
            bar.total = total
            bar.update(1)

    return bar, on_fold


def _run_device(args: argparse.Namespace) -> int:
    if args.params is None:
        base, start = TimingParams(), "documented defaults (TimingParams())"
    elif args.params == "shipped":
        base, start = TimingParams.load(), "sim/timing_params.json"
    else:
        base, start = TimingParams.load(args.params), str(args.params)
    names = [n.strip() for n in args.fit.split(",") if n.strip()]
    bar, on_fold = _loo_progress(args)

    hw = HwConfig.resolve(args.hw) if args.hw else None
    params, report = calibrate(args.log, base=base, names=names, loo=not args.no_loo, on_fold=on_fold, hw=hw)
    report["start"] = start
    report["command"] = "codesign calibrate " + " ".join(args.log) + (
        f" --params {args.params}" if args.params else "") + (
        f" --fit {args.fit}" if args.fit != ",".join(FIT_PARAMS) else "") + (" --no-loo" if args.no_loo else "") + (
        f" --hw {args.hw}" if args.hw else "")
    if bar is not None:
        bar.close()
    out = args.output
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


def _run_default(args: argparse.Namespace) -> int:
    logs = args.log[1:] or None
    if not args.output:
        raise ConfigError("calibrate default: say where to write the fit: -o FILE (then copy it over "
                          "sim/timing_params.json; calibrate never writes shipped files)")
    if is_protected(Path(args.output)):
        raise ConfigError(f"-o {args.output}: a shipped file is never overwritten; write elsewhere and copy it")
    if args.profile or args.terms or args.device or args.params or args.hw or args.no_loo or args.fit != _default_fit():
        raise ConfigError("calibrate default takes [LOG...] -o FILE [--json]; the fit, its starting point and its "
                          "held-out errors are fixed so the shipped default is reproducible")
    say = None if args.json else (lambda m: print(m + " ...", file=sys.stderr, flush=True))
    params, prov = calibrate_default(logs, progress=say)
    prov["command"] = "codesign calibrate default" + ("" if logs is None else " " + " ".join(logs)) + " -o FILE"
    params.save(args.output, _clean(prov))
    if args.json:
        print(json.dumps(_clean({"output": str(args.output), "params": params.to_dict(), "provenance": prov})))
        return 0
    print(f"records used: {prov['records_used']}  skipped: {len(prov['records_skipped'])}")
    for s, info in prov["sessions"].items():
        terms = ", ".join(f"{k} {v:.3g}" for k, v in info["session_terms"].items())
        print(f"  session {s}: {info['records']} records, {', '.join(info['networks'])} on {', '.join(info['hw'])}"
              + (f"; {terms}" if terms else ""))
    print("candidates by leave-one-session-out MAPE (mean over sessions):")
    for c in prov["candidates"]:
        mark = "  <- chosen" if c["rule"] == prov["chosen_rule"] else ""
        per = ", ".join(f"{g} {v:.1f}%" for g, v in c["loso_per_session"].items())
        print(f"  {c['rule']:<8} {c['loso_mape_mean']:6.2f}%  ({per}){mark}")
    ins = prov["in_sample"]
    print(f"in sample (shipped values): MAPE {ins['mape']:6.2f}%  rho {ins['spearman']:.3f}"
          + (f"   with each session's own terms: {ins['with_session_terms']['mape']:.2f}%"
             if ins.get("with_session_terms") else ""))
    for key, title in (("leave_one_session_out", "session"), ("leave_one_network_out", "network")):
        d = prov[key]
        print(f"leave-one-{title}-out: MAPE {d['mape_mean_over_groups']:6.2f}% (mean over {title}s)")
        for g, v in d["per_group"].items():
            own = (f"   (with its session's own terms {v['mape_with_own_session_terms']:.2f}%)"
                   if "mape_with_own_session_terms" in v else "")
            print(f"  {g:<12} {v['records']:>3} records  MAPE {v['mape']:7.2f}%  max |err| "
                  f"{v['max_abs_error_pct']:6.1f}%{own}")
    print("fitted parameters:")
    for n in prov["fitted"]:
        print(f"  {n:<32} {getattr(params, n):.6g}")
    print(f"wrote {args.output}")
    return 0


def _run_profile(args: argparse.Namespace) -> int:
    if args.output or args.params or args.fit != _default_fit():
        raise ConfigError("--profile fits host terms on the shipped device parameters: -o, --params and "
                          "--fit do not apply (use --terms, --device)")
    write_path(args.profile)  # refuse a shipped name before any work
    terms = [t.strip() for t in args.terms.split(",") if t.strip()] if args.terms else None
    _params, doc = calibrate_profile(args.log, args.profile, terms=terms, device=args.device)
    prov = doc["provenance"]
    prov["command"] = "codesign calibrate --profile " + args.profile + " " + " ".join(args.log) + (
        f" --terms {args.terms}" if args.terms else "") + (" --device" if args.device else "")
    path = save_profile(_clean(doc), args.profile)
    if args.json:
        print(json.dumps(_clean({"output": str(path), **doc})))
        return 0
    print(f"records used: {prov['records_used']}  skipped: {len(prov['records_skipped'])}  "
          f"(with device time: {prov['records_with_device_time']})")
    for s in prov["records_skipped"]:
        print(f"  skipped {s['file']}:{s['line']}: {s['reason']}")
    if prov["selection"]["subsets"]:
        print("\n".join(selection_lines(prov["selection"])))
    print(f"{'term':<22} {'fitted':>6} {'value':>11} {'posterior sd':>12} {'prior sd':>9} {'pinned':>6} "
          f"{'LOO MAPE without':>16}")
    for t, row in prov["terms"].items():
        pinned = "yes" if row.get("pinned") else ("no" if "pinned" in row else "-")
        without = f"{row['loo_mape_without']:.2f}%" if "loo_mape_without" in row else "-"
        post = f"{row['posterior_sd']:.3g}" if "posterior_sd" in row else "-"
        fitted = "yes" if row["fitted"] else "no"
        print(f"{t:<22} {fitted:>6} {row['value']:>11.4g} {post:>12} {row['prior_sd']:>9.3g} {pinned:>6} "
              f"{without:>16}")
    b, a = prov["before"], prov["after"]
    print(f"before (shipped host terms): MAPE {b['mape']:6.2f}%  max |err| {b['max_abs_error_pct']:.1f}%")
    print(f"after:                       MAPE {a['mape']:6.2f}%  max |err| {a['max_abs_error_pct']:.1f}%")
    if "leave_one_out" in prov:
        lo = prov["leave_one_out"]
        print(f"leave-one-out:               MAPE {lo['mape']:6.2f}%  max |err| {lo['max_abs_error_pct']:.1f}%")
    print("where it holds: " + transfer_line(doc))
    print(f"wrote profile {doc['name']} to {path}")
    return 0


def _default_fit() -> str:
    return ",".join(FIT_PARAMS)


def _run_resources(args: argparse.Namespace) -> int:
    user = Path(args.catalog) if args.catalog else catalog.user_catalog()
    used = [str(catalog.SHIPPED_CATALOG)] + ([str(user)] if user.exists() else [])
    rep = calibrate_resources(catalog.load(user), catalogs=used)
    if args.output:
        if is_protected_any(Path(args.output)):
            raise ConfigError(f"-o {args.output}: a shipped file is never overwritten")
        atomic_write_json(args.output, rep)
    if args.json:
        print(json.dumps(rep))
        return 0
    print(f"builds: {len(rep['builds'])}")
    for before, after in zip(rep["before"], rep["after"]):
        cells = "  ".join(f"{r} {after[r]['measured']:>6} model {before[r]['model']:>6}->{after[r]['model']:>6} "
                          f"({100 * before[r]['rel_error']:+.1f}%->{100 * after[r]['rel_error']:+.1f}%)"
                          for r in ("lut", "ff", "bram18", "dsp"))
        print(f"  {before['build']}\n    {cells}")
    b, a = rep["rms_error_pct_before"], rep["rms_error_pct_after"]
    print("rms error before: " + ", ".join(f"{r} {v:.1f}%" for r, v in b.items()))
    print("rms error after:   " + ", ".join(f"{r} {v:.1f}%" for r, v in a.items()))
    print("fixed terms: " + ", ".join(f"{r} {rep['fixed_before'][r]:.0f}->{rep['fixed_after'][r]:.0f}"
                                      for r in rep["fixed_before"]))
    for board, d in rep["verified_clock"].items():
        print(f"verified clock {board}: board file {d['board_file_mhz']} MHz; builds met timing at "
              f"{d['met_mhz'] or '-'} MHz, failed at {d['failed_mhz'] or '-'}; fitted {d['fitted_mhz']} MHz")
    if args.output:
        print(f"wrote {args.output} (use it: codesign sweep --resources {args.output})")
    return 0


def is_protected_any(path: Path) -> bool:
    return is_protected(path) or path.resolve() == catalog.SHIPPED_CATALOG.resolve()


def _run_cpu(args: argparse.Namespace) -> int:
    logs = args.log[1:]
    if not logs:
        raise ConfigError("calibrate cpu: give the arm_cpu log file(s): codesign calibrate cpu LOG... -o FILE")
    if not args.output:
        raise ConfigError("calibrate cpu: say where to write the fit: -o FILE (the shipped sim/cpu_params.json "
                          "is never overwritten)")
    if Path(args.output).resolve() == SHIPPED_CPU_PARAMS.resolve() or is_protected(Path(args.output)):
        raise ConfigError(f"-o {args.output}: a shipped file is never overwritten; write elsewhere and pass it "
                          "with --cpu-params")
    if args.profile or args.terms or args.device or args.params or args.hw:
        raise ConfigError("calibrate cpu takes LOG... -o FILE [--no-loo] [--json]; --profile, --terms, --device, "
                          "--params and --hw are for the VTA timing model")
    bar, on_fold = _loo_progress(args)

    model, fits, prov = calibrate_cpu(logs, loo=not args.no_loo, on_fold=on_fold)
    if bar is not None:
        bar.close()
    prov["command"] = "codesign calibrate cpu " + " ".join(logs) + (" --no-loo" if args.no_loo else "")
    model.save(args.output, _clean(prov), _clean(fits))
    if args.json:
        print(json.dumps(_clean({"output": str(args.output), "cpus": {c: p.to_dict() for c, p in model.cpus.items()},
                                 "fits": fits, "provenance": prov})))
        return 0
    print(f"records used: {prov['records_used']}  skipped: {len(prov['records_skipped'])}")
    for s in prov["records_skipped"]:
        print(f"  skipped {s['file']}:{s['line']}: {s['reason']}")
    for cpu, p in model.cpus.items():
        f = fits[cpu]
        print(f"{cpu} ({f['records']} records on {', '.join(f['boards'])}):")
        print(f"  call overhead {p.call_overhead_s * 1e6:10.2f} us")
        print(f"  bandwidth     {p.bytes_per_s / 1e9:10.3f} GB/s")
        for key, rate in p.gmacs.items():
            k = f["per_kind"][key]
            loo = f"  leave-one-out MAPE {k['leave_one_out']['mape']:6.2f}%" if "leave_one_out" in k else ""
            print(f"  {key:<20} {rate:7.3f} GMAC/s   fit MAPE {k['after']['mape']:6.2f}%{loo}")
        if f["at_bound"]:
            print(f"  at a bound (not pinned by these records): {', '.join(f['at_bound'])}")
        print(f"  fit MAPE {f['after']['mape']:.2f}%  rho {f['after']['spearman']:.3f}"
              + (f"   leave-one-out MAPE {f['leave_one_out']['mape']:.2f}%  rho {f['leave_one_out']['spearman']:.3f}"
                 if "leave_one_out" in f else ""))
    a = prov["after"]
    print(f"all: fit MAPE {a['mape']:.2f}%  rho {a['spearman']:.3f}" + (
        f"   leave-one-out MAPE {prov['leave_one_out']['mape']:.2f}%" if "leave_one_out" in prov else ""))
    print(f"wrote {args.output} (use it: codesign replay LOG --cpu-params {args.output})")
    return 0
