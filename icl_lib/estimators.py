"""Reference predictors and their risks (paper 1, Section 4.3, Theorem 4.2, Appendix F).

Predictors act on a :class:`~icl_lib.sampling.Batch` (single task) and return ``(..., B)``:

* vanilla GD       ``y_hat = (eta / L) sum_i y_i x_i^T Gamma x_q``  (one GD step from 0),
* debiased GD      ``y_hat = (eta / L) sum_i y_i (x_i - xbar)^T Gamma x_q``,
* ridge / Bayes    posterior mean ``beta_hat = (X^T X + sigma^2 d I)^{-1} X^T y`` (prior ``N(0, I/d)``),
* Nadaraya-Watson  ``y_hat = sum_i y_i softmax_i(omega x_i^T x_q)`` (the single head's predictor),
  and its scaled form ``mu * NW_omega`` (a single head with pattern (3.1) and a free ``mu``),
* pre-conditioned (debiased) GD: ``x_q`` replaced by ``Gamma x_q`` (the ``Gamma`` argument).

Closed-form risks for isotropic data (``x ~ N(0, I_d)``, ``beta ~ N(0, I_d / d)``), derived in the
spec and checked against Monte Carlo in the tests:

    vanilla GD:   R(eta) = 1 + s2 - 2 eta + eta^2 (1 + (d + 1 + s2 d) / L)
    debiased GD:  R(eta) = 1 + s2 - 2 eta (L-1)/L + eta^2 (L-1)(L + d + s2 d) / L^2

With a pre-conditioner ``Gamma`` (isotropic data, derived in chapter 5 from the Wishart moments
``E W = n I``, ``E W A W = n(n+1) A + n tr(A) I`` for ``W ~ W_d(I, n)``, symmetric ``A``):

    vanilla GD:   R = 1 + s2 - 2 tr(Gamma)/d + tr(Gamma Gamma^T)/d (1 + (d + 1 + s2 d) / L)
    debiased GD:  R = 1 + s2 - 2 (L-1)/L tr(Gamma)/d + (L-1)(L + d + s2 d)/L^2 tr(Gamma Gamma^T)/d

(``Gamma = eta I`` gives the two lines above).  The Bayes risk is ``s2 + s2 E tr((X^T X + s2 d I)^{-1})``
(posterior covariance), estimated by Monte Carlo over ``X`` only (:func:`bayes_risk`) or over whole
sequences (:func:`bayes_risk_mc`); its proportional limit (``d/L -> xi``) is
``( s2 + (xi-1)/xi + sqrt(4 s2 + (s2 + (1-xi)/xi)^2) ) / 2``, and the optimal (debiased or vanilla)
GD risk tends to ``(s2 + (1+s2)^2 xi) / (1 + (1+s2) xi)``.  Chapters 1, 2, 5 and 6.

Paired comparisons: :func:`mc_errors` scores several predictors on one shared set of sequences and
:func:`relative_excess` turns two of them into a relative excess risk with its paired interval (the
test set's own error cancels in the pair; chapters 1 and 2).
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from scipy import stats as sps

from .config import DataConfig
from .sampling import Batch, sample_chunks
from .seeding import generator
from .stats import LEVEL, Estimate
from .validate import check_float, check_int, fail

__all__ = [
    "vanilla_gd_predict",
    "debiased_gd_predict",
    "ridge_predict",
    "nadaraya_watson_predict",
    "scaled_nw_predict",
    "vanilla_gd_risk",
    "debiased_gd_risk",
    "optimal_eta_vanilla",
    "optimal_eta_debiased",
    "bayes_risk_proportional",
    "gd_risk_proportional",
    "preconditioned_gd_risk",
    "optimal_eta_preconditioned",
    "bayes_risk",
    "mc_risk",
    "mc_errors",
    "relative_excess",
    "relative",
    "bayes_risk_mc",
    "model_risk",
    "max_sequences_at_once",
]


def _single_task(batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    if batch.yq.shape[-1] != 1:
        raise ValueError(f"batch has {batch.yq.shape[-1]} tasks: accepted a single-task batch")
    return batch.x, batch.y[..., 0], batch.xq, batch.yq[..., 0]


def vanilla_gd_predict(batch: Batch, eta: float, Gamma: torch.Tensor | None = None) -> torch.Tensor:
    """One GD step from zero with step ``eta`` (and pre-conditioner ``Gamma``): ``(eta/L) sum_i y_i x_i^T Gamma x_q``."""
    x, y, xq, _ = _single_task(batch)
    q = xq if Gamma is None else xq @ Gamma.T.to(xq)
    return eta / x.shape[-2] * ((y[..., None] * x).sum(-2) * q).sum(-1)


def debiased_gd_predict(batch: Batch, eta: float, Gamma: torch.Tensor | None = None) -> torch.Tensor:
    """Debiased GD (paper 1, eq. 4.6): ``(eta/L) sum_i y_i (x_i - xbar)^T Gamma x_q``."""
    x, y, xq, _ = _single_task(batch)
    xc = x - x.mean(-2, keepdim=True)
    q = xq if Gamma is None else xq @ Gamma.T.to(xq)
    return eta / x.shape[-2] * ((y[..., None] * xc).sum(-2) * q).sum(-1)


def ridge_predict(batch: Batch, ridge: float) -> torch.Tensor:
    """Ridge regression ``beta_hat = (X^T X + ridge I)^{-1} X^T y`` evaluated at ``x_q``.

    With ``ridge = sigma^2 d`` this is the Bayes posterior mean for the prior ``N(0, I/d)``.
    """
    x, y, xq, _ = _single_task(batch)
    d = x.shape[-1]
    A = x.transpose(-1, -2) @ x + ridge * torch.eye(d, dtype=x.dtype, device=x.device)
    beta_hat = torch.linalg.solve(A, (x.transpose(-1, -2) @ y[..., None]))[..., 0]
    return (beta_hat * xq).sum(-1)


def nadaraya_watson_predict(batch: Batch, omega: float) -> torch.Tensor:
    """Nadaraya-Watson with kernel ``exp(omega x_i^T x_q)``: ``sum_i y_i softmax_i(omega x_i^T x_q)``."""
    x, y, xq, _ = _single_task(batch)
    a = torch.softmax(omega * (x @ xq[..., None])[..., 0], dim=-1)
    return (a * y).sum(-1)


def scaled_nw_predict(batch: Batch, omega: float, mu: float) -> torch.Tensor:
    """``mu`` times the Nadaraya-Watson predictor: a single head of pattern (3.1) with OV entry ``mu``
    (paper 1, eq. 3.2 with H = 1; chapter 5 compares the trained single head with the best one)."""
    return mu * nadaraya_watson_predict(batch, omega)


# ------------------------------------------------------------------------------- closed forms
def _check_dls(d, L, sigma2):
    return check_int("d", d, 1), check_int("L", L, 1), check_float("sigma2", sigma2, 0.0)


def vanilla_gd_risk(eta: float, d: int, L: int, sigma2: float) -> float:
    """Exact ICL risk of vanilla GD at step ``eta`` (isotropic data; paper 1, F.28)."""
    d, L, s2 = _check_dls(d, L, sigma2)
    return 1 + s2 - 2 * eta + eta**2 * (1 + (d + 1 + s2 * d) / L)


def optimal_eta_vanilla(d: int, L: int, sigma2: float) -> float:
    """Risk-minimising step of vanilla GD: ``1 / (1 + (d + 1 + s2 d) / L)``."""
    d, L, s2 = _check_dls(d, L, sigma2)
    return 1 / (1 + (d + 1 + s2 * d) / L)


def debiased_gd_risk(eta: float, d: int, L: int, sigma2: float) -> float:
    """Exact ICL risk of debiased GD at step ``eta`` (isotropic data)."""
    d, L, s2 = _check_dls(d, L, sigma2)
    return 1 + s2 - 2 * eta * (L - 1) / L + eta**2 * (L - 1) * (L + d + s2 * d) / L**2


def optimal_eta_debiased(d: int, L: int, sigma2: float) -> float:
    """Risk-minimising step of debiased GD: ``L / (L + d + s2 d)``, the ``s*`` of the approximate loss (4.1)."""
    d, L, s2 = _check_dls(d, L, sigma2)
    return 1 / (1 + (1 + s2) * d / L)


def bayes_risk_proportional(xi: float, sigma2: float) -> float:
    """Limit of the Bayes (ridge) risk, prior ``N(0, I/d)``, as ``d, L -> inf`` with ``d/L -> xi``
    (paper 1, Theorem 4.2 (iii); the ``1 + sigma^2`` scale of the other risks, including the noise)."""
    xi = check_float("xi", xi, 0.0, lo_open=True)
    s2 = check_float("sigma2", sigma2, 0.0)
    return (s2 + (xi - 1) / xi + math.sqrt(4 * s2 + (s2 + (1 - xi) / xi) ** 2)) / 2


def gd_risk_proportional(xi: float, sigma2: float) -> float:
    """Limit of the optimal vanilla and of the optimal debiased GD risk as ``d, L -> inf``, ``d/L -> xi``:
    ``1 + s2 - 1/(1 + (1+s2) xi) = (s2 + (1+s2)^2 xi) / (1 + (1+s2) xi)`` (paper 1, F.3; chapter 5)."""
    xi = check_float("xi", xi, 0.0, lo_open=True)
    s2 = check_float("sigma2", sigma2, 0.0)
    return 1 + s2 - 1 / (1 + (1 + s2) * xi)


def _gamma_traces(Gamma, d: int) -> tuple[float, float]:
    G = torch.as_tensor(Gamma, dtype=torch.float64)
    if G.shape != (d, d):
        raise ValueError(f"Gamma has shape {tuple(G.shape)}: accepted a ({d}, {d}) matrix")
    return float(torch.trace(G)) / d, float((G * G).sum()) / d  # tr(G)/d, tr(G G^T)/d


def preconditioned_gd_risk(Gamma, d: int, L: int, sigma2: float, debiased: bool = True) -> float:
    """Exact ICL risk of one pre-conditioned GD step ``y_hat = (1/L) sum_i y_i (x_i [- xbar])^T Gamma x_q``
    on isotropic data (paper 1, Section 4.3 and B.3; derived in chapter 5; ``Gamma = eta I`` gives
    :func:`debiased_gd_risk` / :func:`vanilla_gd_risk`)."""
    d, L, s2 = _check_dls(d, L, sigma2)
    t1, t2 = _gamma_traces(Gamma, d)
    if debiased:
        return 1 + s2 - 2 * t1 * (L - 1) / L + t2 * (L - 1) * (L + d + s2 * d) / L**2
    return 1 + s2 - 2 * t1 + t2 * (1 + (d + 1 + s2 * d) / L)


def optimal_eta_preconditioned(Gamma, d: int, L: int, sigma2: float, debiased: bool = True) -> float:
    """The scalar ``eta`` minimising :func:`preconditioned_gd_risk` of ``eta Gamma`` (chapter 5)."""
    d, L, s2 = _check_dls(d, L, sigma2)
    t1, t2 = _gamma_traces(Gamma, d)
    if debiased:
        return t1 * (L - 1) / L / (t2 * (L - 1) * (L + d + s2 * d) / L**2)
    return t1 / (t2 * (1 + (d + 1 + s2 * d) / L))


@torch.no_grad()
def bayes_risk(d: int, L: int, sigma2: float, n: int = 2_000, seed: int = 0) -> tuple[float, float]:
    """Bayes (posterior-mean) risk ``s2 + s2 E tr((X^T X + s2 d I)^{-1})``, isotropic data, prior
    ``N(0, I/d)``: Monte Carlo over the design ``X`` only, the rest exact (posterior covariance
    ``s2 (X^T X + s2 d I)^{-1}``).  Returns (mean, std error).  Paper 1, F.3; chapter 5.

    Far less variance than :func:`bayes_risk_mc` for the same ``n``; with ``s2 = 0`` the risk is
    ``max(d - L, 0) / d`` exactly.
    """
    d, L, s2 = _check_dls(d, L, sigma2)
    n = check_int("n", n, 2)
    if s2 == 0:
        return max(d - L, 0) / d, 0.0
    gen = generator(seed, "bayes-design")
    vals = []
    chunk = max(1, 2_000_000 // (L * d))
    done = 0
    while done < n:
        m = min(chunk, n - done)
        X = torch.randn(m, L, d, generator=gen, dtype=torch.float64)
        lam = torch.linalg.eigvalsh(X.transpose(-1, -2) @ X).clamp_min(0)  # (m, d)
        vals.append(s2 + (s2 / (lam + s2 * d)).sum(-1))
        done += m
    v = torch.cat(vals)
    return float(v.mean()), float(v.std() / math.sqrt(v.numel()))


# ------------------------------------------------------------------------------- Monte Carlo
@torch.no_grad()
def mc_risk(
    predict: Callable[[Batch], torch.Tensor],
    data: DataConfig,
    n: int = 100_000,
    seed: int = 0,
    L: int | None = None,
    chunk: int = 20_000,
) -> tuple[float, float]:
    """Monte Carlo ICL risk ``E (y_hat - y_q)^2`` of ``predict`` on fresh sequences: (mean, std error).

    ``predict`` maps a single-task batch to ``(B,)`` predictions.
    """
    n = check_int("n", n, 2)
    e = torch.cat([(predict(b) - b.yq[..., 0]) ** 2 for b in sample_chunks(data, n, seed, chunk, L=L)])
    return float(e.mean()), float(e.std() / math.sqrt(e.numel()))


@torch.no_grad()
def mc_errors(
    predictors: dict[str, Callable[[Batch], torch.Tensor]],
    data: DataConfig,
    n: int = 100_000,
    seed: int = 0,
    chunk: int = 20_000,
) -> dict[str, torch.Tensor]:
    """Squared errors ``(y_hat - y_q)^2`` of every predictor on one shared set of ``n`` fresh
    sequences (the sequences of :func:`mc_risk` for the same ``seed``), ``{name: (n,)}`` in float64:
    the paired comparisons of chapter 1 (the debiased-vanilla gap, a trained model against the
    references) use the per-sequence differences, whose spread is far below either risk's."""
    n = check_int("n", n, 2)
    if not predictors:
        fail("predictors", predictors, "a non-empty {name: predictor}")
    out: dict[str, list] = {k: [] for k in predictors}
    for b in sample_chunks(data, n, seed, chunk):
        for k, f in predictors.items():
            out[k].append((f(b).double() - b.yq[..., 0]) ** 2)
    return {k: torch.cat(v) for k, v in out.items()}


def relative_excess(a, b, level: float = LEVEL) -> Estimate:
    """``mean(a) / mean(b) - 1`` of two predictors' squared errors ``a``, ``b`` on the same
    sequences, with the delta-method interval from the paired standard error,
    ``se = sd(a - r b) / (mean(b) sqrt(n))`` at ``r = mean(a) / mean(b)`` (normal quantile).
    A trained model's relative excess risk over a reference predictor, free of the test set's
    common error (chapters 1 and 2)."""
    a = torch.as_tensor(a, dtype=torch.float64).reshape(-1)
    b = torch.as_tensor(b, dtype=torch.float64).reshape(-1)
    if a.shape != b.shape or len(a) < 2:
        fail("b", f"{len(b)} values", f"as many paired values as a ({len(a)}, at least 2)")
    r = float(a.mean() / b.mean())
    se = float((a - r * b).std() / (b.mean() * math.sqrt(len(a))))
    z = float(sps.norm.ppf(0.5 + level / 2))
    return Estimate(r - 1, r - 1 - z * se, r - 1 + z * se, level,
                    f"paired risk ratio - 1 over {len(a)} sequences, delta-method normal interval")


def relative(e: Estimate, ref: float) -> Estimate:
    """``e / ref - 1``, value and interval, for an exact reference ``ref > 0``: a Monte Carlo risk
    against its closed form (chapter 1), a median step size against the optimal one (chapter 2)."""
    ref = check_float("ref", ref, 0.0, lo_open=True)
    return Estimate(e.value / ref - 1, e.lo / ref - 1, e.hi / ref - 1, e.level, e.what + f", relative to {ref:.4g}")


def bayes_risk_mc(data: DataConfig, n: int = 100_000, seed: int = 0, L: int | None = None) -> tuple[float, float]:
    """Monte Carlo risk of the Bayes posterior mean (ridge with ``sigma^2 d``), isotropic single task."""
    return mc_risk(lambda b: ridge_predict(b, data.sigma2 * data.d), data, n=n, seed=seed, L=L)


@torch.no_grad()
def model_risk(
    model, data: DataConfig, n: int = 20_000, seed: int = 0, L: int | None = None, chunk: int = 2_000
) -> tuple[torch.Tensor, torch.Tensor]:
    """ICL risk of every model of an :class:`~icl_lib.models.AttentionEnsemble` on one shared set of
    ``n`` fresh sequences (paired comparison): ``(mean (R,), std error (R,))`` over sequences and
    tasks.  ``L`` evaluates at another context length (length generalisation, chapter 5)."""
    n = check_int("n", n, 2)
    errs = []
    for b in sample_chunks(data, n, seed, chunk, L=L, dtype=model.Q.dtype):
        b = b.to(model.Q.device)
        errs.append(((model(b) - b.yq) ** 2).mean(-1).cpu())  # (R, b)
    e = torch.cat(errs, dim=1)
    return e.mean(1), e.std(1) / math.sqrt(e.shape[1])


def max_sequences_at_once(d: int, L: int, n_tasks: int = 1, budget: int = 100_000_000) -> int:
    """The most sequences of ``L`` demonstrations in dimension ``d`` that one draw of
    :func:`~icl_lib.sampling.sample_batch` holds within ``budget`` numbers (float64: 800 MB for the
    default): ``budget // ((d + n_tasks) (L + 1) + n_tasks d)``, the numbers per sequence of the
    sampler (tokens and task vectors).  Bounds chapter 1's Monte Carlo size ``n_mc``, drawn at
    once for the label moment (paper 1, Section 2)."""
    d, L = check_int("d", d, 1), check_int("L", L, 1)
    n_tasks, budget = check_int("n_tasks", n_tasks, 1), check_int("budget", budget, 1)
    return budget // ((d + n_tasks) * (L + 1) + n_tasks * d)
