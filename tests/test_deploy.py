"""Deploy and run on two emulated PYNQ boards behind a tvm RPC tracker: the catalog
bitstream is fetched, verified, uploaded and programmed; the smoke test and a small network run
bit-exact; measured device time = the emulated board's timing. Every process started here is
stopped; everything listens on 127.0.0.1."""

from __future__ import annotations

import hashlib
import json

import pytest
import yaml

from codesign.board.client import BoardClient
from codesign.board.local import local_board, local_tracker
from codesign.cli import main
from codesign.deploy import board_executor, check_loaded, deploy
from codesign.errors import BoardError
from codesign.hw.config import HwConfig
from codesign.netrun import run_network
from codesign.workloads import Workload

HW = HwConfig.resolve("pynq_1x16")
NET = Workload("tiny", (("conv2d:1,32,14,14,32,3,3,1,1", 2), ("conv2d:1,32,14,14,64,3,3,2,1", 1),
                        ("dense:1,64,32", 1)))


@pytest.fixture(scope="module")
def boards():
    with local_tracker() as trk, local_board("pynq_1x16", tracker=trk.addr, key="pynq") as a, \
            local_board("pynq_1x16", tracker=trk.addr, key="pynq") as b:
        yield trk.addr, (a.addr, b.addr)


@pytest.fixture(scope="module")
def direct():
    with local_board("pynq_1x16") as board:  # no tracker: reachable by HOST:PORT
        yield board.addr


@pytest.fixture()
def bit_catalog(make_bit_catalog):
    return make_bit_catalog(HW.name)[0]


def test_deploy_and_run_on_two_emulated_boards_via_tracker(boards, bit_catalog) -> None:
    tracker, _addrs = boards
    sha = hashlib.sha256(bit_catalog.read_bytes()).hexdigest()
    with BoardClient.from_tracker(tracker, "pynq") as first, BoardClient.from_tracker(tracker, "pynq") as second:
        results = [deploy(c, HW) for c in (first, second)]
        for res in results:
            assert res["ok"] and res["emulated"] and res["bitstream"]["sha256"] == sha
            assert [r["layer"] for r in res["smoke"]] == ["dense_1x32_32", "conv2d_1x32x8x8_32_3x3_s1_p1"]
        assert first.info()["bitstream"]["sha256"] == second.info()["bitstream"]["sha256"] == sha
        for client in (first, second):
            res = run_network(NET, HW, executor=board_executor(client))
            assert res["all_bit_exact"] and len(res["layers"]) == 3
            for r in res["layers"]:  # the emulated board's device time is the timing model's
                assert r["measured_device_s"] == pytest.approx(r["predicted_device_s"], rel=1e-9)
                assert r["measured_call_s"] is not None and r["measured_call_s"] >= r["measured_device_s"]


def test_deploy_and_run_cli_direct_board(direct, bit_catalog, capsys) -> None:
    addr = direct
    assert main(["deploy", "pynq_1x16", "--board", addr, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] and out["hw"] == HW.name
    assert main(["run", "--workload", "resnet18", "--hw", "pynq_1x16", "--board", addr, "--layers", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["all_bit_exact"] and res["measured_by"].startswith(f"board {addr}")
    assert res["total_measured_device_s"] == pytest.approx(res["total_predicted_device_s"], rel=1e-9)


def test_deploy_refusals_one_line(direct, bit_catalog, tmp_path, capsys) -> None:
    addr = direct
    # A config without a catalog entry: the build command is named.
    assert main(["deploy", "pynq_1x16x32_i8w8a32_15_15_18_17", "--board", addr]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "codesign bitstream build pynq_1x16x32_i8w8a32_15_15_18_17" in err
    # A catalog entry whose checksum does not match the file: refused before any upload.
    doc = yaml.safe_load((tmp_path / "catalog.yaml").read_text())
    doc["bitstreams"][0]["sha256"] = "f" * 64
    (tmp_path / "catalog.yaml").write_text(yaml.safe_dump(doc))
    assert main(["deploy", "pynq_1x16", "--board", addr]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bad checksum" in err
    with pytest.raises(BoardError, match="deploy first"), BoardClient(addr) as c:
        check_loaded(c, HwConfig.resolve("pynq_1x16x32_i8w8a32_15_15_18_17"))
    assert main(["run", "--hw", "pynq_1x16", "--tracker", "127.0.0.1:1"]) == 2
    assert "--tracker needs --key" in capsys.readouterr().err
