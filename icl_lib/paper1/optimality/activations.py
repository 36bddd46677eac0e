"""Other normalised activations and their effective learning rates (paper 1, B.2, Table 1).

* :func:`activation_coefficient`, :data:`TAYLOR`, :func:`rate_correction`, :func:`realised_rate` --
  ``c_f``, the third-order relation between ``c_f sum_h mu_h omega_h`` and the rate a model
  realises (derived in chapter 5), and that rate measured on predictions;
* :func:`activation_rates`, :func:`activation_table` -- Table 1 per activation and for linear
  attention;
* :func:`pattern_estimate`, :func:`rate_spread_estimate` -- chapter 5's claims on the pattern and on
  the spread of the rates over the activations.

Used by chapter 5.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from ... import estimators as est
from ...circuits import effective_rate, mu_of, omega_of
from ...config import DataConfig
from ...sampling import sample_chunks
from ...engine import Run, stack_models
from ...models import ACTIVATIONS
from ...seeding import derive_seed
from ...stats import LEVEL, Estimate, proportion_ci
from ...stats.combine import _quantile
from ...validate import check_int
from .trained import ACTIVATIONS_B2, LABELS, NAN, check_lengths, stacked_circuits

__all__ = [
    "activation_coefficient",
    "TAYLOR",
    "rate_correction",
    "realised_rate",
    "activation_rates",
    "activation_table",
    "pattern_estimate",
    "rate_spread_estimate",
    "coefficient_spread",
]


# ----------------------------------------------------------------------------- linearised circuits
def activation_coefficient(attention: str) -> float:
    """``c_f``: first-order coefficient of the normalised activation, ``f(s) ~ f(0)(1 + c_f s)``
    (paper 1, B.2); 1 for linear attention, whose weights are ``s_i / N`` (B.1)."""
    if attention == "linear":
        return 1.0
    return ACTIVATIONS[attention][1]


# f(s) = 1 + c s + a s^2 + b s^3 + ...: (c, a, b) of every normalised activation (paper 1, B.2)
TAYLOR = {
    "softmax": (1.0, 0.5, 1.0 / 6.0),  # exp
    "one_plus_tanh": (1.0, 0.0, -1.0 / 3.0),  # 1 + tanh s = 1 + s - s^3/3 + ...
    "quadratic": (1.0, 0.5, 0.0),  # 1 + s + s^2/2
    "square": (2.0, 1.0, 0.0),  # (1 + s)^2
}


def rate_correction(attention: str, omega: float, d: int) -> float:
    """Third-order factor between the parameter-level rate ``c_f sum_h mu_h omega_h`` of two symmetric
    heads ``(omega, mu), (-omega, -mu)`` and the rate they realise (:func:`realised_rate`):

        eta_realised ~ c_f 2 mu omega (1 + (3 b / c - a) omega^2 (d + 2)),   f = 1 + c s + a s^2 + b s^3.

    Derivation (chapter 5): with ``g_i = x_i^T x_q``, the two heads' weights differ by
    ``(2/L)[c omega g_i (1 - a omega^2 m_2) + b omega^3 g_i^3]`` (``m_2 = mean_j g_j^2 ~ |x_q|^2``, even
    terms cancel between the heads); projecting ``g^3`` on ``g`` gives ``3 |x_q|^2``, and weighting by
    the debiased GD prediction's ``|x_q|^2`` turns ``|x_q|^2`` into ``E|x|^4 / E|x|^2 = d + 2``.
    It is 1 for ``exp`` (``3b/c = a``), below 1 for the other activations of the book."""
    c, a, b = TAYLOR[attention]
    return 1.0 + (3.0 * b / c - a) * omega**2 * (d + 2)


@torch.no_grad()
def realised_rate(model, data: DataConfig, n: int = 20_000, seed: int = 0, L: int | None = None) -> np.ndarray:
    """Per model, the step ``eta`` whose debiased GD prediction is closest to the model's in mean
    square: ``E[y_hat u] / E[u^2]`` with ``u = (1/L) sum_i y_i (x_i - xbar)^T x_q`` (the effective
    learning rate measured at the level of predictions; paper 1, Table 1; chapter 5).  ``(R,)``."""
    n = check_int("n", n, 2)
    num = torch.zeros(model.R, dtype=torch.float64)
    den = 0.0
    for b in sample_chunks(data, n, seed, 5_000, L=L, dtype=model.Q.dtype):
        u = est.debiased_gd_predict(b, 1.0)  # (B,)
        num += (model(b)[..., 0] * u).sum(-1).double().cpu()
        den += float((u * u).sum())
    return (num / den).numpy()


@torch.no_grad()
def activation_rates(kept: Mapping[str, Sequence[Run]], data: DataConfig, n: int, seed: int) -> dict[str, pd.DataFrame]:
    """Per kind of :data:`~icl_lib.paper1.optimality.trained.ACTIVATIONS_B2` and linear
    attention, one row per kept run: ``|omega|`` and ``|mu|`` (means over the heads), the
    parameter-level rate ``c_f sum_h mu_h omega_h`` and the realised rate (:func:`realised_rate` on
    ``n`` sequences, purpose ``"realised-rate"``), index the run seed (paper 1, Table 1; chapter
    5)."""
    d = data.d
    out = {}
    for a in [*ACTIVATIONS_B2, "linear"]:
        KQ, OV = stacked_circuits(kept[a])  # (R, 2, D, D), (R, 2, 1, D)
        out[a] = pd.DataFrame({
            "|omega|": omega_of(KQ, d).abs().mean(-1).numpy(), "|mu|": mu_of(OV, d).abs().mean(-1).numpy(),
            "c_f sum mu omega": effective_rate(KQ, OV, d, activation_coefficient(a)).numpy(),
            "realised eta": realised_rate(stack_models(kept[a]), data, n=n, seed=derive_seed(seed, "realised-rate")),
        }, index=pd.Index([r.spec.seed for r in kept[a]], name="seed"))
    return out


def activation_table(
    variants: Mapping[str, Sequence[Run]],
    rates: Mapping[str, pd.DataFrame],
    errors: Mapping[str, torch.Tensor],
    data: DataConfig,
    Ls: Sequence[int],
) -> pd.DataFrame:
    """Paper 1's Table 1 per activation of
    :data:`~icl_lib.paper1.optimality.trained.ACTIVATIONS_B2` and for linear attention (medians
    over the kept runs of :func:`activation_rates`): ``c_f``, ``|omega|``, ``|mu|``, the
    parameter-level rate, the realised rate, its third-order prediction (:func:`rate_correction`),
    the positive/negative runs among all (``"k/n"``) and the loss at the training length (from
    :func:`~icl_lib.paper1.optimality.linear_attention.variant_errors` on the grid ``Ls``).  Index
    ``f`` (:data:`~icl_lib.paper1.optimality.trained.LABELS`).  Chapter 5."""
    d, L = data.d, data.L
    jL = check_lengths(Ls).index(L)
    rows = []
    for a in [*ACTIVATIONS_B2, "linear"]:
        t = rates[a]
        if a in TAYLOR:
            corr = np.array([rate_correction(a, float(w), d) for w in t["|omega|"]])
        else:
            corr = np.full(len(t), NAN)
        k = sum(r.pattern().kind == "pos/neg" for r in variants[a])
        rows.append({"f": LABELS[a], "c_f": activation_coefficient(a), "|omega|": t["|omega|"].median(),
                     "|mu|": t["|mu|"].median(), "c_f sum mu omega": t["c_f sum mu omega"].median(),
                     "realised eta": t["realised eta"].median(),
                     "3rd-order prediction": float(np.median(t["c_f sum mu omega"].to_numpy() * corr)),
                     "pos/neg seeds": f"{k}/{len(variants[a])}" if a != "linear" else "-",
                     f"loss at L={L}": float(errors[a][:, jL].mean(-1).median())})
    return pd.DataFrame(rows).set_index("f")


def pattern_estimate(runs: Sequence[Run]) -> Estimate:
    """Fraction of ``runs`` that ended in the positive/negative pattern, with its Clopper-Pearson
    interval (:func:`~icl_lib.stats.proportion_ci`; paper 1, B.2 and Section 3)."""
    return proportion_ci(sum(r.pattern().kind == "pos/neg" for r in runs), len(runs))


def rate_spread_estimate(rates: Mapping[str, pd.DataFrame], column: str) -> tuple[Estimate, pd.DataFrame]:
    """Spread ``max / min - 1`` over the activations of
    :data:`~icl_lib.paper1.optimality.trained.ACTIVATIONS_B2` of the mean over kept runs of
    ``column`` of :func:`activation_rates` (``"realised eta"`` or ``"c_f sum mu omega"``), with an
    interval from each activation's t interval (seeds - 1 degrees of freedom, Bonferroni over the
    activations; an activation with one run has an unbounded interval): from ``max(0, max_a lo_a /
    min_b hi_b - 1)`` to ``max_a hi_a / min_b lo_b - 1``.  Also returns the per-activation means and
    intervals.  Paper 1, Table 1 ("the effective learning rates remain remarkably consistent across
    all activation functions"); chapter 5."""
    rows = []
    m_all = len(ACTIVATIONS_B2)
    for a in ACTIVATIONS_B2:
        x = rates[a][column].to_numpy(dtype=float)
        m = float(x.mean())
        if len(x) >= 2:
            half = _quantile(LEVEL, m_all, len(x) - 1) * float(x.std(ddof=1)) / math.sqrt(len(x))
        else:
            half = math.inf
        rows.append({"f": LABELS[a], "runs": len(x), "mean": m, "lo": m - half, "hi": m + half})
    t = pd.DataFrame(rows).set_index("f")
    value = float(t["mean"].max() / t["mean"].min() - 1)
    lo = max(0.0, float(t["lo"].max() / t["hi"].min() - 1)) if math.isfinite(t["hi"].min()) else 0.0
    hi = float(t["hi"].max() / t["lo"].min() - 1) if t["lo"].min() > 0 else math.inf
    return Estimate(value, lo, hi, LEVEL, f"spread of {column} over activations, t intervals per activation"), t


def coefficient_spread(activations: Sequence[str]) -> float:
    """``max c_f / min c_f - 1`` over ``activations``: the spread of the effective rates if each
    activation's rate followed its own first-order coefficient (the rival of "remarkably consistent
    across all activation functions", paper 1, B.2; chapter 5)."""
    cf = [activation_coefficient(a) for a in activations]
    return max(cf) / min(cf) - 1
