"""Fixtures shared by several test files."""

from __future__ import annotations

import hashlib
import importlib.util
import os
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml
from hypothesis import settings

from codesign.bitstream import catalog
from codesign.bitstream.bitfile import make_header

if TYPE_CHECKING:
    import numpy as np

    from codesign.evaluate.run import Measurement
    from codesign.hw.config import HwConfig
    from codesign.schedule.knobs import Config
    from codesign.vta.program import Program
    from codesign.workloads import Layer

# Property tests assert behaviour, not speed: no per-example deadline (a loaded 2-core machine made
# hypothesis's 200 ms default fail a test whose code was correct).
settings.register_profile("project", deadline=None)
settings.load_profile("project")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`--dist loadgroup` (pyproject addopts) sends the tests of one `xdist_group` to one worker by the
    "@group" pytest-xdist appends to their node ids -- through `item._nodeid`, which pytest 9.2 no longer
    reads (pytest-xdist#1386: the groups are silently ignored). Append it the way pytest 9.2 keeps ids
    until xdist does (a worker-side no-op once the id carries the suffix)."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        if names and item.nodeid.rfind("@") <= item.nodeid.rfind("]"):
            from _pytest.nodeid import NodeId

            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(names)}")


@pytest.fixture(scope="session", autouse=True)
def _workload_cache(tmp_path_factory: pytest.TempPathFactory):
    """Traced zoo workloads are cached under a temporary directory, never in the user's home
    (subprocesses inherit the variable)."""
    from codesign.workloads.cache import CACHE_ENV

    previous = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(tmp_path_factory.mktemp("codesign-cache"))
    yield
    if previous is None:
        os.environ.pop(CACHE_ENV, None)
    else:
        os.environ[CACHE_ENV] = previous


TINY_SPACE = """\
board: pynq-z1
params:
  LOG_BLOCK: [3, 4]
fixed:
  LOG_INP_BUFF_SIZE: 14
  LOG_WGT_BUFF_SIZE: 16
  LOG_ACC_BUFF_SIZE: 16
"""


@pytest.fixture()
def tiny_space(tmp_path: Path):
    """tiny_space(extra_fixed="") -> path of a PYNQ-Z1 space with 1x8 and 1x16 cores; `extra_fixed`
    adds lines under `fixed:` (e.g. "  clock_mhz: 142\n")."""

    def write(extra_fixed: str = "") -> Path:
        path = tmp_path / "tiny.yaml"
        path.write_text(TINY_SPACE + extra_fixed)
        return path

    return write


@pytest.fixture()
def make_bit_catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """make_bit_catalog(config) -> (bit file, catalog entry): a small valid .bit for `config` on
    PYNQ-Z1 and a user catalog naming it (the shipped catalog is untouched; VTA's bitstream cache
    goes under tmp_path)."""
    return lambda config: _write_bit_catalog(tmp_path, monkeypatch, config)


def _write_bit_catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: str) -> tuple[Path, dict]:
    body = bytes(range(256)) * 8
    bit = tmp_path / "vta_1x16.bit"
    bit.write_bytes(make_header("vta_wrapper", "7z020clg484", "2026/11/22", "13:00:00", len(body)) + body)
    entry = {"config": config, "board": "pynq-z1", "target": "pynq", "hw_ver": "0.0.2",
             "sha256": hashlib.sha256(bit.read_bytes()).hexdigest(), "size": bit.stat().st_size,
             "part": "7z020clg484", "local": str(bit), "source": "test"}
    (tmp_path / "catalog.yaml").write_text(yaml.safe_dump({"bitstreams": [entry]}))
    monkeypatch.setenv(catalog.CATALOG_ENV, str(tmp_path / "catalog.yaml"))
    monkeypatch.setenv("VTA_CACHE_PATH", str(tmp_path / "cache"))
    return bit, entry


@pytest.fixture(scope="session")
def resnet18_schedule_sample():
    """(layer, hw, configs): about a dozen evenly spaced valid schedules of every offloaded ResNet-18 layer on
    pynq_1x16 and pynq_4x8 — the sample the calibration tests time and keep the fastest of."""
    from codesign.hw.config import HwConfig
    from codesign.schedule import ScheduleSpace, partition
    from codesign.workloads import get_workload

    out = []
    for name in ("pynq_1x16", "pynq_4x8"):
        hw = HwConfig.resolve(name)
        offloaded, _ = partition(get_workload("resnet18").for_hw(hw), hw)
        for layer, _count in offloaded:
            space = ScheduleSpace(layer, hw)
            valid = space.valid_indices()
            out.append((layer, hw, [space.get(int(valid[k])) for k in range(0, len(valid), max(1, len(valid) // 12))]))
    return out


@pytest.fixture(scope="session")
def trained_digits(bench_module):
    """benchmarks/network_quant.py's `DigitsCNN` trained for 4 epochs (~98% held-back accuracy) on
    1,500 of scikit-learn's 1,797 8x8 digits -> {"net", "x_train", "y_train", "x_test", "y_test"}
    (the other 297 held back)."""
    bench = bench_module("network_quant")
    data = bench.digits()
    return {"net": bench.train_cnn(data), **data}


@pytest.fixture(scope="session")
def trained_transformer(bench_module):
    """benchmarks/network_quant.py's `DigitsTransformer` (two encoder blocks over the 8 rows of an
    8x8 digit) trained for 20 epochs (~97% held-back accuracy, a few seconds on one core) on the
    1,500 training digits of `trained_digits`' split -> {"net", "x_train", "y_train", "x_test",
    "y_test", "bench"} (the other 297 held back; "bench" is the benchmark module, for `judge`)."""
    bench = bench_module("network_quant")
    data = bench.digits()
    return {"net": bench.train_transformer(data), **data, "bench": bench}


@pytest.fixture(scope="session")
def small_cnn(bench_module):
    """The class of a small CNN (benchmarks/network_quant.py's `DigitsCNN`): a conv-BN-ReLU stem, a
    residual block, max pool, average pool and a dense classifier (the whole-network tests train it
    on 8x8 digits)."""
    return bench_module("network_quant").DigitsCNN


@pytest.fixture()
def two_pass_agrees():
    """two_pass_agrees(space, n=400, seed=0): `VtaSpace.valid_indices` (two passes) equals the full
    validity mask on every order x residency of n random core points (order and residency knobs at
    position 0) and of the core points of n random valid configs. The full mask of the whole grid
    grows with every appended knob (10^8 configs for a small conv: minutes, GBs); what the two passes
    could get wrong is a core point's expansion over the knobs pass 1 fixes, which this checks."""
    import numpy as np

    def check(space, n: int = 400, seed: int = 0) -> int:
        rng = np.random.default_rng(seed)
        valid = space.valid_indices()
        names = space.knob_names
        free = [names.index(k) for k in ("order", "wgt_stationary", "inp_stationary", "acc_resident")]
        core = space.positions_of(np.concatenate([rng.integers(0, space.size, n),
                                                  rng.choice(valid, min(n, len(valid)), replace=False)]))
        core[:, free] = 0
        core = np.unique(core, axis=0)
        grid = np.stack(np.meshgrid(*[np.arange(space.dims[j]) for j in free], indexing="ij"), -1).reshape(-1, len(free))
        full = np.repeat(core, len(grid), axis=0)
        full[:, free] = np.tile(grid, (len(core), 1))
        idx = space.index_of(full)
        mask = space.valid_mask(idx)
        assert np.array_equal(mask, np.isin(idx, valid))
        return int(mask.sum())

    return check


#: The two stock hardware configs every `vta` family test runs on (a 1x16 core at batch 1, a 4x8 at batch 4).
STOCK_HWS = ("pynq_1x16", "pynq_4x8")


@pytest.fixture(params=STOCK_HWS)
def stock_hw(request: pytest.FixtureRequest) -> HwConfig:
    """Each stock hardware config in turn: a test that asks for it runs once per config."""
    from codesign.hw.config import HwConfig

    return HwConfig.resolve(request.param)


class VtaCase:
    """A layer at `hw`'s batch on the `vta` schedule family: its space, `random_inputs`' int8 data
    and weight and the NumPy reference (made on first use), and the check the family's tests make
    of a schedule (`check`)."""

    def __init__(self, layer: Layer, hw: HwConfig | str = "pynq_1x16") -> None:
        from codesign.hw.config import HwConfig
        from codesign.schedule import get_space

        self.hw = HwConfig.resolve(hw) if isinstance(hw, str) else hw
        self.layer = layer.with_batch(self.hw.batch)
        self.space = get_space(self.layer, self.hw, "vta")

    @cached_property
    def inputs(self) -> tuple[np.ndarray, np.ndarray]:
        from codesign.evaluate.run import random_inputs

        return random_inputs(self.layer)

    @property
    def data(self) -> np.ndarray:
        return self.inputs[0]

    @property
    def weight(self) -> np.ndarray:
        return self.inputs[1]

    @cached_property
    def ref(self) -> np.ndarray:
        return self.layer.reference(self.data, self.weight)

    def config(self, knobs: dict) -> Config:
        """The space's point of `knobs`, which must be valid (else the rule's reason fails the test)."""
        config = self.space.from_knobs(knobs)
        assert self.space.why_invalid(config) is None, self.space.why_invalid(config)
        return config

    def check(self, config: Config, *, run_layer: bool = False) -> tuple[Program, Measurement]:
        """-> (program, measure's result) of `config` compiled with the case's inputs, after asserting:
        race-free (`simulate(check=True)` raises on an SRAM access no dependency token orders) with no
        token left, the output bit-exact against NumPy, measure's block-form cycles equal to
        `time_program` on the program; with `run_layer`, the public `run_layer` bit-exact too (its own
        fixed-seed inputs are `random_inputs`')."""
        import numpy as np

        from codesign.evaluate import run
        from codesign.evaluate.compiler import compile_layer
        from codesign.vta import timing
        from codesign.vta.simulator import simulate

        layer, hw = self.layer, self.hw
        if run_layer:
            assert np.array_equal(run.run_layer(layer, config, hw).output, self.ref), config.knobs
        prog = compile_layer(layer, config, hw, data=self.data, weight=self.weight)
        res = simulate(prog, check=True)
        assert res.tokens_left == {}, config.knobs
        assert np.array_equal(layer.unpack_output(np.asarray(res.outputs["output"]).view(np.int8), hw), self.ref), \
            config.knobs
        timed = run.measure(layer, config, hw)
        assert timed.cycles == timing.time_program(prog.insns, hw).cycles, config.knobs
        return prog, timed


@pytest.fixture()
def vta_case():
    """vta_case(layer, hw="pynq_1x16") -> VtaCase: `layer` at the batch of `hw` (a name or an
    HwConfig) on the `vta` family, its inputs, reference and schedule check."""
    return VtaCase


@pytest.fixture(scope="session")
def bench_module():
    """bench_module("networks") -> the module of benchmarks/networks.py (scripts, not a package),
    loaded once per name."""
    loaded: dict[str, object] = {}

    def load(name: str) -> object:
        if name not in loaded:
            path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
            spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            loaded[name] = mod
        return loaded[name]

    return load


def sqnr_db(reference: np.ndarray, approx: np.ndarray) -> float:
    """Signal-to-quantization-noise ratio of `approx` against `reference`, in dB (inf when equal)."""
    import numpy as np

    ref, err = np.asarray(reference, np.float64), np.asarray(approx, np.float64) - np.asarray(reference, np.float64)
    noise = float(np.sum(err * err))
    return float("inf") if noise == 0 else 10.0 * float(np.log10(max(float(np.sum(ref * ref)), 1e-30) / noise))


def pinned_timing_params():
    """The timing parameters the placement tests were written against (tests/data: the default as
    shipped before its refit on every real record): their tiny layers sit near the VTA/CPU
    break-even, which the fitted host terms move; what they test is the placement's mechanics."""
    import json

    from codesign.vta.timing import TimingParams

    data = json.loads((Path(__file__).parent / "data" / "pinned_timing_params.json").read_text())
    return TimingParams.from_dict(data["params"])


@pytest.fixture(scope="session")
def run_net():
    """run_net(module, example, hw="pynq_1x16", calibration=None, executor=None) -> (prepared, execution):
    the module imported, quantized (PT2E, calibrated on `calibration` or the example), placed on `hw`
    and executed step by step (VTA steps on the functional simulator unless `executor` is given).
    Asserts what every new op kind must keep: every op placed once, every op's output bit-exact
    against the integer reference, the float reference equal to torch's output, and the integer
    outputs close to the float model (SQNR >= `min_sqnr_db` dB, default 15)."""
    import numpy as np
    import torch

    from codesign.hw.config import HwConfig
    from codesign.netrun import network as whole
    from codesign.network.quantized import dequantize
    from codesign.network.reference import run_float

    def run(module, example, hw="pynq_1x16", calibration=None, executor=None, min_sqnr_db=15.0, name="net"):
        module = module.eval()
        example = tuple(example) if isinstance(example, (tuple, list)) else (example,)
        prep = whole.prepare(module, example, name, HwConfig.resolve(hw), calibration=calibration,
                             params=pinned_timing_params())
        net = prep.network
        placed = [o for s in prep.plan.steps if not s.host for o in s.ops]
        assert sorted(placed) == sorted(op.name for op in net.ops), "every op placed once"
        exe = whole.execute(prep, prep.example, executor or whole.simulator_executor())
        assert exe.bit_exact, [(r.name, r.kind, r.mismatches) for r in exe.rows if not r.bit_exact]
        with torch.no_grad():
            want = module(torch.from_numpy(np.asarray(prep.example, np.float32)))
        want = want.numpy() if hasattr(want, "numpy") else np.asarray(want)
        got_float = run_float(net, prep.example)[net.outputs[0]]
        np.testing.assert_allclose(got_float, want, rtol=1e-3, atol=1e-3 * max(1.0, float(np.max(np.abs(want)))))
        out = net.outputs[0]
        got_int = dequantize(exe.env[out], prep.qnet.frac[out])
        assert sqnr_db(want, got_int) >= min_sqnr_db, f"SQNR {sqnr_db(want, got_int):.1f} dB < {min_sqnr_db}"
        return prep, exe

    return run


@pytest.fixture(scope="session")
def seeded_bn():
    """seeded_bn(channels, seed) -> a BatchNorm2d with non-trivial running statistics and affine
    parameters (folded into the conv before it, or a channel_affine op where none is)."""
    import torch
    from torch import nn

    def make(c: int, seed: int) -> nn.BatchNorm2d:
        m = nn.BatchNorm2d(c)
        g = torch.Generator().manual_seed(seed)
        m.running_mean.uniform_(-0.5, 0.5, generator=g)
        m.running_var.uniform_(0.5, 2.0, generator=g)
        m.weight.data.uniform_(0.5, 1.5, generator=g)
        m.bias.data.uniform_(-0.2, 0.2, generator=g)
        return m

    return make


# -- one local Ray for consecutive modules of the "ray" xdist group (issue 33 §6) -------------------
# ray.init + shutdown take ~8 s on a 2-core machine; the group's modules run one after another on one
# worker (pyproject: --dist loadgroup), so they share one Ray instead of starting one each. It stops
# as soon as the next test is outside the group (nothing idles beside the other tests) and before a
# test that must start or join its own Ray (`no_ray_in_process`).
_SHARED_RAY: dict[str, object] = {}  # "ray": the module, while a Ray this process started runs


def _in_ray_group(item: pytest.Item | None) -> bool:
    return item is not None and any((m.args[0] if m.args else m.kwargs.get("name")) == "ray"
                                    for m in item.iter_markers("xdist_group"))


def _stop_shared_ray() -> None:
    ray = _SHARED_RAY.pop("ray", None)
    if ray is not None and ray.is_initialized():
        ray.shutdown()


@pytest.fixture(scope="module")
def ray_session():
    """A local Ray (2 CPUs, no dashboard) for the tests that ask for it: started on first use, kept
    while the next test is in the "ray" group, stopped before any other (pytest_runtest_teardown)."""
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    if not ray.is_initialized():
        # "local": never the cluster a `ray start` on this machine left in /tmp/ray/ray_current_cluster
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
        _SHARED_RAY["ray"] = ray
    return ray


@pytest.fixture()
def no_ray_in_process() -> None:
    """For a test that starts or joins its own Ray (or asserts this process runs none): the shared
    Ray is stopped first."""
    _stop_shared_ray()


@pytest.hookimpl(trylast=True)  # after the test's fixtures are torn down
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if not _in_ray_group(nextitem):
        _stop_shared_ray()
