"""The run cache never serves a bad entry: truncated, empty, random, foreign, another run's, NaN or
tampered files are set aside with one warning line naming them, and the run is trained again."""

import json
import logging

import pytest
import torch

from icl_lib import DataConfig, ModelConfig, RunSpec, TrainConfig, train
from icl_lib.engine.cache import RunCache, payload_checksum

TINY = TrainConfig(steps=8, batch=8, lr=3e-3, n_log=2, val_size=32, dtype="float64")


def spec(seed=0):
    return RunSpec(data=DataConfig(d=2, L=4), model=ModelConfig(heads=2), train=TINY, seed=seed)


def _spoil_with(kind, path, other):
    """Replace the entry at ``path`` by a bad file of ``kind`` (``other``: another run's entry)."""
    good = path.read_bytes()
    if kind == "truncated":
        path.write_bytes(good[: len(good) // 2])
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "random":
        path.write_bytes(torch.randint(0, 256, (4096,), generator=torch.Generator().manual_seed(0),
                                       dtype=torch.uint8).numpy().tobytes())
    elif kind == "foreign":
        torch.save({"hello": torch.ones(3)}, path)
    elif kind == "text":
        path.write_text("not a tensor file\n")
    elif kind == "other-run":
        path.write_bytes(other.read_bytes())  # a valid entry, of seed 1, under seed 0's key
    elif kind in ("nan", "tampered"):
        payload = torch.load(path, weights_only=True)
        payload["params"]["V"][0, 0, 0] = float("nan") if kind == "nan" else 123.0
        if kind == "nan":  # a consistent checksum: only the finiteness check can catch it
            payload["checksum"] = payload_checksum(payload)
        torch.save(payload, path)
    elif kind == "old-format":
        payload = torch.load(path, weights_only=True)
        payload.pop("format"), payload.pop("checksum")
        torch.save(payload, path)


KINDS = ["truncated", "empty", "random", "foreign", "text", "other-run", "nan", "tampered", "old-format"]


@pytest.mark.parametrize("kind", KINDS)
def test_bad_entry_is_set_aside_and_retrained(kind, caplog):
    """Without verification these raised EOFError/UnpicklingError/KeyError, or served seed 1's
    model (or NaN parameters) as seed 0's."""
    s0, s1 = spec(0), spec(1)
    first = train([s0], device="cpu", progress=False)
    train([s1], device="cpu", progress=False)
    cache = RunCache()
    k0, k1 = s0.key("cpu"), s1.key("cpu")
    path = cache.path(k0)
    _spoil_with(kind, path, cache.path(k1))
    with caplog.at_level(logging.WARNING, logger="icl_lib.engine.cache"):
        assert cache.load(k0) is None
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and str(path) in lines[0] and "trained again" in lines[0], lines
    assert not path.exists() and len(list((cache.root / "corrupt").glob("*.pt"))) == 1
    again = train([s0], device="cpu", progress=False)[0]
    assert not again.meta.get("cached")
    for name in "QKVO":
        assert torch.equal(again.params[name], first[0].params[name])
    assert cache.load(k0).meta["cached"]  # the retrained entry is valid


def test_valid_entry_round_trips_exactly():
    s = spec(3)
    run = train([s], device="cpu", progress=False)[0]
    loaded = RunCache().load(s.key("cpu"))
    assert loaded.spec == s and loaded.meta["cached"]
    for part in ("params", "history"):
        for name, t in getattr(run, part).items():
            assert torch.equal(getattr(loaded, part)[name], t), (part, name)
    payload = torch.load(RunCache().path(s.key("cpu")), weights_only=True)
    assert json.loads(payload["spec"]) == s.to_dict() and len(payload["checksum"]) == 64
