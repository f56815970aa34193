"""A sweep's private Ray instance keeps Ray's token authentication: Ray's servers listen on every
interface, so disabling auth would open the machine (docs/cluster.md §Security)."""

from __future__ import annotations

import os

import ray

from codesign.sweep import runner


def test_private_instance_leaves_token_auth_as_ray_has_it(monkeypatch):
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    calls: list[dict] = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kw: calls.append(kw))
    assert runner._init_ray(None, 1) is True
    assert calls and calls[0]["address"] == "local"
    assert "RAY_AUTH_MODE" not in os.environ


def test_a_users_choice_is_kept(monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kw: None)
    runner._init_ray(None, 1)
    assert os.environ["RAY_AUTH_MODE"] == "disabled"
