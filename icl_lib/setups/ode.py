"""Chapter 4's setup: the two-head gradient flow of
the approximate loss (4.1) at two covariate dimensions (paper 1, Section 4.2 and Appendix D,
Figures 21 and 22).  The chapter trains no model: the flow is solved on the CPU in float64 and
nothing in it is random, so both profiles compute the same.

The chapter's entry point, :mod:`icl_lib.chapters.ode`, gives it with every other
library name the chapter's code uses."""

from __future__ import annotations

from dataclasses import dataclass

from ..paper1.approx_loss import ApproxLossConfig
from ..paper1.ode import FlowConfig
from ..validate import check_float, check_int, fail
from .base import ChapterSetup, resolve_common

__all__ = ["OdeSetup"]


@dataclass(frozen=True)
class OdeSetup(ChapterSetup):
    """Chapter 4 (paper 1, Appendix D): the flows (:attr:`flows`, ``{d: FlowConfig}``) of the
    approximate loss (4.1) at ``(d, L, sigma2)`` and ``(d2, L, sigma2)`` from the initial scale
    ``eps`` up to ``t_max``, with Phase I ending where the growth rate of ``omega`` falls below
    ``phase1_fraction`` of its initial value."""

    chapter = "04_ode_phases"

    d: int
    d2: int
    L: int
    sigma2: float
    eps: float
    t_max: float
    phase1_fraction: float
    flows: dict

    @classmethod
    def from_parameters(cls, *, profile, seed, device, d, d2, L, sigma2, eps, t_max,
                        phase1_fraction) -> "OdeSetup":
        """Validate chapter 4's parameters (a bad one raises ``ValueError`` naming it) and build
        the two flows."""
        profile, seed, device = resolve_common(profile, seed, device)  # seed, device: unused
        d = check_int("d", d, 1, 20)
        d2 = check_int("d2", d2, 1, 20)
        if d2 == d:
            fail("d2", d2, f"an integer in [1, 20] other than d={d}")
        L = check_int("L", L, 5, 100_000)
        sigma2 = check_float("sigma2", sigma2, 0.0, 1.0)
        eps = check_float("eps", eps, 1e-8, 0.1)
        t_max = check_float("t_max", t_max, 1.0, 1e6)
        phase1_fraction = check_float("phase1_fraction", phase1_fraction, 0.0, 1.0, lo_open=True, hi_open=True)
        flows = {dd: FlowConfig(loss=ApproxLossConfig(d=dd, L=L, sigma2=sigma2), eps=eps, t_max=t_max,
                                phase1_fraction=phase1_fraction) for dd in (d, d2)}
        return cls(profile, seed, device, d, d2, L, sigma2, eps, t_max, phase1_fraction, flows)
