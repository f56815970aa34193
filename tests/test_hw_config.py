"""HwConfig: derived quantities, naming round trips, validation messages, YAML/JSON loading."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.errors import ConfigError
from codesign.hw import Board, HwConfig


def test_default_matches_reference_table():
    c = HwConfig()  # docs/vta.md §1.2 table, default column
    assert c.name == "pynq_1x16_i8w8a32_15_15_18_17"
    assert (c.batch, c.block_in, c.block_out) == (1, 16, 16)
    assert (c.inp_elem_bytes, c.wgt_elem_bytes, c.acc_elem_bytes, c.out_elem_bytes) == (16, 256, 64, 16)
    assert (c.uop_depth, c.inp_depth, c.wgt_depth, c.acc_depth) == (8192, 2048, 1024, 2048)
    assert (c.log_uop_depth, c.log_inp_depth, c.log_wgt_depth, c.log_acc_depth) == (13, 11, 10, 11)
    assert (c.uop_dst_bits, c.uop_src_bits, c.uop_wgt_bits) == (11, 11, 10)
    assert c.clock_mhz == 100 and c.axi_bits == 64 and c.bus_bytes == 8
    assert c.macs_per_cycle == 256


def test_4x8_matches_reference_table():
    c = HwConfig.resolve("pynq_4x8")
    assert c.name == "pynq_4x8_i8w8a32_15_16_16_18"
    assert (c.inp_elem_bytes, c.wgt_elem_bytes, c.acc_elem_bytes, c.out_elem_bytes) == (32, 64, 128, 32)
    assert (c.uop_depth, c.inp_depth, c.wgt_depth, c.acc_depth) == (8192, 2048, 1024, 2048)
    assert c.HW_VER == "0.0.1"


def test_target_defaults():
    u = HwConfig(TARGET="ultra96")
    assert u.clock_mhz == 333 and u.axi_bits == 128
    assert u.name == "ultra96_1x16_i8w8a32_15_15_18_17"


@settings(deadline=None)  # wall-clock deadlines flake on the shared 2-core machine (as the other property tests)
@given(
    target=st.sampled_from(["pynq", "ultra96", "sim"]),
    log_batch=st.integers(0, 2),
    log_bin=st.integers(2, 5),
    log_bout=st.integers(2, 5),
    uop=st.integers(10, 15),
    inp=st.integers(12, 17),
    wgt=st.integers(14, 19),
    acc=st.integers(14, 19),
    clock=st.sampled_from([None, 100, 142, 167, 200, 250]),
)
def test_name_round_trip(target, log_batch, log_bin, log_bout, uop, inp, wgt, acc, clock):
    try:
        c = HwConfig(TARGET=target, LOG_BATCH=log_batch, LOG_BLOCK_IN=log_bin, LOG_BLOCK_OUT=log_bout,
                     LOG_UOP_BUFF_SIZE=uop, LOG_INP_BUFF_SIZE=inp, LOG_WGT_BUFF_SIZE=wgt,
                     LOG_ACC_BUFF_SIZE=acc, clock_mhz=clock)
    except ConfigError:
        return  # an impossible combination; validation is tested below
    assert HwConfig.from_name(c.name) == c
    assert HwConfig.from_vta_json(c.to_dict()) == c
    square = log_bin == log_bout
    assert ("LOG_BLOCK" in c.to_vta_json()) == square


def test_vta_json_file_round_trip(tmp_path):
    c = HwConfig.resolve("pynq_4x8")
    p = tmp_path / "vta_config.json"
    p.write_text(json.dumps(c.to_vta_json()))
    assert HwConfig.from_vta_json(p) == c
    assert set(c.to_vta_json()) == {
        "TARGET", "HW_VER", "LOG_INP_WIDTH", "LOG_WGT_WIDTH", "LOG_ACC_WIDTH", "LOG_BATCH", "LOG_BLOCK",
        "LOG_UOP_BUFF_SIZE", "LOG_INP_BUFF_SIZE", "LOG_WGT_BUFF_SIZE", "LOG_ACC_BUFF_SIZE"}


@pytest.mark.parametrize("kw, key, fragment", [
    (dict(LOG_UOP_BUFF_SIZE=16), "LOG_UOP_BUFF_SIZE", "overflows 64 bits"),
    (dict(LOG_INP_WIDTH=4), "LOG_INP_WIDTH", "8-bit"),
    (dict(LOG_WGT_WIDTH=2), "LOG_WGT_WIDTH", "8-bit"),
    (dict(LOG_ACC_WIDTH=4), "LOG_ACC_WIDTH", "32-bit"),
    (dict(TARGET="vu9p"), "TARGET", "allowed"),
    (dict(LOG_ACC_BUFF_SIZE=19), "LOG_ACC_BUFF_SIZE", "overflows"),
    (dict(LOG_INP_BUFF_SIZE=2), "LOG_INP_BUFF_SIZE", "smaller than one element"),
    (dict(LOG_BATCH=-1), "LOG_BATCH", "non-negative"),
    (dict(axi_bits=48), "axi_bits", "allowed"),
    (dict(clock_mhz=0), "clock_mhz", "positive"),
])
def test_validation_names_key(kw, key, fragment):
    with pytest.raises(ConfigError) as err:
        HwConfig(**kw)
    assert key in str(err.value) and fragment in str(err.value)


def test_yaml_errors_name_file_and_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("TARGET: pynq\nLOG_BLOK: 4\n")
    with pytest.raises(ConfigError) as err:
        HwConfig.load(bad)
    assert str(bad) in str(err.value) and "LOG_BLOK" in str(err.value)
    with pytest.raises(ConfigError, match="no such file"):
        HwConfig.load(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="not of the form"):
        HwConfig.from_name("pynq_1x16")


def test_shipped_configs_and_boards():
    assert HwConfig.resolve("pynq_1x16") == HwConfig()
    z1 = Board.named("pynq-z1")
    assert (z1.lut, z1.ff, z1.bram18, z1.dsp) == (53200, 106400, 280, 220)
    assert 100 in z1.pl_clocks_mhz and z1.axi_bits == 64
    u96 = Board.named("ultra96")
    assert (u96.lut, u96.ff, u96.bram18, u96.dsp) == (70560, 141120, 432, 360)
    with pytest.raises(ConfigError, match="known boards"):
        Board.named("zedboard")
