"""Chapter 1's setup (``01_setup``): the data model and the attention model of paper 1, Section 2,
and the one model the chapter trains.

The module is chapter 1's one entry point: the chapter imports it alone (``ch``), and its
``__all__`` names every library name the chapter's code uses."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import DataConfig, ModelConfig, RunSpec, TrainConfig
from ..engine.profiles import train_config
from ..estimators import max_sequences_at_once
from ..validate import check_float, check_int, fail
from .base import ChapterSetup, resolve_common

# Every library name chapter 1's code uses, so that the chapter imports this module alone.
from .. import estimators as est, figures, seeding, stats
from ..chapter import changed_parameters
from ..claims import Claims
from ..config import resolve_device
from ..data import sample_batch
from ..engine import train
from ..models import AttentionEnsemble, kernel_regression_predict
from ..paper1.dynamics.landscape import reparam_circuits
from ..seeding import derive_seed
from ..version import __version__

__all__ = [
    "ProblemSetup", "__version__", "AttentionEnsemble", "changed_parameters", "Claims", "derive_seed", "est",
    "figures", "kernel_regression_predict", "reparam_circuits", "resolve_device", "sample_batch", "seeding",
    "stats", "train",
]


@dataclass(frozen=True)
class ProblemSetup(ChapterSetup):
    """Chapter 1 (paper 1, Section 2): the data ``(d, L, sigma2)``, the Monte Carlo size ``n_mc``
    and one ``heads``-head model trained with the profile's Adam (:attr:`spec`)."""

    chapter = "01_setup"

    d: int
    L: int
    sigma2: float
    heads: int
    steps: int | None
    n_mc: int
    data: DataConfig
    train: TrainConfig

    @classmethod
    def from_parameters(cls, *, profile, seed, device, d, L, sigma2, heads, steps, n_mc) -> "ProblemSetup":
        """Validate chapter 1's parameters (a bad one raises ``ValueError`` naming it) and resolve
        the profile on the device."""
        profile, seed, device = resolve_common(profile, seed, device)
        d = check_int("d", d, 1, 32)
        L = check_int("L", L, 1, 256)
        sigma2 = check_float("sigma2", sigma2, 0.0, 10.0)
        if sigma2 == 0 and L < d:  # the Bayes reference (ridge) needs X^T X invertible
            fail("sigma2", sigma2, f"sigma2 > 0 when L < d (here L={L}, d={d})")
        heads = check_int("heads", heads, 1, 16)
        if steps is not None:
            steps = check_int("steps", steps, 1, 500_000)
        n_mc_max = min(1_000_000, max_sequences_at_once(d, L))  # 800 MB at once
        n_mc = check_int("n_mc", n_mc, 100, n_mc_max)
        return cls(profile, seed, device, d, L, sigma2, heads, steps, n_mc,
                   data=DataConfig(d=d, L=L, sigma2=sigma2), train=train_config(profile, steps=steps))

    @property
    def spec(self) -> RunSpec:
        """The model trained at the end of the chapter."""
        return RunSpec(data=self.data, model=ModelConfig(heads=self.heads), train=self.train, seed=self.seed)

    def runs(self) -> dict[str, list[RunSpec]]:
        """``{"model": [spec]}``."""
        return {"model": [self.spec]}
