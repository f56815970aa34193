"""Hardware side: VTA configs, boards, and (later) resource and power models."""

from codesign.hw.board import Board
from codesign.hw.config import DEFAULT, HwConfig

__all__ = ["Board", "DEFAULT", "HwConfig"]
