"""Chapter 9's grid (icl_lib.paper1.phase): cells and specs, outcomes against summarize_pattern, the
time to the pattern, losses against a direct Monte Carlo, and the statistics against direct
computations and published values."""

import math
import re

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats as sps

from icl_lib import DataConfig
from icl_lib.circuits import summarize_pattern
from icl_lib.claims import Below
from icl_lib.config import ModelConfig, RunSpec, TrainConfig
from icl_lib.engine import Run, train_config
from icl_lib.estimators import debiased_gd_predict, debiased_gd_risk, mc_risk, optimal_eta_debiased
from icl_lib.paper1 import phase as ph
from icl_lib.paper1.phase_outcomes import (
    MIN_CELL_RUNS,
    OUTCOMES,
    SHAPE_TOL,
    UNDECIDED,
    attach_losses,
    cell_table,
    model_table,
    outcome_codes,
    outcome_table,
    outcomes_at_time,
    rate_table,
    run_record,
    time_panels,
    time_scaling,
    trap_vs_heads,
    trap_vs_lr,
    worst_cell,
    worst_cell_where,
)
from icl_lib.paper1 import phase_outcomes
from icl_lib.seeding import derive_seed
from icl_lib.stats import (
    Estimate,
    censored_median_ci,
    fraction_diff,
    linear_slope,
    loglog_slope,
    mean_ci,
    median_ci,
    proportion_ci,
)

GRID = dict(heads=[1, 2, 3], shapes=[[4, 32], [2, 32], [8, 32], [4, 16], [2, 16]], sigma2s=[0.1, 0.3],
            lrs=[3e-3, 1e-2], init_scales=[1.0, 0.5])


def test_the_grid_validates_every_axis_by_its_name():
    seventeen = [[4, 32], [2, 8]] + [[1, L] for L in range(2, 17)]
    for name, bad in [("heads", [0]), ("heads", []), ("shapes", []), ("shapes", seventeen), ("shapes", "x"),
                      ("shapes", "[[4, 32"), ("shapes", [[4]]), ("shapes", [[4, 32], 5]), ("shapes", [["x", 32]]),
                      ("shapes", [[17, 32]]), ("shapes", [[4, 1]]), ("shapes", [[4, 129]]),
                      ("shapes", [[4, 32], [4, 32]]), ("sigma2s", [-0.1]), ("sigma2s", [math.nan]), ("lrs", [0.0]),
                      ("lrs", [0.2]), ("init_scales", [0.0]), ("init_scales", "x"), ("heads", [1, 1]),
                      ("heads", list(range(1, 10)))]:
        with pytest.raises(ValueError, match=rf"^{name}(\[\d+\])*( \((d|L)\))?="):
            ph.PhaseGrid(**{**GRID, name: bad})
    # the messages of the shapes' checks (icl_lib.validate.fail's format; d's and L's may carry their name)
    distinct = r"shapes=\[\(4, 32\), \(4, 32\)\] is invalid: accepted a list of distinct values"
    for bad, want in [([], r"shapes=\[\] is invalid: accepted a list of 1 to 16 pairs \[d, L\]"),
                      ([[4]], r"shapes\[0\]=\[4\] is invalid: accepted a pair \[d, L\]"),
                      ([[4, 32], [2, 3, 4]], r"shapes\[1\]=\[2, 3, 4\] is invalid: accepted a pair \[d, L\]"),
                      ([[17, 32]], r"shapes\[0\]\[0\]( \(d\))?=17 is invalid: accepted an integer in \[1, 16\]"),
                      ([[4, 32], [2, 1]],
                       r"shapes\[1\]\[1\]( \(L\))?=1 is invalid: accepted an integer in \[2, 128\]"),
                      ([[4, 32], [4, 32]], distinct)]:
        with pytest.raises(ValueError) as err:
            ph.PhaseGrid(**{**GRID, "shapes": bad})
        assert re.fullmatch(want, str(err.value)), str(err.value)
    g = ph.PhaseGrid(**{**GRID, "lrs": "[0.003, 0.01]", "shapes": "[[4, 32], (2, 16)]"})  # papermill's text of a list
    assert g.lrs == (0.003, 0.01) and g.shapes == ((4, 32), (2, 16))
    assert ph.PhaseGrid(**GRID).shapes == ((4, 32), (2, 32), (8, 32), (4, 16), (2, 16))
    assert g.centre == {"H": 1, "d": 4, "L": 32, "sigma2": 0.1, "lr": 3e-3, "init_scale": 1.0}
    swapped = ph.PhaseGrid(**{**GRID, "shapes": [[2, 16], [4, 32]]}).centre  # d and L from shapes[0]
    assert (swapped["d"], swapped["L"]) == (2, 16)


def test_full_is_the_cartesian_product_of_heads_shapes_and_the_rest_with_h_slowest():
    g = ph.PhaseGrid(**GRID)
    cells = g.full()
    want = [ph.Cell(H, d, L, s, lr, i) for H in GRID["heads"] for d, L in GRID["shapes"] for s in GRID["sigma2s"]
            for lr in GRID["lrs"] for i in GRID["init_scales"]]
    assert cells == want and len(cells) == 3 * 5 * 2 * 2 * 2 and len(set(cells)) == len(cells)
    assert cells[0] == ph.Cell(1, 4, 32, 0.1, 3e-3, 1.0) and cells[-1] == ph.Cell(3, 2, 16, 0.3, 1e-2, 0.5)
    assert [c.H for c in cells[:40]] == [1] * 40
    assert {(c.d, c.L) for c in cells} == {(4, 32), (2, 32), (8, 32), (4, 16), (2, 16)}  # pairs, not d x L


def test_the_head_axis_is_every_head_count_at_the_centre():
    assert ph.PhaseGrid(**GRID).head_axis() == [ph.Cell(H, 4, 32, 0.1, 3e-3, 1.0) for H in (1, 2, 3)]
    g = ph.PhaseGrid([4, 2], [[8, 20], [4, 40]], [0.5, 0.0], [1e-2], [2.0, 1.0])
    assert g.head_axis() == [ph.Cell(4, 8, 20, 0.5, 1e-2, 2.0), ph.Cell(2, 8, 20, 0.5, 1e-2, 2.0)]


def test_the_slice_is_every_head_count_at_the_centre_then_one_axis_at_a_time():
    g = ph.PhaseGrid(**GRID)
    want = [ph.Cell(1, 4, 32, 0.1, 3e-3, 1.0), ph.Cell(2, 4, 32, 0.1, 3e-3, 1.0), ph.Cell(3, 4, 32, 0.1, 3e-3, 1.0),
            ph.Cell(2, 2, 32, 0.1, 3e-3, 1.0), ph.Cell(2, 8, 32, 0.1, 3e-3, 1.0),  # the other shapes, in order
            ph.Cell(2, 4, 16, 0.1, 3e-3, 1.0), ph.Cell(2, 2, 16, 0.1, 3e-3, 1.0),
            ph.Cell(2, 4, 32, 0.3, 3e-3, 1.0), ph.Cell(2, 4, 32, 0.1, 1e-2, 1.0), ph.Cell(2, 4, 32, 0.1, 3e-3, 0.5)]
    assert g.slice(2) == want and g.slice() == want
    three = g.slice(3)
    assert three[:3] == g.head_axis() and [x.H for x in three[3:]] == [3] * 7
    assert [(x.d, x.L, x.sigma2, x.lr, x.init_scale) for x in three[3:]] == \
        [(x.d, x.L, x.sigma2, x.lr, x.init_scale) for x in want[3:]]
    assert len(set(three)) == len(three)
    for bad in (4, 0):
        with pytest.raises(ValueError, match=r"^trap_heads="):
            g.slice(bad)
    one = ph.PhaseGrid([2], [[5, 40]], [0.1], [3e-3], [1.0])
    assert one.slice(2) == one.full() == one.head_axis() == [ph.Cell(2, 5, 40, 0.1, 3e-3, 1.0)]


def test_the_plan_gives_the_head_axis_and_the_slice_their_seeds_by_profile():
    g = ph.PhaseGrid(**GRID)
    assert ph.SEEDS == {"quick": (12, 4), "paper": (64, 64)}
    quick = g.plan("quick")
    assert list(quick) == g.slice(2)
    assert list(quick.values()) == [12] * 3 + [4] * 7  # the head axis (H = 2's centre among it), then the slice
    assert quick[ph.Cell(2, 4, 32, 0.1, 3e-3, 1.0)] == 12 and quick[ph.Cell(2, 2, 16, 0.1, 3e-3, 1.0)] == 4
    mine = g.plan("quick", seeds=5, slice_seeds=2, trap_heads=3)
    assert list(mine.items()) == [(c, 5) for c in g.head_axis()] + [(c, 2) for c in g.slice(3)[3:]]
    assert list(g.plan("quick", seeds=7).values()) == [7] * 3 + [4] * 7
    assert list(g.plan("quick", slice_seeds=1).values()) == [12] * 3 + [1] * 7
    paper = g.plan("paper")  # the same slice, every cell with 64 seeds
    assert list(paper) == g.slice(2) and set(paper.values()) == {64}
    assert list(g.plan("paper", seeds=3, slice_seeds=2).values()) == [3] * 3 + [2] * 7
    full = g.full_plan()
    assert list(full) == g.full() and set(full.values()) == {ph.FULL_SEEDS} == {16}
    assert set(g.full_plan(3).values()) == {3}
    with pytest.raises(ValueError) as err:
        g.plan("quick", seeds=0)
    assert str(err.value) == "seeds=0 is invalid: accepted an integer in [1, 256]"
    for kw, name in [({"seeds": 257}, "seeds"), ({"seeds": 1.5}, "seeds"), ({"seeds": True}, "seeds"),
                     ({"slice_seeds": 0}, "slice_seeds"), ({"slice_seeds": 300}, "slice_seeds"),
                     ({"trap_heads": 4}, "trap_heads")]:
        with pytest.raises(ValueError, match=rf"^{name}="):
            g.plan("quick", **kw)
    with pytest.raises(ValueError, match=r"^slice_seeds="):
        g.plan("paper", slice_seeds=0)
    with pytest.raises(ValueError, match=r"^profile="):
        g.plan("fast")


def test_eta_star_is_theorem_4_2_ii():
    c = ph.Cell(2, 5, 40, 0.1, 3e-3, 1.0)
    assert c.eta_star == pytest.approx(1 / (1 + 1.1 * 5 / 40)) == pytest.approx(0.8791, abs=1e-4)
    assert c.data() == DataConfig(d=5, L=40, sigma2=0.1)


def test_grid_specs_one_run_per_cell_and_seed_with_the_cells_rate_and_scale():
    plan = {ph.Cell(2, 4, 16, 0.1, 1e-2, 0.5): 2, ph.Cell(3, 5, 20, 0.2, 3e-3, 1.0): 3}
    tc = TrainConfig(steps=30, n_log=4, val_size=64)
    specs = ph.grid_specs(plan, 7, tc)
    assert [(s.model.heads, s.seed, s.train.lr, s.model.init_scale, s.data.d, s.data.L, s.data.sigma2)
            for s in specs] == [(2, 7, 1e-2, 0.5, 4, 16, 0.1), (2, 8, 1e-2, 0.5, 4, 16, 0.1),
                                (3, 7, 3e-3, 1.0, 5, 20, 0.2), (3, 8, 3e-3, 1.0, 5, 20, 0.2),
                                (3, 9, 3e-3, 1.0, 5, 20, 0.2)]
    assert all(s.train.steps == 30 and s.train.val_size == 64 and s.train.n_log == 4 for s in specs)
    assert ph.grid_specs({}, 0, tc) == []
    g = ph.PhaseGrid(**GRID)
    assert len(ph.grid_specs(g.plan("quick"), 0, tc)) == 3 * 12 + 7 * 4
    assert len(ph.grid_specs(g.plan("paper", seeds=2, slice_seeds=2), 0, tc)) == 2 * len(g.slice())
    assert len(ph.grid_specs(g.full_plan(2), 0, tc)) == 2 * len(g.full())
    for bad in (0, 257):
        with pytest.raises(ValueError, match=r"^seeds="):
            ph.grid_specs({**plan, ph.Cell(1, 4, 16, 0.1, 1e-2, 0.5): bad}, 0, tc)
    with pytest.raises(ValueError, match=r"^seed="):
        ph.grid_specs(plan, -1, tc)
    assert ph.grid_specs(plan, 2**62 - 3, tc)[-1].seed == 2**62 - 1  # the last seed still fits
    with pytest.raises(ValueError, match=r"^seed="):
        ph.grid_specs(plan, 2**62 - 2, tc)
    cells = [ph.Cell(2, d, L, 0.1, 1e-3, 1.0) for d in range(1, 11) for L in range(2, 22)]  # 200 cells
    with pytest.raises(ValueError, match=r"^seeds="):
        ph.grid_specs(dict.fromkeys(cells, 256), 0, tc)  # 51,200 runs: more than MAX_RUNS
    at_most = {**dict.fromkeys(cells[:195], 256), cells[195]: 80}  # 195 * 256 + 80 = MAX_RUNS exactly
    assert len(ph.grid_specs(at_most, 0, tc)) == ph.MAX_RUNS == 50_000
    with pytest.raises(ValueError, match=r"^seeds="):
        ph.grid_specs({**at_most, cells[196]: 1}, 0, tc)


def test_the_profiles_rates():
    assert ph.profile_lrs("quick") == ph.LRS["quick"] == (1e-3, 3e-3, 1e-2)
    assert ph.profile_lrs("paper") == ph.LRS["paper"] == (1e-3, 3e-4, 3e-3, 1e-2, 3e-2)
    for profile in ("quick", "paper"):  # the first rate is the paper's (chapter 9's trap sweep shares it)
        assert ph.profile_lrs(profile)[0] == train_config("paper").lr
    assert ph.profile_lrs("paper", [0.01, 0.02]) == [0.01, 0.02] and ph.profile_lrs("quick", (5e-3,)) == (5e-3,)
    with pytest.raises(ValueError, match=r"^profile="):
        ph.profile_lrs("fast")


# ------------------------------------------------------------------------------------ outcomes
def _circuits(omega, mu, d, off=0.0, gen=None):
    """KQ (H, D, D) with omega_h I_d plus ``off`` noise and OV (H, 1, D) with mu_h in the label slot."""
    H, D = len(omega), d + 1
    KQ = torch.zeros(H, D, D, dtype=torch.float64)
    OV = torch.zeros(H, 1, D, dtype=torch.float64)
    for h in range(H):
        KQ[h, :d, :d] = omega[h] * torch.eye(d, dtype=torch.float64)
        OV[h, 0, d] = mu[h]
    if off:
        KQ = KQ + off * torch.randn(H, D, D, generator=gen, dtype=torch.float64)
        OV = OV + off * torch.randn(H, 1, D, generator=gen, dtype=torch.float64)
    return KQ, OV


def _expected(KQ, OV, d):
    """The outcome by summarize_pattern, one snapshot at a time (the direct loop)."""
    p = summarize_pattern(KQ, OV, d)
    if not (p.kq_offdiag < SHAPE_TOL and p.ov_offlast < SHAPE_TOL):
        return "unformed", p.n_dummy
    return p.kind, p.n_dummy


def test_outcome_codes_agree_with_summarize_pattern_snapshot_by_snapshot(gen):
    d = 4
    snaps = [_circuits([0.2, -0.2], [2.0, -2.0], d), _circuits([0.2, 0.3], [2.0, 1.0], d),
             _circuits([0.2, -0.2, 0.01], [2.0, -2.0, 0.01], d), _circuits([0.3], [1.0], d)]
    for H in (1, 2, 3, 5):
        for scale in (0.01, 0.05, 0.1, 0.3, 1.0):
            w = torch.randn(H, generator=gen, dtype=torch.float64).tolist()
            snaps.append(_circuits(w, [x * 3 for x in w], d, off=scale * 0.3, gen=gen))
    seen = set()
    for KQ, OV in snaps:
        out, dummies = outcome_codes(KQ[None].repeat(2, 1, 1, 1), OV[None].repeat(2, 1, 1, 1), d)
        want = _expected(KQ, OV, d)
        assert (out[0], int(dummies[0])) == want and out[1] == out[0]
        seen.add(want[0])
    assert seen == set(OUTCOMES)  # every outcome was met
    KQ, OV = _circuits([0.2, -0.2, 0.01], [2.0, -2.0, 0.01], d)
    out, dummies = outcome_codes(KQ[None], OV[None], d)
    assert out.tolist() == ["pos/neg"] and dummies.tolist() == [1]


def _run(cell, snaps, steps, seed=0):
    """A Run whose history holds the circuits ``snaps`` at ``steps``."""
    KQ = torch.stack([k for k, _ in snaps]).float()
    OV = torch.stack([o for _, o in snaps]).float()
    spec = RunSpec(data=cell.data(), model=ModelConfig(heads=cell.H, init_scale=cell.init_scale),
                   train=TrainConfig(steps=steps[-1], lr=cell.lr, n_log=4, val_size=64), seed=seed)
    T = len(steps)
    hist = {"step": torch.tensor(steps), "train_loss": torch.zeros(T), "val_loss": torch.zeros(T), "KQ": KQ, "OV": OV}
    return Run(spec=spec, params={}, history=hist)


def test_run_record_outcome_rate_and_the_step_from_which_the_pattern_stays(gen):
    d = 4
    cell = ph.Cell(2, d, 16, 0.1, 1e-2, 1.0)
    noise = _circuits([0.1, 0.1], [0.1, 0.1], d, off=1.0, gen=gen)
    pn = _circuits([0.2, -0.25], [2.0, -1.5], d)
    ss = _circuits([0.2, 0.25], [2.0, 1.5], d)
    r = _run(cell, [noise, pn, ss, pn, pn], [0, 10, 20, 30, 40])
    rec = run_record(r, cell)
    assert rec["outcome"] == "pos/neg" and rec["t_pattern"] == 30 and rec["dummy heads"] == 0
    assert rec["eta"] == pytest.approx(0.2 * 2.0 + 0.25 * 1.5, rel=1e-6)  # sum_h mu_h omega_h
    assert rec["eta/eta*-1"] == pytest.approx(rec["eta"] / optimal_eta_debiased(d, 16, 0.1) - 1)
    assert (rec["H"], rec["lr"], rec["seed"], rec["steps"]) == (2, 1e-2, 0, 40)
    trapped = run_record(_run(cell, [noise, pn, ss], [0, 10, 20]), cell)
    assert trapped["outcome"] == "single-sign" and trapped["t_pattern"] is None
    one = ph.Cell(1, d, 16, 0.1, 1e-2, 1.0)
    single = run_record(_run(one, [_circuits([0.1], [0.1], d, off=1.0, gen=gen), _circuits([0.5], [1.0], d)],
                             [0, 5]), one)
    assert single["outcome"] == "single-head" and single["t_pattern"] == 5


def test_outcomes_at_time_reads_the_snapshot_at_an_equal_product_of_rate_and_steps(gen):
    d = 4
    noise = _circuits([0.1, 0.1], [0.1, 0.1], d, off=1.0, gen=gen)
    pn = _circuits([0.2, -0.25], [2.0, -1.5], d)
    fast, slow = ph.Cell(2, d, 16, 0.1, 1e-2, 1.0), ph.Cell(2, d, 16, 0.1, 1e-3, 1.0)
    runs = {fast: [_run(fast, [noise, pn, pn], [0, 10, 100])], slow: [_run(slow, [noise, noise, pn], [0, 10, 100])]}
    at = outcomes_at_time(runs, 0.1)  # lr 1e-2: step 10; lr 1e-3: step 100
    assert at["step"].tolist() == [10, 100] and at["outcome"].tolist() == ["pos/neg", "pos/neg"]
    early = outcomes_at_time(runs, 0.05)  # lr 1e-2: step 5 -> the snapshot at 0; lr 1e-3: step 50 -> 10
    assert early["step"].tolist() == [0, 10] and early["outcome"].tolist() == ["unformed", "unformed"]


# ------------------------------------------------------------------------------------ training and losses
def test_train_grid_returns_each_cells_runs_in_seed_order_and_losses_match_a_direct_monte_carlo():
    plan = {ph.Cell(3, 3, 6, 0.1, 1e-2, 1.0): 2, ph.Cell(1, 3, 6, 0.1, 1e-2, 0.5): 1,
            ph.Cell(2, 3, 8, 0.2, 3e-3, 1.0): 2}
    tc = TrainConfig(steps=15, batch=16, n_log=4, val_size=64)
    runs = ph.train_grid(plan, 4, tc, device="cpu")
    assert list(runs) == list(plan)
    for c, rs in runs.items():
        assert [r.spec.seed for r in rs] == [4 + k for k in range(plan[c])]  # the cell's seeds, in order
        assert all((r.spec.model.heads, r.spec.train.lr, r.spec.model.init_scale, r.spec.data.d, r.spec.data.L,
                    r.spec.data.sigma2, r.spec.train.steps) == (c.H, c.lr, c.init_scale, c.d, c.L, c.sigma2, 15)
                   for r in rs)
        assert all(r.history["KQ"].shape[1] == c.H for r in rs)  # the trained model has the cell's heads
    models = model_table(runs)
    assert len(models) == 5 and models["H"].tolist() == [3, 3, 1, 2, 2]
    assert models["seed"].tolist() == [4, 5, 4, 4, 5]
    out = attach_losses(models, runs, n=500, seed=3)
    for k, (c, r) in enumerate([(c, r) for c, rs in runs.items() for r in rs]):
        eta = optimal_eta_debiased(c.d, c.L, c.sigma2)
        dgd, _ = mc_risk(lambda b: debiased_gd_predict(b, eta), c.data(), n=500,
                         seed=derive_seed(3, "phase-test", c.d, c.L), chunk=1000)
        row = out.iloc[k]
        assert row["loss"] - row["dGD diff"] == pytest.approx(dgd, rel=1e-9)
        assert row["R_dGD*"] == pytest.approx(debiased_gd_risk(eta, c.d, c.L, c.sigma2))
        assert row["excess/R_dGD*"] == pytest.approx(row["dGD diff"] / row["R_dGD*"])
        assert 0 < row["R_Bayes"] < row["R_dGD*"]
    with pytest.raises(ValueError, match=r"^models="):
        attach_losses(models.iloc[:3], runs, n=500, seed=3)


# ------------------------------------------------------------------------------------ statistics
def test_censored_median_is_the_order_statistic_interval_with_censored_seeds_last():
    t = [30, 10, None, 20, 50, 40, None, 60]
    e = censored_median_ci(t)
    a = sorted(x for x in t if x is not None) + [math.inf, math.inf]
    assert e.value == (a[3] + a[4]) / 2 == 45.0
    assert (e.lo, e.hi) == (10.0, math.inf)  # n = 8: [x_(1), x_(8)]
    assert censored_median_ci([float("nan"), 5.0, 7.0]).value == 7.0  # nan: pandas' None
    full = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.0]
    assert censored_median_ci(full) == median_ci(full)
    assert censored_median_ci([None] * 5 + [1.0]).value == math.inf
    with pytest.raises(ValueError, match=r"^times="):
        censored_median_ci([])


def _cells_of(values_by_cell):
    """Model rows: one cell (d = 2 + index) per list of values of column ``x``."""
    return pd.DataFrame([{"H": 2, "d": 2 + j, "L": 40, "sigma2": 0.1, "lr": 3e-3, "init_scale": 1.0, "x": v}
                         for j, vs in enumerate(values_by_cell) for v in vs])


def test_worst_cell_is_bonferroni_over_the_cells_t_intervals_and_decides_with_below():
    cells = [[0.01, 0.02, 0.00, 0.015], [-0.02, -0.03, -0.01], [0.05, 0.06]]
    e = worst_cell(_cells_of(cells), "x", min_runs=2)
    m = len(cells)  # the direct computation: every cell at level 1 - 0.05 / m
    lo, hi = [], []
    for vs in cells:
        x = np.asarray(vs)
        half = sps.t.ppf(1 - 0.05 / (2 * m), len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
        lo.append(x.mean() - half)
        hi.append(x.mean() + half)
    near = [0.0 if a <= 0 <= b else min(abs(a), abs(b)) for a, b in zip(lo, hi)]
    far = [max(abs(a), abs(b)) for a, b in zip(lo, hi)]
    assert (e.value, e.lo, e.hi) == pytest.approx((0.055, max(near), max(far)))
    tight = [[0.01, 0.011, 0.009], [-0.02, -0.021, -0.019]]
    assert Below(0.1).decide(*worst_cell(_cells_of(tight), "x", min_runs=2).interval) == "PASS"
    beyond = tight + [[-0.2, -0.21, -0.19]]  # one cell surely beyond 0.1
    assert Below(0.1).decide(*worst_cell(_cells_of(beyond), "x", min_runs=2).interval) == "FAIL"
    unsure = tight + [[0.05, 0.15]]  # two seeds straddling 0.1
    assert Below(0.1).decide(*worst_cell(_cells_of(unsure), "x", min_runs=2).interval) == "INCONCLUSIVE"
    assert worst_cell(_cells_of([[0.3]]), "x", min_runs=2) is UNDECIDED  # a cell of one run is left out
    # by default a cell needs MIN_CELL_RUNS runs: the cells of 2 and 3 runs above are left out
    assert MIN_CELL_RUNS == 4 and worst_cell(_cells_of(cells), "x").value == pytest.approx(0.01125)
    assert worst_cell(_cells_of(tight), "x") is UNDECIDED


def test_worst_cell_where_names_the_cell_farthest_from_zero():
    cells = [[0.01, 0.02, 0.00, 0.015], [-0.02, -0.03, -0.01], [0.05, 0.06]]
    where = worst_cell_where(_cells_of(cells), "x", min_runs=2)
    assert where["d"] == 4 and where["runs"] == 2 and where["mean"] == pytest.approx(0.055)
    assert where["cell"] == "H = 2, d = 4, L = 40, sigma^2 = 0.1, Adam rate 0.003, initial scale 1"
    assert worst_cell_where(_cells_of([[-0.5, -0.4, -0.6], [0.3, 0.2, 0.4]]), "x", min_runs=2)["d"] == 2
    assert worst_cell_where(_cells_of(cells), "x")["d"] == 2  # only the cell of four runs counts
    assert worst_cell_where(_cells_of([[0.3]]), "x", min_runs=2) == {}


def test_slopes_against_numpy_and_the_t_formula(gen):
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    y = 0.7 * x + np.array([0.1, -0.2, 0.05, 0.15, -0.1, 0.0])
    e = linear_slope(x, y)
    b, a = np.polyfit(x, y, 1)
    resid = y - (a + b * x)
    se = math.sqrt((resid ** 2).sum() / (len(x) - 2) / ((x - x.mean()) ** 2).sum())
    t = sps.t.ppf(0.975, len(x) - 2)
    assert (e.value, e.lo, e.hi) == pytest.approx((b, b - t * se, b + t * se))
    p = loglog_slope([2, 4, 8, 16], [3 * 2 ** -1.5, 3 * 4 ** -1.5, 3 * 8 ** -1.5, 3 * 16 ** -1.5])
    assert p.value == pytest.approx(-1.5) and p.hi - p.lo < 1e-9
    assert math.isinf(linear_slope([1, 1, 1], [1, 2, 3]).hi) and math.isinf(linear_slope([1, 2], [1, 2]).lo)
    with pytest.raises(ValueError, match=r"^y="):
        loglog_slope([1, 2, 3], [1, 0, 2])


# ------------------------------------------------------------------------------------ tables
def _row(d, L, k, outcome, eta, eta_star, t, dummies=0):
    return {"H": 2, "d": d, "L": L, "sigma2": 0.1, "lr": 3e-3, "init_scale": 1.0, "seed": k, "outcome": outcome,
            "dummy heads": dummies, "eta": eta, "eta*": eta_star, "eta/eta*-1": eta / eta_star - 1,
            "t_pattern": t, "steps": 100}


def _models():
    rows = []
    outcomes = ["pos/neg"] * 5 + ["single-sign", "unformed", "pos/neg"]
    for k, o in enumerate(outcomes):
        rows.append(_row(5, 40, k, o, 0.85 + 0.01 * k, 0.879, 10 * (k + 1) if o == "pos/neg" else None))
    for k in range(3):
        rows.append(_row(10, 40, k, "pos/neg", 0.78 + 0.004 * k * k, 0.784, 50, dummies=1))
    for k, o in enumerate(["single-sign", "pos/neg", "single-sign"]):  # one pos/neg run only
        rows.append(_row(3, 24, k, o, 0.8 + 0.02 * k, 0.85, 30 if o == "pos/neg" else None))
    for k in range(2):  # no pos/neg run
        rows.append(_row(2, 24, k, "unformed", 0.5, 0.9, None))
    return pd.DataFrame(rows)


def _t_interval(x, level=0.95):
    """The mean and Student's t interval, by scipy."""
    x = np.asarray(x, dtype=float)
    lo, hi = sps.t.interval(level, len(x) - 1, loc=x.mean(), scale=sps.sem(x))
    return x.mean(), lo, hi


def test_cell_table_counts_fractions_and_means_per_cell():
    models = _models()
    cells = cell_table(models)
    assert len(cells) == 4 and "excess/R_dGD*" not in cells
    c = cells.iloc[0]
    assert (c["seeds"], c["k pos/neg"], c["k single-sign"], c["k unformed"], c["k single-head"]) == (8, 6, 1, 1, 0)
    assert c["pos/neg"] == proportion_ci(6, 8) and c["single-sign"] == proportion_ci(1, 8)
    assert c["single-head"] == proportion_ci(0, 8) and c["unformed"] == proportion_ci(1, 8)
    pn = models.iloc[[0, 1, 2, 3, 4, 7]]
    assert c["eta/eta*-1"] == mean_ci(pn["eta/eta*-1"]) and c["pos/neg seeds"] == 6
    e = c["eta/eta*-1"]
    assert (e.value, e.lo, e.hi) == pytest.approx(_t_interval(pn["eta/eta*-1"]))
    assert c["eta all"] == pytest.approx(np.median(models["eta"].iloc[:8])) and c["eta*"] == 0.879
    assert c["t_pattern"] == censored_median_ci([10, 20, 30, 40, 50, None, None, 80])
    c = cells.iloc[1]
    assert c["with dummy"] == 3 and c["eta*"] == 0.784 and cells.iloc[0]["with dummy"] == 0
    assert (c["eta/eta*-1"].value, c["eta/eta*-1"].lo, c["eta/eta*-1"].hi) == \
        pytest.approx(_t_interval(models["eta/eta*-1"].iloc[8:11]))
    one = cells.iloc[2]  # one pos/neg run: its value, an unbounded interval
    assert (one["d"], one["L"], one["pos/neg seeds"]) == (3, 24, 1)
    assert one["eta/eta*-1"].value == pytest.approx(0.82 / 0.85 - 1)
    assert (one["eta/eta*-1"].lo, one["eta/eta*-1"].hi) == (-math.inf, math.inf)
    none = cells.iloc[3]
    assert none["pos/neg seeds"] == 0 and math.isnan(none["eta/eta*-1"].value)
    assert (none["eta/eta*-1"].lo, none["eta/eta*-1"].hi) == (-math.inf, math.inf)
    at90 = cell_table(models, level=0.9).iloc[0]
    assert at90["eta/eta*-1"] == mean_ci(pn["eta/eta*-1"], 0.9) and at90["pos/neg"] == proportion_ci(6, 8, 0.9)


def test_cell_table_means_the_excess_loss_over_the_pos_neg_runs():
    models = _models()
    models["excess/R_dGD*"] = 0.01 * np.arange(len(models)) ** 1.5
    models["loss/R_Bayes"] = 1.0 + 0.1 * np.arange(len(models)) ** 2
    cells = cell_table(models)
    c = cells.iloc[0]
    pn = models.iloc[[0, 1, 2, 3, 4, 7]]
    assert c["excess/R_dGD*"] == mean_ci(pn["excess/R_dGD*"])
    assert (c["excess/R_dGD*"].value, c["excess/R_dGD*"].lo, c["excess/R_dGD*"].hi) == \
        pytest.approx(_t_interval(pn["excess/R_dGD*"]))
    assert c["loss/R_Bayes"] == pytest.approx(np.median(models["loss/R_Bayes"].iloc[:8]))  # over all seeds
    one = cells.iloc[2]
    assert one["excess/R_dGD*"].value == pytest.approx(models["excess/R_dGD*"].iloc[12])
    assert (one["excess/R_dGD*"].lo, one["excess/R_dGD*"].hi) == (-math.inf, math.inf)


def test_along_picks_one_line_through_the_centre():
    m = pd.DataFrame([{"H": H, "d": d, "L": L, "sigma2": 0.1, "lr": 3e-3, "init_scale": 1.0}
                      for H, d, L in [(2, 5, 40), (2, 10, 40), (2, 5, 80), (2, 10, 80), (3, 10, 40), (2, 3, 24)]])
    c = {"H": 1, "d": 5, "L": 40, "sigma2": 0.1, "lr": 3e-3, "init_scale": 1.0}
    assert along(m, c, "d", H=2).index.tolist() == [0, 1]
    assert along(m, c, "L", H=2).index.tolist() == [0, 2]
    assert along(m, c, "d/L", H=2).index.tolist() == [0, 3, 5]
    assert along(m, c, "H").index.tolist() == [0]  # H varies, the centre's d and L hold
    with pytest.raises(ValueError, match=r"^axis="):
        along(m, c, "rho")


along = phase_outcomes.along


def test_time_scaling_fits_the_power_law_of_the_runs_that_reached_the_pattern():
    m = pd.DataFrame({"d": [2, 2, 4, 4, 8, 8, 8], "t_pattern": [8.0, 8.0, 32.0, 32.0, 128.0, 128.0, None]})
    fit = time_scaling(m, "d")
    assert fit["slope"].value == pytest.approx(2.0) and fit["intercept"] == pytest.approx(math.log(2.0))
    assert (fit["reached"], fit["censored"]) == (6, 1)
    none = time_scaling(pd.DataFrame({"d": [2, 4], "t_pattern": [None, None]}), "d")
    assert math.isnan(none["slope"].value) and math.isnan(none["intercept"])


def test_projected_seconds_scales_each_run_by_the_numbers_it_draws():
    tc = TrainConfig(steps=1000)
    specs = [RunSpec(data=DataConfig(d=5, L=40)), RunSpec(data=DataConfig(d=10, L=80)),
             RunSpec(data=DataConfig(d=3, L=24), train=tc)]
    want = (3000 + 3000 * 81 * 11 / 246 + 1000 * 25 * 4 / 246) / 100.0
    assert ph.projected_seconds(specs, 100.0) == pytest.approx(want)
    with pytest.raises(ValueError, match=r"^rate="):
        ph.projected_seconds(specs, 0)


# ------------------------------------------------------------------------------------ comparisons for the claims
def _grid_models():
    """Runs of a small grid: the head axis at the centre (H = 1, 2, 3; 6 seeds), and for H = 2 two
    other rates and two other lengths at d = 8, with known outcomes."""
    rows = []

    def add(H, d, L, lr, outcomes, t=100):
        for k, o in enumerate(outcomes):
            rows.append({**_row(d, L, k, o, 0.8, 0.85, t * (k + 1) if o in ("pos/neg", "single-head") else None),
                         "H": H, "lr": lr})

    add(1, 5, 40, 3e-3, ["single-head"] * 6)
    add(2, 5, 40, 3e-3, ["single-sign"] * 2 + ["pos/neg"] * 4)
    add(3, 5, 40, 3e-3, ["pos/neg"] * 5 + ["single-sign"])
    add(2, 5, 40, 1e-3, ["single-sign"] * 3 + ["pos/neg"], t=300)
    add(2, 5, 40, 1e-2, ["pos/neg"] * 4, t=30)
    add(2, 8, 16, 3e-3, ["pos/neg"] * 3)
    add(2, 8, 32, 3e-3, ["pos/neg"] * 3)
    return pd.DataFrame(rows)


CENTRE = {"H": 1, "d": 5, "L": 40, "sigma2": 0.1, "lr": 3e-3, "init_scale": 1.0}


def test_the_trap_comparisons_count_the_right_cells():
    cells = cell_table(_grid_models())
    assert trap_vs_heads(cells, CENTRE) == fraction_diff(2, 6, 1, 6)  # H = 2 against H = 3 at the centre
    assert trap_vs_lr(cells, CENTRE) == fraction_diff(0, 4, 3, 4)  # lr 1e-2 minus lr 1e-3
    one_rate = cells[np.isclose(cells["lr"], 3e-3)]
    assert trap_vs_lr(one_rate, CENTRE) is UNDECIDED
    assert trap_vs_heads(cells[cells["H"] <= 2], CENTRE) is UNDECIDED


def test_time_panels_are_the_rate_line_and_each_dimension_with_several_lengths():
    models = _grid_models()
    panels = time_panels(models, CENTRE)
    assert list(panels) == ["lr", "L (d = 8)"]
    assert sorted(panels["lr"]["lr"].unique()) == [1e-3, 3e-3, 1e-2] and set(panels["lr"]["H"]) == {2}
    assert len(panels["lr"]) == 6 + 4 + 4 and sorted(panels["L (d = 8)"]["L"].unique()) == [16, 32]
    fit = time_scaling(panels["L (d = 8)"], "L")
    assert fit["slope"].value == pytest.approx(0.0, abs=1e-12)  # the same times at both lengths


def test_display_tables_keep_every_cell_and_format_estimates():
    cells = cell_table(_grid_models())
    out = outcome_table(cells)
    assert list(out.columns) == ["H", "d", "L", "sigma2", "lr", "init", "seeds", "pos/neg", "trap", "1 head",
                                 "unformed", "dummy"]
    assert out["trap"].tolist() == cells["k single-sign"].tolist() and len(out) == len(cells) == 7
    rates = rate_table(cells)
    assert "eta/eta*-1" in rates and "t_pattern" in rates and "excess/R_dGD*" not in rates
    assert rates["t_pattern"].iloc[0] == format(cells["t_pattern"].iloc[0], ".3g")
