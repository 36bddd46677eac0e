"""Why a seed ends in the single-sign trap: the population dynamics from its own start, the basin
of the trap in the plane of the initial OV scales, and the curvature of the true loss at the trap
(chapter 9).

Paper 1's Stage I argument (Section 4.2, Appendix D) follows the gradient flow on the approximate
loss (4.1) in the reparameterised form (3.1), ``omega = (omega_h)`` (KQ scales) and ``mu = (mu_h)``
(OV scales).  At ``omega = 0`` the gradient of (4.1) in ``omega`` is ``-2 mu`` exactly, so every
KQ scale starts to grow with the sign of its own OV scale: a start whose ``mu_h`` share one sign
grows KQ scales of one sign.  This module runs the population dynamics from each trained seed's own
initial ``(omega_h, mu_h)`` and asks how often they predict that seed's outcome:

* :func:`approx_adam` -- Adam (the training's optimiser, rate and steps) on (4.1), batched over
  starts; :func:`~icl_lib.paper1.dynamics.approx_descent.approx_gd` is gradient descent on it;
* :func:`restricted_adam` -- Adam on the *true* loss of models of the form (3.1), by Monte Carlo
  (fresh prompts every step, as in training), from the same starts;
* :func:`end_pattern` -- whether an end point has live heads of both signs (chapter 2's rule);
* :func:`basin` -- the outcome of a dynamics over a grid of initial ``(mu_1, mu_2)`` at
  ``omega = 0`` (two heads);
* :func:`circuit_hessian` -- the Hessian of the true loss in every circuit entry the prediction
  reads (``KQ_h[:, :d]`` and ``OV_h``), by Monte Carlo on independent batches, with a bootstrap
  interval of its smallest eigenvalue: a strict local minimum has it above 0, a saddle below.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch

from ...circuits import dummy_heads
from ...config import DataConfig
from ...sampling import sample_batch
from ...seeding import generator as seeded
from ...stats import LEVEL, Estimate
from ...validate import check_float, check_int
from ..approx_loss import ApproxLossConfig, approx_loss_grad

__all__ = ["approx_adam", "restricted_adam", "end_pattern", "basin", "circuit_loss", "circuit_derivatives",
           "circuit_hessian", "restricted_loss", "initialisation_predictions", "paper_dynamics", "PAPER_SETTING"]

BETAS, EPS = (0.9, 0.999), 1e-8  # torch.optim.Adam's defaults, as in training


def _adam(theta: list[np.ndarray], grad: Callable, lr: float, steps: int) -> list[np.ndarray]:
    """``steps`` Adam updates of the arrays ``theta`` with ``grad(theta) -> list of arrays``."""
    m = [np.zeros_like(t) for t in theta]
    v = [np.zeros_like(t) for t in theta]
    b1, b2 = BETAS
    for t in range(1, steps + 1):
        g = grad(theta)
        for i in range(len(theta)):
            m[i] = b1 * m[i] + (1 - b1) * g[i]
            v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i]
            theta[i] = theta[i] - lr * (m[i] / (1 - b1**t)) / (np.sqrt(v[i] / (1 - b2**t)) + EPS)
    return theta


def approx_adam(mu0, omega0, cfg: ApproxLossConfig, lr: float, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Adam on (4.1) from ``mu0, omega0 (..., H)`` (one start per leading index) with the
    closed-form gradient (:func:`~icl_lib.paper1.approx_loss.approx_loss_grad`): the training's
    optimiser on the paper's population loss.  Returns the end ``(mu, omega)``."""
    lr = check_float("lr", lr, 0.0, 1.0, lo_open=True)
    steps = check_int("steps", steps, 1, 10_000_000)
    mu, omega = np.array(mu0, dtype=np.float64), np.array(omega0, dtype=np.float64)
    if mu.shape != omega.shape:
        raise ValueError(f"mu0.shape={mu.shape} is invalid: accepted omega0.shape={omega.shape}")
    mu, omega = _adam([mu, omega], lambda th: list(approx_loss_grad(th[0], th[1], cfg)), lr, steps)
    return mu, omega


PAPER_SETTING = DataConfig(d=5, L=40, sigma2=0.1)  # paper 1's data, where chapter 9 reads the initialisations


def paper_dynamics(kind: str, lr: float = 0.05, steps: int = 20_000, data: DataConfig | None = None) -> Callable:
    """``(mu0, omega0) -> (mu, omega)`` at the end of the population dynamics of (4.1) at ``data``
    (default paper 1's setting) from starts ``(..., H)``: ``kind="gd"``, gradient descent at rate
    ``lr`` for ``steps`` (stopped where it diverges); ``"adam"``, Adam at the training's ``lr`` for
    ``steps``.  Chapter 9's predictions and basin maps."""
    from ..dynamics.approx_descent import ApproxGDConfig, approx_gd

    data = data or PAPER_SETTING
    cfg = ApproxLossConfig(d=data.d, L=data.L, sigma2=data.sigma2)
    if kind == "adam":
        return lambda mu0, omega0: approx_adam(mu0, omega0, cfg, lr, steps)
    if kind != "gd":
        raise ValueError(f"kind={kind!r} is invalid: accepted 'gd' or 'adam'")
    gd = ApproxGDConfig(lr=lr, steps=steps, n_log=2)

    def run(mu0, omega0):
        out = approx_gd(mu0, omega0, cfg, gd, on_divergence="stop")
        return out["mu"][-1], out["omega"][-1]

    return run


def initialisation_predictions(mu0, omega0, same_sign, lr: float, steps: int, restricted_steps: int,
                               seed: int) -> dict[str, np.ndarray]:
    """Each seed's outcome as predicted from its start ``mu0, omega0 (seeds, H)`` alone, at paper 1's
    setting: gradient descent on (4.1) (:func:`paper_dynamics`), Adam on (4.1) at the training's
    ``lr`` for ``steps``, Adam on the true loss of the form (3.1) for ``restricted_steps``
    (:func:`restricted_adam`, ``seed``), and OV scales of both signs at step 0 (``~same_sign``).
    ``{name: (seeds,) bool}``: whether each predicts the positive/negative pattern.  Chapter 9."""
    return {
        "GD on (4.1)": end_pattern(*paper_dynamics("gd")(mu0, omega0)),
        "Adam on (4.1)": end_pattern(*paper_dynamics("adam", lr, steps)(mu0, omega0)),
        "Adam, true loss, form (3.1)": end_pattern(*restricted_adam(mu0, omega0, PAPER_SETTING, lr,
                                                                    restricted_steps, seed=seed)),
        "mu of both signs at step 0": ~np.asarray(same_sign, dtype=bool),
    }


def end_pattern(mu, omega) -> np.ndarray:
    """Per end point ``mu, omega (..., H)``: whether its live (non-dummy) heads have both signs of
    ``omega_h`` (the positive/negative pattern; chapter 2's dummy rule)."""
    w, m = torch.as_tensor(np.asarray(omega, dtype=float)), torch.as_tensor(np.asarray(mu, dtype=float))
    live = ~dummy_heads(w, m)
    return ((live & (w > 0)).any(-1) & (live & (w < 0)).any(-1)).numpy()


def restricted_loss(mu: torch.Tensor, omega: torch.Tensor, x, y, xq, yq) -> torch.Tensor:
    """The ICL loss of models of the form (3.1), per model: ``mu, omega (R, H)`` on prompts ``x (B, L,
    d)``, ``y (B, L)``, ``xq (B, d)``, ``yq (B,)`` shared by all models; ``y_hat = sum_h mu_h
    sum_i softmax_i(omega_h x_i . x_q) y_i`` (eq. 2.2 with ``KQ_h = omega_h I_d`` and ``OV_h = mu_h
    e_{d+1}``).  Differentiable in ``mu`` and ``omega``."""
    g = torch.einsum("bld,bd->bl", x, xq)  # (B, L) x_i . x_q
    a = torch.softmax(omega[:, :, None, None] * g, dim=-1)  # (R, H, B, L)
    pooled = torch.einsum("rhbl,bl->rhb", a, y)
    pred = (mu[:, :, None] * pooled).sum(1)  # (R, B)
    return ((pred - yq) ** 2).mean(-1)


def restricted_adam(mu0, omega0, data: DataConfig, lr: float, steps: int, batch: int = 256, seed: int = 0,
                    threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Adam on the true loss of models of the form (3.1) (:func:`restricted_loss`), from ``mu0,
    omega0 (R, H)``, at the training's rate, batch and number of steps, every step on ``batch``
    fresh prompts (shared by the ``R`` starts; seeded by ``seed``; float32, as training): the trained
    models' dynamics without the off-diagonal KQ and off-label OV entries.  Returns the end
    ``(mu, omega)``."""
    lr = check_float("lr", lr, 0.0, 1.0, lo_open=True)
    steps = check_int("steps", steps, 1, 10_000_000)
    mu = torch.tensor(np.asarray(mu0, dtype=np.float32), requires_grad=True)
    omega = torch.tensor(np.asarray(omega0, dtype=np.float32), requires_grad=True)
    opt = torch.optim.Adam([mu, omega], lr=lr, betas=BETAS, eps=EPS)
    gen = seeded(seed, "restricted-adam")
    block = 64  # steps whose prompts are drawn at once
    for t in range(steps):
        if t % block == 0:
            b = sample_batch(data, batch * min(block, steps - t), gen, dtype=torch.float32)
            xs, ys, xqs, yqs = b.x, b.y[..., 0], b.xq, b.yq[..., 0]
        i = (t % block) * batch
        opt.zero_grad(set_to_none=True)
        restricted_loss(mu, omega, xs[i:i + batch], ys[i:i + batch], xqs[i:i + batch], yqs[i:i + batch]).sum().backward()
        opt.step()
    return mu.detach().numpy(), omega.detach().numpy()


def basin(dynamics: Callable, mu_max: float, n: int = 41) -> tuple[np.ndarray, np.ndarray]:
    """The outcome of ``dynamics(mu0, omega0) -> (mu, omega)`` (two heads, batched) over an ``n x
    n`` grid of initial ``(mu_1, mu_2)`` in ``[-mu_max, mu_max]^2`` at ``omega = 0``: returns the
    grid's axis ``(n,)`` and ``pattern (n, n)`` (rows ``mu_2``, columns ``mu_1``)."""
    mu_max = check_float("mu_max", mu_max, 0.0, 10.0, lo_open=True)
    n = check_int("n", n, 3, 401)
    axis = np.linspace(-mu_max, mu_max, n)
    m1, m2 = np.meshgrid(axis, axis)
    mu0 = np.stack([m1.ravel(), m2.ravel()], -1)
    mu, omega = dynamics(mu0, np.zeros_like(mu0))
    return axis, end_pattern(mu, omega).reshape(n, n)


# ------------------------------------------------------------------------------------ the trap's curvature
def circuit_loss(theta: torch.Tensor, H: int, d: int, x, y, xq, yq) -> torch.Tensor:
    """The ICL loss (eq. 2.2) of one model whose circuits are read from ``theta``: the entries of
    ``KQ_h[:, :d]`` (``H * D * d``, the columns that meet ``x_q``) then of ``OV_h`` (``H * D``, one
    task), on prompts ``x (B, L, d)``, ``y (B, L)``, ``xq (B, d)``, ``yq (B,)``."""
    D = d + 1
    kq = theta[: H * D * d].reshape(H, D, d)
    ov = theta[H * D * d:].reshape(H, D)
    z = torch.cat([x, y[..., None]], -1)  # (B, L, D) context tokens
    u = torch.einsum("hed,bd->bhe", kq, xq)  # (B, H, D): KQ_h z_q
    a = torch.softmax(torch.einsum("ble,bhe->bhl", z, u), -1)  # (B, H, L)
    pooled = torch.einsum("bhl,ble->bhe", a, z)  # (B, H, D)
    pred = torch.einsum("bhe,he->b", pooled, ov)
    return ((pred - yq) ** 2).mean()


def circuit_derivatives(theta: torch.Tensor, H: int, d: int, x, y, xq, yq) -> tuple[torch.Tensor, torch.Tensor]:
    """The gradient and the Hessian of :func:`circuit_loss` in ``theta``, in closed form (checked
    against autograd in the tests): with ``a_h`` the attention of head ``h``, ``P_h = sum_i a_hi z_i``,
    ``c_hi = OV_h . (z_i - P_h)`` and ``r = y_hat - y_q``, the prediction's gradient is ``G_h x_q^T``
    in ``KQ_h`` (``G_h = sum_i a_hi c_hi z_i``) and ``P_h`` in ``OV_h``; the loss's Hessian is ``2 E[J
    J^T] + 2 E[r d^2 y_hat]``, whose second term has the blocks ``C_h x_q`` (``OV_h`` with ``KQ_h``;
    ``C_h`` the attention-weighted covariance of the tokens) and ``T_h x_q x_q^T`` (``KQ_h`` with
    itself; ``T_h = sum_k a_hk (c_hk (z_k - P_h) - G_h) z_k^T``); heads do not mix in it."""
    D, B = d + 1, x.shape[0]
    kq = theta[: H * D * d].reshape(H, D, d)
    ov = theta[H * D * d:].reshape(H, D)
    z = torch.cat([x, y[..., None]], -1)  # (B, L, D)
    u = torch.einsum("hed,bd->bhe", kq, xq)
    a = torch.softmax(torch.einsum("ble,bhe->bhl", z, u), -1)  # (B, H, L)
    P = torch.einsum("bhl,ble->bhe", a, z)  # (B, H, D)
    r = torch.einsum("bhe,he->b", P, ov) - yq  # (B,)
    dz = z[:, None] - P[:, :, None]  # (B, H, L, D): z_i - P_h
    c = torch.einsum("bhle,he->bhl", dz, ov)
    G = torch.einsum("bhl,ble->bhe", a * c, z)  # (B, H, D)
    J = torch.cat([torch.einsum("bhe,bj->bhej", G, xq).reshape(B, -1), P.reshape(B, -1)], 1)  # (B, n)
    grad = 2 * (r[:, None] * J).mean(0)
    hess = 2 * J.T @ J / B
    C = torch.einsum("bhl,bhlf,ble->bhfe", a, dz, z)  # (B, H, D, D): C[f, e] = sum_i a_i (z_if - P_f) z_ie
    T = torch.einsum("bhk,bhke,bkf->bhef", a * c, dz, z) - torch.einsum("bhe,bhk,bkf->bhef", G, a, z)
    n_kq = H * D * d
    cross = 2 * torch.einsum("b,bhfe,bj->hfej", r, C, xq) / B  # (H, D_ov, D, d)
    self_kq = 2 * torch.einsum("b,bhef,bj,bk->hejfk", r, T, xq, xq) / B  # (H, D, d, D, d)
    for h in range(H):
        k0, o0 = h * D * d, n_kq + h * D
        hess[k0:k0 + D * d, k0:k0 + D * d] += self_kq[h].reshape(D * d, D * d)
        blk = cross[h].reshape(D, D * d)
        hess[o0:o0 + D, k0:k0 + D * d] += blk
        hess[k0:k0 + D * d, o0:o0 + D] += blk.T
    return grad, hess


def circuit_hessian(KQ: torch.Tensor, OV: torch.Tensor, data: DataConfig, n: int, batches: int, seed: int,
                    chunk: int = 20_000, boot: int = 2_000, level: float = LEVEL) -> dict:
    """The Hessian of the true loss at circuits ``KQ (H, D, D)``, ``OV (H, 1, D)`` in the ``H (D d +
    D)`` entries the prediction reads (:func:`circuit_loss`, :func:`circuit_derivatives`), by Monte
    Carlo: ``batches`` independent batches of ``n`` prompts (float64).  Returns ``eig`` and ``vec``
    (the eigenvalues of the mean Hessian, ascending, and their eigenvectors as columns),
    ``lam_min`` (the smallest eigenvalue, as an :class:`Estimate` whose interval is the percentile
    bootstrap over batches), ``grad_norm`` (the norm of the mean gradient), ``grad_se`` (its
    batch-to-batch standard error, the norm of the per-entry standard errors) and ``theta``."""
    n, batches = check_int("n", n, 100, 10_000_000), check_int("batches", batches, 2, 10_000)
    H, d = KQ.shape[0], data.d
    theta = torch.cat([KQ[:, :, :d].reshape(-1), OV[:, 0, :].reshape(-1)]).double()
    gen = seeded(seed, "trap-hessian")
    hess, grads = [], []
    for _ in range(batches):
        Hb = torch.zeros(len(theta), len(theta), dtype=torch.float64)
        gb = torch.zeros(len(theta), dtype=torch.float64)
        done = 0
        while done < n:
            m = min(chunk, n - done)
            b = sample_batch(data, m, gen, dtype=torch.float64)
            g, h = circuit_derivatives(theta, H, d, b.x, b.y[..., 0], b.xq, b.yq[..., 0])
            Hb += h * (m / n)
            gb += g * (m / n)
            done += m
        hess.append(Hb)
        grads.append(gb)
    Hs, G = torch.stack(hess), torch.stack(grads)
    eig, vec = torch.linalg.eigh(Hs.mean(0))
    rng = np.random.default_rng(seed)
    picks = torch.from_numpy(rng.integers(0, batches, size=(boot, batches)))
    lam = torch.linalg.eigvalsh(Hs[picks].mean(1))[:, 0].numpy()
    a = (1 - level) / 2
    lam_min = Estimate(float(eig[0]), float(np.quantile(lam, a)), float(np.quantile(lam, 1 - a)), level,
                       f"smallest eigenvalue of the mean of {batches} Monte Carlo Hessians ({n} prompts each), "
                       "percentile bootstrap over batches")
    return {"eig": eig.numpy(), "vec": vec.numpy(), "lam_min": lam_min, "grad_norm": float(G.mean(0).norm()),
            "grad_se": float((G.std(0) / math.sqrt(batches)).norm()), "theta": theta.numpy(), "hessians": Hs}
