"""Gradient flow on the approximate loss (4.1) for two heads, and its three phases (paper 1, App. D).

The flow ``d theta / dt = -grad L~(theta)`` on ``theta = (mu_1, mu_2, omega_1, omega_2)`` is
integrated with :func:`scipy.integrate.solve_ivp` (an implicit, stiff-capable method, ``Radau`` by
default, with ``rtol = 1e-10``, ``atol = 1e-12``) from the symmetric small initialisation of
Definition D.1, ``mu_1 = -mu_2 = omega_1 = -omega_2 = eps``.  The gradient is the library's closed
form :func:`icl_lib.approx_loss.approx_loss_grad` (checked against autograd in the tests).

Phase boundaries are found by rule, as events of the integrator (so they are located to
integration accuracy, not read off a grid):

* end of Phase I, ``t_I``: the first time the growth rate of ``log omega_1``,
  ``(d omega_1/dt) / omega_1``, falls below ``phase1_fraction`` times its value at ``t = 0``;
* end of Phase II, ``t_II``: the peak of ``omega_1``, the first time ``d omega_1/dt`` changes sign
  from ``+`` to ``-``.  Every sign change of ``d omega_1/dt`` is recorded, so the number of peaks
  can be checked.

Phase III is ``t > t_II``.  Used by chapter 4.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import matplotlib.pyplot as plt
import numpy as np
import torch
from scipy.integrate import solve_ivp

from .approx_loss import ApproxLossConfig, approx_loss, approx_loss_grad, mu_star, s_star
from .config import _fail, check_choice, check_float, check_int
from .plotting import HEAD_COLORS

__all__ = ["FlowConfig", "FlowResult", "initial_theta", "flow_rhs", "gradient_flow", "growth_rate_fit",
           "valley_omega", "valley_residuals", "phase_summary", "phase_figure", "compare_figure", "METHODS"]

METHODS = ("Radau", "BDF", "LSODA")  # stiff-capable methods of solve_ivp


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
            _fail("loss", self.loss, "an ApproxLossConfig")
        object.__setattr__(self, "eps", check_float("eps", self.eps, 0.0, 0.1, lo_open=True))
        object.__setattr__(self, "t_max", check_float("t_max", self.t_max, 0.0, 1e9, lo_open=True))
        check_choice("method", self.method, METHODS)
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

    The gradient is :func:`icl_lib.approx_loss.approx_loss_grad` (eq. 4.1), evaluated in numpy.
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
        _fail("cfg", cfg, "a FlowConfig")
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
    late = (res.t >= res.t[-1] / 10) & (res.t > 0)
    gap = ss - res.product()[late]
    ok = gap > 0
    out["gap_slope"] = float(np.polyfit(np.log(res.t[late][ok]), np.log(gap[ok]), 1)[0]) if ok.sum() > 2 else np.nan
    pred = valley_residuals(out["omega_end"], cfg)
    out["pred_s_gap_rel"] = float(pred["s_gap"]) / ss
    out["pred_loss_gap_rel"] = float(pred["loss_gap"]) / ls
    out["pred_mu_lag"] = float(pred["mu_lag"])
    return out


_PHASE_COLORS = {"I": "#cfe2f3", "II": "#fde9c9", "III": "#d9ead3"}


def _shade(ax, res: FlowResult, t_hi: float, labels: bool = True):
    for name, (a, b) in res.phases().items():
        b = min(b, t_hi)
        if np.isfinite(a) and np.isfinite(b) and b > a:
            ax.axvspan(a, b, color=_PHASE_COLORS[name], alpha=0.7, lw=0, zorder=0)
            if labels:
                    ax.text((a + b) / 2, 1.0, f"Phase {name}", transform=ax.get_xaxis_transform(), ha="center",
                        va="bottom", fontsize=7, color="0.3")


def phase_figure(res: FlowResult, early_factor: float = 2.5, n: int = 600, title: str | None = None):
    """The four panels of paper 1, Figures 21/22, for one solved flow (chapter 4).

    (a) the four coordinates over the whole horizon (log time); (b) early-stage zoom on
    ``[0, early_factor * t_II]`` with the three phases shaded; (c) the loss (4.1) and the ratio
    ``mu_1 / omega_1``; (d) ``mu_1`` against ``mu*_1(omega)`` (eq. D.17) and ``2 mu_1 omega_1``
    against ``s*``.  Returns the figure.
    """
    t_hi = early_factor * res.t_peak if np.isfinite(res.t_peak) else res.config.t_max
    t_full = np.concatenate([[0.0], np.geomspace(1e-3, res.config.t_max, n)])
    t_early = np.linspace(0.0, t_hi, n)
    th_full, th_early = res.sample(t_full), res.sample(t_early)
    names = [r"$\mu_1$", r"$\mu_2$", r"$\omega_1$", r"$\omega_2$"]
    styles = ["-", "--", "-", "--"]
    colors = [HEAD_COLORS[0], HEAD_COLORS[0], HEAD_COLORS[1], HEAD_COLORS[1]]
    fig, axes = plt.subplots(2, 2, figsize=(10, 6.6))
    (a, b), (c, e) = axes
    for k in range(4):
        a.plot(t_full, th_full[:, k], ls=styles[k], color=colors[k], label=names[k], lw=1.5)
        b.plot(t_early, th_early[:, k], ls=styles[k], color=colors[k], label=names[k], lw=1.5)
    a.set_xscale("symlog", linthresh=1e-1)
    a.set_title("(a) full trajectory")
    b.set_title("(b) early stage, phases shaded", pad=14)
    _shade(b, res, t_hi)
    for ax in (a, b):
        ax.set_xlabel("t")
        ax.axhline(0, color="0.6", lw=0.6)
        ax.legend(fontsize=8, ncol=2)
    loss = res.loss(th_full)
    c.plot(t_full, loss, color=HEAD_COLORS[2], lw=1.5, label=r"loss $\tilde L$")
    c.axhline(res.config.loss.loss_star, color=HEAD_COLORS[2], ls=":", lw=1, label=r"$1+\sigma^2-s^*$")
    c.set_xscale("symlog", linthresh=1e-1)
    c.set_xlabel("t")
    c.set_ylabel("loss")
    c2 = c.twinx()
    c2.plot(t_full, th_full[:, 0] / th_full[:, 2], color=HEAD_COLORS[3], lw=1.5, label=r"$\mu_1/\omega_1$")
    c2.set_yscale("log")
    c2.set_ylabel(r"$\mu_1/\omega_1$")
    c2.grid(False)
    lines = c.get_lines()[:2] + c2.get_lines()[:1]
    c.legend(lines, [ln.get_label() for ln in lines], fontsize=8, loc="center left")
    c.set_title("(c) loss and ratio (phases shaded)")
    _shade(c, res, res.config.t_max, labels=False)
    ms = res.mu_star(th_full)
    e.plot(t_full, th_full[:, 0], color=HEAD_COLORS[0], lw=1.5, label=r"$\mu_1$")
    e.plot(t_full, ms[:, 0], color="0.2", ls=":", lw=1.5, label=r"$\mu_1^*(\omega)$ (D.17)")
    e.plot(t_full, res.product(th_full), color=HEAD_COLORS[4], lw=1.5, label=r"$2\mu_1\omega_1$")
    e.axhline(res.s_star, color=HEAD_COLORS[4], ls="--", lw=1, label=r"$s^*$")
    e.set_xscale("symlog", linthresh=1e-1)
    e.set_yscale("log")
    lo = max(min(th_full[:, 0].min(), 1e-3), 1e-6)
    e.set_ylim(lo, max(th_full[:, 0].max(), 1.0) * 1.5)
    e.set_xlabel("t")
    e.legend(fontsize=8)
    e.set_title(r"(d) $\mu$ against $\mu^*(\omega)$")
    for ax in (a, c, e):
        ax.set_xlim(0, res.config.t_max)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def compare_figure(results: dict, t_zoom: float | None = None, n: int = 600):
    """Flows for several settings side by side (chapter 4): (a) ``omega_1`` and ``mu_1`` in the early
    stage with each flow's phase boundaries marked; (b) the gap ``s* - 2 mu_1 omega_1`` on log-log
    axes with the late-time law ``s*^2 c d^3 w(t)^4 / 2`` of :func:`valley_residuals` dashed.

    ``results`` maps a label to a :class:`FlowResult`.  Returns the figure.
    """
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    if t_zoom is None:
        t_zoom = 2.5 * max(r.t_peak for r in results.values())
    tz = np.linspace(0, t_zoom, n)
    for k, (label, r) in enumerate(results.items()):
        col = HEAD_COLORS[k % 10]
        th = r.sample(tz)
        a.plot(tz, th[:, 2], color=col, lw=1.5, label=rf"$\omega_1$, {label}")
        a.plot(tz, th[:, 0], color=col, lw=1.5, ls="--", label=rf"$\mu_1$, {label}")
        for x, ls in ((r.t_phase1, ":"), (r.t_peak, "-.")):
            a.axvline(x, color=col, ls=ls, lw=1)
        late = r.t > r.t_peak
        tl = r.t[late]
        b.loglog(tl, r.s_star - r.product()[late], color=col, lw=1.5, label=rf"$s^*-2\mu_1\omega_1$, {label}")
        b.loglog(tl, valley_residuals(valley_omega(tl, r.config.loss), r.config.loss)["s_gap"], color=col,
                 ls="--", lw=1, label=r"$\frac{1}{2}s^{*2}cd^3\,w(t)^4$")
    a.set_xlabel("t")
    a.set_title(r"(a) early stage (dotted: end of Phase I; dash-dot: peak of $\omega$)")
    a.legend(fontsize=7, ncol=2)
    b.set_xlabel("t")
    b.set_title("(b) approach to $s^*$ in Phase III")
    b.legend(fontsize=7)
    fig.tight_layout()
    return fig
