"""Contextual-bandit schedule tuner (one step; CleanRL-style single file, hyper-parameters on top).

Horizon 1: the action is a full knob vector (a config), the context is the layer and hardware
features, the reward is the environment's normalized latency (`env.py`). Neural-bandit
formulation: an ensemble of `HEADS` small MLPs, each fit on its own bootstrap resample of every
(observation, reward) pair seen so far, predicts the reward of a config from the fixed-size
observation. Exploration is Thompson-style — each proposal draws one head and takes its best
unmeasured valid config — plus ε-greedy random configs. Because observations carry layer and
hardware features, a model trained on other layers and configs (`pretrain`) ranks an unseen
layer's configs before the first measurement.

The regression target is log(−reward) = log(latency / bound) (a monotone transform of the reward)
so that a few very slow configs do not dominate the squared error.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.schedule import ScheduleSpace
from codesign.schedule.knobs import Config
from codesign.tune.agents import CheckpointMixin, torch_module
from codesign.tune.env import PENALTY, ScheduleEnv
from codesign.tune.measure import MeasureResult
from codesign.tune.records import MeasureRecord, family_space, resolve_config
from codesign.tune.tuner import Tuner
from codesign.tune.view import SpaceView
from codesign.workloads import parse_layer
from codesign.workloads.layers import Layer

ALGO = "bandit"
HPARAMS = {
    "hidden": 64,
    "heads": 5,
    "lr": 3e-3,
    "weight_decay": 1e-4,
    "fit_steps": 30,  # Adam steps after each batch of observations
    "fit_batch": 256,
    "bootstrap_p": 0.8,  # probability a sample is in a head's resample
    "epsilon": 0.05,
    "min_data": 8,  # measurements before a fresh (untrained) model is trusted
    "max_data": 20000,
}
_SAID: set[str] = set()  # refusal lines printed in this process
CANDIDATES = 4096  # random valid configs a space too large to enumerate is ranked on (drawn once per task)
FRESH = 256  # random valid configs added to them per proposal (sampling 4096 each time cost ~2 s on vta)
# Bounds a --hparam value must keep (inclusive; the rest only need >= 0).
HPARAM_RANGES = {"hidden": (1, None), "heads": (1, None), "fit_batch": (1, None), "bootstrap_p": (0, 1),
                 "epsilon": (0, 1), "max_data": (1, None)}


def _ensemble(obs_dim: int, hidden: int, heads: int) -> Any:
    """`heads` independent MLPs (obs → hidden → hidden → 1) evaluated in one batched pass."""
    torch = torch_module()
    from torch import nn

    class Ensemble(nn.Module):
        def __init__(self) -> None:
            super().__init__()

            def p(*shape: int, fan_in: int) -> nn.Parameter:
                bound = 1.0 / math.sqrt(fan_in)  # nn.Linear's default init range
                return nn.Parameter(torch.empty(*shape).uniform_(-bound, bound))

            self.w1, self.b1 = p(heads, obs_dim, hidden, fan_in=obs_dim), p(heads, 1, hidden, fan_in=obs_dim)
            self.w2, self.b2 = p(heads, hidden, hidden, fan_in=hidden), p(heads, 1, hidden, fan_in=hidden)
            self.w3, self.b3 = p(heads, hidden, 1, fan_in=hidden), p(heads, 1, 1, fan_in=hidden)

        def forward(self, x: Any) -> Any:  # (n, obs_dim) -> (heads, n)
            h = torch.relu(torch.einsum("nd,edh->enh", x, self.w1) + self.b1)
            h = torch.relu(torch.bmm(h, self.w2) + self.b2)
            return (torch.bmm(h, self.w3) + self.b3).squeeze(-1)

    return Ensemble()


class BanditAgent(CheckpointMixin):
    """Reward-model ensemble, its optimizer and the (observation, target) data it is fit on."""

    def __init__(self, obs_dim: int, hparams: dict | None = None, seed: int = 0) -> None:
        torch = torch_module()
        self.hp = dict(HPARAMS, **(hparams or {}))
        self.obs_dim = obs_dim
        torch.manual_seed(seed)
        self.heads = _ensemble(obs_dim, self.hp["hidden"], self.hp["heads"])
        self.opt = torch.optim.Adam(self.heads.parameters(), lr=self.hp["lr"],
                                    weight_decay=self.hp["weight_decay"])
        self.obs: list[np.ndarray] = []
        self.y: list[float] = []
        self.boot: list[np.ndarray] = []
        self.trained = False  # True once fit on enough data (or loaded from a checkpoint)
        self.rng = np.random.default_rng(seed)

    def add(self, obs: np.ndarray, y: float) -> None:
        self.obs.append(obs.astype(np.float32))
        self.y.append(float(y))
        self.boot.append((self.rng.random(self.hp["heads"]) < self.hp["bootstrap_p"]).astype(np.float32))
        if len(self.y) > self.hp["max_data"]:
            del self.obs[0], self.y[0], self.boot[0]

    def fit(self, steps: int | None = None) -> None:
        torch = torch_module()
        hp = self.hp
        if not self.y:
            return
        x = torch.as_tensor(np.stack(self.obs))
        y = torch.as_tensor(np.asarray(self.y, dtype=np.float32))
        w = torch.as_tensor(np.stack(self.boot))
        n = len(self.y)
        for _ in range(hp["fit_steps"] if steps is None else steps):
            mb = torch.as_tensor(self.rng.integers(n, size=min(n, hp["fit_batch"])))
            pred = self.heads(x[mb])  # (heads, b)
            wt = w[mb].T
            loss = ((pred - y[mb][None, :]) ** 2 * wt).sum() / wt.sum().clamp(min=1.0)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
        self.trained = True

    def predict(self, obs: np.ndarray) -> np.ndarray:
        """(heads, n) predicted targets (higher = faster)."""
        torch = torch_module()
        with torch.no_grad():
            x = torch.as_tensor(obs)
            return self.heads(x).numpy()

    algo = ALGO

    def state(self) -> dict[str, Any]:
        return {"heads": self.heads.state_dict()}

    def load_state(self, state: dict[str, Any]) -> None:
        self.heads.load_state_dict(state["heads"])
        self.trained = True


def target(seconds: float | None, norm: float) -> float:
    """Regression target: −log of the (clipped) normalized latency; failures get the penalty."""
    ratio = PENALTY if seconds is None else min(seconds / norm, PENALTY)
    return -math.log(max(ratio, 1e-9))


class BanditTuner(Tuner):
    name = ALGO
    HPARAMS = HPARAMS
    HPARAM_RANGES = HPARAM_RANGES
    batch_size = 4

    def __init__(self, space: ScheduleSpace, seed: int = 0, view: SpaceView | None = None, agent: Any = None,
                 hparams: dict | None = None) -> None:
        super().__init__(space, seed, view, hparams)
        self.agent: BanditAgent | None = BanditAgent.load(agent) if isinstance(agent, (str, Path)) else agent
        self.agent_file = str(agent) if isinstance(agent, (str, Path)) else None
        self.refused: str | None = None  # why the agent file was refused (then: not used; this tuner starts cold)
        self.hparams = self.hp  # converted and checked (`resolve_hparams`), not the --hparam strings
        self.env: ScheduleEnv | None = None
        self._obs: np.ndarray | None = None  # observation of every valid config (enumerable spaces; row-aligned)
        self._task_data = 0
        self._pretrained = False
        self._pool: tuple[np.ndarray, np.ndarray] | None = None  # large spaces: sampled configs, observations

    def set_task(self, layer: Layer, hw: HwConfig) -> None:
        self.env = ScheduleEnv(self.view, layer, hw, self.rng)
        self._obs = self.env.obs_batch(self.view.valid_pos) if self.view.enumerable else None
        self._pool = None
        if self.agent is not None and self.agent.obs_dim != self.env.obs_dim:
            why = (f"agent observations are {self.agent.obs_dim} long, the {self.view.family} family's are "
                   f"{self.env.obs_dim} now ({self.env.n_features} schedule features); the agent was trained with "
                   f"another feature set: retrain it (python benchmarks/train_agent.py --schedules {self.view.family})")
            if self.agent_file is None:
                raise ConfigError(why)
            self.refused = f"{self.agent_file}: {why}; not used"
            if self.refused not in _SAID:  # once per process, not once per layer
                _SAID.add(self.refused)
                print(f"bandit: {self.refused}", file=sys.stderr)
            self.agent = None
        if self.agent is None:
            self.agent = BanditAgent(self.env.obs_dim, self.hparams, self.seed)
        self._pretrained = self.agent.trained
        self.agent.rng = np.random.default_rng(self.seed)
        torch_module().manual_seed(self.seed)

    def observe(self, results: Sequence[MeasureResult]) -> None:
        super().observe(results)
        env, agent = self.env, self.agent
        if env is None or agent is None:
            return
        idx = np.asarray([int(r.config.index) for r in results], dtype=np.int64)
        for i, r in zip(idx.tolist(), results):
            env.record(i, r.seconds if r.ok else None)
        keep = self.view.valid_mask(idx)  # the model only ranks valid configs; invalid ones are filtered exactly
        obs = self._observe_batch(idx[keep])
        added = 0
        for o, r in zip(obs, (r for r, k in zip(results, keep) if k)):
            agent.add(o, target(r.seconds if r.ok else None, env.normalizer()))
            added += 1
        if added:
            self._task_data += added
            agent.fit()

    def transfer(self, records: Sequence[MeasureRecord], max_tasks: int = 64) -> None:
        """Fit the reward model on records of other (layer, hw) tasks before tuning this one."""
        agent = self.agent
        assert agent is not None, "set_task(layer, hw) first"
        groups: dict[tuple[str, str], list[MeasureRecord]] = {}
        for r in records:
            groups.setdefault((r.layer_spec, r.hw, r.family), []).append(r)
        added = 0
        for (spec, hw_name, _family), recs in list(groups.items())[:max_tasks]:
            try:
                layer, hw = parse_layer(spec), HwConfig.resolve(hw_name)
                view = SpaceView(family_space(layer, hw, recs[0].family))
            except Exception:  # noqa: BLE001, S112 - records of a layer/config we cannot rebuild: skip
                continue
            resolved = [(r, resolve_config(view.space, r.knobs)) for r in recs]  # by knobs: vta indices change
            recs = [r for r, c in resolved if c is not None]
            configs = [c for _, c in resolved if c is not None]
            env = ScheduleEnv(view, layer, hw, self.rng)
            for r, c in zip(recs, configs):
                env.record(int(c.index), r.seconds if r.ok else None)
            ok = [(r, c) for r, c in zip(recs, configs) if view.is_valid(int(c.index))]
            if not ok:
                continue
            pos = view.positions([int(c.index) for _, c in ok])
            for o, (r, _) in zip(env.obs_batch(pos), ok):
                agent.add(o, target(r.seconds if r.ok else None, env.normalizer()))
                added += 1
        if added:
            agent.fit(agent.hp["fit_steps"] * 10)
            self._pretrained = True

    def propose(self, n: int) -> list[Config]:
        agent = self.agent
        assert agent is not None and self.env is not None, "set_task(layer, hw) first"
        if not agent.trained or (not self._pretrained and len(agent.y) < agent.hp["min_data"]):
            return [self.view.config(i) for i in self.random_unmeasured(n)]
        measured = np.fromiter(self.results, dtype=np.int64) if self.results else np.zeros(0, np.int64)
        pool, obs = self._candidates()
        free = np.flatnonzero(~np.isin(pool, measured))
        if free.size == 0:
            return []
        preds = agent.predict(obs[free])  # (heads, free)
        chosen: list[int] = []
        for _ in range(min(n, free.size)):
            if self.rng.random() < agent.hp["epsilon"]:
                pick = self.random_unmeasured(1, exclude=chosen)
                if pick:
                    chosen.append(pick[0])
                    continue
            head = preds[int(self.rng.integers(preds.shape[0]))].copy()
            taken = np.isin(pool[free], np.asarray(chosen, dtype=np.int64))
            head[taken] = -np.inf
            chosen.append(int(pool[free[int(np.argmax(head))]]))
        return [self.view.config(i) for i in chosen]

    def _observe_batch(self, indices: np.ndarray) -> np.ndarray:
        """Observations of valid configs (looked up for an enumerable space)."""
        assert self.env is not None
        if self._obs is not None:
            return self._obs[np.searchsorted(self.view.valid, indices)]
        return self.env.obs_batch(self.view.positions(indices))

    def _candidates(self) -> tuple[np.ndarray, np.ndarray]:
        """(valid configs the model ranks, their observations): all of an enumerable space; of a
        large one `CANDIDATES` random ones drawn once per task, `FRESH` new ones each proposal
        and the neighbours of the best measured few."""
        if self._obs is not None:
            return self.view.valid, self._obs
        if self._pool is None:
            base = np.unique(np.asarray(self.view.sample_valid(CANDIDATES, self.rng), dtype=np.int64))
            self._pool = (base, self._observe_batch(base))
        ok = sorted((r for r in self.results.values() if r.ok), key=lambda r: r.seconds)
        extra = self.view.candidates(self.rng, FRESH, around=[int(r.config.index) for r in ok[:4]])
        extra = extra[~np.isin(extra, self._pool[0])]
        return np.concatenate([self._pool[0], extra]), np.concatenate([self._pool[1], self._observe_batch(extra)])
