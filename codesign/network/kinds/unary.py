"""Non-linear unary kinds as exact int8 lookup tables (registered here; the record: codesign.network.kinds.base)."""
