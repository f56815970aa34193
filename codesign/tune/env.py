"""The RL environment for schedule tuning, shared by the PPO, DQN and bandit agents.

State: the knob positions of the current config. Observation (fixed size, so one agent serves
every layer and hardware config): knob positions normalized to [0, 1] and knob sizes (padded to
`MAX_KNOBS`), the config features of the schedule space, `layer_features(layer)` and
`hw_features(hw)` (squashed with a signed log1p). Reward of landing on a config: −latency / the
layer's roofline bound (`codesign.analysis.roofline`, per-call seconds; best-so-far latency if unavailable), clipped
at −`PENALTY`; invalid configs (never measured) and failed measurements get −`PENALTY`.

Rewards are *deferred*: the multi-step agents roll out with their policy (transitions are
deterministic in the knob positions), collect the configs nobody measured yet, hand them to the
driver as proposals and learn once the driver reports the results. Steps onto cached configs cost
no measurement, so agents keep learning between measurements for free.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from codesign.analysis.roofline import roofline
from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.schedule import hw_features, layer_features
from codesign.schedule.knobs import Config
from codesign.schedule.space import ScheduleSpace
from codesign.schedule.support import unsupported_reason
from codesign.tune.agents import KNOB_SLOTS, MAX_KNOBS, torch_module
from codesign.tune.loop import tune_layer
from codesign.tune.measure import MeasureResult, SimulatorRunner
from codesign.tune.records import family_space
from codesign.tune.task import make_task
from codesign.tune.tuner import Tuner
from codesign.tune.view import SpaceView, squash
from codesign.workloads.layers import Layer

#: Valid configs a training task's family is sampled to when it is too large to enumerate
#: (`pretrain(pool=...)`): the deployed bandit ranks as many random valid configs of such a space.
TRAIN_POOL = 4096
PENALTY = 10.0  # reward for invalid configs and failures, in roofline-bound units
HORIZON = 20  # steps per episode (ktune)
# Episode starts: ktune's zeros / random / median, plus the best config measured so far (local
# search around the incumbent), with these probabilities.
START_MODES = ("zeros", "random", "median", "best")
START_PROBS = (0.15, 0.3, 0.15, 0.4)


def task_context(layer: Layer, hw: HwConfig) -> np.ndarray:
    """Layer-shape and hardware-config features (fixed length), squashed."""
    return squash(np.concatenate([np.asarray(layer_features(layer), dtype=np.float64),
                                  np.asarray(hw_features(hw), dtype=np.float64)])).astype(np.float32)


def roofline_seconds(layer: Layer, hw: HwConfig) -> float | None:
    """The layer's attainable lower bound in seconds, or None if the roofline is unavailable."""
    try:
        roof = roofline(layer, hw)
        # bound_call_seconds includes the unavoidable host overhead, like measured seconds do
        bound = float(getattr(roof, "bound_call_seconds", roof.bound_seconds))
        return bound if bound > 0 and math.isfinite(bound) else None
    except Exception:  # noqa: BLE001 - optional: fall back to the best-so-far normalizer
        return None


class ScheduleEnv:
    """Knob-position dynamics, observations and (deferred) rewards for one layer on one hw."""

    def __init__(self, view: SpaceView, layer: Layer, hw: HwConfig, rng: np.random.Generator,
                 horizon: int = HORIZON) -> None:
        self.view, self.layer, self.hw, self.rng, self.horizon = view, layer, hw, rng, horizon
        self.dims = np.asarray(view.dims, dtype=np.int64)
        self.n_knobs = len(self.dims)
        self.slots = KNOB_SLOTS.get(view.family, MAX_KNOBS)  # observation width: one per family
        if self.n_knobs > self.slots:
            raise ConfigError(f"{self.n_knobs} knobs > {self.slots} knob slots of the {view.family} family's "
                              "agent observation")
        self.context = task_context(layer, hw)
        self.bound = roofline_seconds(layer, hw)
        self.seconds: dict[int, float | None] = {}  # measured: index -> seconds (None = failed)
        self.knob_mask = np.zeros(MAX_KNOBS, dtype=np.float32)  # the multi-step agents' action width
        self.knob_mask[: min(self.n_knobs, MAX_KNOBS)] = (self.dims[:MAX_KNOBS] > 1).astype(np.float32)
        sizes = np.zeros(self.slots, dtype=np.float32)
        sizes[: self.n_knobs] = np.log2(self.dims)
        self._sizes = sizes / 4.0
        self.obs_dim = int(self.obs(np.zeros(self.n_knobs, dtype=np.int64)).shape[0])
        self.n_features = self.obs_dim - 2 * self.slots - int(self.context.size)  # the space's config features

    # -- observations -----------------------------------------------------------------------
    def obs(self, pos: np.ndarray) -> np.ndarray:
        return self.obs_batch(np.asarray(pos)[None, :])[0]

    def obs_batch(self, pos: np.ndarray) -> np.ndarray:
        pos = np.asarray(pos, dtype=np.int64)
        norm = np.zeros((pos.shape[0], self.slots), dtype=np.float32)
        norm[:, : self.n_knobs] = pos / np.maximum(self.dims - 1, 1)
        feats = self.view.features(self.view.index(pos))
        n = pos.shape[0]
        return np.hstack([norm, np.broadcast_to(self._sizes, (n, self.slots)), feats,
                          np.broadcast_to(self.context, (n, self.context.size))]).astype(np.float32)

    # -- dynamics ---------------------------------------------------------------------------
    def reset(self) -> np.ndarray:
        mode = START_MODES[int(self.rng.choice(len(START_MODES), p=START_PROBS))]
        if mode == "zeros":
            return np.zeros(self.n_knobs, dtype=np.int64)
        if mode == "median":
            return (self.dims - 1) // 2
        if mode == "best":
            best = self.best_index()
            if best is not None:
                return self.view.positions([best])[0]
        start = self.view.sample_valid(1, self.rng)
        return self.view.positions(start)[0] if start else np.zeros(self.n_knobs, dtype=np.int64)

    def move(self, pos: np.ndarray, action: np.ndarray) -> np.ndarray:
        """Action per knob in {0, 1, 2} = move −1, 0, +1 within the candidate list."""
        step = np.asarray(action[: self.n_knobs], dtype=np.int64) - 1
        return np.clip(pos + step, 0, self.dims - 1)

    def index(self, pos: np.ndarray) -> int:
        return int(self.view.index(np.asarray(pos)[None, :])[0])

    # -- rewards ----------------------------------------------------------------------------
    def record(self, index: int, seconds: float | None) -> None:
        self.seconds[int(index)] = seconds

    def best_index(self) -> int | None:
        ok = [(s, i) for i, s in self.seconds.items() if s is not None]
        return min(ok)[1] if ok else None

    def normalizer(self) -> float:
        if self.bound is not None:
            return self.bound
        ok = [s for s in self.seconds.values() if s is not None]
        return min(ok) if ok else 1.0

    def reward(self, index: int) -> float | None:
        """Reward for landing on `index`; None while it is valid but not measured yet."""
        if not self.view.is_valid(index):
            return -PENALTY
        if index not in self.seconds:
            return None
        s = self.seconds[index]
        if s is None:
            return -PENALTY
        return -min(s / self.normalizer(), PENALTY)

    def is_pending(self, index: int) -> bool:
        return self.view.is_valid(index) and index not in self.seconds


class SampledView(SpaceView):
    """A space seen through a fixed sample of its valid configs: the sample is the view's whole
    valid set (enumerated, so tuners rank all of it), every other config counts as invalid.
    Pre-training on a family of 10^5 valid schedules per task needs a few thousand of them, not
    the family listed; knob positions, features and configs are the full space's.
    Local moves stay in the sample: a move goes to a random nearest member (fewest knobs
    changed), so a search that walks one knob at a time (XGBoost's annealing, evo's mutation)
    is not stranded on a sample where most one-knob moves leave it."""

    def __init__(self, space: Any, indices: Sequence[int] | np.ndarray) -> None:
        super().__init__(space)
        self.enumerable = True
        self._valid = np.unique(np.asarray(indices, dtype=np.int64))
        self._near: tuple[np.ndarray, np.ndarray] | None = None  # members' nearest members (CSR)

    def _nearest_table(self) -> tuple[np.ndarray, np.ndarray]:
        """(starts, members): member r's nearest other members (fewest knobs changed) are
        members[starts[r]:starts[r + 1]] (row numbers of `valid`). Computed once per view: a search
        walks member to member, so each step looks its moves up instead of comparing every chain
        with the whole sample (64 chains x 5,000 members x 16 knobs per annealing step)."""
        if self._near is None:
            pool = self.valid_pos
            pool = pool.astype(np.int16) if pool.size and pool.max() < 2**15 else pool
            n, chunk = len(pool), 64
            starts, members = [0], []
            for a in range(0, n, chunk):
                d = (pool[a:a + chunk, None, :] != pool[None, :, :]).sum(axis=2, dtype=np.int32)
                d[np.arange(d.shape[0]), np.arange(a, a + d.shape[0])] = np.iinfo(np.int32).max  # not itself
                rows, cols = np.nonzero(d == d.min(axis=1, keepdims=True))
                members.append(cols)
                starts += (np.bincount(rows, minlength=d.shape[0]).cumsum() + starts[-1]).tolist()
            self._near = (np.asarray(starts, dtype=np.int64),
                          np.concatenate(members).astype(np.int64) if members else np.zeros(0, np.int64))
        return self._near

    def _nearest(self, pos: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """For each row of knob positions, a random sample member at the smallest nonzero number
        of knobs changed, ties uniformly at random (the row itself where the sample holds nothing
        else). Rows that are members look their moves up (`_nearest_table`); others compare."""
        pool = self.valid_pos
        pos = np.asarray(pos, dtype=np.int64).reshape(-1, pool.shape[1])
        if len(pool) < 2 or not len(pos):
            return pos.copy()
        row = np.minimum(np.searchsorted(self.valid, self.index(pos)), len(pool) - 1)
        member = (pool[row] == pos).all(axis=1)
        out = np.empty_like(pos)
        if member.any():
            starts, near = self._nearest_table()
            r = row[member]
            lo, count = starts[r], starts[r + 1] - starts[r]
            out[member] = pool[near[lo + (rng.random(r.size) * count).astype(np.int64)]]
        other = ~member
        if other.any():
            d = (pool[None, :, :] != pos[other][:, None, :]).sum(axis=2).astype(np.float64)
            d[d == 0] = np.inf
            d += rng.random(d.shape) * 0.5  # ties at random
            out[other] = pool[np.argmin(d, axis=1)]
        return out

    def mutate_positions(self, pos: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self._nearest(pos, rng)

    def mutate(self, indices: Sequence[int] | np.ndarray, rng: np.random.Generator, *, tries: int = 8) -> np.ndarray:
        del tries
        return self.index(self._nearest(self.positions(indices), rng))

    def neighbours(self, index: int) -> np.ndarray:
        d = (self.valid_pos != self.positions([index])[0]).sum(axis=1)
        d = np.where(d == 0, np.iinfo(np.int64).max, d)
        return self.valid[d == d.min()] if len(d) > 1 else self.valid[:0]


#: Draws a sampled pool gives rejection before it lists the family (`VtaSpace.sample_valid`'s own bound).
POOL_MAX_DRAWS = 1 << 22
#: Draws per round of `sample_valid_pool`: a multiple of the sampler's 2,048-draw chunk, so the rounds
#: continue one random stream and a pool rejection fills is the one a single unbroken call draws.
POOL_ROUND = 1 << 16
#: A pool the first round does not fill is drawn from the listing when the family holds fewer than this
#: many times its size (`VtaSpace.valid_estimate`, seeded: the choice depends on the request only):
#: rejection then pays ~n / acceptance draws plus the repeats of collecting a good share of the family,
#: the listing ~support / 120 rows (one per geometry and kernel, `VtaSpace.valid_indices`). On
#: conv2d:1,16,8,8,16,3,3 (8,743 valid) a 4,096 pool took ~30 s drawn, 0.3 s listed. Here, not in the
#: sampler: a search's own draws never list a large family (the sampler's contract), a pool may.
POOL_LIST_RATIO = 16


def sample_valid_pool(space: Any, n: int, rng: np.random.Generator) -> np.ndarray:
    """Up to `n` distinct valid configs of `space`, uniformly at random, sorted: by the space's
    own sampler when it has one (`VtaSpace.sample_valid`), else drawn from its valid indices.
    The sampler draws in rounds of `POOL_ROUND` (the pool is the one a single call draws); a pool
    the first round does not fill is drawn from the listing when the family is small next to it
    (`POOL_LIST_RATIO`), or when at the last round's rate the sampler would not fill it within
    `POOL_MAX_DRAWS` (a family about the pool's size: rejection misses its rarest configs), so a
    family smaller than the pool is then the pool, exactly, without the draws that once ran
    `POOL_MAX_DRAWS` out before it was listed."""
    sampler = getattr(space, "sample_valid", None)
    if sampler is not None:
        got: list[int] = []
        draws = 0
        while draws < POOL_MAX_DRAWS:
            step = min(POOL_ROUND, POOL_MAX_DRAWS - draws)
            new = np.asarray(sampler(n - len(got), rng, set(got), max_draws=step), dtype=np.int64)
            got += new.tolist()
            draws += step
            if len(got) >= n:
                return np.unique(np.asarray(got, dtype=np.int64))
            estimate = getattr(space, "valid_estimate", None)
            if draws == step and estimate is not None and estimate() < POOL_LIST_RATIO * n:
                break  # a small family: its listing costs less than the draws
            if not new.size or (n - len(got)) / new.size * step > 2 * (POOL_MAX_DRAWS - draws):
                break  # at the last round's rate the bound would run out: list
    valid = np.asarray(space.valid_indices(), dtype=np.int64)
    return np.sort(rng.choice(valid, size=min(n, valid.size), replace=False)) if valid.size else valid


@dataclass
class Transition:
    obs: np.ndarray
    action: np.ndarray
    logp: float
    value: float
    next_pos: np.ndarray
    next_index: int
    done: bool


class MultiStepTuner(Tuner):
    """Rollout bookkeeping shared by the multi-step agents (PPO, DQN): the policy walks the knob
    grid; configs nobody has measured become proposals; `learn` runs once their rewards are in.
    Subclasses implement `act(obs) -> (action, logp, value)` and `learn(transitions, last_obs)`."""

    batch_size = 4
    max_steps_per_propose = 200
    learn_every = 64  # transitions between learning calls
    agent_cls: Any = None  # the algorithm's agent class (save/load, obs_dim, hp)
    learn_every_key = "learn_every"  # which hyper-parameter sets `learn_every`

    def __init__(self, space: ScheduleSpace, seed: int = 0, view: SpaceView | None = None, agent: Any = None,
                 hparams: dict | None = None) -> None:
        super().__init__(space, seed, view, hparams)
        self.env: ScheduleEnv | None = None
        self.pos: np.ndarray | None = None
        self.t = 0
        self.buffer: list[Transition] = []
        # `agent` is a trained agent or a checkpoint path (warm start), else one is built per task.
        self.agent = self.agent_cls.load(agent) if isinstance(agent, (str, Path)) else agent
        self.hparams = self.hp  # converted and checked (`resolve_hparams`), not the --hparam strings
        hp = self.agent.hp if self.agent else self.hp
        self.learn_every = int(hp[self.learn_every_key])

    def set_task(self, layer: Layer, hw: HwConfig) -> None:
        self.env = ScheduleEnv(self.view, layer, hw, self.rng)
        for idx, r in self.results.items():
            self.env.record(idx, r.seconds if r.ok else None)
        self.on_task()

    def on_task(self) -> None:
        """Build the agent, or check a loaded one fits, once the observation size is known."""
        assert self.env is not None
        if self.env.n_knobs > MAX_KNOBS:
            raise ConfigError(f"{self.name}: {self.env.n_knobs} knobs but the agent acts on {MAX_KNOBS}; "
                              "use --tuner bandit, xgb or evo for this schedule family")
        if self.agent is None:
            self.agent = self.agent_cls(self.env.obs_dim, self.hparams, self.seed)
        elif self.agent.obs_dim != self.env.obs_dim:
            raise ConfigError(f"agent observation size {self.agent.obs_dim} != {self.env.obs_dim} for this "
                              "space (agent trained with another feature set); retrain it")
        torch_module().manual_seed(self.seed)

    def observe(self, results: Sequence[MeasureResult]) -> None:
        super().observe(results)
        if self.env is not None:
            for r in results:
                self.env.record(int(r.config.index), r.seconds if r.ok else None)

    def act(self, obs: np.ndarray) -> tuple[np.ndarray, float, float]:
        raise NotImplementedError

    def learn(self, transitions: list[Transition], last_obs: np.ndarray) -> None:
        raise NotImplementedError

    def propose(self, n: int) -> list[Config]:
        env = self.env
        if env is None:
            raise RuntimeError("set_task(layer, hw) must be called before propose()")
        pending: list[int] = []
        for _ in range(self.max_steps_per_propose):
            if len(pending) >= n:
                break
            if not pending and len(self.buffer) >= self.learn_every:
                self.learn(self.buffer, env.obs(self.pos if self.pos is not None else env.reset()))
                self.buffer = []
            if self.pos is None or self.t >= env.horizon:
                self.pos, self.t = env.reset(), 0
            obs = env.obs(self.pos)
            action, logp, value = self.act(obs)
            nxt = env.move(self.pos, action)
            idx = env.index(nxt)
            self.t += 1
            self.buffer.append(Transition(obs, action, logp, value, nxt, idx, self.t >= env.horizon))
            if env.is_pending(idx) and idx not in pending:
                pending.append(idx)
            self.pos = nxt
        if len(pending) < n:  # the policy only revisits measured configs: explore at random
            pending += self.random_unmeasured(n - len(pending), exclude=pending)
        return [self.view.config(i) for i in pending]

    def rewards(self, transitions: list[Transition]) -> np.ndarray:
        env = self.env
        assert env is not None
        out = []
        for tr in transitions:
            r = env.reward(tr.next_index)
            out.append(-PENALTY if r is None else r)  # unmeasured (budget ran out): treat as failure
        return np.asarray(out, dtype=np.float32)


def pretrain(algo: str, layers: Any, hws: Any = None, *, budget: int = 50, seed: int = 0, agent: Any = None,
             runner_factory: Any = None, epochs: int = 1, progress: bool = False, family: str = "autotvm",
             pool: int | None = None) -> Any:
    """Train one agent across layers and hardware configs and return it (`agent.save(path)`).

    `layers` x `hws` are the tasks (each layer at the smallest batch the config's BATCH divides;
    layers a config cannot run are skipped); with `hws=None`, `layers` is a list of (layer, hw)
    pairs. Each task is tuned with `budget` measurements, the agent's weights (and, for the
    bandit, its data) carried from task to task. `runner_factory(layer, hw)` builds the runner
    (default: the simulator). `agent`: an agent object or checkpoint path to continue from.
    `pool`: a task whose space is too large for the view to enumerate is tuned on `pool` of its
    valid configs drawn uniformly once (`SampledView`; seeded by the task) instead of the family.
    """
    if hws is None:
        tasks = [(layer, hw) for layer, hw in layers]
    else:
        tasks = []
        for hw in hws:
            for layer in layers:
                if layer.batch % hw.batch:
                    layer = layer.with_batch(math.lcm(layer.batch, hw.batch))
                if unsupported_reason(layer, hw) is None:
                    tasks.append((layer, hw))
    views: dict[int, SpaceView] = {}
    for epoch in range(epochs):
        for k, (layer, hw) in enumerate(tasks):
            view = None
            if pool is not None:
                if k not in views:
                    space = family_space(layer, hw, family)
                    full = SpaceView(space)
                    views[k] = full if full.enumerable else SampledView(
                        space, sample_valid_pool(space, pool, np.random.default_rng(seed + k)))
                view = views[k]
            task = make_task(layer, hw, algo, seed + 1000 * epoch + k, agent=agent, family=family,
                             space=view.space if view else None, view=view)
            runner = runner_factory(layer, hw) if runner_factory else SimulatorRunner(hw)
            tune_layer(layer, hw, tuner=task.tuner, budget=budget, seed=seed + 1000 * epoch + k, runner=runner,
                       progress=progress)
            agent = task.tuner.agent
    return agent
