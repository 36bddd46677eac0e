"""Chapter 8's experiments on paper 2, as functions: settings per profile and one driver per figure.

Goel, Soltanolkotabi, Bartlett (2026).  Each driver batches independent repetitions (problems,
seeds) along the leading dimension ``R`` and returns plain tensors for the chapter to plot and
check:

* :func:`loss_gap_vs_n`        -- population loss against Monte Carlo of ``E[L_hat]`` (Section 4);
* :func:`compare_methods`      -- Algorithm 1 and the baselines on one problem (Theorem 2);
* :func:`rate_vs_kappa`        -- fitted rates against the condition number of ``Sigma``;
* :func:`escape_vs_init_scale` -- plain GD from small random starts near the saddle ``theta = 0``;
* :func:`spectral_distance_vs_n` -- the spectral start's distance to the minima (Lemma 3);
* :func:`floor_vs_n`           -- the error floor of Algorithm 1 against ``n`` (Theorem 2).

The matrices are tiny (``d, p`` of a few units) and batched, so one CPU thread is as fast as two and
does not suffer from a shared machine: the drivers run under :func:`single_thread` on the CPU.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass

import torch

from ..engine.profiles import profile_settings
from ..seeding import derive_seed, generator
from ..validate import check_float, check_float_list, check_int, check_int_list
from .algorithms import P2Run, RunConfig, run, spectral_init
from .analysis import balance, geometric_rate, manifold_distance, mc_loss
from .data import P2Config, Problem, make_problem, sample
from .loss import Q_P_geometry, excess_loss, population_Q

__all__ = [
    "Ch8Settings",
    "ch8_settings",
    "single_thread",
    "loss_gap_vs_n",
    "compare_methods",
    "rate_vs_kappa",
    "escape_vs_init_scale",
    "escape_time",
    "spectral_distance_vs_n",
    "floor_vs_n",
    "q_identity_error",
    "spectral_identity_error",
    "factor_balance",
    "convergence_values",
]


@dataclass(frozen=True)
class Ch8Settings:
    """Sizes of chapter 8's experiments; :func:`ch8_settings` gives the profile's values."""

    n: int  # sequence length of the oracle in the method comparison (Figures 2, 4)
    K: int  # fresh sequences per oracle call
    steps: int  # iterations with the finite-n oracle
    steps_pop: int  # iterations with the population oracle
    kappas: tuple  # condition numbers of Sigma for the rate sweep
    R_kappa: int  # problems per condition number
    steps_kappa: int  # population-oracle iterations per rate fit
    init_scales: tuple  # small random starts (relative to the spectral start's norm)
    n_gap: tuple  # sequence lengths for the Monte Carlo of E[L_hat]
    mc_tokens: int  # K * n per sequence length in that Monte Carlo
    n_dist: tuple  # sample sizes for the spectral start's distance
    R_dist: int  # problems per sample size
    floor_multiples: tuple  # sequence lengths for the error floor, in units of d (see n_floor)
    R_floor: int  # problems per sequence length
    steps_floor: int  # iterations per floor run (the last half is averaged)

    def __post_init__(self):
        for name in ("n", "K", "steps", "steps_pop", "R_kappa", "steps_kappa", "mc_tokens", "R_dist", "R_floor",
                     "steps_floor"):
            object.__setattr__(self, name, check_int(name, getattr(self, name), 1))
        object.__setattr__(self, "n", check_int("n", self.n, 2))
        object.__setattr__(self, "kappas", check_float_list("kappas", self.kappas, 1.0))
        object.__setattr__(self, "init_scales", check_float_list("init_scales", self.init_scales, 0.0, 1.0, True))
        object.__setattr__(self, "n_gap", check_int_list("n_gap", self.n_gap, 1))
        object.__setattr__(self, "n_dist", check_int_list("n_dist", self.n_dist, 2))
        object.__setattr__(self, "floor_multiples", check_int_list("floor_multiples", self.floor_multiples, 2))
        for name in ("n_gap", "n_dist", "floor_multiples"):
            if len(getattr(self, name)) < 3:
                values = list(getattr(self, name))
                raise ValueError(f"{name}={values!r} is invalid: accepted at least 3 values (a slope is fitted)")
        if len(self.kappas) < 3:
            raise ValueError(f"kappas={list(self.kappas)!r} is invalid: accepted at least 3 values (a slope is fitted)")
        if len(self.init_scales) < 3:
            raise ValueError(f"init_scales={list(self.init_scales)!r} is invalid: accepted at least 3 values")

    def n_floor(self, d: int) -> tuple:
        """Sequence lengths of the error-floor experiment: ``floor_multiples`` times ``d``.

        The smallest is 16 d: with fewer samples the empirical preconditioner ``P_hat`` is too far
        from ``P`` (paper 2, Lemma 4 needs it close) and Algorithm 1 can diverge.
        """
        return tuple(m * d for m in self.floor_multiples)


def ch8_settings(profile: str, **overrides) -> Ch8Settings:
    """The profile's :class:`Ch8Settings` (from the registry :data:`icl_lib.engine.profiles.SETTINGS`);
    ``overrides`` whose value is ``None`` are ignored."""
    base = Ch8Settings(**profile_settings("paper2.ch8", profile))
    return dataclasses.replace(base, **{k: v for k, v in overrides.items() if v is not None})


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
def q_identity_error(cfg: P2Config, seed: int = 0, R: int = 16) -> float:
    """Largest relative difference between ``Q = L + R`` (:func:`population_Q`) and the paper's
    P-geometry expression (:func:`Q_P_geometry`) over ``R`` random points ``A (p, d)``,
    ``B (d, d)`` with i.i.d. ``N(0, 1)`` entries, each on its own problem of the family ``cfg``
    (paper 2, Section 4; chapter 8)."""
    gen = generator(seed, "identity-check")
    A = torch.randn(R, cfg.p, cfg.d, generator=gen, dtype=torch.float64)
    B = torch.randn(R, cfg.d, cfg.d, generator=gen, dtype=torch.float64)
    pr = make_problem(cfg, R=R, seed=derive_seed(seed, "problems-many"))
    q_sum = population_Q(A, B, pr.M, pr.Sigma, pr.noise_var)
    q_geo = Q_P_geometry(A, B, pr.M, pr.Sigma, pr.noise_var)
    return ((q_sum - q_geo).abs() / q_sum.abs()).max().item()


def spectral_identity_error(problem: Problem, n: int, seed: int = 0) -> tuple[float, float]:
    """``max |A_0 Sigma_hat B_0^T - M_hat|`` for the spectral start from one fresh sample of ``n``
    pairs (zero up to round-off: paper 2, Section 5 and Appendix B.3), and the mean ``|M_hat|``
    entry it compares with.  Chapter 8."""
    X, Y = sample(problem, 1, n, generator(seed, "identity-sample"))
    st = spectral_init(X[:, 0], Y[:, 0])
    err = (st.A0 @ st.Sigma_hat @ st.B0.transpose(-1, -2) - st.M_hat).abs().max().item()
    return err, st.M_hat.abs().mean().item()


def factor_balance(problem: Problem, runs: dict[str, P2Run], methods) -> dict[str, tuple[float, float, float]]:
    """``{method: (||A~^T A~ - B~^T B~||_F, ||A~||_F, ||B~||_F)}`` of each run's last iterate on the
    first problem (:func:`~icl_lib.paper2.analysis.balance`): does the method keep the factors
    balanced (paper 2, Section 4's regulariser)?  Chapter 8."""
    return {m: tuple(t.item() for t in balance(problem, runs[m].A, runs[m].B)) for m in methods}


def convergence_values(rates: dict, runs_fin: dict[str, P2Run], z: dict[str, float], bal: dict) -> dict[str, float]:
    """The numbers chapter 8 quotes about the method comparison (Theorem 2), as a dict to glue:
    the fitted rates ``mu_*`` of the population-oracle runs (``rates``: method -> RateFit), the
    finite-n floors and starts (``runs_fin``), the drift statistics ``z`` and the balance ``bal``
    (:func:`factor_balance`) of Algorithm 1 and of the run without the regulariser."""
    a1 = runs_fin["alg1"]
    floor = a1.excess_bar.item()
    vals = {"mu_alg1": rates["alg1"].mu, "r2_alg1": rates["alg1"].r2, "mu_left": rates["alg1_left"].mu,
            "mu_noprec": rates["no_precond"].mu, "mu_gd": rates["gd"].mu, "mu_adam": rates["adam"].mu,
            "floor_fin": floor, "start_fin": a1.excess[0, 0].item(),
            "floor_noreg": runs_fin["no_reg"].excess_bar.item(), "z_alg1": z["alg1"], "z_noreg": z["no_reg"],
            "imb_alg1": bal["alg1"][0], "imb_noreg": bal["no_reg"][0], "B_alg1": bal["alg1"][2],
            "B_noreg": bal["no_reg"][2], "floor_adam": runs_fin["adam"].excess_bar.item(),
            "start_ratio": a1.excess[0, 0].item() / floor}
    return {k: float(v) for k, v in vals.items()}
