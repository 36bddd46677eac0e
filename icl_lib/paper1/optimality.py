"""What the trained attention computes and how good it is (paper 1, Section 4.3, Theorem 4.2, B.1, B.2).

Chapter 5's measurements, built on :mod:`icl_lib.estimators` and :mod:`icl_lib.circuits`:

* :func:`length_sweep` -- ICL loss of every model of an ensemble at several context lengths ``L``,
  on independent test sets (Figure 3, B.1, Figure 10);
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
* :func:`bayes_ratio_grid`, :func:`ratio_limits`, :func:`sup_ratio_limit` -- optimal debiased GD
  risk over the Bayes risk in the proportional regime, at finite ``d`` and in the limit
  (Theorem 4.2 (iii)).

:func:`check_lengths` and :func:`check_heads` validate the chapter's ``Ls`` and ``heads``.

The chapter's sections, each one call returning a table and the values the chapter glues (dicts
keyed by glue name):

* the trained models -- :func:`train_variants` (the 2-head variants of B.1 and B.2),
  :func:`posneg_runs`, :func:`kept_variants`, :func:`pattern_counts`, :func:`median_abs_omega`,
  :func:`learned_rate`, :func:`stacked_circuits`, :func:`linearised`;
* exact risks -- :func:`closed_form_checks`, :func:`off_diagonal_mass`;
* length generalisation -- :func:`length_curves`, :func:`length_table`, :func:`length_checks`,
  :func:`labelled`, :func:`reference_lines`, :func:`median_curves`;
* prediction level -- :func:`prediction_gap_curves`, :func:`gap_checks`;
* Theorem 4.2 (iii) -- :func:`ratio_checks`;
* the single head -- :func:`single_head_vs_kernels`;
* B.1 and B.2 -- :func:`variant_losses`, :func:`linear_vs_softmax`, :func:`linear_checks`,
  :func:`activation_table`, :func:`rate_spreads`.

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
from ..models import ACTIVATIONS
from ..seeding import derive_seed
from ..validate import check_float, check_int, fail
from .sweeps import as_heads, heads_sweep_specs

__all__ = [
    "check_lengths",
    "check_heads",
    "length_sweep",
    "reference_curves",
    "activation_coefficient",
    "TAYLOR",
    "rate_correction",
    "realised_rate",
    "prediction_gaps",
    "paired_losses",
    "kernel_regressor_search",
    "bayes_ratio_grid",
    "ratio_limits",
    "sup_ratio_limit",
    "VARIANTS",
    "ACTIVATIONS_B2",
    "LABELS",
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
    "length_curves",
    "length_table",
    "length_checks",
    "labelled",
    "reference_lines",
    "median_curves",
    "prediction_gap_curves",
    "gap_checks",
    "ratio_checks",
    "single_head_vs_kernels",
    "variant_losses",
    "linear_vs_softmax",
    "linear_checks",
    "activation_table",
    "rate_spreads",
]


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


# ----------------------------------------------------------------------------- losses against L
@torch.no_grad()
def length_sweep(model, data: DataConfig, Ls: Sequence[int], n: int, n_sets: int, seed: int) -> torch.Tensor:
    """ICL loss of every model of ``model`` (an :class:`~icl_lib.models.AttentionEnsemble`) at every
    ``L`` of ``Ls`` on ``n_sets`` independent test sets of ``n`` sequences each, shared by all models.

    Returns ``(R, len(Ls), n_sets)``.  Paper 1, Figure 3 (length generalisation); chapter 5.
    """
    Ls = check_lengths(Ls)
    n_sets = check_int("n_sets", n_sets, 1)
    out = torch.empty(model.R, len(Ls), n_sets, dtype=torch.float64)
    for j, L in enumerate(Ls):
        for k in range(n_sets):
            m, _ = est.model_risk(model, data, n=n, seed=derive_seed(seed, "length-sweep", j, k), L=L)
            out[:, j, k] = m
    return out


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
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Mean squared difference ``E (y_hat_model - y_hat_ref)^2`` between every model of an ensemble
    and every reference predictor, on the same ``n`` fresh sequences; ``(mean (R,), std error (R,))``
    per reference.  A predictor maps a single-task batch to ``(B,)`` (shared) or ``(R, B)`` (one per
    model, e.g. GD at each model's own rate).  The key ``"target"`` holds the models' own ICL loss.
    Paper 1, Section 4.3 (the learned predictor is debiased GD); chapter 5."""
    n = check_int("n", n, 2)
    sq: dict[str, list[torch.Tensor]] = {k: [] for k in [*predictors, "target"]}
    for b in sample_chunks(data, n, seed, chunk, L=L, dtype=model.Q.dtype):
        pred = model(b)[..., 0]  # (R, B)
        sq["target"].append((pred - b.yq[..., 0]) ** 2)
        for name, p in predictors.items():
            sq[name].append((pred - p(b).to(pred)) ** 2)  # (R, B)
    out = {}
    for name, parts in sq.items():
        e = torch.cat(parts, dim=-1)
        out[name] = (e.mean(-1).numpy(), (e.std(-1) / math.sqrt(e.shape[-1])).numpy())
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


def ratio_checks(ratio_df: pd.DataFrame, data: DataConfig, bayes: float) -> tuple[dict, dict]:
    """Chapter 5's Theorem 4.2 (iii) statistics of a :func:`bayes_ratio_grid` table.

    Returns ``(checks, values)``: ``checks`` holds ``rmax`` (largest finite-size ratio) and ``dev``
    (largest ``|ratio / limit - 1|``); ``values`` (glue keys) the largest ratio, the largest noise
    level and its largest ratio, and the exact ratio at the chapter's own ``(d, L, sigma2)``,
    ``R_dGD(eta*) / bayes`` (``bayes``: the Bayes risk of :func:`closed_form_checks`)."""
    rmax = float(ratio_df["ratio"].max())
    dev = float((ratio_df["ratio"] / ratio_df["ratio limit"] - 1).abs().max())
    s2_top = float(ratio_df["sigma2"].max())
    d, L, s2 = data.d, data.L, data.sigma2
    values = {
        "ch5_rmax": rmax,
        "ch5_s2_top": s2_top,
        "ch5_ratio_top": float(ratio_df[ratio_df.sigma2 == s2_top]["ratio"].max()),
        "ch5_ratio_book": est.debiased_gd_risk(est.optimal_eta_debiased(d, L, s2), d, L, s2)
        / float(bayes),
    }
    return {"rmax": rmax, "dev": dev}, values


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
NAN = float("nan")


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
def length_curves(
    sweep: Mapping[int, Sequence[Run]],
    posneg: Mapping[int, Sequence[Run]],
    data: DataConfig,
    Ls: Sequence[int],
    n: int,
    n_sets: int,
    seed: int,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Length generalisation of the shared sweep (paper 1, Figure 3): every model at every ``L``
    on ``n_sets`` shared test sets of ``n`` sequences (:func:`length_sweep`, purpose
    ``"length-sweep"``), averaged over the seeds of each ``H`` on each test set -- all seeds for
    ``H = 1``, the positive/negative ones (``posneg``) for ``H >= 2``.  Returns the mean over test
    sets and its standard error, ``(len(Ls), groups)`` each, index ``L``, one column per ``H``
    with at least one model (chapter 5)."""
    runs = [r for H in sweep for r in sweep[H]]
    losses = length_sweep(stack_models(runs), data, Ls, n=n, n_sets=n_sets,
                          seed=derive_seed(seed, "length-sweep"))  # (R, |Ls|, n_sets)
    where = {id(r): i for i, r in enumerate(runs)}
    index = pd.Index(check_lengths(Ls), name="L")
    curve, curve_se = {}, {}
    for H, rs in {1: sweep.get(1, []), **posneg}.items():
        if rs:
            per_set = losses[[where[id(r)] for r in rs]].mean(0)  # (|Ls|, n_sets): seed average
            curve[H] = per_set.mean(-1).numpy()
            curve_se[H] = (per_set.std(-1) / np.sqrt(n_sets)).numpy()
    return pd.DataFrame(curve, index=index), pd.DataFrame(curve_se, index=index)


def length_table(curve: pd.DataFrame, ref: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """The values behind chapter 5's Figure 3: the loss of every ``H`` (columns ``H=1, ...``) and
    the reference risks of :func:`reference_curves` (without the Bayes standard error)."""
    refs = pd.DataFrame({k: v for k, v in ref.items() if k != "Bayes se"}, index=curve.index)
    return pd.concat([curve.rename(columns="H={}".format), refs], axis=1)


def length_checks(curve: pd.DataFrame, ref: Mapping[str, np.ndarray]) -> tuple[dict, dict]:
    """Chapter 5's statistics of the multi-head (``H >= 2``) curves of :func:`length_curves`
    against the references of :func:`reference_curves` (paper 1, Section 3 and Figure 3).

    ``checks``: ``decreasing`` (per ``H >= 2``: the loss falls strictly along the grid) and
    ``worst`` (largest multi-head loss over the single head's, over ``L``; NaN without ``H = 1``).
    ``values`` (glue keys): the largest relative deviation from debiased GD at the learned rate,
    the ``L`` where it is and the loss ratio there, the ratio to vanilla GD at the shortest ``L``,
    and the spread ``max_L (max_H / min_H - 1)`` over ``H >= 2``; all NaN without ``H >= 2``."""
    multi = [H for H in curve.columns if H >= 2]
    keys = ("ch5_track", "ch5_track_L", "ch5_track_ratio", "ch5_gd_ratio_short", "ch5_spread")
    if not multi:
        return {"decreasing": [], "worst": NAN}, dict.fromkeys(keys, NAN)
    stack = np.stack([curve[H].to_numpy() for H in multi])  # (|multi|, |Ls|)
    dgd = ref["debiased GD"]  # (|Ls|,)
    dev = np.abs(stack / dgd - 1)
    jt = int(np.unravel_index(np.argmax(dev), stack.shape)[1])
    values = {
        "ch5_track": float(dev.max()),
        "ch5_track_L": int(curve.index[jt]),
        "ch5_track_ratio": float(stack[:, jt].mean() / dgd[jt]),
        "ch5_gd_ratio_short": float(stack[:, 0].mean() / ref["vanilla GD"][0]),
        "ch5_spread": float((stack.max(0) / stack.min(0) - 1).max()),
    }
    checks = {
        "decreasing": [bool(np.all(np.diff(curve[H].to_numpy()) < 0)) for H in multi],
        "worst": float((stack.max(0) / curve[1].to_numpy()).max()) if 1 in curve else NAN,
    }
    return checks, values


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
    losses: Mapping[str, torch.Tensor], labels: Mapping[str, str]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Per kind of ``labels``, the median over seeds of the losses ``(R, |Ls|, n_sets)`` of
    :func:`length_sweep` (mean over test sets) and the standard error over test sets of the
    per-set median, keyed by the label: the curves of chapter 5's Figure 10 and B.1 figure."""
    curves, errors = {}, {}
    for a, label in labels.items():
        t = losses[a]
        curves[label] = t.mean(-1).median(0).values.numpy()
        errors[label] = (t.median(0).values.std(-1) / np.sqrt(t.shape[-1])).numpy()
    return curves, errors


# ----------------------------------------------------------------------------- prediction level
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


def gap_checks(gaps: pd.DataFrame, L: int) -> tuple[list[float], dict]:
    """Chapter 5's statistics of :func:`prediction_gap_curves` (training length ``L``): the ratios
    gap(debiased GD) / gap(vanilla GD) at every ``L' <= L // 2`` of the grid, and the glued
    values: the first of them (NaN if none), the three gaps at ``L`` and the shortest ``L'``."""
    small = [Lj for Lj in gaps.index if Lj <= L // 2]
    dgd, gd = gaps["debiased GD (own eta)"], gaps["vanilla GD (own eta)"]
    ratios = [float(dgd[Lj]) / float(gd[Lj]) for Lj in small]
    values = {
        "ch5_gap_ratio_smallL": ratios[0] if ratios else NAN,
        "ch5_gap_dgd_Ltrain": float(dgd[L]),
        "ch5_gap_pdgd_Ltrain": float(gaps.at[L, "pre-cond. debiased GD (own Gamma)"]),
        "ch5_gap_bayes_Ltrain": float(gaps.at[L, "Bayes"]),
        "ch5_L_small": int(gaps.index[0]),
    }
    return ratios, values


# ----------------------------------------------------------------------------- the single head
def _rel_dist(a: float, b: float) -> float:
    """``|a / b - 1|``; infinite when ``b = 0 != a`` (a bandwidth search that ends at 0)."""
    if b == 0:
        return 0.0 if a == 0 else math.inf
    return abs(a / b - 1)


def single_head_vs_kernels(
    runs: Sequence[Run], data: DataConfig, n: int, seed: int
) -> tuple[pd.DataFrame | None, pd.DataFrame | None, dict, dict]:
    """Trained single heads against kernel regressors (paper 1, Section 4.3): the best
    Nadaraya-Watson (``mu = 1``) and the best scaled kernel regressor (free ``mu``), searched on
    one sample of ``n`` sequences (:func:`kernel_regressor_search`, purpose ``"kernel-search"``)
    and evaluated with every run on a fresh one (:func:`paired_losses`, ``"kernel-eval"``).

    Returns ``(table, per_seed, checks, values)``: the three predictors' ``omega``, ``mu``, loss
    and se (the trained heads' medians over seeds); per seed ``|omega|``, ``|mu|``, loss and the
    paired ``z`` of the loss difference to each regressor; ``checks``: ``z_kernel`` (smallest
    ``z`` against the free-``mu`` regressor), ``off`` (largest relative distance of the median
    ``|omega|``, ``|mu|`` from its optimum) and ``optimum`` (those four numbers); ``values`` (glue
    keys).  Without runs: ``None, None, {}`` and NaN (counts 0).  Chapter 5."""
    if not runs:
        keys = ("ch5_nw_omega", "ch5_m1", "ch5_nw_loss", "ch5_kr_loss", "ch5_kr_mu", "ch5_single_loss")
        counts = dict.fromkeys(("ch5_nw_seeds_better", "ch5_nw_seeds", "ch5_nw_seeds_worse"), 0)
        return None, None, {}, {**dict.fromkeys(keys, NAN), **counts}
    nw = kernel_regressor_search(data, free_mu=False, n=n, seed=derive_seed(seed, "kernel-search"))
    kr = kernel_regressor_search(data, free_mu=True, n=n, seed=derive_seed(seed, "kernel-search"))
    pl = paired_losses(stack_models(runs), data, {
        "NW": lambda b: est.scaled_nw_predict(b, nw["omega"], 1.0),
        "kernel": lambda b: est.scaled_nw_predict(b, kr["omega"], kr["mu"]),
    }, n=n, seed=derive_seed(seed, "kernel-eval"))
    omega = [abs(float(r.omega[0])) for r in runs]  # (R,) |omega| of each single head
    mu = [abs(float(r.mu[0])) for r in runs]
    w1, m1 = float(np.median(omega)), float(np.median(mu))
    table = pd.DataFrame([
        {"predictor": "trained single head (median over seeds)", "omega": w1, "mu": m1,
         "ICL loss": float(np.median(pl["model"]["loss"])), "se": float(np.median(pl["model"]["se"]))},
        {"predictor": "best Nadaraya-Watson (mu = 1)", "omega": nw["omega"], "mu": 1.0,
         "ICL loss": float(pl["NW"]["loss"]), "se": float(pl["NW"]["se"])},
        {"predictor": "best scaled kernel regressor (free mu)", "omega": kr["omega"], "mu": kr["mu"],
         "ICL loss": float(pl["kernel"]["loss"]), "se": float(pl["kernel"]["se"])},
    ]).set_index("predictor")
    z_nw = pl["NW"]["diff"] / pl["NW"]["diff_se"]  # (R,)
    z_kr = pl["kernel"]["diff"] / pl["kernel"]["diff_se"]  # (R,)
    per_seed = pd.DataFrame({"seed": [r.spec.seed for r in runs], "|omega|": omega, "|mu|": mu,
                             "ICL loss": pl["model"]["loss"], "minus best NW (z)": z_nw,
                             "minus best kernel (z)": z_kr}).set_index("seed")
    checks = {"z_kernel": float(z_kr.min()),
              "off": max(_rel_dist(w1, kr["omega"]), _rel_dist(m1, kr["mu"])),
              "optimum": [w1, m1, kr["omega"], kr["mu"]]}
    values = {
        "ch5_nw_omega": nw["omega"],
        "ch5_m1": m1,
        "ch5_nw_loss": float(pl["NW"]["loss"]),
        "ch5_kr_loss": float(pl["kernel"]["loss"]),
        "ch5_kr_mu": kr["mu"],
        "ch5_single_loss": float(np.median(pl["model"]["loss"])),
        "ch5_nw_seeds_better": int((z_nw < -3).sum()),
        "ch5_nw_seeds": len(z_nw),
        "ch5_nw_seeds_worse": int((z_nw > 3).sum()),
    }
    return table, per_seed, checks, values


# ----------------------------------------------------------------------------- B.1 and B.2
def variant_losses(
    kept: Mapping[str, Sequence[Run]], data: DataConfig, Ls: Sequence[int], n: int, n_sets: int, seed: int
) -> dict[str, torch.Tensor]:
    """:func:`length_sweep` of every variant's kept runs on the test sets of :func:`length_curves`
    (same purpose ``"length-sweep"``): ``{kind: (R, len(Ls), n_sets)}``.  Paper 1, B.1 and
    Figure 10; chapter 5."""
    return {a: length_sweep(stack_models(rs), data, Ls, n=n, n_sets=n_sets,
                            seed=derive_seed(seed, "length-sweep"))
            for a, rs in kept.items()}


def linear_vs_softmax(
    losses: Mapping[str, torch.Tensor], kept: Mapping[str, Sequence[Run]], data: DataConfig,
    Ls: Sequence[int],
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
    med, med_se = median_curves(losses, {"softmax": "softmax", "linear": "linear"})
    index = pd.Index(Ls, name="L")
    table = pd.DataFrame({**med, "predicted softmax": np.median(pred_soft, 0),
                          "predicted linear": np.median(pred_lin, 0)}, index=index)
    return table, pd.DataFrame(med_se, index=index)


def linear_checks(table: pd.DataFrame, L: int) -> tuple[dict, dict]:
    """Chapter 5's B.1 statistics of a :func:`linear_vs_softmax` table at training length ``L``:
    ``at_L`` (the linear and the softmax loss there) and ``same`` (``|linear / softmax - 1|``
    there); ``worse_Ls``, the lengths where the closed forms predict linear attention at least
    10% worse than softmax, and ``lose``, whether it measured worse at each.  ``values`` holds
    ``same`` under its glue key."""
    lin, soft = float(table.at[L, "linear"]), float(table.at[L, "softmax"])
    same = abs(lin / soft - 1)
    worse = table[table["predicted linear"] > 1.1 * table["predicted softmax"]]
    checks = {"at_L": [lin, soft], "same": same, "worse_Ls": [int(x) for x in worse.index],
              "lose": [bool(v) for v in worse["linear"] > worse["softmax"]]}
    return checks, {"ch5_lin_same": same}


def activation_table(
    variants: Mapping[str, Sequence[Run]],
    kept: Mapping[str, Sequence[Run]],
    losses: Mapping[str, torch.Tensor],
    data: DataConfig,
    Ls: Sequence[int],
    n: int,
    seed: int,
) -> pd.DataFrame:
    """Paper 1's Table 1 per activation of :data:`ACTIVATIONS_B2` and for linear attention (medians
    over the kept runs): ``c_f``, ``|omega|`` and ``|mu|`` (means over the heads), the
    parameter-level rate ``c_f sum_h mu_h omega_h``, the realised rate (:func:`realised_rate` on
    ``n`` sequences, purpose ``"realised-rate"``), its third-order prediction
    (:func:`rate_correction`), the fraction of all runs in the positive/negative pattern, and the
    loss at the training length (from ``losses`` of :func:`variant_losses` on the grid ``Ls``).
    Index ``f`` (:data:`LABELS`).  Chapter 5."""
    d, L = data.d, data.L
    jL = check_lengths(Ls).index(L)
    rows = []
    for a in [*ACTIVATIONS_B2, "linear"]:
        c_f = activation_coefficient(a)
        KQ, OV = stacked_circuits(kept[a])  # (R, 2, D, D), (R, 2, 1, D)
        omega = omega_of(KQ, d).abs().mean(-1).numpy()  # (R,) mean |omega_h|
        mu = mu_of(OV, d).abs().mean(-1).numpy()  # (R,) mean |mu_h|
        par = effective_rate(KQ, OV, d, c_f).numpy()  # (R,) c_f sum_h mu_h omega_h
        real = realised_rate(stack_models(kept[a]), data, n=n, seed=derive_seed(seed, "realised-rate"))
        if a in TAYLOR:
            corr = [rate_correction(a, float(w), d) for w in omega]
        else:
            corr = [NAN] * len(omega)
        posneg = (np.mean([r.pattern().kind == "pos/neg" for r in variants[a]])
                  if a != "linear" else np.nan)
        rows.append({"f": LABELS[a], "c_f": c_f, "|omega|": np.median(omega), "|mu|": np.median(mu),
                     "c_f sum mu omega": np.median(par), "realised eta": np.median(real),
                     "3rd-order prediction": np.median(par * np.array(corr)),
                     "pos/neg seeds": posneg,
                     f"loss at L={L}": float(losses[a][:, jL].mean(-1).median())})
    return pd.DataFrame(rows).set_index("f")


def rate_spreads(table1: pd.DataFrame) -> tuple[pd.Series, pd.Series, dict]:
    """The realised and the parameter-level rates of the activations of :data:`ACTIVATIONS_B2` in
    an :func:`activation_table`, and (glue keys) the spread ``max / min - 1`` of each (paper 1,
    Table 1: "the effective learning rates remain remarkably consistent"; chapter 5)."""
    names = [LABELS[a] for a in ACTIVATIONS_B2]
    real, par = table1.loc[names, "realised eta"], table1.loc[names, "c_f sum mu omega"]
    values = {"ch5_spread_real": float(real.max() / real.min() - 1),
              "ch5_spread_par": float(par.max() / par.min() - 1)}
    return real, par, values
