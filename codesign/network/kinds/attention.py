"""Matmul of two activations and attention (registered here; the record: codesign.network.kinds.base)."""
