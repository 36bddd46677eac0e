"""Two-stage training dynamics and the approximate loss (paper 1, Sections 4.1-4.2, C.1, C.4).

Chapter 3 reads chapter 2's trained runs along training and tests the approximate loss (4.1)
that explains them.  Contents:

* :class:`StageRules`, :func:`first_persistent_step`, :func:`detect_stages` -- the steps at which a
  run's history establishes the pattern (3.1), Stage I (sign matching and zero-sum OV) and Stage II
  (homogeneous KQ scale, positive and negative groups), each by an explicit rule;
* :func:`peak_profile` -- the "rises then falls" of ``|omega_h|`` and the steady rise of ``|mu_h|``;
* :func:`symmetric_two_head`, :func:`reparam_circuits`, :func:`true_loss_mc`, :func:`true_loss_cv`
  -- Monte Carlo of the true ICL loss of circuits in the reparameterised form (3.1), one ensemble
  for a whole grid, plain or with debiased GD as a control variate (Proposition 4.1, Figure 5);
* :func:`attention_norms`, :func:`attention_norm_lln` -- the attention-probability norm
  ``||softmax(omega X x_q)||_2`` and its large-L law (Figure 19);
* :class:`ApproxGDConfig`, :func:`approx_gd` -- gradient descent on (4.1) for the reparameterised
  H-head model (Figure 20), with :func:`group_labels` and :func:`same_groups` to compare the heads'
  groups up to the loss's global sign symmetry ``(omega, mu) -> (-omega, -mu)``;
* chapter 3's tables and values, from chapter 2's sweep ``{H: [runs]}`` and the studies above:
  :func:`check_stage_heads`, :func:`sweep_stages`, :func:`shown_seed`, :func:`history_grid`,
  :func:`stage_table`, :func:`stage_statistics` (the stages), :func:`observation_table`,
  :func:`observation_summary` (Observation 4), :func:`landscape_mc`, :func:`landscape_statistics`,
  :func:`valley_floor`, :func:`valley_table`, :func:`valley_statistics` (Figure 5),
  :func:`attention_norm_study`, :func:`norm_statistics` (Figure 19), :func:`approx_gd_sweep`,
  :func:`gd_statistics`, :func:`gd_stages`, :func:`one_head_optimum`, :func:`single_sign_end`
  (Figure 20).  Each returns a ``pandas.DataFrame`` or a dict of the values the chapter checks
  and glues;
* the transitional optimality (4.3) and the solution manifold (4.5) on trained runs:
  :func:`eta_history`, :func:`manifold_scales`, :func:`manifold_slope`, :func:`optimality_table`;
* the claims' estimates, each an :class:`~icl_lib.stats.Estimate` with its interval over seeds
  (or over Monte Carlo draws): :func:`stage_estimates`, :func:`observation_runs` and
  :func:`run_fraction` (Observation 4), :func:`optimality_estimates`,
  :func:`settle_order_estimate`, :func:`gd_estimates`, :func:`norm_estimates`, and the
  ``small``/``degrade`` and ``decrease``/``limit`` entries of :func:`landscape_statistics` and
  :func:`valley_statistics`.
"""

from __future__ import annotations

import ast
import math
import numbers
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from scipy import stats

from ..circuits import DUMMY_TOL, dummy_heads, mu_of, omega_of, pattern_history
from ..config import DataConfig
from ..data import sample_chunks
from ..estimators import debiased_gd_predict, debiased_gd_risk, model_risk
from ..models import AttentionEnsemble
from ..seeding import derive_seed, generator
from ..stats import Estimate, mean_se_from_sums, median_ci, proportion_ci
from ..validate import check_choice, check_float, check_int, fail
from .approx_loss import ApproxLossConfig, approx_loss, approx_loss_grad, loss_star, mu_star, s_star

__all__ = [
    "StageRules",
    "StageSummary",
    "first_persistent_step",
    "detect_stages",
    "peak_profile",
    "symmetric_two_head",
    "reparam_circuits",
    "true_loss_mc",
    "attention_norms",
    "attention_norm_lln",
    "ApproxGDConfig",
    "approx_gd",
    "group_labels",
    "same_groups",
    "approx_hessian",
    "check_stage_heads",
    "sweep_stages",
    "shown_seed",
    "history_grid",
    "stage_table",
    "stage_statistics",
    "observation_table",
    "observation_summary",
    "valley_floor",
    "landscape_mc",
    "landscape_statistics",
    "valley_table",
    "valley_statistics",
    "attention_norm_settings",
    "attention_norm_study",
    "strictly_decreasing",
    "norm_statistics",
    "approx_gd_sweep",
    "gd_statistics",
    "gd_stages",
    "one_head_optimum",
    "single_sign_end",
    "SETTLE_TOL",
    "FALL_TOL",
    "stage_estimates",
    "observation_runs",
    "run_fraction",
    "eta_history",
    "manifold_scales",
    "manifold_slope",
    "optimality_table",
    "optimality_estimates",
    "settle_order_estimate",
    "gd_estimates",
    "true_loss_cv",
    "norm_estimates",
]


# ------------------------------------------------------------------------------- stage detection
@dataclass(frozen=True)
class StageRules:
    """Thresholds of the stage rules (chapter 2's pattern thresholds, fixed before any result).

    A snapshot of the history is in

    * *pattern (3.1)* when the KQ off-diagonal ratio and the OV off-last ratio (pooled over the
      non-dummy heads, :func:`icl_lib.circuits.summarize_pattern`) are both below ``shape_tol``;
    * *Stage I* (paper 1, Section 4.2, eq. 4.2) when every non-dummy head is sign-matched,
      ``sign omega_h = sign mu_h``, and the OV entries cancel, ``|sum mu_h| / sum |mu_h| < zero_sum_tol``;
    * *Stage II* (eq. 4.4) when the non-dummy heads form a positive and a negative group with a
      homogeneous KQ scale, ``(max - min) / mean |omega_h| < spread_tol``.

    A stage is *established* at the first logged step from which its condition holds at every
    later snapshot (:func:`first_persistent_step`).  Chapter 3.
    """

    shape_tol: float = 0.5  # KQ off-diag / diag and OV off-last / |mu| below this: pattern (3.1)
    zero_sum_tol: float = 0.1  # |sum_h mu_h| / sum_h |mu_h| below this: zero-sum OV
    spread_tol: float = 0.25  # (max - min) / mean of |omega_h| over non-dummy heads below this
    dummy_tol: float = DUMMY_TOL  # dummy head: |omega_h| and |mu_h| below this share of the largest

    def __post_init__(self):
        for name in ("shape_tol", "zero_sum_tol", "spread_tol", "dummy_tol"):
            object.__setattr__(self, name, check_float(name, getattr(self, name), 0.0, 10.0, lo_open=True))


def first_persistent_step(steps: Sequence[int], flags: Sequence[bool]) -> int | None:
    """The first logged step from which ``flags`` stays true to the end; ``None`` if the last is false.

    The rule of chapter 2's "from which step does a seed stay in the pattern"; chapter 3's stages.
    """
    steps, flags = np.asarray(steps), np.asarray(flags, dtype=bool)
    if steps.shape != flags.shape or steps.ndim != 1 or len(steps) == 0:
        raise ValueError(f"flags.shape={flags.shape} is invalid: accepted one flag per logged step {steps.shape}")
    if not flags[-1]:
        return None
    tail = np.cumprod(flags[::-1])[::-1].astype(bool)  # True where flags hold from here to the end
    return int(steps[np.argmax(tail)])


@dataclass
class StageSummary:
    """What :func:`detect_stages` finds in one run's history (chapter 3)."""

    steps: np.ndarray  # (T,) logged steps
    omega: np.ndarray  # (T, H) omega_h along training
    mu: np.ndarray  # (T, H) mu_h along training
    shape: np.ndarray  # (T,) pattern (3.1) holds
    stage1: np.ndarray  # (T,) sign matching and zero-sum OV hold
    stage2: np.ndarray  # (T,) homogeneous KQ scale with positive and negative groups
    shape_step: int | None  # pattern (3.1) established (kept from here to the end)
    stage1_step: int | None  # Stage I established
    stage2_step: int | None  # Stage II established
    groups: list[str] = field(default_factory=list)  # final group of each head
    kind: str = ""  # final pattern kind (chapter 2): "pos/neg", "single-sign", "single-head"

    @property
    def live(self) -> np.ndarray:
        """Heads that are not dummy at the end, ``(H,)`` booleans."""
        return np.array([g != "dummy" for g in self.groups])

    def head_labels(self) -> list[str]:
        """``"head h (group)"`` for every head, the legend of the figures of chapter 3."""
        return [f"head {h + 1} ({g})" for h, g in enumerate(self.groups)]

    def marks(self) -> dict:
        """The detected steps as ``{label: step}`` for :func:`icl_lib.figures.dynamics` (found ones only)."""
        named = {"(3.1)": self.shape_step, "I": self.stage1_step, "II": self.stage2_step}
        return {k: v for k, v in named.items() if v is not None}

    def merged_marks(self) -> dict:
        """:meth:`marks` with labels of equal steps joined (``"(3.1), II"``), for readable plots."""
        by_step: dict[int, list[str]] = {}
        for k, v in self.marks().items():
            by_step.setdefault(v, []).append(k)
        return {", ".join(ks): v for v, ks in by_step.items()}

    def group_mu(self) -> np.ndarray:
        """``|sum_h mu_h|`` over the heads of the final positive and negative groups along training,
        shape ``(T, 2)`` (columns: positive, negative).  These sums, not the split of ``mu`` inside a
        group, determine the predictor (paper 1, Section 4.3)."""
        pos = np.array([g == "positive" for g in self.groups])
        neg = np.array([g == "negative" for g in self.groups])
        return np.abs(np.stack([self.mu[:, pos].sum(1), self.mu[:, neg].sum(1)], 1))


def detect_stages(KQ: torch.Tensor, OV: torch.Tensor, steps, d: int, rules: StageRules = StageRules()) -> StageSummary:
    """Stage boundaries of one run's history ``KQ (T, H, D, D)``, ``OV (T, H, N, D)`` at ``steps (T,)``.

    Applies the rules of :class:`StageRules` at every snapshot and returns the first logged step
    from which each holds to the end (paper 1, Section 4.2: Stage I, then Stage II).  Chapter 3.
    """
    if not isinstance(rules, StageRules):
        raise ValueError(f"rules={rules!r} is invalid: accepted a StageRules")
    steps = np.asarray(torch.as_tensor(steps).cpu().numpy())
    hist = pattern_history(KQ, OV, d, tol=rules.dummy_tol)
    if len(hist) != len(steps):
        raise ValueError(f"steps has {len(steps)} entries: accepted one per snapshot ({len(hist)})")
    shape = np.array([p.kq_offdiag < rules.shape_tol and p.ov_offlast < rules.shape_tol for p in hist])
    stage1 = np.array([p.heads > 1 and p.sign_matched and p.zero_sum < rules.zero_sum_tol for p in hist])
    stage2 = np.array([p.kind == "pos/neg" and p.omega_spread < rules.spread_tol for p in hist])
    w = omega_of(KQ.double(), d).numpy()  # (T, H)
    m = mu_of(OV.double(), d).numpy()  # (T, H)
    return StageSummary(
        steps=steps,
        omega=w,
        mu=m,
        shape=shape,
        stage1=stage1,
        stage2=stage2,
        shape_step=first_persistent_step(steps, shape),
        stage1_step=first_persistent_step(steps, stage1),
        stage2_step=first_persistent_step(steps, stage2),
        groups=hist[-1].groups,
        kind=hist[-1].kind,
    )


def peak_profile(steps, values) -> dict:
    """Rise-then-fall measurements of ``|values| (T, H)`` per head (paper 1, Section 3, Observation 4).

    Returns per head (arrays of shape ``(H,)``): ``peak_step``, ``peak`` (max over the history of
    the absolute value), ``start``, ``final``, ``mid`` (at the logged step closest to half of the
    last step), ``drop = 1 - final / peak`` (0 when the maximum is at the end) and
    ``rise = peak / start``.  Chapter 3.
    """
    steps = np.asarray(steps, dtype=float)
    a = np.abs(np.asarray(values, dtype=float))
    if a.ndim == 1:
        a = a[:, None]
    if a.shape[0] != len(steps):
        raise ValueError(f"values has {a.shape[0]} rows: accepted one per logged step ({len(steps)})")
    k = a.argmax(0)
    mid = int(np.argmin(np.abs(steps - steps[-1] / 2)))
    peak = a.max(0)
    return {
        "peak_step": steps[k],
        "peak": peak,
        "start": a[0],
        "mid": a[mid],
        "final": a[-1],
        "drop": 1.0 - a[-1] / peak,
        "rise": peak / a[0],
    }


# ------------------------------------------------------------------------------- true loss by Monte Carlo
def symmetric_two_head(w, m) -> tuple[torch.Tensor, torch.Tensor]:
    """``omega = (w, -w)``, ``mu = (m, -m)`` for broadcast ``w``, ``m``: shapes ``(..., 2)`` (Prop. 4.1, Fig. 5)."""
    w, m = torch.broadcast_tensors(torch.as_tensor(w, dtype=torch.float64), torch.as_tensor(m, dtype=torch.float64))
    return torch.stack([w, -w], -1), torch.stack([m, -m], -1)


def reparam_circuits(omega: torch.Tensor, mu: torch.Tensor, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Circuits of the reparameterised form (3.1): ``KQ_h = [[omega_h I_d, 0], [0, 0]]``,
    ``OV_h = (0, ..., 0, mu_h)``; ``omega, mu (R, H)`` give ``KQ (R, H, D, D)``, ``OV (R, H, 1, D)``.

    The free last column of ``KQ_h`` is set to 0.  Chapter 3.
    """
    d = check_int("d", d, 1)
    omega = torch.as_tensor(omega, dtype=torch.float64)
    mu = torch.as_tensor(mu, dtype=omega.dtype)
    if omega.ndim != 2 or omega.shape != mu.shape:
        raise ValueError(f"omega.shape={tuple(omega.shape)} is invalid: accepted (R, H) equal to mu.shape={tuple(mu.shape)}")
    R, H = omega.shape
    D = d + 1
    KQ = torch.zeros(R, H, D, D, dtype=omega.dtype)
    idx = torch.arange(d)
    KQ[:, :, idx, idx] = omega[..., None]  # (R, H, d) on the diagonal of the d x d block
    OV = torch.zeros(R, H, 1, D, dtype=omega.dtype)
    OV[:, :, 0, d] = mu
    return KQ, OV


def true_loss_mc(
    omega,
    mu,
    data: DataConfig,
    n: int = 100_000,
    seed: int = 0,
    chunk: int = 1_000,
    models_per_call: int = 128,
    dtype: torch.dtype = torch.float64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Monte Carlo ICL loss of reparameterised circuits ``omega, mu (R, H)``: ``(mean (R,), std error (R,))``.

    Builds :meth:`AttentionEnsemble.from_circuits` models for ``models_per_call`` grid points at a
    time and evaluates each group with :func:`icl_lib.estimators.model_risk` on the same ``n``
    sequences (same ``seed``), so all grid points share one test set and their differences are
    paired.  This is the "true population loss" of Proposition 4.1 / Figure 5.  ``dtype`` is the
    evaluation precision (float32 halves the time; its rounding is far below the Monte Carlo error).
    Chapter 3.
    """
    n = check_int("n", n, 2)
    means, ses = [], []
    for model in _grid_ensembles(omega, mu, data, models_per_call, dtype):
        m, s = model_risk(model, data, n=n, seed=seed, chunk=chunk)
        means.append(m.double())
        ses.append(s.double())
    return torch.cat(means), torch.cat(ses)


def _grid_ensembles(omega, mu, data: DataConfig, models_per_call: int, dtype) -> list[AttentionEnsemble]:
    """The reparameterised circuits ``omega, mu (R, H)`` as frozen ensembles of at most
    ``models_per_call`` models each, in order (for :func:`true_loss_mc` and :func:`true_loss_cv`)."""
    models_per_call = check_int("models_per_call", models_per_call, 1)
    if data.n_tasks != 1:
        raise ValueError(f"data.n_tasks={data.n_tasks} is invalid: accepted a single-task DataConfig")
    KQ, OV = reparam_circuits(omega, mu, data.d)
    KQ, OV = KQ.to(dtype), OV.to(dtype)
    return [AttentionEnsemble.from_circuits(KQ[i : i + models_per_call], OV[i : i + models_per_call],
                                            data.d).requires_grad_(False)
            for i in range(0, KQ.shape[0], models_per_call)]


@torch.no_grad()
def true_loss_cv(
    omega,
    mu,
    data: DataConfig,
    n: int = 100_000,
    seed: int = 0,
    chunk: int = 1_000,
    models_per_call: int = 128,
    dtype: torch.dtype = torch.float64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Monte Carlo ICL loss of reparameterised circuits ``omega, mu (R, H)`` with debiased GD as a
    control variate: ``(mean (R,), std error (R,))``.

    For each grid point ``r`` with ``eta_r = sum_h mu_h omega_h``, the estimate is
    ``mean_i [(y_hat_r - y_q)^2 - (y_dGD(eta_r) - y_q)^2] + R_dGD(eta_r)``: the paired difference
    from debiased GD on the same ``n`` sequences plus debiased GD's exact risk
    (:func:`icl_lib.estimators.debiased_gd_risk`).  It is unbiased for the true loss whatever the
    circuits; its standard error is that of the paired difference, small where the model is
    close to debiased GD (small ``omega``, Section 4.3).  All grid points share the sequences
    (``seed``) as in :func:`true_loss_mc`.  Chapter 3 (Proposition 4.1, Figure 5).
    """
    n = check_int("n", n, 2)
    models = _grid_ensembles(omega, mu, data, models_per_call, dtype)
    eta = (torch.as_tensor(omega, dtype=torch.float64) * torch.as_tensor(mu, dtype=torch.float64)).sum(-1)  # (R,)
    R = eta.shape[0]
    s1, s2 = torch.zeros(R, dtype=torch.float64), torch.zeros(R, dtype=torch.float64)
    for b in sample_chunks(data, n, seed, chunk, dtype=dtype):
        g = debiased_gd_predict(b, 1.0).double()  # (B,) debiased GD with step 1
        yq = b.yq[..., 0].double()  # (B,)
        pred = torch.cat([m(b)[..., 0].double() for m in models])  # (R, B)
        diff = (pred - yq) ** 2 - (eta[:, None] * g - yq) ** 2  # (R, B) paired differences
        s1 += diff.sum(1)
        s2 += (diff**2).sum(1)
    mean, se = mean_se_from_sums(s1, s2, n)
    ref = torch.tensor([debiased_gd_risk(float(e), data.d, data.L, data.sigma2) for e in eta], dtype=torch.float64)
    return mean + ref, se


@torch.no_grad()
def attention_norms(d: int, L: int, omega: float, n: int = 4000, seed: int = 0, chunk: int | None = None) -> torch.Tensor:
    """``||softmax(omega X x_q)||_2`` for ``n`` draws of ``x_1..x_L, x_q ~ N(0, I_d)``: shape ``(n,)``.

    The attention-probability norm of paper 1, C.4 (Figure 19): small when attention spreads
    over many tokens, 1 when one token takes it all.  Chapter 3.
    """
    d, L, n = check_int("d", d, 1), check_int("L", L, 1), check_int("n", n, 1)
    omega = check_float("omega", omega)
    chunk = max(1, min(n, 4_000_000 // (L * d))) if chunk is None else check_int("chunk", chunk, 1)
    gen = generator(seed, "attention-norms")
    out = []
    done = 0
    while done < n:
        b = min(chunk, n - done)
        x = torch.randn(b, L, d, generator=gen, dtype=torch.float64)  # (b, L, d)
        xq = torch.randn(b, d, generator=gen, dtype=torch.float64)  # (b, d)
        p = torch.softmax(omega * (x @ xq[..., None])[..., 0], dim=-1)  # (b, L)
        out.append(p.norm(dim=-1))
        done += b
    return torch.cat(out)


def attention_norm_lln(d: int, L: int, omega: float, q: float = 0.5) -> float:
    """Large-L law of the ``q``-quantile of ``||softmax(omega X x_q)||_2`` (derived here, not in the paper).

    Given ``x_q``, the scores ``omega x_i^T x_q`` are i.i.d. ``N(0, omega^2 r^2)`` with
    ``r = ||x_q||``, so by the law of large numbers
    ``||p||^2 = sum e^{2 s_i} / (sum e^{s_i})^2 ~ E e^{2s} / (L (E e^s)^2) = exp(omega^2 r^2) / L``.
    The norm is increasing in ``r^2 ~ chi^2_d``, so its ``q``-quantile is
    ``sqrt(exp(omega^2 chi2_d.ppf(q)) / L)``.  Valid when ``L`` is large against
    ``exp(omega^2 r^2)``.  Chapter 3.
    """
    d, L = check_int("d", d, 1), check_int("L", L, 1)
    q = check_float("q", q, 0.0, 1.0, lo_open=True, hi_open=True)
    return math.sqrt(math.exp(omega**2 * stats.chi2.ppf(q, d)) / L)


# ------------------------------------------------------------------------------- gradient descent on (4.1)
@dataclass(frozen=True)
class ApproxGDConfig:
    """Gradient descent on the approximate loss (4.1) (paper 1, Section 4.2, C.4 / Figure 20)."""

    lr: float = 0.01  # gradient-descent step size
    steps: int = 100_000  # gradient-descent steps
    n_log: int = 200  # logged snapshots: half log-spaced, half linear (as in training)

    def __post_init__(self):
        object.__setattr__(self, "lr", check_float("lr", self.lr, 0.0, 10.0, lo_open=True))
        object.__setattr__(self, "steps", check_int("steps", self.steps, 1, 100_000_000))
        object.__setattr__(self, "n_log", check_int("n_log", self.n_log, 2, 100_000))

    def log_steps(self) -> list[int]:
        half = max(self.n_log // 2, 1)
        lin = np.linspace(0, self.steps, half + 1)
        geo = np.logspace(0, math.log10(self.steps), half)
        return sorted({0, self.steps} | {int(round(v)) for v in lin} | {int(round(v)) for v in geo})


def approx_gd(
    mu0, omega0, loss: ApproxLossConfig, gd: ApproxGDConfig = ApproxGDConfig(), on_divergence: str = "raise"
) -> dict:
    """Gradient descent ``theta <- theta - lr grad L~(theta)`` on (4.1) from ``mu0, omega0 (..., H)``.

    Batched over leading dimensions (e.g. one start per seed).  Uses the closed-form gradient of
    :func:`icl_lib.paper1.approx_loss.approx_loss_grad` (numpy path).  Returns ``step (T,)``,
    ``mu (T, ..., H)``, ``omega (T, ..., H)`` and ``loss (T, ...)`` at ``gd.log_steps()``, and
    ``diverged``: ``None``, or the first logged step at which an iterate was not finite.  With
    ``on_divergence="raise"`` such a step raises ``FloatingPointError`` naming it and ``lr``; with
    ``"stop"`` the run stops there and the history ends at the last finite logged step (every start
    of the batch stops together).  Chapter 3.
    """
    if not isinstance(gd, ApproxGDConfig):
        raise ValueError(f"gd={gd!r} is invalid: accepted an ApproxGDConfig")
    check_choice("on_divergence", on_divergence, ("raise", "stop"))
    mu = np.array(torch.as_tensor(mu0, dtype=torch.float64).numpy(), dtype=np.float64)
    omega = np.array(torch.as_tensor(omega0, dtype=torch.float64).numpy(), dtype=np.float64)
    if mu.shape != omega.shape or mu.ndim == 0:
        raise ValueError(f"mu0.shape={mu.shape} is invalid: accepted (..., H) equal to omega0.shape={omega.shape}")
    log = set(gd.log_steps())
    rec = {"step": [], "mu": [], "omega": []}
    with np.errstate(over="ignore", invalid="ignore"):  # a diverging run is reported below, by step and lr
        diverged = _gd_loop(mu, omega, loss, gd, log, rec)
    if diverged is not None and (on_divergence == "raise" or not rec["step"]):
        raise FloatingPointError(f"gradient descent on (4.1) diverged by step {diverged} with lr={gd.lr}: lower lr")
    out = {k: np.stack(v) if k != "step" else np.array(v) for k, v in rec.items()}
    out["loss"] = approx_loss(torch.from_numpy(out["mu"]), torch.from_numpy(out["omega"]), loss).numpy()
    out["diverged"] = diverged
    return out


def _gd_loop(mu, omega, loss, gd, log, rec) -> int | None:
    """The iterations of :func:`approx_gd`, recording into ``rec`` at the steps in ``log``; returns
    the first logged step with a non-finite iterate (``None`` if there is none)."""
    for t in range(gd.steps + 1):
        if t in log:
            if not (np.isfinite(mu).all() and np.isfinite(omega).all()):
                return t
            rec["step"].append(t)
            rec["mu"].append(mu.copy())
            rec["omega"].append(omega.copy())
        if t == gd.steps:
            break
        g_mu, g_omega = approx_loss_grad(mu, omega, loss)
        mu = mu - gd.lr * g_mu
        omega = omega - gd.lr * g_omega
    return None


def group_labels(omega, mu, tol: float = DUMMY_TOL) -> list[str]:
    """Per-head group of one model, ``omega, mu (H,)``: "positive", "negative" (sign of ``omega_h``)
    or "dummy" (:func:`icl_lib.circuits.dummy_heads`), as in chapter 2.  Chapter 3."""
    w = torch.as_tensor(np.asarray(omega, dtype=float))
    m = torch.as_tensor(np.asarray(mu, dtype=float))
    dummy = dummy_heads(w, m, tol)
    return ["dummy" if dummy[h] else ("positive" if w[h] > 0 else "negative") for h in range(len(w))]


def same_groups(a: Sequence[str], b: Sequence[str], heads: Sequence[bool] | None = None) -> tuple[bool, bool]:
    """Whether head-aligned group labels ``a`` and ``b`` agree up to the global sign symmetry
    ``(omega, mu) -> (-omega, -mu)`` of the loss; returns ``(agree, flipped)``.  ``heads`` (booleans)
    restricts the comparison to some heads.  Chapter 3."""
    if len(a) != len(b):
        raise ValueError(f"len(b)={len(b)} is invalid: accepted the number of heads of a ({len(a)})")
    keep = [True] * len(a) if heads is None else [bool(k) for k in heads]
    if len(keep) != len(a):
        raise ValueError(f"len(heads)={len(keep)} is invalid: accepted one flag per head ({len(a)})")
    a = [g for g, k in zip(a, keep) if k]
    b = [g for g, k in zip(b, keep) if k]
    swap = {"positive": "negative", "negative": "positive", "dummy": "dummy"}
    if a == b:
        return True, False
    if [swap[g] for g in a] == b:
        return True, True
    return False, False


def approx_hessian(mu, omega, cfg: ApproxLossConfig) -> torch.Tensor:
    """Hessian of (4.1) in ``theta = (mu, omega)`` at one point ``mu, omega (H,)``: shape ``(2H, 2H)``
    (autograd).  Its eigenvalues classify the end points of gradient descent on (4.1).  Chapter 3."""
    mu = torch.as_tensor(np.asarray(mu, dtype=float))
    omega = torch.as_tensor(np.asarray(omega, dtype=float))
    H = mu.shape[-1]
    if mu.shape != (H,) or omega.shape != (H,):
        raise ValueError(f"mu.shape={tuple(mu.shape)} is invalid: accepted (H,) equal to omega.shape={tuple(omega.shape)}")
    return torch.autograd.functional.hessian(lambda th: approx_loss(th[:H], th[H:], cfg), torch.cat([mu, omega]))



# ------------------------------------------------------------------------------- chapter 3's tables
# The functions below turn chapter 2's sweep of trained runs (``{H: [Run per seed]}``, from
# :func:`icl_lib.paper1.sweeps.heads_sweep`) and the Monte Carlo studies of this module into the
# tables and values that chapter 3 shows, checks as claims and glues into its text.

STAGE_HEADS_MAX = 8  # most heads of a chapter-3 model: training time and figure width


def check_stage_heads(heads, hi: int = STAGE_HEADS_MAX) -> list[int]:
    """Chapter 3's ``heads`` parameter (one int or a non-empty list) as a sorted list of distinct
    head counts in ``[2, hi]``: Stages I and II (paper 1, Section 4.2) need two heads.

    The text of a list or an int is read as one (papermill's ``-p heads [2,4]`` passes the text
    ``"[2,4]"``)."""
    hi = check_int("hi", hi, 2)
    accepted = f"an integer in [2, {hi}] or a non-empty list of them"
    values = heads
    if isinstance(values, str):
        try:
            values = ast.literal_eval(values.strip())
        except (ValueError, SyntaxError):
            fail("heads", heads, accepted)
    if isinstance(values, numbers.Real) and not isinstance(values, bool):
        values = [values]
    if not isinstance(values, (list, tuple)) or len(values) == 0:
        fail("heads", heads, accepted)
    return sorted({check_int("heads", H, 2, hi) for H in values})


def sweep_stages(sweep: dict, d: int, rules: StageRules = StageRules()) -> dict[int, list[StageSummary]]:
    """:func:`detect_stages` of every run of a sweep ``{H: [runs]}``: ``{H: [StageSummary]}`` in the
    sweep's order (paper 1, Section 4.2).  Chapter 3."""
    return {
        H: [detect_stages(r.history["KQ"], r.history["OV"], r.history["step"], d, rules) for r in runs]
        for H, runs in sweep.items()
    }


def shown_seed(stages: Sequence[StageSummary]) -> int:
    """Index of the run that chapter 3's figures show among one head count's seeds: the first, or
    for ``H >= 3`` the first that ends with a dummy head (if any), so the figures show every kind of
    head.  Chosen by the final groups, not by the dynamics."""
    if len(stages[0].groups) >= 3:
        for k, st in enumerate(stages):
            if "dummy" in st.groups:
                return k
    return 0


def history_grid(run) -> dict:
    """The logged steps of one run's history: ``n_log`` snapshots, the last step ``steps`` and the
    largest gap ``log_gap`` between consecutive snapshots (chapter 3's resolution of the stages)."""
    steps = run.history["step"]  # (T,)
    return {"n_log": len(steps), "steps": int(steps[-1]), "log_gap": float(np.diff(steps.numpy()).max())}


STAGE_COLUMNS = ["H", "seed", "final pattern", "groups", "pattern (3.1)", "Stage I", "Stage II"]


def stage_table(sweep: dict, stages: dict, heads: Sequence[int]) -> pd.DataFrame:
    """One row per run of the head counts ``heads``: its final pattern, its heads' groups (first
    letters) and the steps from which pattern (3.1), Stage I and Stage II hold to the end
    (``NaN``: not within the budget).  Paper 1, Section 4.2; chapter 3."""
    rows = [
        {"H": H, "seed": run.spec.seed, "final pattern": st.kind, "groups": " ".join(g[0] for g in st.groups),
         "pattern (3.1)": st.shape_step, "Stage I": st.stage1_step, "Stage II": st.stage2_step}
        for H in heads
        for run, st in zip(sweep[H], stages[H])
    ]
    return pd.DataFrame(rows, columns=STAGE_COLUMNS)


def stage_statistics(table: pd.DataFrame, last: int) -> dict:
    """The values of chapter 3's stage claims from :func:`stage_table` (``last``: the last step):

    ``kept_all`` (every run keeps pattern (3.1) to the end), ``median_shape`` (median step of (3.1),
    ``NaN`` unless ``kept_all``), ``n_both`` (runs where both stages are found), ``order_frac``
    (fraction of those with Stage I no later than Stage II), ``n_strict`` (strictly earlier),
    ``both_frac`` (``{H: fraction of seeds with both stages}``) and ``late`` (runs whose (3.1)
    comes after a quarter of training).  Paper 1, Section 4.2.
    """
    shape_steps = table["pattern (3.1)"]
    kept_all = bool(shape_steps.notna().all())
    both = table.dropna(subset=["Stage I", "Stage II"])
    found = table["Stage I"].notna() & table["Stage II"].notna()
    return {
        "kept_all": kept_all,
        "median_shape": float(shape_steps.median()) if kept_all else float("nan"),
        "n_both": len(both),
        "order_frac": float((both["Stage I"] <= both["Stage II"]).mean()) if len(both) else float("nan"),
        "n_strict": int((both["Stage I"] < both["Stage II"]).sum()),
        "both_frac": {int(H): float(found[table.H == H].mean()) for H in table["H"].unique()},
        "late": table[table["pattern (3.1)"] > 0.25 * last],
    }


OBS_COLUMNS = [
    "H", "seed", "head", "group", "omega peak step", "omega rise", "omega drop", "mu final/max",
    "mu final/mid", "group mu final/max", "group mu final/mid",
]
OBS_RULES = ["omega rises then falls", "mu rises (head)", "mu rises (group)"]


def observation_table(sweep: dict, stages: dict, heads: Sequence[int]) -> pd.DataFrame:
    """Observation 4 of paper 1, Section 3, per head: one row per head that is not dummy at the end
    of a run that ends in the positive/negative pattern, with :func:`peak_profile` of
    ``|omega_h|``, ``|mu_h|`` and of its group's ``|sum mu_h|``, and the three rules of chapter 3:
    ``omega rises then falls`` (peak >= 2 x start, final >= 10% below the peak), ``mu rises (head)``
    and ``mu rises (group)`` (final >= 0.95 x maximum and above mid-training).
    """
    rows = []
    for H in heads:
        for run, st in zip(sweep[H], stages[H]):
            if st.kind != "pos/neg":
                continue
            pw, pm = peak_profile(st.steps, st.omega), peak_profile(st.steps, st.mu)
            pg = peak_profile(st.steps, st.group_mu())
            for h in np.flatnonzero(st.live):
                g = 0 if st.groups[h] == "positive" else 1  # column of the head's group in group_mu()
                rows.append({
                    "H": H, "seed": run.spec.seed, "head": h + 1, "group": st.groups[h],
                    "omega peak step": pw["peak_step"][h], "omega rise": pw["rise"][h],
                    "omega drop": pw["drop"][h], "mu final/max": pm["final"][h] / pm["peak"][h],
                    "mu final/mid": pm["final"][h] / pm["mid"][h],
                    "group mu final/max": pg["final"][g] / pg["peak"][g],
                    "group mu final/mid": pg["final"][g] / pg["mid"][g],
                })
    obs = pd.DataFrame(rows, columns=OBS_COLUMNS)
    obs["omega rises then falls"] = (obs["omega rise"] >= 2) & (obs["omega drop"] >= 0.1)
    obs["mu rises (head)"] = (obs["mu final/max"] >= 0.95) & (obs["mu final/mid"] > 1)
    obs["mu rises (group)"] = (obs["group mu final/max"] >= 0.95) & (obs["group mu final/mid"] > 1)
    return obs


def observation_summary(obs: pd.DataFrame) -> pd.DataFrame:
    """Per head count, the fraction of heads of :func:`observation_table` that meet each rule and
    the number of heads (paper 1, Observation 4).  Chapter 3."""
    summary = obs.groupby("H")[OBS_RULES].mean()
    summary["heads"] = obs.groupby("H").size()
    return summary


# ------------------------------------------------------------------------------- Figure 5 and the valley
LANDSCAPE_W = np.round(np.arange(1, 13) * 0.05, 2)  # (12,) w of the grid, heads omega = (w, -w)
LANDSCAPE_M = np.round(np.arange(1, 11) * 0.5, 2)  # (10,) m of the grid, heads mu = (m, -m)
VALLEY_W = np.geomspace(0.01, 0.6, 8)  # (8,) points of the valley floor m = mu*(w) of (4.1)


def valley_floor(w, cfg: ApproxLossConfig) -> tuple[np.ndarray, np.ndarray]:
    """The valley floor of (4.1) for two symmetric heads ``omega = (w, -w)``: ``m*(w)`` (eq. D.17,
    the first head's ``mu``) and the approximate loss there, both of shape ``w.shape``.  Chapter 3."""
    omega = symmetric_two_head(w, 0.0)[0]  # (n, 2)
    mu = mu_star(omega, cfg)  # (n, 2) = (m*, -m*)
    return mu[:, 0].numpy(), approx_loss(mu, omega, cfg).numpy()


def landscape_mc(data: DataConfig, n: int, seed: int) -> dict:
    """The true ICL loss by Monte Carlo and the approximate loss (4.1) for two symmetric heads
    (paper 1, Proposition 4.1, Figure 5), on the grid ``LANDSCAPE_W x LANDSCAPE_M`` and on the
    valley floor at ``VALLEY_W``.

    All points are evaluated on the same ``n`` sequences drawn from ``derive_seed(seed,
    "landscape")`` (float32), with debiased GD as control variate (:func:`true_loss_cv`).
    Returns ``w (12,)``, ``m (10,)``, the grid's
    ``true``, ``se``, ``approx``, ``diff = true - approx`` (each ``(10, 12)``: rows ``m``,
    columns ``w``), and on the valley ``valley_w``, ``valley_m``, ``valley_true``, ``valley_se``,
    ``valley_approx`` (each ``(8,)``).  Chapter 3.
    """
    cfg = ApproxLossConfig(d=data.d, L=data.L, sigma2=data.sigma2)
    W, M = np.meshgrid(LANDSCAPE_W, LANDSCAPE_M)  # (10, 12): rows m, columns w
    omega_g, mu_g = symmetric_two_head(W.ravel(), M.ravel())  # (120, 2)
    omega_v = symmetric_two_head(VALLEY_W, 0.0)[0]  # (8, 2)
    mu_v = mu_star(omega_v, cfg)  # (8, 2): the valley floor mu*(omega) of (4.1)
    omega_all, mu_all = torch.cat([omega_g, omega_v]), torch.cat([mu_g, mu_v])
    true_all, se_all = true_loss_cv(
        omega_all, mu_all, data, n=n, seed=derive_seed(seed, "landscape"), dtype=torch.float32
    )
    approx_all = approx_loss(mu_all, omega_all, cfg)
    G = len(omega_g)
    true = true_all[:G].reshape(W.shape).numpy()
    approx = approx_all[:G].reshape(W.shape).numpy()
    return {
        "w": LANDSCAPE_W, "m": LANDSCAPE_M, "true": true, "se": se_all[:G].reshape(W.shape).numpy(),
        "approx": approx, "diff": true - approx, "valley_w": VALLEY_W, "valley_m": mu_v[:, 0].numpy(),
        "valley_true": true_all[G:].numpy(), "valley_se": se_all[G:].numpy(),
        "valley_approx": approx_all[G:].numpy(),
    }


def landscape_statistics(land: dict, cfg: ApproxLossConfig | None = None) -> dict:
    """Chapter 3's summary of :func:`landscape_mc`'s grid: the medians and maxima of the standard
    error (``se_med``, ``se_max``) and of ``|true - (4.1)|`` (``diff_med``, ``diff_max``); for
    ``w <= 0.15`` the largest difference ``err_small`` and standard error ``se_small``; the mean
    ``|difference|`` over ``m`` at the smallest and largest ``w`` (``err_w0``, ``err_w1``).  With
    ``cfg``, the claims' estimates (Proposition 4.1):

    * ``small``: ``max |true - (4.1)|`` over the points with ``w <= 0.15``, with the interval
      ``[max_i (|d_i| - 1.96 se_i), max_i (|d_i| + 1.96 se_i)]`` (each point's 95% interval);
    * ``degrade``: ``err_w1 / err_w0`` with the interval of the two means from their points'
      intervals (lower: smallest numerator over largest denominator);
    * ``gap_limit``: the largest ``1/L`` gap ``eta (2 - eta (1 + c d)) / L`` between debiased GD's
      risk and (4.1)'s small-``w`` limit, ``s* / L`` (derived in the chapter).
    """
    diff, se = land["diff"], land["se"]  # (10, 12)
    small = land["w"] <= 0.15 + 1e-9
    col_err = np.abs(diff).mean(0)  # (12,) mean |difference| per w
    out = {
        "se_med": float(np.median(se)), "se_max": float(se.max()),
        "diff_med": float(np.median(np.abs(diff))), "diff_max": float(np.abs(diff).max()),
        "excess": float((np.abs(diff[:, small]) - 3 * se[:, small]).max()),
        "err_small": float(np.abs(diff[:, small]).max()), "se_small": float(se[:, small].max()),
        "err_w0": float(col_err[0]), "err_w1": float(col_err[-1]),
    }
    if cfg is not None:
        z = 1.96
        a, e = np.abs(diff[:, small]), se[:, small]
        out["small"] = Estimate(out["err_small"], float(max((a - z * e).max(), 0.0)), float((a + z * e).max()),
                                what="largest |true - (4.1)| at w <= 0.15, per-point 95% intervals")
        lo0 = np.clip(np.abs(diff[:, 0]) - z * se[:, 0], 0, None).mean()
        hi0 = (np.abs(diff[:, 0]) + z * se[:, 0]).mean()
        lo1 = np.clip(np.abs(diff[:, -1]) - z * se[:, -1], 0, None).mean()
        hi1 = (np.abs(diff[:, -1]) + z * se[:, -1]).mean()
        out["degrade"] = Estimate(out["err_w1"] / out["err_w0"], float(lo1 / hi0),
                                  float(hi1 / lo0) if lo0 > 0 else math.inf,
                                  what="ratio of mean |true - (4.1)| at the largest and smallest w")
        out["gap_limit"] = s_star(cfg) / cfg.L
    return out


def valley_table(land: dict) -> pd.DataFrame:
    """:func:`landscape_mc` on the valley floor: ``w``, ``m*(w)``, the true loss, its standard
    error and (4.1), one row per point (paper 1, Figure 5's river valley).  Chapter 3."""
    return pd.DataFrame({"w": land["valley_w"], "m*(w)": land["valley_m"], "true (MC)": land["valley_true"],
                         "se": land["valley_se"], "(4.1)": land["valley_approx"]})


def valley_statistics(land: dict, cfg: ApproxLossConfig) -> dict:
    """The values of chapter 3's valley claims: whether (4.1) decreases as ``w`` decreases
    (``approx_decreasing``), (4.1) and the true loss at the smallest ``w`` (``approx_v0``,
    ``true_v0``, standard error ``se_v0``) and the true loss at the largest (``true_v1``), the
    standard error ``se_pair`` of their difference (the two estimates' errors added in
    quadrature, which overstates it: they share sequences), the infimum ``l_star = 1 + sigma2 -
    s*`` of (4.1) and the optimal debiased GD risk ``r_dgd`` (Section 4.3); and the claims'
    estimates with 95% normal intervals: ``decrease = true(w_max) - true(w_min)`` and
    ``limit = true(w_min) - r_dgd``.  Paper 1, Section 4.2."""
    true_v, se_v, approx_v = land["valley_true"], land["valley_se"], land["valley_approx"]  # (8,)
    r_dgd = debiased_gd_risk(s_star(cfg), cfg.d, cfg.L, cfg.sigma2)
    se_pair = math.sqrt(se_v[0] ** 2 + se_v[-1] ** 2)
    dec, lim = float(true_v[-1] - true_v[0]), float(true_v[0] - r_dgd)
    z = 1.96
    return {
        "approx_decreasing": bool(np.all(np.diff(approx_v) > 0)),  # valley_w increases, so must (4.1)
        "approx_v0": float(approx_v[0]), "true_v0": float(true_v[0]), "se_v0": float(se_v[0]),
        "true_v1": float(true_v[-1]), "se_pair": se_pair,
        "l_star": loss_star(cfg), "r_dgd": r_dgd,
        "decrease": Estimate(dec, dec - z * se_pair, dec + z * se_pair, what="true(0.6) - true(0.01)"),
        "limit": Estimate(lim, lim - z * float(se_v[0]), lim + z * float(se_v[0]), what="true(0.01) - R_dGD*"),
    }


# ------------------------------------------------------------------------------- Figure 19
NORM_L_FIXED = (10, 40, 160, 640, 2560)  # context lengths of panel (a), d fixed
NORM_L_PROP = (40, 80, 160, 320, 640)  # context lengths of panels (b) and (c), d/L fixed


def attention_norm_settings(d: int, L: int, omega: float) -> dict[str, list[tuple[str, int, int, float]]]:
    """The settings ``(label, d, L, omega)`` of the three panels of paper 1, Figure 19: (a) the
    chapter's ``d`` at the lengths ``NORM_L_FIXED``; (b) the ratio ``d/L`` at ``NORM_L_PROP`` with
    ``omega``; (c) the same with ``omega / sqrt(d)``.  Chapter 3."""
    d_prop = [max(1, round(Lp * d / L)) for Lp in NORM_L_PROP]
    return {
        "a": [(f"L={Lp}", d, Lp, omega) for Lp in NORM_L_FIXED],
        "b": [(f"L={Lp}, d={dp}", dp, Lp, omega) for Lp, dp in zip(NORM_L_PROP, d_prop)],
        "c": [(f"L={Lp}, d={dp}", dp, Lp, omega / math.sqrt(dp)) for Lp, dp in zip(NORM_L_PROP, d_prop)],
    }


def attention_norm_study(d: int, L: int, omega: float, draws: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Paper 1, Figure 19: ``draws`` attention-probability norms (:func:`attention_norms`) for every
    setting of :func:`attention_norm_settings`, each from ``derive_seed(seed, "attention-norms", k,
    ord(panel))``.  Returns the draws (one row each: ``panel, setting, L, d, omega, norm``) and
    their statistics per ``(panel, L)``: ``d``, ``omega``, ``median``, ``q90`` and, in panel (c),
    the large-L law of the median (:func:`attention_norm_lln`).  Chapter 3."""
    rows = []
    for panel, cases in attention_norm_settings(d, L, omega).items():
        for k, (label, dd, LL, om) in enumerate(cases):
            norms = attention_norms(dd, LL, om, n=draws, seed=derive_seed(seed, "attention-norms", k, ord(panel)))
            rows += [{"panel": panel, "setting": label, "L": LL, "d": dd, "omega": om, "norm": float(v)} for v in norms]
    draws_df = pd.DataFrame(rows)
    stats_df = draws_df.groupby(["panel", "L"]).agg(
        d=("d", "first"), omega=("omega", "first"), median=("norm", "median"), q90=("norm", lambda v: v.quantile(0.9))
    )
    stats_df["law median"] = [
        attention_norm_lln(int(r.d), L_, r.omega) if p == "c" else np.nan for (p, L_), r in stats_df.iterrows()
    ]
    return draws_df, stats_df


def strictly_decreasing(values) -> bool:
    """Whether ``values`` decrease strictly from each entry to the next."""
    return bool(np.all(np.diff(np.asarray(values)) < 0))


def norm_statistics(stats_df: pd.DataFrame) -> dict:
    """The values of chapter 3's norm claims from :func:`attention_norm_study`'s statistics: per
    panel ``p`` in ``a, b, c``, the median at the smallest and largest ``L`` (``p_first``,
    ``p_last``) and whether median and 90% quantile both decrease strictly (``p_decreasing``);
    and ``norm_rel_law = |median / law - 1|`` at the largest ``L`` of panel (c).  Figure 19."""
    out = {}
    for p in "abc":
        s = stats_df.loc[p]
        out[f"{p}_first"], out[f"{p}_last"] = float(s["median"].iloc[0]), float(s["median"].iloc[-1])
        out[f"{p}_decreasing"] = strictly_decreasing(s["median"]) and strictly_decreasing(s["q90"])
    s = stats_df.loc["c"]
    out["norm_rel_law"] = float(abs(s["median"].iloc[-1] / s["law median"].iloc[-1] - 1))
    return out


def norm_estimates(draws: pd.DataFrame, stats_df: pd.DataFrame) -> dict:
    """The estimates of chapter 3's norm claims (Figure 19) from :func:`attention_norm_study`:

    * ``a_ratio``: panel (a)'s median at the largest ``L`` over that at the smallest, with the
      interval of the two order-statistic intervals (lower: low over high);
    * ``c_law``: panel (c)'s median at the largest ``L`` over the large-``L`` law, minus 1, with
      the median's order-statistic interval.
    """
    out = {}
    a = draws[draws.panel == "a"]
    lo_L, hi_L = a.L.min(), a.L.max()
    m0, m1 = median_ci(a[a.L == lo_L]["norm"]), median_ci(a[a.L == hi_L]["norm"])
    out["a_ratio"] = Estimate(m1.value / m0.value, m1.lo / m0.hi, m1.hi / m0.lo,
                              what="median ratio, order-statistic intervals")
    c = draws[draws.panel == "c"]
    cl = c[c.L == c.L.max()]
    law = float(stats_df.loc[("c", int(cl.L.iloc[0])), "law median"])
    mc = median_ci(cl["norm"])
    out["c_law"] = Estimate(mc.value / law - 1, mc.lo / law - 1, mc.hi / law - 1,
                            what="median / law - 1, order-statistic interval")
    return out


# ------------------------------------------------------------------------------- Figure 20
def approx_gd_sweep(sweep: dict, stages: dict, cfg: ApproxLossConfig, gd: ApproxGDConfig) -> tuple[dict, pd.DataFrame]:
    """Gradient descent on (4.1) (:func:`approx_gd`) from every trained run's own initial
    ``(omega_h, mu_h)`` (the diagonal mean of its step-0 ``KQ_h``, the last entry of its ``OV_h``),
    all seeds of a head count as one batch, compared with the run's end (paper 1, C.4, Figure 20).

    Returns ``{H: approx_gd output}`` and a table with one row per run: the final groups of the
    full model and of GD (first letters), whether the full model's non-dummy heads have the same
    group under GD up to the global sign flip (:func:`same_groups`), the number of dummy heads of
    each, ``eta = sum_h mu_h omega_h`` of each and GD's end kind (``single-sign`` or ``pos/neg``).
    A head count whose GD diverges (too large ``gd.lr`` for the setting) is kept with its history
    up to the divergence and rows of kind ``diverged``.  Chapter 3.
    """
    d = cfg.d
    runs_gd, rows = {}, []
    for H, runs in sweep.items():
        w0 = np.stack([omega_of(r.history["KQ"][0].double(), d).numpy() for r in runs])  # (seeds, H)
        m0 = np.stack([mu_of(r.history["OV"][0].double(), d).numpy() for r in runs])  # (seeds, H)
        out = runs_gd[H] = approx_gd(m0, w0, cfg, gd, on_divergence="stop")
        for k, (run, st) in enumerate(zip(runs, stages[H])):
            full = {"H": H, "seed": run.spec.seed, "full model": " ".join(g[0] for g in st.groups)}
            eta_full = float(st.omega[-1] @ st.mu[-1])
            if out["diverged"] is not None:
                rows.append({**full, "GD on (4.1)": f"diverged by step {out['diverged']}",
                             "non-dummy heads agree": False, "flipped": False,
                             "dummy in full": st.groups.count("dummy"), "dummy in GD": np.nan,
                             "eta full": eta_full, "eta GD": np.nan, "GD end kind": "diverged"})
                continue
            gw, gm = out["omega"][-1, k], out["mu"][-1, k]
            gd_groups = group_labels(gw, gm)
            agree, flipped = same_groups(st.groups, gd_groups, heads=st.live)
            rows.append({**full, "GD on (4.1)": " ".join(g[0] for g in gd_groups),
                         "non-dummy heads agree": agree, "flipped": flipped,
                         "dummy in full": st.groups.count("dummy"), "dummy in GD": gd_groups.count("dummy"),
                         "eta full": eta_full, "eta GD": float(gw @ gm),
                         "GD end kind": "single-sign" if len(set(gd_groups) - {"dummy"}) == 1 else "pos/neg"})
    table = pd.DataFrame(rows)
    table["eta rel. diff"] = table["eta GD"] / table["eta full"] - 1
    return runs_gd, table


def gd_statistics(table: pd.DataFrame, H: int) -> dict:
    """The values of chapter 3's claims on gradient descent on (4.1) for ``H`` heads, from
    :func:`approx_gd_sweep`'s table: ``gd_frac`` (fraction of seeds whose non-dummy heads agree),
    ``n_agree`` (those seeds), ``gd_eta_err`` (largest ``|eta_GD / eta_full - 1|`` among them,
    ``NaN`` if none), and the seeds with a dummy head in the full model and under GD
    (``gd_dummy_full``, ``gd_dummy_gd``).  Figure 20."""
    sub = table[table.H == H]
    agreeing = sub[sub["non-dummy heads agree"]]
    return {
        "gd_frac": float(sub["non-dummy heads agree"].mean()),
        "n_agree": len(agreeing),
        "gd_eta_err": float(agreeing["eta rel. diff"].abs().max()) if len(agreeing) else float("nan"),
        "gd_dummy_full": int((sub["dummy in full"] > 0).sum()),
        "gd_dummy_gd": int((sub["dummy in GD"] > 0).sum()),
    }


def gd_stages(out: dict, k: int, d: int, rules: StageRules = StageRules()) -> StageSummary:
    """:func:`detect_stages` of the ``k``-th start of an :func:`approx_gd` output, whose iterates
    are circuits of the form (3.1) (:func:`reparam_circuits`).  Chapter 3, Figure 20."""
    omega = torch.from_numpy(out["omega"][:, k])  # (T, H)
    KQ, OV = reparam_circuits(omega, torch.from_numpy(out["mu"][:, k]), d)
    return detect_stages(KQ, OV, out["step"], d, rules)


def one_head_optimum(cfg: ApproxLossConfig) -> dict:
    """The minimum of (4.1) for one head (or equal heads with summed ``mu``): with the optimal
    ``mu``, (4.1) is ``1 + sigma2 - omega^2 / (omega^2 + c e^{d omega^2})``, smallest at
    ``omega = 1/sqrt(d)``, where ``mu = omega / (omega^2 + c e)`` and ``eta = omega mu`` (the
    single-sign end point of chapter 3; Section 4.2)."""
    omega = 1 / math.sqrt(cfg.d)
    mu = omega / (omega**2 + cfg.c * math.e)
    return {"omega": omega, "mu": mu, "eta": omega * mu}


def single_sign_end(table: pd.DataFrame, runs_gd: dict, cfg: ApproxLossConfig, seed: int) -> dict | None:
    """The first start of :func:`approx_gd_sweep` (runs of seeds ``seed, seed + 1, ...``) whose GD on
    (4.1) ends single-sign: its ``H``, ``seed``, end point ``omega (H,)``, summed ``|mu|`` and the
    eigenvalues of the Hessian of (4.1) there (:func:`approx_hessian`); ``None`` if no start ends
    so.  Chapter 3."""
    single = table[table["GD end kind"] == "single-sign"]
    if not len(single):
        return None
    H, k = int(single.iloc[0]["H"]), int(single.iloc[0]["seed"]) - seed
    w_end, m_end = runs_gd[H]["omega"][-1, k], runs_gd[H]["mu"][-1, k]  # (H,)
    eig = torch.linalg.eigvalsh(approx_hessian(m_end, w_end, cfg))  # (2H,)
    return {"H": H, "seed": seed + k, "omega": w_end, "mu_sum": abs(m_end.sum()), "eig": eig.numpy()}


# ------------------------------------------------------------------------------- chapter 3's estimates
# Every claim of chapter 3 is decided on an interval (:mod:`icl_lib.stats`).  The unit of
# replication of a trained model is its seed: fractions are over runs (Clopper-Pearson), medians
# over runs (order-statistic interval).  The functions below compute them from the tables above.

SETTLE_TOL = 0.1  # (4.3) is established from the first step after which |eta / s* - 1| stays below this
FALL_TOL = 0.1  # |omega_h| "falls" when its final value is at least this fraction below its peak


def stage_estimates(table: pd.DataFrame, last: int) -> dict:
    """Chapter 3's stage claims as :class:`~icl_lib.stats.Estimate` s, from :func:`stage_table`
    (one row per run; ``last``: the last step).  ``shape_step``: the median over all runs of the
    step from which pattern (3.1) holds to the end (a run that never establishes it counts as
    ``last + 1``, beyond the budget); ``kept``: the fraction of runs in the pattern at the end;
    ``order``: among the runs where both stages are found, the fraction with Stage I no later
    than Stage II; ``both``: ``{H: fraction of the runs of H with both stages}``.  Paper 1,
    Sections 3 and 4.2."""
    shape = table["pattern (3.1)"].astype(float)
    both = table.dropna(subset=["Stage I", "Stage II"])
    found = table["Stage I"].notna() & table["Stage II"].notna()
    return {
        "shape_step": median_ci(shape.fillna(last + 1).to_numpy()),
        "kept": proportion_ci(int(shape.notna().sum()), len(table)),
        "order": proportion_ci(int((both["Stage I"] <= both["Stage II"]).sum()), max(len(both), 1))
        if len(both) else Estimate(math.nan, 0.0, 1.0, what="no run with both stages"),
        "both": {int(H): proportion_ci(int(found[table.H == H].sum()), int((table.H == H).sum()))
                 for H in table["H"].unique()},
    }


RUN_COLUMNS = ["H", "seed", "final pattern", "live heads", "omega drop (median head)", "omega falls",
               "group mu final/max (min)", "group mu final/mid (min)", "mu rises"]


def observation_runs(sweep: dict, stages: dict, heads: Sequence[int], fall_tol: float = FALL_TOL) -> pd.DataFrame:
    """Observation 4 of paper 1, Section 3, per run (every run, whatever its final pattern): the
    median over its non-dummy heads of the fall ``1 - final / peak`` of ``|omega_h|`` and whether
    it reaches ``fall_tol`` (``omega falls``); for the OV side, the smallest over its final groups
    (positive, negative; one group for a single-sign run) of ``|sum mu_h|`` at the end against its
    maximum and against mid-training, and whether every group ends within 5% of its maximum and
    above mid-training (``mu rises``).  Chapter 3."""
    rows = []
    for H in heads:
        for run, st in zip(sweep[H], stages[H]):
            pw = peak_profile(st.steps, st.omega)
            live = np.flatnonzero(st.live)
            drop = float(np.median(pw["drop"][live]))
            gm = st.group_mu()  # (T, 2) positive, negative
            present = [g for g, name in enumerate(("positive", "negative")) if name in st.groups]
            pg = peak_profile(st.steps, gm[:, present])
            fmax = float((pg["final"] / pg["peak"]).min())
            fmid = float((pg["final"] / pg["mid"]).min())
            rows.append({"H": H, "seed": run.spec.seed, "final pattern": st.kind, "live heads": len(live),
                         "omega drop (median head)": drop, "omega falls": drop >= fall_tol,
                         "group mu final/max (min)": fmax, "group mu final/mid (min)": fmid,
                         "mu rises": fmax >= 0.95 and fmid > 1.0})
    return pd.DataFrame(rows, columns=RUN_COLUMNS)


def run_fraction(table: pd.DataFrame, H: int, column: str) -> Estimate:
    """The fraction of the runs of ``H`` in ``table`` whose boolean ``column`` holds, with its
    Clopper-Pearson interval (the runs are independent seeds).  Chapter 3."""
    sub = table[table.H == H][column].astype(bool)
    if not len(sub):
        fail("H", H, f"a head count of the table ({sorted(table.H.unique())})")
    return proportion_ci(int(sub.sum()), len(sub))


def eta_history(st: StageSummary) -> np.ndarray:
    """``eta(t) = sum_h mu_h omega_h`` along a run's history, shape ``(T,)``: the left-hand side of
    the transitional optimality condition (4.3) and the effective step of debiased GD (Section
    4.3).  Chapter 3."""
    return (st.omega * st.mu).sum(1)


def manifold_scales(st: StageSummary) -> tuple[np.ndarray, np.ndarray]:
    """The two coordinates of the solution manifold (4.5) along a run's history: ``omega_bar (T,)``,
    the mean ``|omega_h|`` over the heads that are not dummy at the end, and ``mu_bar (T,)``, the
    mean over the final positive and negative groups of ``|sum_h mu_h|`` (the group's OV weight,
    the only part of ``mu`` the predictor sees).  Chapter 3."""
    w_bar = np.abs(st.omega[:, st.live]).mean(1)
    present = [g for g, name in enumerate(("positive", "negative")) if name in st.groups]
    m_bar = st.group_mu()[:, present].mean(1)
    return w_bar, m_bar


def manifold_slope(steps, w_bar, m_bar, start: int, min_points: int = 9) -> tuple[float, float, int]:
    """How the group OV weight follows the KQ scale while the run slides along the manifold:
    ``(slope, dlog_omega, n)`` over the ``n`` logged steps ``>= start``, where ``slope`` is
    ``dlog_mu / dlog_omega`` between the medians of ``log mu_bar`` and ``log omega_bar`` over the
    first and the last third of those steps (medians: robust to the step-to-step jitter of Adam,
    which would bias a least-squares slope towards 0).  On the manifold (4.5) ``2 mu_bar omega_bar
    = s(omega_bar)``, nearly constant, so the slope is ``-1``.  ``NaN`` with fewer than
    ``min_points`` steps, or when ``omega_bar`` moved by less than 2% (``|dlog_omega| < 0.02``:
    nothing to measure).  Chapter 3."""
    steps = np.asarray(steps)
    keep = steps >= start
    n = int(keep.sum())
    if n < min_points:
        return math.nan, math.nan, n
    lw, lm = np.log(np.asarray(w_bar)[keep]), np.log(np.asarray(m_bar)[keep])
    k = n // 3
    dw = float(np.median(lw[-k:]) - np.median(lw[:k]))
    dm = float(np.median(lm[-k:]) - np.median(lm[:k]))
    return (dm / dw if abs(dw) >= 0.02 else math.nan), dw, n


OPT_COLUMNS = ["H", "seed", "final pattern", "Stage I", "Stage II", "(4.3) from", "eta/s* (late)",
               "eta/s* (end)", "slide from", "omega_bar change", "slope dlog mu/dlog omega", "slide steps"]


def optimality_table(sweep: dict, stages: dict, heads: Sequence[int], cfg: ApproxLossConfig,
                     tol: float = SETTLE_TOL) -> pd.DataFrame:
    """The transitional optimality (4.3) and the solution manifold (4.5) along every run of the
    head counts ``heads`` (paper 1, Section 4.2): per run, the steps from which Stage I and Stage
    II hold (:func:`detect_stages`), the step ``(4.3) from`` after which ``|eta / s* - 1| < tol``
    holds to the end (``s* = 1 / (1 + (1 + sigma2) d / L)``, :func:`~.approx_loss.s_star`),
    ``eta / s*`` as the median over the second half of training (``late``) and at the end; and,
    for runs that reach both Stage II and (4.3), the slide along the manifold from the later of
    the two steps (``slide from``) to the end: the relative change of ``omega_bar`` and
    :func:`manifold_slope`.  Chapter 3."""
    ss = s_star(cfg)
    rows = []
    for H in heads:
        for run, st in zip(sweep[H], stages[H]):
            ratio = eta_history(st) / ss
            settled = first_persistent_step(st.steps, np.abs(ratio - 1) < tol)
            late = st.steps >= st.steps[-1] / 2
            row = {"H": H, "seed": run.spec.seed, "final pattern": st.kind, "Stage I": st.stage1_step,
                   "Stage II": st.stage2_step, "(4.3) from": settled,
                   "eta/s* (late)": float(np.median(ratio[late])), "eta/s* (end)": float(ratio[-1]),
                   "slide from": None, "omega_bar change": math.nan, "slope dlog mu/dlog omega": math.nan,
                   "slide steps": 0}
            if st.stage2_step is not None and settled is not None:
                start = max(st.stage2_step, settled)
                w_bar, m_bar = manifold_scales(st)
                slope, dw, n = manifold_slope(st.steps, w_bar, m_bar, start)
                row.update({"slide from": start, "omega_bar change": math.expm1(dw) if np.isfinite(dw) else math.nan,
                            "slope dlog mu/dlog omega": slope, "slide steps": n})
            rows.append(row)
    return pd.DataFrame(rows, columns=OPT_COLUMNS)


def optimality_estimates(table: pd.DataFrame, H: int) -> dict:
    """Chapter 3's estimates of (4.3) and (4.5) for the runs of ``H`` in :func:`optimality_table`:

    * ``eta``: median of ``eta/s* (late)`` over the runs that established Stage I (the condition's
      precondition: sign matching and zero-sum OV), order-statistic interval; ``eta_all``: the
      same over every run (shown beside it, never hidden);
    * ``slope``: median over the runs with a measured slide of ``dlog mu_bar / dlog omega_bar``.

    Paper 1, Section 4.2 (eqs. 4.3, 4.5)."""
    sub = table[table.H == H]
    if not len(sub):
        fail("H", H, f"a head count of the table ({sorted(table.H.unique())})")
    stage1 = sub[sub["Stage I"].notna()]
    slopes = sub["slope dlog mu/dlog omega"].dropna()
    none = Estimate(math.nan, -math.inf, math.inf, what="no run")
    return {
        "eta": median_ci(stage1["eta/s* (late)"]) if len(stage1) else none,
        "eta_all": median_ci(sub["eta/s* (late)"]),
        "slope": median_ci(slopes) if len(slopes) else none,
        "n_stage1": len(stage1), "n_slope": len(slopes), "n": len(sub),
    }


def settle_order_estimate(table: pd.DataFrame) -> Estimate:
    """Among the runs of :func:`optimality_table` where both are found, the fraction in which
    (4.3) is established no later than Stage II ("after (4.2) and (4.3) are established, the
    training enters the second stage", paper 1, Section 4.2), Clopper-Pearson interval."""
    both = table.dropna(subset=["(4.3) from", "Stage II"])
    if not len(both):
        return Estimate(math.nan, 0.0, 1.0, what="no run with both")
    return proportion_ci(int((both["(4.3) from"] <= both["Stage II"]).sum()), len(both))


def gd_estimates(table: pd.DataFrame, H: int) -> dict:
    """Chapter 3's estimates for gradient descent on (4.1) against the full model, ``H`` heads, from
    :func:`approx_gd_sweep`'s table: ``agree``, the fraction of runs whose non-dummy heads end in
    the same groups (Clopper-Pearson); ``eta``, the median over those runs of
    ``eta_GD / eta_full - 1`` (order-statistic interval; unbounded with fewer than 6 runs).
    Paper 1, C.4 (Figure 20)."""
    sub = table[table.H == H]
    if not len(sub):
        fail("H", H, f"a head count of the table ({sorted(table.H.unique())})")
    agree = sub[sub["non-dummy heads agree"].astype(bool)]
    eta = median_ci(agree["eta rel. diff"]) if len(agree) else Estimate(math.nan, -math.inf, math.inf, what="no run")
    return {"agree": proportion_ci(len(agree), len(sub)), "eta": eta, "n_agree": len(agree)}
