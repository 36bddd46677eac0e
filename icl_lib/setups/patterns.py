"""Chapter 2's setup: the head sweep of paper 1, Section 3, the runs with other
optimiser settings (Appendix C.1) and, in the paper profile, chapter 9's anchor cells.

The chapter's entry point, :mod:`icl_lib.chapters.patterns`, gives it with every other
library name the chapter's code uses."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import RunSpec
from ..paper1.sensitivity import SENSITIVITY_SEED, sensitivity_specs
from ..paper1.sweeps import as_heads, heads_sweep_specs
from ..paper1.phase_diagram.trap import anchor_specs
from ..paper1.seed_ranges import SEED_RANGES
from ..validate import check_int, fail
from .base import flat, grouped, resolve_common
from .fields import Paper1Setup, paper1_fields

__all__ = ["SEEDS", "SWEEP_EXTENSION", "PatternsSetup"]

# seeds per head count of the sweep and per other optimiser setting, by profile (the paper profile's
# 36 that all reach a pattern give an exact interval above 0.9, the papers' "consistently")
SEEDS = {"quick": dict(sweep=12, settings=6), "paper": dict(sweep=36, settings=12)}
# The sweep's sample extension, declared before its runs (the rule-change page): in the paper profile
# the two- and three-head claims on the pattern's runs could not be decided by 27 and 35 runs that
# all agree (a fraction above 0.9 needs 36), so 16 more two-head and 4 more three-head seeds are
# trained; chapters 2, 3 and 5 read the same sweep.  A reader's own ``seeds`` trains no extension.
SWEEP_EXTENSION = {"quick": {}, "paper": {2: 16, 3: 4}}


@dataclass(frozen=True)
class PatternsSetup(Paper1Setup):
    """Chapter 2 (paper 1, Section 3 and Appendix C.1): ``seeds`` models per head count of
    ``heads`` (:meth:`sweep`), ``sens_seeds`` models of ``sens_heads`` heads per other optimiser
    setting (:meth:`settings`), and in the paper profile at the paper's setting the anchor cells
    of chapter 9's trap sweep, whose outcomes the chapter counts with its own (:meth:`anchors`)."""

    chapter = "02_patterns"

    heads: list
    seeds: int
    n_test: int
    sens_heads: int
    sens_seeds: int
    extra: dict  # more seeds for some head counts ({H: seeds}; SWEEP_EXTENSION)

    @classmethod
    def from_parameters(cls, *, profile, seed, device, heads, seeds, d, L, sigma2, steps, lr, n_test, sens_heads,
                        sens_seeds) -> "PatternsSetup":
        """Validate chapter 2's parameters (a bad one raises ``ValueError`` naming it), resolve the
        profile on the device and the profile's seeds (``seeds``, ``sens_seeds``: ``None``)."""
        # span: the other settings' seeds (2000 + seed, ...) end below the sensitivity range's end
        span = SEED_RANGES["sensitivity"][0].stop
        profile, seed, device = resolve_common(profile, seed, device, span=span)
        heads = as_heads(heads, hi=8)  # one head count or a list of them
        extra = SWEEP_EXTENSION[profile] if seeds is None else {}
        seeds = SEEDS[profile]["sweep"] if seeds is None else seeds
        seeds = check_int("seeds", seeds, 1, 160 // len(heads))  # <= 160 models
        f = paper1_fields(d, L, sigma2, steps, lr, d_range=(1, 16), L_range=(1, 128), full_rank=True)
        n_test = check_int("n_test", n_test, 100, 100_000)
        sens_heads = check_int("sens_heads", sens_heads, 0, 8)
        if sens_heads == 1:
            fail("sens_heads", sens_heads, "0 (no runs) or 2 to 8 heads")
        sens_seeds = SEEDS[profile]["settings"] if sens_seeds is None else sens_seeds
        sens_seeds = check_int("sens_seeds", sens_seeds, 1, 48)
        return cls(profile=profile, seed=seed, device=device, heads=heads, seeds=seeds, n_test=n_test,
                   sens_heads=sens_heads, sens_seeds=sens_seeds, **f.setup(profile), extra=extra)

    @property
    def paper_setting(self) -> bool:
        """The paper profile at the paper's data and rate (d = 5, L = 40, sigma2 = 0.1, lr 1e-3),
        where chapter 9's anchor cells are this chapter's setting."""
        return self.profile == "paper" and (self.d, self.L, self.sigma2) == (5, 40, 0.1) and self.train.lr == 1e-3

    def sweep(self) -> dict[int, list[RunSpec]]:
        """``{H: [RunSpec per seed]}``: the head sweep (:func:`~icl_lib.paper1.sweeps.heads_sweep_specs`)."""
        specs = heads_sweep_specs(self.heads, self.seeds, self.seed, self.data, self.train, self.extra)
        return grouped(specs, lambda s: s.model.heads)

    def settings(self) -> dict[str, list[RunSpec]]:
        """``{setting: [RunSpec per seed]}``: the other optimiser settings
        (:func:`~icl_lib.paper1.sensitivity.sensitivity_specs`; none when ``sens_heads`` is 0), run
        seeds from the sensitivity range's start plus :attr:`seed`
        (:data:`~icl_lib.paper1.seed_ranges.SEED_RANGES`)."""
        if not self.sens_heads:
            return {}
        return sensitivity_specs(self.sens_heads, self.sens_seeds, SENSITIVITY_SEED + self.seed, self.data,
                                 self.train)

    def anchors(self) -> dict[int, list[RunSpec]]:
        """``{H: [RunSpec per seed]}``: chapter 9's anchor runs of the head counts of :attr:`heads`
        its sweep has (:func:`~icl_lib.paper1.phase_diagram.trap.anchor_specs`), at :attr:`paper_setting` only;
        the chapter trains them with its execution, as it trains its own."""
        specs = anchor_specs(self.heads, self.profile) if self.paper_setting else []
        return grouped(specs, lambda s: s.model.heads)

    def runs(self) -> dict[str, list[RunSpec]]:
        """``{"sweep": ..., "settings": ..., "anchors": ...}`` (the last two when there are any)."""
        groups = {"sweep": flat(self.sweep()), "settings": flat(self.settings()), "anchors": flat(self.anchors())}
        return {k: v for k, v in groups.items() if v or k == "sweep"}
