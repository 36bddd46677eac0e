"""Anisotropic covariates: the optimal pre-conditioner of one-step GD and the learned one
(paper 1, B.3 and C.2, Figures 11 and 14; chapter 6).

Data: ``x_i, x_q ~ N(0, Sigma)``, ``beta ~ N(0, I_d / d)``, ``y = beta^T x + eps``,
``eps ~ N(0, sigma2)``.  A one-step pre-conditioned GD predictor (``eta`` absorbed into ``Gamma``)

    y_hat = g^T Gamma x_q,     g = (1/L) sum_i y_i (x_i - xbar)   (debiased, paper 1 B.3)
                               g = (1/L) sum_i y_i x_i            (vanilla)

has the ICL risk, quadratic in ``Gamma``,

    R(Gamma) = tr(Gamma Sigma Gamma^T A) - 2 tr(Gamma Sigma B^T) + tr(Sigma)/d + sigma2,
    A = E[g g^T],  B = E[g beta^T],

whose normal equations ``A Gamma Sigma = B Sigma`` give ``Gamma* = A^{-1} B``.  With Gaussian
fourth moments (Isserlis; for the debiased form through the Wishart matrix of the centred pairs
``(x_i, y_i)``, ``L - 1`` degrees of freedom), writing ``c = (tr Sigma + d sigma2) / L``:

    debiased:  A = (L-1)/L^2 (L Sigma^2 / d + (tr Sigma / d + sigma2) Sigma),  B = (L-1)/(L d) Sigma,
               Gamma* = (Sigma + c I)^{-1},
    vanilla:   A = (1 + 1/L) Sigma^2 / d + (tr Sigma / d + sigma2) Sigma / L,  B = Sigma / d,
               Gamma* = ((1 + 1/L) Sigma + c I)^{-1},

and ``R(Gamma*) = tr(Sigma)/d + sigma2 - tr(Gamma* Sigma B^T)``.  For ``Sigma = I`` these are the
optimal steps ``eta*`` of :mod:`icl_lib.estimators`.  ``Gamma*`` is a resolvent of ``Sigma``: for
the Kac-Murdock-Szego ``Sigma``, whose inverse is tridiagonal, ``(Sigma + c I)^{-1}`` is not, and
``Gamma*`` has small ``(i, i+2)`` entries that ``Sigma^{-1}`` lacks (paper 1, C.2).
All closed forms are checked by Monte Carlo and by direct minimisation in
``tests/paper1/test_anisotropic.py``.

The learned pre-conditioner: linearising the softmax of a two-head model with
``KQ_h[:d, :d] = omega_h Gamma`` and ``OV_h = (0, .., 0, mu_h)`` gives ``y_hat ~ g^T (sum_h mu_h
KQ_h[:d, :d]) x_q`` (paper 1, B.3), so ``sum_h mu_h KQ_h[:d, :d]`` is the model's effective
``Gamma`` (learning rate included); shapes are compared after dividing by ``tr / d``.
"""

from __future__ import annotations

import ast
import numbers
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from ..circuits import effective_preconditioner, kq_blocks, omega_of
from ..config import DataConfig, ModelConfig, RunSpec, TrainConfig
from ..data import sample_chunks
from ..engine import Run, describe_sources, stack_models, train
from ..estimators import bayes_risk_mc, debiased_gd_predict, model_risk
from ..seeding import derive_seed, generator
from ..stats import LEVEL, Estimate, largest, median_ci, proportion_ci, seed_median_ci, smallest
from ..stats.combine import _z
from ..validate import check_float, check_int, fail

__all__ = [
    "pgd_moments",
    "pgd_risk",
    "optimal_preconditioner",
    "optimal_pgd_risk",
    "optimal_eta",
    "trace_normalise",
    "rel_dist",
    "band_mean",
    "min_eig_sym",
    "head_split",
    "check_rhos",
    "check_lengths",
    "reference_values",
    "risk_check",
    "rho_sweep",
    "training_summary",
    "pos_neg_runs",
    "circuit_table",
    "head_split_histories",
    "split_floor",
    "split_at",
    "preconditioner_values",
    "scaled_inverse_blocks",
    "inverse_distances",
    "length_losses",
    "distance_sweep",
    "risk_estimates",
    "b3_estimates",
    "paired_losses",
    "loss_summary",
    "loss_estimates",
    "sweep_estimates",
    "ov_magnitudes",
    "ov_magnitude_estimate",
]


def _sigma(Sigma) -> torch.Tensor:
    S = torch.as_tensor(Sigma, dtype=torch.float64)
    if S.ndim != 2 or S.shape[0] != S.shape[1]:
        raise ValueError(f"Sigma of shape {tuple(S.shape)} is invalid: accepted a square (d, d) matrix")
    if not torch.allclose(S, S.T) or torch.linalg.eigvalsh(S).min() <= 0:
        raise ValueError("Sigma is invalid: accepted a symmetric positive-definite matrix")
    return S


def _check(L, sigma2):
    return check_int("L", L, 1), check_float("sigma2", sigma2, 0.0)


def pgd_moments(Sigma, L: int, sigma2: float, debiased: bool = True) -> tuple[torch.Tensor, torch.Tensor, float]:
    """``(A, B, c0)`` with ``A = E[g g^T]``, ``B = E[g beta^T]``, ``c0 = E[y_q^2] = tr(Sigma)/d + sigma2``
    for the GD direction ``g`` of the (debiased) one-step predictor, Gaussian data (paper 1, G.3,
    Lemma G.4; chapter 6).  Derivation in the module docstring."""
    S = _sigma(Sigma)
    L, s2 = _check(L, sigma2)
    d = S.shape[0]
    t = float(S.trace()) / d + s2  # E[beta^T Sigma beta] + sigma2
    S2 = S @ S
    if debiased:
        A = (L - 1) / L**2 * (L * S2 / d + t * S)
        B = (L - 1) / (L * d) * S
    else:
        A = (1 + 1 / L) * S2 / d + t * S / L
        B = S / d
    return A, B, t


def pgd_risk(Gamma, Sigma, L: int, sigma2: float, debiased: bool = True) -> float:
    """Exact ICL risk ``E (g^T Gamma x_q - y_q)^2`` of one-step pre-conditioned (debiased) GD
    (paper 1, B.3 and Lemma G.4; chapter 6).  ``Gamma`` may be any ``(d, d)`` matrix."""
    A, B, c0 = pgd_moments(Sigma, L, sigma2, debiased)
    S = _sigma(Sigma)
    G = torch.as_tensor(Gamma, dtype=torch.float64)
    return float(torch.trace(G @ S @ G.T @ A) - 2 * torch.trace(G @ S @ B.T) + c0)


def optimal_preconditioner(Sigma, L: int, sigma2: float, debiased: bool = True) -> torch.Tensor:
    """The risk-minimising pre-conditioner ``Gamma*`` (learning rate included; chapter 6):
    ``(Sigma + c I)^{-1}`` (debiased) or ``((1 + 1/L) Sigma + c I)^{-1}`` (vanilla),
    ``c = (tr Sigma + d sigma2) / L``.  Paper 1's Gamma* of eq. (B.6), derived in closed form here."""
    S = _sigma(Sigma)
    L, s2 = _check(L, sigma2)
    d = S.shape[0]
    c = (float(S.trace()) + d * s2) / L
    scale = 1.0 if debiased else 1.0 + 1.0 / L
    return torch.linalg.inv(scale * S + c * torch.eye(d, dtype=S.dtype))


def optimal_pgd_risk(Sigma, L: int, sigma2: float, debiased: bool = True) -> float:
    """``R(Gamma*) = tr(Sigma)/d + sigma2 - tr(Gamma* Sigma B^T)`` (chapter 6)."""
    A, B, c0 = pgd_moments(Sigma, L, sigma2, debiased)
    G = optimal_preconditioner(Sigma, L, sigma2, debiased)
    return float(c0 - torch.trace(G @ _sigma(Sigma) @ B.T))


def optimal_eta(Sigma, L: int, sigma2: float, debiased: bool = True) -> float:
    """Best step of *un*-preconditioned GD (``Gamma = eta I``) on data with covariance ``Sigma``:
    ``eta* = tr(Sigma B) / tr(Sigma A)`` (chapter 6; equals :func:`icl_lib.estimators.optimal_eta_debiased`
    for ``Sigma = I``)."""
    A, B, _ = pgd_moments(Sigma, L, sigma2, debiased)
    S = _sigma(Sigma)
    return float(torch.trace(S @ B) / torch.trace(S @ A))


def trace_normalise(M: torch.Tensor) -> torch.Tensor:
    """``M / (tr M / d)``: unit mean diagonal, sign removed (the shape normalisation of chapter 6)."""
    M = torch.as_tensor(M, dtype=torch.float64)
    d = M.shape[-1]
    return M / (M.diagonal(dim1=-2, dim2=-1).sum(-1)[..., None, None] / d)


def rel_dist(M: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Relative Frobenius distance ``||M - ref||_F / ||ref||_F`` over the last two dims."""
    M, ref = torch.as_tensor(M, dtype=torch.float64), torch.as_tensor(ref, dtype=torch.float64)
    return torch.linalg.matrix_norm(M - ref) / torch.linalg.matrix_norm(ref)


def band_mean(M: torch.Tensor, k: int) -> torch.Tensor:
    """Mean of the ``(i, i+k)`` and ``(i+k, i)`` entries of ``M (..., d, d)``."""
    M = torch.as_tensor(M, dtype=torch.float64)
    return (M.diagonal(k, -2, -1).mean(-1) + M.diagonal(-k, -2, -1).mean(-1)) / 2


def min_eig_sym(M: torch.Tensor) -> torch.Tensor:
    """Smallest eigenvalue of the symmetric part ``(M + M^T) / 2`` (positive: ``M`` is positive definite)."""
    M = torch.as_tensor(M, dtype=torch.float64)
    return torch.linalg.eigvalsh((M + M.transpose(-1, -2)) / 2)[..., 0]


def head_split(KQ: torch.Tensor, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """How far two heads are from the mirror pair ``KQ_1 = omega Gamma``, ``KQ_2 = -omega Gamma``
    (paper 1, B.3; chapter 6), for ``KQ (..., 2, D, D)`` (e.g. a run's history ``(T, 2, D, D)``):

    * scale spread ``(max - min) / mean`` of ``|omega_h|`` (mean diagonal of ``KQ_h[:d, :d]``),
    * shape distance: relative Frobenius distance between the two blocks divided by ``tr / d``.

    Both ``(...)``; both 0 for an exact mirror pair."""
    if KQ.shape[-3] != 2:
        raise ValueError(f"KQ has {KQ.shape[-3]} heads: accepted exactly 2")
    w = omega_of(KQ.double(), d).abs()  # (..., 2)
    spread = (w.amax(-1) - w.amin(-1)) / w.mean(-1)
    shapes = trace_normalise(kq_blocks(KQ.double(), d))  # (..., 2, d, d)
    return spread, rel_dist(shapes[..., 0, :, :], shapes[..., 1, :, :])


# ------------------------------------------------------------------------------- chapter 6: parameters
def _as_list(name: str, values, accepted: str, max_len: int) -> list:
    """``values`` as a list of 1 to ``max_len`` entries: one number becomes ``[number]``, and text
    that spells a list (papermill's ``-p rhos [0.5]`` passes ``"[0.5]"``) becomes that list; any
    other value fails naming ``name``."""
    if isinstance(values, str):
        try:
            parsed = ast.literal_eval(values.strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            parsed = None
        if not isinstance(parsed, (list, tuple)):
            fail(name, values, accepted)
        values = parsed
    if isinstance(values, numbers.Real) and not isinstance(values, bool):
        values = [values]
    if not isinstance(values, (list, tuple)) or not 1 <= len(values) <= max_len:
        fail(name, values, accepted)
    return list(values)


def check_rhos(name: str, values, max_len: int = 8) -> tuple[float, ...]:
    """A chapter's correlations ``rho`` of the KMS covariance: one number or a list of 1 to
    ``max_len`` (also as text, ``"[0.5]"``), each in ``(-1, 1)`` and checked as ``name[i]``
    (chapter 6's ``rhos``)."""
    values = _as_list(name, values, f"a number or a list of 1 to {max_len} numbers in (-1, 1)", max_len)
    return tuple(check_float(f"{name}[{i}]", r, -1.0, 1.0, True, True) for i, r in enumerate(values))


def check_lengths(name: str, values, lo: int = 2, hi: int = 640, max_len: int = 12) -> tuple[int, ...]:
    """A chapter's context lengths: one integer or a list of 1 to ``max_len`` (also as text,
    ``"[10, 40]"``), each in ``[lo, hi]`` and checked as ``name[i]`` (chapter 6's ``eval_L``)."""
    values = _as_list(name, values, f"an integer or a list of 1 to {max_len} integers in [{lo}, {hi}]", max_len)
    return tuple(check_int(f"{name}[{i}]", v, lo, hi) for i, v in enumerate(values))


# ------------------------------------------------------------------------------- chapter 6: Gamma*
def reference_values(Sigma, L: int, sigma2: float) -> dict[str, float]:
    """The numbers chapter 6 quotes about ``Gamma* = (Sigma + c I)^{-1}`` (paper 1, B.3, eq. B.6):

    * ``c = (tr Sigma + d sigma2) / L``;
    * ``band_star``: mean ``(i, i+2)`` entry of ``Gamma*`` (nan for ``d < 3``);
    * ``d_star_I``: relative Frobenius distance of ``Gamma* / (tr / d)`` to ``I_d``, and
      ``shape_thr = 0.25 d_star_I``, the threshold of the same-shape rule;
    * ``inv_star_S``: distance of ``Gamma*^{-1} / (tr / d)`` to ``Sigma`` (Figure 14)."""
    S = _sigma(Sigma)  # (d, d)
    d = S.shape[0]
    G = optimal_preconditioner(S, L, sigma2)  # (d, d)
    d_star_I = float(rel_dist(trace_normalise(G), torch.eye(d, dtype=torch.float64)))
    return {
        "c": (float(S.trace()) + d * sigma2) / L,
        "band_star": float(band_mean(G, 2)) if d >= 3 else float("nan"),
        "d_star_I": d_star_I,
        "shape_thr": 0.25 * d_star_I,
        "inv_star_S": float(rel_dist(trace_normalise(torch.linalg.inv(G)), S)),
    }


def risk_check(data: DataConfig, n: int, seed: int, scale: float = 0.1) -> "pandas.DataFrame":  # noqa: F821
    """Closed-form risk :func:`pgd_risk` against the Monte Carlo risk of debiased GD
    pre-conditioned by ``Gamma*`` and by two random perturbations ``Gamma* + scale ||Gamma*||_F / d
    N(0, 1)^{d x d}`` (stream ``"perturbations"``), all on the same ``n`` prompts (stream
    ``"mc-check"``).  Paper 1, B.3 and G.4; chapter 6.  Rows ``Gamma*``, ``perturbation 1``,
    ``perturbation 2``; columns ``closed form``, ``Monte Carlo``, ``std error`` and, paired on the
    same prompts, ``minus Gamma*`` (the mean of the squared error minus ``Gamma*``'s) with its
    ``paired se`` (0 on the row of ``Gamma*``)."""
    Sigma, d = data.covariance_matrix(), data.d  # (d, d)
    G_star = optimal_preconditioner(Sigma, data.L, data.sigma2)  # (d, d)
    gen = generator(seed, "perturbations")
    noise = [torch.randn(d, d, generator=gen, dtype=torch.float64) for _ in range(2)]
    Gs = [G_star] + [G_star + scale * G_star.norm() / d * z for z in noise]
    errs = [[] for _ in Gs]
    for b in sample_chunks(data, check_int("n", n, 2), derive_seed(seed, "mc-check"), 20_000):
        for k, G in enumerate(Gs):
            errs[k].append((debiased_gd_predict(b, 1.0, G) - b.yq[..., 0]) ** 2)  # (B,)
    e = torch.stack([torch.cat(x) for x in errs])  # (3, n) squared errors on shared prompts
    diff = e - e[0]  # paired with Gamma*
    rows = []
    for k, G in enumerate(Gs):
        rows.append({"Gamma": "Gamma*" if k == 0 else f"perturbation {k}",
                     "closed form": pgd_risk(G, Sigma, data.L, data.sigma2), "Monte Carlo": float(e[k].mean()),
                     "std error": float(e[k].std() / np.sqrt(e.shape[1])), "minus Gamma*": float(diff[k].mean()),
                     "paired se": float(diff[k].std() / np.sqrt(e.shape[1]))})
    return pd.DataFrame(rows).set_index("Gamma")


def risk_estimates(mc: "pandas.DataFrame", level: float = LEVEL) -> dict[str, Estimate]:  # noqa: F821
    """The two claims of chapter 6 on :func:`risk_check`'s table (paper 1, G.4): ``"closed form"``,
    the relative error ``MC / closed - 1`` of the closed-form risk at ``Gamma*`` (normal interval
    from the Monte Carlo std error), and ``"minimum"``, the smaller paired Monte Carlo excess risk
    of the perturbations over ``Gamma*`` (:func:`~icl_lib.stats.smallest` of their normal intervals)."""
    z, star = _z(level), mc.loc["Gamma*"]
    rel = star["Monte Carlo"] / star["closed form"] - 1
    half = z * star["std error"] / star["closed form"]
    closed = Estimate(float(rel), float(rel - half), float(rel + half), level, "Monte Carlo, normal interval")
    pert = mc.iloc[1:]
    excess = {k: Estimate(float(r["minus Gamma*"]), float(r["minus Gamma*"] - z * r["paired se"]),
                          float(r["minus Gamma*"] + z * r["paired se"]), level, "paired mean, normal interval")
              for k, r in pert.iterrows()}
    return {"closed form": closed, "minimum": smallest(excess)}


# ------------------------------------------------------------------------------- chapter 6: training
def rho_specs(
    rhos: Sequence[float], seeds: int, seed: int, d: int, L: int, sigma2: float, train_cfg: TrainConfig
) -> list[RunSpec]:
    """The runs of :func:`rho_sweep`: one two-head model per ``(rho, k)``, KMS covariance
    ``rho^|i-j|``, run seed ``seed + k``, ordered by ``rho`` then ``k`` (chapter 6)."""
    return [RunSpec(data=DataConfig(d=d, L=L, sigma2=sigma2, rho=r), model=ModelConfig(heads=2), train=train_cfg,
                    seed=seed + k) for r in rhos for k in range(seeds)]


def rho_sweep(
    rhos: Sequence[float], seeds: int, seed: int, d: int, L: int, sigma2: float, train_cfg: TrainConfig,
    device: str = "auto",
) -> dict[float, list[Run]]:
    """Train (or load) one two-head model per ``(rho, k)``, KMS covariance ``rho^|i-j|``, run seed
    ``seed + k`` for ``k < seeds``, all in one :func:`~icl_lib.engine.train` call (paper 1, B.3;
    chapter 6).  Returns ``{rho: [runs of seeds seed, seed+1, ...]}`` in the order of ``rhos``."""
    seeds = check_int("seeds", seeds, 1)
    runs = train(rho_specs(rhos, seeds, seed, d, L, sigma2, train_cfg), device=device)
    return {r: runs[i * seeds:(i + 1) * seeds] for i, r in enumerate(rhos)}


def training_summary(runs: Mapping[float, Sequence[Run]]) -> str:
    """What training did, in lines that fit the page: models and model-steps, the ensembles with
    their seconds, and, last, where the runs came from (:func:`~icl_lib.engine.run.describe_sources`:
    trained now, the run cache, or the run store with the device and dates they trained on)
    (chapter 6)."""
    every = [run for rs in runs.values() for run in rs]
    steps = sum(run.spec.train.steps for run in every)
    ensembles = sorted({(r.meta["ensemble"], round(r.meta["seconds"])) for r in every})
    lines = [f"{len(every)} models, {steps:,} model-steps; trained as ensembles of"]
    for k, (R, t) in enumerate(ensembles):  # "R models in t s" never split
        item = f"{R} models in {t} s" + ("," if k < len(ensembles) - 1 else "")
        if len(lines[-1]) + 1 + len(item) > 78:
            lines.append(item)
        else:
            lines[-1] += " " + item
    return "\n".join(lines + [describe_sources(every)])


def pos_neg_runs(runs: Sequence[Run]) -> list[Run]:
    """The runs whose heads end with both signs of ``omega_h`` (pattern ``pos/neg`` of
    :func:`~icl_lib.circuits.summarize_pattern`; chapter 6's selection rule)."""
    return [run for run in runs if run.pattern().kind == "pos/neg"]


# ------------------------------------------------------------------------------- chapter 6: circuits
def circuit_table(runs: Mapping[float, Sequence[Run]]) -> "pandas.DataFrame":  # noqa: F821
    """One row per trained model of ``{rho: runs}``: its pattern (paper 1, Section 3: ``omega_h``,
    ``mu_h``, OV off the label entry, zero-sum, sign matching, spread of ``|omega_h|``), the
    mirror-pair shape distance of :func:`head_split`, the smallest eigenvalue of the symmetric part
    of ``sign(mu_h) KQ_h[:d, :d]`` over the heads, the distances of the normalised effective
    pre-conditioner ``Gamma_eff = sum_h mu_h KQ_h[:d, :d]`` to ``Gamma*``, ``I_d`` and ``Sigma^{-1}``
    (each divided by ``tr / d``), the mean ``(i, i+2)`` entries of ``Gamma_eff`` and ``Gamma*`` (nan
    for ``d < 3``) and ``||Gamma_eff - Gamma*||_F / ||Gamma*||_F`` unnormalised.  The per-model
    quantities of chapter 6's claims follow: ``mean |mu|`` (over the heads), ``positive definite``
    (the smallest eigenvalue above is > 0), the head shape distance divided by ``d(Gamma*, I)`` of
    :func:`reference_values` (nan when ``Gamma*`` is proportional to ``I``), the ``band ratio`` of
    the learned to ``Gamma*``'s ``(i, i+2)`` entries (nan when ``Gamma*`` has none), and the
    differences of distances ``d(Gamma*) - min(d(Sigma^-1), d(I))`` and ``d(Gamma*) - d(I)``
    (negative: closer to ``Gamma*``).  Paper 1, B.3 and Figure 11; chapter 6."""
    rows = []
    for r, runs_r in runs.items():
        for run in runs_r:
            data, d = run.spec.data, run.d
            S = data.covariance_matrix()  # (d, d)
            G_star = optimal_preconditioner(S, data.L, data.sigma2)  # (d, d)
            G_r = trace_normalise(G_star)
            p = run.pattern()
            blocks = kq_blocks(run.KQ.double(), d)  # (H, d, d)
            shapes = trace_normalise(blocks)  # each head's block / (tr / d)
            G_eff = effective_preconditioner(run.KQ.double(), run.OV.double(), d)  # sum_h mu_h KQ_h[:d, :d]
            Gn = trace_normalise(G_eff)
            eig = min(min_eig_sym(float(np.sign(p.mu[h])) * blocks[h]) for h in range(blocks.shape[0]))
            d_star_I = float(rel_dist(G_r, torch.eye(d, dtype=torch.float64)))
            shape_dist = float(rel_dist(shapes[0], shapes[1]))
            dists = [float(rel_dist(Gn, ref)) for ref in (G_r, torch.eye(d, dtype=torch.float64),
                                                           trace_normalise(torch.linalg.inv(S)))]
            band_l = float(band_mean(Gn, 2)) if d >= 3 else float("nan")
            band_s = float(band_mean(G_r, 2)) if d >= 3 else float("nan")
            rows.append({
                "rho": r, "seed": run.spec.seed, "pattern": p.kind, "omega": np.round(p.omega, 3).tolist(),
                "mu": np.round(p.mu, 3).tolist(), "OV off-last": p.ov_offlast, "zero-sum": p.zero_sum,
                "sign matched": p.sign_matched, "omega spread": p.omega_spread,
                "head shape distance": shape_dist,
                "min eig sign(mu_h) KQ_h": float(eig),
                "d(Gamma, Gamma*)": dists[0], "d(Gamma, I)": dists[1], "d(Gamma, Sigma^-1)": dists[2],
                "(i,i+2) learned": band_l, "(i,i+2) Gamma*": band_s,
                "|G_eff - Gamma*| / |Gamma*|": float(rel_dist(G_eff, G_star)),
                "mean |mu|": float(np.mean(np.abs(p.mu))), "positive definite": bool(eig > 0),
                "shape / d(Gamma*, I)": shape_dist / d_star_I if d_star_I > 1e-9 else float("nan"),
                "band ratio": band_l / band_s if abs(band_s) > 1e-12 else float("nan"),
                "d(Gamma*) - min(d(Sigma^-1), d(I))": dists[0] - min(dists[1], dists[2]),
                "d(Gamma*) - d(I)": dists[0] - dists[1],
            })
    return pd.DataFrame(rows)


def head_split_histories(runs: Mapping[float, Sequence[Run]], rho: float) -> dict[float, dict | None]:
    """:func:`head_split` along training for the positive/negative runs at ``rho = 0`` (when the
    sweep has it) and at ``rho``: ``{rho: {"step": (T,), "spread": (S, T), "shape": (S, T)}}``, or
    ``None`` for a ``rho`` without such a run (chapter 6's mirror-pair figure)."""
    out = {}
    for r in dict.fromkeys([0.0, rho]) if 0.0 in runs else [rho]:
        split = [head_split(run.history["KQ"], run.d) for run in pos_neg_runs(runs[r])]
        out[r] = None if not split else {
            "step": runs[r][0].history["step"].numpy(),  # (T,)
            "spread": np.array([s[0].numpy() for s in split]),  # (S, T)
            "shape": np.array([s[1].numpy() for s in split]),  # (S, T)
        }
    return out


def split_floor(history: dict | None, tail: float = 0.2) -> float:
    """Median shape distance over the last ``tail`` of training (steps ``>= (1 - tail) T``) of one
    entry of :func:`head_split_histories` (nan for ``None``): the noise floor of the isotropic
    control in chapter 6."""
    if history is None:
        return float("nan")
    last = history["step"] >= (1 - tail) * history["step"][-1]
    return float(np.median(history["shape"][:, last]))


def split_at(history: dict | None, fraction: float) -> float:
    """Median over the seeds of the shape distance at the first logged step ``>= fraction T`` of
    one entry of :func:`head_split_histories` (nan for ``None``): is the mirror pair still forming
    when training stops (chapter 6)?"""
    if history is None:
        return float("nan")
    k = int(np.searchsorted(np.asarray(history["step"]), fraction * history["step"][-1]))
    return float(np.median(history["shape"][:, min(k, len(history["step"]) - 1)]))


def preconditioner_values(pn: "pandas.DataFrame", Gamma_star) -> dict[str, float]:  # noqa: F821
    """Medians over the rows ``pn`` of :func:`circuit_table` (paper 1, B.3 and Figure 11; chapter 6):
    distances ``dG``, ``dS``, ``dI`` of the normalised ``Gamma_eff`` to ``Gamma*``, ``Sigma^{-1}``
    and ``I_d``; ``abs``, the unnormalised ``||Gamma_eff - Gamma*|| / ||Gamma*||``; for ``d >= 3``
    ``band_l``, the learned mean ``(i, i+2)`` entry, and ``band_s``, normalised ``Gamma*``'s."""
    G = torch.as_tensor(Gamma_star, dtype=torch.float64)  # (d, d)
    out = {"dG": float(pn["d(Gamma, Gamma*)"].median()), "dS": float(pn["d(Gamma, Sigma^-1)"].median()),
           "dI": float(pn["d(Gamma, I)"].median()), "abs": float(pn["|G_eff - Gamma*| / |Gamma*|"].median())}
    if G.shape[-1] >= 3:
        out["band_l"] = float(pn["(i,i+2) learned"].median())
        out["band_s"] = float(band_mean(trace_normalise(G), 2))
    return out


def scaled_inverse_blocks(KQ: torch.Tensor, d: int) -> torch.Tensor:
    """``KQ_h[:d, :d]^{-1}`` divided by its mean diagonal, ``(..., H, d, d)`` in float64, from
    ``KQ (..., H, D, D)`` (paper 1, Figure 14; chapter 6)."""
    return trace_normalise(torch.linalg.inv(kq_blocks(KQ.double(), d)))


def inverse_distances(runs: Sequence[Run], Sigma, Gamma_star) -> tuple["pandas.DataFrame", dict]:  # noqa: F821
    """Figure 14's comparison for every head of the positive/negative ``runs``: distances of
    :func:`scaled_inverse_blocks` to ``Sigma`` and to ``Gamma*^{-1} / (tr / d)`` (chapter 6).
    Returns the table (one row per ``(seed, head)``; empty without such runs) and, when it is not
    empty, the medians ``inv_S``, ``inv_G`` and ``inv_cmp``, a phrase saying which is nearer."""
    S = _sigma(Sigma)  # (d, d)
    inv_star = trace_normalise(torch.linalg.inv(torch.as_tensor(Gamma_star, dtype=torch.float64)))
    rows = []
    for run in pos_neg_runs(runs):
        inv = scaled_inverse_blocks(run.KQ, run.d)  # (H, d, d)
        for h in range(inv.shape[0]):
            rows.append({"seed": run.spec.seed, "head": h + 1, "d(inv, Sigma)": float(rel_dist(inv[h], S)),
                         "d(inv, Gamma*^-1)": float(rel_dist(inv[h], inv_star))})
    table = pd.DataFrame(rows)
    if not len(table):
        return table, {}
    med_S, med_G = table["d(inv, Sigma)"].median(), table["d(inv, Gamma*^-1)"].median()
    nearer = "closer" if med_G < med_S else "not closer"
    return table, {"inv_S": float(med_S), "inv_G": float(med_G),
                   "inv_cmp": f"{nearer} to the scaled inverse of Gamma* than to Sigma"}


# ------------------------------------------------------------------------------- chapter 6: losses
def length_losses(
    runs: Sequence[Run], data: DataConfig, Ls: Sequence[int], n: int, seed: int
) -> "pandas.DataFrame":  # noqa: F821
    """ICL loss of the models ``runs`` (trained on ``data``) at every context length of ``Ls``, on
    ``n`` shared test prompts per length (stream ``"test-loss"``), against pre-conditioned debiased
    GD with ``Gamma*(L)`` and with the models' own ``Gamma_eff`` (median over models; closed forms),
    debiased GD with its best step ``eta*(L)`` and the Bayes posterior mean (Monte Carlo, stream
    ``"mc-bayes"``).  Paper 1, B.3; chapter 6.  Rows: ``L``; ``model`` is the median over the models,
    ``model lo`` / ``model hi`` their smallest and largest loss, ``test-set se`` the largest standard
    error of one model's loss on the ``n`` prompts."""
    Sigma, d, s2 = data.covariance_matrix(), data.d, data.sigma2  # (d, d)
    models = stack_models(runs)
    G_effs = [effective_preconditioner(run.KQ.double(), run.OV.double(), d) for run in runs]  # each (d, d)
    cols = ["model", "model lo", "model hi", "test-set se", "PGD, Gamma*(L)", "PGD, learned Gamma_eff",
            "debiased GD, eta*(L)", "Bayes (ridge, MC)"]
    curves = {c: [] for c in cols}
    for Lk in Ls:
        risk, se = model_risk(models, data, n=n, seed=derive_seed(seed, "test-loss", Lk), L=Lk)  # (R,), (R,)
        eta = optimal_eta(Sigma, Lk, s2)
        values = [float(risk.median()), float(risk.min()), float(risk.max()), float(se.max()),
                  optimal_pgd_risk(Sigma, Lk, s2),
                  float(np.median([pgd_risk(G, Sigma, Lk, s2) for G in G_effs])),
                  pgd_risk(eta * torch.eye(d, dtype=torch.float64), Sigma, Lk, s2),
                  bayes_risk_mc(data, n=n, seed=derive_seed(seed, "mc-bayes", Lk), L=Lk)[0]]
        for c, v in zip(cols, values):
            curves[c].append(v)
    return pd.DataFrame(curves, index=pd.Index(list(Ls), name="L"))


def distance_sweep(table: "pandas.DataFrame") -> tuple["pandas.DataFrame", dict]:  # noqa: F821
    """Across ``rho`` (paper 1, B.3; chapter 6): medians over the positive/negative rows of
    :func:`circuit_table` of the normalised ``Gamma_eff``'s distances to ``Gamma*``, ``Sigma^{-1}``
    and ``I_d`` per ``rho != 0`` (rows: ``rho``), and ``shape_maxrho``, the median head shape
    distance at the largest ``rho`` (nan without such rows)."""
    pn = table[table.pattern == "pos/neg"]
    shape_maxrho = float(pn[pn.rho == table.rho.max()]["head shape distance"].median())
    cols = ["d(Gamma, Gamma*)", "d(Gamma, Sigma^-1)", "d(Gamma, I)"]
    return pn[pn.rho != 0].groupby("rho")[cols].median(), {"shape_maxrho": shape_maxrho}


# ------------------------------------------------------------------------------- chapter 6: claims
# The statements of paper 1, B.3 are about two-head attention trained on anisotropic covariates,
# not about one rho: chapter 6 tests them on every model of the sweep with rho != 0, pooled.
B3_MEDIANS = ("OV off-last", "zero-sum", "omega spread", "shape / d(Gamma*, I)",
              "d(Gamma*) - min(d(Sigma^-1), d(I))", "band ratio")  # circuit_table columns (medians)
B3_FRACTIONS = ("sign matched", "positive definite")  # boolean circuit_table columns (fractions)


def b3_estimates(table: "pandas.DataFrame", level: float = LEVEL) -> tuple["pandas.DataFrame", dict, dict]:  # noqa: F821
    """Chapter 6's estimates of paper 1, B.3 from :func:`circuit_table`, pooled over the models with
    ``rho != 0``: the fraction of positive/negative models (``"pos/neg"``, Clopper-Pearson), the
    fractions of :data:`B3_FRACTIONS` and the medians of :data:`B3_MEDIANS` (order-statistic
    intervals; nan entries, e.g. the band ratio for ``d < 3``, left out), each on the
    positive/negative models and on all of them.  Returns the summary table (one row per quantity)
    and the two dicts ``{quantity: Estimate}`` (positive/negative models, all models); a quantity
    without a value is absent."""
    aniso = table[table.rho != 0]
    pn = aniso[aniso.pattern == "pos/neg"]
    on_pn, on_all = {}, {}
    if len(aniso):
        on_all["pos/neg"] = proportion_ci(len(pn), len(aniso), level)
    for col in B3_FRACTIONS:
        for rows, out in ((pn, on_pn), (aniso, on_all)):
            if len(rows):
                out[col] = proportion_ci(int(rows[col].astype(bool).sum()), len(rows), level)
    for col in B3_MEDIANS:
        for rows, out in ((pn, on_pn), (aniso, on_all)):
            v = rows[col].dropna().to_numpy(dtype=float) if len(rows) else np.array([])
            if len(v):
                out[col] = median_ci(v, level)
    summary = []
    for q in ("pos/neg", *B3_FRACTIONS, *B3_MEDIANS):
        row = {"quantity": q}
        for name, out in (("pos/neg models", on_pn), ("all models", on_all)):
            e = out.get(q)
            row[name] = "-" if e is None else f"{e:.3g}"
            row[f"n ({name})"] = len(pn) if name == "pos/neg models" else len(aniso)
        summary.append(row)
    return pd.DataFrame(summary).set_index("quantity"), on_pn, on_all


@torch.no_grad()
def paired_losses(runs: Mapping[float, Sequence[Run]], n: int, seed: int, chunk: int = 5_000) -> "pandas.DataFrame":  # noqa: F821,E501
    """Every model of ``{rho: runs}`` at its training length on ``n`` test prompts shared by the
    models of one ``rho`` (stream ``"test-loss-rho"``), paired with two predictors on the same prompts:
    pre-conditioned debiased GD with ``Gamma*`` and plain debiased GD with its best step ``eta*``
    (paper 1, B.3; chapter 6).  One row per model: ``rho``, ``seed``, ``pattern``, ``loss`` and its
    test-set ``se``, and for each reference ``gap <ref>`` = mean(model error - reference error) /
    R_ref (``R_ref`` the closed-form risk) with its paired ``gap <ref> se``; ``R_PGD(Gamma*)`` and
    ``R_dGD(eta*)`` are the closed forms."""
    rows = []
    for r, runs_r in runs.items():
        data = runs_r[0].spec.data
        S, L, s2 = data.covariance_matrix(), data.L, data.sigma2  # (d, d)
        eye = torch.eye(data.d, dtype=torch.float64)
        refs = {"PGD": optimal_preconditioner(S, L, s2), "dGD": optimal_eta(S, L, s2) * eye}
        closed = {"PGD": optimal_pgd_risk(S, L, s2), "dGD": pgd_risk(refs["dGD"], S, L, s2)}
        model = stack_models(runs_r)
        e_m, e_r = [], {k: [] for k in refs}
        for b in sample_chunks(data, check_int("n", n, 2), derive_seed(seed, "test-loss-rho"), chunk):
            e_m.append(((model(b) - b.yq) ** 2).mean(-1))  # (R, B)
            for k, G in refs.items():
                e_r[k].append((debiased_gd_predict(b, 1.0, G) - b.yq[..., 0]) ** 2)  # (B,)
        e = torch.cat(e_m, 1)  # (R, n)
        root = np.sqrt(e.shape[1])
        for i, run in enumerate(runs_r):
            row = {"rho": r, "seed": run.spec.seed, "pattern": run.pattern().kind, "loss": float(e[i].mean()),
                   "se": float(e[i].std() / root)}
            for k in refs:
                diff = e[i] - torch.cat(e_r[k])
                row[f"gap {k}"] = float(diff.mean()) / closed[k]
                row[f"gap {k} se"] = float(diff.std() / root) / closed[k]
            row["R_PGD(Gamma*)"], row["R_dGD(eta*)"] = closed["PGD"], closed["dGD"]
            rows.append(row)
    return pd.DataFrame(rows)


def loss_summary(losses: "pandas.DataFrame") -> "pandas.DataFrame":  # noqa: F821
    """Per ``rho`` (rows) from :func:`paired_losses`: the number of positive/negative seeds, the
    median loss over them and over all seeds, the largest test-set se of a model, the closed-form
    references and the median paired gaps (positive/negative seeds).  Chapter 6's loss table."""
    out = []
    for r, g in losses.groupby("rho", sort=False):
        pn = g[g.pattern == "pos/neg"]
        nan = float("nan")
        out.append({"rho": r, "pos/neg seeds": len(pn),
                    "median loss (pos/neg)": float(pn["loss"].median()) if len(pn) else nan,
                    "median loss (all)": float(g["loss"].median()), "test-set se (max)": float(g["se"].max()),
                    "R_PGD(Gamma*)": float(g["R_PGD(Gamma*)"].iloc[0]), "R_dGD(eta*)": float(g["R_dGD(eta*)"].iloc[0]),
                    "gap PGD (pos/neg)": float(pn["gap PGD"].median()) if len(pn) else nan,
                    "gap dGD (pos/neg)": float(pn["gap dGD"].median()) if len(pn) else nan})
    return pd.DataFrame(out).set_index("rho")


def loss_estimates(losses: "pandas.DataFrame", min_rho: float = 0.5, level: float = LEVEL) -> dict:  # noqa: F821
    """Chapter 6's two loss claims from :func:`paired_losses` (paper 1, B.3), each the median over
    seeds of the paired gaps with :func:`~icl_lib.stats.seed_median_ci` (widened by the test-set error):
    ``"PGD"`` on the positive/negative models with ``rho != 0`` (pooled) and ``"PGD (all)"`` on all
    of them; ``"dGD"`` per ``rho >= min_rho`` on its positive/negative models, combined by
    :func:`~icl_lib.stats.largest` ("at every such rho"), and ``"dGD (all)"`` the same on all seeds.  A key is
    absent where its models are."""
    aniso = losses[losses.rho != 0]
    out = {}
    for key, rows in (("PGD", aniso[aniso.pattern == "pos/neg"]), ("PGD (all)", aniso)):
        if len(rows):
            out[key] = seed_median_ci(rows["gap PGD"], rows["gap PGD se"], level)
    big = losses[losses.rho >= min_rho]
    for key, pn_only in (("dGD", True), ("dGD (all)", False)):
        per = {}
        for r, g in big.groupby("rho"):
            g = g[g.pattern == "pos/neg"] if pn_only else g
            if len(g):
                per[f"rho={r}"] = seed_median_ci(g["gap dGD"], g["gap dGD se"], level)
        if per:
            out[key] = largest(per)
    return out


def sweep_estimates(table: "pandas.DataFrame", level: float = LEVEL) -> tuple[Estimate | None, "pandas.DataFrame"]:  # noqa: F821,E501
    """"At every rho != 0 the learned shape is closer to ``Gamma*`` than to ``I``" (chapter 6): per rho,
    the median over all its seeds of ``d(Gamma*) - d(I)`` (:func:`circuit_table`) with its
    order-statistic interval, and their :func:`~icl_lib.stats.largest` (None without a rho != 0).  Returns it and
    the per-rho table (value, lo, hi, seeds)."""
    per = {r: median_ci(g["d(Gamma*) - d(I)"], level) for r, g in table[table.rho != 0].groupby("rho")}
    tab = pd.DataFrame([{"rho": r, "median d(Gamma*) - d(I)": e.value, "lo": e.lo, "hi": e.hi,
                         "seeds": int((table.rho == r).sum())} for r, e in per.items()])
    return (largest({f"rho={r}": e for r, e in per.items()}) if per else None), tab.set_index("rho") if per else tab


def ov_magnitudes(table: "pandas.DataFrame") -> "pandas.DataFrame":  # noqa: F821
    """B.3's "magnitude of the OV circuits ... as in the isotropic case" (chapter 6): for every model
    with ``rho != 0`` whose seed was also trained at ``rho = 0``, the ratio of its ``mean |mu|`` to
    that of the isotropic model of the same seed (same initialisation), and whether both are
    positive/negative.  Empty without ``rho = 0`` in the table."""
    iso = table[table.rho == 0].set_index("seed")
    rows = []
    for _, t in table[table.rho != 0].iterrows():
        if t.seed in iso.index:
            i = iso.loc[t.seed]
            rows.append({"rho": t.rho, "seed": t.seed, "mean |mu|": t["mean |mu|"], "isotropic": i["mean |mu|"],
                         "ratio": t["mean |mu|"] / i["mean |mu|"],
                         "both pos/neg": t.pattern == "pos/neg" and i.pattern == "pos/neg"})
    return pd.DataFrame(rows, columns=["rho", "seed", "mean |mu|", "isotropic", "ratio", "both pos/neg"])


def ov_magnitude_estimate(ratios: "pandas.DataFrame", pos_neg: bool = True, level: float = LEVEL) -> Estimate | None:  # noqa: F821,E501
    """Median of :func:`ov_magnitudes`' ratios with its order-statistic interval, over the pairs whose
    two models are positive/negative (``pos_neg``) or over all pairs; None without pairs."""
    r = ratios[ratios["both pos/neg"]] if pos_neg else ratios
    return median_ci(r["ratio"], level) if len(r) else None
