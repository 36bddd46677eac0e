"""Chapter 9's grid (icl_lib.paper1.phase_diagram.grid): cells and specs, outcomes against summarize_pattern, the
time to the pattern, losses against a direct Monte Carlo, and the statistics against direct
computations and published values."""

import math
import re

import pytest
import torch

from icl_lib import DataConfig
from icl_lib.circuits import summarize_pattern
from icl_lib.config import ModelConfig, RunSpec, TrainConfig
from icl_lib.engine import Run, train_config
from icl_lib.engine.execution import Execution
from icl_lib.estimators import debiased_gd_predict, debiased_gd_risk, mc_risk, optimal_eta_debiased
from icl_lib.paper1.phase_diagram import grid as ph
from icl_lib.paper1.phase_diagram.outcomes import (
    OUTCOMES,
    SHAPE_TOL,
    attach_losses,
    grid_models,
    outcome_codes,
    outcomes_at_time,
    run_record,
)
from icl_lib.seeding import derive_seed

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
    assert ph.GRID_SEEDS == {"quick": (12, 4), "paper": (64, 64)}
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
    runs = ph.train_grid(plan, 4, tc, Execution.resolve("cpu"))
    assert list(runs) == list(plan)
    for c, rs in runs.items():
        assert [r.spec.seed for r in rs] == [4 + k for k in range(plan[c])]  # the cell's seeds, in order
        assert all((r.spec.model.heads, r.spec.train.lr, r.spec.model.init_scale, r.spec.data.d, r.spec.data.L,
                    r.spec.data.sigma2, r.spec.train.steps) == (c.H, c.lr, c.init_scale, c.d, c.L, c.sigma2, 15)
                   for r in rs)
        assert all(r.history["KQ"].shape[1] == c.H for r in rs)  # the trained model has the cell's heads
    models = grid_models(runs)
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
