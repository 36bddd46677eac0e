"""What decides the single-sign trap: the initialisation or the data, the switched causes, and the trap rate along the grid's axes (chapter 9).

Read from the runs of :mod:`icl_lib.paper1.phase_diagram.causes` and :mod:`icl_lib.paper1.phase_diagram.grid`:

* :func:`outcome_matrix` -- initialisations x data streams, whether each run ends trapped (not in
  the positive/negative pattern, the book's one definition);
* :func:`init_ceiling` -- how much of the outcome the initialisation fixes: the leave-one-draw-out
  accuracy (each run's outcome predicted by the majority of its initialisation's other runs, an
  achievable predictor that reads the initialisation only) with the bootstrap over
  initialisations, and the plug-in ceiling ``mean_i max(p_i, 1 - p_i)`` (an upper estimate);
* :func:`predictor_vs_ceiling` -- a predictor read from the initialisation, scored on every
  crossed run, minus the leave-one-draw-out accuracy (paired, bootstrap over initialisations);
* :func:`switch_effects` -- a switch's share of changed outcomes minus the share that two data
  streams of the same initialisation change, and its change of the trap rate (both paired,
  bootstrap over initialisations);
* :func:`axis_law` -- the trap rate along one axis of the grid: a logistic regression on the axis
  (``statsmodels``), its slope, and the fitted rate at the axis's last value minus at its first
  with the delta-method interval.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

from ...engine.run import Run
from ...stats import LEVEL, Estimate, bootstrap_ci
from ...validate import fail
from .outcomes import outcome_codes

__all__ = ["trapped", "outcome_matrix", "init_ceiling", "predictor_vs_ceiling", "switch_effects", "axis_law",
           "trap_axes", "AXIS_CLAIMS", "AXIS_UNITS"]


def trapped(run: Run) -> bool:
    """Whether a two-head run ends outside the positive/negative pattern (single-sign or unformed)."""
    out, _ = outcome_codes(run.history["KQ"][-1:], run.history["OV"][-1:], run.d)
    return str(out[-1]) != "pos/neg"


def outcome_matrix(runs: Sequence[Run], inits: int, draws: int) -> np.ndarray:
    """``(inits, draws)`` booleans, trapped or not, of runs listed initialisation by initialisation
    and stream by stream (:meth:`~icl_lib.paper1.phase_diagram.causes.CauseDesign.base`)."""
    runs = list(runs)
    if len(runs) != inits * draws:
        fail("runs", f"{len(runs)} runs", f"inits x draws = {inits * draws}")
    return np.array([trapped(r) for r in runs], dtype=bool).reshape(inits, draws)


def _loo(M: np.ndarray) -> float:
    """Leave-one-draw-out accuracy of ``M (inits, draws)``: each run predicted by the majority of its
    row's other runs (a tie by the majority of the whole matrix)."""
    n = M.shape[1]
    k = M.sum(1, keepdims=True)  # trapped runs per initialisation
    others = (k - M) / (n - 1)  # share trapped among the other draws
    default = M.mean() > 0.5
    pred = np.where(others == 0.5, default, others > 0.5)
    return float((pred == M).mean())


def init_ceiling(M: np.ndarray, seed: int = 0, level: float = LEVEL) -> dict:
    """How much of the outcome the initialisation fixes, from ``M (inits, draws)``: ``loo``, the
    leave-one-draw-out accuracy (:class:`Estimate`, bootstrap over initialisations); ``plugin``,
    ``mean_i max(p_i, 1 - p_i)`` with ``p_i`` the row's trap share (biased upward by the finite
    draws: an upper estimate of the ceiling); ``agree``, the share of initialisations whose draws
    all end alike; ``p``, the rows' trap shares."""
    M = np.asarray(M, dtype=bool)
    if M.ndim != 2 or M.shape[1] < 2:
        fail("M", M.shape, "an (initialisations, draws) matrix with at least 2 draws")
    p = M.mean(1)
    loo = bootstrap_ci([M], _loo, "leave-one-draw-out accuracy", seed=seed, level=level)
    return {"loo": loo, "plugin": float(np.maximum(p, 1 - p).mean()),
            "agree": float(((p == 0) | (p == 1)).mean()), "p": p}


def predictor_vs_ceiling(pred: np.ndarray, M: np.ndarray, seed: int = 0, level: float = LEVEL) -> dict:
    """A predictor read from the initialisation, ``pred (inits,)`` (predicts the trap or not), on
    every run of ``M (inits, draws)``: ``accuracy`` (bootstrap over initialisations) and ``gap``, its
    accuracy minus the leave-one-draw-out accuracy on the same resampled initialisations."""
    pred, M = np.asarray(pred, dtype=bool), np.asarray(M, dtype=bool)
    if pred.shape != (M.shape[0],):
        fail("pred", pred.shape, f"one prediction per initialisation ({M.shape[0]})")

    def acc(pr, m):
        return float((pr[:, None] == m).mean())

    return {"accuracy": bootstrap_ci([pred, M], acc, "accuracy", seed=seed, level=level),
            "gap": bootstrap_ci([pred, M], lambda pr, m: acc(pr, m) - _loo(m),
                                "accuracy minus the leave-one-draw-out accuracy", seed=seed, level=level)}


def switch_effects(base: np.ndarray, switched: np.ndarray, seed: int = 0, level: float = LEVEL) -> dict:
    """A switch trained on the first ``k`` streams of every initialisation (``switched (inits, k)``)
    against the base runs ``base (inits, draws)``: ``changed``, the share of the ``k`` pairs whose
    outcome changes minus the share of initialisations whose first two streams differ (the data's
    own effect); ``rate``, the switched trap rate minus the base's on the same pairs; ``shares``, the
    raw shares.  Both estimates paired, bootstrap over initialisations."""
    base, switched = np.asarray(base, dtype=bool), np.asarray(switched, dtype=bool)
    k = switched.shape[1]
    if switched.shape[0] != base.shape[0] or base.shape[1] < 2 or k > base.shape[1]:
        fail("switched", switched.shape, f"(inits, k <= {base.shape[1]}) matching base's {base.shape}")

    def changed(b, s):
        return float((s != b[:, :k]).mean() - (b[:, 0] != b[:, 1]).mean())

    def rate(b, s):
        return float(s.mean() - b[:, :k].mean())

    return {"changed": bootstrap_ci([base, switched], changed, "changed outcomes minus the data's own",
                                    seed=seed, level=level),
            "rate": bootstrap_ci([base, switched], rate, "trap rate with the switch minus without",
                                 seed=seed, level=level),
            "shares": {"switch changes": float((switched != base[:, :k]).mean()),
                       "data changes": float((base[:, 0] != base[:, 1]).mean()),
                       "base trap rate": float(base[:, :k].mean()), "switched trap rate": float(switched.mean())}}


def axis_law(x: Sequence[float], y: Sequence[bool], transform: Callable = np.asarray, level: float = LEVEL) -> dict:
    """The trap rate along one axis: a logistic regression of ``y`` (trapped, per run) on
    ``transform(x)`` (``statsmodels`` GLM, binomial): ``slope`` (Wald interval) and ``delta``, the
    fitted rate at the axis's largest ``x`` minus at its smallest with the delta-method interval;
    ``cells``, per value of ``x`` the runs, the trapped and the rate with its exact interval."""
    import statsmodels.api as sm  # only for the grid's laws

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or len(np.unique(x)) < 2:
        fail("x", f"{len(np.unique(x))} distinct values", "at least 2 values of the axis, one per run of y")
    t = np.asarray(transform(x), dtype=float)
    X = sm.add_constant(t)
    fit = sm.GLM(y, X, family=sm.families.Binomial()).fit()
    b, cov = np.asarray(fit.params), np.asarray(fit.cov_params())
    z = float(sps.norm.ppf(0.5 + level / 2))
    se_b = math.sqrt(cov[1, 1])
    slope = Estimate(float(b[1]), float(b[1] - z * se_b), float(b[1] + z * se_b), level,
                     f"logistic slope on {len(x)} runs, Wald interval")
    t0, t1 = float(transform(np.array([x.min()]))[0]), float(transform(np.array([x.max()]))[0])

    def rate(tt):
        return 1 / (1 + math.exp(-(b[0] + b[1] * tt)))

    p0, p1 = rate(t0), rate(t1)
    grad = np.array([p1 * (1 - p1) - p0 * (1 - p0), p1 * (1 - p1) * t1 - p0 * (1 - p0) * t0])
    se = float(math.sqrt(grad @ cov @ grad))

    def delta_at(lv):
        zz = float(sps.norm.ppf(0.5 + lv / 2))
        return Estimate(p1 - p0, p1 - p0 - zz * se, p1 - p0 + zz * se, lv,
                        f"fitted rate at {x.max():g} minus at {x.min():g}, logistic fit on {len(x)} runs, "
                        "delta-method interval", at_level=delta_at)

    cells = []
    for v in np.unique(x):
        sel = x == v
        k, n = int(y[sel].sum()), int(sel.sum())
        ci = sps.binomtest(k, n).proportion_ci(confidence_level=level)
        cells.append({"value": v, "runs": n, "trapped": k, "rate": k / n, "lo": ci.low, "hi": ci.high})
    return {"slope": slope, "delta": delta_at(level), "cells": pd.DataFrame(cells), "fit": fit}


# the axes of chapter 9's grid along which the trap rate is claimed: name -> claim, unit of its slope
AXIS_CLAIMS = {"d at L = 8 d": "trap-grows-with-d", "L at d = 5": "trap-changes-with-L",
               "Adam rate": "trap-grows-with-lr", "heads": "trap-falls-with-heads", "sigma^2": "trap-changes-with-noise"}
AXIS_UNITS = {"d at L = 8 d": "d", "L at d = 5": "log L", "Adam rate": "log lr", "heads": "H", "sigma^2": "sigma^2"}


def trap_axes(models: pd.DataFrame, centre: dict) -> dict:
    """The runs of chapter 9's grid along each axis of :data:`AXIS_CLAIMS` through ``centre`` (the
    grid's centre: paper 1's setting): ``{name: (axis values, trapped, transform)}``, one entry per
    run of the axis's cells (two heads, every other axis at the centre; the heads' axis at the
    centre's shape).  ``models``: :func:`~icl_lib.paper1.phase_diagram.outcomes.grid_models`'s rows
    (``outcome``: a run misses the pattern when it is not ``pos/neg``)."""
    c = centre
    at = {k: np.isclose(models[k], c[k]) for k in ("d", "L", "sigma2", "lr", "init_scale")}
    two = models.H == 2
    lines = {
        "d at L = 8 d": (two & at["sigma2"] & at["lr"] & at["init_scale"] & (models.L == 8 * models.d), "d", np.asarray),
        "L at d = 5": (two & at["sigma2"] & at["lr"] & at["init_scale"] & (models.d == 5), "L", np.log),
        "Adam rate": (two & at["d"] & at["L"] & at["sigma2"] & at["init_scale"], "lr", np.log),
        "heads": ((models.H >= 2) & at["d"] & at["L"] & at["sigma2"] & at["lr"] & at["init_scale"], "H", np.asarray),
        "sigma^2": (two & at["d"] & at["L"] & at["lr"] & at["init_scale"], "sigma2", np.asarray),
    }
    out = {}
    for name, (sel, col, f) in lines.items():
        rows = models[sel]
        out[name] = (rows[col].to_numpy(float), (rows.outcome != "pos/neg").to_numpy(), f)
    return out
