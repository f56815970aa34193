"""Whole networks: every op of an exported torch graph with its weights (`Network`), its int8
quantization with power-of-two scales (`quantize`, torchao PT2E), and NumPy references of the
integer and float networks (`run_int`, `run_float`). Placement and lowering build on this."""

from codesign.network.graph import Network, Op
from codesign.network.importer import import_network, load_model
from codesign.network.kinds import REGISTRY
from codesign.network.layers import gemm_layers, layer_of
from codesign.network.qplan import plan
from codesign.network.quantize import quantize
from codesign.network.quantized import QParams, QuantizedNetwork
from codesign.network.reference import agreement, int_outputs, run_float, run_int

KINDS = {name: kind.doc for name, kind in REGISTRY.items()}  # kind -> what it computes

__all__ = ["KINDS", "REGISTRY", "Network", "Op", "QParams", "QuantizedNetwork", "agreement", "gemm_layers", "import_network", "int_outputs",
           "layer_of", "load_model", "plan", "quantize", "run_float", "run_int"]
