"""Experiments shared between chapters, defined once so that their runs share the run cache.

:func:`heads_sweep` trains models with H heads for every H in ``heads`` and ``seeds`` seeds each,
as one ensemble (paper 1, Section 3: H = 1, 2, 3, 4).  Chapter 2 (patterns), chapter 3 (their
dynamics) and chapter 5 (what the trained models compute) call it with the same defaults and so
reuse each other's trained models.
"""

from __future__ import annotations

import numbers
from typing import Sequence

from ..config import DataConfig, ModelConfig, RunSpec, TrainConfig
from ..engine import Run, train
from ..validate import check_int

__all__ = ["as_heads", "heads_sweep_specs", "heads_sweep"]


def as_heads(heads: int | Sequence[int]) -> list[int]:
    """A chapter's ``heads`` parameter (one int or a list, e.g. from papermill ``-p heads 3``) as a
    validated, de-duplicated, sorted list."""
    if isinstance(heads, numbers.Real) and not isinstance(heads, bool):
        heads = [heads]
    if not isinstance(heads, (list, tuple)) or not heads:
        raise ValueError(f"heads={heads!r} is invalid: accepted a positive integer or a non-empty list of them")
    return sorted({check_int("heads", h, 1, 256) for h in heads})


def heads_sweep_specs(
    heads: int | Sequence[int], seeds: int, seed: int, data: DataConfig, train_cfg: TrainConfig, **model_kw
) -> list[RunSpec]:
    """One :class:`RunSpec` per (H, k) with run seed ``seed + k``, ``k < seeds``, ordered by H then k."""
    seeds = check_int("seeds", seeds, 1, 10_000)
    seed = check_int("seed", seed, 0)
    return [
        RunSpec(data=data, model=ModelConfig(heads=H, **model_kw), train=train_cfg, seed=seed + k)
        for H in as_heads(heads)
        for k in range(seeds)
    ]


def heads_sweep(
    heads: int | Sequence[int],
    seeds: int,
    seed: int,
    data: DataConfig,
    train_cfg: TrainConfig,
    device: str = "auto",
    **model_kw,
) -> dict[int, list[Run]]:
    """Train (or load) the sweep; returns ``{H: [runs for seeds seed, seed+1, ...]}``."""
    specs = heads_sweep_specs(heads, seeds, seed, data, train_cfg, **model_kw)
    runs = train(specs, device=device)
    out: dict[int, list[Run]] = {}
    for s, r in zip(specs, runs):
        out.setdefault(s.model.heads, []).append(r)
    return out
