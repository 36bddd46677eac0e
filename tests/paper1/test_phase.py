"""Chapter 9's grid (icl_lib.paper1.phase): cells and specs, outcomes against summarize_pattern, the
time to the pattern, losses against a direct Monte Carlo, and the statistics against direct
computations and published values."""

import math

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats as sps

from icl_lib import DataConfig
from icl_lib.circuits import summarize_pattern
from icl_lib.claims import Below
from icl_lib.config import ModelConfig, RunSpec, TrainConfig
from icl_lib.engine import Run
from icl_lib.estimators import debiased_gd_predict, debiased_gd_risk, mc_risk, optimal_eta_debiased
from icl_lib.paper1 import phase as ph
from icl_lib.seeding import derive_seed
from icl_lib.stats import Estimate, median_ci, proportion_ci

GRID = dict(heads=[1, 2, 3], ds=[4, 2, 8], Ls=[32, 16, 20], sigma2s=[0.1, 0.3], lrs=[3e-3, 1e-2], init_scales=[1.0, 0.5])


def test_the_grid_validates_every_axis_by_its_name():
    for name, bad in [("heads", [0]), ("heads", []), ("ds", ["x"]), ("ds", [17]), ("Ls", [1]), ("sigma2s", [-0.1]),
                      ("sigma2s", [math.nan]), ("lrs", [0.0]), ("lrs", [0.2]), ("init_scales", [0.0]),
                      ("init_scales", "x"), ("heads", [1, 1]), ("ds", list(range(1, 10)))]:
        with pytest.raises(ValueError, match=rf"^{name}(\[\d+\])?="):
            ph.PhaseGrid(**{**GRID, name: bad})
    g = ph.PhaseGrid(**{**GRID, "lrs": "[0.003, 0.01]"})  # papermill's text of a list
    assert g.lrs == (0.003, 0.01)
    assert g.centre == {"H": 1, "d": 4, "L": 32, "sigma2": 0.1, "lr": 3e-3, "init_scale": 1.0}


def test_full_is_the_cartesian_product_with_h_slowest():
    cells = ph.PhaseGrid(**GRID).full()
    assert len(cells) == 3 * 3 * 3 * 2 * 2 * 2 and len(set(cells)) == len(cells)
    assert cells[0] == ph.Cell(1, 4, 32, 0.1, 3e-3, 1.0) and cells[-1] == ph.Cell(3, 8, 20, 0.3, 1e-2, 0.5)
    assert [c.H for c in cells[:72]] == [1] * 72


def test_the_quick_slice_is_every_head_count_at_the_centre_then_one_axis_at_a_time():
    g = ph.PhaseGrid(**GRID)
    c = ph.Cell(2, 4, 32, 0.1, 3e-3, 1.0)
    want = [ph.Cell(1, 4, 32, 0.1, 3e-3, 1.0), c, ph.Cell(3, 4, 32, 0.1, 3e-3, 1.0),
            ph.Cell(2, 2, 32, 0.1, 3e-3, 1.0), ph.Cell(2, 8, 32, 0.1, 3e-3, 1.0),  # d at L0
            ph.Cell(2, 4, 16, 0.1, 3e-3, 1.0), ph.Cell(2, 4, 20, 0.1, 3e-3, 1.0),  # L at d0
            ph.Cell(2, 2, 16, 0.1, 3e-3, 1.0),  # d/L = 4/32: only (2, 16) of the lists' pairs
            ph.Cell(2, 4, 32, 0.3, 3e-3, 1.0), ph.Cell(2, 4, 32, 0.1, 1e-2, 1.0), ph.Cell(2, 4, 32, 0.1, 3e-3, 0.5)]
    assert g.quick_slice(2) == want
    assert g.cells("quick", 2) == want and g.cells("paper") == g.full()
    assert [x.H for x in g.quick_slice(3)[3:]] == [3] * 8
    with pytest.raises(ValueError, match=r"^trap_heads="):
        g.quick_slice(4)
    one = ph.PhaseGrid([2], [5], [40], [0.1], [3e-3], [1.0])
    assert one.quick_slice(2) == one.full() == [ph.Cell(2, 5, 40, 0.1, 3e-3, 1.0)]


def test_eta_star_is_theorem_4_2_ii():
    c = ph.Cell(2, 5, 40, 0.1, 3e-3, 1.0)
    assert c.eta_star == pytest.approx(1 / (1 + 1.1 * 5 / 40)) == pytest.approx(0.8791, abs=1e-4)
    assert c.data() == DataConfig(d=5, L=40, sigma2=0.1)


def test_grid_specs_one_run_per_cell_and_seed_with_the_cells_rate_and_scale():
    cells = [ph.Cell(2, 4, 16, 0.1, 1e-2, 0.5), ph.Cell(3, 5, 20, 0.2, 3e-3, 1.0)]
    tc = TrainConfig(steps=30, n_log=4, val_size=64)
    specs = ph.grid_specs(cells, 2, 7, tc)
    assert [(s.model.heads, s.seed, s.train.lr, s.model.init_scale, s.data.d, s.data.L, s.data.sigma2)
            for s in specs] == [(2, 7, 1e-2, 0.5, 4, 16, 0.1), (2, 8, 1e-2, 0.5, 4, 16, 0.1),
                                (3, 7, 3e-3, 1.0, 5, 20, 0.2), (3, 8, 3e-3, 1.0, 5, 20, 0.2)]
    assert all(s.train.steps == 30 and s.train.val_size == 64 for s in specs)
    with pytest.raises(ValueError, match=r"^seeds="):
        ph.grid_specs(cells, 0, 0, tc)
    with pytest.raises(ValueError, match=r"^seeds="):
        ph.grid_specs(cells * 200, 256, 0, tc)  # more than MAX_RUNS runs


def test_train_configuration_and_seeds_by_profile():
    q, p = ph.phase_train_config("quick"), ph.phase_train_config("paper")
    assert (q.steps, q.batch, q.val_size, q.optimizer) == (ph.QUICK_STEPS, 256, 512, "adam")
    assert (p.steps, p.batch, p.lr) == (500_000, 256, 1e-3)
    assert ph.phase_train_config("quick", 77).steps == 77
    assert ph.phase_seeds("quick") == 8 and ph.phase_seeds("paper") == 16 and ph.phase_seeds("paper", 3) == 3
    with pytest.raises(ValueError, match=r"^seeds="):
        ph.phase_seeds("quick", 0)


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
    if not (p.kq_offdiag < ph.SHAPE_TOL and p.ov_offlast < ph.SHAPE_TOL):
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
        out, dummies = ph.outcome_codes(KQ[None].repeat(2, 1, 1, 1), OV[None].repeat(2, 1, 1, 1), d)
        want = _expected(KQ, OV, d)
        assert (out[0], int(dummies[0])) == want and out[1] == out[0]
        seen.add(want[0])
    assert seen == set(ph.OUTCOMES)  # every outcome was met
    KQ, OV = _circuits([0.2, -0.2, 0.01], [2.0, -2.0, 0.01], d)
    out, dummies = ph.outcome_codes(KQ[None], OV[None], d)
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
    rec = ph.run_record(r, cell)
    assert rec["outcome"] == "pos/neg" and rec["t_pattern"] == 30 and rec["dummy heads"] == 0
    assert rec["eta"] == pytest.approx(0.2 * 2.0 + 0.25 * 1.5, rel=1e-6)  # sum_h mu_h omega_h
    assert rec["eta/eta*-1"] == pytest.approx(rec["eta"] / optimal_eta_debiased(d, 16, 0.1) - 1)
    assert (rec["H"], rec["lr"], rec["seed"], rec["steps"]) == (2, 1e-2, 0, 40)
    trapped = ph.run_record(_run(cell, [noise, pn, ss], [0, 10, 20]), cell)
    assert trapped["outcome"] == "single-sign" and trapped["t_pattern"] is None
    one = ph.Cell(1, d, 16, 0.1, 1e-2, 1.0)
    single = ph.run_record(_run(one, [_circuits([0.1], [0.1], d, off=1.0, gen=gen), _circuits([0.5], [1.0], d)],
                                [0, 5]), one)
    assert single["outcome"] == "single-head" and single["t_pattern"] == 5


def test_outcomes_at_time_reads_the_snapshot_at_an_equal_product_of_rate_and_steps(gen):
    d = 4
    noise = _circuits([0.1, 0.1], [0.1, 0.1], d, off=1.0, gen=gen)
    pn = _circuits([0.2, -0.25], [2.0, -1.5], d)
    fast, slow = ph.Cell(2, d, 16, 0.1, 1e-2, 1.0), ph.Cell(2, d, 16, 0.1, 1e-3, 1.0)
    runs = {fast: [_run(fast, [noise, pn, pn], [0, 10, 100])], slow: [_run(slow, [noise, noise, pn], [0, 10, 100])]}
    at = ph.outcomes_at_time(runs, 0.1)  # lr 1e-2: step 10; lr 1e-3: step 100
    assert at["step"].tolist() == [10, 100] and at["outcome"].tolist() == ["pos/neg", "pos/neg"]
    early = ph.outcomes_at_time(runs, 0.05)  # lr 1e-2: step 5 -> the snapshot at 0; lr 1e-3: step 50 -> 10
    assert early["step"].tolist() == [0, 10] and early["outcome"].tolist() == ["unformed", "unformed"]


# ------------------------------------------------------------------------------------ training and losses
def test_train_grid_returns_each_cells_runs_in_seed_order_and_losses_match_a_direct_monte_carlo():
    cells = [ph.Cell(3, 3, 6, 0.1, 1e-2, 1.0), ph.Cell(1, 3, 6, 0.1, 1e-2, 0.5), ph.Cell(2, 3, 8, 0.2, 3e-3, 1.0)]
    tc = TrainConfig(steps=15, batch=16, n_log=4, val_size=64)
    runs = ph.train_grid(cells, 2, 4, tc, device="cpu")
    assert list(runs) == cells
    for c, rs in runs.items():
        assert [r.spec.seed for r in rs] == [4, 5]
        assert all((r.spec.model.heads, r.spec.train.lr, r.spec.model.init_scale, r.spec.data.L) ==
                   (c.H, c.lr, c.init_scale, c.L) for r in rs)
    models = ph.model_table(runs)
    assert len(models) == 6 and models["H"].tolist() == [3, 3, 1, 1, 2, 2]
    out = ph.attach_losses(models, runs, n=500, seed=3)
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
        ph.attach_losses(models.iloc[:3], runs, n=500, seed=3)


# ------------------------------------------------------------------------------------ statistics
def test_censored_median_is_the_order_statistic_interval_with_censored_seeds_last():
    t = [30, 10, None, 20, 50, 40, None, 60]
    e = ph.censored_median_ci(t)
    a = sorted(x for x in t if x is not None) + [math.inf, math.inf]
    assert e.value == (a[3] + a[4]) / 2 == 45.0
    assert (e.lo, e.hi) == (10.0, math.inf)  # n = 8: [x_(1), x_(8)]
    assert ph.censored_median_ci([float("nan"), 5.0, 7.0]).value == 7.0  # nan: pandas' None
    full = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.0]
    assert ph.censored_median_ci(full) == median_ci(full)
    assert ph.censored_median_ci([None] * 5 + [1.0]).value == math.inf
    with pytest.raises(ValueError, match=r"^times="):
        ph.censored_median_ci([])


def test_newcombe_interval_matches_the_published_example_and_the_direct_formula():
    e = ph.newcombe_diff(56, 70, 48, 80)  # Newcombe (1998), Table II, example (a): 0.0524 to 0.3339
    assert e.value == pytest.approx(0.2) and (e.lo, e.hi) == pytest.approx((0.0524, 0.3339), abs=1e-4)
    k1, n1, k2, n2 = 3, 8, 7, 8
    w = lambda k, n: sps.binomtest(k, n).proportion_ci(method="wilson")  # noqa: E731
    l1, u1, l2, u2 = w(k1, n1).low, w(k1, n1).high, w(k2, n2).low, w(k2, n2).high
    p1, p2 = k1 / n1, k2 / n2
    e = ph.newcombe_diff(k1, n1, k2, n2)
    assert e.lo == pytest.approx(p1 - p2 - math.hypot(p1 - l1, u2 - p2))
    assert e.hi == pytest.approx(p1 - p2 + math.hypot(u1 - p1, p2 - l2))
    r = ph.newcombe_diff(k2, n2, k1, n1)
    assert (r.value, r.lo, r.hi) == pytest.approx((-e.value, -e.hi, -e.lo))
    for k in (0, 8):  # defined at the ends
        x = ph.newcombe_diff(k, 8, 0, 8)
        assert -1 <= x.lo <= x.value <= x.hi <= 1


@pytest.mark.parametrize("p1, p2", [(0.5, 0.5), (0.2, 0.6), (0.9, 0.9)])
def test_newcombe_interval_covers_the_true_difference_at_eight_seeds_each(p1, p2):
    """Exact coverage, by enumerating every outcome of two Binomial(8, p) counts."""
    cover = sum(sps.binom.pmf(a, 8, p1) * sps.binom.pmf(b, 8, p2)
                for a in range(9) for b in range(9)
                if (lambda e: e.lo <= p1 - p2 <= e.hi)(ph.newcombe_diff(a, 8, b, 8)))
    assert cover >= 0.93


def test_max_abs_decides_every_cell_with_below():
    inside = [Estimate(0.01, -0.03, 0.04), Estimate(-0.02, -0.06, 0.01)]
    e = ph.max_abs(inside)
    assert (e.value, e.lo, e.hi) == pytest.approx((0.02, 0.0, 0.06))
    assert Below(0.1).decide(e.lo, e.hi) == "PASS"
    out = inside + [Estimate(-0.2, -0.3, -0.12)]  # one cell surely beyond 0.1
    e = ph.max_abs(out)
    assert (e.value, e.lo, e.hi) == pytest.approx((0.2, 0.12, 0.3)) and Below(0.1).decide(e.lo, e.hi) == "FAIL"
    unsure = inside + [Estimate(0.08, 0.02, 0.15)]
    e = ph.max_abs(unsure)
    assert e.lo == pytest.approx(0.02) and Below(0.1).decide(e.lo, e.hi) == "INCONCLUSIVE"
    assert math.isinf(ph.max_abs([]).hi)


def test_slopes_against_numpy_and_the_t_formula(gen):
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    y = 0.7 * x + np.array([0.1, -0.2, 0.05, 0.15, -0.1, 0.0])
    e = ph.linear_slope(x, y)
    b, a = np.polyfit(x, y, 1)
    resid = y - (a + b * x)
    se = math.sqrt((resid ** 2).sum() / (len(x) - 2) / ((x - x.mean()) ** 2).sum())
    t = sps.t.ppf(0.975, len(x) - 2)
    assert (e.value, e.lo, e.hi) == pytest.approx((b, b - t * se, b + t * se))
    p = ph.loglog_slope([2, 4, 8, 16], [3 * 2 ** -1.5, 3 * 4 ** -1.5, 3 * 8 ** -1.5, 3 * 16 ** -1.5])
    assert p.value == pytest.approx(-1.5) and p.hi - p.lo < 1e-9
    assert math.isinf(ph.linear_slope([1, 1, 1], [1, 2, 3]).hi) and math.isinf(ph.linear_slope([1, 2], [1, 2]).lo)
    with pytest.raises(ValueError, match=r"^y="):
        ph.loglog_slope([1, 2, 3], [1, 0, 2])


# ------------------------------------------------------------------------------------ tables
def _models():
    rows = []
    outcomes = ["pos/neg"] * 5 + ["single-sign", "unformed", "pos/neg"]
    for k, o in enumerate(outcomes):
        rows.append({"H": 2, "d": 5, "L": 40, "sigma2": 0.1, "lr": 3e-3, "init_scale": 1.0, "seed": k, "outcome": o,
                     "dummy heads": 0, "eta": 0.85 + 0.01 * k, "eta*": 0.879, "eta/eta*-1": (0.85 + 0.01 * k) / 0.879 - 1,
                     "t_pattern": 10 * (k + 1) if o == "pos/neg" else None, "steps": 100})
    for k in range(3):
        rows.append({"H": 2, "d": 10, "L": 40, "sigma2": 0.1, "lr": 3e-3, "init_scale": 1.0, "seed": k,
                     "outcome": "pos/neg", "dummy heads": 1, "eta": 0.78, "eta*": 0.784, "eta/eta*-1": 0.78 / 0.784 - 1,
                     "t_pattern": 50, "steps": 100})
    return pd.DataFrame(rows)


def test_cell_table_counts_fractions_and_medians_per_cell():
    cells = ph.cell_table(_models())
    assert len(cells) == 2
    c = cells.iloc[0]
    assert (c["seeds"], c["k pos/neg"], c["k single-sign"], c["k unformed"], c["k single-head"]) == (8, 6, 1, 1, 0)
    assert c["pos/neg"] == proportion_ci(6, 8) and c["single-sign"] == proportion_ci(1, 8)
    pn = _models().iloc[[0, 1, 2, 3, 4, 7]]
    assert c["eta/eta*-1"] == median_ci(pn["eta/eta*-1"]) and c["pos/neg seeds"] == 6
    assert c["t_pattern"] == ph.censored_median_ci([10, 20, 30, 40, 50, None, None, 80])
    assert cells.iloc[1]["with dummy"] == 3 and cells.iloc[1]["eta*"] == 0.784


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


along = ph.along


def test_time_scaling_fits_the_power_law_of_the_runs_that_reached_the_pattern():
    m = pd.DataFrame({"d": [2, 2, 4, 4, 8, 8, 8], "t_pattern": [8.0, 8.0, 32.0, 32.0, 128.0, 128.0, None]})
    fit = ph.time_scaling(m, "d")
    assert fit["slope"].value == pytest.approx(2.0) and fit["intercept"] == pytest.approx(math.log(2.0))
    assert (fit["reached"], fit["censored"]) == (6, 1)
    none = ph.time_scaling(pd.DataFrame({"d": [2, 4], "t_pattern": [None, None]}), "d")
    assert math.isnan(none["slope"].value) and math.isnan(none["intercept"])


def test_projected_seconds_scales_each_run_by_the_numbers_it_draws():
    tc = TrainConfig(steps=1000)
    specs = [RunSpec(data=DataConfig(d=5, L=40)), RunSpec(data=DataConfig(d=10, L=80)),
             RunSpec(data=DataConfig(d=3, L=24), train=tc)]
    want = (3000 + 3000 * 81 * 11 / 246 + 1000 * 25 * 4 / 246) / 100.0
    assert ph.projected_seconds(specs, 100.0) == pytest.approx(want)
    with pytest.raises(ValueError, match=r"^rate="):
        ph.projected_seconds(specs, 0)
