"""The shared heads sweep (icl_lib.paper1.sweeps): the heads parameter, the specs, training and the run cache."""

import pytest
import torch

from icl_lib import DataConfig
from icl_lib.config import ModelConfig, RunSpec, TrainConfig
from icl_lib.paper1.sweeps import as_heads, heads_sweep, heads_sweep_specs

DATA = DataConfig(d=3, L=6)
TRAIN = TrainConfig(steps=20, batch=16, n_log=4, val_size=64)


@pytest.mark.parametrize("heads, want", [(3, [3]), (2.0, [2]), ([4, 1, 2], [1, 2, 4]), ((2, 2, 1, 2), [1, 2]), ([256, 2, 1], [1, 2, 256])])
def test_as_heads_sorts_and_deduplicates(heads, want):
    """One int or a list of them becomes a sorted list without duplicates."""
    assert as_heads(heads) == want


@pytest.mark.parametrize("heads", [0, 257, 2.5, True, [], [1, 0], [1, "2"], "3", None])
def test_as_heads_rejects_bad_values_naming_heads(heads):
    """A bad heads value must raise the library's ValueError naming the parameter, before any training."""
    with pytest.raises(ValueError, match=r"^heads="):
        as_heads(heads)


def test_heads_sweep_specs_order_seeds_and_configs():
    """Specs come ordered by H then seed, seeds seed..seed+seeds-1, configs and model kwargs passed through."""
    specs = heads_sweep_specs([3, 1], seeds=2, seed=5, data=DATA, train_cfg=TRAIN, attention="linear", init_scale=0.5)
    assert [(s.model.heads, s.seed) for s in specs] == [(1, 5), (1, 6), (3, 5), (3, 6)]
    assert all(s.data is DATA and s.train is TRAIN for s in specs)
    assert specs[2] == RunSpec(data=DATA, model=ModelConfig(heads=3, attention="linear", init_scale=0.5),
                               train=TRAIN, seed=5)
    assert [s.seed for s in heads_sweep_specs(2, seeds=3, seed=0, data=DATA, train_cfg=TRAIN)] == [0, 1, 2]


@pytest.mark.parametrize("kw, name", [({"seeds": 0}, "seeds"), ({"seed": -1}, "seed"), ({"heads": [0]}, "heads")])
def test_heads_sweep_specs_rejects_bad_counts(kw, name):
    """seeds < 1, a negative seed or a bad head count raise a ValueError naming that parameter."""
    args = {"heads": [1], "seeds": 1, "seed": 0, "data": DATA, "train_cfg": TRAIN} | kw
    with pytest.raises(ValueError, match=rf"^{name}="):
        heads_sweep_specs(**args)


def test_heads_sweep_trains_then_loads_from_the_run_cache():
    """{H: runs in seed order} matching the specs; a second call loads the same parameters from the cache."""
    want = heads_sweep_specs([1, 2], 2, 3, DATA, TRAIN)
    out = heads_sweep([2, 1], seeds=2, seed=3, data=DATA, train_cfg=TRAIN, device="cpu")
    assert list(out) == [1, 2]
    assert [r.spec for H in (1, 2) for r in out[H]] == want
    assert [r.spec.seed for r in out[2]] == [3, 4]
    for H, runs in out.items():
        assert all(r.KQ.shape == (H, 4, 4) and not r.meta.get("cached") for r in runs)
        assert len(runs[0].history["step"]) == len(TRAIN.log_steps())
    assert not torch.equal(out[1][0].params["Q"], out[1][1].params["Q"])  # the seeds differ
    again = heads_sweep([1, 2], seeds=2, seed=3, data=DATA, train_cfg=TRAIN, device="cpu")
    for H in (1, 2):
        for first, second in zip(out[H], again[H]):
            assert second.meta.get("cached") is True and second.spec == first.spec
            assert first.params.keys() == second.params.keys()
            assert all(torch.equal(first.params[k], second.params[k]) for k in first.params)
