"""The shared heads sweep (icl_lib.paper1.sweeps): the heads parameter, the specs, training and the run cache."""

import math

import numpy as np
import pytest
import torch

from icl_lib import DataConfig
from icl_lib.config import ModelConfig, RunSpec, TrainConfig
from icl_lib.setups.base import grouped
from icl_lib.engine import train_groups
from icl_lib.paper1.sweeps import as_heads, heads_sweep_specs
import pandas as pd

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


def _sweep(heads):
    """The sweep as a chapter trains it: its specs grouped by H, one call of the engine."""
    specs = heads_sweep_specs(heads, seeds=2, seed=3, data=DATA, train_cfg=TRAIN)
    return train_groups(grouped(specs, lambda s: s.model.heads), device="cpu")


def test_heads_sweep_trains_then_loads_from_the_run_cache():
    """{H: runs in seed order} matching the specs; a second call loads the same parameters from the cache."""
    want = heads_sweep_specs([1, 2], 2, 3, DATA, TRAIN)
    out = _sweep([2, 1])
    assert list(out) == [1, 2]
    assert [r.spec for H in (1, 2) for r in out[H]] == want
    assert [r.spec.seed for r in out[2]] == [3, 4]
    for H, runs in out.items():
        assert all(r.KQ.shape == (H, 4, 4) and not r.meta.get("cached") for r in runs)
        assert len(runs[0].history["step"]) == len(TRAIN.log_steps())
    assert not torch.equal(out[1][0].params["Q"], out[1][1].params["Q"])  # the seeds differ
    again = _sweep([1, 2])
    for H in (1, 2):
        for first, second in zip(out[H], again[H]):
            assert second.meta.get("cached") is True and second.spec == first.spec
            assert first.params.keys() == second.params.keys()
            assert all(torch.equal(first.params[k], second.params[k]) for k in first.params)


# --------------------------------------------------------------------- chapter 2's read-outs
from icl_lib.engine import Run  # noqa: E402
from icl_lib.paper1 import sweeps  # noqa: E402
from icl_lib.paper1.dynamics.landscape import reparam_circuits

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
    """H = 1: median |omega| of (2.5, 1.0), |mu| of (0.6, 0.2); H = 2: one value per pos/neg model
    (seeds 0, 2, 3: mean |omega_h| 0.3, 0.1, 0.1; positive group's mu 2.0, 1.0, 1.0), with
    order-statistic intervals (infinite with fewer than 6 values)."""
    s = sweeps.scale_comparison(sweeps.sweep_patterns(sweep))
    assert s["multi_H"] == [2]
    assert s["w1"].value == pytest.approx(1.75) and s["m1"].value == pytest.approx(0.4)
    assert s["w_multi"].value == pytest.approx(0.1)
    assert s["mu_multi_group"].value == pytest.approx(1.0)
    assert s["w1"].interval == (-math.inf, math.inf)  # 2 seeds cannot bound a median
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


# --------------------------------------------------------------------- chapter 2's intervals
from icl_lib.stats import Estimate, median_ci, median_of, ratio, spread  # noqa: E402


def _e(v, lo, hi, level=0.95):
    return Estimate(v, lo, hi, level)


@pytest.mark.parametrize("n", [5, 6, 7, 10, 12, 24])
def test_median_of_exact_values_is_median_ci(n):
    """With zero-width per-seed intervals, median_of is median_ci's median and interval."""
    x = np.random.default_rng(n).normal(size=n)
    m = median_of([_e(v, v, v) for v in x])
    assert (m.value, m.lo, m.hi) == pytest.approx((median_ci(x).value, median_ci(x).lo, median_ci(x).hi))


def test_median_of_takes_the_order_statistics_of_the_interval_ends():
    """12 seeds: k = 3 (P(Bin(12, 1/2) <= 2) = 0.019 <= 0.025 < P(<= 3)); the 3rd smallest lower
    end and the 3rd largest upper end, whichever seeds they belong to."""
    vals = np.arange(12.0)
    ests = [_e(v, v - (5 if v == 11 else 0.5), v + 0.5) for v in vals]  # seed 11 has a wide interval
    m = median_of(ests)
    lows, highs = sorted(e.lo for e in ests), sorted(e.hi for e in ests)
    assert m.value == 5.5 and m.lo == lows[2] == 1.5 and m.hi == highs[9] == 9.5
    with pytest.raises(ValueError, match="^estimates="):
        median_of([])


def test_ratio_and_spread_hold_when_their_inputs_do():
    r = ratio(_e(2.0, 1.5, 2.5), _e(1.0, 0.8, 1.25))
    assert r.value == 2.0 and r.interval == pytest.approx((1.2, 3.125)) and r.level == pytest.approx(0.9)
    wide = ratio(_e(2.0, -math.inf, math.inf), _e(1.0, -math.inf, math.inf))
    assert wide.interval == (0.0, math.inf)
    s = spread([_e(1.0, 0.99, 1.01), _e(1.02, 1.01, 1.03), _e(1.01, 1.0, 1.02)])
    assert s.value == pytest.approx(0.02) and s.lo == pytest.approx(0.0)  # the intervals overlap
    assert s.hi == pytest.approx(1.03 / 0.99 - 1) and s.level == pytest.approx(1 - 3 * 0.05)
    apart = spread([_e(1.0, 0.99, 1.01), _e(1.2, 1.19, 1.21)])
    assert apart.lo == pytest.approx(1.19 / 1.01 - 1)
    for bad in (lambda: ratio(_e(-1.0, -2, 0), _e(1.0, 0.5, 2)), lambda: spread([_e(1, 0, 2)])):
        with pytest.raises(ValueError):
            bad()


def test_prompt_set_holds_the_models_and_the_gd_predictors_on_one_set():
    """pred is the ensemble's prediction, g and g - c vanilla and debiased GD at unit step (direct
    formulas), on the sequences of sample_chunks for the seed and chunk size."""
    from icl_lib import AttentionEnsemble
    from icl_lib.sampling import sample_chunks
    from icl_lib.estimators import debiased_gd_predict, vanilla_gd_predict

    data = DataConfig(d=4, L=20, sigma2=0.1)
    KQ, OV = reparam_circuits(torch.tensor([[0.05, -0.05], [0.3, 0.2]], dtype=torch.float64),
                              torch.tensor([[8.0, -8.0], [0.5, 0.4]], dtype=torch.float64), 4)
    model = AttentionEnsemble.from_circuits(KQ, OV, 4)
    ps = sweeps.prompt_set(model, data, n=1_000, seed=5, chunk=300)
    assert ps.pred.shape == (2, 1_000) and ps.y.shape == ps.g.shape == ps.c.shape == (1_000,)
    chunks = list(sample_chunks(data, 1_000, 5, chunk=300))
    b = chunks[0]._replace(tokens=torch.cat([c.tokens for c in chunks]), beta=torch.cat([c.beta for c in chunks]))
    torch.testing.assert_close(ps.pred, model(b)[..., 0])
    torch.testing.assert_close(ps.g, vanilla_gd_predict(b, 1.0))
    torch.testing.assert_close(ps.g - ps.c, debiased_gd_predict(b, 1.0))
    torch.testing.assert_close(ps.gd_errors(0.7, True), (debiased_gd_predict(b, 0.7) - b.yq[:, 0]) ** 2)
    torch.testing.assert_close(ps.errors()[1], (model(b)[1, :, 0] - b.yq[:, 0]) ** 2)


def test_debiasing_fraction_tells_debiased_from_vanilla_gd():
    """1 for debiased GD and 0 for vanilla GD at any step, t0 for a mixture; with noise added the
    interval covers t0 in about 95 % of test sets; two symmetric softmax heads with a small omega
    implement debiased GD (paper 1, Section 4.3)."""
    from icl_lib import AttentionEnsemble

    data = DataConfig(d=4, L=20, sigma2=0.1)
    rng = torch.Generator().manual_seed(0)
    covered = 0
    for k in range(100):
        ps = sweeps.prompt_set(_null_model(), data, n=2_000, seed=k)
        exact = sweeps.debiasing_fraction(0.9 * (ps.g - ps.c), ps.g, ps.c)
        assert exact.value == pytest.approx(1.0) and exact.hi - exact.lo < 1e-9
        assert sweeps.debiasing_fraction(1.3 * ps.g, ps.g, ps.c).value == pytest.approx(0.0, abs=1e-9)
        noise = torch.randn(2_000, generator=rng, dtype=torch.float64) * (0.05 + ps.g.abs())
        t = sweeps.debiasing_fraction(0.8 * (ps.g - 0.3 * ps.c) + noise, ps.g, ps.c)
        covered += t.lo <= 0.3 <= t.hi
    assert covered >= 88, covered
    KQ, OV = reparam_circuits(torch.tensor([[0.03, -0.03]], dtype=torch.float64),
                              torch.tensor([[14.0, -14.0]], dtype=torch.float64), 4)
    ps = sweeps.prompt_set(AttentionEnsemble.from_circuits(KQ, OV, 4), data, n=20_000, seed=1)
    posneg = sweeps.debiasing_fraction(ps.pred[0], ps.g, ps.c)
    assert 0.95 < posneg.lo and posneg.hi < 1.05
    with pytest.raises(ValueError, match="^g="):
        sweeps.debiasing_fraction(ps.pred[0], ps.g[:10], ps.c[:10])


def _null_model():
    from icl_lib import AttentionEnsemble

    KQ, OV = reparam_circuits(torch.zeros(1, 1, dtype=torch.float64), torch.zeros(1, 1, dtype=torch.float64), 4)
    return AttentionEnsemble.from_circuits(KQ, OV, 4)


def test_prompt_statistics_and_estimates_by_H():
    """The loss is the mean squared error with its test-set interval, vs dGD* the paired ratio to
    the debiased GD step's error on the same prompts; estimates_by_H groups them by the table's rows."""
    from icl_lib import AttentionEnsemble
    from icl_lib.estimators import relative_excess

    data = DataConfig(d=4, L=20, sigma2=0.1)
    KQ, OV = reparam_circuits(torch.tensor([[0.05, -0.05], [0.2, 0.2]], dtype=torch.float64),
                              torch.tensor([[8.0, -8.0], [0.5, 0.5]], dtype=torch.float64), 4)
    ps = sweeps.prompt_set(AttentionEnsemble.from_circuits(KQ, OV, 4), data, n=3_000, seed=2)
    st = sweeps.prompt_statistics(ps, eta_dgd=0.7)
    e = ps.errors()[1]
    assert st["loss"][1].value == pytest.approx(e.mean().item())
    assert st["loss"][1].hi - st["loss"][1].lo == pytest.approx(2 * 1.959964 * e.std().item() / math.sqrt(3_000))
    assert st["vs dGD*"][0] == relative_excess(ps.errors()[0], ps.gd_errors(0.7, True))
    assert abs(st["vs dGD*"][0].value) < 0.05 and st["vs dGD*"][1].value > 0.2  # pos/neg near dGD, single-sign not
    table = pd.DataFrame({"H": [2, 2], "pattern": ["pos/neg", "single-sign"]})
    assert sweeps.estimates_by_H(table, st["loss"]) == {2: st["loss"]}
    assert sweeps.estimates_by_H(table, st["loss"], "pos/neg") == {2: st["loss"][:1]}
    with pytest.raises(ValueError, match="^estimates="):
        sweeps.estimates_by_H(table, st["loss"][:1])
    wide = sweeps.add_estimates(table, "loss", st["loss"])
    assert list(wide.columns) == ["H", "pattern", "loss", "loss lo", "loss hi"] and list(table.columns) == ["H", "pattern"]
    assert wide["loss lo"].tolist() == [e.lo for e in st["loss"]]
    with pytest.raises(ValueError, match="^estimates="):
        sweeps.add_estimates(table, "loss", st["loss"][:1])


def test_median_by_H_over_every_seed_or_one_pattern(sweep):
    models = sweeps.model_table(sweep)
    allH = sweeps.median_by_H(models, "eta")
    assert list(allH) == [1, 2] and allH[2].value == pytest.approx(np.median([1.2, 0.02, 0.2, 0.2]))
    posneg = sweeps.median_by_H(models, "eta", "pos/neg")
    assert list(posneg) == [2] and posneg[2].value == pytest.approx(0.2)
    from icl_lib.claims import Above, Below, Within

    for rule in (Below(0.1), Above(0.5), Within(-1, 1)):  # no seed to measure: the data cannot decide
        assert rule.decide(sweeps.NO_SEEDS.lo, sweeps.NO_SEEDS.hi) == "INCONCLUSIVE"
