"""Minimum or saddle, decided by the dynamics: gradient descent on the true loss from the trap's end points (chapter 9).

A negative Hessian eigenvalue at a point where Adam stopped does not make the point a saddle: the
point need not be stationary.  This module continues from every trapped end point with
near-population gradient descent on the true loss, in the coordinates of the circuits the
prediction reads (:func:`~icl_lib.paper1.phase_diagram.mechanism.circuit_loss`: ``KQ_h[:, :d]`` and ``OV_h``),
and asks what the dynamics do:

* :func:`descend` -- gradient descent from many points at once, each at its own constant step
  (a fraction of the stability limit ``2 / lambda_max`` of its Hessian), every step on fresh
  prompts shared by the points; the points' outcomes at the end (:func:`end_outcomes`, the book's
  one definition of the pattern);
* :func:`kicked` -- the same points moved along a direction (the softest one of their Hessian,
  both signs) before the descent;
* :func:`gradient_check` -- the gradient's norm at the end and its Monte Carlo error, on prompts
  drawn apart from the descent's: a point has *settled* where the norm is below twice the error.

:func:`~icl_lib.paper1.phase_diagram.mechanism.circuit_hessian` then gives the Hessian where the descent
settled.  Adam at the training rate continues in the engine instead (chapter 9's continued runs).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ...circuits import pattern_kinds
from ...config import DataConfig
from ...sampling import sample_batch
from ...seeding import generator as seeded
from ...stats import LEVEL
from ...validate import check_float, check_int, fail

__all__ = ["circuit_theta", "theta_circuits", "batched_loss", "descend", "kicked", "end_outcomes", "gradient_check",
           "stationarity_study"]


def circuit_theta(KQ: torch.Tensor, OV: torch.Tensor, d: int) -> torch.Tensor:
    """The coordinates of :func:`~icl_lib.paper1.phase_diagram.mechanism.circuit_loss` of circuits ``KQ (H, D,
    D)``, ``OV (H, 1, D)``: the entries of ``KQ_h[:, :d]``, then of ``OV_h`` (float64)."""
    return torch.cat([KQ[:, :, :d].reshape(-1), OV[:, 0, :].reshape(-1)]).double()


def theta_circuits(theta: torch.Tensor, H: int, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The circuits ``KQ (..., H, D, D)`` (the column that never meets the query set to 0) and ``OV
    (..., H, 1, D)`` of coordinates ``theta (..., n)``."""
    D = d + 1
    lead = theta.shape[:-1]
    kq = theta[..., : H * D * d].reshape(*lead, H, D, d)
    KQ = torch.cat([kq, torch.zeros(*lead, H, D, 1, dtype=theta.dtype)], -1)
    OV = theta[..., H * D * d:].reshape(*lead, H, 1, D)
    return KQ, OV


def batched_loss(theta: torch.Tensor, H: int, d: int, x, y, xq, yq) -> torch.Tensor:
    """The loss of every point ``theta (P, n)`` on the same prompts ``x (B, L, d)``, ``y (B, L)``,
    ``xq (B, d)``, ``yq (B,)``: ``(P,)``, as :func:`~icl_lib.paper1.phase_diagram.mechanism.circuit_loss`."""
    D, P = d + 1, theta.shape[0]
    kq = theta[:, : H * D * d].reshape(P, H, D, d)
    ov = theta[:, H * D * d:].reshape(P, H, D)
    z = torch.cat([x, y[..., None]], -1)  # (B, L, D)
    u = torch.einsum("phed,bd->pbhe", kq, xq)  # KQ_h z_q
    a = torch.softmax(torch.einsum("ble,pbhe->pbhl", z, u), -1)
    pooled = torch.einsum("pbhl,ble->pbhe", a, z)  # the attention-weighted tokens
    pred = torch.einsum("pbhe,phe->pb", pooled, ov)
    return ((pred - yq) ** 2).mean(-1)


def descend(theta0, steps_size, H: int, data: DataConfig, steps: int, batch: int, seed: int,
            record: int = 20) -> dict:
    """Gradient descent on the true loss from every point of ``theta0 (P, n)``, point ``p`` at the
    constant step ``steps_size[p]``, for ``steps`` steps of ``batch`` fresh prompts each (float64,
    shared by the points; stream ``seed``, purpose ``trap-descent``).  Returns the end points
    ``theta (P, n)``, the loss on each step's prompts every ``steps // record`` steps (``loss (K,
    P)`` at ``step (K,)``), and whether a point left the region of finite losses (``diverged``)."""
    steps, batch = check_int("steps", steps, 1, 10_000_000), check_int("batch", batch, 16, 1_000_000)
    theta = torch.as_tensor(np.asarray(theta0), dtype=torch.float64).clone()
    eta = torch.as_tensor(np.asarray(steps_size), dtype=torch.float64).reshape(-1, 1)
    if eta.shape[0] != theta.shape[0] or not bool((eta > 0).all()):
        fail("steps_size", list(eta.ravel()[:4].tolist()), f"{theta.shape[0]} positive steps, one per point")
    gen = seeded(seed, "trap-descent")
    every = max(steps // check_int("record", record, 1, 10_000), 1)
    kept, at = [], []
    block = 32  # steps whose prompts are drawn at once
    for t in range(steps):
        if t % block == 0:
            b = sample_batch(data, batch * min(block, steps - t), gen, dtype=torch.float64)
        i = (t % block) * batch
        theta.requires_grad_(True)
        loss = batched_loss(theta, H, data.d, b.x[i:i + batch], b.y[i:i + batch, :, 0], b.xq[i:i + batch],
                            b.yq[i:i + batch, 0])
        (g,) = torch.autograd.grad(loss.sum(), theta)
        with torch.no_grad():
            theta = (theta - eta * g).detach()
        if t % every == 0 or t == steps - 1:
            kept.append(loss.detach().numpy())
            at.append(t)
    finite = torch.isfinite(theta).all(-1)
    return {"theta": theta.numpy(), "loss": np.stack(kept), "step": np.array(at), "diverged": (~finite).numpy()}


def kicked(theta0, directions, size: float) -> np.ndarray:
    """Every point ``theta0 (P, n)`` moved by ``size * |theta_p|`` along its unit direction
    ``directions (P, n)``, in both senses: ``(2 P, n)``, the ``+`` kicks then the ``-`` kicks."""
    size = check_float("size", size, 0.0, 10.0, lo_open=True)
    th = np.asarray(theta0, dtype=float)
    v = np.asarray(directions, dtype=float)
    v = v / np.linalg.norm(v, axis=-1, keepdims=True)
    step = size * np.linalg.norm(th, axis=-1, keepdims=True) * v
    return np.concatenate([th + step, th - step])


def end_outcomes(theta, H: int, d: int) -> np.ndarray:
    """The book's pattern (:func:`~icl_lib.circuits.pattern_kinds`) of every point ``theta (P, n)``:
    ``(P,)`` of ``"pos/neg"``, ``"single-sign"`` or ``"unformed"``."""
    KQ, OV = theta_circuits(torch.as_tensor(np.asarray(theta), dtype=torch.float64), H, d)
    return pattern_kinds(KQ, OV, d)[0]


def gradient_check(theta, H: int, data: DataConfig, n: int, batches: int, seed: int) -> dict:
    """The norm of the true loss's gradient at every point ``theta (P, n)`` and its Monte Carlo
    error, from ``batches`` independent batches of ``n`` prompts (stream ``seed``, purpose
    ``trap-gradient``, apart from any descent's): ``norm (P,)`` of the mean gradient, ``se (P,)``
    the norm of its per-entry standard errors, and ``settled (P,)``, the norm below twice the error."""
    n, batches = check_int("n", n, 100, 10_000_000), check_int("batches", batches, 2, 1000)
    th = torch.as_tensor(np.asarray(theta), dtype=torch.float64)
    gen = seeded(seed, "trap-gradient")
    grads = []
    for _ in range(batches):
        b = sample_batch(data, n, gen, dtype=torch.float64)
        t = th.clone().requires_grad_(True)
        loss = batched_loss(t, H, data.d, b.x, b.y[..., 0], b.xq, b.yq[..., 0])
        grads.append(torch.autograd.grad(loss.sum(), t)[0])
    G = torch.stack(grads)  # (batches, P, n)
    norm = G.mean(0).norm(dim=-1).numpy()
    se = (G.std(0) / math.sqrt(batches)).norm(dim=-1).numpy()
    return {"norm": norm, "se": se, "settled": norm < 2 * se}


def stationarity_study(points: dict, data: DataConfig, steps: int, batch: int, n_mc: int, n_batches: int,
                       kick: float, seed: int, stability: float = 0.8) -> tuple["pandas.DataFrame", dict]:  # noqa: F821
    """Chapter 9's decision by the dynamics, for two-head end points ``points = {label: (KQ (H, D,
    D), OV (H, 1, D))}`` (trapped ones and controls):

    1. the Hessian of the true loss at each point (:func:`~icl_lib.paper1.phase_diagram.mechanism.circuit_hessian`,
       ``n_batches`` batches of ``n_mc`` prompts): its largest eigenvalue sets the point's step,
       ``stability / lambda_max`` (below the stability limit 2 / lambda_max), its softest direction
       the kick;
    2. gradient descent from each point (:func:`descend`, ``steps`` steps of ``batch`` fresh
       prompts), and from each point kicked by ``kick`` times its size along its softest direction,
       both senses (:func:`kicked`);
    3. the end points' outcomes, and whether the unkicked descent settled (:func:`gradient_check`);
    4. at the settled points still in the trap, the Hessian again: its smallest eigenvalue, its
       interval simultaneous over those points (Bonferroni).

    Returns one row per point (``label``; ``start`` and ``end`` outcomes; ``lambda_min`` and
    ``lambda_max`` at the start; ``eta``; ``e-folds``, the steps times ``eta |lambda_min|``;
    ``kicked +``, ``kicked -``; ``grad``, ``grad se``, ``settled``; ``lambda_min settled`` with its
    interval ends) and ``{label: lambda_min Estimate at the settled point}``."""
    import pandas as pd

    from .mechanism import circuit_hessian

    labels = list(points)
    if not labels:
        fail("points", points, "at least one end point")
    d = data.d
    H = points[labels[0]][0].shape[0]
    thetas = np.stack([circuit_theta(KQ.double(), OV.double(), d).numpy() for KQ, OV in points.values()])
    hess = [circuit_hessian(KQ.double(), OV.double(), data, n_mc, n_batches, seed + k)
            for k, (KQ, OV) in enumerate(points.values())]
    lam_max = np.array([h["eig"][-1] for h in hess])
    lam_min = np.array([h["eig"][0] for h in hess])
    eta = stability / lam_max
    soft = np.stack([h["vec"][:, 0] for h in hess])
    P = len(labels)
    starts = np.concatenate([thetas, kicked(thetas, soft, kick)])
    out = descend(starts, np.concatenate([eta, eta, eta]), H, data, steps, batch, seed)
    ends = end_outcomes(out["theta"], H, d)
    check = gradient_check(out["theta"][:P], H, data, n_mc, n_batches, seed)
    rows, settled_lam = [], {}
    start_kinds = end_outcomes(thetas, H, d)
    for k, label in enumerate(labels):
        rows.append({"label": label, "start": str(start_kinds[k]), "lambda_min": float(lam_min[k]),
                     "lambda_max": float(lam_max[k]), "eta": float(eta[k]),
                     "e-folds": float(steps * eta[k] * max(-lam_min[k], 0.0)), "end": str(ends[k]),
                     "kicked +": str(ends[P + k]), "kicked -": str(ends[2 * P + k]),
                     "grad": float(check["norm"][k]), "grad se": float(check["se"][k]),
                     "settled": bool(check["settled"][k])})
    stay = [k for k, row in enumerate(rows) if row["settled"] and row["end"] != "pos/neg"]
    level = 1 - (1 - LEVEL) / max(len(stay), 1)  # simultaneous over the settled points (Bonferroni)
    for k in stay:
        KQ, OV = theta_circuits(torch.as_tensor(out["theta"][k]), H, d)
        h = circuit_hessian(KQ, OV, data, n_mc, n_batches, seed + 1000 + k, level=level)
        settled_lam[labels[k]] = h["lam_min"]
        rows[k].update({"lambda_min settled": h["lam_min"].value, "lo": h["lam_min"].lo, "hi": h["lam_min"].hi})
    return pd.DataFrame(rows), settled_lam
