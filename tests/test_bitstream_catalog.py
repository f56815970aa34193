"""Bitstream catalog: .bit header, Vivado reports, add, fetch over 127.0.0.1, build,
and `codesign calibrate resources`. Every bad input is refused with one line."""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import stat
import threading
from pathlib import Path

import pytest
import yaml

from codesign.bitstream import bitfile, catalog, vivado
from codesign.cli import main
from codesign.errors import ConfigError

DATA = Path(__file__).parent / "data"
VIV = DATA / "vivado"
TRUNCATED = DATA / "bitstreams" / "pynq_0.0.2_1x16_truncated.bit"
SYN_UTIL = VIV / "synthetic_pynq_1x16_utilization_placed.rpt"
SYN_TIMING = VIV / "synthetic_pynq_1x16_142mhz_timing_summary_routed.head.rpt"


@pytest.fixture(autouse=True)
def _user_files(tmp_path, monkeypatch):
    monkeypatch.setenv(catalog.CATALOG_ENV, str(tmp_path / "catalog.yaml"))
    monkeypatch.setenv("VTA_CACHE_PATH", str(tmp_path / "vta_cache"))


def make_bit(path: Path, part: str = "7z020clg484", n: int = 2048, seed: int = 1) -> Path:
    body = bytes((seed * 31 + i * 7) % 256 for i in range(n))
    path.write_bytes(bitfile.make_header("vta_wrapper", part, "2026/11/22", "12:34:56", n) + body)
    return path


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    return err


# -- .bit header ---------------------------------------------------------------------------------
def test_header_of_real_published_file_fields() -> None:
    head = bitfile.parse_header(TRUNCATED.read_bytes())
    assert (head.design, head.user_id, head.tool_version) == ("vta_wrapper", "0XFFFFFFFF", "2018.3")
    assert (head.part, head.date, head.time) == ("7z020clg484", "2020/06/30", "18:11:16")
    assert head.header_bytes == 107 and head.data_bytes == 4045564
    # The shipped catalog entry of this file agrees with its header (size = header + data).
    e = [e for e in catalog.load() if e.hw_ver == "0.0.2"][0]
    assert e.size == head.header_bytes + head.data_bytes and e.part == head.part
    assert e.date == f"{head.date} {head.time}"
    # Our writer reproduces the real header byte for byte.
    assert bitfile.make_header("vta_wrapper", "7z020clg484", "2020/06/30", "18:11:16", 4045564) == \
        TRUNCATED.read_bytes()[:107]


def test_shipped_catalog_has_the_published_bitstreams() -> None:
    entries = catalog.read_catalog(catalog.SHIPPED_CATALOG)
    got = {(e.config, e.hw_ver): e for e in entries}
    assert set(got) == {("pynq_1x16_i8w8a32_15_15_18_17", "0.0.2"), ("pynq_1x16_i8w8a32_15_15_18_17", "0.0.1"),
                        ("pynq_4x8_i8w8a32_15_16_16_18", "0.0.1")}
    assert got[("pynq_1x16_i8w8a32_15_15_18_17", "0.0.2")].sha256 == \
        "0b24cdf9001d349512ab5fb34a0639056c87c8438dc3bce45be892ae43faf568"
    for e in entries:
        assert e.size == 4045671 and e.board == "pynq-z1" and e.tool_version == "2018.3"
        assert e.url == ("https://github.com/uwsampl/vta-distro/raw/master/bitstreams/pynq/"
                         f"{e.hw_ver}/{e.bitstream_name}.bit")
        assert e.cache_relpath == f"pynq/{e.hw_ver.replace('.', '_')}/{e.bitstream_name}.bit"


def test_part_to_die_and_board_check() -> None:
    assert bitfile.die_of("xc7z020clg400-1") == bitfile.die_of("7z020clg484") == "7z020"
    assert bitfile.die_of("xczu3eg-sbva484-1-e") == bitfile.die_of("xczu3eg-sfvc784") == "zu3eg"
    bitfile.check_part("7z020clg484", "xc7z020clg400-1", "pynq-z1", "x.bit")
    with pytest.raises(ConfigError, match="not the FPGA of board pynq-z1"):
        bitfile.check_part("xczu3eg-sfvc784-1-e", "xc7z020clg400-1", "pynq-z1", "x.bit")


# -- Vivado reports ------------------------------------------------------------------------------
def test_utilization_reports_real_and_7series() -> None:
    a = vivado.parse_utilization(VIV / "vta_zu3eg_int4-o4_200mhz_utilization_placed.rpt")
    assert (a["lut"], a["ff"], a["bram18"], a["dsp"]) == (20187, 21523, 186, 268)
    b = vivado.parse_utilization(VIV / "vta_zu3eg_int4-o8_166mhz_utilization_placed.rpt")
    assert (b["lut"], b["ff"], b["bram_tiles"], b["bram18"], b["dsp"]) == (20655, 20794, 97, 194, 268)
    assert b["device"] == "xczu3eg-sfvc784-1-e" and b["tool_version"].startswith("Vivado v.2022.2")
    c = vivado.parse_utilization(SYN_UTIL)  # 7-series row names, a half BRAM tile
    assert (c["lut"], c["ff"], c["bram18"], c["dsp"]) == (26012, 28344, 259, 220)


def test_timing_summary_report() -> None:
    t = vivado.parse_timing_summary(VIV / "vta_zu3eg_int4-o8_166mhz_timing_summary_routed.head.rpt")
    assert t["wns_ns"] == 0.061 and t["met"] is True
    assert t["clock"] == "clk_out1_vta_pll_clk_0" and t["period_ns"] == 6.024 and t["clock_mhz"] == 166.009
    assert t["fmax_mhz"] == pytest.approx(1000 / (6.024 - 0.061))


@pytest.mark.parametrize("parser,path,found", [
    (vivado.parse_utilization, VIV / "vta_zu3eg_compute_csynth_int8.head.rpt", "a Vivado HLS report"),
    (vivado.parse_utilization, VIV / "vta_zu3eg_int4-o8_166mhz_timing_summary_routed.head.rpt",
     "report_timing_summary"),
    (vivado.parse_timing_summary, VIV / "vta_zu3eg_int4-o4_200mhz_utilization_placed.rpt", "report_utilization"),
])
def test_report_of_another_tool_refused(parser, path, found) -> None:
    with pytest.raises(ConfigError, match=f"not a Vivado .*found {found}"):
        parser(path)


# -- add -----------------------------------------------------------------------------------------
def test_add_parses_header_reports_and_stores_checksum(tmp_path, capsys) -> None:
    bit = make_bit(tmp_path / "vta.bit")
    assert main(["bitstream", "add", str(bit), "--hw", "pynq_1x16", "--board", "pynq-z1",
                 "--utilization", str(SYN_UTIL), "--timing", str(SYN_TIMING), "--json"]) == 0
    entry = json.loads(capsys.readouterr().out)["entry"]
    assert entry["sha256"] == hashlib.sha256(bit.read_bytes()).hexdigest() and entry["size"] == bit.stat().st_size
    assert entry["part"] == "7z020clg484" and entry["date"] == "2026/11/22 12:34:56"
    assert entry["utilization"]["bram18"] == 259 and entry["timing"]["wns_ns"] == 0.412
    assert entry["clock_mhz"] == 142.857
    # It is in the user's catalog, never in the shipped one, and `list` shows both.
    doc = yaml.safe_load((tmp_path / "catalog.yaml").read_text())
    assert [e["source"] for e in doc["bitstreams"]] == ["local"]
    assert main(["bitstream", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["bitstreams"]
    assert [e["source"] for e in listed] == ["vta-distro"] * 3 + ["local"]


@pytest.mark.parametrize("case,expect", [
    ("wrong_part", "not the FPGA of board pynq-z1"),
    ("truncated", "truncated .bit file"),
    ("empty", "empty .bit file"),
    ("not_bit", "not a Xilinx .bit file"),
    ("hls_report", "not a Vivado report_utilization report"),
    ("report_of_other_device", "report of device xczu3eg-sfvc784-1-e"),
    ("directory", "cannot read this .bit file"),
])
def test_add_refuses_bad_input_with_one_line(tmp_path, capsys, case, expect) -> None:
    bit = make_bit(tmp_path / "vta.bit")
    extra: list[str] = []
    if case == "wrong_part":
        bit = make_bit(tmp_path / "zu.bit", part="xczu3eg-sfvc784-1-e")
    elif case == "truncated":
        bit = TRUNCATED
    elif case == "empty":
        bit = tmp_path / "empty.bit"
        bit.write_bytes(b"")
    elif case == "not_bit":
        bit = tmp_path / "x.bit"
        bit.write_text("hello\n")
    elif case == "hls_report":
        extra = ["--utilization", str(VIV / "vta_zu3eg_compute_csynth_int8.head.rpt")]
    elif case == "report_of_other_device":
        extra = ["--utilization", str(VIV / "vta_zu3eg_int4-o8_166mhz_utilization_placed.rpt")]
    elif case == "directory":
        bit = tmp_path
    assert main(["bitstream", "add", str(bit), "--hw", "pynq_1x16", "--board", "pynq-z1", *extra]) == 2
    assert expect in one_error_line(capsys)
    assert not (tmp_path / "catalog.yaml").exists()


# -- fetch over a local file server --------------------------------------------------------------
@pytest.fixture()
def file_server(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # keep stderr for the command's one line
            pass

    handler = functools.partial(Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _catalog_entry(tmp_path: Path, url: str, bit: Path, sha: str | None = None, size: int | None = None) -> None:
    entry = {"config": "pynq_1x16_i8w8a32_15_15_18_17", "board": "pynq-z1", "target": "pynq", "hw_ver": "0.0.3",
             "sha256": sha or hashlib.sha256(bit.read_bytes()).hexdigest(), "size": size or bit.stat().st_size,
             "part": "7z020clg484", "url": url, "source": "test"}
    (tmp_path / "catalog.yaml").write_text(yaml.safe_dump({"bitstreams": [entry]}))


def test_fetch_downloads_into_vta_cache_and_verifies(tmp_path, capsys, file_server) -> None:
    root, base = file_server
    bit = make_bit(root / "vta.bit")
    _catalog_entry(tmp_path, f"{base}/vta.bit", bit)
    args = ["bitstream", "fetch", "pynq_1x16", "--board", "pynq-z1", "--hw-ver", "0.0.3", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    cached = tmp_path / "vta_cache" / "pynq" / "0_0_3" / "1x16_i8w8a32_15_15_18_17.bit"
    assert out == {"path": str(cached), "downloaded": True, "sha256": hashlib.sha256(bit.read_bytes()).hexdigest(),
                   "size": bit.stat().st_size}
    assert cached.read_bytes() == bit.read_bytes()
    assert main(args) == 0 and json.loads(capsys.readouterr().out)["downloaded"] is False


@pytest.mark.parametrize("case,expect", [
    ("bad_checksum", "bad checksum"),
    ("bigger_than_catalog", "more than the"),
    ("missing", "cannot download"),
])
def test_fetch_refuses_and_keeps_nothing(tmp_path, capsys, file_server, case, expect) -> None:
    root, base = file_server
    bit = make_bit(root / "vta.bit")
    if case == "bad_checksum":
        _catalog_entry(tmp_path, f"{base}/vta.bit", bit, sha="0" * 64)
    elif case == "bigger_than_catalog":
        _catalog_entry(tmp_path, f"{base}/vta.bit", bit, size=1000)
    else:
        _catalog_entry(tmp_path, f"{base}/nothing.bit", bit)
    assert main(["bitstream", "fetch", "pynq_1x16", "--board", "pynq-z1", "--hw-ver", "0.0.3"]) == 2
    assert expect in one_error_line(capsys)
    cache = tmp_path / "vta_cache" / "pynq" / "0_0_3"
    assert not cache.exists() or list(cache.iterdir()) == []


def test_fetch_unknown_config_names_build_command(capsys) -> None:
    assert main(["bitstream", "fetch", "pynq_1x16_i8w8a32_15_15_17_17", "--board", "pynq-z1"]) == 2
    assert "codesign bitstream build pynq_1x16_i8w8a32_15_15_17_17" in one_error_line(capsys)


# -- build ---------------------------------------------------------------------------------------
def _vta_hw(tmp_path: Path) -> Path:
    vta = tmp_path / "vta-hw"
    (vta / "hardware" / "xilinx").mkdir(parents=True)
    (vta / "hardware" / "xilinx" / "Makefile").write_text("# fixture\n")
    (vta / "config").mkdir()
    (vta / "config" / "vta_config.json").write_text('{"TARGET": "sim"}\n')
    return vta


def test_build_refuses_config_over_the_board_before_any_tool(tmp_path, capsys) -> None:
    vta = _vta_hw(tmp_path)
    out = tmp_path / "out"
    assert main(["bitstream", "build", "pynq_1x32_i8w8a32_15_17_19_17", "--board", "pynq-z1", "--vta-hw", str(vta),
                 "-o", str(out)]) == 2
    err = one_error_line(capsys)
    assert "cannot be built for pynq-z1" in err and "LUT but pynq-z1 has 53200" in err
    assert not out.exists() and (vta / "config" / "vta_config.json").read_text() == '{"TARGET": "sim"}\n'


def test_build_without_tools_prints_exact_commands(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    vta = _vta_hw(tmp_path)
    out = tmp_path / "out"
    assert main(["bitstream", "build", "pynq_1x16", "--board", "pynq-z1", "--vta-hw", str(vta), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    cfg = json.loads((out / "vta_config.json").read_text())
    assert cfg["TARGET"] == "pynq" and cfg["LOG_BLOCK"] == 4 and cfg["LOG_WGT_BUFF_SIZE"] == 18
    assert f"cd {vta / 'hardware' / 'xilinx'} && make ip" in text
    assert str(vta / "build/hardware/xilinx/vivado/pynq_1x16_i8w8a32_15_15_18_17/export/vta.bit") in text
    assert "codesign bitstream add" in text and "not on PATH: vivado" in text


def _script(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_build_runs_the_flow_when_tools_exist_then_adds(tmp_path, capsys, monkeypatch) -> None:
    # Fake vivado / vitis_hls / make at the tool boundary: `make` writes a .bit where VTA's flow
    # puts it, `vivado` writes the two reports; the command must run them in order and add the result.
    vta = _vta_hw(tmp_path)
    made = make_bit(tmp_path / "made.bit")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    export = vta / "build/hardware/xilinx/vivado/pynq_1x16_i8w8a32_15_15_18_17/export"
    _script(bindir / "make", f'echo "make $@" >> {tmp_path}/calls\n'
            f'if [ "$1" != ip ]; then mkdir -p {export} && cp {made} {export}/vta.bit; fi\n')
    _script(bindir / "vitis_hls", "exit 0\n")
    _script(bindir / "vivado", f'echo "vivado" >> {tmp_path}/calls\nfor last; do :; done\nmkdir -p "$last"\n'
            f'cp {SYN_UTIL} "$last/utilization.rpt"\ncp {SYN_TIMING} "$last/timing_summary.rpt"\n')
    _script(bindir / "cp", 'exec /bin/cp "$@"\n')
    monkeypatch.setenv("PATH", str(bindir) + os.pathsep + "/usr/bin:/bin")
    out = tmp_path / "out"
    assert main(["bitstream", "build", "pynq_1x16", "--board", "pynq-z1", "--vta-hw", str(vta), "-o", str(out)]) == 0
    assert (tmp_path / "calls").read_text().split("\n")[:3] == ["make ip", "make ", "vivado"]
    assert json.loads((vta / "config" / "vta_config.json").read_text())["TARGET"] == "pynq"
    assert (out / "vta_config.json.orig").read_text() == '{"TARGET": "sim"}\n'
    doc = yaml.safe_load((tmp_path / "catalog.yaml").read_text())
    assert doc["bitstreams"][0]["sha256"] == hashlib.sha256(made.read_bytes()).hexdigest()
    assert doc["bitstreams"][0]["utilization"]["lut"] == 26012


# -- calibrate resources -------------------------------------------------------------------------
def test_calibrate_resources_fits_builds_and_verified_clock(tmp_path, capsys) -> None:
    bit = make_bit(tmp_path / "vta.bit")
    assert main(["bitstream", "add", str(bit), "--hw", "pynq_1x16", "--board", "pynq-z1",
                 "--utilization", str(SYN_UTIL), "--timing", str(SYN_TIMING)]) == 0
    capsys.readouterr()
    out = tmp_path / "resources.json"
    assert main(["calibrate", "resources", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "rms error before" in text and "rms error after" in text
    rep = json.loads(out.read_text())
    assert len(rep["builds"]) == 2  # the model's anchor build + ours
    b, a = rep["rms_error_pct_before"], rep["rms_error_pct_after"]
    for r in ("lut", "ff", "bram18", "dsp"):  # least squares on relative errors cannot do worse
        assert a[r] <= b[r] + 1e-9, r
    assert a["lut"] < b["lut"]
    clock = rep["verified_clock"]["pynq-z1"]
    assert clock["board_file_mhz"] == 100 and clock["fitted_mhz"] == 142.857
    assert main(["calibrate", "resources", "-o", str(catalog.SHIPPED_CATALOG)]) == 2
    assert "never overwritten" in one_error_line(capsys)
