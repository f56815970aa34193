"""DQN schedule tuner (multi-step; CleanRL-style single file, hyper-parameters at the top).

Action space: for each knob a move in {−1, 0, +1}. A joint Q over 3^7 actions is wasteful, so the
network has one Q-head per knob (action branching): Q(s, a) = mean_k Q_k(s, a_k), each head
greedy on its own. Replay buffer, target network synced every `TARGET_SYNC` updates, ε-greedy
exploration decaying per env step, double-DQN targets (online argmax, target evaluation).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from codesign.tune.agents import MAX_KNOBS, CheckpointMixin, torch_module
from codesign.tune.env import MultiStepTuner, Transition

ALGO = "dqn"
HPARAMS = {
    "hidden": 64,
    "lr": 1e-3,
    "gamma": 0.9,
    "buffer": 20000,
    "batch": 64,
    "updates_per_learn": 8,
    "learn_every": 16,  # env steps between learning calls
    "target_sync": 50,  # updates between target-network copies
    "eps_start": 1.0,
    "eps_end": 0.05,
    "eps_decay_steps": 1500,
    "warmup": 64,  # transitions in the buffer before learning starts
}
# Bounds a --hparam value must keep (inclusive; the rest only need >= 0).
HPARAM_RANGES = {"hidden": (1, None), "gamma": (0, 1), "buffer": (1, None), "batch": (1, None),
                 "updates_per_learn": (1, None), "learn_every": (1, None), "target_sync": (1, None),
                 "eps_start": (0, 1), "eps_end": (0, 1), "eps_decay_steps": (1, None)}


class DQNAgent(CheckpointMixin):
    """Branching Q-network, its target copy, optimizer, replay buffer and step counter."""

    def __init__(self, obs_dim: int, hparams: dict | None = None, seed: int = 0) -> None:
        torch = torch_module()
        from torch import nn

        self.hp = dict(HPARAMS, **(hparams or {}))
        self.obs_dim = obs_dim
        torch.manual_seed(seed)
        h = self.hp["hidden"]
        self.q = nn.Sequential(nn.Linear(obs_dim, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(),
                               nn.Linear(h, MAX_KNOBS * 3))
        self.target = nn.Sequential(nn.Linear(obs_dim, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(),
                                    nn.Linear(h, MAX_KNOBS * 3))
        self.target.load_state_dict(self.q.state_dict())
        self.opt = torch.optim.Adam(self.q.parameters(), lr=self.hp["lr"])
        # (obs, action, reward, next_obs, done, knob_mask) — rewards are resolved before insertion.
        self.replay: deque = deque(maxlen=self.hp["buffer"])
        self.steps = 0
        self.updates = 0

    def epsilon(self) -> float:
        hp = self.hp
        frac = min(1.0, self.steps / hp["eps_decay_steps"])
        return hp["eps_start"] + frac * (hp["eps_end"] - hp["eps_start"])

    def qvalues(self, net: Any, obs: Any) -> Any:
        return net(obs).view(-1, MAX_KNOBS, 3)

    def act(self, obs: np.ndarray, rng: np.random.Generator, greedy: bool = False) -> np.ndarray:
        torch = torch_module()
        self.steps += 0 if greedy else 1
        if not greedy and rng.random() < self.epsilon():
            return rng.integers(3, size=MAX_KNOBS)
        with torch.no_grad():
            return self.qvalues(self.q, torch.as_tensor(obs[None, :]))[0].argmax(-1).numpy().astype(np.int64)

    def update(self, rng: np.random.Generator) -> None:
        torch = torch_module()
        hp = self.hp
        idx = rng.integers(len(self.replay), size=hp["batch"])
        batch = [self.replay[i] for i in idx]
        obs = torch.as_tensor(np.stack([b[0] for b in batch]))
        act = torch.as_tensor(np.stack([b[1] for b in batch]))
        rew = torch.as_tensor(np.array([b[2] for b in batch], dtype=np.float32))
        nobs = torch.as_tensor(np.stack([b[3] for b in batch]))
        done = torch.as_tensor(np.array([b[4] for b in batch], dtype=np.float32))
        mask = torch.as_tensor(np.stack([b[5] for b in batch]))
        msum = mask.sum(-1).clamp(min=1.0)
        with torch.no_grad():
            # Double DQN: the online net picks each head's action, the target net values it.
            a_star = self.qvalues(self.q, nobs).argmax(-1, keepdim=True)
            q_next = self.qvalues(self.target, nobs).gather(-1, a_star).squeeze(-1)
            target = rew + hp["gamma"] * (1 - done) * (q_next * mask).sum(-1) / msum
        q = self.qvalues(self.q, obs).gather(-1, act.unsqueeze(-1)).squeeze(-1)
        q_joint = (q * mask).sum(-1) / msum
        loss = torch.nn.functional.smooth_l1_loss(q_joint, target)
        self.opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.q.parameters(), 10.0)
        self.opt.step()
        self.updates += 1
        if self.updates % hp["target_sync"] == 0:
            self.target.load_state_dict(self.q.state_dict())

    algo = ALGO

    def state(self) -> dict[str, Any]:
        return {"q": self.q.state_dict(), "steps": self.steps}

    def load_state(self, state: dict[str, Any]) -> None:
        self.q.load_state_dict(state["q"])
        self.target.load_state_dict(state["q"])
        self.steps = int(state.get("steps", 0))  # a trained agent keeps its low ε


class DQNTuner(MultiStepTuner):
    name = ALGO

    agent_cls = DQNAgent
    HPARAMS = HPARAMS
    HPARAM_RANGES = HPARAM_RANGES
    learn_every_key = "learn_every"

    def act(self, obs: np.ndarray) -> tuple[np.ndarray, float, float]:
        assert self.agent is not None
        return self.agent.act(obs, self.rng), 0.0, 0.0

    def learn(self, transitions: list[Transition], last_obs: np.ndarray) -> None:
        agent, env = self.agent, self.env
        assert agent is not None and env is not None
        rewards = self.rewards(transitions)
        next_obs = env.obs_batch(np.stack([t.next_pos for t in transitions]))
        for t, r, nobs in zip(transitions, rewards, next_obs):
            agent.replay.append((t.obs, t.action, float(r), nobs, float(t.done), env.knob_mask))
        if len(agent.replay) < agent.hp["warmup"]:
            return
        for _ in range(agent.hp["updates_per_learn"]):
            agent.update(self.rng)
