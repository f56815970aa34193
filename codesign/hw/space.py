"""Hardware search spaces (`hw_configs/spaces/*.yaml`): choices per VTA parameter, constraints.

File format (every key is checked; an unknown one is a ConfigError naming it):

    board: pynq-z1                 # hw_configs/boards/<name>.yaml (or a path)
    description: free text
    params:                        # name -> list of choices (the search dimensions)
      LOG_BATCH: [0, 1, 2]
      LOG_BLOCK: [3, 4, 5]         # or LOG_BLOCK_IN / LOG_BLOCK_OUT (rectangular core)
      LOG_INP_BUFF_SIZE: [14, 15, 16]
      clock_mhz: [100, 142, 167, 200]
    fixed:                         # other HwConfig keys held constant (TARGET is the board's)
      LOG_UOP_BUFF_SIZE: 15
    constraints:                   # Python-like expressions that must hold for a point
      - "LOG_WGT_BUFF_SIZE >= LOG_INP_BUFF_SIZE"
      - "bram18 <= 0.95"           # resource utilization fractions and `area` are available
    max_area: 1.0                  # shorthand for "area <= max_area"
    stock: [pynq_1x16, pynq_4x8]   # reference configs (names or aliases) for default_point()

A point is a dict {param: value}. Points whose HwConfig is invalid, that break a constraint, or
that do not fit the board (codesign.hw.resources.infeasible_reason) are excluded from
`enumerate()` and must never be simulated.
"""

from __future__ import annotations

import ast
import itertools
import math
import operator
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from codesign.errors import ConfigError
from codesign.fileio import read_document
from codesign.hw.board import Board
from codesign.hw.config import LOG_KEYS, HwConfig, allowed_values, why_invalid
from codesign.hw.resource_model import SHIPPED, ResourceModel
from codesign.hw.resources import RESOURCES, Resources, estimate, infeasible_reason
from codesign.paths import SPACES, shipped

PARAM_KEYS = (
    "LOG_BATCH", "LOG_BLOCK", "LOG_BLOCK_IN", "LOG_BLOCK_OUT", "LOG_UOP_BUFF_SIZE",
    "LOG_INP_BUFF_SIZE", "LOG_WGT_BUFF_SIZE", "LOG_ACC_BUFF_SIZE", "clock_mhz", "axi_bits",
)
FIXED_KEYS = PARAM_KEYS + ("LOG_INP_WIDTH", "LOG_WGT_WIDTH", "LOG_ACC_WIDTH", "HW_VER")
TOP_KEYS = ("board", "description", "params", "fixed", "constraints", "max_area", "stock")
# HwConfig properties usable in constraints (besides the parameters themselves).
DERIVED_NAMES = (
    "batch", "block_in", "block_out", "macs_per_cycle", "uop_depth", "inp_depth", "wgt_depth",
    "acc_depth", "out_depth", "inp_elem_bytes", "wgt_elem_bytes", "acc_elem_bytes", "out_elem_bytes",
    "bus_bytes",
)
RESOURCE_NAMES = ("area", "max_utilization") + RESOURCES  # utilization fractions on the space's board
_FUNCS = {"min": min, "max": max, "abs": abs}
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_CMPOPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
           ast.Gt: operator.gt, ast.GtE: operator.ge}


@dataclass(frozen=True)
class Constraint:
    """One constraint expression, parsed and checked once at load time."""

    text: str
    tree: ast.Expression = field(repr=False, compare=False)
    names: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, text: str, allowed: set[str], where: str) -> Constraint:
        if not isinstance(text, str) or not text.strip():
            raise ConfigError(f"{where}: each constraint must be a non-empty expression string, got {text!r}")
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as exc:
            raise ConfigError(f"{where}: constraint {text!r} is not a valid expression ({exc.msg})") from None
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                if node.id not in allowed and node.id not in _FUNCS:
                    raise ConfigError(f"{where}: constraint {text!r} uses unknown name {node.id!r}; "
                                      f"allowed: {', '.join(sorted(allowed))}")
                names.add(node.id)
            elif isinstance(node, ast.Call):
                if not (isinstance(node.func, ast.Name) and node.func.id in _FUNCS) or node.keywords:
                    raise ConfigError(f"{where}: constraint {text!r}: only min(), max(), abs() calls are allowed")
            elif not isinstance(node, (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not,
                                       ast.USub, ast.UAdd, ast.BinOp, ast.Compare, ast.Constant, ast.Load,
                                       *_BINOPS, *_CMPOPS)):
                raise ConfigError(f"{where}: constraint {text!r}: {type(node).__name__} is not allowed "
                                  "(use arithmetic, comparisons, and/or/not, min/max/abs)")
            if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float)):
                raise ConfigError(f"{where}: constraint {text!r}: only numeric constants are allowed")
        return cls(text.strip(), tree, frozenset(names - set(_FUNCS)))

    def evaluate(self, env: dict[str, float]) -> bool:
        return bool(_eval(self.tree.body, env))


def _eval(node: ast.AST, env: dict[str, float]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.BoolOp):
        values = (_eval(v, env) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env)
        return (not v) if isinstance(node.op, ast.Not) else (-v if isinstance(node.op, ast.USub) else +v)
    if isinstance(node, ast.BinOp):
        return _BINOPS[type(node.op)](_eval(node.left, env), _eval(node.right, env))
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env)
        for op, comp in zip(node.ops, node.comparators):
            right = _eval(comp, env)
            if not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Call):
        return _FUNCS[node.func.id](*(_eval(a, env) for a in node.args))  # type: ignore[attr-defined]
    raise ConfigError(f"unsupported expression node {type(node).__name__}")  # parse() rejects these


def _base_kw(board: Board, fixed: dict[str, Any], point: dict[str, Any]) -> dict[str, Any]:
    """HwConfig keywords of a point (what `HwSpace.to_hw` builds)."""
    kw: dict[str, Any] = {"TARGET": board.target, "axi_bits": board.axi_bits, **fixed, **point}
    if "LOG_BLOCK" in kw:
        kw["LOG_BLOCK_IN"] = kw["LOG_BLOCK_OUT"] = kw.pop("LOG_BLOCK")
    return kw


def _spans(values: list[int]) -> str:
    """'0-12, 14' for sorted integers."""
    out: list[str] = []
    for v in values:
        if out and out[-1].split("-")[-1] == str(v - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{v}"
        else:
            out.append(str(v))
    return ", ".join(out)


def _check_reachable(where: str, board: Board, params: dict[str, tuple[Any, ...]], fixed: dict[str, Any]) -> None:
    """ConfigError for a LOG_* choice (params) or value (fixed) that no combination of the other
    choices makes a valid VTA config (`codesign.hw.config`'s rules): such a choice can only
    produce skipped points. The message names the key, why, and the values that could work."""
    keys = [(f"fixed.{k}", k, v) for k, v in fixed.items() if k in LOG_KEYS]  # a fixed value spoils every choice
    keys += [(f"params.{k}", k, c) for k, cs in params.items() if k in LOG_KEYS for c in cs]
    def combos(key: str) -> Any:  # the points of the other parameters
        others = {k: cs for k, cs in params.items() if k != key}
        return (dict(zip(others, combo)) for combo in itertools.product(*others.values()))

    for label, key, value in keys:
        first = None
        for combo in combos(key):
            why = why_invalid(**_base_kw(board, {**fixed, key: value} if key in fixed else fixed, {**combo, key: value}))
            if why is None:
                break
            first = first or why
        else:
            rest = {k: v for k, v in fixed.items() if k != key}
            ok = sorted({v for combo in combos(key) for v in _allowed(board, rest, combo, key)})
            allowed = (f"allowed with the space's other {'choices' if params else 'values'}: {_spans(ok)}" if ok
                       else "no value is valid with the space's other choices; change those")
            raise ConfigError(f"{where}: {label}: {value!r} is never a valid VTA config, whatever the other "
                              f"choices ({first or 'invalid'}; codesign/hw/config.py); {allowed}")


def _allowed(board: Board, fixed: dict[str, Any], point: dict[str, Any], key: str) -> list[int]:
    kw = _base_kw(board, fixed, point)
    if key == "LOG_BLOCK":  # the square core: both sides move together
        kw.pop("LOG_BLOCK_IN", None)
        kw.pop("LOG_BLOCK_OUT", None)
    return allowed_values(key, **kw)


def exclusion_kind(reason: str) -> str:
    """What kind of rule an excluded point broke (`HwSpace.check`'s reason without the point's own
    numbers), so that reasons can be counted: 'need more LUT than pynq-z1 has', 'break the
    constraint ...', 'are invalid VTA configs (LOG_INP_BUFF_SIZE)', ..."""
    m = re.search(r" needs \d+ (\w+) but (\S+) has", reason)
    if m:
        return f"need more {m.group(1)} than {m.group(2)} has"
    m = re.match(r"constraint ('.*'|\".*\") is false", reason)
    if m:
        return f"break the constraint {m.group(1)}"
    if "exceeds max_area" in reason:
        return "exceed max_area" + reason.rsplit("max_area", 1)[1]
    if reason.startswith("invalid point "):
        keys = re.findall(r"\b(LOG_\w+|clock_mhz|axi_bits|TARGET)=", reason.split("}", 1)[-1])
        return f"are invalid VTA configs ({keys[0]})" if keys else "are invalid VTA configs"
    m = re.match(r"(clock_mhz|axi_bits|TARGET)=", reason)
    if m:
        return f"have a {m.group(1)} the board cannot build"
    return reason


def resolve_space_path(spec: str | Path) -> Path:
    """A space file path from a path, or from a shipped space's name with or without `.yaml`
    (`pynq-z1`, `pynq-z1.yaml`) or repository path (`hw_configs/spaces/pynq-z1.yaml` from any
    directory): an existing path wins over a shipped name."""
    path = shipped(spec)
    if path.exists() or path.parent != Path("."):
        return path
    for candidate in (SPACES / path.name, SPACES / f"{path.name}.yaml"):
        if candidate.suffix in (".yaml", ".yml") and candidate.is_file():
            return candidate
    return path


class HwSpace:
    """A hardware search space on one board."""

    def __init__(self, board: Board, params: dict[str, tuple[Any, ...]], fixed: dict[str, Any],
                 constraints: tuple[Constraint, ...] = (), max_area: float | None = None,
                 stock: tuple[str, ...] = (), source: str = "", description: str = "",
                 resource_model: ResourceModel = SHIPPED) -> None:
        self.board = board
        # The coefficients every feasibility/area check of this space uses (`estimate`); the
        # board above already carries the model's verified clock (`with_resource_model`).
        self.resource_model = resource_model
        self.params = params
        self.fixed = fixed
        self.constraints = constraints
        self.max_area = max_area
        self.stock = stock
        self.source = source
        self.description = description

    # -- loading ---------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path) -> HwSpace:
        """Load a space file (a path, or a name in `hw_configs/spaces/`)."""
        path = resolve_space_path(path)
        known = ", ".join(sorted(p.stem for p in SPACES.glob("*.yaml")))
        data = read_document(path, "space file", f" (shipped spaces: {known})")
        return cls.from_dict(data, source=str(path))

    @classmethod
    def from_dict(cls, data: Any, source: str = "<space>") -> HwSpace:
        where = source
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: expected a mapping with keys {', '.join(TOP_KEYS)}")
        for key in data:
            if key not in TOP_KEYS:
                raise ConfigError(f"{where}: unknown key {key!r}; allowed: {', '.join(TOP_KEYS)}")
        if "board" not in data or not isinstance(data["board"], str):
            raise ConfigError(f"{where}: missing key 'board' (a board name such as pynq-z1 or ultra96)")
        try:
            board = Board.named(data["board"])
        except ConfigError as exc:
            raise ConfigError(f"{where}: board: {exc}") from None
        raw_params = data.get("params")
        if not isinstance(raw_params, dict) or not raw_params:
            raise ConfigError(f"{where}: 'params' must be a non-empty mapping of parameter -> list of choices; "
                              f"allowed parameters: {', '.join(PARAM_KEYS)}")
        params: dict[str, tuple[Any, ...]] = {}
        for key, choices in raw_params.items():
            if key not in PARAM_KEYS:
                raise ConfigError(f"{where}: unknown parameter params.{key}; allowed: {', '.join(PARAM_KEYS)}")
            if not isinstance(choices, list) or not choices:
                raise ConfigError(f"{where}: params.{key} must be a non-empty list of choices, got {choices!r}")
            for c in choices:
                if isinstance(c, bool) or not isinstance(c, (int, float)):
                    raise ConfigError(f"{where}: params.{key} choice {c!r} is not a number")
                if key != "clock_mhz" and not float(c).is_integer():
                    raise ConfigError(f"{where}: params.{key} choice {c!r} must be an integer")
            if len(set(choices)) != len(choices):
                raise ConfigError(f"{where}: params.{key} has duplicate choices {choices!r}")
            params[key] = tuple(int(c) if float(c).is_integer() else float(c) for c in choices)
        fixed = data.get("fixed") or {}
        if not isinstance(fixed, dict):
            raise ConfigError(f"{where}: 'fixed' must be a mapping of HwConfig key -> value")
        for key in fixed:
            if key not in FIXED_KEYS:
                raise ConfigError(f"{where}: unknown key fixed.{key}; allowed: {', '.join(FIXED_KEYS)}")
            if key in params:
                raise ConfigError(f"{where}: {key} is both in params and in fixed; keep one")
        keys = set(params) | set(fixed)
        if "LOG_BLOCK" in keys and keys & {"LOG_BLOCK_IN", "LOG_BLOCK_OUT"}:
            raise ConfigError(f"{where}: use either LOG_BLOCK or LOG_BLOCK_IN/LOG_BLOCK_OUT, not both")
        if len(keys & {"LOG_BLOCK_IN", "LOG_BLOCK_OUT"}) == 1:
            raise ConfigError(f"{where}: LOG_BLOCK_IN and LOG_BLOCK_OUT must both be given")
        clocks = params.get("clock_mhz", (fixed.get("clock_mhz"),) if "clock_mhz" in fixed else ())
        for c in clocks:
            if not any(abs(float(c) - b) < 1e-6 for b in board.pl_clocks_mhz):
                raise ConfigError(f"{where}: clock_mhz {c} is not a PL clock of {board.name}; allowed: "
                                  + ", ".join(f"{b:g}" for b in board.pl_clocks_mhz))
        widths = params.get("axi_bits", (fixed["axi_bits"],) if "axi_bits" in fixed else ())
        for w in widths:
            if w not in board.axi_bits_choices:
                raise ConfigError(f"{where}: axi_bits {w} is not buildable on {board.name}; allowed: "
                                  + ", ".join(map(str, board.axi_bits_choices)))
        _check_reachable(where, board, params, dict(fixed))
        allowed_names = set(PARAM_KEYS) | set(FIXED_KEYS) - {"HW_VER"} | set(DERIVED_NAMES) | set(RESOURCE_NAMES)
        raw_constraints = data.get("constraints") or []
        if not isinstance(raw_constraints, list):
            raise ConfigError(f"{where}: 'constraints' must be a list of expression strings")
        constraints = tuple(Constraint.parse(c, allowed_names, where) for c in raw_constraints)
        max_area = data.get("max_area")
        if max_area is not None and (isinstance(max_area, bool) or not isinstance(max_area, (int, float))
                                     or not 0 < max_area <= 1):
            raise ConfigError(f"{where}: max_area={max_area!r} must be a number in (0, 1]")
        stock = data.get("stock") or []
        if not isinstance(stock, list) or not all(isinstance(s, str) for s in stock):
            raise ConfigError(f"{where}: 'stock' must be a list of config names or aliases")
        for name in stock:
            try:
                HwConfig.resolve(name)  # fail early on a bad name
            except ConfigError as exc:
                raise ConfigError(f"{where}: stock: {exc}") from None
        return cls(board, params, dict(fixed), constraints,
                    float(max_area) if max_area is not None else None, tuple(stock), where,
                    str(data.get("description", "")))

    def verified_clocks_only(self) -> HwSpace:
        """The same space with only the clocks at which a VTA build is known to run on the board
        (`--verified-clocks-only`). ConfigError if the board has no verified clock or the space
        has none of the verified ones."""
        if self.board.verified_clock_mhz is None:
            raise ConfigError(f"{self.source}: --verified-clocks-only: board {self.board.name} has no "
                              f"verified clock ({self.board.verified_clock_note or 'no VTA build is known'})")
        params = dict(self.params)
        fixed = dict(self.fixed)
        if "clock_mhz" in params:
            keep = tuple(c for c in params["clock_mhz"] if self.board.clock_verified(c))
            if not keep:
                raise ConfigError(f"{self.source}: --verified-clocks-only: none of the space's clocks "
                                  f"({', '.join(f'{c:g}' for c in params['clock_mhz'])} MHz) is verified on "
                                  f"{self.board.name} (verified up to {self.board.verified_clock_mhz:g} MHz)")
            params["clock_mhz"] = keep
        else:
            clock = fixed.get("clock_mhz")
            if clock is None:  # the target's default clock
                clock = HwConfig(TARGET=self.board.target).clock_mhz
            if not self.board.clock_verified(float(clock)):
                raise ConfigError(f"{self.source}: --verified-clocks-only: the space's clock {clock:g} MHz is "
                                  f"above {self.board.name}'s verified {self.board.verified_clock_mhz:g} MHz")
        return HwSpace(self.board, params, fixed, self.constraints, self.max_area, self.stock,
                       self.source, self.description, self.resource_model)

    def with_resource_model(self, model: ResourceModel) -> HwSpace:
        """The same space scored with `model`: its coefficients for every resource estimate and
        its verified clock for the board (a calibrated file, `codesign sweep --resources`)."""
        return HwSpace(model.board(self.board), self.params, self.fixed, self.constraints, self.max_area,
                       self.stock, self.source, self.description, model)

    def estimate(self, hw: HwConfig) -> Resources:
        """LUT/FF/BRAM18/DSP of `hw` on this space's board with this space's resource model."""
        return estimate(hw, self.board, self.resource_model.coefficients)

    # -- points ------------------------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.params)

    @property
    def size(self) -> int:
        """Number of raw grid points (before constraints and feasibility)."""
        return math.prod(len(c) for c in self.params.values())

    def _raw_points(self):
        keys = list(self.params)
        for combo in itertools.product(*(self.params[k] for k in keys)):
            yield dict(zip(keys, combo))

    def to_hw(self, point: dict[str, Any], *, check_choices: bool = True) -> HwConfig:
        """The HwConfig of a point; ConfigError for unknown/missing keys, values outside the
        choices, or a combination HwConfig rejects."""
        if not isinstance(point, dict):
            raise ConfigError(f"{self.source}: a point must be a dict of {', '.join(self.params)}")
        unknown = sorted(set(point) - set(self.params))
        if unknown:
            raise ConfigError(f"{self.source}: point key {unknown[0]!r} is not a parameter of the space; "
                              f"parameters: {', '.join(self.params)}")
        missing = [k for k in self.params if k not in point]
        if missing:
            raise ConfigError(f"{self.source}: point is missing parameter {missing[0]!r}")
        kw: dict[str, Any] = {"TARGET": self.board.target, "axi_bits": self.board.axi_bits}
        kw.update(self.fixed)
        for k, v in point.items():
            match = [c for c in self.params[k] if v == c]
            if not match:
                if check_choices or isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise ConfigError(f"{self.source}: {k}={v!r} is not a choice; allowed: "
                                      + ", ".join(str(c) for c in self.params[k]))
                match = [v]
            kw[k] = match[0]  # the choice itself: plain Python numbers even if Ray passes numpy ones
        if "LOG_BLOCK" in kw:
            kw["LOG_BLOCK_IN"] = kw["LOG_BLOCK_OUT"] = kw.pop("LOG_BLOCK")
        try:
            return HwConfig(**kw, source=self.source)
        except ConfigError as exc:
            raise ConfigError(f"invalid point {point}: {exc}") from None

    def point_of(self, hw: HwConfig) -> dict[str, Any] | None:
        """The point whose HwConfig equals `hw`, or None if `hw` is not in the space's grid."""
        point: dict[str, Any] = {}
        for k, choices in self.params.items():
            value = hw.LOG_BLOCK_IN if k == "LOG_BLOCK" else getattr(hw, k)
            if k == "LOG_BLOCK" and hw.LOG_BLOCK_IN != hw.LOG_BLOCK_OUT:
                return None
            match = [c for c in choices if c == value]
            if not match:
                return None
            point[k] = match[0]
        try:
            return point if self.to_hw(point) == hw else None
        except ConfigError:
            return None

    def env(self, hw: HwConfig) -> dict[str, float]:
        """Names available to constraints for `hw` (resource utilizations only when needed)."""
        env: dict[str, Any] = {k: getattr(hw, k) for k in FIXED_KEYS if k not in ("LOG_BLOCK", "HW_VER")}
        env["LOG_BLOCK"] = hw.LOG_BLOCK_IN if hw.LOG_BLOCK_IN == hw.LOG_BLOCK_OUT else -1
        env.update({k: getattr(hw, k) for k in DERIVED_NAMES})
        if any(c.names & set(RESOURCE_NAMES) for c in self.constraints):
            res = self.estimate(hw)
            env.update(res.utilization(self.board))
            env["area"] = res.area(self.board)
            env["max_utilization"] = res.max_utilization(self.board)
        return env

    def excluded_reason(self, hw: HwConfig) -> str | None:
        """Why a valid HwConfig is outside the usable space: a failing constraint, max_area, or a
        board resource/clock/target rule; None if it may be simulated."""
        res = self.estimate(hw)
        reason = infeasible_reason(hw, self.board, res)
        if reason:
            return reason
        if self.constraints:
            env = self.env(hw)
            for c in self.constraints:
                if not c.evaluate(env):
                    return f"constraint {c.text!r} is false for {hw.name}"
        if self.max_area is not None:
            area = res.area(self.board)
            if area > self.max_area:
                return f"{hw.name}: area {area:.3f} exceeds max_area {self.max_area:g}"
        return None

    def check(self, point: dict[str, Any]) -> tuple[HwConfig | None, str | None]:
        """(hw, None) for a usable point; (hw or None, reason) otherwise. Never raises for a
        point built from the choices."""
        try:
            hw = self.to_hw(point)
        except ConfigError as exc:
            return None, str(exc)
        return hw, self.excluded_reason(hw)

    def exclusion_counts(self) -> dict[str, int]:
        """Raw grid points by why they are not usable (`exclusion_kind`), most common first;
        "usable" counts the usable ones (a config reached by two points is counted twice)."""
        counts: dict[str, int] = {}
        for point in self._raw_points():
            _hw, reason = self.check(point)
            kind = "usable" if reason is None else exclusion_kind(reason)
            counts[kind] = counts.get(kind, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: -kv[1]))

    def why_empty(self) -> str:
        """'SOURCE: the space has no usable config: of its N grid points, 2,000 need more LUT
        than pynq-z1 has, 1,072 break the constraint ...' -- the message when `enumerate()` is empty."""
        counts = self.exclusion_counts()
        parts = "; ".join(f"{n:,} {kind}" for kind, n in counts.items() if kind != "usable")
        return f"{self.source}: the space has no usable config: of its {self.size:,} grid points, {parts}"

    @cached_property
    def _enumerated(self) -> tuple[tuple[dict[str, Any], HwConfig], ...]:
        out = []
        seen: set[HwConfig] = set()
        for point in self._raw_points():
            hw, reason = self.check(point)
            if hw is not None and reason is None and hw not in seen:
                seen.add(hw)
                out.append((point, hw))
        return tuple(out)

    def enumerate(self) -> list[HwConfig]:
        """Every usable config (valid, constraint-satisfying, feasible on the board), grid order."""
        return [hw for _, hw in self._enumerated]

    def enumerate_points(self) -> list[dict[str, Any]]:
        return [dict(p) for p, _ in self._enumerated]

    def stock_configs(self) -> list[HwConfig]:
        """The stock configs named in the file, on this board's target."""
        return [HwConfig.resolve(s) for s in self.stock]

    def default_point(self) -> dict[str, Any] | None:
        """The point of the first stock config that lies in the space (None if none does)."""
        for hw in self.stock_configs():
            point = self.point_of(hw)
            if point is not None:
                return point
        return None

    def to_json(self) -> dict[str, Any]:
        return {"board": self.board.name, "params": {k: list(v) for k, v in self.params.items()},
                "fixed": dict(self.fixed), "constraints": [c.text for c in self.constraints],
                "max_area": self.max_area, "stock": list(self.stock), "source": self.source}

    def __repr__(self) -> str:
        return f"HwSpace({self.source!r}, board={self.board.name}, size={self.size})"


__all__ = ["Constraint", "DERIVED_NAMES", "exclusion_kind", "FIXED_KEYS", "HwSpace", "PARAM_KEYS", "RESOURCE_NAMES", "TOP_KEYS",
           "resolve_space_path"]
