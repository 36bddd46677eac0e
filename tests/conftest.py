"""Shared test fixtures: a private run cache per test session and double precision helpers."""

import os

import pytest
import torch


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    """Every test gets its own run cache so no test reads another's results."""
    monkeypatch.setenv("ICL_CACHE_DIR", str(tmp_path / "icl_cache"))
    monkeypatch.delenv("ICL_PROFILE", raising=False)
    # the unit tests of the engine, the cache and the store pin the eager backend's numbers (the
    # reference digest, sharded against plain loops); the fused backend's tests ask for it by name
    monkeypatch.setenv("ICL_BACKEND", "eager")
    yield


@pytest.fixture
def torch_threads():
    """``torch_threads(n)`` sets torch's intra-op threads for the rest of the test; the threads the
    test began with are restored after it."""
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(1234)


def pytest_configure(config):
    # one thread per worker when the tests run on every core (pytest-xdist), two otherwise
    torch.set_num_threads(1 if os.environ.get("PYTEST_XDIST_WORKER") else min(2, os.cpu_count() or 1))
