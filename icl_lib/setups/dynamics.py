"""Chapter 3's setup: the two-stage dynamics of paper 1, Section 4
(4.1, 4.2), read from chapter 2's head sweep, and gradient descent on the approximate loss (4.1).

The chapter's entry point, :mod:`icl_lib.chapters.dynamics`, gives it with every other
library name the chapter's code uses."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import RunSpec
from ..paper1.dynamics.stage_detection import STAGE_HEADS_MAX, check_stage_heads
from ..paper1.sweeps import heads_sweep_specs
from ..validate import check_float, check_int
from .base import flat, grouped, resolve_common
from .fields import Paper1Setup, paper1_fields
from .patterns import SWEEP_EXTENSION

__all__ = ["SEEDS", "DynamicsSetup"]

SEEDS = {"quick": 9, "paper": 36}  # seeds per head count, by profile


@dataclass(frozen=True)
class DynamicsSetup(Paper1Setup):
    """Chapter 3 (paper 1, Sections 4.1 and 4.2): the runs of chapter 2's sweep (same seeds, data
    and training) for the head counts ``heads`` and ``gd_heads`` (:attr:`sweep_heads`), with the
    settings of gradient descent on (4.1), its Monte Carlo and the attention-probability norms."""

    chapter = "03_two_stage_dynamics"

    heads: list
    seeds: int
    gd_heads: int
    gd_lr: float
    gd_steps: int
    n_mc: int
    norm_omega: float
    norm_draws: int
    extra: dict  # chapter 2's sample extension ({H: more seeds}; patterns.SWEEP_EXTENSION)

    @classmethod
    def from_parameters(cls, *, profile, seed, device, heads, seeds, d, L, sigma2, steps, lr, gd_heads, gd_lr,
                        gd_steps, n_mc, norm_omega, norm_draws) -> "DynamicsSetup":
        """Validate chapter 3's parameters (a bad one raises ``ValueError`` naming it; the upper
        bounds keep a run within about an hour on 2 CPU cores), resolve the profile on the device
        and the profile's seeds (``seeds=None``)."""
        profile, seed, device = resolve_common(profile, seed, device, span=40)
        heads = check_stage_heads(heads)  # 2..8: the stages need two heads
        extra = SWEEP_EXTENSION[profile] if seeds is None else {}
        seeds = SEEDS[profile] if seeds is None else seeds
        seeds = check_int("seeds", seeds, 1, 40)  # training time grows with seeds
        # L >= d: Figure 19's d/L is at most 1
        f = paper1_fields(d, L, sigma2, steps, lr, L_range=(2, 256), L_at_least_d=True)
        gd_heads = check_int("gd_heads", gd_heads, 2, STAGE_HEADS_MAX)
        gd_lr = check_float("gd_lr", gd_lr, 0.0, 1.0, lo_open=True)  # may diverge
        gd_steps = check_int("gd_steps", gd_steps, 1, 1_000_000)  # 1e6: 1 min per H
        n_mc = check_int("n_mc", n_mc, 1_000, 1_000_000)  # 1e6: 2 to 20 min
        norm_omega = check_float("norm_omega", norm_omega, 0.0, 10.0, lo_open=True)
        norm_draws = check_int("norm_draws", norm_draws, 100, 20_000)  # 3 to 20 min
        return cls(profile=profile, seed=seed, device=device, heads=heads, seeds=seeds, gd_heads=gd_heads,
                   gd_lr=gd_lr, gd_steps=gd_steps, n_mc=n_mc, norm_omega=norm_omega,
                   norm_draws=norm_draws, **f.setup(profile), extra=extra)

    @property
    def sweep_heads(self) -> list[int]:
        """The head counts trained: ``heads`` and ``gd_heads``, sorted."""
        return sorted(set(self.heads) | {self.gd_heads})

    def sweep(self) -> dict[int, list[RunSpec]]:
        """``{H: [RunSpec per seed]}`` for :attr:`sweep_heads`: chapter 2's specifications
        (:func:`~icl_lib.paper1.sweeps.heads_sweep_specs`), so the run cache serves its runs."""
        specs = heads_sweep_specs(self.sweep_heads, self.seeds, self.seed, self.data, self.train, self.extra)
        return grouped(specs, lambda s: s.model.heads)

    def runs(self) -> dict[str, list[RunSpec]]:
        """``{"sweep": ...}``."""
        return {"sweep": flat(self.sweep())}
