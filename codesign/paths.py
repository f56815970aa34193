"""Where the repository's data lives. The package reads only these folders, never ../shared.

From a source tree (or an editable install) that is the top-level `hw_configs/`, `sim/` and
`bitstreams/`; an installed wheel carries copies of them in `codesign/_data/` (see setup.py).
"""

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
_WHEEL_DATA = _PACKAGE / "_data"  # only a built wheel has it; the source tree never does
ROOT = _WHEEL_DATA if _WHEEL_DATA.is_dir() else _PACKAGE.parent
HW_CONFIGS = ROOT / "hw_configs"
BOARDS = HW_CONFIGS / "boards"
SPACES = HW_CONFIGS / "spaces"
SIM_DATA = ROOT / "sim"
# The pretrained agent `codesign tune --tuner auto` uses where measuring is expensive (trained on
# simulator data by benchmarks/train_agent.py; provenance in the .json beside it).
SHIPPED_AGENT = SIM_DATA / "agents" / "bandit_sim.pt"
#: The same for the `vta` schedule family (`benchmarks/train_agent.py --schedules vta`): its observations
#: have the family's feature length, so it is retrained whenever the family's features change.
SHIPPED_VTA_AGENT = SIM_DATA / "agents" / "bandit_vta_sim.pt"
BITSTREAMS = ROOT / "bitstreams"


def shipped(path: str | Path) -> Path:
    """`path` itself, or, when it does not exist and is relative, the shipped file it names
    (`sim/calibration/pynq_resnet18.log`, `hw_configs/pynq_1x16.yaml`): the documented examples then
    work from any directory and from an installed wheel. A user's own file of that name wins."""
    p = Path(path)
    if p.is_absolute() or p.exists():
        return p
    candidate = ROOT / p
    return candidate if candidate.exists() else p
