"""Does the regulariser help gradient descent from small random starts?  (paper 2, Section 1.1; chapter 8)

Goel, Soltanolkotabi, Bartlett (2026), Section 1.1: "our algorithm incorporates the regularizer
obtained in Section 4 which helps it avoid spurious stationary points".  :func:`random_start_runs`
runs gradient descent without a preconditioner on the regularised loss ``Q = L + R``
(:data:`~icl_lib.paper2.algorithms.METHODS` ``"gd_reg_random"``) and on ``L`` alone (``"gd"``) from
the same small random starts, with one step for both, on several problems and starts, with the
population oracle; :func:`basin_time_ratio` compares, start by start, the iterations each needs to
pass every stationary point of ``L`` above the global minimum.

``theta = 0`` is stationary for both losses and ``R`` is quartic (its gradient cubic), so near it
the two descents agree to first order.
"""

from __future__ import annotations

import torch

from ..seeding import generator
from ..stats import Estimate, censored_median_ci
from ..validate import check_float, check_int
from .algorithms import METHODS, RunConfig, run, spectral_init, step_size
from .data import Problem, sample
from .experiments import escape_time, single_thread
from .loss import excess_loss

__all__ = ["PAIR", "random_start_runs", "basin_time_ratio"]

PAIR = ("gd_reg_random", "gd")  # GD on Q and on L, both from small random starts, no preconditioner


def _each_start(problems: Problem, starts: int) -> Problem:
    """Every problem ``starts`` times in a row (leading dimension ``R * starts``)."""
    return Problem(*(t.repeat_interleave(starts, 0) for t in (problems.M, problems.Sigma, problems.Sigma_half,
                                                               problems.M_tilde)), problems.noise_std)


def random_start_runs(problems: Problem, starts: int, run_cfg: RunConfig, seed: int = 0,
                      basin: float = 0.1, escape: float = 0.9) -> dict:
    """GD on ``Q`` and on ``L`` from the same small random starts (paper 2, Section 1.1; chapter 8).

    Each of the ``R`` problems gets ``starts`` random starts of norm ``run_cfg.init_scale`` times
    its spectral start's (:func:`~icl_lib.paper2.algorithms.run`; both methods draw the same ones).
    Both run ``run_cfg.steps`` iterations with one step per start: the smaller of the two steps of
    the chapter's rule (``eta_scale / lambda_max`` of each loss's Hessian at the spectral start), so
    that they differ only in their gradient.  Returns, per method of :data:`PAIR`, the excess
    ``(T+1, N)``, ``N = R starts``, the escape time from ``theta = 0`` (excess below ``escape``
    times ``L(0) - L*``) and the basin time: the first iteration with excess below ``basin`` times
    ``sigma_d(M Sigma^{1/2})^2 / 2``, the excess of the last stationary point above the minimum
    (every mode fitted but the smallest); ``steps + 1`` if never.  Also ``"eta"`` (the common step),
    ``"eta_rule"`` (each method's own), ``"level"`` and ``"steps"``.
    """
    starts = check_int("starts", starts, 1)
    check_float("basin", basin, 0.0, 1.0, True, True)
    check_float("escape", escape, 0.0, 1.0, True, True)
    big = _each_start(problems, starts)
    X0, Y0 = sample(big, 1, run_cfg.n_init, generator(seed, "init-sample", device=big.M.device))
    start = spectral_init(X0[:, 0], Y0[:, 0])  # the start run() builds from the same stream
    eta_rule = {m: step_size(start, METHODS[m], run_cfg.eta_scale) for m in PAIR}
    eta = torch.minimum(*eta_rule.values())
    zeroB = big.M.new_zeros(big.R, big.d, big.d)
    L0 = excess_loss(torch.zeros_like(big.M), zeroB, big.M, big.Sigma)
    level = basin * torch.linalg.svdvals(big.M_tilde)[:, -1].pow(2) / 2
    out = {"eta": eta, "eta_rule": eta_rule, "level": level, "L0": L0, "steps": run_cfg.steps}
    with single_thread(big.M.device):
        for m in PAIR:
            h = run(big, m, run_cfg, seed, eta=eta)
            out[m] = {"excess": h.excess, "t_escape": escape_time(h.excess, escape * L0),
                      "t_basin": escape_time(h.excess, level), "A0": h.A0, "B0": h.B0}
    return out


def basin_time_ratio(res: dict) -> tuple[Estimate, dict]:
    """The paired ratio ``t_Q / t_L`` of :func:`random_start_runs`' basin times, start by start: its
    median over the starts with the order-statistic interval (chapter 8).  A start where ``Q``'s run
    never reaches the basin counts as a ratio above every other (censored); one where only ``L``'s
    never does counts at its bound ``t_Q / (steps + 1)``; where neither does, as censored.  Returns
    the estimate and ``{"ratio": the ratios (None: censored), "escape_ratio": the same for the
    escape from theta = 0 (median), "reached": fraction in the basin at the end, per method}``."""
    T = res["steps"] + 1
    tq, tl = (res[m]["t_basin"].tolist() for m in PAIR)
    ratios = [None if q >= T else q / T if l >= T else q / l for q, l in zip(tq, tl)]
    eq, el = (res[m]["t_escape"].double() for m in PAIR)
    reached = {m: float((res[m]["t_basin"] < T).double().mean()) for m in PAIR}
    esc = (eq / el.clamp_min(1)).median().item()
    return censored_median_ci(ratios), {"ratio": ratios, "escape_ratio": esc, "reached": reached}

