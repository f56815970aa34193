"""What the three learned tuners (bandit, PPO, DQN) share about torch: one way to load it, one
checkpoint format (`--agent PATH` / `--save-agent PATH`: weights + hyper-parameters, tagged with
the algorithm) and the fixed knob width of their observations and actions."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, ClassVar, Self

from codesign.errors import ConfigError
from codesign.fileio import atomic_write_bytes

MAX_KNOBS = 7  # conv2d_packed has 7 knobs, dense_packed 4 (docs/vta.md §7.2); pad to the larger
#: Knob slots of an observation per schedule family (the multi-step agents act on MAX_KNOBS): the
#: vta family's conv2d has 13 knobs today (5 tiles, order, residency, thread axis, micro-op fold,
#: input residency, ACC slots, thread count, lifted loop); the slots leave room for more, so its
#: agents' observation size does not change with each knob.
KNOB_SLOTS = {"autotvm": MAX_KNOBS, "vta": 16}


def torch_module() -> Any:
    """torch, single-threaded (2 shared cores; small MLPs are faster single-threaded anyway)."""
    import torch  # heavy (~1 s): loaded only when a learned tuner is built

    torch.set_num_threads(1)
    return torch


# -- checkpoints (torch.save of weights + hyper-parameters; shared by the three agents) --------
def save_checkpoint(path: Any, algo: str, hparams: dict, obs_dim: int, state: dict) -> None:
    torch = torch_module()
    buf = io.BytesIO()
    torch.save({"algo": algo, "hparams": hparams, "obs_dim": obs_dim, "max_knobs": MAX_KNOBS,
                "state": state}, buf)
    atomic_write_bytes(path, buf.getvalue())  # a crash never leaves half a checkpoint


def load_checkpoint(path: Any, algo: str) -> dict:
    torch = torch_module()
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=False)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such agent checkpoint") from None
    except Exception as exc:  # noqa: BLE001 - corrupt/foreign file: one clear message
        raise ConfigError(f"{path}: not a torch agent checkpoint ({type(exc).__name__})") from None
    if not isinstance(ckpt, dict) or ckpt.get("algo") != algo:
        got = ckpt.get("algo") if isinstance(ckpt, dict) else type(ckpt).__name__
        raise ConfigError(f"{path}: checkpoint is for agent {got!r}, but tuner {algo!r} was asked for; "
                          f"use --tuner {got}")
    return ckpt


class CheckpointMixin:
    """`save(path)` / `load(path)` for an agent with `hp`, `obs_dim`, a constructor
    `(obs_dim, hparams)` and its learned state as `state()` / `load_state(state)`."""

    algo: ClassVar[str]
    hp: dict[str, Any]
    obs_dim: int

    def state(self) -> dict[str, Any]:
        raise NotImplementedError

    def load_state(self, state: dict[str, Any]) -> None:
        raise NotImplementedError

    def save(self, path: str | Path) -> None:
        save_checkpoint(path, self.algo, self.hp, self.obs_dim, self.state())

    @classmethod
    def load(cls, path: str | Path) -> Self:
        ckpt = load_checkpoint(path, cls.algo)
        agent = cls(ckpt["obs_dim"], ckpt["hparams"])  # type: ignore[call-arg]
        agent.load_state(ckpt["state"])
        return agent


__all__ = ["KNOB_SLOTS", "MAX_KNOBS", "CheckpointMixin", "load_checkpoint", "save_checkpoint", "torch_module"]
