"""Paper 2's regression problem: the target map ``M``, the covariance ``Sigma`` and the sampler.

Goel, Soltanolkotabi, Bartlett (2026), Section 3: covariates ``x ~ N(0, Sigma)`` in ``R^d``,
responses ``y = M x + z`` in ``R^p``, ``z ~ N(0, noise_std^2 I_p)``; a training sequence is ``n``
i.i.d. pairs ``(x_i, y_i)``.  Assumptions of Section 3.2: ``Sigma`` full rank; ``p >= d`` and
``M Sigma^{1/2}`` of full column rank; ``||M Sigma^{1/2}||_op < 1/16``.

:func:`make_problem` draws ``R`` independent problems with a prescribed condition number of
``Sigma`` and prescribed singular values of the *whitened* target ``M~ = M Sigma^{1/2}``, so the
assumption holds by construction and the condition number can be varied with ``M~`` fixed
(chapter 8, the rate-versus-condition-number experiment).  :func:`sample` draws ``(R, K, n, .)``
batches of sequences.  Used by chapter 8.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

from ..seeding import generator
from ..validate import check_float, check_int

__all__ = ["P2Config", "Problem", "make_problem", "sample", "haar_orthogonal", "NORM_BOUND"]

NORM_BOUND = 1.0 / 16.0  # Assumption 3 of paper 2: ||M Sigma^{1/2}||_op < 1/16


@dataclass(frozen=True)
class P2Config:
    """One family of paper-2 regression problems (Section 3).

    ``Sigma = O diag(s) O^T`` with ``s`` geometric from ``kappa^{1/2}`` down to ``kappa^{-1/2}``
    (condition number ``kappa``, determinant 1) and ``O`` Haar; ``M~ = M Sigma^{1/2} = U diag(g) V^T``
    with ``g`` geometric from ``m_op`` down to ``m_op / kappa_M`` and ``U, V`` Haar.
    """

    d: int = 4  # covariate dimension d
    p: int = 6  # response dimension p (Assumption 2: p >= d)
    kappa: float = 4.0  # condition number of Sigma
    m_op: float = 0.05  # ||M Sigma^{1/2}||_op (Assumption 3: < 1/16)
    kappa_M: float = 2.0  # condition number of M Sigma^{1/2}
    noise_std: float = 0.02  # standard deviation of each coordinate of the noise z

    def __post_init__(self):
        object.__setattr__(self, "d", check_int("d", self.d, 1, 512))
        object.__setattr__(self, "p", check_int("p", self.p, self.d, 4096))
        object.__setattr__(self, "kappa", check_float("kappa", self.kappa, 1.0, 1e8))
        object.__setattr__(self, "m_op", check_float("m_op", self.m_op, 0.0, NORM_BOUND, True, True))
        object.__setattr__(self, "kappa_M", check_float("kappa_M", self.kappa_M, 1.0, 1e8))
        object.__setattr__(self, "noise_std", check_float("noise_std", self.noise_std, 0.0, 10.0))

    @property
    def noise_var(self) -> float:
        """``E||z||^2 = p noise_std^2``; the population loss at a global minimum is half of it."""
        return self.p * self.noise_std**2


class Problem(NamedTuple):
    """``R`` problems side by side (leading dimension ``R``), double precision."""

    M: torch.Tensor  # (R, p, d) target map
    Sigma: torch.Tensor  # (R, d, d) covariance of x
    Sigma_half: torch.Tensor  # (R, d, d) symmetric square root Sigma^{1/2}
    M_tilde: torch.Tensor  # (R, p, d) whitened target M Sigma^{1/2}
    noise_std: float  # std of each noise coordinate

    @property
    def R(self) -> int:
        return self.M.shape[0]

    @property
    def p(self) -> int:
        return self.M.shape[1]

    @property
    def d(self) -> int:
        return self.M.shape[2]

    @property
    def noise_var(self) -> float:
        """``E||z||^2``."""
        return self.p * self.noise_std**2

    def member(self, r: int) -> "Problem":
        """Problem ``r`` alone (leading dimension 1)."""
        s = slice(r, r + 1)
        return Problem(self.M[s], self.Sigma[s], self.Sigma_half[s], self.M_tilde[s], self.noise_std)


def haar_orthogonal(R: int, k: int, m: int, gen: torch.Generator, dtype=torch.float64) -> torch.Tensor:
    """``(R, k, m)`` matrices with orthonormal columns, Haar-distributed (QR with sign fix), ``k >= m``."""
    G = torch.randn(R, k, m, generator=gen, dtype=dtype)
    Q, Rr = torch.linalg.qr(G)
    return Q * torch.sign(torch.diagonal(Rr, dim1=-2, dim2=-1))[:, None, :]


def _geometric(top: float, cond: float, k: int, dtype) -> torch.Tensor:
    if k == 1:
        return torch.tensor([top], dtype=dtype)
    return top * cond ** (-torch.arange(k, dtype=dtype) / (k - 1))


def make_problem(cfg: P2Config, R: int = 1, seed: int = 0, kappa: float | None = None, device="cpu") -> Problem:
    """Draw ``R`` problems of the family ``cfg`` (paper 2, Section 3; chapter 8).

    ``kappa`` overrides ``cfg.kappa``.  The random rotations depend on ``seed`` only, not on
    ``kappa``, so problems drawn with the same seed and different ``kappa`` share ``M~`` and the
    eigenvectors of ``Sigma`` (the condition-number sweep of chapter 8 uses this).
    """
    R = check_int("R", R, 1, 100_000)
    kappa = cfg.kappa if kappa is None else check_float("kappa", kappa, 1.0, 1e8)
    gen = generator(check_int("seed", seed, 0, 2**63 - 1), "problem")
    dt = torch.float64
    d, p = cfg.d, cfg.p
    O = haar_orthogonal(R, d, d, gen)  # (R, d, d) eigenvectors of Sigma
    U = haar_orthogonal(R, p, d, gen)  # (R, p, d) left singular vectors of M~
    V = haar_orthogonal(R, d, d, gen)  # (R, d, d) right singular vectors of M~
    s = _geometric(kappa**0.5, kappa, d, dt)  # (d,) eigenvalues of Sigma, prod = 1
    g = _geometric(cfg.m_op, cfg.kappa_M, d, dt)  # (d,) singular values of M~
    Sigma = O @ torch.diag_embed(s.expand(R, d)) @ O.transpose(-1, -2)
    Sigma_half = O @ torch.diag_embed(s.sqrt().expand(R, d)) @ O.transpose(-1, -2)
    Sigma_mhalf = O @ torch.diag_embed(s.rsqrt().expand(R, d)) @ O.transpose(-1, -2)
    M_tilde = U @ torch.diag_embed(g.expand(R, d)) @ V.transpose(-1, -2)  # (R, p, d)
    M = M_tilde @ Sigma_mhalf
    Sigma = 0.5 * (Sigma + Sigma.transpose(-1, -2))
    return Problem(*(t.to(device) for t in (M, Sigma, Sigma_half, M_tilde)), cfg.noise_std)


def sample(problem: Problem, K: int, n: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``K`` fresh sequences of ``n`` pairs for each of the ``R`` problems (paper 2, Section 3).

    Returns ``X (R, K, n, d)`` with rows ``x_i ~ N(0, Sigma)`` and ``Y (R, K, n, p)`` with rows
    ``y_i = M x_i + z_i``.  Used by chapter 8.
    """
    K = check_int("K", K, 1, 100_000_000)
    n = check_int("n", n, 1, 100_000_000)
    R, p, d = problem.R, problem.p, problem.d
    dt = problem.M.dtype
    dev = problem.M.device
    X = torch.randn(R, K, n, d, generator=gen, dtype=dt, device=dev) @ problem.Sigma_half[:, None]  # (R, K, n, d)
    Y = X @ problem.M.transpose(-1, -2)[:, None]  # (R, K, n, p)
    if problem.noise_std > 0:
        Y = Y + problem.noise_std * torch.randn(R, K, n, p, generator=gen, dtype=dt, device=dev)
    return X, Y
