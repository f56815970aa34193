"""A space file whose choices can never make a valid VTA config is refused at load, naming the
file, key, why and the allowed values; an empty space says which rule removed how many points."""

from __future__ import annotations

import itertools

import pytest
import yaml

from codesign.errors import ConfigError
from codesign.hw.config import allowed_values
from codesign.hw.space import HwSpace, exclusion_kind
from codesign.paths import SPACES


def _space(**changes):
    data = yaml.safe_load((SPACES / "pynq-z1.yaml").read_text())
    for key, value in changes.items():
        section, _, name = key.partition("__")
        if name:
            data.setdefault(section, {})[name] = value
            if section == "fixed":
                data["params"].pop(name, None)
        else:
            data[section] = value
    return data


def test_a_negative_choice_is_refused_with_the_key_why_and_the_allowed_values():
    with pytest.raises(ConfigError) as exc:
        HwSpace.from_dict(_space(params__LOG_INP_BUFF_SIZE=[-15, 15]), "bad.yaml")
    msg = str(exc.value)
    assert msg.startswith("bad.yaml: params.LOG_INP_BUFF_SIZE: -15 is never a valid VTA config")
    assert "must be a non-negative integer" in msg and "\n" not in msg
    # the allowed values are codesign.hw.config's: the union over the space's other choices
    data = _space()["params"]
    others = {k: v for k, v in data.items() if k not in ("LOG_INP_BUFF_SIZE", "clock_mhz")}
    ok = set()
    for combo in itertools.product(*others.values()):
        ok |= set(allowed_values("LOG_INP_BUFF_SIZE", TARGET="pynq", **dict(zip(others, combo))))
    assert ok == set(range(min(ok), max(ok) + 1))
    assert msg.endswith(f"allowed with the space's other choices: {min(ok)}-{max(ok)}")


def test_a_fixed_value_that_spoils_every_point_is_named():
    with pytest.raises(ConfigError, match=r"x.yaml: fixed.LOG_UOP_BUFF_SIZE: -3 is never a valid VTA config.*"
                                          r"allowed with the space's other choices: 2-15"):
        HwSpace.from_dict(_space(fixed__LOG_UOP_BUFF_SIZE=-3), "x.yaml")
    with pytest.raises(ConfigError, match=r"params.LOG_INP_BUFF_SIZE: 30 .*exceeds the 16-bit sram_base"):
        HwSpace.from_dict(_space(params__LOG_INP_BUFF_SIZE=[15, 30]), "x.yaml")


def test_an_empty_space_says_which_rule_removed_how_many_points():
    space = HwSpace.from_dict(_space(constraints=["LOG_INP_BUFF_SIZE > 16"]), "c.yaml")
    counts = HwSpace.load("pynq-z1").exclusion_counts()
    assert space.enumerate() == [] and sum(counts.values()) == space.size
    msg = space.why_empty()
    assert msg.startswith(f"c.yaml: the space has no usable config: of its {space.size:,} grid points, "
                          f"{counts['usable']:,} break the constraint 'LOG_INP_BUFF_SIZE > 16'")
    assert f"{counts['need more LUT than pynq-z1 has']:,} need more LUT than pynq-z1 has" in msg


def test_exclusion_kinds_drop_the_points_own_numbers():
    assert exclusion_kind("pynq_4x32_x needs 71234 LUT but pynq-z1 has 53200 (134%)") == "need more LUT than pynq-z1 has"
    assert exclusion_kind("constraint 'a > 1' is false for pynq_1x16") == "break the constraint 'a > 1'"
    assert exclusion_kind("invalid point {'LOG_BATCH': 0}: x.yaml: LOG_ACC_BUFF_SIZE=19: micro-op overflows") == (
        "are invalid VTA configs (LOG_ACC_BUFF_SIZE)")


def test_the_sweep_refuses_an_empty_space_before_creating_anything(tmp_path):
    from codesign.cli import main

    path = tmp_path / "empty.yaml"
    path.write_text(yaml.safe_dump(_space(max_area=0.01)))
    assert main(["sweep", str(path), "--out", str(tmp_path / "o"), "--trials", "1"]) == 2
    assert not (tmp_path / "o").exists()
