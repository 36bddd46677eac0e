"""Chapter 1's setup: the data model and the attention model of paper 1, Section 2,
and the one model the chapter trains.

The chapter's entry point, :mod:`icl_lib.chapters.problem`, gives it with every other
library name the chapter's code uses."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import ModelConfig, RunSpec
from ..estimators import max_sequences_at_once
from ..validate import check_int
from .base import resolve_common
from .fields import Paper1Setup, paper1_fields

__all__ = ["ProblemSetup"]


@dataclass(frozen=True)
class ProblemSetup(Paper1Setup):
    """Chapter 1 (paper 1, Section 2): the data ``(d, L, sigma2)``, the Monte Carlo size ``n_mc``
    and one ``heads``-head model trained with the profile's Adam (:attr:`spec`)."""

    chapter = "01_setup"

    heads: int
    n_mc: int

    @classmethod
    def from_parameters(cls, *, profile, seed, device, d, L, sigma2, heads, steps, n_mc) -> "ProblemSetup":
        """Validate chapter 1's parameters (a bad one raises ``ValueError`` naming it) and resolve
        the profile on the device."""
        profile, seed, device = resolve_common(profile, seed, device)
        f = paper1_fields(d, L, sigma2, steps, full_rank=True)  # lr: the profile's
        heads = check_int("heads", heads, 1, 16)
        n_mc_max = min(1_000_000, max_sequences_at_once(f.d, f.L))  # 800 MB at once
        n_mc = check_int("n_mc", n_mc, 100, n_mc_max)
        return cls(profile=profile, seed=seed, device=device, heads=heads, n_mc=n_mc, **f.setup(profile))

    @property
    def spec(self) -> RunSpec:
        """The model trained at the end of the chapter."""
        return RunSpec(data=self.data, model=ModelConfig(heads=self.heads), train=self.train, seed=self.seed)

    def runs(self) -> dict[str, list[RunSpec]]:
        """``{"model": [spec]}``."""
        return {"model": [self.spec]}
