"""Theorem 4.2 (i): the linearised predictor of paired heads and its error as a function of ``omega`` (paper 1, B.2).

* :func:`paired_heads` -- one two-head model of pattern (3.1) per ``omega`` at a fixed rate;
* :func:`linearisation_errors`, :func:`order_estimate` -- the error of the linearised predictor
  (debiased GD) and the order of that error in ``omega``;
* :func:`linearisation_curves`, :func:`trained_linearisation_points` -- chapter 5's curves of hand-set
  heads and the points of its trained runs.

Used by chapter 5.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from ... import estimators as est
from ...config import DataConfig
from ...sampling import sample_chunks
from ...engine import Run, stack_models
from ...circuits import effective_rate, omega_of
from ...models import AttentionEnsemble
from ...seeding import derive_seed
from ...stats import LEVEL, Estimate
from ...validate import check_float, check_int, fail
from .trained import linearised
from .predictions import prediction_gaps

__all__ = [
    "paired_heads",
    "linearisation_errors",
    "order_estimate",
    "linearisation_curves",
    "trained_linearisation_points",
    "trained_order_estimate",
]


# ----------------------------------------------------------------------------- Theorem 4.2 (i)
def paired_heads(omegas: Sequence[float], eta: float, d: int, ratio: float = 1.0) -> AttentionEnsemble:
    """One two-head model of pattern (3.1) per ``omega`` (an ensemble of ``len(omegas)`` models,
    float64): ``KQ_1 = omega I``, ``KQ_2 = -ratio omega I`` on the covariate block, ``OV_1 = mu e_y``,
    ``OV_2 = -mu e_y`` (zero-sum OV) with ``mu = eta / ((1 + ratio) omega)``, so that the rate
    ``sum_h mu_h omega_h = eta`` is the same for every ``omega``.  ``ratio = 1``: the paired heads of
    the positive/negative pattern (paper 1, Section 3); ``ratio != 1``: heads of unequal ``|omega|``.
    Paper 1, Theorem 4.2 (i); chapter 5."""
    ratio = check_float("ratio", ratio, 0.0, lo_open=True)
    D, R = d + 1, len(omegas)
    KQ = torch.zeros(R, 2, D, D, dtype=torch.float64)
    OV = torch.zeros(R, 2, 1, D, dtype=torch.float64)
    eye = torch.eye(d, dtype=torch.float64)
    for r, w in enumerate(omegas):
        mu = eta / ((1 + ratio) * w)
        KQ[r, 0, :d, :d], KQ[r, 1, :d, :d] = w * eye, -ratio * w * eye
        OV[r, 0, 0, d], OV[r, 1, 0, d] = mu, -mu
    return AttentionEnsemble.from_circuits(KQ, OV, d)


@torch.no_grad()
def linearisation_errors(
    omegas: Sequence[float], eta: float, data: DataConfig, n: int, seed: int, ratio: float = 1.0
) -> torch.Tensor:
    """Squared difference between the prediction of :func:`paired_heads` and debiased GD at the
    same rate ``eta`` (the linearised predictor of Theorem 4.2 (i)), on the same ``n`` sequences
    for every ``omega`` (purpose ``"linearisation"``): ``(len(omegas), n)``.  Chapter 5."""
    model = paired_heads(omegas, eta, data.d, ratio)
    return prediction_gaps(model, data, {"dGD": lambda b: est.debiased_gd_predict(b, eta)}, n=n,
                           seed=derive_seed(seed, "linearisation"), raw=True)["dGD"]


def _rms_unit_step(data: DataConfig, n: int, seed: int) -> float:
    """RMS of the debiased GD prediction at rate 1 on the sequences of :func:`linearisation_errors`."""
    total = sum(float((est.debiased_gd_predict(b, 1.0) ** 2).sum())
                for b in sample_chunks(data, n, derive_seed(seed, "linearisation"), 5_000))
    return math.sqrt(total / n)


def order_estimate(
    sq: torch.Tensor, omegas: Sequence[float], fit_max: float, n_boot: int = 400, seed: int = 0
) -> Estimate:
    """Slope of ``log RMS`` against ``log omega`` over the ``omega <= fit_max`` of ``omegas``, with
    ``RMS = sqrt(mean of sq)`` over the sequences of :func:`linearisation_errors` (``sq``:
    ``(len(omegas), n)``), and its 95% percentile bootstrap interval over sequences (``n_boot``
    resamples, purpose ``"order-bootstrap"``): the order of the linearisation error in ``omega``
    (paper 1, Theorem 4.2 (i); chapter 5)."""
    w = np.asarray(omegas, dtype=float)
    fit = w <= fit_max
    if fit.sum() < 2:
        fail("fit_max", fit_max, f"a bound with at least two omegas at or below it (omegas {list(w)})")
    x = np.log(w[fit])
    e = sq.numpy()[fit]  # (K, n)

    def slope(cols) -> float:
        y = 0.5 * np.log(e[:, cols].mean(-1))
        return float(np.polyfit(x, y, 1)[0])

    n = e.shape[1]
    rng = np.random.default_rng(derive_seed(seed, "order-bootstrap"))
    boots = [slope(rng.integers(0, n, n)) for _ in range(check_int("n_boot", n_boot, 20))]
    lo, hi = np.quantile(boots, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return Estimate(slope(slice(None)), float(lo), float(hi), LEVEL,
                    f"log-log slope over {int(fit.sum())} omegas, bootstrap over {n} sequences")


def linearisation_curves(
    omegas: Sequence[float], eta: float, data: DataConfig, n: int, seed: int, fit_max: float, ratio: float = 0.5
) -> tuple[pd.DataFrame, Estimate, Estimate]:
    """Theorem 4.2 (i) as a function of ``omega``: the root mean squared difference between hand-set
    heads and debiased GD at rate ``eta``, relative to the RMS of debiased GD's prediction, for the
    paired heads of the positive/negative pattern and for heads of unequal ``|omega|`` (``ratio``;
    :func:`paired_heads`), on the same sequences; and the two orders (:func:`order_estimate`).
    Returns ``(table, order of the paired heads, order of the unequal ones)``, table index
    ``omega``.  Chapter 5."""
    sq_pair = linearisation_errors(omegas, eta, data, n, seed)
    sq_uneq = linearisation_errors(omegas, eta, data, n, seed, ratio=ratio)
    scale = abs(eta) * _rms_unit_step(data, n, seed)
    table = pd.DataFrame({"paired heads": sq_pair.mean(-1).sqrt().numpy() / scale,
                          f"unequal |omega| (ratio {ratio:g})": sq_uneq.mean(-1).sqrt().numpy() / scale},
                         index=pd.Index(list(omegas), name="omega"))
    return (table, order_estimate(sq_pair, omegas, fit_max, seed=seed),
            order_estimate(sq_uneq, omegas, fit_max, seed=seed))


def trained_linearisation_points(runs: Sequence[Run], data: DataConfig, n: int, seed: int) -> pd.DataFrame:
    """For every trained run: the mean ``|omega_h|``, its rate ``eta = sum_h mu_h omega_h`` and the
    RMS difference of its predictions from debiased GD at that rate, relative to the RMS of that
    prediction (as in :func:`linearisation_curves`, same sequences), and from pre-conditioned
    debiased GD at its own ``Gamma``.  One row per run, index its seed.  Chapter 5."""
    if not runs:
        return pd.DataFrame(columns=["|omega|", "eta", "relative RMS (dGD)", "relative RMS (own Gamma)"])
    Gamma, eta = linearised(runs, data.d)
    R = len(runs)

    def per_run(fn):
        return lambda b: torch.stack([fn(b, r) for r in range(R)])  # (R, B)

    refs = {"dGD": per_run(lambda b, r: est.debiased_gd_predict(b, float(eta[r]))),
            "Gamma": per_run(lambda b, r: est.debiased_gd_predict(b, 1.0, Gamma[r]))}
    sq = prediction_gaps(stack_models(runs), data, refs, n=n, seed=derive_seed(seed, "linearisation"), raw=True)
    scale = np.abs(eta) * _rms_unit_step(data, n, seed)
    return pd.DataFrame({"|omega|": [float(r.omega.abs().mean()) for r in runs], "eta": eta,
                         "relative RMS (dGD)": sq["dGD"].mean(-1).sqrt().numpy() / scale,
                         "relative RMS (own Gamma)": sq["Gamma"].mean(-1).sqrt().numpy() / scale},
                        index=pd.Index([r.spec.seed for r in runs], name="seed"))


def trained_order_estimate(runs: Sequence[Run], data: DataConfig, n: int, seed: int, start: float = 0.1,
                           snapshots: int = 8) -> tuple[Estimate, pd.DataFrame]:
    """Theorem 4.2 (i) on the trained models themselves: along each run's history from the fraction
    ``start`` of its training on, at ``snapshots`` logged steps, the RMS difference of the
    predictions of the model built from the logged circuits (:meth:`AttentionEnsemble.from_circuits`)
    from debiased GD at that snapshot's own rate ``eta`` (relative to that prediction's RMS, on the
    same ``n`` sequences as :func:`trained_linearisation_points`), against the snapshot's mean
    ``|omega_h|``; per run the least-squares slope of ``log RMS`` on ``log |omega|``.  Returns the
    median slope over the runs with its order-statistic interval (unbounded with fewer than six
    runs; Theorem 4.2 (i): 2 for coupled positive/negative heads, the rival 1 for unequal ones) and
    the table of every snapshot.  Chapter 5."""
    from ...stats import median_ci

    start = check_float("start", start, 0.0, 1.0, hi_open=True)
    snapshots = check_int("snapshots", snapshots, 2, 400)
    scale = _rms_unit_step(data, n, seed)
    rows, slopes = [], []
    for run in runs:
        h = run.history
        steps = h["step"].numpy()
        late = np.flatnonzero(steps >= start * steps[-1])
        pick = late[np.unique(np.linspace(0, len(late) - 1, snapshots).round().astype(int))]
        KQ, OV = h["KQ"][pick].double(), h["OV"][pick].double()  # (S, H, D, D), (S, H, N, D)
        model = AttentionEnsemble.from_circuits(KQ, OV, data.d)
        eta = effective_rate(KQ, OV, data.d).numpy()  # (S,)
        refs = {"dGD": lambda b: torch.stack([est.debiased_gd_predict(b, float(e)) for e in eta])}
        sq = prediction_gaps(model, data, refs, n=n, seed=derive_seed(seed, "linearisation"), raw=True)["dGD"]
        rel = sq.mean(-1).sqrt().numpy() / (np.abs(eta) * scale)
        w = np.array([float(omega_of(KQ[k], data.d).abs().mean()) for k in range(len(pick))])
        for k in range(len(pick)):
            rows.append({"seed": run.spec.seed, "step": int(steps[pick[k]]), "|omega|": w[k], "eta": float(eta[k]),
                         "relative RMS (dGD)": float(rel[k])})
        if np.ptp(np.log(w)) > 0:
            slopes.append(float(np.polyfit(np.log(w), np.log(rel), 1)[0]))
    table = pd.DataFrame(rows)
    if len(slopes) < 1:
        return Estimate(math.nan, -math.inf, math.inf, LEVEL, "no run with a range of omega"), table
    return median_ci(slopes), table

