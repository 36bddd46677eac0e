"""Gradient flow on the approximate loss (4.1) for two heads, and its three phases (paper 1, App. D).

The flow ``d theta / dt = -grad L~(theta)`` on ``theta = (mu_1, mu_2, omega_1, omega_2)`` is
integrated with :func:`scipy.integrate.solve_ivp` (an implicit, stiff-capable method, ``Radau`` by
default, with ``rtol = 1e-10``, ``atol = 1e-12``) from the symmetric small initialisation of
Definition D.1, ``mu_1 = -mu_2 = omega_1 = -omega_2 = eps``.  The gradient is the library's closed
form :func:`icl_lib.paper1.approx_loss.approx_loss_grad` (checked against autograd in the tests).

Phase boundaries are found by rule, as events of the integrator (so they are located to
integration accuracy, not read off a grid):

* end of Phase I, ``t_I``: the first time the growth rate of ``log omega_1``,
  ``(d omega_1/dt) / omega_1``, falls below ``phase1_fraction`` times its value at ``t = 0``;
* end of Phase II, ``t_II``: the peak of ``omega_1``, the first time ``d omega_1/dt`` changes sign
  from ``+`` to ``-``.  Every sign change of ``d omega_1/dt`` is recorded, so the number of peaks
  can be checked.

Phase III is ``t > t_II``.  The tables of chapter 4 (:func:`limits_table`, :func:`phase_table`,
:func:`residual_table`, :func:`timing_table`) are built here from solved flows and their
:func:`phase_summary`.  Used by chapter 4.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from scipy.integrate import solve_ivp

from ..stats import Estimate
from ..validate import check_choice, check_float, check_int, fail
from .approx_loss import ApproxLossConfig, approx_loss, approx_loss_grad, mu_star, s_star

__all__ = ["FlowConfig", "FlowResult", "initial_theta", "flow_rhs", "gradient_flow", "growth_rate_fit",
           "valley_omega", "valley_residuals", "phase_summary", "SOLVERS", "predicted_s_gap",
           "predicted_t_phase1", "flow_estimate", "SOLVER_SPREAD",
           "limits_table", "phase_table", "residual_table", "timing_table"]

SOLVERS = ("Radau", "BDF", "LSODA")  # stiff-capable methods of solve_ivp
SOLVER_SPREAD = 1e-6  # relative half-width given to a quantity of a flow solved at rtol 1e-10


@dataclass(frozen=True)
class FlowConfig:
    """The two-head gradient flow of paper 1, Appendix D: setting, initial scale, horizon, solver.

    Paper settings: ``L = 40``, ``sigma2 = 0.1``, ``d = 5`` (Figure 21) or ``d = 10`` (Figure 22).
    Used by chapter 4.
    """

    loss: ApproxLossConfig = field(default_factory=ApproxLossConfig)  # d, L, sigma2 of (4.1)
    eps: float = 1e-3  # initial scale of Definition D.1: mu_1 = -mu_2 = omega_1 = -omega_2 = eps
    t_max: float = 1e4  # integration horizon (the slow valley phase needs a long one)
    method: str = "Radau"  # a stiff-capable solve_ivp method: Radau | BDF | LSODA
    rtol: float = 1e-10  # solver relative tolerance
    atol: float = 1e-12  # solver absolute tolerance
    phase1_fraction: float = 0.9  # Phase I ends when d log(omega)/dt < phase1_fraction * initial rate

    def __post_init__(self):
        if not isinstance(self.loss, ApproxLossConfig):
            fail("loss", self.loss, "an ApproxLossConfig")
        object.__setattr__(self, "eps", check_float("eps", self.eps, 0.0, 0.1, lo_open=True))
        object.__setattr__(self, "t_max", check_float("t_max", self.t_max, 0.0, 1e9, lo_open=True))
        check_choice("method", self.method, SOLVERS)
        object.__setattr__(self, "rtol", check_float("rtol", self.rtol, 1e-14, 1e-3))
        object.__setattr__(self, "atol", check_float("atol", self.atol, 1e-16, 1e-3))
        object.__setattr__(
            self, "phase1_fraction", check_float("phase1_fraction", self.phase1_fraction, 0.0, 1.0, True, True)
        )


def initial_theta(eps: float, heads: int = 2) -> np.ndarray:
    """Definition D.1: ``theta_0 = (mu_1, mu_2, omega_1, omega_2) = (eps, -eps, eps, -eps)``.

    Returned as a float64 array of length 4 (``heads`` must be 2).  Chapter 4.
    """
    check_int("heads", heads, 2, 2)
    eps = check_float("eps", eps, 0.0, lo_open=True)
    return np.array([eps, -eps, eps, -eps], dtype=np.float64)


def flow_rhs(theta: np.ndarray, cfg: ApproxLossConfig) -> np.ndarray:
    """``-grad L~(theta)`` for ``theta = (mu_1..mu_H, omega_1..omega_H)`` of shape ``(2H,)`` or ``(2H, T)``.

    The gradient is :func:`icl_lib.paper1.approx_loss.approx_loss_grad` (eq. 4.1), evaluated in numpy.
    Chapter 4.
    """
    th = np.asarray(theta, dtype=np.float64).T  # (2H,) or (T, 2H)
    H = th.shape[-1] // 2
    g_mu, g_omega = approx_loss_grad(th[..., :H], th[..., H:], cfg)  # (..., H)
    return -np.concatenate([g_mu, g_omega], -1).T


@dataclass
class FlowResult:
    """A solved gradient flow and its phases (chapter 4).

    ``t (T,)`` and ``theta (T, 4)`` are the integrator's own steps (where its error is controlled);
    :meth:`sample` evaluates the dense output anywhere.  ``t_phase1`` and ``t_peak`` are the phase
    boundaries (``nan`` if the rule never fired), ``t_dw_zero`` all sign changes of
    ``d omega_1/dt`` with their direction (``-1``: a peak, ``+1``: a trough).
    """

    config: FlowConfig
    t: np.ndarray  # (T,) solver steps
    theta: np.ndarray  # (T, 4) = (mu_1, mu_2, omega_1, omega_2) at the steps
    rate0: float  # initial growth rate of log omega_1
    t_phase1: float  # end of Phase I
    t_peak: float  # end of Phase II: peak of omega_1
    omega_peak: float  # omega_1 at the peak
    t_dw_zero: np.ndarray  # (K,) times where d omega_1/dt changes sign
    dw_zero_dir: np.ndarray  # (K,) -1 (peak, + to -) or +1 (trough, - to +)
    nfev: int  # right-hand-side evaluations
    njev: int  # Jacobian evaluations
    seconds: float  # wall time of the integration
    message: str
    _dense: object = None

    # -- coordinates -----------------------------------------------------------------------
    @property
    def mu(self) -> np.ndarray:
        return self.theta[:, :2]  # (T, 2)

    @property
    def omega(self) -> np.ndarray:
        return self.theta[:, 2:]  # (T, 2)

    def sample(self, t) -> np.ndarray:
        """``theta`` at arbitrary times from the solver's dense output, shape ``(len(t), 4)``."""
        t = np.atleast_1d(np.asarray(t, dtype=np.float64))
        return self._dense(t).T

    # -- derived quantities, on the steps or on given theta (T, 4) ---------------------------
    def loss(self, theta: np.ndarray | None = None) -> np.ndarray:
        """(4.1) along the trajectory, ``(T,)``."""
        th = self.theta if theta is None else theta
        return approx_loss(torch.from_numpy(th[:, :2]), torch.from_numpy(th[:, 2:]), self.config.loss).numpy()

    def velocity(self, theta: np.ndarray | None = None) -> np.ndarray:
        """``d theta / dt = -grad L~`` along the trajectory, ``(T, 4)``."""
        th = self.theta if theta is None else theta
        return flow_rhs(th.T, self.config.loss).T

    def mu_star(self, theta: np.ndarray | None = None) -> np.ndarray:
        """``mu*(omega)`` of eq. D.17 along the trajectory, ``(T, 2)``."""
        th = self.theta if theta is None else theta
        return mu_star(torch.from_numpy(th[:, 2:]), self.config.loss).numpy()

    def product(self, theta: np.ndarray | None = None) -> np.ndarray:
        """``2 mu_1 omega_1`` (``= mu^T omega`` on the symmetric set), ``(T,)``."""
        th = self.theta if theta is None else theta
        return 2.0 * th[:, 0] * th[:, 2]

    @property
    def s_star(self) -> float:
        return s_star(self.config.loss)

    def phases(self) -> dict[str, tuple[float, float]]:
        """``{"I": (0, t_I), "II": (t_I, t_II), "III": (t_II, t_max)}``."""
        return {"I": (0.0, self.t_phase1), "II": (self.t_phase1, self.t_peak), "III": (self.t_peak, self.config.t_max)}


def gradient_flow(cfg: FlowConfig) -> FlowResult:
    """Integrate the two-head gradient flow on (4.1) from Definition D.1 and find its phases.

    Solver: ``solve_ivp(method=cfg.method, rtol=cfg.rtol, atol=cfg.atol, dense_output=True)`` on
    ``[0, cfg.t_max]``; the Jacobian is left to the solver's finite differences (4 coordinates).
    Phase rules (events of the solver, see the module docstring): ``t_I`` is the first time
    ``(d omega_1/dt) / omega_1 < cfg.phase1_fraction * rate0`` with ``rate0`` its value at ``t = 0``
    (``t_I = 0`` if that already holds at ``t = 0``); ``t_II`` is the first sign change of
    ``d omega_1/dt`` from ``+`` to ``-``.  Paper 1, Appendix D (Figures 21, 22); chapter 4.
    """
    if not isinstance(cfg, FlowConfig):
        fail("cfg", cfg, "a FlowConfig")
    lcfg = cfg.loss
    y0 = initial_theta(cfg.eps)
    v0 = flow_rhs(y0, lcfg)
    rate0 = float(v0[2] / y0[2])

    def rhs(t, y):
        return flow_rhs(y, lcfg)

    def ev_phase1(t, y):  # growth rate of log omega_1 crosses phase1_fraction * rate0 downwards
        return flow_rhs(y, lcfg)[2] / y[2] - cfg.phase1_fraction * rate0

    ev_phase1.direction = -1

    def ev_peak(t, y):  # d omega_1/dt crosses 0 from + to -: a peak of omega_1
        return flow_rhs(y, lcfg)[2]

    def ev_trough(t, y):  # d omega_1/dt crosses 0 from - to +: a trough of omega_1
        return flow_rhs(y, lcfg)[2]

    ev_peak.direction, ev_trough.direction = -1, 1

    start = time.perf_counter()
    sol = solve_ivp(rhs, (0.0, cfg.t_max), y0, method=cfg.method, rtol=cfg.rtol, atol=cfg.atol,
                    dense_output=True, events=[ev_phase1, ev_peak, ev_trough])
    seconds = time.perf_counter() - start
    if sol.status != 0:
        raise RuntimeError(f"solve_ivp failed: {sol.message}")

    t_phase1 = 0.0 if ev_phase1(0.0, y0) < 0 else (float(sol.t_events[0][0]) if len(sol.t_events[0]) else np.nan)
    peaks, troughs = np.asarray(sol.t_events[1], dtype=np.float64), np.asarray(sol.t_events[2], dtype=np.float64)
    t_dw = np.concatenate([peaks, troughs])
    order = np.argsort(t_dw)
    t_dw, dirs = t_dw[order], np.concatenate([-np.ones(len(peaks), int), np.ones(len(troughs), int)])[order]
    t_peak = float(peaks[0]) if len(peaks) else np.nan
    omega_peak = float(sol.sol(t_peak)[2]) if len(peaks) else np.nan
    return FlowResult(cfg, sol.t, sol.y.T.copy(), rate0, t_phase1, t_peak, omega_peak, t_dw, dirs,
                      int(sol.nfev), int(sol.njev), seconds, sol.message, sol.sol)


def growth_rate_fit(t: np.ndarray, x: np.ndarray) -> tuple[float, float]:
    """Least-squares slope of ``log |x|`` against ``t`` and the fit's ``R^2``.

    Measures the exponential growth rate of Phase I (paper 1, Appendix D).  Chapter 4.
    """
    t = np.asarray(t, dtype=np.float64)
    y = np.log(np.abs(np.asarray(x, dtype=np.float64)))
    A = np.stack([t, np.ones_like(t)], 1)
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    resid = y - A @ coef
    r2 = 1.0 - (resid @ resid) / max(((y - y.mean()) ** 2).sum(), 1e-300)
    return float(coef[0]), float(r2)


def valley_omega(t, cfg: ApproxLossConfig):
    """Late-time law of Phase III: ``omega(t) ~ (8 c d^3 t)^(-1/6)``, ``c = (1 + sigma2) / L``.

    Derived here (a two-timescale reading of Appendix D, Phase III): on the valley floor
    ``m = m*(w)`` the loss is ``1 + sigma2 - s(w)`` with ``s* - s(w) ~ s*^2 c d^3 w^4 / 6``; the
    floor is the curve ``(m*(w), w)`` with ``|dm*/dw| ~ s* / (2 w^2)``, and gradient flow along it
    (with ``dm/dt = -(1/2) d/dm`` of the two-head loss) gives ``dw/dt ~ -(4/3) c d^3 w^7``.
    Chapter 4.
    """
    t = np.asarray(t, dtype=np.float64)
    return (8.0 * cfg.c * cfg.d**3 * t) ** (-1.0 / 6.0)


def valley_residuals(w, cfg: ApproxLossConfig) -> dict[str, np.ndarray]:
    """Leading-order residuals of Phase III at KQ scale ``w`` (small), from the derivation above.

    * ``"mu_lag"``: ``(mu - mu*(omega)) / mu*(omega) ~ -s* c d^3 w^4 / 3`` -- the flow trails the
      valley floor by the ``m``-velocity ``(2/3) s* c d^3 w^5`` over the transverse curvature
      ``4 w^2 (1 + c d)``;
    * ``"s_gap"``: ``s* - 2 mu omega ~ s*^2 c d^3 w^4 / 2`` (``/6`` from the floor, ``/3`` from the lag);
    * ``"loss_gap"``: ``L~ - (1 + sigma2 - s*) ~ s*^2 c d^3 w^4 / 6`` (the lag enters at order ``w^8``).

    With :func:`valley_omega` all three decay like ``t^(-2/3)``.  Chapter 4.
    """
    w4 = np.asarray(w, dtype=np.float64) ** 4
    k = cfg.c * cfg.d**3
    ss = s_star(cfg)
    return {"mu_lag": -ss * k * w4 / 3.0, "s_gap": ss**2 * k * w4 / 2.0, "loss_gap": ss**2 * k * w4 / 6.0}


def phase_summary(res: FlowResult, n_grid: int = 400) -> dict[str, float]:
    """The measurements chapter 4 checks, for one solved flow (paper 1, Appendix D).

    Keys (``s = 2 mu_1 omega_1``, "steps" are the solver's own steps, ``t_I``/``t_II`` the phase
    boundaries of :func:`gradient_flow`):

    * ``asymmetry``: ``max_t max(|mu_1 + mu_2| / max|mu_1|, |omega_1 + omega_2| / max|omega_1|)``;
    * ``rate_mu``, ``rate_omega``, ``r2_mu``, ``r2_omega``: least-squares growth rates of
      ``log mu_1``, ``log omega_1`` on ``n_grid`` points of ``[0, t_I]`` and the fits' ``R^2``;
    * ``ratio_dev_phase1``: ``max |mu_1/omega_1 - 1|`` on that grid; ``ratio_at_peak``: ``mu_1/omega_1`` at ``t_II``;
    * ``n_peaks``, ``n_troughs``: sign changes of ``d omega_1/dt`` (``+ -> -``, ``- -> +``) on ``[0, t_max]``;
    * ``omega_falls_after_peak``, ``mu_rises_after_peak``, ``mu_rises_always``: 1.0 if
      ``d omega_1/dt < 0`` (``d mu_1/dt > 0``) at every step after ``t_II`` (at every step ``t > 0``);
    * ``loss_0``, ``loss_I``, ``loss_II``, ``loss_end``: (4.1) at ``0``, ``t_I``, ``t_II``, ``t_max``;
    * ``s_end``, ``s_gap_rel = (s* - s) / s*``, ``loss_gap_rel = (loss - loss*) / loss*``,
      ``mu_lag = (mu_1 - mu*_1) / mu*_1``, all at ``t_max``; ``omega_end``;
    * ``s_gap_rel_II``, ``loss_gap_rel_II``, ``mu_lag_II``: the same three at ``t_II``, the rivals
      of the limits (a flow that stopped where Phase III begins);
    * ``gap_slope``: slope of ``log(s* - s)`` against ``log t`` over the steps in ``[t_max/10, t_max]``;
    * ``pred_s_gap_rel``, ``pred_loss_gap_rel``, ``pred_mu_lag``: :func:`valley_residuals` at the
      measured ``omega(t_max)``, on the same scales.

    Chapter 4.
    """
    cfg = res.config.loss
    th = res.theta
    out: dict[str, float] = {}
    out["asymmetry"] = float(max(np.abs(th[:, 0] + th[:, 1]).max() / np.abs(th[:, 0]).max(),
                                 np.abs(th[:, 2] + th[:, 3]).max() / np.abs(th[:, 2]).max()))
    tI, tII = res.t_phase1, res.t_peak
    if np.isfinite(tI) and tI > 0:
        tg = np.linspace(0.0, tI, n_grid)
        g = res.sample(tg)
        out["rate_mu"], out["r2_mu"] = growth_rate_fit(tg, g[:, 0])
        out["rate_omega"], out["r2_omega"] = growth_rate_fit(tg, g[:, 2])
        out["ratio_dev_phase1"] = float(np.abs(g[:, 0] / g[:, 2] - 1).max())
    else:
        out.update(rate_mu=np.nan, r2_mu=np.nan, rate_omega=np.nan, r2_omega=np.nan, ratio_dev_phase1=np.nan)
    out["n_peaks"] = float((res.dw_zero_dir == -1).sum())
    out["n_troughs"] = float((res.dw_zero_dir == 1).sum())
    v = res.velocity()
    after = res.t > tII if np.isfinite(tII) else np.zeros(len(res.t), bool)
    out["omega_falls_after_peak"] = float(after.any() and (v[after, 2] < 0).all())
    out["mu_rises_after_peak"] = float(after.any() and (v[after, 0] > 0).all())
    out["mu_rises_always"] = float((v[res.t > 0, 0] > 0).all())
    marks = res.sample([0.0, tI if np.isfinite(tI) else 0.0, tII if np.isfinite(tII) else 0.0])
    out["loss_0"], out["loss_I"], out["loss_II"] = (float(x) for x in res.loss(marks))
    out["ratio_at_peak"] = float(marks[2, 0] / marks[2, 2]) if np.isfinite(tII) else np.nan
    end = th[-1:]
    ss, ls = s_star(cfg), cfg.loss_star
    out["loss_end"] = float(res.loss(end)[0])
    out["s_end"] = float(res.product(end)[0])
    out["omega_end"] = float(end[0, 2])
    out["s_gap_rel"] = (ss - out["s_end"]) / ss
    out["loss_gap_rel"] = (out["loss_end"] - ls) / ls
    ms = float(res.mu_star(end)[0, 0])
    out["mu_lag"] = (float(end[0, 0]) - ms) / ms
    out.update(s_gap_rel_II=np.nan, loss_gap_rel_II=np.nan, mu_lag_II=np.nan)
    if np.isfinite(tII):  # the same at t_II: the rivals of the limits
        peak = marks[2:]
        ms_II = float(res.mu_star(peak)[0, 0])
        out["s_gap_rel_II"] = (ss - float(res.product(peak)[0])) / ss
        out["loss_gap_rel_II"] = (out["loss_II"] - ls) / ls
        out["mu_lag_II"] = (float(peak[0, 0]) - ms_II) / ms_II
    late = (res.t >= res.t[-1] / 10) & (res.t > 0)
    gap = ss - res.product()[late]
    ok = gap > 0
    out["gap_slope"] = float(np.polyfit(np.log(res.t[late][ok]), np.log(gap[ok]), 1)[0]) if ok.sum() > 2 else np.nan
    pred = valley_residuals(out["omega_end"], cfg)
    out["pred_s_gap_rel"] = float(pred["s_gap"]) / ss
    out["pred_loss_gap_rel"] = float(pred["loss_gap"]) / ls
    out["pred_mu_lag"] = float(pred["mu_lag"])
    return out




# --------------------------------------------------------------------------- chapter 4's tables
def predicted_s_gap(cfg: FlowConfig) -> float:
    """The relative gap ``(s* - 2 mu omega) / s*`` at ``t = cfg.t_max`` predicted by the valley law:
    :func:`valley_residuals` at ``omega = valley_omega(t_max)``, about
    ``s* (c d^3)^(1/3) t_max^(-2/3) / 8`` (Phase III of paper 1, Appendix D, as derived here).
    Computed from the formula alone, before any flow is solved.  Chapter 4."""
    if not isinstance(cfg, FlowConfig):
        fail("cfg", cfg, "a FlowConfig")
    w = valley_omega(cfg.t_max, cfg.loss)  # omega(t_max) ~ (8 c d^3 t_max)^(-1/6)
    return float(valley_residuals(w, cfg.loss)["s_gap"] / cfg.loss.s_star)


def predicted_t_phase1(cfg: FlowConfig, order: int = 3) -> float:
    """The end of Phase I predicted from the flow's expansion to third order (derived here).
    ``order=1``: the first-order law, the time pure exponential growth at rate 2 takes to reach
    the same ``w_I``, ``(1/2) log(w_I / eps)`` (the rival of the third-order law).

    On the symmetric set with ``m = w`` (kept to ``O(w^5)`` by the flow), the reduced flow is
    ``dw/dt = 2 w - 4 k w^3 + O(w^5)`` with ``k = 1 + c d``, ``c = (1 + sigma2) / L``: growth at the
    linearisation's rate 2, slowed by the cubic term.  Phase I ends when ``(dw/dt)/w = 2 - 4 k
    w^2`` falls to ``f`` times its initial value (``f = phase1_fraction``), i.e. at
    ``w_I^2 = (1 - f) / (2 k) + f eps^2``, and integrating ``dt = dw / (2 w (1 - 2 k w^2))`` from
    ``eps`` gives

        t_I = (1/2) log(w_I / eps) - (1/4) log((1 - 2 k w_I^2) / (1 - 2 k eps^2)).

    The neglected terms change ``dw/dt / w`` by ``~2 c d^3 w^6`` (about 0.3% of the Phase I slowdown
    at ``d = 5`` and 2% at ``d = 10``), so ``t_I`` should agree to well under 1%.  Paper 1,
    Appendix D, Phase I; chapter 4."""
    if not isinstance(cfg, FlowConfig):
        fail("cfg", cfg, "a FlowConfig")
    check_choice("order", order, (1, 3))
    k = 1.0 + cfg.loss.c * cfg.loss.d
    f, eps = cfg.phase1_fraction, cfg.eps
    w2 = (1.0 - f) / (2.0 * k) + f * eps**2
    first = 0.5 * np.log(np.sqrt(w2) / eps)
    if order == 1:
        return float(first)
    return float(first - 0.25 * np.log((1 - 2 * k * w2) / (1 - 2 * k * eps**2)))


def flow_estimate(value: float, what: str = "") -> Estimate:
    """A quantity of a solved flow as an :class:`~icl_lib.stats.Estimate`: deterministic, given the
    relative half-width :data:`SOLVER_SPREAD` (far wider than the solver's error at ``rtol =
    1e-10``), so that a claim on it is decided like any other.  Chapter 4."""
    v = float(value)
    h = abs(v) * SOLVER_SPREAD
    return Estimate(v, v - h, v + h, what=what or f"deterministic: ODE solution, +-{SOLVER_SPREAD:g} relative")


def limits_table(flows: dict) -> "pandas.DataFrame":  # noqa: F821
    """The river-valley limits of (4.1) per setting: ``c = (1 + sigma2)/L``, ``s*`` and the loss
    floor ``1 + sigma2 - s*`` (paper 1, Section 4.2).  ``flows`` maps ``d`` to a
    :class:`FlowConfig`; one column ``"d = <d>"`` per setting.  Chapter 4."""
    return pd.DataFrame({
        f"d = {dd}": {"c = (1+sigma2)/L": cfg.loss.c, "s*": cfg.loss.s_star,
                      "1 + sigma2 - s*": cfg.loss.loss_star}
        for dd, cfg in flows.items()
    })


def phase_table(results: dict) -> "pandas.DataFrame":  # noqa: F821
    """The phase boundaries found by :func:`gradient_flow` and the solver's cost, per setting:
    ``t_I``, ``t_II``, ``omega_1(t_II)``, solver steps, right-hand-side evaluations and seconds
    (paper 1, Appendix D).  ``results`` maps ``d`` to a :class:`FlowResult`; one column
    ``"d = <d>"`` per setting.  Chapter 4."""
    return pd.DataFrame({
        f"d = {dd}": {"t_I (end of Phase I)": r.t_phase1, "t_II (peak of omega)": r.t_peak,
                      "omega at the peak": r.omega_peak, "solver steps": len(r.t),
                      "rhs evaluations": r.nfev, "solver seconds": r.seconds}
        for dd, r in results.items()
    })


def residual_table(summaries: dict, flows: dict) -> "pandas.DataFrame":  # noqa: F821
    """Measured residuals of Phase III at ``t_max`` against the leading-order predictions of
    :func:`valley_residuals`, one row ``"d = <d>"`` per setting: ``2 mu omega`` and ``s*``, the
    relative ``s``-gap, loss gap and lag ``(mu - mu*)/mu*`` (D.17), each followed by its prediction,
    and the log-log slope of the gap (predicted ``-2/3``).  ``summaries`` maps ``d`` to
    :func:`phase_summary`'s dict, ``flows`` to the :class:`FlowConfig`.  Chapter 4."""
    rows = {}
    for dd, sm in summaries.items():
        rows[f"d = {dd}"] = {
            "2 mu omega": sm["s_end"], "s*": flows[dd].loss.s_star,
            "(s* - 2 mu omega)/s*": sm["s_gap_rel"], "predicted": sm["pred_s_gap_rel"],
            "(loss - loss*)/loss*": sm["loss_gap_rel"], "predicted ": sm["pred_loss_gap_rel"],
            "(mu - mu*)/mu*": sm["mu_lag"], "predicted  ": sm["pred_mu_lag"],
            "log-log slope of the gap": sm["gap_slope"],
        }
    return pd.DataFrame(rows).T


def timing_table(results: dict) -> "pandas.DataFrame":  # noqa: F821
    """Phase timing per setting (paper 1, Appendix D, "almost identical behaviors" for d = 5 and
    10): ``t_I``, ``t_II``, their difference, ``omega_max``, ``omega_max sqrt(d)`` and
    ``s = 2 mu_1 omega_1`` at the peak.  ``results`` maps ``d`` to a :class:`FlowResult`; one
    column ``"d = <d>"`` per setting.  Chapter 4."""
    cols = {}
    for dd, r in results.items():
        mu_peak = r.sample(r.t_peak)[0, 0]  # mu_1(t_II)
        cols[f"d = {dd}"] = {
            "t_I": r.t_phase1, "t_II": r.t_peak, "t_II - t_I": r.t_peak - r.t_phase1,
            "omega_max": r.omega_peak, "omega_max * sqrt(d)": r.omega_peak * dd**0.5,
            "s at the peak": 2 * mu_peak * r.omega_peak,
        }
    return pd.DataFrame(cols)
