"""Two-stage training dynamics and the approximate loss (paper 1, Sections 4.1-4.2, C.1, C.4).

Chapter 3 reads chapter 2's trained runs along training and tests the approximate loss (4.1)
that explains them.  Contents:

* :class:`StageRules`, :func:`first_persistent_step`, :func:`detect_stages` -- the steps at which a
  run's history establishes the pattern (3.1), Stage I (sign matching and zero-sum OV) and Stage II
  (homogeneous KQ scale, positive and negative groups), each by an explicit rule;
* :func:`peak_profile` -- the "rises then falls" of ``|omega_h|`` and the steady rise of ``|mu_h|``;
* :func:`symmetric_two_head`, :func:`reparam_circuits`, :func:`true_loss_mc` -- Monte Carlo of the
  true ICL loss of circuits in the reparameterised form (3.1), one ensemble for a whole grid
  (Proposition 4.1, Figure 5);
* :func:`conditional_loss` -- the same loss averaged over the task and the noise in closed form
  given the covariates (a second, independent estimator, used by the tests);
* :func:`attention_norms`, :func:`attention_norm_lln` -- the attention-probability norm
  ``||softmax(omega X x_q)||_2`` and its large-L law (Figure 19);
* :class:`ApproxGDConfig`, :func:`approx_gd` -- gradient descent on (4.1) for the reparameterised
  H-head model (Figure 20), with :func:`group_labels` and :func:`same_groups` to compare the heads'
  groups up to the loss's global sign symmetry ``(omega, mu) -> (-omega, -mu)``;
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch
from scipy import stats

from ..circuits import DUMMY_TOL, dummy_heads, mu_of, omega_of, pattern_history
from ..config import DataConfig
from ..estimators import model_risk
from ..models import AttentionEnsemble
from ..seeding import generator
from ..validate import check_float, check_int
from .approx_loss import ApproxLossConfig, approx_loss, approx_loss_grad

__all__ = [
    "StageRules",
    "StageSummary",
    "first_persistent_step",
    "detect_stages",
    "peak_profile",
    "symmetric_two_head",
    "reparam_circuits",
    "true_loss_mc",
    "conditional_loss",
    "attention_norms",
    "attention_norm_lln",
    "ApproxGDConfig",
    "approx_gd",
    "group_labels",
    "same_groups",
    "approx_hessian",
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
    models_per_call = check_int("models_per_call", models_per_call, 1)
    if data.n_tasks != 1:
        raise ValueError(f"data.n_tasks={data.n_tasks} is invalid: accepted a single-task DataConfig")
    KQ, OV = reparam_circuits(omega, mu, data.d)
    KQ, OV = KQ.to(dtype), OV.to(dtype)
    means, ses = [], []
    for i in range(0, KQ.shape[0], models_per_call):
        model = AttentionEnsemble.from_circuits(KQ[i : i + models_per_call], OV[i : i + models_per_call], data.d)
        m, s = model_risk(model.requires_grad_(False), data, n=n, seed=seed, chunk=chunk)
        means.append(m.double())
        ses.append(s.double())
    return torch.cat(means), torch.cat(ses)


@torch.no_grad()
def conditional_loss(omega, mu, x: torch.Tensor, xq: torch.Tensor, sigma2: float) -> torch.Tensor:
    """``E[(y_hat - y_q)^2 | X, x_q]`` of the H-kernel predictor (3.2), averaged over ``beta`` and noise.

    With ``a = sum_h mu_h softmax(omega_h X x_q)`` the prediction is ``y_hat = a^T y``, so for
    ``beta ~ N(0, I/d)`` and noise variance ``sigma2``:
    ``E[.. | X, x_q] = ||X^T a - x_q||^2 / d + sigma2 (||a||^2 + 1)``.
    ``omega, mu (R, H)``, ``x (B, L, d)``, ``xq (B, d)``; returns ``(R, B)``.  Tests of chapter 3.
    """
    omega = torch.as_tensor(omega, dtype=x.dtype)
    mu = torch.as_tensor(mu, dtype=x.dtype)
    g = (x @ xq[..., None])[..., 0]  # (B, L) = x_i^T x_q
    p = torch.softmax(omega[:, None, :, None] * g[None, :, None, :], dim=-1)  # (R, B, H, L)
    a = (p * mu[:, None, :, None]).sum(2)  # (R, B, L)
    resid = (a[..., None] * x).sum(-2) - xq  # (R, B, d) = X^T a - x_q
    d = x.shape[-1]
    return resid.pow(2).sum(-1) / d + sigma2 * (a.pow(2).sum(-1) + 1.0)


# ------------------------------------------------------------------------------- attention norms
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


def approx_gd(mu0, omega0, loss: ApproxLossConfig, gd: ApproxGDConfig = ApproxGDConfig()) -> dict:
    """Gradient descent ``theta <- theta - lr grad L~(theta)`` on (4.1) from ``mu0, omega0 (..., H)``.

    Batched over leading dimensions (e.g. one start per seed).  Uses the closed-form gradient of
    :func:`icl_lib.paper1.approx_loss.approx_loss_grad` (numpy path).  Returns ``step (T,)``,
    ``mu (T, ..., H)``, ``omega (T, ..., H)`` and ``loss (T, ...)`` at ``gd.log_steps()``.  Raises
    ``FloatingPointError`` naming the step and ``lr`` if an iterate becomes non-finite.  Chapter 3.
    """
    if not isinstance(gd, ApproxGDConfig):
        raise ValueError(f"gd={gd!r} is invalid: accepted an ApproxGDConfig")
    mu = np.array(torch.as_tensor(mu0, dtype=torch.float64).numpy(), dtype=np.float64)
    omega = np.array(torch.as_tensor(omega0, dtype=torch.float64).numpy(), dtype=np.float64)
    if mu.shape != omega.shape or mu.ndim == 0:
        raise ValueError(f"mu0.shape={mu.shape} is invalid: accepted (..., H) equal to omega0.shape={omega.shape}")
    log = set(gd.log_steps())
    rec = {"step": [], "mu": [], "omega": []}
    with np.errstate(over="ignore", invalid="ignore"):  # a diverging run is reported below, by step and lr
        _gd_loop(mu, omega, loss, gd, log, rec)
    out = {k: np.stack(v) if k != "step" else np.array(v) for k, v in rec.items()}
    out["loss"] = approx_loss(torch.from_numpy(out["mu"]), torch.from_numpy(out["omega"]), loss).numpy()
    return out


def _gd_loop(mu, omega, loss, gd, log, rec) -> None:
    """The iterations of :func:`approx_gd`, recording into ``rec`` at the steps in ``log``."""
    for t in range(gd.steps + 1):
        if t in log:
            if not (np.isfinite(mu).all() and np.isfinite(omega).all()):
                raise FloatingPointError(f"gradient descent on (4.1) diverged by step {t} with lr={gd.lr}: lower lr")
            rec["step"].append(t)
            rec["mu"].append(mu.copy())
            rec["omega"].append(omega.copy())
        if t == gd.steps:
            break
        g_mu, g_omega = approx_loss_grad(mu, omega, loss)
        mu = mu - gd.lr * g_mu
        omega = omega - gd.lr * g_omega


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

