"""Monte Carlo of the empirical loss and of the oracle's gradient bias (paper 2, Section 4, Theorem 3).

Goel, Soltanolkotabi, Bartlett (2026):

* :class:`LossMC`, :func:`mc_loss` -- Monte Carlo of ``E[L_hat(theta)]`` for sequences of length
  ``n``, and of its gap to the population loss ``L(theta)`` (Section 4);
* :class:`BiasMC`, :func:`gradient_bias` -- Monte Carlo of ``||E[grad Q_hat(theta)] - grad
  Q(theta)||_F^2`` (Theorem 3), from :func:`sequence_gradients`, each fresh sequence's own
  gradient of ``Q_hat`` (also Lemma 4's Monte Carlo, :mod:`icl_lib.paper2.lemmas`).

Used by chapter 8's experiments (:mod:`icl_lib.paper2.experiments`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from ..validate import check_int
from .data import Problem, sample
from .loss import empirical_loss_grad, population_grad, population_loss, predict, regulariser_grad, transpose

__all__ = [
    "LossMC",
    "BiasMC",
    "gradient_bias",
    "mc_loss",
    "sequence_gradients",
]


class LossMC(NamedTuple):
    """Monte Carlo of ``E[L_hat]`` at one sequence length (per repetition, ``(R,)`` each)."""

    n: int
    L_hat: torch.Tensor  # mean of L_hat over the K sequences
    L_hat_se: torch.Tensor  # its standard error
    L: torch.Tensor  # population loss (closed form)

    @property
    def gap(self) -> torch.Tensor:
        """``E[L_hat] - L`` estimated (standard error ``L_hat_se``)."""
        return self.L_hat - self.L


def mc_loss(problem: Problem, A, B, n: int, K: int, gen: torch.Generator) -> LossMC:
    """Monte Carlo of ``E[L_hat(theta)]`` over ``K`` fresh sequences of length ``n`` (paper 2, Section 4).

    Returns the mean and standard error per repetition next to the closed-form population loss
    ``L(theta)``, which is the ``n -> infinity`` limit.  Sequences are drawn in chunks to bound
    memory.  Used by chapter 8.
    """
    n = check_int("n", n, 1)
    K = check_int("K", K, 2)
    chunk = max(1, 2**22 // (problem.R * n * n))
    vals = []
    left = K
    while left > 0:
        k = min(chunk, left)
        X, Y = sample(problem, k, n, gen)  # (R, k, n, d), (R, k, n, p)
        vals.append(0.5 * (predict(X, A, B) - Y).pow(2).sum(-1).mean(-1))  # (R, k) L_hat per sequence
        left -= k
    v = torch.cat(vals, 1)  # (R, K)
    L = population_loss(A, B, problem.M, problem.Sigma, problem.noise_var)
    return LossMC(n, v.mean(1), v.std(1) / math.sqrt(K), L)


class BiasMC(NamedTuple):
    """Monte Carlo of the oracle's bias ``||E[grad Q_hat(theta)] - grad Q(theta)||_F^2`` at one
    sequence length (paper 2, Theorem 3), per repetition ``(R,)``."""

    n: int
    b2: torch.Tensor  # unbiased estimate of the squared bias
    se: torch.Tensor  # its standard error (delta method)
    noise: torch.Tensor  # tr Cov / K, the part of ||mean gradient - grad Q||^2 due to sampling


def gradient_bias(problem: Problem, A, B, n: int, K: int, gen: torch.Generator, regularised: bool = True) -> BiasMC:
    """Monte Carlo of Theorem 3's ``||E[grad Q_hat(theta)] - grad Q(theta)||_F^2`` over ``K`` fresh
    sequences of length ``n`` (paper 2, Section 5 and Appendix C).

    With ``v_k = grad Q_hat_k(theta) - grad Q(theta)`` per sequence (``Q_hat = L_hat + R_hat``, the
    sequence's ``Sigma_hat`` in ``R_hat``; closed-form ``grad Q``), ``||mean v||^2 - tr Cov(v) / K``
    is unbiased for the squared bias; its standard error is ``2 sqrt(mean^T Cov mean / K)``.
    Sequences are drawn in chunks to bound memory.  Chapter 8.
    """
    n, K = check_int("n", n, 2), check_int("K", K, 2)
    gA0, gB0 = population_grad(A, B, problem.M, problem.Sigma, regularised)
    gA, gB = sequence_gradients(problem, A, B, n, K, gen, regularised)  # (R, K, p, d), (R, K, d, d)
    v = torch.cat([(gA - gA0[:, None]).flatten(2), (gB - gB0[:, None]).flatten(2)], -1)  # (R, K, D)
    m = v.mean(1)
    c = v - m[:, None]
    cov = transpose(c) @ c / (K - 1)  # (R, D, D)
    noise = torch.diagonal(cov, dim1=-2, dim2=-1).sum(-1) / K
    se = 2 * ((m[:, None] @ cov @ m[..., None]).reshape(-1).clamp_min(0) / K).sqrt()
    return BiasMC(n, m.pow(2).sum(-1) - noise, se, noise)


def sequence_gradients(problem: Problem, A, B, n: int, K: int, gen: torch.Generator,
                       regularised: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """The gradients of ``Q_hat = L_hat + R_hat`` (or of ``L_hat``) at ``theta = (A, B)`` on each of
    ``K`` fresh sequences of length ``n``, the sequence's own ``Sigma_hat`` in ``R_hat``:
    ``(R, K, p, d)`` and ``(R, K, d, d)``; their mean estimates the oracle's ``E[grad Q_hat]``
    (paper 2, Section 3.1).  Sequences are drawn in chunks to bound memory.  Chapter 8 (Theorem 3,
    Lemma 4)."""
    n, K = check_int("n", n, 2), check_int("K", K, 1)
    chunk = max(1, 2**22 // (problem.R * n * n))
    outA, outB, left = [], [], K
    while left > 0:
        k = min(chunk, left)
        X, Y = sample(problem, k, n, gen)  # (R, k, n, d), (R, k, n, p)
        gA, gB = empirical_loss_grad(A, B, X, Y, per_sequence=True)  # (R, k, p, d), (R, k, d, d)
        if regularised:
            rA, rB = regulariser_grad(A, B, transpose(X) @ X / n, per_sequence=True)
            gA, gB = gA + rA, gB + rB
        outA.append(gA)
        outB.append(gB)
        left -= k
    return torch.cat(outA, 1), torch.cat(outB, 1)
