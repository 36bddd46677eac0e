"""Algorithm 1's geometric rate against the dimension ``d`` (paper 2, Theorem 2; chapter 8).

Goel, Soltanolkotabi, Bartlett (2026), Theorem 2: the iterates converge at a geometric rate
``mu < 1`` whose constants come from Theorem 1's ``alpha, beta``, set by the spectrum of
``M Sigma^{1/2}`` and by ``Sigma``; the text gives ``mu`` no dependence on ``d`` of its own (its
polynomial dependence on ``p, d`` is that of the ``n^{-2} log^6 n`` term, Section 3.3), against
earlier rates "exponential in the embedding dimension" (Section 2).  :func:`rate_vs_d` runs
Algorithm 1 with the population oracle on problems of several ``d``, ``p / d`` fixed, with the
extremes of the spectrum of ``M Sigma^{1/2}`` (``m_op``, ``m_op / kappa_M``) and the condition
number of ``Sigma`` fixed, and fits its rate per problem.
"""

from __future__ import annotations

import dataclasses

import torch

from ..validate import check_int, check_int_list
from .algorithms import RunConfig, run
from .data import P2Config, make_problem
from .experiments import single_thread
from .fits import geometric_rate

__all__ = ["p_for", "rate_vs_d"]


def p_for(d_new: int, p: int, d: int) -> int:
    """The response dimension at ``d_new`` with ``p / d`` kept: ``max(d_new, round(d_new p / d))``
    (Assumption 2 needs ``p >= d``).  Chapter 8."""
    return max(d_new, round(d_new * p / d))


def rate_vs_d(cfg: P2Config, dims, run_cfg: RunConfig, R: int, n_per_d: int, seed: int = 0,
              method: str = "alg1") -> dict:
    """Fitted geometric rates of ``method`` against ``d`` (paper 2, Theorem 2; chapter 8).

    For each ``d`` of ``dims``: ``R`` problems of the family ``cfg`` with that ``d`` and
    ``p = p_for(d, cfg.p, cfg.d)`` (:func:`p_for`), the spectral start and ``P_hat`` from
    ``n_per_d * d`` samples (the relative error of ``Sigma_hat`` then does not grow with ``d``),
    ``run_cfg``'s oracle and steps; the rate ``mu`` of the excess loss is fitted per problem
    (:func:`~icl_lib.paper2.fits.geometric_rate`).  Returns ``{"d": (D,), "p": (D,), "mu": (D, R),
    "r2": (D, R)}``.
    """
    dims = check_int_list("dims", dims, 2, 64)
    R, n_per_d = check_int("R", R, 1), check_int("n_per_d", n_per_d, 2)
    mu = torch.empty(len(dims), R, dtype=torch.float64)
    r2 = torch.empty_like(mu)
    ps = [p_for(k, cfg.p, cfg.d) for k in dims]
    with single_thread():
        for i, (k, pk) in enumerate(zip(dims, ps)):
            problem = make_problem(dataclasses.replace(cfg, d=k, p=pk), R=R, seed=seed)
            h = run(problem, method, dataclasses.replace(run_cfg, n_init=n_per_d * k), seed)
            for r in range(R):
                fit = geometric_rate(h.excess[:, r])
                mu[i, r], r2[i, r] = fit.mu, fit.r2
    return {"d": torch.tensor(dims, dtype=torch.float64), "p": torch.tensor(ps), "mu": mu, "r2": r2}
