"""What every run of chapter 9's grid ended in, per run and per cell, and the chapter's comparisons along its axes.

Every run of :mod:`icl_lib.paper1.phase_diagram.grid`'s grid is read with the rules the book already uses:

* the **outcome** of a run (:data:`OUTCOMES`): the circuit form (3.1) must hold (chapter 2's
  thresholds: the off-diagonal KQ and off-label OV mass below half the diagonal / label mass,
  :func:`~icl_lib.circuits.summarize_pattern`), then :attr:`PatternSummary.kind` decides:
  ``pos/neg`` (heads of both signs), ``single-sign`` (the kernel-regressor trap of H >= 2) or
  ``single-head`` (H = 1); a run whose circuits are not yet of the form (3.1) is ``unformed``.
  Dummy heads (:func:`~icl_lib.circuits.dummy_heads`) are counted besides;
* the learned **effective rate** ``eta = sum_h mu_h omega_h`` (:func:`~icl_lib.circuits.effective_rate`)
  against Theorem 4.2 (ii)'s ``eta*(d, L, sigma^2) = 1 / (1 + (1 + sigma^2) d / L)``
  (:func:`~icl_lib.estimators.optimal_eta_debiased`);
* the **time to the pattern**: the first logged step from which the run stays in its final
  pattern (``pos/neg``, or ``single-head`` for H = 1) to the end
  (:func:`~icl_lib.paper1.dynamics.stage_detection.first_persistent_step` on the run's history);
  ``None`` when it is not in it at the end (censored at the step budget);
* the final **test loss** against debiased GD at ``eta*`` and the Bayes predictor, all on one
  shared test set per task (:func:`~icl_lib.paper1.optimality.predictions.paired_losses`: paired
  errors).

:func:`outcome_codes`, :func:`run_record`, :func:`grid_models`, :func:`outcomes_at_time` and
:func:`attach_losses` give one row per run; :func:`cell_table`, :func:`outcome_counts` and
:func:`rate_estimates` one per cell; :func:`along`, :func:`trap_vs_heads`, :func:`trap_vs_lr`,
:func:`time_panels` and :func:`time_scaling` compare cells along the grid's axes.

Statistics for the chapter's claims, each an :class:`~icl_lib.stats.Estimate`:
:func:`worst_cell` (the worst cell of a grid, Bonferroni over cells; :data:`UNDECIDED` without
one), and from :mod:`icl_lib.stats` :func:`~icl_lib.stats.censored_median_ci` (a median over
seeds some of which never reached the pattern), :func:`~icl_lib.stats.fraction_diff` (a
difference of two fractions of seeds), :func:`~icl_lib.stats.loglog_slope` and
:func:`~icl_lib.stats.linear_slope` (fitted slopes).

Used by chapter 9 (its figures: :mod:`icl_lib.figures.phase`) and by :mod:`icl_lib.paper1.phase_diagram.trap`.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from ...circuits import PATTERNS, SHAPE_TOL, effective_rate, pattern_kinds
from ...config import DataConfig
from ...engine import Run
from ...engine.run import stack_models
from ...estimators import bayes_risk, debiased_gd_predict, debiased_gd_risk, optimal_eta_debiased
from ...seeding import derive_seed
from ...stats import LEVEL, Estimate, censored_median_ci, extreme, fraction_diff, loglog_slope, mean_ci, proportion_ci
from ...validate import check_choice, check_float, check_int, fail
from ..dynamics.stage_detection import first_persistent_step
from ..optimality.predictions import paired_losses
from .grid import AXES, LRS, Cell

__all__ = [
    "OUTCOMES",
    "SHAPE_TOL",
    "outcome_codes",
    "run_record",
    "grid_models",
    "attach_losses",
    "outcomes_at_time",
    "cell_table",
    "along",
    "readable",
    "outcome_counts",
    "rate_estimates",
    "trap_vs_heads",
    "trap_vs_lr",
    "time_panels",
    "time_scaling",
    "worst_cell",
    "paper_scope",
    "PAPER_LR",
    "MIN_LENGTH_RATIO",
    "worst_cell_where",
    "MIN_CELL_RUNS",
    "UNDECIDED",
]

OUTCOMES = PATTERNS  # what a run ends in (icl_lib.circuits.pattern_kinds)
UNDECIDED = Estimate(math.nan, -math.inf, math.inf, LEVEL, "not in this grid")  # a comparison without its cells


# ------------------------------------------------------------------------------------ one run
def outcome_codes(KQ: torch.Tensor, OV: torch.Tensor, d: int, tol: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The outcome and the number of dummy heads of every snapshot of a history ``KQ (T, H, D, D)``,
    ``OV (T, H, N, D)``, computed at once by the book's one definition of the pattern
    (:func:`~icl_lib.circuits.pattern_kinds`).  Returns ``(outcome (T,) of str, dummies (T,) of
    int)``; outcomes are :data:`OUTCOMES`."""
    kinds, live = pattern_kinds(KQ, OV, d, tol)
    return kinds, (~live).sum(-1).numpy()


def run_record(run: Run, cell: Cell) -> dict:
    """One run's row: the cell, the seed, the final outcome and dummy heads, the learned rate
    ``eta`` (:func:`~icl_lib.circuits.effective_rate`) and ``eta / eta* - 1``, and the time to
    the pattern (``None``: censored)."""
    d = run.d
    out, dummies = outcome_codes(run.history["KQ"], run.history["OV"], d)
    final = str(out[-1])
    target = "single-head" if cell.H == 1 else "pos/neg"
    t = first_persistent_step(run.history["step"].numpy(), out == target)
    eta = float(effective_rate(run.KQ.double(), run.OV.double(), d))
    return {**cell.as_dict(), "seed": run.spec.seed, "outcome": final, "dummy heads": int(dummies[-1]),
            "eta": eta, "eta*": cell.eta_star, "eta/eta*-1": eta / cell.eta_star - 1,
            "t_pattern": t, "steps": run.spec.train.steps}


def grid_models(grid_runs: Mapping[Cell, Sequence[Run]]) -> pd.DataFrame:
    """One row per run of a trained grid (:func:`run_record`), cells in order, seeds in order."""
    return pd.DataFrame([run_record(r, c) for c, runs in grid_runs.items() for r in runs])


def outcomes_at_time(grid_runs: Mapping[Cell, Sequence[Run]], time: float) -> pd.DataFrame:
    """Every run's outcome at "Adam time" ``lr * step = time``: at the last logged step at or before
    ``time / lr`` (to compare learning rates at an equal product of rate and steps).  Columns: the
    cell's axes, ``seed``, ``step`` and ``outcome``."""
    time = check_float("time", time, 0.0)
    rows = []
    for c, runs in grid_runs.items():
        for r in runs:
            steps = r.history["step"].numpy()
            k = max(int(np.searchsorted(steps, time / c.lr + 1e-9, side="right")) - 1, 0)
            out, _ = outcome_codes(r.history["KQ"][k:k + 1], r.history["OV"][k:k + 1], r.d)
            rows.append({**c.as_dict(), "seed": r.spec.seed, "step": int(steps[k]), "outcome": str(out[0])})
    return pd.DataFrame(rows)


def attach_losses(models: pd.DataFrame, grid_runs: Mapping[Cell, Sequence[Run]], n: int, seed: int,
                  chunk_models: int = 32) -> pd.DataFrame:
    """``models`` with every run's test loss against debiased GD at ``eta*`` and the Bayes
    predictor (ridge with ``sigma^2 d``) on one shared set of ``n`` test prompts per task
    ``(d, L, sigma^2)`` (paired errors, :func:`~icl_lib.paper1.optimality.predictions.paired_losses`), ``chunk_models``
    models at a time.  Adds ``loss``, ``loss se``, ``dGD diff`` and its ``dGD diff se`` (model minus
    debiased GD on the same prompts), ``excess/R_dGD*`` (that difference over the closed-form
    risk), ``R_dGD*``, ``R_Bayes`` (closed form over designs, :func:`~icl_lib.estimators.bayes_risk`)
    and ``loss/R_Bayes``."""
    n = check_int("n", n, 2)
    by_task: dict[tuple, list[tuple[int, Run, Cell]]] = {}
    k = 0
    for c, runs in grid_runs.items():
        for r in runs:
            by_task.setdefault((c.d, c.L, c.sigma2), []).append((k, r, c))
            k += 1
    if k != len(models):
        fail("models", f"{len(models)} rows", f"one row per run of grid_runs ({k})")
    cols = {name: np.full(k, np.nan) for name in ("loss", "loss se", "dGD diff", "dGD diff se")}
    risks = {}
    for (d, L, s2), items in by_task.items():
        data = DataConfig(d=d, L=L, sigma2=s2)
        eta = optimal_eta_debiased(d, L, s2)
        test_seed = derive_seed(seed, "phase-test", d, L)  # one test set per task, shared by its runs
        for i in range(0, len(items), chunk_models):
            part = items[i:i + chunk_models]
            out = paired_losses(stack_models([r for _, r, _ in part]), data,
                                {"dGD": lambda b: debiased_gd_predict(b, eta)}, n=n, seed=test_seed, chunk=1000)
            for j, (row, _, _) in enumerate(part):
                cols["loss"][row] = out["model"]["loss"][j]
                cols["loss se"][row] = out["model"]["se"][j]
                cols["dGD diff"][row] = out["dGD"]["diff"][j]
                cols["dGD diff se"][row] = out["dGD"]["diff_se"][j]
        r_bayes, _ = bayes_risk(d, L, s2, n=4000, seed=derive_seed(seed, "phase-bayes"))
        risks[(d, L, s2)] = (debiased_gd_risk(eta, d, L, s2), r_bayes)
    out = models.copy()
    for name, v in cols.items():
        out[name] = v
    key = list(zip(out["d"], out["L"], out["sigma2"]))
    out["R_dGD*"] = [risks[t][0] for t in key]
    out["R_Bayes"] = [risks[t][1] for t in key]
    out["excess/R_dGD*"] = out["dGD diff"] / out["R_dGD*"]
    out["loss/R_Bayes"] = out["loss"] / out["R_Bayes"]
    return out


# The fewest runs a cell must have for the every-cell claims to count it: with 2 or 3 runs a t
# interval has 1 or 2 degrees of freedom and, made simultaneous over the cells, cannot decide.
MIN_CELL_RUNS = 4


PAPER_LR = LRS["paper"][0]  # paper 1's Adam rate
MIN_LENGTH_RATIO = 4  # the shortest context (L / d) of the grid's cells at paper 1's scope: half its own 8


def paper_scope(models: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``models`` (one per run, with the grid's axes) at paper 1's scope for Theorem 4.2
    (ii): its Adam rate :data:`PAPER_LR`, and contexts of at least :data:`MIN_LENGTH_RATIO` times
    the dimension ((4.1) and its minimiser eta* are an expansion in d / L; the paper works at
    L = 8 d).  Chapter 9's paper claims read these cells; every cell is the book's own question."""
    return models[(models["lr"] == PAPER_LR) & (models["L"] >= MIN_LENGTH_RATIO * models["d"])]


def worst_cell(models: pd.DataFrame, column: str, level: float = LEVEL, what: str = "",
               min_runs: int = MIN_CELL_RUNS) -> Estimate:
    """The largest ``|mean of column|`` over the cells (runs grouped by
    :data:`~icl_lib.paper1.phase_diagram.grid.AXES`) with at least ``min_runs`` runs, from each cell's mean,
    standard error and ``n - 1`` degrees of freedom, by :func:`~icl_lib.stats.extreme` (``kind="absmax"``):
    Bonferroni-simultaneous t intervals, so the interval holds the true worst cell with probability
    ``level``.  ``Below(t)`` on it passes when every cell's interval lies in ``(-t, t)`` and fails
    when one lies wholly outside.  :data:`UNDECIDED` without such a cell."""
    stats = models.groupby(list(AXES), sort=False)[column].agg(["mean", "std", "count"])
    stats = stats[stats["count"] >= check_int("min_runs", min_runs, 2)]
    if not len(stats):
        return UNDECIDED
    ses = stats["std"] / np.sqrt(stats["count"])
    return extreme(stats["mean"], ses, "absmax", df=stats["count"] - 1, level=level,
                   what=what or f"largest |mean {column}| over {len(stats)} cells")


def worst_cell_where(models: pd.DataFrame, column: str, min_runs: int = MIN_CELL_RUNS) -> dict[str, float]:
    """The cell that :func:`worst_cell` reads: the axes of :data:`~icl_lib.paper1.phase_diagram.grid.AXES` of the
    cell (with at least ``min_runs`` runs) whose ``|mean of column|`` is largest, that ``mean``,
    its ``runs`` and a readable ``cell``; an empty dict without such a cell.  Chapter 9 names it beside the verdict."""
    stats = models.groupby(list(AXES), sort=False)[column].agg(["mean", "count"])
    stats = stats[stats["count"] >= check_int("min_runs", min_runs, 2)]
    if not len(stats):
        return {}
    key = stats["mean"].abs().idxmax()
    cell = dict(zip(AXES, key))
    label = (f"H = {cell['H']:g}, d = {cell['d']:g}, L = {cell['L']:g}, sigma^2 = {cell['sigma2']:g}, "
             f"Adam rate {cell['lr']:g}, initial scale {cell['init_scale']:g}")
    return {**cell, "mean": float(stats.loc[key, "mean"]), "runs": int(stats.loc[key, "count"]), "cell": label}


# ------------------------------------------------------------------------------------ per cell
def _mean(x, level: float) -> Estimate:
    """:func:`~icl_lib.stats.mean_ci` of a cell's values; with fewer than 2 an unbounded interval."""
    x = list(x)
    if len(x) < 2:
        return Estimate(float(x[0]) if x else math.nan, -math.inf, math.inf, level, f"mean of {len(x)}: unbounded")
    return mean_ci(x, level)


def cell_table(models: pd.DataFrame, level: float = LEVEL) -> pd.DataFrame:
    """One row per cell from :func:`grid_models` (and :func:`attach_losses`, if present): the
    number of ``seeds``; for every outcome its count ``k <outcome>``, fraction and Clopper-Pearson
    interval (``<outcome>``, an :class:`~icl_lib.stats.Estimate`); ``with dummy`` (count of runs
    with a dummy head); ``eta/eta*-1`` (mean over the pos/neg runs, t interval; unbounded with
    fewer than 2 such runs) and ``eta all`` (median of ``eta`` over all seeds); ``t_pattern``
    (:func:`~icl_lib.stats.censored_median_ci` over all seeds); and, with losses, ``excess/R_dGD*`` (mean over
    the pos/neg runs, t interval) and ``loss/R_Bayes`` (median over all)."""
    rows = []
    for key, g in models.groupby(list(AXES), sort=False):
        row = dict(zip(AXES, key))
        n = len(g)
        row["seeds"] = n
        for o in OUTCOMES:
            k = int((g["outcome"] == o).sum())
            row[f"k {o}"] = k
            row[o] = proportion_ci(k, n, level)
        row["with dummy"] = int((g["dummy heads"] > 0).sum())
        pn = g[g["outcome"] == "pos/neg"]
        row["pos/neg seeds"] = len(pn)
        row["eta/eta*-1"] = _mean(pn["eta/eta*-1"], level)
        row["eta*"] = float(g["eta*"].iloc[0])
        row["eta all"] = float(g["eta"].median())
        row["t_pattern"] = censored_median_ci(list(g["t_pattern"]), level)
        if "excess/R_dGD*" in g:
            row["excess/R_dGD*"] = _mean(pn["excess/R_dGD*"], level)
            row["loss/R_Bayes"] = float(g["loss/R_Bayes"].median())
        rows.append(row)
    return pd.DataFrame(rows)


def readable(table: pd.DataFrame, spec: str = ".3g") -> pd.DataFrame:
    """A copy of ``table`` for display: every :class:`~icl_lib.stats.Estimate` as ``value [lo, hi]``."""
    return table.apply(lambda col: col.map(lambda v: format(v, spec) if isinstance(v, Estimate) else v))


def along(table: pd.DataFrame, centre: Mapping[str, float], axis: str, H: int | None = None) -> pd.DataFrame:
    """The rows of a model or cell table on one line through ``centre``: ``axis`` varies, every
    other axis of :data:`~icl_lib.paper1.phase_diagram.grid.AXES` equals the centre's (``H`` overrides the centre's head count).
    ``axis="d/L"`` is the proportional line: d and L vary with ``d / L = d0 / L0``."""
    check_choice("axis", axis, (*AXES, "d/L"))
    c = dict(centre, **({} if H is None else {"H": H}))
    free = ("d", "L") if axis == "d/L" else (axis,)
    keep = np.ones(len(table), dtype=bool)
    for a in AXES:
        if a not in free:
            keep &= np.isclose(table[a].to_numpy(dtype=float), float(c[a]))
    if axis == "d/L":
        keep &= table["d"].to_numpy() * c["L"] == table["L"].to_numpy() * c["d"]
    return table[keep]


_SHORT = {"init_scale": "init", "k pos/neg": "pos/neg", "k single-sign": "trap", "k single-head": "1 head",
          "k unformed": "unformed", "with dummy": "dummy"}  # column names of the display tables


def outcome_counts(cells: pd.DataFrame) -> pd.DataFrame:
    """:func:`cell_table`'s counts for display: the cell's axes, seeds, and the number of seeds in
    each outcome (``trap``: single-sign) and with a dummy head, in short column names."""
    cols = [*AXES, "seeds", "k pos/neg", "k single-sign", "k single-head", "k unformed", "with dummy"]
    return cells[cols].rename(columns=_SHORT)


def rate_estimates(cells: pd.DataFrame) -> pd.DataFrame:
    """:func:`cell_table`'s rates, times and losses for display (estimates as ``value [lo, hi]``):
    ``eta*``, ``eta/eta*-1``, ``t_pattern`` and, with losses, ``excess/R_dGD*`` and ``loss/R_Bayes``."""
    cols = [c for c in ("eta*", "eta/eta*-1", "t_pattern", "excess/R_dGD*", "loss/R_Bayes") if c in cells]
    return readable(cells[list(AXES) + cols].rename(columns=_SHORT))


def trap_vs_heads(cells: pd.DataFrame, centre: Mapping[str, float], trap_heads: int = 2,
                  level: float = LEVEL) -> Estimate:
    """The fraction of ``trap_heads``-head seeds in the single-sign trap minus that of the seeds with
    more heads (pooled), on the head axis at the centre (:func:`~icl_lib.stats.fraction_diff`); :data:`UNDECIDED`
    when the grid lacks one of the two."""
    axis = along(cells, centre, "H")
    two, more = axis[axis["H"] == trap_heads], axis[axis["H"] > trap_heads]
    if not (len(two) and len(more)):
        return UNDECIDED
    return fraction_diff(int(two["k single-sign"].sum()), int(two["seeds"].sum()),
                         int(more["k single-sign"].sum()), int(more["seeds"].sum()), level)


def trap_vs_lr(cells: pd.DataFrame, centre: Mapping[str, float], trap_heads: int = 2,
               level: float = LEVEL) -> Estimate:
    """The trap fraction of ``trap_heads``-head seeds at the largest learning rate of the grid minus
    that at the smallest (the other axes at the centre; :func:`~icl_lib.stats.fraction_diff`); :data:`UNDECIDED`
    with fewer than two rates."""
    line = along(cells, dict(centre, H=trap_heads), "lr").sort_values("lr")
    if len(line) < 2:
        return UNDECIDED
    hi, lo = line.iloc[-1], line.iloc[0]
    return fraction_diff(int(hi["k single-sign"]), int(hi["seeds"]), int(lo["k single-sign"]), int(lo["seeds"]),
                         level)


def time_panels(models: pd.DataFrame, centre: Mapping[str, float], trap_heads: int = 2) -> dict[str, pd.DataFrame]:
    """The lines of the grid along which the time to the pattern is fitted, ``trap_heads`` heads and
    the other axes at the centre: ``"lr"`` (the learning rates), and ``"L (d = x)"`` for every
    dimension x of the grid with at least two context lengths.  ``{title: runs}``, for
    :func:`time_scaling` and :func:`~icl_lib.figures.time_to_pattern`."""
    c = dict(centre, H=trap_heads)
    panels = {"lr": along(models, c, "lr")}
    rest = models[(models["H"] == trap_heads)]
    for a in ("sigma2", "lr", "init_scale"):
        rest = rest[np.isclose(rest[a].to_numpy(dtype=float), float(c[a]))]
    for d, g in rest.groupby("d"):
        if g["L"].nunique() >= 2:
            panels[f"L (d = {d})"] = g
    return panels


def time_scaling(models: pd.DataFrame, axis: str, level: float = LEVEL) -> dict:
    """The power law ``t_pattern ~ x^b`` along ``axis`` (a column of ``models``) fitted by least
    squares on log axes to the runs that reached the pattern (a time of 0 counts as 1), with
    :func:`~icl_lib.stats.loglog_slope`'s interval for ``b``.  Returns ``slope`` (an Estimate), ``intercept``
    (of ``log t``; nan when undetermined), ``reached`` and ``censored`` (runs that did not reach
    the pattern: left out of the fit, so a slope over them is a statement about those that did)."""
    t = models["t_pattern"].astype(float)
    ok = t.notna().to_numpy()
    x = models[axis].to_numpy(dtype=float)[ok]
    y = np.maximum(t.to_numpy()[ok], 1.0)
    slope = loglog_slope(x, y, level) if len(x) else Estimate(math.nan, -math.inf, math.inf, level, "no run")
    intercept = (float(np.mean(np.log(y)) - slope.value * np.mean(np.log(x))) if math.isfinite(slope.value)
                 else math.nan)
    return {"slope": slope, "intercept": intercept, "reached": int(ok.sum()), "censored": int((~ok).sum())}
