"""The fields every paper-1 training chapter shares -- the data's ``d``, ``L`` and ``sigma2`` and
the training's ``steps`` and ``lr`` -- validated in one place, within each chapter's own bounds
(:func:`paper1_fields`), and declared once, with the configurations built from them, by the base of
the setups of chapters 1-3 and 5-7 (:class:`Paper1Setup`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ..config import DataConfig, TrainConfig
from ..engine.profiles import train_config
from ..validate import check_float, check_int, fail
from .base import ChapterSetup

__all__ = ["Paper1Fields", "Paper1Setup", "paper1_fields"]


class Paper1Fields(NamedTuple):
    """A chapter's validated ``d``, ``L``, ``sigma2``, ``steps`` and ``lr`` (``None``: the
    profile's), and the configurations built from them."""

    d: int
    L: int
    sigma2: float
    steps: int | None
    lr: float | None

    def data(self, **extra) -> DataConfig:
        """The chapter's :class:`DataConfig` (``extra``: its other fields, e.g. ``rho``)."""
        return DataConfig(d=self.d, L=self.L, sigma2=self.sigma2, **extra)

    def train(self, profile: str) -> TrainConfig:
        """Paper 1's training in ``profile`` with the chapter's ``steps`` and ``lr``."""
        return train_config(profile, steps=self.steps, lr=self.lr)

    def setup(self, profile: str, **data) -> dict:
        """What a :class:`Paper1Setup` takes from these fields, as keywords: ``d, L, sigma2, steps,
        lr``, the :class:`DataConfig` (``data``: its other fields) and the training in ``profile``."""
        return dict(self._asdict(), data=self.data(**data), train=self.train(profile))


def paper1_fields(d, L, sigma2, steps, lr=None, *, d_range=(1, 32), L_range=(1, 256), L_at_least_d=False,
                  sigma2_positive=False, full_rank=False, lr_max=0.1) -> Paper1Fields:
    """Validate a chapter's ``d``, ``L``, ``sigma2``, ``steps`` and ``lr`` in that order (a bad one
    raises ``ValueError`` naming it) within the chapter's bounds: ``d`` and ``L`` in their ranges
    (``L_at_least_d``: ``L >= d`` too), ``sigma2`` in ``[0, 10]`` (``(0, 10]`` with
    ``sigma2_positive``; ``full_rank``: ``sigma2 > 0`` when ``L < d``, where the Bayes reference,
    ridge, needs ``X^T X`` invertible), ``steps`` in ``[1, 500000]`` (the paper's, hours on a
    CPU) and Adam's ``lr`` in ``(0, lr_max]``, each ``None`` for the profile's."""
    d = check_int("d", d, *d_range)
    L = check_int("L", L, max(L_range[0], d) if L_at_least_d else L_range[0], L_range[1])
    sigma2 = check_float("sigma2", sigma2, 0.0, 10.0, lo_open=sigma2_positive)
    if full_rank and sigma2 == 0 and L < d:
        fail("sigma2", sigma2, f"sigma2 > 0 when L < d (here L={L}, d={d})")
    steps = None if steps is None else check_int("steps", steps, 1, 500_000)
    lr = None if lr is None else check_float("lr", lr, 0.0, lr_max, lo_open=True)
    return Paper1Fields(d, L, sigma2, steps, lr)


@dataclass(frozen=True)
class Paper1Setup(ChapterSetup):
    """The setup of a chapter that trains paper 1's models (chapters 1-3 and 5-7): the chapter's
    profile, seed and device (:class:`~icl_lib.setups.base.ChapterSetup`), its validated
    :class:`Paper1Fields` (``lr``: ``None`` for the profile's, always so in chapter 1) and the
    :class:`DataConfig` and :class:`TrainConfig` built from them.  A subclass builds itself by
    keyword, these fields with ``**fields.setup(profile, ...)``."""

    d: int
    L: int
    sigma2: float
    steps: int | None
    lr: float | None
    data: DataConfig
    train: TrainConfig
