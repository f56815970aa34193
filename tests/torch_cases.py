"""What the tests of torch modules share: seeded inputs and seeded module weights."""

from __future__ import annotations

import pytest
import torch


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    """A standard-normal tensor, the same on every run."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.fixture(autouse=True)
def seeded_weights():
    """Modules built in a test get the same initial weights on every run (import it into a test
    module to make it autouse there)."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        yield
