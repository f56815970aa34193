"""Where the repository's data lives. The package reads only these folders, never ../shared."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HW_CONFIGS = ROOT / "hw_configs"
BOARDS = HW_CONFIGS / "boards"
SPACES = HW_CONFIGS / "spaces"
SIM_DATA = ROOT / "sim"
BITSTREAMS = ROOT / "bitstreams"
