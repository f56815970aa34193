"""The default search's family stage skips a form of a plan group another form clearly beats at the
template stage (`template_local.outclassed`): a small stem (7x7 s2 conv on 3 channels) is asked for as
a direct conv, through space-to-depth and through im2col (`place.plan.layer_alternatives`); the
direct form's template best is far above the others', so it gets no family measurements, keeps its
template result, and the plan chooses the same form as when every form is searched."""

from __future__ import annotations

import pytest

from codesign.hw.config import HwConfig
from codesign.network.graph import Network, Op
from codesign.place import choose_layers, plan_network
from codesign.place.plan import layer_alternatives
from codesign.tune import template_local
from codesign.tune.loop import TaskRun
from codesign.tune.measure import SimulatorRunner
from codesign.tune.search import Search, network_alternatives, network_layers
from codesign.workloads import parse_layer

HW = HwConfig.resolve("pynq_1x16")
BOARD = "pynq-z1"
TEMPLATE = template_local.TEMPLATE_FAMILY


def _stem_net() -> Network:
    stem = Op("stem", "conv2d", ("x",), (1, 16, 16, 16), {"stride": (2, 2), "padding": (3, 3), "dilation": (1, 1),
                                                       "groups": 1, "weight_shape": (16, 3, 7, 7)})
    return Network("stem", (("x", (1, 3, 32, 32)),), (stem,), ("stem",))


def _tune(layers, alternatives):
    """Search.tune at budget 4 with the simulator; (results, [(layer name, stage) of every run made])."""
    runs = []

    def make_run(task, k, budget, first):
        # the template stage runs `auto` on the template family, the family stage its own search
        runs.append((task.layer.name, TEMPLATE if task.tuner.name == "auto" else template_local.FAMILY))
        return TaskRun(task, budget=budget, seed=k, runner=SimulatorRunner(HW), seeds=first)

    return Search(budget=4, exhaustive_s=1.0).tune(layers, HW, make_run, alternatives=alternatives), runs


def _skipped(layers, runs):
    """Positions of the layers that had a template stage and no family stage."""
    return {k for k, (layer, _c) in enumerate(layers) if (layer.name, template_local.FAMILY) not in runs}


@pytest.fixture(scope="module")
def tuned():
    net = _stem_net()
    layers = network_layers(net, HW, BOARD)
    return net, layers, _tune(layers, network_alternatives(net, HW, BOARD)), _tune(layers, ())


def test_the_groups_forms_are_the_layers_the_plan_asks_for():
    net = _stem_net()
    alternatives = layer_alternatives(net, HW, BOARD)
    assert len(alternatives) == 1 and len(alternatives[0]) >= 2  # one group, several forms
    assert alternatives[0] == choose_layers(net, HW, BOARD) == dict(network_layers(net, HW, BOARD))


def test_an_outclassed_form_gets_no_family_measurements_and_keeps_its_template_result(tuned):
    _net, layers, (results, runs), (every, every_runs) = tuned
    skipped = _skipped(layers, runs)
    assert skipped, "the direct 7x7 form should be outclassed"
    for k in skipped:
        name = layers[k][0].name
        assert (name, template_local.FAMILY) not in runs  # no family stage
        assert (name, template_local.FAMILY) in every_runs  # which it gets without alternatives
        assert results[k].tuner == "auto" and results[k].best_seconds is not None
        assert (name, TEMPLATE) in runs
    kept = [k for k in range(len(layers)) if k not in skipped]
    assert kept and all((layers[k][0].name, template_local.FAMILY) in runs for k in kept)
    # the family stage's pool is today's: no more measurements than searching every form
    assert sum(r.measurements for r in results) <= sum(r.measurements for r in every)


def test_the_plan_chooses_the_same_form(tuned):
    net, layers, (results, runs), (every, _every_runs) = tuned
    skipped = _skipped(layers, runs)

    def chooser(res):
        by_layer = {layer: r for (layer, _c), r in zip(layers, res)}
        return lambda layer: (by_layer[layer].best, float(by_layer[layer].best_seconds))

    a = plan_network(net, HW, BOARD, chooser(results)).step_of("stem")
    b = plan_network(net, HW, BOARD, chooser(every)).step_of("stem")
    assert a.placement == b.placement and a.transform == b.transform
    assert a.layer not in {layers[k][0] for k in skipped}


def test_a_form_another_group_needs_alone_is_never_skipped():
    small, big = parse_layer("conv2d:1,16,8,8,16,3,3,1,1"), parse_layer("conv2d:1,64,28,28,64,3,3,1,1")
    groups = [{small: 1, big: 1}]
    assert template_local.outclassed([small, big], [1e-4, 1.0], HW, groups) == {1}
    assert template_local.outclassed([small, big], [1e-4, 1.0], HW, groups + [{big: 1}]) == set()
    assert template_local.outclassed([small, big], [1e-4, 1.0], HW, ()) == set()
    # within MAX_FAMILY_GAIN (2x) of the other form, far above its roofline: the family search may still win
    other = parse_layer("conv2d:1,16,8,8,16,1,1,1,0")
    assert template_local.outclassed([small, other], [1e-3, 1.9e-3], HW, [{small: 1, other: 1}]) == set()
    assert template_local.outclassed([small, other], [1e-3, 2.1e-3], HW, [{small: 1, other: 1}]) == {1}
    # per group the forms compare by seconds x calls
    assert template_local.outclassed([small, other], [1e-3, 1.9e-3], HW, [{small: 1, other: 2}]) == {1}
    assert template_local.outclassed([small, other], [1e-3, 1.9e-3], HW, [{small: 3, other: 1}]) == set()
