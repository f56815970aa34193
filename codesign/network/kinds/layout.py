"""Data-movement kinds: permute, slices, split, stack, pad, upsample, reductions (registered here; the record: codesign.network.kinds.base)."""
