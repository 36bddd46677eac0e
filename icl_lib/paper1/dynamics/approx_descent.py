"""Gradient descent on the approximate loss (4.1) of the reparameterised H-head model (paper 1, C.4, Figure 20).

* :class:`ApproxGDConfig`, :func:`approx_gd` -- gradient descent on (4.1) from given starts, with
  :func:`group_labels` and :func:`same_groups` to compare the heads' groups up to the loss's global
  sign symmetry ``(omega, mu) -> (-omega, -mu)``, and :func:`approx_hessian`, its Hessian;
* :func:`approx_gd_sweep`, :func:`gd_statistics`, :func:`gd_stages`, :func:`one_head_optimum`,
  :func:`single_sign_end` -- gradient descent from every trained run's own start against the full
  model (Figure 20), and where a start ends with heads of one sign;
* :func:`gd_estimates` -- chapter 3's claims on it.

Used by chapter 3, and by chapter 9 (:func:`approx_gd` from each trained seed's start).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from ...circuits import dummy_heads, mu_of, omega_of
from ...stats import Estimate, median_ci, proportion_ci
from ...validate import check_choice, check_float, check_int, fail
from ..approx_loss import ApproxLossConfig, approx_loss, approx_loss_grad
from .landscape import reparam_circuits
from .stage_detection import StageRules, StageSummary, detect_stages

__all__ = [
    "ApproxGDConfig",
    "approx_gd",
    "group_labels",
    "same_groups",
    "approx_hessian",
    "approx_gd_sweep",
    "gd_statistics",
    "gd_stages",
    "one_head_optimum",
    "single_sign_end",
    "gd_estimates",
]


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


def group_labels(omega, mu, tol: float | None = None) -> list[str]:
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


def gd_stages(out: dict, k: int, d: int, rules: StageRules | None = None) -> StageSummary:
    """:func:`~icl_lib.paper1.dynamics.stage_detection.detect_stages` of the ``k``-th start of an
    :func:`approx_gd` output, whose iterates are circuits of the form (3.1)
    (:func:`~icl_lib.paper1.dynamics.landscape.reparam_circuits`).  Chapter 3, Figure 20."""
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
