"""RL agents: fixed-size observations across layers and hardware, rewards, checkpoints
(save -> load -> same actions), warm start and pretraining across tasks."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.schedule import ScheduleSpace
from codesign.tune import SpaceView, TableRunner, exhaustive_table, tune_layer
from codesign.tune.env import PENALTY, ScheduleEnv, pretrain
from codesign.workloads import parse_layer

HW = HwConfig()
HW48 = HwConfig.resolve("pynq_4x8")
CONV = parse_layer("conv2d:1,32,8,8,32,3,3,1,1")
CONV4 = parse_layer("conv2d:4,32,8,8,32,3,3,1,1")
DENSE = parse_layer("dense:1,256,128")


def _env(layer, hw, seed=0):
    space = ScheduleSpace(layer, hw)
    return ScheduleEnv(SpaceView(space), layer, hw, np.random.default_rng(seed))


def test_observation_size_is_fixed_across_layers_and_hw():
    sizes = {_env(layer, hw).obs_dim for layer, hw in ((CONV, HW), (DENSE, HW), (CONV4, HW48))}
    assert len(sizes) == 1
    env = _env(CONV, HW)
    assert env.obs(np.zeros(env.n_knobs, dtype=np.int64)).dtype == np.float32


def test_rewards_penalize_invalid_without_measuring():
    env = _env(CONV, HW)
    invalid = next(i for i in range(env.view.size) if not env.view.is_valid(i))
    valid = int(env.view.valid[0])
    assert env.reward(invalid) == -PENALTY
    assert env.reward(valid) is None and env.is_pending(valid)  # needs a measurement
    env.record(valid, 2 * env.normalizer())
    assert env.reward(valid) == pytest.approx(-2.0)
    env.record(int(env.view.valid[1]), None)  # failed measurement
    assert env.reward(int(env.view.valid[1])) == -PENALTY
    pos = env.move(np.zeros(env.n_knobs, dtype=np.int64), np.full(7, 2))
    assert np.array_equal(pos, np.minimum(1, env.dims - 1))


@pytest.mark.parametrize("algo", ["ppo", "dqn", "bandit"])
def test_agent_save_load_same_actions(algo, tmp_path):
    space = ScheduleSpace(CONV, HW)
    view = SpaceView(space)
    table = exhaustive_table(CONV, HW, space=space)
    from codesign.tune import make_tuner

    tuner = make_tuner(algo, space, 0, view=view)
    tune_layer(CONV, HW, tuner=tuner, budget=12, runner=TableRunner(table), space=space, view=view)
    agent = tuner.agent
    path = tmp_path / f"{algo}.pt"
    agent.save(path)
    loaded = type(agent).load(path)
    assert loaded.hp == agent.hp and loaded.obs_dim == agent.obs_dim
    env = tuner.env
    obs = env.obs_batch(view.valid_pos[:8])
    if algo == "bandit":
        assert np.allclose(agent.predict(obs), loaded.predict(obs))
    else:
        for o in obs:
            if algo == "ppo":
                a1, a2 = agent.act(o, env.knob_mask, greedy=True)[0], loaded.act(o, env.knob_mask, greedy=True)[0]
            else:
                rng = np.random.default_rng(0)
                a1, a2 = agent.act(o, rng, greedy=True), loaded.act(o, rng, greedy=True)
            assert np.array_equal(a1, a2)
    # a checkpoint of another algorithm is refused with a clear message
    other = "dqn" if algo != "dqn" else "ppo"
    with pytest.raises(ConfigError, match=f"checkpoint is for agent '{algo}'"):
        make_tuner(other, space, 0, agent=str(path), view=view)


def test_pretrain_then_warm_start_on_unseen_layer_and_hw(tmp_path):
    tables = {}

    def runner_factory(layer, hw):
        key = (layer, hw)
        if key not in tables:
            tables[key] = exhaustive_table(layer, hw)
        return TableRunner(tables[key])

    agent = pretrain("bandit", [(CONV, HW), (DENSE, HW)], budget=15, seed=0, runner_factory=runner_factory)
    assert agent.trained and len(agent.y) == 30
    path = tmp_path / "bandit.pt"
    agent.save(path)
    unseen = parse_layer("conv2d:4,32,14,14,32,3,3,1,1")
    res = tune_layer(unseen, HW48, tuner="bandit", agent=str(path), budget=5, seed=0,
                     runner=runner_factory(unseen, HW48))
    assert res.measurements == 5 and res.best is not None
    # layers x hws form: CONV runs at batch 4 on the 4x8 config
    grid_agent = pretrain("bandit", [CONV], [HW, HW48], budget=5, runner_factory=runner_factory)
    assert len(grid_agent.y) == 10 and (CONV.with_batch(4), HW48) in tables


def test_bandit_learns_from_other_tasks_records(tmp_path):
    """warm_start records of other layers/configs pretrain the bandit's reward model (transfer)."""
    from codesign.tune import RecordWriter
    from codesign.tune.records import MeasureRecord

    path = tmp_path / "other.jsonl"
    table = exhaustive_table(DENSE, HW)
    space = ScheduleSpace(DENSE, HW)
    with RecordWriter(path) as w:
        for idx, (sec, cyc) in table.items():
            w.write(MeasureRecord.make(DENSE, HW, space.get(idx), sec, cyc, None, "grid", 0))
    from codesign.tune import make_tuner

    cspace = ScheduleSpace(CONV, HW)
    tuner = make_tuner("bandit", cspace, 0)
    res = tune_layer(CONV, HW, tuner=tuner, budget=4, seed=0, warm_start=path,
                     runner=TableRunner(exhaustive_table(CONV, HW)), space=cspace)
    assert len(tuner.agent.y) == len(table) + 4  # other-task records + this task's measurements
    assert tuner._pretrained and res.measurements == 4
