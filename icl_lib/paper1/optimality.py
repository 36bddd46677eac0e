"""What the trained attention computes and how good it is (paper 1, Section 4.3, Theorem 4.2, B.1, B.2).

Chapter 5's measurements, built on :mod:`icl_lib.estimators`, :mod:`icl_lib.circuits` and
:mod:`icl_lib.stats`:

* :func:`length_errors`, :func:`length_sweep` -- per-sequence squared errors (and per-set losses)
  of every model of an ensemble at several context lengths ``L`` (Figure 3, B.1, Figure 10);
* :func:`reference_curves` -- the risks of vanilla GD and debiased GD at a given step, of debiased
  GD at its optimal step ``eta*(L)``, and the Bayes risk, at every ``L``;
* :func:`activation_coefficient`, :func:`rate_correction`, :func:`realised_rate` -- ``c_f``, the
  third-order relation between ``c_f sum_h mu_h omega_h`` and the rate a model realises, and that
  rate measured on predictions (Table 1; derived in chapter 5);
* :func:`prediction_gaps` -- mean squared difference between a model's predictions and reference
  predictors on the same sequences (prediction-level agreement);
* :func:`paired_losses` -- models' and reference predictors' ICL losses on the same sequences, with
  the paired differences (single head against the best kernel regressor);
* :func:`kernel_regressor_search` -- the best Nadaraya-Watson bandwidth (``mu = 1``) or the best
  scaled kernel regressor ``mu NW_omega`` (free ``mu``) on a fixed Monte Carlo sample;
* :func:`paired_heads`, :func:`linearisation_errors`, :func:`order_estimate` -- Theorem 4.2 (i) as
  a function of ``omega``: the error of the linearised predictor and its order;
* :func:`bayes_ratio_grid`, :func:`ratio_limits`, :func:`sup_ratio_limit` -- optimal debiased GD
  risk over the Bayes risk in the proportional regime, at finite ``d`` and in the limit, and
  :func:`proportional_specs`, :func:`proportional_table` -- trained models there (Theorem 4.2 (iii)).

The intervals of the chapter's claims (:mod:`icl_lib.claims` decides on them) come from
:mod:`icl_lib.stats`: :func:`~icl_lib.stats.extreme` (the largest, smallest or largest absolute of
several measured quantities, with Bonferroni-simultaneous intervals),
:func:`~icl_lib.stats.interval_image` (a function of one interval-valued quantity),
:func:`~icl_lib.stats.paired_ratio` (two predictors on the same sequences) and
:func:`~icl_lib.stats.seed_ratio` (two groups of trained models on the same sequences, with the
spread over seeds).

:func:`check_lengths`, :func:`check_heads` and :func:`check_omegas` validate chapter parameters.

The chapter's sections, each one call returning a table, the claims' estimates and the values the
chapter glues (dicts keyed by glue name):

* the trained models -- :func:`train_variants` (the 2-head variants of B.1 and B.2),
  :func:`posneg_runs`, :func:`kept_variants`, :func:`pattern_counts`, :func:`median_abs_omega`,
  :func:`learned_rate`, :func:`stacked_circuits`, :func:`linearised`;
* exact risks -- :func:`closed_form_checks`, :func:`off_diagonal_mass`;
* length generalisation -- :func:`group_errors`, :func:`posneg_index`, :func:`length_curves`, :func:`length_table`,
  :func:`length_estimates`, :func:`labelled`, :func:`reference_lines`, :func:`median_curves`;
* prediction level -- :func:`prediction_gap_curves`, :func:`gap_values`, :func:`gap_estimate`;
* Theorem 4.2 (i) -- :func:`linearisation_curves`, :func:`trained_linearisation_points`;
* Theorem 4.2 (iii) -- :func:`ratio_values`, :func:`bayes_limit_estimate`,
  :func:`train_proportional`, :func:`proportional_table`, :func:`proportional_estimate`;
* the single head -- :func:`single_head_vs_kernels`, :func:`approx_loss_single_head`;
* B.1 and B.2 -- :func:`variant_errors`, :func:`linear_vs_softmax`, :func:`linear_estimates`,
  :func:`activation_rates`, :func:`activation_table`, :func:`pattern_estimate`,
  :func:`rate_spread_estimate`.

Every Monte Carlo stream comes from ``derive_seed(seed, purpose, ...)`` with the chapter's
``seed``; each function names its purposes.
"""

from __future__ import annotations

import math
import numbers
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from .. import estimators as est
from ..circuits import effective_preconditioner, effective_rate, mu_of, omega_of
from ..config import DataConfig, RunSpec, TrainConfig
from ..data import Batch, sample_batch, sample_chunks
from ..engine import Run, stack_models, train
from ..models import ACTIVATIONS, AttentionEnsemble
from ..seeding import derive_seed
from ..stats import LEVEL, Estimate, extreme, interval_image, median_ci, paired_ratio, proportion_ci, seed_ratio
from ..stats.combine import _extreme_of_intervals, _quantile
from ..validate import check_float, check_float_list, check_int, fail
from .sweeps import as_heads, heads_sweep_specs

__all__ = [
    "check_lengths",
    "check_heads",
    "check_omegas",
    "length_errors",
    "length_sweep",
    "reference_curves",
    "activation_coefficient",
    "TAYLOR",
    "rate_correction",
    "realised_rate",
    "prediction_gaps",
    "paired_losses",
    "kernel_regressor_search",
    "paired_heads",
    "linearisation_errors",
    "order_estimate",
    "linearisation_curves",
    "trained_linearisation_points",
    "bayes_ratio_grid",
    "ratio_limits",
    "sup_ratio_limit",
    "ratio_values",
    "bayes_limit_estimate",
    "proportional_specs",
    "train_proportional",
    "proportional_table",
    "proportional_estimate",
    "VARIANTS",
    "ACTIVATIONS_B2",
    "LABELS",
    "variant_specs",
    "train_variants",
    "posneg_runs",
    "kept_variants",
    "pattern_counts",
    "median_abs_omega",
    "learned_rate",
    "stacked_circuits",
    "linearised",
    "closed_form_checks",
    "off_diagonal_mass",
    "group_errors",
    "posneg_index",
    "length_curves",
    "length_table",
    "length_estimates",
    "labelled",
    "reference_lines",
    "median_curves",
    "prediction_gap_curves",
    "gap_values",
    "gap_estimate",
    "approx_loss_single_head",
    "single_head_vs_kernels",
    "variant_errors",
    "linear_vs_softmax",
    "linear_estimates",
    "activation_rates",
    "activation_table",
    "pattern_estimate",
    "rate_spread_estimate",
]

NAN = float("nan")


def check_lengths(Ls: Sequence[int], name: str = "Ls", hi: int | None = None) -> list[int]:
    """A chapter's list of context lengths as sorted distinct ints in ``[2, hi]``; an element that
    is not is reported as ``name[i]`` (chapter 5's ``Ls``)."""
    if isinstance(Ls, (int, float)) and not isinstance(Ls, bool):
        Ls = [Ls]
    if not isinstance(Ls, (list, tuple)) or not Ls:
        fail(name, Ls, "a non-empty list of integers >= 2" if hi is None else
             f"a non-empty list of integers in [2, {hi}]")
    return sorted({check_int(f"{name}[{i}]", L, 2, hi) for i, L in enumerate(Ls)})


def check_heads(heads, hi: int) -> list[int]:
    """Chapter 5's ``heads`` parameter: one head count or a non-empty list of them, each in
    ``[1, hi]`` (reported as ``heads`` or ``heads[i]``), as :func:`~icl_lib.paper1.sweeps.as_heads`'s
    sorted distinct list."""
    if isinstance(heads, (list, tuple)):
        for i, h in enumerate(heads):
            check_int(f"heads[{i}]", h, 1, hi)
    elif isinstance(heads, numbers.Real) and not isinstance(heads, bool):
        check_int("heads", heads, 1, hi)
    return as_heads(heads)


def check_omegas(omegas, fit_max: float, name: str = "lin_omegas") -> list[float]:
    """Chapter 5's grid of KQ scales ``omega`` of Theorem 4.2 (i): a list (or its text) of at most
    20 floats in ``(0, 2]``, each reported as ``name[i]``, returned sorted and distinct; at least
    two of them at most ``fit_max`` (the points the order is fitted on)."""
    out = sorted(set(check_float_list(name, omegas, 0.0, 2.0, lo_open=True, max_len=20)))
    if sum(w <= fit_max for w in out) < 2:
        fail(name, omegas, f"a list with at least two values <= lin_fit_max = {fit_max:g}")
    return out


# ----------------------------------------------------------------------------- losses against L
@torch.no_grad()
def length_errors(
    model, data: DataConfig, Ls: Sequence[int], n: int, n_sets: int, seed: int, chunk: int = 2_000
) -> torch.Tensor:
    """Squared error of every model of ``model`` (an :class:`~icl_lib.models.AttentionEnsemble`)
    on every sequence of ``n_sets`` independent test sets of ``n`` sequences at every ``L`` of
    ``Ls``, shared by all models (set ``k`` at length index ``j``: purpose ``"length-sweep"``,
    index ``(j, k)``; the sequences of :func:`~icl_lib.estimators.model_risk`).

    Returns ``(R, len(Ls), n_sets n)``, float64.  Paper 1, Figure 3 (length generalisation); chapter 5.
    """
    Ls = check_lengths(Ls)
    n, n_sets = check_int("n", n, 2), check_int("n_sets", n_sets, 1)
    out = torch.empty(model.R, len(Ls), n_sets * n, dtype=torch.float64)
    for j, L in enumerate(Ls):
        for k in range(n_sets):
            parts = []
            for b in sample_chunks(data, n, derive_seed(seed, "length-sweep", j, k), chunk, L=L, dtype=model.Q.dtype):
                b = b.to(model.Q.device)
                parts.append(((model(b) - b.yq) ** 2).mean(-1).double().cpu())  # (R, B)
            out[:, j, k * n:(k + 1) * n] = torch.cat(parts, dim=1)
    return out


def length_sweep(model, data: DataConfig, Ls: Sequence[int], n: int, n_sets: int, seed: int) -> torch.Tensor:
    """ICL loss of every model on each test set of :func:`length_errors`: ``(R, len(Ls), n_sets)``.
    Paper 1, Figure 3; chapter 5."""
    e = length_errors(model, data, Ls, n, n_sets, seed)
    return e.reshape(e.shape[0], e.shape[1], n_sets, n).mean(-1)


def reference_curves(
    eta: float, d: int, Ls: Sequence[int], sigma2: float, n_bayes: int = 2000, seed: int = 0
) -> dict[str, np.ndarray]:
    """Exact risks at every ``L``: vanilla GD and debiased GD at step ``eta`` (the learned rate),
    debiased GD at its optimal step ``eta*(L)``, and the Bayes risk (design-only Monte Carlo, its
    standard error under ``"Bayes se"``).  Paper 1, Figure 3; chapter 5."""
    Ls = check_lengths(Ls)
    bayes = [est.bayes_risk(d, L, sigma2, n=n_bayes, seed=derive_seed(seed, "bayes-at-L", j)) for j, L in enumerate(Ls)]
    return {
        "vanilla GD": np.array([est.vanilla_gd_risk(eta, d, L, sigma2) for L in Ls]),
        "debiased GD": np.array([est.debiased_gd_risk(eta, d, L, sigma2) for L in Ls]),
        "debiased GD, eta*(L)": np.array(
            [est.debiased_gd_risk(est.optimal_eta_debiased(d, L, sigma2), d, L, sigma2) for L in Ls]
        ),
        "Bayes": np.array([b[0] for b in bayes]),
        "Bayes se": np.array([b[1] for b in bayes]),
    }


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


# ----------------------------------------------------------------------------- prediction level
@torch.no_grad()
def prediction_gaps(
    model,
    data: DataConfig,
    predictors: Mapping[str, Callable[[Batch], torch.Tensor]],
    n: int = 20_000,
    seed: int = 0,
    L: int | None = None,
    chunk: int = 5_000,
    raw: bool = False,
) -> dict:
    """Mean squared difference ``E (y_hat_model - y_hat_ref)^2`` between every model of an ensemble
    and every reference predictor, on the same ``n`` fresh sequences; ``(mean (R,), std error (R,))``
    per reference (``raw=True``: the squared differences themselves, ``(R, n)`` float64 tensors).
    A predictor maps a single-task batch to ``(B,)`` (shared) or ``(R, B)`` (one per model, e.g. GD
    at each model's own rate).  The key ``"target"`` holds the models' own ICL loss.  Paper 1,
    Section 4.3 (the learned predictor is debiased GD); chapter 5."""
    n = check_int("n", n, 2)
    sq: dict[str, list[torch.Tensor]] = {k: [] for k in [*predictors, "target"]}
    for b in sample_chunks(data, n, seed, chunk, L=L, dtype=model.Q.dtype):
        pred = model(b)[..., 0]  # (R, B)
        sq["target"].append((pred - b.yq[..., 0]) ** 2)
        for name, p in predictors.items():
            sq[name].append((pred - p(b).to(pred)) ** 2)  # (R, B)
    out = {}
    for name, parts in sq.items():
        e = torch.cat(parts, dim=-1).double()
        out[name] = e if raw else (e.mean(-1).numpy(), (e.std(-1) / math.sqrt(e.shape[-1])).numpy())
    return out


@torch.no_grad()
def paired_losses(
    model,
    data: DataConfig,
    predictors: Mapping[str, Callable[[Batch], torch.Tensor]],
    n: int = 20_000,
    seed: int = 0,
    L: int | None = None,
    chunk: int = 5_000,
) -> dict[str, dict[str, np.ndarray]]:
    """ICL losses of every model of an ensemble and of every reference predictor on the same ``n``
    fresh sequences.  Returns ``{"model": {"loss", "se"}}`` (arrays ``(R,)``) and, per predictor,
    ``{"loss", "se", "diff", "diff_se"}`` where ``diff = loss(model) - loss(predictor)`` per model
    with its paired standard error (negative: the model is better).  Chapter 5."""
    n = check_int("n", n, 2)
    err_m: list[torch.Tensor] = []
    err_p: dict[str, list[torch.Tensor]] = {k: [] for k in predictors}
    for b in sample_chunks(data, n, seed, chunk, L=L, dtype=model.Q.dtype):
        yq = b.yq[..., 0]  # (B,)
        err_m.append((model(b)[..., 0] - yq) ** 2)  # (R, B)
        for name, p in predictors.items():
            err_p[name].append((p(b).to(yq) - yq) ** 2)  # (B,) or (R, B)
    em = torch.cat(err_m, dim=-1)
    sqrt_n = math.sqrt(em.shape[-1])
    out = {"model": {"loss": em.mean(-1).numpy(), "se": (em.std(-1) / sqrt_n).numpy()}}
    for name, parts in err_p.items():
        ep = torch.cat(parts, dim=-1)
        diff = em - ep  # (R, n)
        out[name] = {"loss": ep.mean(-1).numpy(), "se": (ep.std(-1) / sqrt_n).numpy(),
                     "diff": diff.mean(-1).numpy(), "diff_se": (diff.std(-1) / sqrt_n).numpy()}
    return out


# ----------------------------------------------------------------------------- kernel regressors
@torch.no_grad()
def kernel_regressor_search(
    data: DataConfig,
    free_mu: bool,
    n: int = 20_000,
    seed: int = 0,
    L: int | None = None,
    omega_max: float = 3.0,
    grid: int = 61,
) -> dict[str, float]:
    """Best kernel regressor ``mu sum_i y_i softmax_i(omega x_i^T x_q)`` on one fixed Monte Carlo
    sample of ``n`` sequences: Nadaraya-Watson (``mu = 1``, ``free_mu=False``; paper 1, Section 4.3)
    or with the risk-minimising ``mu(omega) = E[k y_q] / E[k^2]`` (``free_mu=True``; the family of
    a single head of pattern (3.1)).  A grid over ``omega in [0, omega_max]`` then a bounded scalar
    search (``scipy.optimize.minimize_scalar``) around the best grid point.  Returns ``omega``, ``mu``
    and the in-sample risk ``risk_search`` (evaluate the result on a fresh sample).  Chapter 5."""
    from scipy.optimize import minimize_scalar

    n = check_int("n", n, 2)
    omega_max = check_float("omega_max", omega_max, 0.0, lo_open=True)
    b = sample_batch(data, n, seed, L=L)
    g = (b.x @ b.xq[..., None])[..., 0]  # (n, L) x_i^T x_q
    y, yq = b.y[..., 0], b.yq[..., 0]  # (n, L), (n,)

    def fit(omega: float) -> tuple[float, float]:
        k = (torch.softmax(omega * g, dim=-1) * y).sum(-1)  # (n,) NW predictions
        if not free_mu:
            return float(((k - yq) ** 2).mean()), 1.0
        ky, kk = float((k * yq).mean()), float((k * k).mean())
        return float((yq * yq).mean()) - ky * ky / kk, ky / kk

    omegas = np.linspace(0.0, omega_max, check_int("grid", grid, 3))
    risks = [fit(float(w))[0] for w in omegas]
    i = int(np.argmin(risks))
    lo, hi = omegas[max(i - 1, 0)], omegas[min(i + 1, len(omegas) - 1)]
    res = minimize_scalar(lambda w: fit(float(w))[0], bounds=(lo, hi), method="bounded", options={"xatol": 1e-4})
    omega = float(res.x) if res.fun <= risks[i] else float(omegas[i])
    risk, mu = fit(omega)
    return {"omega": omega, "mu": mu, "risk_search": risk}


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


# ----------------------------------------------------------------------------- Theorem 4.2 (iii)
def bayes_ratio_grid(xis: Sequence[float], sigma2s: Sequence[float], d: int, n: int = 200, seed: int = 0):
    """Risk of debiased GD at its optimal step over the Bayes risk, at ``d`` and ``L = round(d / xi)``
    for every ``(xi, sigma2)``, with both proportional limits at ``xi = d / L`` (paper 1, Theorem 4.2
    (iii); chapter 5).  Returns a :class:`pandas.DataFrame` (one row per grid point)."""
    d = check_int("d", d, 1)
    rows = []
    for s2 in sigma2s:
        for xi in xis:
            xi = check_float("xi", xi, 0.0, lo_open=True)
            L = max(2, round(d / xi))
            xi_eff = d / L
            r_dgd = est.debiased_gd_risk(est.optimal_eta_debiased(d, L, s2), d, L, s2)
            r_b, se_b = est.bayes_risk(d, L, s2, n=n, seed=derive_seed(seed, "bayes-grid", len(rows)))
            lim_dgd, lim_b = est.gd_risk_proportional(xi_eff, s2), est.bayes_risk_proportional(xi_eff, s2)
            rows.append({"xi": xi_eff, "sigma2": s2, "d": d, "L": L, "R_dGD*": r_dgd, "R_Bayes": r_b,
                         "R_Bayes se": se_b, "ratio": r_dgd / r_b, "R_dGD* limit": lim_dgd,
                         "R_Bayes limit": lim_b, "ratio limit": lim_dgd / lim_b})
    return pd.DataFrame(rows)


def ratio_limits(xis: Sequence[float], sigma2s: Sequence[float], points: int = 200) -> pd.DataFrame:
    """Proportional limit of ``R_dGD(eta*) / R_Bayes`` on ``points`` log-spaced ``xi`` spanning
    ``xis`` (0.3 decades beyond each end): ``(points, len(sigma2s))``, index ``xi``, one column per
    noise level (paper 1, Theorem 4.2 (iii); the lines of chapter 5's ratio figure)."""
    points = check_int("points", points, 2)
    xi = np.logspace(np.log10(min(xis)) - 0.3, np.log10(max(xis)) + 0.3, points)
    cols = {s2: [est.gd_risk_proportional(x, s2) / est.bayes_risk_proportional(x, s2) for x in xi]
            for s2 in sigma2s}
    return pd.DataFrame(cols, index=pd.Index(xi, name="xi"))


def sup_ratio_limit(sigma2: float, points: int = 2001) -> float:
    """``sup_xi`` of the proportional limit of ``R_dGD(eta*) / R_Bayes`` at noise ``sigma2``, over
    ``points`` log-spaced ``xi in [1e-3, 1e3]`` (paper 1, Theorem 4.2 (iii); chapter 5)."""
    sigma2 = check_float("sigma2", sigma2, 0.0, lo_open=True)
    return max(est.gd_risk_proportional(x, sigma2) / est.bayes_risk_proportional(x, sigma2)
               for x in np.logspace(-3, 3, check_int("points", points, 2)))


def ratio_values(ratio_df: pd.DataFrame, data: DataConfig, bayes: float) -> dict:
    """Chapter 5's glued values of a :func:`bayes_ratio_grid` table: the largest finite-size ratio,
    the largest noise level and its largest ratio, and the exact ratio at the chapter's own
    ``(d, L, sigma2)``, ``R_dGD(eta*) / bayes`` (``bayes``: the Bayes risk of
    :func:`closed_form_checks`).  Paper 1, Theorem 4.2 (iii)."""
    s2_top = float(ratio_df["sigma2"].max())
    d, L, s2 = data.d, data.L, data.sigma2
    return {
        "ch5_rmax": float(ratio_df["ratio"].max()),
        "ch5_s2_top": s2_top,
        "ch5_ratio_top": float(ratio_df[ratio_df.sigma2 == s2_top]["ratio"].max()),
        "ch5_ratio_book": est.debiased_gd_risk(est.optimal_eta_debiased(d, L, s2), d, L, s2) / float(bayes),
    }


def bayes_limit_estimate(ratio_df: pd.DataFrame) -> Estimate:
    """Largest ``|ratio / limit - 1|`` over a :func:`bayes_ratio_grid` table: the finite-size ratio
    of exact optimal debiased GD risk over the Monte Carlo Bayes risk against the proportional limit
    of both (paper 1, F.3), with the Bayes risk's Monte Carlo error (Bonferroni over the grid)."""
    dev = ratio_df["ratio"] / ratio_df["ratio limit"] - 1
    se = ratio_df["ratio"] * ratio_df["R_Bayes se"] / ratio_df["R_Bayes"] / ratio_df["ratio limit"]
    return extreme(dev.to_numpy(), se.to_numpy(), "absmax", what=f"largest |ratio/limit - 1| of {len(dev)} grid points")


def proportional_specs(
    d: int, xis: Sequence[float], seeds: int, seed: int, sigma2: float, train_cfg: TrainConfig
) -> list[RunSpec]:
    """Two-head softmax models in the proportional regime: for every ``xi`` of ``xis``, ``seeds`` runs
    (seeds ``seed, seed + 1, ...``) at dimension ``d`` and context length ``L = max(2, round(d / xi))``,
    ordered by ``xi`` (paper 1, Theorem 4.2 (iii); chapter 5)."""
    d = check_int("d", d, 1)
    return [s for xi in xis
            for s in heads_sweep_specs(2, seeds, seed, DataConfig(d=d, L=max(2, round(d / xi)), sigma2=sigma2),
                                       train_cfg)]


def train_proportional(
    d: int, xis: Sequence[float], seeds: int, seed: int, sigma2: float, train_cfg: TrainConfig,
    device: str = "auto",
) -> dict[float, list[Run]]:
    """Train (or load) :func:`proportional_specs` as one call of the engine: ``{xi: runs}``."""
    flat = train(proportional_specs(d, xis, seeds, seed, sigma2, train_cfg), device=device)
    return {float(xi): flat[k * seeds:(k + 1) * seeds] for k, xi in enumerate(xis)}


def proportional_table(runs: Mapping[float, Sequence[Run]], n: int, seed: int, n_bayes: int = 4000) -> pd.DataFrame:
    """Trained models in the proportional regime against Theorem 4.2 (iii): per ``xi`` of ``runs``
    (:func:`train_proportional`), the models' mean loss over seeds on ``n`` shared sequences
    (purpose ``"proportional-test"``, index ``j`` of ``xi``) with its error (the test set's and the
    spread over seeds, :func:`~icl_lib.stats.seed_ratio`'s rule) and degrees of freedom (seeds - 1), the exact
    optimal debiased GD risk ``R_dGD*`` at that ``(d, L)``, the Bayes risk (``n_bayes`` designs,
    ``"proportional-bayes"``), the ratios ``loss / R_dGD* - 1`` and ``loss / R_Bayes`` with errors,
    ``R_dGD* / R_Bayes`` and its proportional limit at ``xi = d / L``, and how many runs ended in
    the positive/negative pattern.  One row per ``xi`` (chapter 5)."""
    rows = []
    for j, (xi, rs) in enumerate(runs.items()):
        data = rs[0].spec.data
        d, L, s2 = data.d, data.L, data.sigma2
        e = length_errors(stack_models(rs), data, [L], n, 1, derive_seed(seed, "proportional-test", j))[:, 0]
        R = e.shape[0]
        per_model = e.mean(-1)  # (R,)
        mean = float(e.mean())
        var = float(e.mean(0).var()) / e.shape[-1] + (float(per_model.var()) / R if R > 1 else 0.0)
        se = math.sqrt(var)
        r_dgd = est.debiased_gd_risk(est.optimal_eta_debiased(d, L, s2), d, L, s2)
        r_b, se_b = est.bayes_risk(d, L, s2, n=n_bayes, seed=derive_seed(seed, "proportional-bayes", j))
        ratio_b = mean / r_b
        rows.append({"xi": d / L, "d": d, "L": L, "pos/neg": sum(r.pattern().kind == "pos/neg" for r in rs),
                     "seeds": R, "loss": mean, "loss se": se, "df": R - 1 if R > 1 else np.nan,
                     "R_dGD*": r_dgd, "R_Bayes": r_b, "R_Bayes se": se_b,
                     "loss/R_dGD* - 1": mean / r_dgd - 1, "se (vs R_dGD*)": se / r_dgd,
                     "loss/R_Bayes": ratio_b, "se (vs R_Bayes)": ratio_b * math.hypot(se / mean, se_b / r_b),
                     "R_dGD*/R_Bayes": r_dgd / r_b,
                     "limit ratio": est.gd_risk_proportional(d / L, s2) / est.bayes_risk_proportional(d / L, s2)})
    return pd.DataFrame(rows).set_index("xi")


def proportional_estimate(table: pd.DataFrame) -> Estimate:
    """Largest ``|loss / R_dGD* - 1|`` over the ``xi`` of a :func:`proportional_table`, t intervals
    (seeds - 1 degrees of freedom; normal with one seed), Bonferroni over ``xi``: the trained
    models against the optimal debiased GD risk (paper 1, Theorem 4.2 (ii)-(iii); chapter 5)."""
    df = table["df"].to_numpy(dtype=float)
    return extreme(table["loss/R_dGD* - 1"].to_numpy(), table["se (vs R_dGD*)"].to_numpy(), "absmax", df=df,
                   what=f"largest |loss/R_dGD* - 1| of {len(table)} xi, mean over seeds")


# ----------------------------------------------------------------------------- chapter 5's models
# the 2-head variants of chapter 5, in training order: softmax, linear attention with a fixed
# normaliser (B.1) and three other normalised activations (B.2)
VARIANTS = ("softmax", "linear", "one_plus_tanh", "quadratic", "square")
ACTIVATIONS_B2 = ("softmax", "one_plus_tanh", "quadratic", "square")  # Table 1, Figures 8-10
LABELS = {  # f of each variant, as the chapter's tables and figures name it
    "softmax": "exp (softmax)",
    "one_plus_tanh": "1 + tanh(s)",
    "quadratic": "1 + s + s^2/2",
    "square": "(1 + s)^2",
    "linear": "linear, N = L_train",
}
def variant_specs(seeds: int, seed: int, data: DataConfig, train_cfg: TrainConfig) -> list[RunSpec]:
    """The runs of :func:`train_variants`: ``seeds`` 2-head models of every kind of :data:`VARIANTS`
    (the shared sweep's specifications with ``attention=kind``), grouped by kind.  Chapter 5."""
    return [s for a in VARIANTS for s in heads_sweep_specs(2, seeds, seed, data, train_cfg, attention=a)]


def train_variants(
    seeds: int, seed: int, data: DataConfig, train_cfg: TrainConfig, device: str = "auto"
) -> dict[str, list[Run]]:
    """Train (or load) ``seeds`` 2-head models of every kind of :data:`VARIANTS` with run seeds
    ``seed, seed + 1, ...`` (the specifications of the shared sweep with ``attention=kind``, so the
    softmax ones are the sweep's ``H = 2`` runs), as one call of the engine.  Paper 1, B.1 and
    B.2; chapter 5.  Returns ``{kind: runs}``."""
    flat = train(variant_specs(seeds, seed, data, train_cfg), device=device)
    return {a: flat[k * seeds:(k + 1) * seeds] for k, a in enumerate(VARIANTS)}


def posneg_runs(groups: Mapping[object, Sequence[Run]]) -> dict[object, list[Run]]:
    """The runs of every multi-head group (``H >= 2``) that ended in the positive/negative pattern
    of paper 1, Section 3 (``PatternSummary.kind == "pos/neg"``); single-head groups are left out.
    Chapter 5 measures its multi-head statements on these."""
    return {k: [r for r in rs if r.pattern().kind == "pos/neg"]
            for k, rs in groups.items() if rs and rs[0].spec.model.heads >= 2}


def kept_variants(variants: Mapping[str, Sequence[Run]]) -> dict[str, list[Run]]:
    """The 2-head variants chapter 5 compares: those in the positive/negative pattern (all of them
    when none is, and always all of the linear attention ones, which have no constant to cancel
    and so no reason to split into two signs; paper 1, B.1)."""
    pn = posneg_runs(variants)
    return {a: (list(rs) if a == "linear" else pn[a]) or list(rs) for a, rs in variants.items()}


def pattern_counts(groups: Mapping[object, Sequence[Run]]) -> dict[object, str]:
    """``"n/m"``: how many of each multi-head group's ``m`` runs ended in the positive/negative
    pattern (linear attention left out: see :func:`kept_variants`).  Chapter 5."""
    pn = posneg_runs({k: rs for k, rs in groups.items() if k != "linear"})
    return {k: f"{len(v)}/{len(groups[k])}" for k, v in pn.items()}


def median_abs_omega(runs: Sequence[Run]) -> float:
    """Median ``|omega_h|`` over all heads of ``runs`` (NaN without runs): the KQ scale of the
    trained multi-head models (paper 1, Section 3; chapter 5's size of the linearisation error)."""
    w = [abs(w) for r in runs for w in r.omega.tolist()]
    return float(np.median(w)) if w else NAN


def learned_rate(posneg: Mapping[int, Sequence[Run]], fallback: float) -> float:
    """Median learned rate ``eta = sum_h mu_h omega_h`` over every run of ``posneg``
    (:func:`posneg_runs` of the sweep); ``fallback`` when there is none.  The rate a trained
    multi-head model carries to other context lengths (paper 1, Figure 3; chapter 5)."""
    eta = [r.pattern().eta for rs in posneg.values() for r in rs]
    return float(np.median(eta)) if eta else float(fallback)


def stacked_circuits(runs: Sequence[Run]) -> tuple[torch.Tensor, torch.Tensor]:
    """The final circuits of runs with one head count, in float64: ``KQ (R, H, D, D)`` and
    ``OV (R, H, N, D)`` (paper 1, eq. (2.2)'s ``KQ_h = K_h^T Q_h / sqrt(D)``, ``OV_h``)."""
    KQ = torch.stack([r.KQ for r in runs]).double()  # (R, H, D, D)
    OV = torch.stack([r.OV for r in runs]).double()  # (R, H, N, D)
    return KQ, OV


def linearised(runs: Sequence[Run], d: int, c_f: float = 1.0) -> tuple[torch.Tensor, np.ndarray]:
    """Every run's linearised predictor (paper 1, Theorem 4.2 (i), B.2): the pre-conditioner
    ``Gamma = c_f sum_h mu_h KQ_h[:d, :d]`` ``(R, d, d)`` and the rate
    ``eta = c_f sum_h mu_h omega_h`` ``(R,)``.  Chapter 5."""
    KQ, OV = stacked_circuits(runs)
    return effective_preconditioner(KQ, OV, d, c_f), effective_rate(KQ, OV, d, c_f).numpy()


# ----------------------------------------------------------------------------- exact risks
def closed_form_checks(
    Gamma: torch.Tensor, eta: float, data: DataConfig, n: int, seed: int, n_bayes: int = 4000
) -> pd.DataFrame:
    """The exact risks of vanilla and debiased GD at step ``eta`` and pre-conditioned by ``Gamma``
    ``(d, d)``, against plain Monte Carlo on ``n`` sequences each (purpose ``"mc-check"``, one
    index per predictor); and the design-only Bayes risk (``n_bayes`` designs, ``"bayes-design"``)
    against the full Monte Carlo of the posterior mean (``"mc-bayes"``).  Paper 1, Section 4.3,
    Appendix F; chapter 5.  One row per predictor: closed form, Monte Carlo, se, and
    ``z = (MC - closed) / se`` (for Bayes with both standard errors)."""
    d, L, s2 = data.d, data.L, data.sigma2
    checks = {
        "vanilla GD, eta": (est.vanilla_gd_risk(eta, d, L, s2),
                            lambda b: est.vanilla_gd_predict(b, eta)),
        "debiased GD, eta": (est.debiased_gd_risk(eta, d, L, s2),
                             lambda b: est.debiased_gd_predict(b, eta)),
        "pre-cond. GD, Gamma": (est.preconditioned_gd_risk(Gamma, d, L, s2, debiased=False),
                                lambda b: est.vanilla_gd_predict(b, 1.0, Gamma)),
        "pre-cond. debiased GD, Gamma": (est.preconditioned_gd_risk(Gamma, d, L, s2),
                                         lambda b: est.debiased_gd_predict(b, 1.0, Gamma)),
    }
    rows = []
    for k, (name, (closed, predict)) in enumerate(checks.items()):
        m, se = est.mc_risk(predict, data, n=n, seed=derive_seed(seed, "mc-check", k))
        rows.append({"predictor": name, "closed form": closed, "Monte Carlo": m, "se": se,
                     "z": (m - closed) / se})
    bayes_x, bayes_x_se = est.bayes_risk(d, L, s2, n=n_bayes, seed=derive_seed(seed, "bayes-design"))
    bayes_full, bayes_full_se = est.bayes_risk_mc(data, n=n, seed=derive_seed(seed, "mc-bayes"))
    rows.append({"predictor": "Bayes (design-only MC vs full MC)", "closed form": bayes_x,
                 "Monte Carlo": bayes_full, "se": bayes_full_se,
                 "z": (bayes_full - bayes_x) / np.hypot(bayes_full_se, bayes_x_se)})
    return pd.DataFrame(rows).set_index("predictor")


def off_diagonal_mass(Gamma: torch.Tensor) -> float:
    """``||Gamma - diag(Gamma)|| / ||diag(Gamma)||`` (Frobenius) of one ``(d, d)`` pre-conditioner:
    how far a learned ``Gamma`` is from a scaled identity's shape (chapter 5)."""
    diag = torch.diagonal(Gamma)  # (d,)
    return float((Gamma - torch.diag(diag)).norm() / diag.norm())


# ----------------------------------------------------------------------------- Figure 3
def group_errors(
    groups: Mapping[object, Sequence[Run]], data: DataConfig, Ls: Sequence[int], n: int, n_sets: int, seed: int
) -> dict[object, torch.Tensor]:
    """:func:`length_errors` of every run of every group on the same test sets (purpose
    ``"length-sweep"``; one stacked evaluation per group, so groups may differ in architecture):
    ``{group: (R_group, len(Ls), n_sets n)}``, groups with no run left out.  Chapter 5 (the sweep
    by ``H``; the 2-head variants by kind)."""
    s = derive_seed(seed, "length-sweep")
    return {g: length_errors(stack_models(rs), data, Ls, n, n_sets, s) for g, rs in groups.items() if rs}


def posneg_index(groups: Mapping[object, Sequence[Run]]) -> dict[object, list[int]]:
    """Per group, the positions of its runs that ended in the positive/negative pattern
    (:func:`posneg_runs`; every position for single-head groups)."""
    return {g: [k for k, r in enumerate(rs) if rs[0].spec.model.heads == 1 or r.pattern().kind == "pos/neg"]
            for g, rs in groups.items()}


def length_curves(
    errors: Mapping[int, torch.Tensor], Ls: Sequence[int], keep: Mapping[int, Sequence[int]] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Length generalisation of the sweep (paper 1, Figure 3) from :func:`group_errors`: per ``H``
    the loss averaged over the seeds ``keep[H]`` (all when ``keep`` is ``None``) and the standard
    error of that average over the test sequences, ``(len(Ls), groups)`` each, one column per ``H``
    with at least one kept model, index ``L`` (the grid ``Ls`` of the errors; chapter 5)."""
    curve, curve_se = {}, {}
    for H, e in errors.items():
        idx = list(range(e.shape[0])) if keep is None else list(keep.get(H, []))
        if idx:
            avg = e[idx].mean(0)  # (|Ls|, N): the seed average per sequence
            curve[H] = avg.mean(-1).numpy()
            curve_se[H] = (avg.std(-1) / math.sqrt(avg.shape[-1])).numpy()
    index = pd.Index(check_lengths(Ls), name="L")
    return pd.DataFrame(curve, index=index), pd.DataFrame(curve_se, index=index)


def length_table(curve: pd.DataFrame, ref: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """The values behind chapter 5's Figure 3: the loss of every ``H`` (columns ``H=1, ...``) and
    the reference risks of :func:`reference_curves` (without the Bayes standard error)."""
    refs = pd.DataFrame({k: v for k, v in ref.items() if k != "Bayes se"}, index=curve.index)
    return pd.concat([curve.rename(columns="H={}".format), refs], axis=1)


def _seed_mean(e: torch.Tensor) -> tuple[float, float, float | None]:
    """Mean loss of the models ``e (R, n)`` (squared errors on shared sequences), its error (the test
    set's and the spread over seeds, as :func:`~icl_lib.stats.seed_ratio`) and degrees of freedom (``R - 1``)."""
    e = e.double()
    R, n = e.shape
    var = float(e.mean(0).var()) / n + (float(e.mean(-1).var()) / R if R > 1 else 0.0)
    return float(e.mean()), math.sqrt(var), (R - 1 if R > 1 else None)


def length_estimates(
    errors: Mapping[int, torch.Tensor], keep: Mapping[int, Sequence[int]], ref: Mapping[str, np.ndarray],
    Ls: Sequence[int], tol: float,
) -> tuple[dict, dict]:
    """Chapter 5's claims on Figure 3 (paper 1, Section 3) from :func:`group_errors` of the sweep,
    the kept (positive/negative) seeds ``keep`` and :func:`reference_curves` ``ref``:

    * ``decreasing`` -- the largest relative change ``loss(L') / loss(L) - 1`` between consecutive
      lengths of the grid over *every* model (all ``H``, all seeds; independent test sets);
    * ``spread``, ``spread all seeds`` -- the largest ``loss_H / loss_H' - 1`` over lengths and
      pairs of head counts ``H, H' >= 2`` (kept seeds / all seeds; :func:`~icl_lib.stats.seed_ratio`);
    * ``track`` -- the largest ``|loss_H / R_dGD(eta_learned) - 1|`` over ``H >= 2`` and lengths;
    * ``rivals`` -- at the shortest length, the smallest over ``H >= 2`` and two rival predictors
      (vanilla GD at the learned rate, debiased GD at ``eta*(L)``) of
      ``(|loss - R_rival| - |loss - R_dGD|) / R_dGD``: positive when the loss is nearer debiased GD
      at the learned rate;
    * ``beats single``, ``beats single all seeds`` -- the largest ``loss_H / loss_1 - 1`` over
      ``H >= 2`` and lengths.

    Each an :class:`~icl_lib.stats.Estimate` with Bonferroni-simultaneous intervals (``None``
    where its groups are missing).  ``values`` (glue keys): the deviation ``track``, the ``L`` and
    loss ratio where it is largest, the ratio to vanilla GD at the shortest ``L``, and
    ``spread``; NaN without ``H >= 2``.  ``tol`` is the tracking tolerance (glued)."""
    Ls = check_lengths(Ls)
    multi = [H for H in errors if H >= 2 and keep.get(H)]
    out: dict = dict.fromkeys(("decreasing", "spread", "spread all seeds", "track", "rivals", "beats single",
                               "beats single all seeds"))
    values = dict.fromkeys(("ch5_track", "ch5_track_L", "ch5_track_ratio", "ch5_gd_ratio_short", "ch5_spread"), NAN)
    values["ch5_track_tol"] = float(tol)
    # decreasing: every model, consecutive lengths, independent test sets
    v, s = [], []
    for e in errors.values():
        m = e.mean(-1).numpy()  # (R, |Ls|)
        se = (e.std(-1) / math.sqrt(e.shape[-1])).numpy()
        ratio = m[:, 1:] / m[:, :-1]
        v.append(ratio - 1)
        s.append(ratio * np.hypot(se[:, 1:] / m[:, 1:], se[:, :-1] / m[:, :-1]))
    if v and len(Ls) >= 2:
        out["decreasing"] = extreme(np.concatenate([x.ravel() for x in v]), np.concatenate([x.ravel() for x in s]),
                                    "max", what="largest loss(L')/loss(L) - 1 of every model and step of the grid")
    if not multi:
        return out, values

    def pairs(sel):
        vals, ses, dfs = [], [], []
        for H in multi:
            for H2 in multi:
                if H2 != H:
                    for j in range(len(Ls)):
                        r, se, df = seed_ratio(errors[H][sel(H), j], errors[H2][sel(H2), j])
                        vals.append(r), ses.append(se), dfs.append(np.nan if df is None else df)
        return vals, ses, dfs

    kept = lambda H: list(keep[H])  # noqa: E731
    every = lambda H: list(range(errors[H].shape[0]))  # noqa: E731
    if len(multi) >= 2:
        for key, sel, which in (("spread", kept, "pos/neg seeds"), ("spread all seeds", every, "all seeds")):
            vals, ses, dfs = pairs(sel)
            out[key] = extreme(vals, ses, "max", df=dfs,
                               what=f"largest loss_H/loss_H' - 1 over L and H, H' >= 2 ({which})")
        values["ch5_spread"] = out["spread"].value
    # tracking debiased GD at the learned rate, and its rivals at the shortest length
    dgd = np.asarray(ref["debiased GD"], dtype=float)
    stats = {H: [_seed_mean(errors[H][kept(H), j]) for j in range(len(Ls))] for H in multi}
    dev = np.array([[m / dgd[j] - 1 for j, (m, _, _) in enumerate(stats[H])] for H in multi])
    out["track"] = extreme(dev.ravel(), np.array([[se / dgd[j] for j, (_, se, _) in enumerate(stats[H])]
                                                  for H in multi]).ravel(), "absmax",
                           df=[np.nan if df is None else df for H in multi for (_, _, df) in stats[H]],
                           what="largest |loss/R_dGD(eta_learned) - 1| over H >= 2 and L")
    jt = int(np.unravel_index(np.argmax(np.abs(dev)), dev.shape)[1])
    loss = np.array([[m for (m, _, _) in stats[H]] for H in multi])  # (|multi|, |Ls|)
    values.update({"ch5_track": out["track"].value, "ch5_track_L": int(Ls[jt]),
                   "ch5_track_ratio": float(loss[:, jt].mean() / dgd[jt]),
                   "ch5_gd_ratio_short": float(loss[:, 0].mean() / ref["vanilla GD"][0])})
    rivals = {"vanilla GD": ref["vanilla GD"][0], "debiased GD, eta*(L)": ref["debiased GD, eta*(L)"][0]}
    m_all = len(multi) * len(rivals)
    qv, qlo, qhi = [], [], []
    for H in multi:
        m, se, df = stats[H][0]
        q = _quantile(LEVEL, m_all, df)
        for R_riv in rivals.values():
            f = lambda x, a=float(R_riv), b=float(dgd[0]): (abs(x - a) - abs(x - b)) / b  # noqa: E731
            lo, hi = interval_image(f, m - q * se, m + q * se, breaks=(float(R_riv), float(dgd[0])))
            qv.append(f(m)), qlo.append(lo), qhi.append(hi)
    out["rivals"] = _extreme_of_intervals(qv, qlo, qhi, "min",
                                          f"smallest (|loss - R_rival| - |loss - R_dGD|)/R_dGD at L = {Ls[0]}")
    # multi-head against the single head
    if 1 in errors:
        for key, sel in (("beats single", kept), ("beats single all seeds", every)):
            vals, ses, dfs = [], [], []
            for H in multi:
                for j in range(len(Ls)):
                    r, se, df = seed_ratio(errors[H][sel(H), j], errors[1][:, j])
                    vals.append(r), ses.append(se), dfs.append(np.nan if df is None else df)
            out[key] = extreme(vals, ses, "max", df=dfs, what=f"largest loss_H/loss_1 - 1 over H >= 2 and L ({key})")
    return out, values


def labelled(table: pd.DataFrame, fmt: str = "{}", drop: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """The columns of ``table`` (but ``drop``) as ``{fmt.format(column): values}``, the form of the
    curves of :func:`~icl_lib.figures.plot_against_L` (chapter 5: ``"H = {}"``)."""
    return {fmt.format(c): table[c].to_numpy() for c in table.columns if c not in drop}


def reference_lines(ref: Mapping[str, np.ndarray], eta: float, bayes: bool = True) -> dict:
    """The reference curves of :func:`reference_curves` labelled for a loss-against-``L`` figure:
    vanilla and debiased GD at ``eta``, debiased GD at ``eta*(L)`` and, if ``bayes``, the Bayes
    risk (chapter 5's Figures 3 and 10)."""
    lines = {f"vanilla GD, eta = {eta:.3f}": ref["vanilla GD"],
             f"debiased GD, eta = {eta:.3f}": ref["debiased GD"],
             "debiased GD, eta*(L)": ref["debiased GD, eta*(L)"]}
    if bayes:
        lines["Bayes"] = ref["Bayes"]
    return lines


def median_curves(
    errors: Mapping[str, torch.Tensor], labels: Mapping[str, str]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Per kind of ``labels``, the median over seeds of the per-model losses of :func:`group_errors`
    ``(R, |Ls|, N)`` and the median over seeds of their standard errors over the test sequences,
    keyed by the label: the curves of chapter 5's Figure 10 and B.1 figure."""
    curves, ses = {}, {}
    for a, label in labels.items():
        e = errors[a]
        curves[label] = e.mean(-1).median(0).values.numpy()
        ses[label] = (e.std(-1) / math.sqrt(e.shape[-1])).median(0).values.numpy()
    return curves, ses


# ----------------------------------------------------------------------------- prediction level (curves)
def prediction_gap_curves(
    runs: Sequence[Run],
    Gamma: torch.Tensor,
    eta: np.ndarray,
    data: DataConfig,
    Ls: Sequence[int],
    n: int,
    seed: int,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Prediction-level agreement (paper 1, Section 4.3): at every ``L``, the mean squared
    difference between every run's predictions and debiased and vanilla GD at its own rate
    ``eta (R,)``, pre-conditioned debiased GD at its own ``Gamma (R, d, d)``, debiased GD at
    ``eta*(L)`` and the Bayes predictor, on ``n`` shared sequences (:func:`prediction_gaps`,
    purpose ``"prediction-gaps"``, index ``j`` of ``L``), with the runs' ICL loss.  Returns the
    medians over runs of the means and of their standard errors, ``(len(Ls), 6)`` each, index
    ``L`` (chapter 5)."""
    model = stack_models(runs)
    d, s2, R = data.d, data.sigma2, len(runs)

    def per_run(fn):
        return lambda b: torch.stack([fn(b, r) for r in range(R)])  # (R, B)

    refs = {
        "debiased GD (own eta)": per_run(lambda b, r: est.debiased_gd_predict(b, float(eta[r]))),
        "vanilla GD (own eta)": per_run(lambda b, r: est.vanilla_gd_predict(b, float(eta[r]))),
        "pre-cond. debiased GD (own Gamma)":
            per_run(lambda b, r: est.debiased_gd_predict(b, 1.0, Gamma[r])),
        "debiased GD, eta*(L)":
            lambda b: est.debiased_gd_predict(b, est.optimal_eta_debiased(d, b.L, s2)),
        "Bayes": lambda b: est.ridge_predict(b, s2 * d),
    }
    Ls = check_lengths(Ls)
    gap = {k: [] for k in [*refs, "target"]}
    gap_se = {k: [] for k in gap}
    for j, Lj in enumerate(Ls):
        g = prediction_gaps(model, data, refs, n=n, seed=derive_seed(seed, "prediction-gaps", j), L=Lj)
        for k, (m, se) in g.items():
            gap[k].append(float(np.median(m)))
            gap_se[k].append(float(np.median(se)))
    index = pd.Index(Ls, name="L")
    rename = {"target": "ICL loss"}
    return (pd.DataFrame(gap, index=index).rename(columns=rename),
            pd.DataFrame(gap_se, index=index).rename(columns=rename))


def gap_values(gaps: pd.DataFrame, L: int) -> dict:
    """Chapter 5's glued values of :func:`prediction_gap_curves` (training length ``L``): the three
    gaps at ``L``, the shortest ``L'`` of the grid and the ratio gap(debiased GD) / gap(vanilla GD)
    there."""
    dgd, gd = gaps["debiased GD (own eta)"], gaps["vanilla GD (own eta)"]
    L0 = int(gaps.index[0])
    return {
        "ch5_gap_ratio_smallL": float(dgd[L0]) / float(gd[L0]),
        "ch5_gap_dgd_Ltrain": float(dgd[L]),
        "ch5_gap_pdgd_Ltrain": float(gaps.at[L, "pre-cond. debiased GD (own Gamma)"]),
        "ch5_gap_bayes_Ltrain": float(gaps.at[L, "Bayes"]),
        "ch5_L_small": L0,
    }


def gap_estimate(
    runs: Sequence[Run], eta: np.ndarray, data: DataConfig, Ls: Sequence[int], n: int, seed: int
) -> Estimate | None:
    """The largest, over every run and every ``L' <= L_train // 2`` of the grid ``Ls``, of the ratio
    gap(debiased GD) / gap(vanilla GD) of mean squared prediction differences at the run's own rate
    ``eta (R,)`` (paired on the sequences of :func:`prediction_gap_curves`, purpose
    ``"prediction-gaps"``, index ``j`` of ``L'`` in ``Ls``; delta-method errors, Bonferroni).
    Below 1: every model is nearer debiased than vanilla GD at short contexts (paper 1, Section 4.3).
    ``None`` without such an ``L'``.  Chapter 5."""
    Ls = check_lengths(Ls)
    small = [(j, Lj) for j, Lj in enumerate(Ls) if Lj <= data.L // 2]
    if not small or not runs:
        return None
    model, R = stack_models(runs), len(runs)
    refs = {"dGD": lambda b: torch.stack([est.debiased_gd_predict(b, float(eta[r])) for r in range(R)]),
            "GD": lambda b: torch.stack([est.vanilla_gd_predict(b, float(eta[r])) for r in range(R)])}
    vals, ses = [], []
    for j, Lj in small:
        g = prediction_gaps(model, data, refs, n=n, seed=derive_seed(seed, "prediction-gaps", j), L=Lj, raw=True)
        rel, se = paired_ratio(g["dGD"].numpy(), g["GD"].numpy())  # (R,) each
        vals.extend(rel + 1), ses.extend(se)
    return extreme(vals, ses, "max", what=f"largest gap(dGD)/gap(GD) of {R} models at L <= {data.L // 2}")


# ----------------------------------------------------------------------------- the single head
def _rel_dist(a: float, b: float) -> float:
    """``|a / b - 1|``; infinite when ``b = 0 != a`` (a bandwidth search that ends at 0)."""
    if b == 0:
        return 0.0 if a == 0 else math.inf
    return abs(a / b - 1)


def approx_loss_single_head(d: int, L: int, sigma2: float) -> tuple[float, float]:
    """The minimiser ``(omega*, mu*)`` of the approximate loss (4.1) for one head:
    ``L~ = 1 + s2 - 2 mu omega + mu^2 (omega^2 + (1 + s2) / L exp(d omega^2))`` is smallest at
    ``omega* = 1 / sqrt(d)`` and ``mu* = mu*(omega*) = sqrt(d) / (1 + (1 + s2) e d / L)`` (D.17; the
    single-head reference of the authors' notebooks, and the bandwidth of paper 1, Section 4.3)."""
    d, L, s2 = check_int("d", d, 1), check_int("L", L, 1), check_float("sigma2", sigma2, 0.0)
    return 1 / math.sqrt(d), math.sqrt(d) / (1 + (1 + s2) * math.e * d / L)


def single_head_vs_kernels(runs: Sequence[Run], data: DataConfig, n: int, seed: int) -> tuple:
    """Trained single heads against kernel regressors (paper 1, Section 4.3): the best
    Nadaraya-Watson (``mu = 1``) and the best scaled kernel regressor (free ``mu``), searched on
    one sample of ``n`` sequences (:func:`kernel_regressor_search`, purpose ``"kernel-search"``)
    and evaluated with every run on a fresh one (:func:`paired_losses`, ``"kernel-eval"``); and
    the minimiser of the approximate loss (4.1), :func:`approx_loss_single_head`.

    Returns ``(table, per_seed, estimates, values)``: the predictors' ``omega``, ``mu``, loss and se
    (the trained heads' medians over seeds); per seed ``|omega|``, ``|mu|``, loss, the relative
    excess loss over the best scaled kernel regressor and the paired ``z`` of the loss difference to
    each regressor; ``estimates``: medians over seeds with order-statistic intervals
    (:func:`~icl_lib.stats.median_ci`) of the excess loss (``"excess"``), of ``|omega| / omega_best``
    (``"omega"``) and of ``|mu| / mu_best`` (``"mu"``), with the rivals' values in the same units
    (``"rival ..."``: Nadaraya-Watson proper and the approximate loss's optimum); ``values`` (glue
    keys).  Without runs: ``None, None, {}`` and NaN (counts 0).  Chapter 5."""
    keys = ("ch5_nw_omega", "ch5_m1", "ch5_w1", "ch5_nw_loss", "ch5_kr_loss", "ch5_kr_omega", "ch5_kr_mu",
            "ch5_single_loss", "ch5_approx_omega", "ch5_approx_mu")
    counts = ("ch5_nw_seeds_better", "ch5_nw_seeds", "ch5_nw_seeds_worse", "ch5_kr_seeds_worse")
    if not runs:
        return None, None, {}, {**dict.fromkeys(keys, NAN), **dict.fromkeys(counts, 0)}
    nw = kernel_regressor_search(data, free_mu=False, n=n, seed=derive_seed(seed, "kernel-search"))
    kr = kernel_regressor_search(data, free_mu=True, n=n, seed=derive_seed(seed, "kernel-search"))
    w_app, m_app = approx_loss_single_head(data.d, data.L, data.sigma2)
    pl = paired_losses(stack_models(runs), data, {
        "NW": lambda b: est.scaled_nw_predict(b, nw["omega"], 1.0),
        "kernel": lambda b: est.scaled_nw_predict(b, kr["omega"], kr["mu"]),
        "approx": lambda b: est.scaled_nw_predict(b, w_app, m_app),
    }, n=n, seed=derive_seed(seed, "kernel-eval"))
    omega = np.array([abs(float(r.omega[0])) for r in runs])  # (R,) |omega| of each single head
    mu = np.array([abs(float(r.mu[0])) for r in runs])
    w1, m1 = float(np.median(omega)), float(np.median(mu))
    loss_kr = float(pl["kernel"]["loss"])
    table = pd.DataFrame([
        {"predictor": "trained single head (median over seeds)", "omega": w1, "mu": m1,
         "ICL loss": float(np.median(pl["model"]["loss"])), "se": float(np.median(pl["model"]["se"]))},
        {"predictor": "best Nadaraya-Watson (mu = 1)", "omega": nw["omega"], "mu": 1.0,
         "ICL loss": float(pl["NW"]["loss"]), "se": float(pl["NW"]["se"])},
        {"predictor": "best scaled kernel regressor (free mu)", "omega": kr["omega"], "mu": kr["mu"],
         "ICL loss": loss_kr, "se": float(pl["kernel"]["se"])},
        {"predictor": "minimiser of the approximate loss (4.1)", "omega": w_app, "mu": m_app,
         "ICL loss": float(pl["approx"]["loss"]), "se": float(pl["approx"]["se"])},
    ]).set_index("predictor")
    excess = pl["kernel"]["diff"] / loss_kr  # (R,) relative excess loss of each head
    z_nw = pl["NW"]["diff"] / pl["NW"]["diff_se"]  # (R,)
    z_kr = pl["kernel"]["diff"] / pl["kernel"]["diff_se"]  # (R,)
    per_seed = pd.DataFrame({"seed": [r.spec.seed for r in runs], "|omega|": omega, "|mu|": mu,
                             "ICL loss": pl["model"]["loss"], "excess over best kernel": excess,
                             "minus best NW (z)": z_nw, "minus best kernel (z)": z_kr}).set_index("seed")
    estimates = {
        "excess": median_ci(excess), "omega": median_ci(omega / kr["omega"]), "mu": median_ci(mu / kr["mu"]),
        "rival excess NW": (float(pl["NW"]["loss"]) - loss_kr) / loss_kr,
        "rival omega approx": w_app / kr["omega"], "rival mu approx": m_app / kr["mu"],
        "rival mu NW": 1.0 / kr["mu"],
    }
    values = {
        "ch5_nw_omega": nw["omega"], "ch5_m1": m1, "ch5_w1": w1,
        "ch5_nw_loss": float(pl["NW"]["loss"]), "ch5_kr_loss": loss_kr,
        "ch5_kr_omega": kr["omega"], "ch5_kr_mu": kr["mu"],
        "ch5_single_loss": float(np.median(pl["model"]["loss"])),
        "ch5_approx_omega": w_app, "ch5_approx_mu": m_app,
        "ch5_nw_seeds_better": int((z_nw < -3).sum()), "ch5_nw_seeds": len(z_nw),
        "ch5_nw_seeds_worse": int((z_nw > 3).sum()), "ch5_kr_seeds_worse": int((z_kr > 3).sum()),
    }
    return table, per_seed, estimates, values


# ----------------------------------------------------------------------------- B.1 and B.2
def variant_errors(
    kept: Mapping[str, Sequence[Run]], data: DataConfig, Ls: Sequence[int], n: int, n_sets: int, seed: int
) -> dict[str, torch.Tensor]:
    """:func:`length_errors` of every variant's kept runs on the test sets of the sweep's
    :func:`group_errors` (same purpose ``"length-sweep"``): ``{kind: (R, len(Ls), n_sets n)}``.
    Paper 1, B.1 and Figure 10; chapter 5."""
    return group_errors(kept, data, Ls, n, n_sets, seed)


def linear_vs_softmax(
    errors: Mapping[str, torch.Tensor], kept: Mapping[str, Sequence[Run]], data: DataConfig, Ls: Sequence[int],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Linear attention with the fixed normaliser ``N = L_train`` against softmax (paper 1, B.1):
    the median losses over seeds (:func:`median_curves`) and the closed-form predictions, medians
    over each model's own circuits -- vanilla GD pre-conditioned by ``Gamma L / N``
    (:func:`~icl_lib.estimators.preconditioned_gd_risk`) for linear attention, debiased GD at the
    learned rate for softmax.  Returns the table (``softmax``, ``linear``, ``predicted softmax``,
    ``predicted linear``) and the two losses' standard errors, index ``L`` (chapter 5)."""
    d, L, s2 = data.d, data.L, data.sigma2
    Ls = check_lengths(Ls)
    G_lin = linearised(kept["linear"], d)[0]  # (R, d, d)
    eta_soft = linearised(kept["softmax"], d)[1]  # (R,)
    pred_lin = np.array([[est.preconditioned_gd_risk(g * Lj / L, d, Lj, s2, debiased=False)
                          for Lj in Ls] for g in G_lin])  # (R, |Ls|)
    pred_soft = np.array([[est.debiased_gd_risk(float(e), d, Lj, s2) for Lj in Ls]
                          for e in eta_soft])  # (R, |Ls|)
    med, med_se = median_curves(errors, {"softmax": "softmax", "linear": "linear"})
    index = pd.Index(Ls, name="L")
    table = pd.DataFrame({**med, "predicted softmax": np.median(pred_soft, 0),
                          "predicted linear": np.median(pred_lin, 0)}, index=index)
    return table, pd.DataFrame(med_se, index=index)


def linear_estimates(
    errors: Mapping[str, torch.Tensor], kept: Mapping[str, Sequence[Run]], data: DataConfig, Ls: Sequence[int],
) -> tuple[dict, pd.DataFrame]:
    """Chapter 5's claims on linear attention (paper 1, B.1), from :func:`variant_errors`:

    * ``same`` -- ``loss_lin / loss_soft - 1`` at the training length (means over seeds,
      :func:`~icl_lib.stats.seed_ratio`, its t interval);
    * ``fixed`` -- the smallest over linear runs and lengths ``L != L_train`` of
      ``(|loss - R_adaptive| - |loss - R_fixed|) / R_fixed``, where ``R_fixed`` is the exact risk of
      vanilla GD with the run's ``Gamma L / N`` (the fixed normaliser ``N``) and ``R_adaptive`` with
      ``Gamma`` (a normaliser that follows ``L``): positive when the loss follows the fixed one;
    * ``beyond`` -- the smallest ``loss_lin / loss_soft - 1`` over ``L > L_train`` (``None`` if the
      grid has none): positive when linear attention loses at every longer context.

    Bonferroni-simultaneous intervals.  Also returns the table of ``loss_lin / loss_soft - 1`` at
    every ``L`` with its 95% interval (one length at a time)."""
    d, L, s2 = data.d, data.L, data.sigma2
    Ls = check_lengths(Ls)
    jL = Ls.index(L)
    lin, soft = errors["linear"], errors["softmax"]
    rows = []
    for j, Lj in enumerate(Ls):
        r, se, df = seed_ratio(lin[:, j], soft[:, j])
        q = _quantile(LEVEL, 1, df)
        rows.append({"L": Lj, "loss_lin/loss_soft - 1": r, "lo": r - q * se, "hi": r + q * se, "se": se,
                     "df": np.nan if df is None else df})
    table = pd.DataFrame(rows).set_index("L")
    same = table.loc[L]
    out = {"same": Estimate(float(same["loss_lin/loss_soft - 1"]), float(same["lo"]), float(same["hi"]), LEVEL,
                            "ratio of mean losses over seeds - 1, test-set and seed errors")}
    beyond = table[table.index > L]
    out["beyond"] = (extreme(beyond["loss_lin/loss_soft - 1"], beyond["se"], "min",
                             df=beyond["df"].to_numpy(), what=f"smallest loss_lin/loss_soft - 1 over L > {L}")
                     if len(beyond) else None)
    G = linearised(kept["linear"], d)[0]  # (R, d, d)
    others = [j for j in range(len(Ls)) if j != jL]
    m_all = len(others) * lin.shape[0]
    q = _quantile(LEVEL, max(m_all, 1))
    vals, los, his = [], [], []
    for r in range(lin.shape[0]):
        for j in others:
            Lj = Ls[j]
            m = float(lin[r, j].mean())
            se = float(lin[r, j].std()) / math.sqrt(lin.shape[-1])
            fixed = est.preconditioned_gd_risk(G[r] * Lj / L, d, Lj, s2, debiased=False)
            adapt = est.preconditioned_gd_risk(G[r], d, Lj, s2, debiased=False)
            f = lambda x, a=adapt, b=fixed: (abs(x - a) - abs(x - b)) / b  # noqa: E731
            lo, hi = interval_image(f, m - q * se, m + q * se, breaks=(adapt, fixed))
            vals.append(f(m)), los.append(lo), his.append(hi)
    out["fixed"] = (_extreme_of_intervals(vals, los, his, "min",
                                          "smallest (|loss - R_adaptive| - |loss - R_fixed|)/R_fixed over runs and L")
                    if vals else None)
    return out, table


@torch.no_grad()
def activation_rates(kept: Mapping[str, Sequence[Run]], data: DataConfig, n: int, seed: int) -> dict[str, pd.DataFrame]:
    """Per kind of :data:`ACTIVATIONS_B2` and linear attention, one row per kept run: ``|omega|`` and
    ``|mu|`` (means over the heads), the parameter-level rate ``c_f sum_h mu_h omega_h`` and the
    realised rate (:func:`realised_rate` on ``n`` sequences, purpose ``"realised-rate"``), index
    the run seed (paper 1, Table 1; chapter 5)."""
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
    """Paper 1's Table 1 per activation of :data:`ACTIVATIONS_B2` and for linear attention (medians
    over the kept runs of :func:`activation_rates`): ``c_f``, ``|omega|``, ``|mu|``, the
    parameter-level rate, the realised rate, its third-order prediction (:func:`rate_correction`),
    the positive/negative runs among all (``"k/n"``) and the loss at the training length (from
    :func:`variant_errors` on the grid ``Ls``).  Index ``f`` (:data:`LABELS`).  Chapter 5."""
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
    """Spread ``max / min - 1`` over the activations of :data:`ACTIVATIONS_B2` of the mean over
    kept runs of ``column`` of :func:`activation_rates` (``"realised eta"`` or ``"c_f sum mu
    omega"``), with an interval from each activation's t interval (seeds - 1 degrees of freedom,
    Bonferroni over the activations; an activation with one run has an unbounded interval): from
    ``max(0, max_a lo_a / min_b hi_b - 1)`` to ``max_a hi_a / min_b lo_b - 1``.  Also returns the
    per-activation means and intervals.  Paper 1, Table 1 ("the effective learning rates remain
    remarkably consistent across all activation functions"); chapter 5."""
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
