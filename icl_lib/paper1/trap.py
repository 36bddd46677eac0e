"""The single-sign trap: how often two-head training misses the positive/negative pattern, on what
that depends, which seeds, and why (chapter 9).

Paper 1 says the positive/negative pattern forms "despite random initializations" and
"consistently" (Sections 3 and 4.2), from "a small initialization" (Stage I), and that a two-head
model has "at least one positive head and one negative head" (C.1).  A run that ends with every
live head of one sign is a kernel regressor at the single head's loss: the *trap*.  This module
declares the sweep that measures it and reads its runs.

* :class:`TrapSweep` -- the cells (head count, initial scale, Adam rate) and their seeds: every
  head count at the paper's rate over the initial scales, and the two-head model also at the other
  rates; the paper's cell and the smallest scale of every head count get ``anchor_seeds`` seeds
  (enough for an exact interval to clear 0.9 when every seed reaches the pattern), the others
  ``seeds``.  The seeds start at ``seed`` (the other chapters use seeds below 100), and every cell
  uses the same seeds, so that a seed's initialisation at scale ``g`` is ``g`` times its
  initialisation at scale 1 (:meth:`AttentionEnsemble.reset_parameters`).
* :data:`STEPS` -- the training horizon by profile: the stored 500,000-step runs of chapter 2 settle
  their outcome long before it (:func:`settled_step`), so the sweep trains to that horizon with
  margin instead of 500,000 steps.

The cells are :class:`~icl_lib.paper1.phase.Cell` objects of chapter 9's grid and train through
:func:`~icl_lib.paper1.phase.train_grid` (one call of the engine, cached and stored per run).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..config import RunSpec, TrainConfig
from ..engine.profiles import train_config
from ..validate import check_choice, check_float_list, check_int, check_int_list, fail
from .phase import Cell, grid_specs

__all__ = ["TrapSweep", "STEPS", "SWEEP", "FIRST_SEED", "trap_sweep", "trap_specs", "horizon_config"]

STEPS = {"quick": 6_000, "paper": 20_000}  # the horizon: Adam steps of every run of the sweep
FIRST_SEED = 1000  # the sweep's first seed: fresh (the other chapters use seeds below 100)
# the sweep by profile: head counts, initial scales (first: PyTorch's default), Adam rates (first:
# the paper's 1e-3), seeds per cell, seeds of the anchor cells
SWEEP = {
    "quick": dict(heads=(2, 3), init_scales=(1.0, 0.1), lrs=(1e-3, 3e-3), seeds=8, anchor_seeds=16),
    "paper": dict(heads=(2, 3, 4), init_scales=(1.0, 0.3, 0.1, 0.03), lrs=(1e-3, 3e-3), seeds=24,
                  anchor_seeds=48),
}
D, L, SIGMA2 = 5, 40, 0.1  # paper 1's setting (Section 2)


@dataclass(frozen=True)
class TrapSweep:
    """The trap sweep's cells and seeds (chapter 9), validated by parameter name.

    ``heads`` (H in [2, 8]) train at ``lrs[0]`` over every initial scale; ``lr_heads`` (one of
    ``heads``) also at every other rate.  The first initial scale and the first rate are the
    paper's (PyTorch's default, 1e-3); the anchor cells -- ``lrs[0]`` at the first and the last
    initial scale, every head count -- train ``anchor_seeds`` seeds, the others ``seeds``.
    """

    heads: tuple = (2, 3, 4)
    init_scales: tuple = (1.0, 0.3, 0.1, 0.03)
    lrs: tuple = (1e-3, 3e-3)
    seeds: int = 24
    anchor_seeds: int = 48
    lr_heads: int = 2

    def __post_init__(self):
        heads = check_int_list("heads", self.heads, 2, 8, max_len=7)
        scales = check_float_list("init_scales", self.init_scales, 0.0, 10.0, lo_open=True, max_len=8)
        lrs = check_float_list("lrs", self.lrs, 0.0, 0.1, lo_open=True, max_len=8)
        for name, values in (("heads", heads), ("init_scales", scales), ("lrs", lrs)):
            if len(set(values)) != len(values):
                fail(name, list(values), "a list of distinct values")
        object.__setattr__(self, "heads", tuple(heads))
        object.__setattr__(self, "init_scales", tuple(scales))
        object.__setattr__(self, "lrs", tuple(lrs))
        object.__setattr__(self, "seeds", check_int("seeds", self.seeds, 2, 1024))
        object.__setattr__(self, "anchor_seeds", check_int("anchor_seeds", self.anchor_seeds, self.seeds, 4096))
        if self.lr_heads not in self.heads:
            fail("lr_heads", self.lr_heads, f"one of heads {list(self.heads)}")

    def cell(self, H: int, init_scale: float | None = None, lr: float | None = None) -> Cell:
        """The cell of ``H`` heads at ``init_scale`` and ``lr`` (default: the paper's, the first)."""
        g = self.init_scales[0] if init_scale is None else init_scale
        return Cell(H, D, L, SIGMA2, self.lrs[0] if lr is None else lr, g)

    def anchors(self) -> list[Cell]:
        """The cells with ``anchor_seeds`` seeds: the paper's rate at the first and last scale."""
        ends = dict.fromkeys((self.init_scales[0], self.init_scales[-1]))
        return [self.cell(H, g) for H in self.heads for g in ends]

    def plan(self) -> dict[Cell, int]:
        """``{cell: seeds}``: every head count at the first rate over the scales, then the other
        rates for ``lr_heads``; head counts in order."""
        anchors = set(self.anchors())
        out = {}
        for H in self.heads:
            for lr in (self.lrs if H == self.lr_heads else self.lrs[:1]):
                for g in self.init_scales:
                    c = self.cell(H, g, lr)
                    out[c] = self.anchor_seeds if c in anchors else self.seeds
        return out


def trap_sweep(profile: str, **overrides) -> TrapSweep:
    """The profile's sweep (:data:`SWEEP`) with ``overrides`` whose value is not ``None``."""
    check_choice("profile", profile, ("quick", "paper"))
    return TrapSweep(**{**SWEEP[profile], **{k: v for k, v in overrides.items() if v is not None}})


def horizon_config(profile: str, steps: int | None = None) -> TrainConfig:
    """The training of chapter 9's runs: the profile's Adam and batch (:func:`train_config`) for
    ``steps`` (default :data:`STEPS`), 160 logged points and 2,048 validation prompts (the cells
    set their own rate); the trap sweep and the grid share it, so that they share runs."""
    steps = STEPS[check_choice("profile", profile, ("quick", "paper"))] if steps is None else check_int(
        "steps", steps, 100, 500_000)
    return dataclasses.replace(train_config(profile, steps=steps), n_log=160, val_size=2048)


def trap_specs(sweep: TrapSweep, profile: str, seed: int = FIRST_SEED, steps: int | None = None) -> list[RunSpec]:
    """Every run of ``sweep``: seeds ``seed, seed + 1, ...`` per cell, :func:`horizon_config` at
    the cell's rate."""
    return grid_specs(sweep.plan(), seed, horizon_config(profile, steps))
