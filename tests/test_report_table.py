"""`codesign report` / the sweep's table: every mark in it is explained below it."""

from __future__ import annotations

from codesign.commands.report import format_table


def _point(name: str, latency: float) -> dict:
    return {"config": name, "latency_ms": latency, "area": 0.5, "power_w": 3.0, "energy_j": 0.2,
            "clock_verified": True}


def test_the_star_marking_designs_that_beat_a_stock_config_is_explained() -> None:
    doc = {"points": [_point("a", 50.0), _point("b", 60.0)], "hypervolume": 1.0,
           "reference_point": {"latency_ms": 100.0, "area": 1.1, "power_w": 4.0},
           "stock_comparison": {"stock1": {"dominated_by": ["a"], "objectives": {"latency_ms": 88.0},
                                           "clock_verified": True}}}
    lines = format_table(doc).splitlines()
    assert [row.split()[0] for row in lines if row.split() and row.split()[-1] == "verified"] == ["*", "b"]
    # a new user saw '*' on four rows and nothing saying what it means
    assert any("*" in line and "dominate" in line for line in lines if not line.startswith(("* ", "  ")))


def test_no_star_no_legend() -> None:
    doc = {"points": [_point("a", 50.0)], "hypervolume": 1.0,
           "reference_point": {"latency_ms": 100.0, "area": 1.1, "power_w": 4.0}, "stock_comparison": {}}
    assert "*" not in format_table(doc)
