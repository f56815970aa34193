"""Normalization kinds: layer norm, softmax, batch norm that follows no conv (registered here; the record: codesign.network.kinds.base)."""
