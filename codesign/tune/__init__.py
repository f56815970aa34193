"""Inner schedule tuning: tuners (random, grid, GA, XGBoost, contextual bandit, PPO, DQN), the
measurement runners, JSONL records and the exhaustive ground truth. Heavy dependencies (torch,
xgboost) load only when their tuner is used."""

from codesign.tune.exhaustive import exhaustive, exhaustive_table
from codesign.tune.loop import (
    ProgressCallback,
    RecordCallback,
    TuneCallback,
    TuneResult,
    tune_layer,
    tune_task,
)
from codesign.tune.measure import (
    FunctionRunner,
    MeasureInput,
    MeasureResult,
    Runner,
    SimulatorRunner,
    TableRunner,
)
from codesign.tune.records import (
    MeasureRecord,
    RecordWriter,
    best_records,
    import_autotvm_log,
    layer_spec,
    load_records,
)
from codesign.tune.registry import TUNERS, make_tuner
from codesign.tune.task import TuneTask, make_task
from codesign.tune.tuner import Tuner
from codesign.tune.view import SpaceView

__all__ = [
    "TUNERS", "FunctionRunner", "MeasureInput", "MeasureRecord", "MeasureResult", "RecordWriter",
    "Runner", "SimulatorRunner", "SpaceView", "TableRunner", "TuneResult", "Tuner", "best_records",
    "exhaustive", "exhaustive_table", "import_autotvm_log", "layer_spec", "load_records", "make_tuner",
    "tune_layer", "ProgressCallback", "RecordCallback", "TuneCallback", "TuneTask", "make_task", "tune_task",
]
