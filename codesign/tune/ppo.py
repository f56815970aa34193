"""PPO schedule tuner (multi-step; CleanRL-style single file, hyper-parameters at the top).

Policy: MultiDiscrete — for each knob an independent categorical over {−1, 0, +1} moves; knobs
with one candidate (or absent, for dense) are masked out of the log-probability. Episodes of
`HORIZON` steps start from zeros / random / median / best-so-far positions (`env.py`). Update:
clipped surrogate objective with GAE(λ) advantages, value loss and an entropy bonus, several
epochs of minibatches over each rollout of `ROLLOUT` steps.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from codesign.tune.agents import MAX_KNOBS, CheckpointMixin, torch_module
from codesign.tune.env import MultiStepTuner, Transition

ALGO = "ppo"
HPARAMS = {
    "hidden": 64,
    "lr": 1e-3,
    "gamma": 0.9,
    "gae_lambda": 0.95,
    "clip": 0.2,
    "epochs": 4,
    "minibatch": 32,
    "ent_coef": 0.01,
    "vf_coef": 0.5,
    "max_grad_norm": 0.5,
    "rollout": 64,  # transitions per update
}
# Bounds a --hparam value must keep (inclusive; the rest only need >= 0).
HPARAM_RANGES = {"hidden": (1, None), "gamma": (0, 1), "gae_lambda": (0, 1), "epochs": (1, None), "minibatch": (1, None),
                 "rollout": (1, None)}


class PPOAgent(CheckpointMixin):
    """Actor-critic MLP + optimizer + hyper-parameters; what `--agent PATH` saves and loads."""

    def __init__(self, obs_dim: int, hparams: dict | None = None, seed: int = 0) -> None:
        torch = torch_module()
        from torch import nn

        self.hp = dict(HPARAMS, **(hparams or {}))
        self.obs_dim = obs_dim
        torch.manual_seed(seed)
        h = self.hp["hidden"]

        def mlp(out: int, std: float) -> nn.Sequential:
            net = nn.Sequential(nn.Linear(obs_dim, h), nn.Tanh(), nn.Linear(h, h), nn.Tanh(), nn.Linear(h, out))
            nn.init.orthogonal_(net[-1].weight, std)
            nn.init.zeros_(net[-1].bias)
            return net

        self.actor = mlp(MAX_KNOBS * 3, 0.01)
        self.critic = mlp(1, 1.0)
        self.opt = torch.optim.Adam(list(self.actor.parameters()) + list(self.critic.parameters()),
                                    lr=self.hp["lr"], eps=1e-5)

    def dist(self, obs: Any) -> Any:
        torch = torch_module()
        logits = self.actor(obs).view(-1, MAX_KNOBS, 3)
        return torch.distributions.Categorical(logits=logits)

    def act(self, obs: np.ndarray, mask: np.ndarray, greedy: bool = False) -> tuple[np.ndarray, float, float]:
        torch = torch_module()
        with torch.no_grad():
            x = torch.as_tensor(obs[None, :])
            d = self.dist(x)
            a = d.probs.argmax(-1) if greedy else d.sample()
            logp = float((d.log_prob(a) * torch.as_tensor(mask)).sum())
            value = float(self.critic(x)[0, 0])
        return a[0].numpy().astype(np.int64), logp, value

    algo = ALGO

    def state(self) -> dict[str, Any]:
        return {"actor": self.actor.state_dict(), "critic": self.critic.state_dict()}

    def load_state(self, state: dict[str, Any]) -> None:
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])


class PPOTuner(MultiStepTuner):
    name = ALGO

    agent_cls = PPOAgent
    HPARAMS = HPARAMS
    HPARAM_RANGES = HPARAM_RANGES
    learn_every_key = "rollout"

    def act(self, obs: np.ndarray) -> tuple[np.ndarray, float, float]:
        assert self.agent is not None and self.env is not None
        return self.agent.act(obs, self.env.knob_mask)

    def learn(self, transitions: list[Transition], last_obs: np.ndarray) -> None:
        torch = torch_module()
        agent, env = self.agent, self.env
        assert agent is not None and env is not None
        hp = agent.hp
        rewards = self.rewards(transitions)
        values = np.array([t.value for t in transitions], dtype=np.float32)
        dones = np.array([t.done for t in transitions], dtype=np.float32)
        with torch.no_grad():
            last_value = float(agent.critic(torch.as_tensor(last_obs[None, :]))[0, 0])
        # GAE(λ) backwards over the rollout; `done` cuts the bootstrap at episode ends.
        adv = np.zeros_like(rewards)
        gae = 0.0
        for t in reversed(range(len(transitions))):
            next_value = last_value if t == len(transitions) - 1 else values[t + 1]
            nonterminal = 1.0 - dones[t]
            delta = rewards[t] + hp["gamma"] * next_value * nonterminal - values[t]
            gae = delta + hp["gamma"] * hp["gae_lambda"] * nonterminal * gae
            adv[t] = gae
        returns = adv + values
        obs = torch.as_tensor(np.stack([t.obs for t in transitions]))
        acts = torch.as_tensor(np.stack([t.action for t in transitions]))
        old_logp = torch.as_tensor(np.array([t.logp for t in transitions], dtype=np.float32))
        adv_t = torch.as_tensor(adv)
        ret_t = torch.as_tensor(returns)
        mask = torch.as_tensor(env.knob_mask)
        n = len(transitions)
        for _ in range(hp["epochs"]):
            perm = torch.as_tensor(self.rng.permutation(n))
            for start in range(0, n, hp["minibatch"]):
                mb = perm[start:start + hp["minibatch"]]
                d = agent.dist(obs[mb])
                logp = (d.log_prob(acts[mb]) * mask).sum(-1)
                entropy = (d.entropy() * mask).sum(-1).mean()
                ratio = (logp - old_logp[mb]).exp()
                a = adv_t[mb]
                a = (a - a.mean()) / (a.std() + 1e-8) if len(mb) > 1 else a
                pg_loss = torch.max(-a * ratio, -a * ratio.clamp(1 - hp["clip"], 1 + hp["clip"])).mean()
                v_loss = 0.5 * ((agent.critic(obs[mb]).squeeze(-1) - ret_t[mb]) ** 2).mean()
                loss = pg_loss + hp["vf_coef"] * v_loss - hp["ent_coef"] * entropy
                agent.opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(list(agent.actor.parameters()) + list(agent.critic.parameters()),
                                               hp["max_grad_norm"])
                agent.opt.step()
