"""Element-wise binary kinds with broadcasting and constant operands (registered here; the record: codesign.network.kinds.base)."""
