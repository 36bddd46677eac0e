"""Chapter 7's parameters and tables (icl_lib.paper1.multitask)."""

import math

import pytest
import torch

from icl_lib import AttentionEnsemble, DataConfig
from icl_lib.config import ModelConfig, RunSpec
from icl_lib.engine import Run
from icl_lib.paper1.multitask.head_modes import (
    classify_mode,
    gamma_off_estimates,
    global_pattern_estimates,
    global_pattern_table,
    mode_estimates,
    mode_history_fractions,
    paper_mode_fractions,
    paper_mode_table,
    per_model_table,
    shared_ratio_estimates,
    shown_seeds,
)
from icl_lib.paper1.multitask.references import (
    check_supports,
    debiased_gd_diag_risk,
    loss_gap_estimates,
    max_bayes_draws,
    max_test_prompts,
    optimal_gamma_shared,
    predicted_shared_ratio,
    shared_and_single,
    support_gamma,
    task_loss_table,
)
from icl_lib.stats import median_ci, proportion_ci
from icl_lib.sampling import sample_chunks
from tests.paper1.multitask_common import (
    DATA,
    SMALL,
    SUPER_MU,
    SUPER_OMEGA,
    _circuits,
    debiased_gd_diag_predict,
    per_task_risk,
)



# ------------------------------------------------------------------------------ chapter 7's parameters and tables
def test_check_supports_names_the_bad_entry():
    assert check_supports([[0, 1, 2, 3], [2, 3, 4, 5]], 6) == ((0, 1, 2, 3), (2, 3, 4, 5))
    assert check_supports(((0,), (0,), (1,)), 2) == ((0,), (0,), (1,))
    for bad, name in [([[0, 1]], "supports"), ([[0]] * 9, "supports"), ("01", "supports"), (3, "supports"),
                      ([[0], []], r"supports\[1\]"), ([[0], [6]], r"supports\[1\]\[0\]"),
                      ([[0], [1, 1]], r"supports\[1\]"), ([[0], [0.5]], r"supports\[1\]\[0\]"),
                      ([[0], 1], r"supports\[1\]")]:
        with pytest.raises(ValueError, match=rf"^{name}=.* is invalid: accepted"):
            check_supports(bad, 6)


def test_monte_carlo_caps_bound_the_work():
    from icl_lib.paper1.multitask.references import BAYES_WORK, TEST_WORK

    # the defaults (L = 40, supports of 4 + 4, heads 1..4 x 6 seeds, D = 8) are far below the caps
    assert max_bayes_draws(40, [[0, 1, 2, 3], [2, 3, 4, 5]]) == BAYES_WORK // (40 * 8) > 1_000_000
    assert max_test_prompts([1, 2, 3, 4], 6, 40, 8) == TEST_WORK // (24 * 4 * 40 * 8) > 200_000
    # L = 512 with 8 tasks of 32 coordinates: 38,146 draws; 16 heads x 32 seeds at L = 512, D = 40: 2,384 prompts
    assert max_bayes_draws(512, [list(range(32))] * 8) == 5 * 10**9 // (512 * 256) == 38_146
    assert max_test_prompts([16], 32, 512, 40) == max(2, 25 * 10**9 // (32 * 16 * 512 * 40)) == 2_384


def test_shared_and_single_coordinates_and_the_predicted_ratio():
    assert shared_and_single(DATA) == ([2, 3], [0, 1, 4, 5])
    assert shared_and_single(SMALL) == ([1], [0, 2, 3])  # the unused coordinate is on neither side
    # a_j = 1/4 + 1/4 on the shared coordinates, 1/4 on the others; gamma_j = L a_j / (L a_j + N (1 + s2))
    want = (40 * 0.5 / (40 * 0.5 + 2 * 1.1)) / (40 * 0.25 / (40 * 0.25 + 2 * 1.1))
    assert predicted_shared_ratio(DATA) == pytest.approx(want, rel=1e-12)
    same = DataConfig(d=3, L=10, supports=[[0, 1, 2], [0, 1, 2]])
    assert shared_and_single(same) == ([0, 1, 2], []) and math.isnan(predicted_shared_ratio(same))


def _run(KQ, OV, seed, history=None):
    """A Run of one hand-built model: K = V = I, Q = sqrt(D) KQ, O = OV (the model whose circuits these are);
    ``history`` is a list of (KQ, OV) at the logged steps 0, 10, 20, ... (default: the final circuits only)."""
    H, D, _ = KQ.shape
    spec = RunSpec(data=DATA, model=ModelConfig(heads=H), seed=seed)
    eye = torch.eye(D, dtype=torch.float64).expand(H, D, D).clone()
    params = {"Q": KQ * math.sqrt(D), "K": eye, "V": eye.clone(), "O": OV.clone()}
    history = history or [(KQ, OV)]
    hist = {"step": torch.arange(len(history)) * 10, "KQ": torch.stack([h[0] for h in history]),
            "OV": torch.stack([h[1] for h in history])}
    return Run(spec=spec, params=params, history=hist)
W = 0.3
KERNEL = _circuits([[2 * W, 2 * W, 3 * W, 3 * W, 2 * W, 2 * W]], [[0.9, 0.9]])
ALLOC = _circuits([[W, W, W, W, 0, 0], [-W, -W, -W, -W, 0, 0], [0, 0, W, W, W, W], [0, 0, -W, -W, -W, -W]],
                  [[2, 0], [-2, 0], [0, 2], [0, -2]])
LEAKY = _circuits([[W] * 6, [-W] * 6, [W] * 6, [-W] * 6], [[2, 0], [-2, 0], [0, 2], [0, -2]])  # "other"
SUPERPOS = _circuits([[W * v for v in om] for om in SUPER_OMEGA], SUPER_MU)


def _sweep():
    """H = 1: two kernel seeds; H = 3: one superposed seed; H = 4: a leaky seed ("other") then an allocated one,
    whose KQ gets a small off-diagonal entry 0.1 W (global pattern ratio 0.1 W / sqrt(sum omega^2))."""
    alloc = (ALLOC[0].clone(), ALLOC[1])
    alloc[0][0, 0, 1] = 0.1 * W
    sweep = {1: [_run(*KERNEL, 5), _run(*KERNEL, 6)], 3: [_run(*SUPERPOS, 5)], 4: [_run(*LEAKY, 5), _run(*alloc, 6)]}
    return sweep, {H: [classify_mode(r.KQ, r.OV, DATA) for r in runs] for H, runs in sweep.items()}


def test_chapter7_mode_tables_on_hand_built_models():
    sweep, modes = _sweep()
    assert [s.mode for H in modes for s in modes[H]] == ["kernel", "kernel", "superposition", "other", "allocated"]
    tab = paper_mode_table(modes, 2)
    assert tab.loc[4, "allocated"] == 1 and tab.loc[4, "other"] == 1 and tab.loc[4, "seeds"] == 2
    assert tab.loc[1, "kernel"] == 2 and list(tab["paper's mode"]) == ["kernel", "superposition", "allocated"]
    frac = paper_mode_fractions(modes, 2)
    assert list(frac.columns) == ["mode", "in mode", "seeds", "fraction"]
    assert frac.loc[4].tolist() == ["allocated", 1, 2, 0.5] and frac.loc[1, "fraction"] == 1.0
    assert shown_seeds(modes, 2) == {1: 0, 3: 0, 4: 1}
    assert shown_seeds(modes, 3) == {1: 0, 3: 0, 4: 0}  # N = 3: H = 3, 4 want superposition; H = 4 has none
    per = per_model_table(sweep, modes)
    assert list(per.index) == [(1, 5), (1, 6), (3, 5), (4, 5), (4, 6)]
    assert per.loc[(4, 6), "heads"] == "+1  |  -1  |  +2  |  -2" and per.loc[(4, 6), "mode"] == "allocated"
    assert per.loc[(1, 5), "shared/single KQ"] == pytest.approx(1.5)
    # leaky: Gamma_n = 4 W on every coordinate, so off/on = 1 for both tasks; allocated: 0
    assert per.loc[(4, 5), "Gamma_1 off/on"] == pytest.approx(1.0) and per.loc[(4, 6), "Gamma_2 off/on"] == 0
    off = gamma_off_estimates(modes)
    assert off[4].value == pytest.approx(0.5) and off[3].value < 1e-12
    assert off[4] == median_ci([max(s.gamma_off_ratio) for s in modes[4]])


def test_global_pattern_table_rows_follow_the_sweep():
    sweep, _ = _sweep()
    gp = global_pattern_table(sweep, DATA)
    assert list(gp.index) == [(1, 5), (1, 6), (3, 5), (4, 5), (4, 6)]
    assert list(gp.columns) == ["KQ off-diagonal", "OV off-pattern"]
    assert gp.drop(index=[(4, 6)]).abs().max().max() < 1e-6  # round-off of the KQ mass off the diagonal
    assert gp.loc[(4, 6), "KQ off-diagonal"] == pytest.approx(0.1 * W / math.sqrt(16 * W * W))
    assert gp.loc[(4, 6), "OV off-pattern"] == 0


def test_task_loss_table_matches_each_model_alone():
    """Each row is that model's loss on the shared prompts, computed here for the model alone."""
    sweep, modes = _sweep()
    tab = task_loss_table(sweep, modes, DATA, n=500, seed=9)
    assert len(tab) == 5 * 2 and list(tab.columns)[:6] == ["H", "seed", "task", "loss", "se", "mode"]
    assert "gap H4" not in tab.columns  # no pair_H
    k = 0
    for H, runs in sweep.items():
        for r, s in zip(runs, modes[H]):
            model = AttentionEnsemble.from_circuits(r.KQ[None], r.OV[None], 6).requires_grad_(False)
            risk, se, _ = per_task_risk(model, DATA, n=500, seed=9)  # (1, N)
            for t in range(2):
                row = tab.iloc[2 * k + t]
                assert (row["H"], row["seed"], row["task"], row["mode"]) == (H, r.spec.seed, t + 1, s.mode)
                assert row["loss"] == pytest.approx(float(risk[0, t]), rel=1e-9)
                assert row["se"] == pytest.approx(float(se[0, t]), rel=1e-9)
            k += 1


def test_task_loss_table_paired_columns_against_a_direct_computation():
    """Each gap is the mean per-prompt difference of squared errors (model minus reference, or minus
    the same seed's H = 4 model) over the reference's closed-form risk, its se that of the
    differences; "prefers shared" is +1 for the shared-weighted debiased GD itself and -1 for the
    all-coordinate one."""
    sweep, modes = _sweep()
    n, seed = 600, 9
    tab = task_loss_table(sweep, modes, DATA, n=n, seed=seed, pair_H=4, chunk=250)
    runs = [r for rs in sweep.values() for r in rs]
    alone = [AttentionEnsemble.from_circuits(r.KQ[None], r.OV[None], 6).requires_grad_(False) for r in runs]
    e = torch.cat([per_task_risk(m, DATA, n=n, seed=seed, chunk=250)[2] for m in alone])  # (5, n, N)
    g_all = [support_gamma(DATA, t, "all") for t in range(2)]
    g_sh = optimal_gamma_shared(DATA)
    b = torch.cat([x.tokens for x in sample_chunks(DATA, n, seed, 250)])
    b = sample_chunks(DATA, n, seed, n).__next__()._replace(tokens=b)
    p_all = torch.stack([debiased_gd_diag_predict(b, t, g_all[t]) for t in range(2)], -1)  # (n, N)
    p_sh = torch.stack([debiased_gd_diag_predict(b, t, g_sh) for t in range(2)], -1)
    with torch.no_grad():
        outs = [torch.cat([m(x)[0] for x in sample_chunks(DATA, n, seed, 250, dtype=m.Q.dtype)]) for m in alone]
    for k, r in enumerate(runs):
        for t in range(2):
            row = tab[(tab.H == r.spec.model.heads) & (tab.seed == r.spec.seed) & (tab.task == t + 1)].iloc[0]
            diff = e[k, :, t] - (p_all[:, t] - b.yq[:, t]) ** 2
            R_all = debiased_gd_diag_risk(g_all[t], DATA, t)
            assert row["gap all"] == pytest.approx(float(diff.mean()) / R_all, rel=1e-6)
            assert row["gap all se"] == pytest.approx(float(diff.std() / math.sqrt(n)) / R_all, rel=1e-6)
            pref = ((outs[k][:, t] - p_all[:, t]) ** 2 - (outs[k][:, t] - p_sh[:, t]) ** 2).mean()
            assert row["prefers shared"] == pytest.approx(float(pref / ((p_sh[:, t] - p_all[:, t]) ** 2).mean()),
                                                          rel=1e-6)
            partner = {5: 3, 6: 4}.get(r.spec.seed)  # the H = 4 run of the same seed
            if r.spec.seed in (5, 6):
                d4 = e[k, :, t] - e[partner, :, t]
                R_sup = debiased_gd_diag_risk(support_gamma(DATA, t, "support"), DATA, t)
                assert row["gap H4"] == pytest.approx(float(d4.mean()) / R_sup, rel=1e-6, abs=1e-12)
    h4 = tab[tab.H == 4]
    assert (h4["gap H4"] == 0).all() and (h4["gap H4 se"] == 0).all()


def test_task_loss_table_prefers_shared_is_plus_one_on_the_reference_itself():
    """A model that is (to first order) the shared-weighted debiased GD prefers it: +1 up to the
    softmax's linearisation error; the all-coordinate one gives about -1."""
    from icl_lib.paper1.multitask.head_modes import classify_mode as cm
    L, s = DATA.L, 1e-3  # omega = s gamma, mu = +-1/s: Gamma_n = gamma up to O(s)
    out = {}
    for name, g in (("shared", optimal_gamma_shared(DATA)), ("all", support_gamma(DATA, 0, "all"))):
        om = [[s * v / 2 for v in g.tolist()], [-s * v / 2 for v in g.tolist()]]
        KQ, OV = _circuits(om, [[1 / s, 1 / s], [-1 / s, -1 / s]])
        run = _run(KQ, OV, 0)
        sweep = {2: [run]}
        tab = task_loss_table(sweep, {2: [cm(run.KQ, run.OV, DATA)]}, DATA, n=4000, seed=1)
        out[name] = tab["prefers shared"].tolist()
    assert out["shared"] == pytest.approx([1, 1], abs=0.1) and out["all"] == pytest.approx([-1, -1], abs=0.1)


def test_chapter7_estimates_are_the_stats_intervals_of_the_tables():
    import pandas as pd
    from icl_lib.stats import largest, seed_median_ci

    sweep, modes = _sweep()
    frac = mode_estimates(modes, 2)
    assert frac[4] == proportion_ci(1, 2) and frac[1] == proportion_ci(2, 2) and frac[3] == proportion_ci(1, 1)
    gp = global_pattern_table(sweep, DATA)
    ge = global_pattern_estimates(gp)
    want = largest({f"H={H}": median_ci(g["KQ off-diagonal"]) for H, g in gp.groupby(level="H")})
    assert ge["KQ off-diagonal"] == want and ge["KQ off-diagonal"].value == pytest.approx(0.1 * W / (4 * W) / 2)
    ratios = shared_ratio_estimates(modes)
    assert set(ratios) == {(1, "mode"), (1, "all")}  # no H = 2 in the sweep
    assert ratios[(1, "mode")] == median_ci([s.shared_ratio for s in modes[1]])
    rows = pd.DataFrame({"H": [2] * 8, "task": [1, 2] * 4, "gap shared": [0.01, 0.02, 0.03, -0.01, 0.0, 0.05, 0.02, 0.0],
                         "gap shared se": [0.001] * 7 + [0.004]})
    rows.loc[8] = [3, 1, 9.0, 0.1]  # another H: left out
    est = loss_gap_estimates(rows, 2, "gap shared")
    assert set(est) == {1, 2}
    assert est[1] == seed_median_ci([0.01, 0.03, 0.0, 0.02], [0.001] * 4)
    assert est[2] == seed_median_ci([0.02, -0.01, 0.05, 0.0], [0.001] * 3 + [0.004])
    assert loss_gap_estimates(rows, 4, "gap shared") == {}


def test_mode_history_fractions_count_the_seeds_in_the_paper_mode():
    gen = torch.Generator().manual_seed(3)
    noise = (torch.randn(4, 8, 8, generator=gen, dtype=torch.float64),
             torch.randn(4, 2, 8, generator=gen, dtype=torch.float64))  # no global pattern: "other"
    sweep = {1: [_run(*KERNEL, 0, [KERNEL, KERNEL, KERNEL])],
             4: [_run(*ALLOC, 0, [noise, ALLOC, ALLOC]), _run(*ALLOC, 1, [noise, noise, ALLOC])]}
    steps, frac, first = mode_history_fractions(sweep, DATA)
    assert steps.tolist() == [0, 10, 20] and first == 10.0
    assert list(frac) == ["H = 1 (kernel)", "H = 4 (allocated)"]
    assert frac["H = 1 (kernel)"].tolist() == [1, 1, 1] and frac["H = 4 (allocated)"].tolist() == [0, 0.5, 1]
    _, _, first = mode_history_fractions({1: sweep[1]}, DATA)
    assert first is None
