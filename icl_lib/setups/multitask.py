"""Chapter 7's setup: multi-task regression (paper 1, Appendix B.4), the head
sweep on tasks with supports ``S_n``.

The chapter's entry point, :mod:`icl_lib.chapters.multitask`, gives it with every other
library name the chapter's code uses."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import RunSpec
from ..paper1.multitask.references import check_supports, max_bayes_draws, max_test_prompts
from ..paper1.sweeps import as_heads, heads_sweep_specs
from ..validate import check_int, fail, literal_list
from .base import flat, grouped, resolve_common
from .fields import Paper1Setup, paper1_fields

__all__ = ["MultitaskSetup"]


@dataclass(frozen=True)
class MultitaskSetup(Paper1Setup):
    """Chapter 7 (paper 1, B.4): ``seeds`` models per head count of ``heads`` on the tasks of
    ``supports`` (:meth:`sweep`), and the sizes of the per-task losses and Bayes risks."""

    chapter = "07_multitask"

    heads: list
    seeds: int
    supports: tuple
    n_test: int
    n_bayes: int

    @classmethod
    def from_parameters(cls, *, profile, seed, device, heads, seeds, d, L, sigma2, supports, steps, lr, n_test,
                        n_bayes) -> "MultitaskSetup":
        """Validate chapter 7's parameters (a bad one raises ``ValueError`` naming it), then
        resolve the profile on the device."""
        profile, seed, device = resolve_common(profile, seed, device, span=32)
        heads = as_heads(literal_list("heads", heads))  # sorted head counts
        if max(heads) > 16:  # training time grows with H; the paper has H <= 4
            fail("heads", heads, "head counts in [1, 16]")
        seeds = check_int("seeds", seeds, 1, 32)  # one model per seed and H
        # each head has (d + N)^2 KQ entries; time grows with L
        f = paper1_fields(d, L, sigma2, steps, lr, L_range=(2, 512), lr_max=1.0)
        d, L, sigma2, steps, lr = f
        supports = check_supports(literal_list("supports", supports), d)  # 2-8 tasks
        if sigma2 == 0 and L < max(map(len, supports)):  # Bayes needs X_S^T X_S > 0
            fail("sigma2", sigma2, f"sigma2 > 0 when L={L} < max |S_n|")
        n_max = min(200_000, max_test_prompts(heads, seeds, L, d + len(supports)))
        n_test = check_int("n_test", n_test, 2, n_max)  # a few minutes at most
        n_max = min(1_000_000, max_bayes_draws(L, supports))
        n_bayes = check_int("n_bayes", n_bayes, 2, n_max)  # a few minutes at most
        return cls(profile=profile, seed=seed, device=device, heads=heads, seeds=seeds, supports=supports,
                   n_test=n_test, n_bayes=n_bayes, **f.setup(profile, supports=supports))

    def sweep(self) -> dict[int, list[RunSpec]]:
        """``{H: [RunSpec per seed]}``: the head sweep on ``data``
        (:func:`~icl_lib.paper1.sweeps.heads_sweep_specs`)."""
        specs = heads_sweep_specs(self.heads, self.seeds, self.seed, self.data, self.train)
        return grouped(specs, lambda s: s.model.heads)

    def runs(self) -> dict[str, list[RunSpec]]:
        """``{"sweep": ...}``."""
        return {"sweep": flat(self.sweep())}
