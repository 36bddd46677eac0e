"""Paper 2's Algorithm 1 (spectral start, regulariser, preconditioner) and the baselines.

Goel, Soltanolkotabi, Bartlett (2026), Section 5.  Algorithm 1:

1. **spectral initialisation** from one sequence of ``n_init`` samples: ``M_hat`` by least
   squares, ``Sigma_hat = X^T X / n``, thin SVD ``M_hat Sigma_hat^{1/2} = U G V^T``,
   ``A_0 = U G^{1/2} Sigma_hat^{-1/2}``, ``B_0 = Sigma_hat^{-1/2} V G^{1/2} Sigma_hat^{-1/2}``, so that
   ``A_0 Sigma_hat B_0^T = M_hat`` (:func:`spectral_init`);
2. **gradient oracle** (Section 3.1): ``E[grad Q_hat(theta)]`` over fresh sequences of length ``n``,
   approximated by the mean over ``K`` fresh sequences per step (:class:`GradientOracle`);
3. **preconditioned step** ``theta <- theta - eta Precond(g)`` with ``P_hat = diag(I_p, Sigma_hat)``
   from the initialisation sample (:func:`precondition`):

   * ``"left"``:     ``P_hat^{-1} g``, the paper's form (``A``-block unchanged, ``B <- Sigma_hat^{-1} g_B``),
   * ``"whitened"``: ``P_hat^{-1} g Sigma_hat^{-1}``, gradient descent in the whitened coordinates
     ``A~ = A Sigma^{1/2}``, ``B~ = Sigma^{1/2} B Sigma^{1/2}`` (with ``Sigma_hat`` for ``Sigma``),
   * ``"none"``:     ``g``.

The baselines of chapter 8 are the same loop with parts removed (:data:`METHODS`).  The step size is
``eta = eta_scale / lambda_max``, ``lambda_max`` the top eigenvalue of the preconditioned Hessian of
the plug-in loss (``Q`` or ``L`` with ``Sigma_hat, M_hat``) at the spectral start: every
gradient method gets the step its own curvature allows.  Used by chapter 8.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..seeding import generator
from ..validate import check_choice, check_float, check_int
from .data import Problem, sample
from .loss import (
    transpose,
    empirical_loss_grad,
    excess_loss,
    population_grad,
    population_Q,
    regulariser_grad,
)

__all__ = [
    "Method",
    "METHODS",
    "RunConfig",
    "P2Run",
    "SpectralStart",
    "GradientOracle",
    "spectral_init",
    "precondition",
    "step_size",
    "run",
]

PRECONDITIONERS = ("whitened", "left", "none")
INITS = ("spectral", "random")
OPTIMISERS = ("gd", "adam")


@dataclass(frozen=True)
class Method:
    """One optimiser of chapter 8: which parts of Algorithm 1 it keeps."""

    label: str  # name in figures
    init: str = "spectral"  # spectral | random (small random start)
    regularised: bool = True  # descend Q_hat = L_hat + R_hat (True) or L_hat (False)
    precond: str = "whitened"  # whitened | left | none
    optimiser: str = "gd"  # gd | adam

    def __post_init__(self):
        check_choice("init", self.init, INITS)
        check_choice("precond", self.precond, PRECONDITIONERS)
        check_choice("optimiser", self.optimiser, OPTIMISERS)


METHODS = {
    "alg1": Method("Algorithm 1 (whitened)", "spectral", True, "whitened"),
    "alg1_left": Method("Algorithm 1, left P^-1 only", "spectral", True, "left"),
    "no_reg": Method("no regulariser", "spectral", False, "whitened"),
    "no_precond": Method("no preconditioner", "spectral", True, "none"),
    "gd_spectral": Method("plain GD, spectral start", "spectral", False, "none"),
    "gd": Method("plain GD, small random start", "random", False, "none"),
    "gd_reg_random": Method("GD on Q, small random start", "random", True, "none"),
    "adam": Method("Adam, small random start", "random", False, "none", "adam"),
}


@dataclass(frozen=True)
class RunConfig:
    """How a method is run: oracle, length, step size, starts (chapter 8)."""

    n: int | None = 128  # sequence length of the oracle's samples; None: exact population gradient
    n_init: int | None = None  # samples for the spectral start and P_hat (None: n)
    K: int = 16  # fresh sequences averaged per oracle call
    steps: int = 200  # iterations
    eta_scale: float = 0.5  # eta = eta_scale / lambda_max (margin: lambda_max is a plug-in estimate)
    init_scale: float = 1e-3  # random start: norm relative to the spectral start's
    adam_lr: float = 3e-3  # Adam's learning rate
    tail: float = 0.5  # fraction of the last iterates averaged into theta_bar

    def __post_init__(self):
        if self.n is not None:
            object.__setattr__(self, "n", check_int("n", self.n, 2, 10_000_000))
        n_init = self.n if self.n_init is None else self.n_init
        if n_init is None:
            raise ValueError("n_init=None is invalid: accepted an integer >= 2 when n is None (population oracle)")
        object.__setattr__(self, "n_init", check_int("n_init", n_init, 2, 100_000_000))
        object.__setattr__(self, "K", check_int("K", self.K, 1, 10_000_000))
        object.__setattr__(self, "steps", check_int("steps", self.steps, 1, 10_000_000))
        object.__setattr__(self, "eta_scale", check_float("eta_scale", self.eta_scale, 0.0, 2.0, True, True))
        object.__setattr__(self, "init_scale", check_float("init_scale", self.init_scale, 0.0, 10.0, True))
        object.__setattr__(self, "adam_lr", check_float("adam_lr", self.adam_lr, 0.0, 1.0, True))
        object.__setattr__(self, "tail", check_float("tail", self.tail, 0.0, 1.0, True))


class SpectralStart:
    """The spectral initialisation of Algorithm 1 and the estimates it is built from (Section 5)."""

    def __init__(self, A0, B0, Sigma_hat, M_hat):
        self.A0 = A0  # (R, p, d)
        self.B0 = B0  # (R, d, d)
        self.Sigma_hat = Sigma_hat  # (R, d, d) empirical covariance X^T X / n
        self.M_hat = M_hat  # (R, p, d) least-squares estimate of M
        self.Sigma_hat_inv = torch.linalg.inv(Sigma_hat)


def _sym_pow(S: torch.Tensor, power: float) -> torch.Tensor:
    w, V = torch.linalg.eigh(S)
    return V @ torch.diag_embed(w**power) @ transpose(V)


def spectral_init(X: torch.Tensor, Y: torch.Tensor) -> SpectralStart:
    """Spectral initialisation of Algorithm 1 (paper 2, Section 5 and Appendix B.3).

    ``X (R, n, d)``, ``Y (R, n, p)`` -> ``M_hat = Y^T X (X^T X)^{-1}``, ``Sigma_hat = X^T X / n``,
    ``U G V^T = svd(M_hat Sigma_hat^{1/2})`` (thin), ``A_0 = U G^{1/2} Sigma_hat^{-1/2}``,
    ``B_0 = Sigma_hat^{-1/2} V G^{1/2} Sigma_hat^{-1/2}``; then ``A_0 Sigma_hat B_0^T = M_hat``.
    """
    R, n, d = X.shape
    p = Y.shape[-1]
    if n < d:
        raise ValueError(f"n={n} is invalid: accepted n >= d={d} samples for the least-squares estimate M_hat")
    if p < d:
        raise ValueError(f"p={p} is invalid: accepted p >= d={d} (paper 2, Assumption 2)")
    XtX = transpose(X) @ X  # (R, d, d)
    M_hat = transpose(torch.linalg.solve(XtX, transpose(X) @ Y))  # (R, p, d)
    Sigma_hat = XtX / n
    S_half, S_mhalf = _sym_pow(Sigma_hat, 0.5), _sym_pow(Sigma_hat, -0.5)
    U, G, Vh = torch.linalg.svd(M_hat @ S_half, full_matrices=False)  # (R,p,d), (R,d), (R,d,d)
    g = torch.diag_embed(G.sqrt())
    A0 = U @ g @ S_mhalf
    B0 = S_mhalf @ transpose(Vh) @ g @ S_mhalf
    return SpectralStart(A0, B0, Sigma_hat, M_hat)


def precondition(gA, gB, kind: str, Sigma_hat_inv) -> tuple[torch.Tensor, torch.Tensor]:
    """Apply the preconditioner ``kind`` (see the module docstring) to the gradient ``(gA, gB)``.

    ``"left"``: ``P_hat^{-1} g`` (paper 2, Algorithm 1); ``"whitened"``: ``P_hat^{-1} g Sigma_hat^{-1}``;
    ``"none"``: ``g``.  ``P_hat = diag(I_p, Sigma_hat)``.
    """
    check_choice("precond", kind, PRECONDITIONERS)
    if kind == "none":
        return gA, gB
    if kind == "left":
        return gA, Sigma_hat_inv @ gB
    return gA @ Sigma_hat_inv, Sigma_hat_inv @ gB @ Sigma_hat_inv


def _precond_matrix(kind: str, Si: torch.Tensor, p: int) -> torch.Tensor:
    """The preconditioner as a matrix on ``vec(theta) = [vec_row(A); vec_row(B)]``."""
    Si = Si.contiguous()
    d = Si.shape[-1]
    kw = dict(dtype=Si.dtype, device=Si.device)
    I_p, I_d = torch.eye(p, **kw), torch.eye(d, **kw)
    if kind == "none":
        blocks = (torch.eye(p * d, **kw), torch.eye(d * d, **kw))
    elif kind == "left":
        blocks = (torch.eye(p * d, **kw), torch.kron(Si, I_d))
    else:
        blocks = (torch.kron(I_p, Si), torch.kron(Si, Si))
    return torch.block_diag(*blocks)


def step_size(start: SpectralStart, method: Method, eta_scale: float) -> torch.Tensor:
    """``eta = eta_scale / lambda_max`` per repetition, ``(R,)`` (chapter 8's step-size rule).

    ``lambda_max`` is the largest eigenvalue of ``C H``, ``H`` the Hessian of the plug-in loss
    (``Q`` if the method is regularised, else ``L``, with ``Sigma_hat, M_hat``) at the spectral
    start and ``C`` the method's preconditioner.
    """
    R, p, d = start.A0.shape
    out = torch.empty(R, dtype=start.A0.dtype, device=start.A0.device)
    for r in range(R):
        S, M = start.Sigma_hat[r : r + 1], start.M_hat[r : r + 1]

        def f(v):
            A, B = v[: p * d].reshape(1, p, d), v[p * d :].reshape(1, d, d)
            return population_Q(A, B, M, S, 0.0, method.regularised).sum()

        v0 = torch.cat([start.A0[r].reshape(-1), start.B0[r].reshape(-1)])
        H = torch.autograd.functional.hessian(f, v0)
        C = _precond_matrix(method.precond, start.Sigma_hat_inv[r], p)
        out[r] = torch.linalg.eigvals(C @ H).real.max()
    return eta_scale / out


class GradientOracle:
    """The gradient oracle of paper 2, Section 3.1: ``E[grad Q_hat(theta)]`` (or ``E[grad L_hat]``).

    ``n=None`` returns the exact population gradient ``grad Q`` (the ``n -> infinity`` limit).
    Otherwise each call draws ``K`` fresh sequences of ``n`` samples per repetition and returns the
    mean of their gradients, an unbiased estimate of the oracle's expectation.  Used by chapter 8.
    """

    def __init__(self, problem: Problem, n: int | None, K: int, regularised: bool, gen: torch.Generator):
        self.problem, self.n, self.K = problem, n, K
        self.regularised, self.gen = regularised, gen

    def __call__(self, A, B) -> tuple[torch.Tensor, torch.Tensor]:
        pr = self.problem
        if self.n is None:
            return population_grad(A, B, pr.M, pr.Sigma, self.regularised)
        X, Y = sample(pr, self.K, self.n, self.gen)  # (R, K, n, d), (R, K, n, p)
        gA, gB = empirical_loss_grad(A, B, X, Y)
        if self.regularised:
            Sh = transpose(X) @ X / self.n  # (R, K, d, d) per-sequence Sigma_hat
            rA, rB = regulariser_grad(A, B, Sh)
            gA, gB = gA + rA, gB + rB
        return gA, gB


@dataclass
class P2Run:
    """History of one method on ``R`` problems (chapter 8)."""

    method: Method
    eta: torch.Tensor  # (R,) step size (Adam: its learning rate)
    excess: torch.Tensor  # (T+1, R) L(theta_t) - L*, population, exact
    theta_norm: torch.Tensor  # (T+1, R) ||theta_t||_F
    A: torch.Tensor  # (R, p, d) last iterate
    B: torch.Tensor  # (R, d, d)
    A_bar: torch.Tensor  # (R, p, d) mean of the last `tail` fraction of iterates
    B_bar: torch.Tensor  # (R, d, d)
    A0: torch.Tensor  # (R, p, d) start
    B0: torch.Tensor  # (R, d, d)
    start: SpectralStart = field(repr=False)
    excess_bar: torch.Tensor | None = None  # (R,) excess population loss of (A_bar, B_bar)
    A_hist: torch.Tensor | None = None  # (T+1, R, p, d) every iterate (``run(..., keep=True)``)
    B_hist: torch.Tensor | None = None  # (T+1, R, d, d)


def run(problem: Problem, method: Method | str, cfg: RunConfig, seed: int = 0, keep: bool = False,
        theta0: tuple[torch.Tensor, torch.Tensor] | None = None, eta: torch.Tensor | None = None) -> P2Run:
    """Run ``method`` on the ``R`` problems with the oracle and schedule of ``cfg`` (chapter 8).

    The initialisation sample, the random start and the oracle's batches come from independent
    streams derived from ``seed``; two methods run with the same seed share the spectral start.
    ``keep=True`` also keeps every iterate (``A_hist``, ``B_hist``).  ``theta0 = (A0, B0)`` starts
    the iteration there instead; the step size and the preconditioner still come from the spectral
    start of the initialisation sample, so two runs with the same seed and different ``theta0`` see
    the same oracle batches, step and preconditioner (chapter 8 couples them so).  ``eta (R,)``
    replaces the rule's step of a gradient method (two losses then run with one step).
    """
    if isinstance(method, str):
        method = METHODS[check_choice("method", method, tuple(METHODS))]
    seed = check_int("seed", seed, 0, 2**63 - 1)
    R, p, d = problem.R, problem.p, problem.d
    dev = problem.M.device
    g_init = generator(seed, "init-sample", device=dev)
    X0, Y0 = sample(problem, 1, cfg.n_init, g_init)
    start = spectral_init(X0[:, 0], Y0[:, 0])
    if theta0 is not None:
        A, B = theta0[0].clone(), theta0[1].clone()
    elif method.init == "spectral":
        A, B = start.A0.clone(), start.B0.clone()
    else:
        g_rand = generator(seed, "random-start", device=dev)
        GA = torch.randn(R, p, d, generator=g_rand, dtype=problem.M.dtype, device=dev)
        GB = torch.randn(R, d, d, generator=g_rand, dtype=problem.M.dtype, device=dev)
        scale = cfg.init_scale * (start.A0.pow(2).sum((1, 2)) + start.B0.pow(2).sum((1, 2))).sqrt()
        norm = (GA.pow(2).sum((1, 2)) + GB.pow(2).sum((1, 2))).sqrt()
        A, B = GA * (scale / norm)[:, None, None], GB * (scale / norm)[:, None, None]
    A0, B0 = A.clone(), B.clone()
    oracle = GradientOracle(problem, cfg.n, cfg.K, method.regularised, generator(seed, "oracle", device=dev))
    if method.optimiser == "adam":
        eta = torch.full((R,), cfg.adam_lr, dtype=A.dtype, device=dev)
        A.requires_grad_(True)
        B.requires_grad_(True)
        opt = torch.optim.Adam([A, B], lr=cfg.adam_lr)
    elif eta is None:
        eta = step_size(start, method, cfg.eta_scale)
    elif eta.shape != (R,) or not bool((eta > 0).all()):
        raise ValueError(f"eta={eta.tolist()} is invalid: accepted {R} positive steps, one per repetition")
    T = cfg.steps
    t_tail = T - max(1, int(round(cfg.tail * T)))
    excess = torch.empty(T + 1, R, dtype=A.dtype, device=dev)
    norms = torch.empty(T + 1, R, dtype=A.dtype, device=dev)
    A_sum, B_sum, n_sum = torch.zeros_like(A0), torch.zeros_like(B0), 0
    A_hist = torch.empty((T + 1,) + A.shape, dtype=A.dtype, device=dev) if keep else None
    B_hist = torch.empty((T + 1,) + B.shape, dtype=B.dtype, device=dev) if keep else None

    def record(t, A, B):
        excess[t] = excess_loss(A, B, problem.M, problem.Sigma)
        norms[t] = (A.pow(2).sum((1, 2)) + B.pow(2).sum((1, 2))).sqrt()
        if keep:
            A_hist[t], B_hist[t] = A, B

    with torch.no_grad():
        record(0, A, B)
        for t in range(1, T + 1):
            gA, gB = oracle(A.detach(), B.detach())
            if method.optimiser == "adam":
                A.grad, B.grad = gA, gB
                opt.step()
            else:
                pA, pB = precondition(gA, gB, method.precond, start.Sigma_hat_inv)
                A = A - eta[:, None, None] * pA
                B = B - eta[:, None, None] * pB
            record(t, A, B)
            if t > t_tail:
                A_sum += A
                B_sum += B
                n_sum += 1
    A, B = A.detach(), B.detach()
    A_bar, B_bar = A_sum / n_sum, B_sum / n_sum
    return P2Run(method, eta, excess, norms, A, B, A_bar, B_bar, A0, B0, start,
                 excess_loss(A_bar, B_bar, problem.M, problem.Sigma), A_hist, B_hist)
