"""`codesign run`: a quantized network end to end on VTA and the CPU (`network.py`: import, quantize,
place, execute, check every op), with the schedules of `schedules.py`; `layers.py` the layer-level
run of a workload's offloaded layers on random data (`codesign run --layers`)."""

from codesign.netrun.layers import (
    TOPHUB_LOG,
    LayerResult,
    choose_schedules,
    load_schedule_records,
    plot,
    run_network,
    simulator_executor,
)

__all__ = ["LayerResult", "run_network", "choose_schedules", "load_schedule_records", "simulator_executor", "plot",
           "TOPHUB_LOG"]
