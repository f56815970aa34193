"""Hardware search spaces: loading errors name the key, enumeration counts, points, Ray spaces."""

import pytest
import yaml

from codesign.errors import ConfigError
from codesign.hw import HwConfig
from codesign.hw.resources import estimate, infeasible_reason
from codesign.hw.space import HwSpace


def write(tmp_path, data, name="s.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return path


BASE = {"board": "pynq-z1", "params": {"LOG_BATCH": [0, 2], "LOG_BLOCK": [3, 4]}}


def test_shipped_spaces_sizes_and_stock_points():
    small = HwSpace.load("pynq-z1-small")
    assert small.size == 144 and len(small.enumerate()) == 26
    default = HwSpace.load("pynq-z1")
    assert default.size == 3072 and len(default.enumerate()) == 1216
    u96 = HwSpace.load("ultra96")
    assert u96.size == 9216 and len(u96.enumerate()) == 3456  # x2: axi_bits 64/128
    for space in (small, default):
        names = [hw.name for hw in space.enumerate()]
        assert "pynq_1x16_i8w8a32_15_15_18_17" in names and "pynq_4x8_i8w8a32_15_16_16_18" in names
        point = space.default_point()
        assert space.to_hw(point) == HwConfig()
    assert u96.to_hw(u96.default_point()).name == "ultra96_1x16_i8w8a32_15_15_18_17_250MHz"


def test_enumerate_is_exactly_the_valid_feasible_grid(tmp_path):
    space = HwSpace.load(write(tmp_path, {**BASE, "params": {**BASE["params"], "LOG_ACC_BUFF_SIZE": [16, 17, 18],
                                                             "clock_mhz": [100, 200]}}))
    expected = []
    for b in (0, 2):
        for blk in (3, 4):
            for acc in (16, 17, 18):
                for clk in (100, 200):
                    try:
                        hw = HwConfig(LOG_BATCH=b, LOG_BLOCK=blk, LOG_ACC_BUFF_SIZE=acc, clock_mhz=clk)
                    except ConfigError:
                        continue
                    if infeasible_reason(hw, space.board) is None:
                        expected.append(hw)
    assert sorted(hw.name for hw in space.enumerate()) == sorted(hw.name for hw in expected)
    assert space.size == 24 and 0 < len(expected) < 24
    for p, hw in zip(space.enumerate_points(), space.enumerate()):
        assert space.to_hw(p) == hw and space.point_of(hw) == p


@pytest.mark.parametrize(
    "data, fragment",
    [
        ({**BASE, "bogus": 1}, "unknown key 'bogus'; allowed: board, description, params"),
        ({**BASE, "params": {"LOG_BATCHES": [0]}}, "unknown parameter params.LOG_BATCHES; allowed: LOG_BATCH"),
        ({**BASE, "params": {"LOG_BATCH": 0}}, "params.LOG_BATCH must be a non-empty list"),
        ({**BASE, "params": {"LOG_BATCH": [0, "x"]}}, "params.LOG_BATCH choice 'x' is not a number"),
        ({**BASE, "params": {"clock_mhz": [100, 150]}}, "clock_mhz 150 is not a PL clock of pynq-z1; allowed: 100, 142"),
        ({**BASE, "fixed": {"LOG_FOO": 1}}, "unknown key fixed.LOG_FOO; allowed:"),
        ({**BASE, "fixed": {"LOG_BATCH": 1}}, "LOG_BATCH is both in params and in fixed"),
        ({**BASE, "fixed": {"LOG_BLOCK_IN": 4, "LOG_BLOCK_OUT": 4}}, "either LOG_BLOCK or LOG_BLOCK_IN/LOG_BLOCK_OUT"),
        ({**BASE, "constraints": ["batchsize > 1"]}, "uses unknown name 'batchsize'; allowed:"),
        ({**BASE, "constraints": ["__import__('os')"]}, "only min(), max(), abs() calls are allowed"),
        ({**BASE, "constraints": ["LOG_BATCH >"]}, "is not a valid expression"),
        ({**BASE, "max_area": 1.5}, "max_area=1.5 must be a number in (0, 1]"),
        ({"params": BASE["params"]}, "missing key 'board'"),
        ({**BASE, "board": "zedboard"}, "unknown board 'zedboard'"),
        ({**BASE, "stock": ["not_a_config"]}, "hardware name 'not_a_config'"),
        ("[1, 2]", "expected a mapping"),
    ],
)
def test_malformed_space_is_one_clear_error(tmp_path, data, fragment):
    path = write(tmp_path, data)
    with pytest.raises(ConfigError) as exc:
        HwSpace.load(path)
    assert fragment in str(exc.value)
    assert str(exc.value).startswith(str(path))  # names the file


def test_missing_file_lists_shipped_spaces(tmp_path):
    with pytest.raises(ConfigError, match="no such space file .*pynq-z1-small"):
        HwSpace.load(tmp_path / "nope.yaml")


def test_to_hw_errors():
    space = HwSpace.load("pynq-z1-small")
    point = space.default_point()
    with pytest.raises(ConfigError, match="LOG_BATCH=3 is not a choice; allowed: 0, 1, 2"):
        space.to_hw({**point, "LOG_BATCH": 3})
    with pytest.raises(ConfigError, match="point key 'LOG_FOO' is not a parameter"):
        space.to_hw({**point, "LOG_FOO": 1})
    with pytest.raises(ConfigError, match="missing parameter 'clock_mhz'"):
        space.to_hw({k: v for k, v in point.items() if k != "clock_mhz"})
    # valid choices, impossible combination: 1x8 with a 2^16-byte INP buffer -> inp depth 2^13
    with pytest.raises(ConfigError, match="invalid point"):
        space.to_hw({**point, "LOG_BLOCK": 3, "LOG_INP_BUFF_SIZE": 16, "LOG_ACC_BUFF_SIZE": 18})
    hw, reason = space.check({**point, "LOG_BLOCK": 3, "LOG_INP_BUFF_SIZE": 16, "LOG_ACC_BUFF_SIZE": 18})
    assert hw is None and "invalid point" in reason


def test_constraints_and_max_area(tmp_path):
    base = {"board": "pynq-z1", "params": {"LOG_BATCH": [0, 1, 2], "LOG_BLOCK": [3, 4], "clock_mhz": [100, 200]}}
    full = HwSpace.load(write(tmp_path, base, "a.yaml")).enumerate()
    limited = HwSpace.load(write(tmp_path, {**base, "constraints": ["macs_per_cycle <= 128 or clock_mhz == 100"]},
                                 "b.yaml")).enumerate()
    assert limited == [hw for hw in full if hw.macs_per_cycle <= 128 or hw.clock_mhz == 100]
    assert 0 < len(limited) < len(full)
    area_space = HwSpace.load(write(tmp_path, {**base, "max_area": 0.9}, "c.yaml"))
    assert area_space.enumerate() == [hw for hw in full if estimate(hw, area_space.board).area(area_space.board) <= 0.9]
    res_space = HwSpace.load(write(tmp_path, {**base, "constraints": ["bram18 < 0.9 and dsp < 0.9"]}, "d.yaml"))
    for hw in res_space.enumerate():
        u = estimate(hw, res_space.board).utilization(res_space.board)
        assert u["bram18"] < 0.9 and u["dsp"] < 0.9
    hw = HwConfig()
    assert "constraint 'bram18 < 0.9 and dsp < 0.9' is false" in res_space.excluded_reason(hw)


def test_ray_param_space():
    from ray import tune

    from codesign.sweep.search import ray_param_space

    space = HwSpace.load("pynq-z1-small")
    ps = ray_param_space(space)
    assert set(ps) == set(space.params)
    assert all(isinstance(v, tune.search.sample.Categorical) for v in ps.values())
    assert list(ps["LOG_BATCH"].categories) == [0, 1, 2]
    assert ray_param_space(space).keys() == ps.keys()


def test_numpy_values_from_a_sampler_give_plain_numbers():
    np = pytest.importorskip("numpy")
    space = HwSpace.load("pynq-z1-small")
    point = {k: np.int64(v) for k, v in space.default_point().items()}
    hw = space.to_hw(point)
    assert hw == HwConfig() and type(hw.clock_mhz) is int


def test_rectangular_core_space(tmp_path):
    data = {"board": "ultra96", "params": {"LOG_BATCH": [0], "LOG_BLOCK_IN": [4], "LOG_BLOCK_OUT": [4, 5],
                                           "clock_mhz": [250]}}
    space = HwSpace.load(write(tmp_path, data))
    names = [hw.name for hw in space.enumerate()]
    assert names == ["ultra96_1x16_i8w8a32_15_15_18_17_250MHz", "ultra96_1x16x32_i8w8a32_15_15_18_17_250MHz"]
    assert [space.point_of(hw)["LOG_BLOCK_OUT"] for hw in space.enumerate()] == [4, 5]
