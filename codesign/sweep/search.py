"""Search algorithms of the outer loop, all through Ray Tune: multi-objective Optuna (NSGA-II,
MOTPE), random, grid, and exhaustive enumeration of a small space."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from codesign.errors import ConfigError
from codesign.hw.space import HwSpace
from codesign.pareto.objectives import OBJECTIVES, directions
from codesign.sweep.filtering import FeasibleSearch
from codesign.sweep.options import DEFAULT_TRIALS

EXHAUSTIVE_MAX = 2000  # points; beyond this an enumeration is not a "small space" any more


@dataclass
class SearchPlan:
    """What `Tuner(...)` needs: the param space, the search algorithm and the number of trials."""

    param_space: dict[str, Any]
    search_alg: Any
    num_samples: int
    points: int | None = None  # size of the explicit point list (grid/exhaustive)


def ray_param_space(space: HwSpace) -> dict[str, Any]:
    """{param: ray.tune.choice(choices)}: the space as a Ray Tune param space."""
    from ray import tune  # ray loads only when a sweep runs (seconds of import)

    return {k: tune.choice(list(v)) for k, v in space.params.items()}


def grid_points(space: Any) -> list[dict[str, Any]]:
    """Every combination of the space's choices (infeasible ones included), in grid order."""
    names = list(space.params)
    return [dict(zip(names, combo)) for combo in itertools.product(*(space.params[n] for n in names))]


def _optuna_space(space: Any) -> dict[str, Any]:
    import optuna

    return {name: optuna.distributions.CategoricalDistribution(list(choices))
            for name, choices in space.params.items()}


def _population(trials: int) -> int:
    # NSGA-II's default population (50) would make a 24-trial sweep pure random sampling; a
    # population of about a fifth of the trials leaves room for 4-5 generations.
    return max(4, min(50, trials // 5))


def stock_points(space: Any) -> list[dict[str, Any]]:
    """The space's stock configs that lie in its grid, as points (evaluated first: they anchor the
    hypervolume reference point and the stock comparison, and seed the search)."""
    points = []
    for hw in space.stock_configs():
        point = space.point_of(hw)
        if point is not None and point not in points:
            points.append(point)
    return points


def build_search(search: str, space: HwSpace, *, trials: int | None, seed: int,
                 out_dir: str | None = None, objectives: tuple[str, ...] = OBJECTIVES) -> SearchPlan:
    """The Ray Tune search algorithm for `search`. nsga2/motpe/random are Optuna samplers behind
    Ray's OptunaSearch, wrapped in `FeasibleSearch` so trials go only to new feasible configs;
    grid/exhaustive are explicit point lists. The space's stock configs come first."""
    from ray.tune.search.basic_variant import BasicVariantGenerator

    if search in ("grid", "exhaustive"):
        points = grid_points(space) if search == "grid" else space.enumerate_points()
        first = [p for p in stock_points(space) if p in points]
        points = first + [p for p in points if p not in first]
        if search == "exhaustive" and len(points) > EXHAUSTIVE_MAX:
            raise ConfigError(f"--search exhaustive: the space has {len(points)} feasible configs (more "
                              f"than {EXHAUSTIVE_MAX}); use --search nsga2 or motpe, or shrink the space")
        if not points:
            raise ConfigError(f"--search {search}: the space has no feasible config")
        n = len(points) if trials is None else min(trials, len(points))
        alg = BasicVariantGenerator(points_to_evaluate=points[:n], random_state=seed)
        return SearchPlan(ray_param_space(space), alg, n, len(points))
    if search not in ("nsga2", "motpe", "random"):
        raise ConfigError(f"--search {search!r}: allowed: nsga2, motpe, random, grid, exhaustive")
    import optuna
    from ray.tune.search.optuna import OptunaSearch

    n = trials if trials is not None else DEFAULT_TRIALS
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if search == "nsga2":
        sampler: Any = optuna.samplers.NSGAIISampler(population_size=_population(n), seed=seed)
    elif search == "motpe":
        # Optuna's TPESampler is multi-objective (MOTPE) when the study has several directions;
        # constant_liar keeps concurrent trials from being proposed the same point.
        sampler = optuna.samplers.TPESampler(multivariate=True, seed=seed, constant_liar=True,
                                             n_startup_trials=max(4, min(10, n // 4)))
    else:
        sampler = optuna.samplers.RandomSampler(seed=seed)  # uniform choice per parameter
    first = stock_points(space)[:n]
    # Each objective's direction (throughput is maximized) is the searcher's mode for it.
    inner = OptunaSearch(_optuna_space(space), metric=list(objectives), mode=directions(objectives),
                         sampler=sampler, points_to_evaluate=first or None)
    alg = FeasibleSearch(inner, space, out_dir, seed=seed, objectives=tuple(objectives))
    # The param space lives in the searcher; Ray must not get a second one.
    return SearchPlan({}, alg, n)
