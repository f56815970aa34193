"""Pareto tracking for the co-design sweep: front, hypervolume, reference point, pareto.json, plots.

Plot helpers live in `codesign.pareto.plots` (imported on demand: matplotlib is slow to import).
"""

from codesign.pareto.front import ParetoFront, hypervolume_history
from codesign.pareto.hypervolume import hypervolume
from codesign.pareto.io import (
    PARETO_FILE,
    ParetoDoc,
    StockComparison,
    read_pareto,
    read_pareto_json,
    stock_comparison,
    write_pareto_json,
)
from codesign.pareto.objectives import (
    CATALOG,
    DEFAULT_OBJECTIVES,
    OBJECTIVES,
    describe,
    directions,
    dominates,
    objective_values,
    parse_objectives,
)
from codesign.pareto.point import DesignPoint, LayerResult, Step, design_point
from codesign.pareto.reference import REFERENCE_RULE, reference_point, space_power_bound

__all__ = [
    "CATALOG", "DEFAULT_OBJECTIVES", "OBJECTIVES", "PARETO_FILE", "describe", "directions", "parse_objectives", "REFERENCE_RULE", "ParetoFront",
    "DesignPoint", "LayerResult", "ParetoDoc", "Step", "StockComparison", "read_pareto",
    "design_point", "dominates", "hypervolume", "hypervolume_history", "objective_values", "read_pareto_json", "reference_point",
    "space_power_bound", "stock_comparison", "write_pareto_json",
]
