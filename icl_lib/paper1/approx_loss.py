"""The approximate loss of paper 1, Proposition 4.1 (eq. 4.1), its gradient, and its minimisers.

For an H-head model in the reparameterised form (3.1), with KQ scales ``omega = (omega_h)`` and OV
scales ``mu = (mu_h)``, paper 1 approximates the ICL loss by (eq. 4.1; ``exp`` element-wise)

    L~(mu, omega) = 1 + sigma2 - 2 mu^T omega + mu^T A(omega) mu,
    A(omega)      = omega omega^T + c exp(d omega omega^T),      c = (1 + sigma2) / L.

Everything here is batched over leading dimensions: ``mu`` and ``omega`` have shape ``(..., H)``
and are broadcast against each other.  Contents:

* :class:`ApproxLossConfig` -- the validated setting ``(d, L, sigma2)``;
* :func:`approx_loss`, :func:`approx_loss_grad` -- (4.1) and its closed-form gradient;
* :func:`mu_star` -- the optimal OV for fixed KQ (eq. D.17);
* :func:`two_head_loss`, :func:`two_head_vector_field`, :func:`valley_s` -- the symmetric two-head
  reduction ``omega = (w, -w)``, ``mu = (m, -m)`` (Appendix D);
* :func:`s_star`, :func:`loss_star` -- the infimum of (4.1) along the "river valley" (Section 4.2).

Used by chapter 4 (the two-head gradient flow) and chapter 3 (Proposition 4.1 and gradient descent
on (4.1)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..validate import check_float, check_int

__all__ = [
    "ApproxLossConfig",
    "approx_loss",
    "approx_loss_grad",
    "kernel_matrix",
    "mu_star",
    "s_star",
    "loss_star",
    "two_head_loss",
    "two_head_vector_field",
    "valley_s",
]


@dataclass(frozen=True)
class ApproxLossConfig:
    """The setting of the approximate loss (4.1): dimension, context length and noise level.

    Paper 1's defaults are ``d = 5``, ``L = 40``, ``sigma2 = 0.1`` (Appendix D also uses ``d = 10``).
    Used by chapters 3 and 4.
    """

    d: int = 5  # covariate dimension d
    L: int = 40  # context length L
    sigma2: float = 0.1  # label-noise variance sigma^2

    def __post_init__(self):
        object.__setattr__(self, "d", check_int("d", self.d, 1, 4096))
        object.__setattr__(self, "L", check_int("L", self.L, 1, 1_000_000))
        object.__setattr__(self, "sigma2", check_float("sigma2", self.sigma2, 0.0))

    @property
    def c(self) -> float:
        """The coefficient ``(1 + sigma2) / L`` of the kernel term of (4.1)."""
        return (1.0 + self.sigma2) / self.L

    @property
    def s_star(self) -> float:
        """``s* = 1 / (1 + (1 + sigma2) d / L)``: see :func:`s_star`."""
        return s_star(self)

    @property
    def loss_star(self) -> float:
        """``1 + sigma2 - s*``: see :func:`loss_star`."""
        return loss_star(self)


def _as_config(cfg) -> ApproxLossConfig:
    if not isinstance(cfg, ApproxLossConfig):
        raise ValueError(f"cfg={cfg!r} is invalid: accepted an ApproxLossConfig")
    return cfg


def _pair(mu, omega) -> tuple[torch.Tensor, torch.Tensor]:
    mu = torch.as_tensor(mu, dtype=torch.float64)
    omega = torch.as_tensor(omega, dtype=mu.dtype if mu.is_floating_point() else torch.float64)
    if mu.ndim == 0 or omega.ndim == 0 or mu.shape[-1] != omega.shape[-1]:
        raise ValueError(
            f"mu.shape={tuple(mu.shape)} is invalid: accepted (..., H) with the H of "
            f"omega.shape={tuple(omega.shape)}"
        )
    return torch.broadcast_tensors(mu, omega)


def kernel_matrix(omega: torch.Tensor, cfg: ApproxLossConfig) -> torch.Tensor:
    """``A(omega) = omega omega^T + c exp(d omega omega^T)`` of (4.1), shape ``(..., H, H)``.

    ``A`` is positive definite when the ``omega_h`` are pairwise distinct (the element-wise
    exponential is then a Gram matrix of the moment vectors ``(omega_h^k)_k``).  Chapters 3, 4.
    """
    cfg = _as_config(cfg)
    omega = torch.as_tensor(omega, dtype=torch.float64)
    outer = omega[..., :, None] * omega[..., None, :]  # (..., H, H)
    return outer + cfg.c * torch.exp(cfg.d * outer)


def approx_loss(mu, omega, cfg: ApproxLossConfig) -> torch.Tensor:
    """The approximate ICL loss (4.1) of paper 1, Proposition 4.1; shape ``(...)``.

    ``L~ = 1 + sigma2 - 2 mu^T omega + mu^T (omega omega^T + c exp(d omega omega^T)) mu`` with
    ``c = (1 + sigma2) / L``.  Differentiable by autograd.  Chapters 3, 4.
    """
    cfg = _as_config(cfg)
    mu, omega = _pair(mu, omega)  # (..., H)
    A = kernel_matrix(omega, cfg)  # (..., H, H)
    quad = (mu[..., :, None] * A * mu[..., None, :]).sum((-2, -1))  # (...)
    return 1.0 + cfg.sigma2 - 2.0 * (mu * omega).sum(-1) + quad


def approx_loss_grad(mu, omega, cfg: ApproxLossConfig):
    """Closed-form gradient of (4.1): ``(dL~/dmu, dL~/domega)``, each of shape ``(..., H)``.

    With ``E = exp(d omega omega^T)`` and ``s = mu^T omega``:

        dL~/dmu    = -2 omega + 2 (omega s + c E mu)
        dL~/domega = -2 mu    + 2 s mu + 2 c d mu * (E (mu * omega))          (* element-wise)

    Takes torch tensors (float64 result) or, when both ``mu`` and ``omega`` are numpy arrays,
    computes in numpy and returns numpy arrays (the ODE solver of chapter 4 calls it thousands of
    times on 4 numbers, where torch's per-operation overhead would dominate).  Drives the gradient
    flow of Appendix D (chapter 4) and gradient descent on (4.1) (chapter 3).
    """
    cfg = _as_config(cfg)
    if isinstance(mu, np.ndarray) and isinstance(omega, np.ndarray):
        if mu.ndim == 0 or omega.ndim == 0 or mu.shape[-1] != omega.shape[-1]:
            raise ValueError(
                f"mu.shape={mu.shape} is invalid: accepted (..., H) with the H of omega.shape={omega.shape}"
            )
        mu, omega = np.broadcast_arrays(mu.astype(np.float64), omega.astype(np.float64))
        xp = np
    else:
        mu, omega = _pair(mu, omega)  # (..., H)
        xp = torch
    E = xp.exp(cfg.d * omega[..., :, None] * omega[..., None, :])  # (..., H, H)
    s = (mu * omega).sum(-1)[..., None]  # (..., 1)
    E_mu = (E @ mu[..., None])[..., 0]  # (..., H)
    E_mu_omega = (E @ (mu * omega)[..., None])[..., 0]  # (..., H)
    g_mu = -2.0 * omega + 2.0 * (omega * s + cfg.c * E_mu)
    g_omega = -2.0 * mu + 2.0 * s * mu + 2.0 * cfg.c * cfg.d * mu * E_mu_omega
    return g_mu, g_omega


def mu_star(omega, cfg: ApproxLossConfig) -> torch.Tensor:
    """The optimal OV scales for fixed KQ scales (eq. D.17): ``mu*(omega) = A(omega)^{-1} omega``.

    (4.1) is a convex quadratic in ``mu`` with Hessian ``2 A(omega)``, so this is its unique
    minimiser when ``A`` is invertible, i.e. when the ``omega_h`` are pairwise distinct (a
    singular ``A`` raises ``torch.linalg.LinAlgError``).  Shape ``(..., H)``.  Chapters 3, 4.
    """
    cfg = _as_config(cfg)
    omega = torch.as_tensor(omega, dtype=torch.float64)
    return torch.linalg.solve(kernel_matrix(omega, cfg), omega[..., None])[..., 0]


def s_star(cfg: ApproxLossConfig) -> float:
    """``s* = 1 / (1 + (1 + sigma2) d / L)``, the limit of ``2 mu omega`` along the river valley.

    For symmetric two heads (4.1) reduces to ``1 + sigma2 - 2 s + s^2 (1 + c sinh(d w^2) / w^2)``
    with ``s = 2 m w``; since ``sinh(x)/x`` increases, its infimum is approached as ``w -> 0`` with
    ``s -> s*`` (Section 4.2, Appendix D).  It equals the optimal step of debiased GD
    (Theorem 4.2 (ii)).  Chapters 3, 4.
    """
    cfg = _as_config(cfg)
    return 1.0 / (1.0 + (1.0 + cfg.sigma2) * cfg.d / cfg.L)


def loss_star(cfg: ApproxLossConfig) -> float:
    """``1 + sigma2 - s*``: the infimum of (4.1) for symmetric two heads (Section 4.2).  Chapter 4."""
    cfg = _as_config(cfg)
    return 1.0 + cfg.sigma2 - s_star(cfg)


def two_head_loss(m, w, cfg: ApproxLossConfig) -> torch.Tensor:
    """(4.1) on the symmetric two-head set ``omega = (w, -w)``, ``mu = (m, -m)`` (Appendix D).

    ``L~ = 1 + sigma2 - 4 m w + 4 m^2 w^2 + 4 c m^2 sinh(d w^2)``, which with ``s = 2 m w`` is the
    spec's ``1 + sigma2 - 2 s + s^2 + c s^2 sinh(d w^2) / w^2`` (this form is also valid at
    ``w = 0``).  Broadcasts ``m`` against ``w``.  Chapter 4.
    """
    cfg = _as_config(cfg)
    m = torch.as_tensor(m, dtype=torch.float64)
    w = torch.as_tensor(w, dtype=torch.float64)
    return 1.0 + cfg.sigma2 - 4 * m * w + 4 * m**2 * w**2 + 4 * cfg.c * m**2 * torch.sinh(cfg.d * w**2)


def two_head_vector_field(m, w, cfg: ApproxLossConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """``(dm/dt, dw/dt)`` of the gradient flow on (4.1) restricted to the symmetric set (eq. D.4).

    Gradient flow on the four coordinates gives ``dmu_1/dt = -dL~/dmu_1``; on the symmetric set
    ``dL~/dmu_1 = (1/2) d(two_head_loss)/dm`` (and likewise for ``w``), hence

        dm/dt = 2 w - 4 m w^2 - 4 c m sinh(d w^2)
        dw/dt = 2 m - 4 m^2 w - 4 c d m^2 w cosh(d w^2).

    Chapter 4 (phase analysis, checks of the four-coordinate flow).
    """
    cfg = _as_config(cfg)
    m = torch.as_tensor(m, dtype=torch.float64)
    w = torch.as_tensor(w, dtype=torch.float64)
    x = cfg.d * w**2
    dm = 2 * w - 4 * m * w**2 - 4 * cfg.c * m * torch.sinh(x)
    dw = 2 * m - 4 * m**2 * w - 4 * cfg.c * cfg.d * m**2 * w * torch.cosh(x)
    return dm, dw


def valley_s(w, cfg: ApproxLossConfig) -> torch.Tensor:
    """``s(w) = 2 w m*(w) = w^2 / (w^2 + c sinh(d w^2))``: the product ``2 mu omega`` on the valley floor.

    For symmetric two heads ``m*(w) = w / (2 w^2 + 2 c sinh(d w^2))`` (eq. D.17 on the symmetric
    set), and the loss there is ``1 + sigma2 - s(w)``.  ``s(w)`` increases to ``s*`` as ``w -> 0``;
    for small ``w``, ``s* - s(w) = s*^2 c d^3 w^4 / 6 + O(w^8)``.  Chapter 4.
    """
    cfg = _as_config(cfg)
    w = torch.as_tensor(w, dtype=torch.float64)
    x = cfg.d * w**2
    # sinh(x)/w^2 = d sinh(x)/x, written to stay finite at w = 0
    ratio = torch.where(x > 0, torch.sinh(x) / torch.where(x > 0, x, torch.ones_like(x)), torch.ones_like(x))
    return 1.0 / (1.0 + cfg.c * cfg.d * ratio)


