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
BITSTREAMS = ROOT / "bitstreams"
