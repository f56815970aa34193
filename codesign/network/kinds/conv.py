"""Convolution kinds beyond conv2d: conv1d, conv_transpose2d (registered here; the record: codesign.network.kinds.base)."""
