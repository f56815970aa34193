"""Fixtures shared by several test files."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="module")
def ray_session():
    """One local Ray (2 CPUs, no dashboard) per test module that asks for it; shut down after it."""
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    if started:
        ray.shutdown()
