"""Chapter 6's setup: anisotropic covariates (paper 1, Appendix B.3), two-head
models trained on KMS covariances ``rho^|i-j|``.

The chapter's entry point, :mod:`icl_lib.chapters.anisotropic`, gives it with every other
library name the chapter's code uses."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import RunSpec
from ..paper1.anisotropic.runs import check_eval_lengths, check_rhos, rho_specs
from ..validate import check_float, check_int
from .base import flat, resolve_common, split
from .fields import Paper1Setup, paper1_fields

__all__ = ["SEEDS", "AnisotropicSetup"]

SEEDS = {"quick": 10, "paper": 20}  # seeds per correlation, by profile


@dataclass(frozen=True)
class AnisotropicSetup(Paper1Setup):
    """Chapter 6 (paper 1, B.3): ``seeds`` two-head models per correlation of :attr:`sweep_rhos`
    (``rhos`` and the main experiment's ``rho``, :meth:`rho_sweep`), ``data`` at ``rho``, and the
    sizes of the evaluations."""

    chapter = "06_anisotropic"

    rho: float
    rhos: tuple
    seeds: int
    eval_L: tuple
    n_test: int
    n_mc: int

    @classmethod
    def from_parameters(cls, *, profile, seed, device, rho, rhos, seeds, d, L, sigma2, steps, lr, eval_L, n_test,
                        n_mc) -> "AnisotropicSetup":
        """Validate chapter 6's parameters (a bad one raises ``ValueError`` naming it), resolve the
        profile on the device and the profile's seeds (``seeds=None``)."""
        profile, seed, device = resolve_common(profile, seed, device, span=24)
        rho = check_float("rho", rho, -1.0, 1.0, lo_open=True, hi_open=True)
        rhos = check_rhos("rhos", rhos, max_len=8)  # models: (8 + 1) x seeds
        seeds = SEEDS[profile] if seeds is None else seeds
        seeds = check_int("seeds", seeds, 1, 24)  # models: (8 + 1) x seeds
        # d: Monte Carlo chunks of 20,000 x L x d floats; training time grows with L; ridge > 0
        f = paper1_fields(d, L, sigma2, steps, lr, d_range=(2, 16), L_range=(2, 256), sigma2_positive=True,
                          lr_max=0.01)
        eval_L = check_eval_lengths("eval_L", eval_L, 2, 640, max_len=12)
        n_test = check_int("n_test", n_test, 100, 200_000)  # per length and rho
        n_mc = check_int("n_mc", n_mc, 100, 1_000_000)  # three Monte Carlo risks
        return cls(profile=profile, seed=seed, device=device, rho=rho, rhos=rhos, seeds=seeds,
                   eval_L=eval_L, n_test=n_test, n_mc=n_mc, **f.setup(profile, rho=rho))

    @property
    def sweep_rhos(self) -> list[float]:
        """The correlations trained: ``rhos`` and ``rho``, sorted."""
        return sorted({*self.rhos, self.rho})

    def rho_sweep(self) -> dict[float, list[RunSpec]]:
        """``{rho: [RunSpec per seed]}`` over :attr:`sweep_rhos`
        (:func:`~icl_lib.paper1.anisotropic.runs.rho_specs`)."""
        rhos = self.sweep_rhos
        specs = rho_specs(rhos, self.seeds, self.seed, self.d, self.L, self.sigma2, self.train)
        return split(specs, rhos, self.seeds)

    def runs(self) -> dict[str, list[RunSpec]]:
        """``{"rhos": ...}``: every run of :meth:`rho_sweep`."""
        return {"rhos": flat(self.rho_sweep())}

