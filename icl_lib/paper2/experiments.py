"""Chapter 8's experiments on paper 2, as functions: one driver per figure.

Goel, Soltanolkotabi, Bartlett (2026).  Each driver batches independent repetitions (problems,
seeds) along the leading dimension ``R`` and returns plain tensors for the chapter to plot and
check:

* :func:`loss_gap_vs_n`        -- population loss against Monte Carlo of ``E[L_hat]`` (Section 4);
* :func:`compare_methods`      -- Algorithm 1 and the baselines on one problem (Theorem 2);
* :func:`rate_vs_kappa`        -- fitted rates against the condition number of ``Sigma``;
* :func:`escape_vs_init_scale` -- plain GD from small random starts near the saddle ``theta = 0``;
* :func:`spectral_distance_vs_n` -- the spectral start's distance to the minima (Lemma 3);
* :func:`floor_vs_n`           -- the error floor of Algorithm 1 against ``n`` (Theorem 2);
* :func:`one_point_scan`       -- one-point strong convexity and smoothness near ``S`` (Theorem 1(iii));
* :func:`spectral_start_distances` -- many spectral starts' distances to ``S`` (Lemma 3);
* :func:`bias_vs_n`            -- the oracle's gradient bias against ``n`` (Theorem 3);
* :func:`finite_rate`          -- Algorithm 1 with both oracles from one far start (Theorem 2's ``mu^m``);
* :func:`comparison_table`     -- the finite-n floors of the methods, paired over problems.

Lemmas 1, 2 and 4, the regulariser from random starts and the rate against ``d`` have their own
modules (:mod:`~icl_lib.paper2.lemmas`, :mod:`~icl_lib.paper2.regulariser`, :mod:`~icl_lib.paper2.dimension`).

The matrices are tiny (``d, p`` of a few units) and batched, so one CPU thread is as fast as two and
does not suffer from a shared machine: the drivers run under :func:`single_thread` on the CPU.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass

import torch

from ..seeding import derive_seed, generator
from ..stats import ratio_ci
from ..validate import check_float, check_float_list, check_int, check_int_list
from .algorithms import METHODS, P2Run, RunConfig, run, spectral_init
from .data import P2Config, Problem, make_problem, sample
from .fits import geometric_rate
from .loss import excess_loss
from .manifold import balance, hessian_P, manifold_distance, manifold_point, one_point_ratios, p_norm
from .monte_carlo import gradient_bias, mc_loss

__all__ = [
    "single_thread",
    "loss_gap_vs_n",
    "compare_methods",
    "rate_vs_kappa",
    "escape_vs_init_scale",
    "escape_time",
    "spectral_distance_vs_n",
    "floor_vs_n",
    "one_point_scan",
    "spectral_start_distances",
    "bias_vs_n",
    "finite_rate",
    "comparison_table",
    "factor_balance",
    "MethodComparison",
    "method_comparison",
]


@contextlib.contextmanager
def single_thread(device: str | torch.device = "cpu"):
    """Run the enclosed block with one intra-op thread on the CPU (restored afterwards)."""
    if torch.device(device).type != "cpu":
        yield
        return
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def loss_gap_vs_n(problem: Problem, points: dict, ns, mc_tokens: int, seed: int = 0) -> dict:
    """Monte Carlo of ``E[L_hat(theta)]`` against ``n`` at fixed parameters (chapter 8, Figure 1).

    ``points`` maps a label to ``(A, B)`` (each ``(R, ., .)``).  For every ``n`` the Monte Carlo uses
    ``K = max(256, mc_tokens // n)`` sequences.  Returns ``{label: {"n", "L_hat", "se", "gap", "L"}}``
    with tensors of shape ``(len(ns), R)`` (``L``: ``(R,)``).
    """
    out = {}
    with single_thread(problem.M.device):
        for label, (A, B) in points.items():
            gen = generator(seed, f"mc-loss-{label}", device=problem.M.device)
            res = [mc_loss(problem, A, B, n, max(256, mc_tokens // n), gen) for n in ns]
            out[label] = {
                "n": torch.tensor(ns, dtype=torch.float64),
                "L_hat": torch.stack([r.L_hat for r in res]),
                "se": torch.stack([r.L_hat_se for r in res]),
                "gap": torch.stack([r.gap for r in res]),
                "L": res[0].L,
            }
    return out


def compare_methods(problem: Problem, methods, cfg: RunConfig, seed: int = 0) -> dict[str, P2Run]:
    """Run each method of ``methods`` (keys of :data:`METHODS`) with the same seed (Figure 2)."""
    with single_thread(problem.M.device):
        return {m: run(problem, m, cfg, seed) for m in methods}


def rate_vs_kappa(cfg: P2Config, kappas, methods, run_cfg: RunConfig, R: int, seed: int = 0) -> dict:
    """Fitted geometric rates against the condition number of ``Sigma`` (chapter 8, Figure 3).

    For each ``kappa`` the same ``R`` problems are drawn (same rotations and ``M Sigma^{1/2}``, see
    :func:`make_problem`), each method is run with ``run_cfg`` and the rate ``mu`` of its excess
    loss is fitted per problem.  Returns ``{method: {"mu": (len(kappas), R), "r2": (len(kappas), R)}}``
    and ``"kappa"``.
    """
    out = {m: {"mu": torch.empty(len(kappas), R, dtype=torch.float64),
               "r2": torch.empty(len(kappas), R, dtype=torch.float64)} for m in methods}
    with single_thread():
        for i, kappa in enumerate(kappas):
            problem = make_problem(cfg, R=R, seed=seed, kappa=kappa)
            for m in methods:
                h = run(problem, m, run_cfg, seed)
                for r in range(R):
                    fit = geometric_rate(h.excess[:, r])
                    out[m]["mu"][i, r], out[m]["r2"][i, r] = fit.mu, fit.r2
    out["kappa"] = torch.tensor(kappas, dtype=torch.float64)
    return out


def escape_time(excess: torch.Tensor, level: float) -> torch.Tensor:
    """First iteration at which ``excess (T+1, R)`` falls below ``level`` (``T+1`` if never): ``(R,)``."""
    below = excess < level
    t = torch.where(below.any(0), below.float().argmax(0), torch.full_like(below[0], excess.shape[0], dtype=torch.long))
    return t


def escape_vs_init_scale(problem: Problem, scales, run_cfg: RunConfig, method: str = "gd", seed: int = 0,
                         level: float = 0.9) -> dict:
    """Plain GD from small random starts of several norms (chapter 8, Figure 4).

    Returns ``{"scale": (S,), "excess": (S, T+1, R), "theta_norm": (S, T+1, R), "t_escape": (S, R),
    "eta": (R,), "L0": (R,), "start_norm": (R,)}``; the escape time is the first iteration with excess
    below ``level`` times ``L(0) - L*`` (leaving the plateau of the saddle ``theta = 0``), and
    ``start_norm`` the norm of the spectral start the scales refer to.
    """
    check_float("level", level, 0.0, 1.0, True, True)
    zeroA = torch.zeros_like(problem.M)
    zeroB = torch.zeros(problem.R, problem.d, problem.d, dtype=problem.M.dtype, device=problem.M.device)
    L0 = excess_loss(zeroA, zeroB, problem.M, problem.Sigma)
    curves, norms, t_esc = [], [], []
    with single_thread(problem.M.device):
        for s in scales:
            h = run(problem, method, dataclasses.replace(run_cfg, init_scale=s), seed)
            curves.append(h.excess)
            norms.append(h.theta_norm)
            t_esc.append(escape_time(h.excess, level * L0))
    return {"scale": torch.tensor(scales, dtype=torch.float64), "excess": torch.stack(curves),
            "theta_norm": torch.stack(norms), "t_escape": torch.stack(t_esc), "eta": h.eta, "L0": L0,
            "start_norm": (h.start.A0.pow(2).sum((1, 2)) + h.start.B0.pow(2).sum((1, 2))).sqrt()}


def spectral_distance_vs_n(problem: Problem, ns, seed: int = 0, geometry: str = "P") -> dict:
    """Distance of the spectral start to the manifold of minima against ``n`` (Figure 5; Lemma 3).

    For every ``n`` one fresh sample of ``n`` pairs per problem gives the spectral start, whose
    distance to ``S`` is measured in ``geometry`` (see :func:`manifold_distance`).  Returns
    ``{"n": (N,), "dist": (N, R)}``.
    """
    gen = generator(seed, "spectral-distance", device=problem.M.device)
    dist = []
    with single_thread(problem.M.device):
        for n in ns:
            X, Y = sample(problem, 1, n, gen)
            st = spectral_init(X[:, 0], Y[:, 0])
            dist.append(manifold_distance(problem, st.A0, st.B0, geometry, restarts=0, seed=seed))
    return {"n": torch.tensor(ns, dtype=torch.float64), "dist": torch.stack(dist)}


def floor_vs_n(problem: Problem, ns, run_cfg: RunConfig, method: str = "alg1", seed: int = 0) -> dict:
    """The error floor of Algorithm 1 against ``n`` (chapter 8, Figure 6; Theorem 2).

    For each ``n`` the method runs ``run_cfg.steps`` iterations with the oracle at length ``n``
    (spectral start from ``n`` samples); the floor is the excess population loss of the mean of
    the last ``run_cfg.tail`` iterates.  Returns ``{"n": (N,), "floor": (N, R), "start": (N, R)}``.
    """
    floors, starts = [], []
    with single_thread(problem.M.device):
        for n in ns:
            h = run(problem, method, dataclasses.replace(run_cfg, n=n, n_init=n), seed)
            floors.append(h.excess_bar)
            starts.append(h.excess[0])
    return {"n": torch.tensor(ns, dtype=torch.float64), "floor": torch.stack(floors), "start": torch.stack(starts)}


# ------------------------------------------------------------------------------ chapter 8's checks
def factor_balance(problem: Problem, runs: dict[str, P2Run], methods) -> dict[str, tuple[float, float, float]]:
    """``{method: (||A~^T A~ - B~^T B~||_F, ||A~||_F, ||B~||_F)}`` of each run's last iterate on the
    first problem (:func:`~icl_lib.paper2.manifold.balance`): does the method keep the factors
    balanced (paper 2, Section 4's regulariser)?  Chapter 8."""
    return {m: tuple(t[0].item() for t in balance(problem.member(0), runs[m].A[:1], runs[m].B[:1]))
            for m in methods}


@dataclass(frozen=True)
class MethodComparison:
    """What chapter 8 reads from its method comparison (Theorem 2): the fitted rates of the
    population-oracle runs (``mu_*``, ``r2_alg1``), Algorithm 1's finite-n floor, start and their
    ratio on the first problem, the floors of the runs without the regulariser and of Adam, the
    drift statistics (``z_*``) and the factor imbalance and ``||B~||`` (``imb_*``, ``B_*``:
    :func:`factor_balance`) of Algorithm 1 and of the run without the regulariser."""

    mu_alg1: float
    r2_alg1: float
    mu_left: float
    mu_noprec: float
    mu_gd: float
    mu_adam: float
    floor_fin: float
    start_fin: float
    start_ratio: float
    floor_noreg: float
    floor_adam: float
    z_alg1: float
    z_noreg: float
    imb_alg1: float
    imb_noreg: float
    B_alg1: float
    B_noreg: float


def method_comparison(rates: dict, runs_fin: dict[str, P2Run], z: dict[str, float], bal: dict) -> MethodComparison:
    """The :class:`MethodComparison` of the population-oracle rates ``rates`` (method -> RateFit),
    the finite-n runs ``runs_fin``, the drift statistics ``z`` and the balance ``bal``
    (:func:`factor_balance`)."""
    a1 = runs_fin["alg1"]
    floor = a1.excess_bar[0].item()
    vals = dict(mu_alg1=rates["alg1"].mu, r2_alg1=rates["alg1"].r2, mu_left=rates["alg1_left"].mu,
                mu_noprec=rates["no_precond"].mu, mu_gd=rates["gd"].mu, mu_adam=rates["adam"].mu,
                floor_fin=floor, start_fin=a1.excess[0, 0].item(), start_ratio=a1.excess[0, 0].item() / floor,
                floor_noreg=runs_fin["no_reg"].excess_bar[0].item(), floor_adam=runs_fin["adam"].excess_bar[0].item(),
                z_alg1=z["alg1"], z_noreg=z["no_reg"], imb_alg1=bal["alg1"][0], imb_noreg=bal["no_reg"][0],
                B_alg1=bal["alg1"][2], B_noreg=bal["no_reg"][2])
    return MethodComparison(**{k: float(v) for k, v in vals.items()})


def _repeat(problem: Problem, N: int) -> Problem:
    """The first problem ``N`` times (leading dimension ``N``)."""
    pr = problem.member(0)
    return Problem(*(t.expand(N, *t.shape[1:]).contiguous() for t in (pr.M, pr.Sigma, pr.Sigma_half, pr.M_tilde)),
                   pr.noise_std)


def one_point_scan(problem: Problem, distances, n_random: int, seed: int = 0, null_tol: float = 1e-8) -> dict:
    """One-point strong convexity and smoothness of ``Q`` near ``S`` in the P-geometry (paper 2,
    Theorem 1(iii)), along directions at several distances, on the first problem (chapter 8).

    The directions are ``n_random`` Gaussian ones and the eigen-directions of the P-geometry Hessian
    of ``Q`` at ``theta* = theta(I)`` across ``S`` (:func:`~icl_lib.paper2.manifold.hessian_P`), each of
    unit P-norm; the points are ``theta* + r ||theta*||_P u``.  At each point
    :func:`~icl_lib.paper2.manifold.one_point_ratios` projects onto ``S`` and measures ``a`` and ``b``.
    The local constants are ``alpha`` (smallest Hessian eigenvalue across ``S``) and ``beta``
    (largest, squared); ``null_Q``/``null_L`` count the Hessian eigenvalues below ``null_tol``
    times the largest with and without the regulariser (``dim S = d(d-1)/2``; ``L`` alone is flat
    along ``d^2`` directions).  Returns ``{"r": (S,), "dist": (S, U), "a": (S, U), "b": (S, U),
    "alpha", "beta", "null_Q", "null_L", "n_random", "scale", "points", "projections"}``, ``U`` the
    directions; ``points`` and ``projections`` are ``(A, B)`` of the ``S U`` points and of their
    P-projections onto ``S``, in the order of the flattened ``(S, U)`` (Lemmas 1 and 2 use them).
    """
    check_int("n_random", n_random, 0)
    pr = problem.member(0)
    A_s, B_s = manifold_point(pr)
    lam, dirs = hessian_P(pr, A_s, B_s, True)
    lam_L, _ = hessian_P(pr, A_s, B_s, False)
    m = pr.d * (pr.d - 1) // 2
    null_Q = int((lam.abs() < null_tol * lam.abs().max()).sum())
    null_L = int((lam_L.abs() < null_tol * lam_L.abs().max()).sum())
    gen = generator(seed, "one-point-directions")
    G = torch.randn(n_random, pr.p + pr.d, pr.d, generator=gen, dtype=pr.M.dtype)
    U = torch.cat([G, dirs[m:]])  # (U, p+d, d)
    nU = U.shape[0]
    Up = p_norm(_repeat(pr, nU), U[:, : pr.p], U[:, pr.p :])
    U = U / Up[:, None, None]
    scale = p_norm(pr, A_s, B_s).item()  # ||theta*||_P
    rs = torch.tensor(distances, dtype=pr.M.dtype)
    N = len(rs) * nU
    step = (rs[:, None, None, None] * scale * U[None]).reshape(N, pr.p + pr.d, pr.d)
    big = _repeat(pr, N)
    A_pts, B_pts = A_s[0] + step[:, : pr.p], B_s[0] + step[:, pr.p :]
    with single_thread(pr.M.device):
        res = one_point_ratios(big, A_pts, B_pts, True)
    shape = (len(rs), nU)
    return {"r": rs, "dist": res["dist"].reshape(shape) / scale, "a": res["a"].reshape(shape),
            "b": res["b"].reshape(shape), "alpha": lam[m].item(), "beta": lam[-1].item() ** 2, "null_Q": null_Q,
            "null_L": null_L, "n_random": n_random, "scale": scale, "points": (A_pts, B_pts),
            "projections": (res["A_p"], res["B_p"])}


def spectral_start_distances(problem: Problem, n: int, N: int, seed: int = 0) -> torch.Tensor:
    """P-distances to ``S``, relative to ``||theta*||_P``, of ``N`` spectral starts of the first
    problem, each from its own fresh sample of ``n`` pairs (paper 2, Lemma 3): ``(N,)``.  Chapter 8."""
    pr = _repeat(problem, check_int("N", N, 1))
    X, Y = sample(pr, 1, check_int("n", n, 2), generator(seed, "basin-samples", device=pr.M.device))
    st = spectral_init(X[:, 0], Y[:, 0])
    with single_thread(pr.M.device):
        dist = manifold_distance(pr, st.A0, st.B0, "P", restarts=0)
    A_s, B_s = manifold_point(problem.member(0))
    return dist / p_norm(problem.member(0), A_s, B_s)


def bias_vs_n(problem: Problem, points: dict, ns, tokens: int, seed: int = 0) -> dict:
    """Theorem 3's squared gradient bias ``||E[grad Q_hat] - grad Q||_F^2`` against ``n`` at fixed
    parameters (chapter 8): :func:`~icl_lib.paper2.monte_carlo.gradient_bias` with
    ``K = max(256, tokens // n)`` sequences per length.  ``points`` maps a label to ``(A, B)``.
    Returns ``{label: {"n", "b2", "se", "noise"}}``, tensors ``(len(ns), R)``."""
    out = {}
    with single_thread(problem.M.device):
        for label, (A, B) in points.items():
            gen = generator(seed, f"gradient-bias-{label}", device=problem.M.device)
            res = [gradient_bias(problem, A, B, n, max(256, tokens // n), gen) for n in ns]
            out[label] = {"n": torch.tensor(ns, dtype=torch.float64), "b2": torch.stack([r.b2 for r in res]),
                          "se": torch.stack([r.se for r in res]), "noise": torch.stack([r.noise for r in res])}
    return out


def finite_rate(problem: Problem, run_cfg: RunConfig, start_distance: float, seed: int = 0) -> dict:
    """Algorithm 1 with the finite-n oracle of ``run_cfg`` and with the population oracle from the
    same start, same step and preconditioner (paper 2, Theorem 2's ``mu^m`` term at finite ``n``;
    chapter 8).  The start is ``theta* + r ||theta*||_P u`` per problem, ``theta* = theta(I)``,
    ``r = start_distance`` and ``u`` a Gaussian direction of unit P-norm: far enough from ``S``
    that the excess starts far above the floor.  Step and preconditioner come from the spectral
    start of ``run_cfg.n_init`` samples.  Returns ``{"finite": excess (T+1, R), "population":
    excess (T+1, R), "floor": (R,), "start": (R,)}``; the floor is the finite run's tail-averaged
    excess, ``start`` the P-distance of the start from ``S`` relative to ``||theta*||_P``."""
    check_float("start_distance", start_distance, 0.0, 1.0, True)
    A_s, B_s = manifold_point(problem)
    p = problem.p
    gen = generator(seed, "finite-rate-start", device=problem.M.device)
    U = torch.randn(problem.R, p + problem.d, problem.d, generator=gen, dtype=A_s.dtype, device=A_s.device)
    scale = p_norm(problem, A_s, B_s)
    U = U * (start_distance * scale / p_norm(problem, U[:, :p], U[:, p:]))[:, None, None]
    theta0 = (A_s + U[:, :p], B_s + U[:, p:])
    with single_thread(problem.M.device):
        h = run(problem, "alg1", run_cfg, seed, theta0=theta0)
        hp = run(problem, "alg1", dataclasses.replace(run_cfg, n=None), seed, theta0=theta0)
        start = manifold_distance(problem, *theta0, "P", restarts=0) / scale
    return {"finite": h.excess, "population": hp.excess, "floor": h.excess_bar, "start": start}


def comparison_table(problem: Problem, runs: dict[str, P2Run], order, ref: str = "alg1", within: float = 1.5):
    """The finite-n comparison of the methods on the ``R`` problems of ``problem`` (chapter 8; paper 2, Theorem 2),
    one row per method: the floor (mean over problems, t interval), its ratio to ``ref``'s floor
    paired over problems (geometric mean, t interval), the median number of steps until the excess
    first comes within ``within`` times the method's own floor, and the median imbalance
    ``||A~^T A~ - B~^T B~||_F`` of the last iterates.  Returns a pandas DataFrame."""
    import pandas as pd

    from ..stats import mean_ci

    rows = []
    for m in order:
        h = runs[m]
        f = h.excess_bar
        fe = mean_ci(f.numpy())
        ra = ratio_ci(f, runs[ref].excess_bar)
        hit = (h.excess <= within * f).float()
        t_hit = torch.where(hit.any(0), hit.argmax(0), torch.full_like(f, h.excess.shape[0] - 1, dtype=torch.long))
        rows.append({"method": METHODS[m].label, "floor": fe.value, "floor lo": fe.lo, "floor hi": fe.hi,
                     f"floor / {ref}": ra.value, "ratio lo": ra.lo, "ratio hi": ra.hi,
                     f"steps to {within:g} x floor": float(t_hit.double().median()),
                     "imbalance": float(balance(problem, h.A, h.B)[0].median())})
    return pd.DataFrame(rows)
