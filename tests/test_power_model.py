"""Power model: pinned board figures, monotonicity in clock and activity, YAML override."""

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.errors import ConfigError
from codesign.hw import Board, HwConfig
from codesign.hw.power import PowerModel, activity_from_busy, energy_j
from codesign.hw.resources import estimate

U96 = Board.named("ultra96")
PYNQ = Board.named("pynq-z1")
ANCHOR = HwConfig.from_name("ultra96_1x16_i8w8a32_15_15_18_17_250MHz")
MODEL = PowerModel.load()
SMALL_NETS = {"load": 0.5, "compute": 0.5, "store": 0.25}  # the assumed activity of the calibration


def test_pinned_board_figures():
    # landscape: 4.30 W idle at 250 MHz, 3.8-3.9 W idle at 166-200 MHz, 4.43-4.47 W running small nets
    assert MODEL.power_w(ANCHOR, U96) == pytest.approx(4.30, abs=1e-9)  # the anchor of the idle line
    # the idle figures are not collinear; the line misses 166/200 MHz by 0.045 / 0.076 W
    slope = (84 * 0.5 + 50 * 0.4) / (84**2 + 50**2)  # least squares through (250, 4.30)
    assert MODEL.fitted["idle_slope_w_per_mhz"] == pytest.approx(slope)
    assert MODEL.power_w(ANCHOR.with_(clock_mhz=166), U96) == pytest.approx(4.30 - 84 * slope)
    assert MODEL.power_w(ANCHOR.with_(clock_mhz=200), U96) == pytest.approx(4.30 - 50 * slope)
    assert MODEL.fitted["idle_max_abs_error_w"] == pytest.approx(abs(4.30 - 50 * slope - 3.9))
    assert MODEL.fitted["idle_max_abs_error_w"] < 0.08
    assert 4.43 <= MODEL.power_w(ANCHOR, U96, activity=SMALL_NETS) <= 4.47
    assert MODEL.power_w(ANCHOR, U96, activity=SMALL_NETS) == pytest.approx(4.45, abs=1e-9)
    assert MODEL.fitted["static_w.ultra96"] == pytest.approx(4.30 - 250 * slope)
    assert MODEL.fitted["clock_scale"] > 0 and MODEL.fitted["dynamic_scale"] > 0


def test_breakdown_sums_and_idle_has_no_dynamic_part():
    b = MODEL.breakdown(HwConfig(), PYNQ)
    assert b["dynamic_w"] == 0.0
    assert b["total_w"] == pytest.approx(b["static_w"] + b["clock_w"])
    assert b["static_w"] == 1.9  # assumed PYNQ-Z1 figure from default.yaml


activities = st.fixed_dictionaries({k: st.floats(0, 1) for k in ("load", "compute", "store")})


@settings(max_examples=60, deadline=None)
@given(a=activities, b=activities, clocks=st.lists(st.sampled_from([100, 142, 167, 200]), min_size=2, max_size=2))
def test_power_monotone_in_clock_and_activity(a, b, clocks):
    hw = HwConfig.resolve("pynq_4x8")
    lo_f, hi_f = sorted(clocks)
    assert MODEL.power_w(hw.with_(clock_mhz=lo_f), PYNQ, activity=a) <= \
        MODEL.power_w(hw.with_(clock_mhz=hi_f), PYNQ, activity=a) + 1e-12
    lo = {k: min(a[k], b[k]) for k in a}
    hi = {k: max(a[k], b[k]) for k in a}
    assert MODEL.power_w(hw, PYNQ, activity=lo) <= MODEL.power_w(hw, PYNQ, activity=hi) + 1e-12


def test_bigger_design_draws_more():
    small = HwConfig.from_name("pynq_1x8_i8w8a32_15_14_16_16")
    full = {"load": 1, "compute": 1, "store": 1}
    assert MODEL.power_w(small, PYNQ, activity=full) < MODEL.power_w(HwConfig(), PYNQ, activity=full)


def test_override_yaml_without_calibration(tmp_path):
    data = {
        "static_w": {"pynq-z1": 2.0},
        "family_scale": {"DSP48E1": 1.0},
        "clock_uw_per_mhz": {"lut": 0.0, "ff": 0.0, "bram18": 0.0, "dsp": 1.0},
        "dynamic_uw_per_mhz": {"lut": 0.0, "ff": 0.0, "bram18": 0.0, "dsp": 2.0},
        "port_uw_per_mhz_per_bit": 0.0,
    }
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    m = PowerModel.load(path)
    hw = HwConfig()
    res = estimate(hw, PYNQ)
    # 220 DSP; the GEMM's 199 follow compute activity, the 21 control DSPs the busiest module
    idle = 2.0 + 100 * 1e-6 * 220
    assert m.power_w(hw, PYNQ, res) == pytest.approx(idle)
    assert m.power_w(hw, PYNQ, res, {"compute": 0.5}) == pytest.approx(idle + 100e-6 * 2 * (199 + 21) * 0.5)


def test_bad_yaml_names_the_key(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("static_w: {}\nbogus: 1\n")
    with pytest.raises(ConfigError, match=r"unknown key 'bogus'; allowed: .*calibration"):
        PowerModel.load(path)
    path.write_text("clock_uw_per_mhz: {lut: 1}\n")
    with pytest.raises(ConfigError, match="clock_uw_per_mhz must map each of lut, ff, bram18, dsp"):
        PowerModel.load(path)
    with pytest.raises(ConfigError, match="no such power coefficient file"):
        PowerModel.load(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="activity key 'gemm' unknown"):
        MODEL.power_w(HwConfig(), PYNQ, activity={"gemm": 1.0})


def test_energy_and_activity_helpers():
    assert energy_j(4.0, 0.25) == 1.0
    assert activity_from_busy({"load": 50, "compute": 100, "store": 0}, 200) == \
        {"load": 0.25, "compute": 0.5, "store": 0.0}
    assert activity_from_busy({}, 0) == {"load": 0.0, "compute": 0.0, "store": 0.0}
