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


# --------------------------------------------------------------------- chapter 2's read-outs
from icl_lib.engine import Run  # noqa: E402
from icl_lib.paper1 import sweeps  # noqa: E402
from icl_lib.paper1.dynamics import reparam_circuits  # noqa: E402

D5 = DataConfig(d=5, L=40)


def _run(H, seed, omegas, mus, steps):
    """A run whose logged circuits have the form (3.1) with omega_h, mu_h per logged step."""
    KQ, OV = reparam_circuits(torch.tensor(omegas, dtype=torch.float64), torch.tensor(mus, dtype=torch.float64), 5)
    spec = RunSpec(data=D5, model=ModelConfig(heads=H), train=TRAIN, seed=seed)
    return Run(spec=spec, params={}, history={"step": torch.tensor(steps), "KQ": KQ, "OV": OV})


STEPS = [0, 10, 20, 30]
POSNEG2 = ([[0.1, 0.1], [0.1, -0.1], [0.2, -0.2], [0.3, -0.3]], [[0.1, 0.1], [1.0, -1.0], [1.5, -1.5], [2.0, -2.0]])
SINGLE2 = ([[0.1, 0.1]] * 4, [[0.1, 0.1]] * 4)  # one sign throughout
LATE2 = ([[0.1, 0.1]] * 3 + [[0.1, -0.1]], [[0.1, 0.1]] * 3 + [[1.0, -1.0]])  # pos/neg at the last step only
BACK2 = ([[0.1, -0.1], [0.1, 0.1], [0.1, -0.1], [0.1, -0.1]], [[1.0, -1.0], [1.0, 1.0], [1.0, -1.0], [1.0, -1.0]])
ONE = ([[2.0], [2.0], [2.0], [2.5]], [[0.4], [0.4], [0.4], [0.6]])


@pytest.fixture
def sweep():
    """H = 1 (two seeds) and H = 2 (seeds pos/neg, single-sign, pos/neg at the end, back to pos/neg at 20)."""
    return {
        1: [_run(1, 0, *ONE, STEPS), _run(1, 1, [[1.0]] * 4, [[0.2]] * 4, STEPS)],
        2: [_run(2, 0, *POSNEG2, STEPS), _run(2, 1, *SINGLE2, STEPS), _run(2, 2, *LATE2, STEPS),
            _run(2, 3, *BACK2, STEPS)],
    }


def test_head_and_model_tables_one_row_per_head_and_per_model(sweep):
    """Rows in sweep order; the values of the last logged circuits, read back from the construction."""
    heads = sweeps.head_table(sweep)
    assert heads.index.names == ["H", "seed", "head"] and len(heads) == 2 * 1 + 4 * 2
    assert heads.loc[(2, 0, 2), "omega_h"] == pytest.approx(-0.3) and heads.loc[(2, 0, 2), "mu_h"] == pytest.approx(-2.0)
    assert heads.loc[(2, 0, 2), "group"] == "negative" and heads.loc[(2, 0, 1), "eta (model)"] == pytest.approx(1.2)
    assert heads.loc[(1, 0, 1), "pattern"] == "single-head" and heads.loc[(1, 0, 1), "omega_h"] == pytest.approx(2.5)
    models = sweeps.model_table(sweep)
    assert list(models["H"]) == [1, 1, 2, 2, 2, 2] and list(models["seed"]) == [0, 1, 0, 1, 2, 3]
    assert list(models["pattern"]) == ["single-head", "single-head", "pos/neg", "single-sign", "pos/neg", "pos/neg"]
    assert models["eta"].tolist() == pytest.approx([1.5, 0.2, 1.2, 0.02, 0.2, 0.2])
    assert (models["KQ off-diag"] < 1e-7).all() and models["sign matched"].all()  # round-off only
    assert models.loc[2, "zero-sum"] == 0 and models.loc[3, "zero-sum"] == 1
    assert models.equals(sweeps.model_table(sweep, sweeps.sweep_patterns(sweep)))


def test_pattern_counts_are_fractions_of_seeds(sweep):
    counts = sweeps.pattern_counts(sweeps.model_table(sweep), steps=30)
    assert list(counts.index) == [1, 2]
    assert counts.loc[2, "seeds"] == 4 and counts.loc[2, "pos_neg"] == 0.75 and counts.loc[2, "single_sign"] == 0.25
    assert counts.loc[1, "pos_neg"] == 0 and (counts["with_dummy"] == 0).all() and (counts["steps"] == 30).all()


def test_scale_comparison_medians_over_seeds_and_live_heads(sweep):
    """H = 1: median |omega| of (2.5, 1.0), |mu| of (0.6, 0.2); H = 2: the pos/neg models' heads only."""
    s = sweeps.scale_comparison(sweeps.sweep_patterns(sweep))
    assert s["multi_H"] == [2]
    assert s["w1"] == pytest.approx(1.75) and s["m1"] == pytest.approx(0.4)
    assert s["w_multi"] == pytest.approx(0.1)  # |omega_h| = 0.3, 0.3, 0.1, 0.1, 0.1, 0.1
    assert s["mu_multi_group"] == pytest.approx(1.0)  # positive group's mu: 2.0, 1.0, 1.0
    only_multi = sweeps.scale_comparison({2: sweeps.sweep_patterns(sweep)[2]})
    assert only_multi == {"multi_H": [2]}
    assert sweeps.scale_comparison({1: sweeps.sweep_patterns(sweep)[1]}) == {"multi_H": []}


def test_pos_neg_history_fractions_and_the_step_from_which_a_seed_stays(sweep):
    steps, fractions, escape = sweeps.pos_neg_history(sweep)
    assert steps.tolist() == STEPS and list(fractions) == [2]  # H = 1 has no pos/neg pattern
    # pos/neg per seed and step: [0,1,1,1], [0,0,0,0], [0,0,0,1], [1,0,1,1]
    assert fractions[2].tolist() == pytest.approx([0.25, 0.25, 0.5, 0.75])
    assert escape[2] == [10, None, 30, 20]


@pytest.mark.parametrize("heads, want", [("[3]", [3]), ("[4, 1,2]", [1, 2, 4]), (" [2] ", [2])])
def test_as_heads_reads_papermills_text_of_a_list(heads, want):
    """papermill's -p heads [1,2] passes the string "[1,2]"."""
    assert as_heads(heads) == want


@pytest.mark.parametrize("heads", ["[]", "[0]", "[1, 2", "[a]", "[1.5]", 9])
def test_as_heads_bound_and_bad_text(heads):
    with pytest.raises(ValueError, match=r"^heads="):
        as_heads(heads, hi=8)
