"""Where each solution emerges: a grid over heads, shape, noise and optimiser (chapter 9).

Paper 1 trains a handful of hand-picked settings (d = 5, L = 40, H = 1..4, one seed each).  This
module declares and trains a grid of *cells* -- a head count H, a covariate dimension d, a context
length L, a noise level sigma^2, an Adam learning rate and an initial scale
(:attr:`ModelConfig.init_scale`) -- with many seeds per cell; :mod:`icl_lib.paper1.phase_diagram.outcomes`
reads every run with the rules the book already uses.

The grid (:class:`PhaseGrid`) is a list of values per axis (:data:`AXES`) -- head counts,
``(d, L)`` shapes (pairs, so that the proportional line d / L = const is a choice of shapes), noise
levels, rates and initial scales -- whose first entries form the *centre*.  :meth:`PhaseGrid.plan`
gives each cell (:class:`Cell`) its number of seeds: the ``paper`` profile trains the full
Cartesian product; the ``quick`` profile a slice (every head count at the centre with many seeds,
and for one head count, ``trap_heads`` = 2 by default, every other value of one axis at a time with
fewer seeds).  The training is the profile's (:func:`~icl_lib.engine.train_config`, rates
:func:`profile_lrs`), so that the centre's runs are chapter 2's and the proportional shapes' runs
chapter 5's: the run cache serves them.  :func:`grid_specs` lists the runs, :func:`train_grid`
trains them in one call of the engine, and :func:`projected_seconds` projects the time of a grid
from a measured training rate (:data:`H200_RATE`).

Used by chapter 9 (also for the trap sweep of :mod:`icl_lib.paper1.phase_diagram.trap`) and by the book's
training plan (:mod:`icl_lib.book.plan`).
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from typing import Mapping, Sequence

from ...config import DataConfig, ModelConfig, RunSpec, TrainConfig
from ...engine import Run, train
from ...estimators import optimal_eta_debiased
from ...validate import check_choice, check_float, check_float_list, check_int, check_int_list, fail, literal_list

__all__ = [
    "AXES",
    "LRS",
    "GRID_SEEDS",
    "Cell",
    "PhaseGrid",
    "profile_lrs",
    "profile_grid",
    "AXIS_VALUES",
    "grid_specs",
    "train_grid",
    "projected_seconds",
    "projected_grid_seconds",
    "H200_RATE",
]

AXES = ("H", "d", "L", "sigma2", "lr", "init_scale")  # the grid's axes, as the tables name them
LRS = {"quick": (1e-3, 3e-3, 1e-2), "paper": (1e-3, 3e-4, 3e-3, 1e-2, 3e-2)}  # Adam rates: the paper's first
GRID_SEEDS = {"quick": (12, 4), "paper": (64, 64)}  # (head-axis seeds, seeds of the other cells) by profile
# The grid's axes by profile (the first value of each: paper 1's setting, the centre).  The paper
# profile's slice walks out of the centre along one axis at a time, 64 seeds a cell: d at a fixed
# L / d = 8 (d = 3 to 10), L at d = 5 (10 to 80), d at L = 40 and L at d = 8, the noise, the Adam
# rate and the initial scale; the quick profile's is a few cells of each.
AXIS_VALUES = {
    "quick": dict(heads=(1, 2, 3, 4, 5), shapes=((5, 40), (8, 16), (8, 32), (8, 64), (3, 40)), sigma2s=(0.1, 0.5),
                  init_scales=(1.0, 0.1)),
    "paper": dict(heads=(1, 2, 3, 4, 5),
                  shapes=((5, 40), (3, 24), (4, 32), (6, 48), (8, 64), (10, 80), (5, 10), (5, 20), (5, 30), (5, 60),
                          (5, 80), (3, 40), (8, 40), (8, 16), (8, 32)),
                  sigma2s=(0.1, 0.0, 0.02, 0.05, 0.5, 1.0), init_scales=(1.0, 0.03, 0.1, 0.3, 3.0)),
}
FULL_SEEDS = 16  # seeds per cell of the full grid (a cluster's: :meth:`PhaseGrid.full`)
MAX_RUNS = 50_000  # the most runs one grid may ask for
# The engine's rate on one NVIDIA H200 with CUDA graphs (model-steps/s, ensemble of 256 models at
# d = 5, L = 40, torch 2.11.0+cu130; the engine page): what projected_seconds projects the full grid from.
H200_RATE = 184_813


# ------------------------------------------------------------------------------------ the grid
@dataclass(frozen=True)
class Cell:
    """One point of the grid: H heads, shape (d, L), noise sigma2, Adam rate lr, init scale."""

    H: int
    d: int
    L: int
    sigma2: float
    lr: float
    init_scale: float

    @property
    def eta_star(self) -> float:
        """Theorem 4.2 (ii)'s optimal debiased-GD rate ``1 / (1 + (1 + sigma^2) d / L)``."""
        return optimal_eta_debiased(self.d, self.L, self.sigma2)

    def data(self) -> DataConfig:
        return DataConfig(d=self.d, L=self.L, sigma2=self.sigma2)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _distinct(name: str, values: tuple) -> tuple:
    if len(set(values)) != len(values):
        fail(name, list(values), "a list of distinct values")
    return values


def _shapes(values) -> tuple:
    """``[[d, L], ...]`` (or its text) as a tuple of ``(d, L)`` pairs, each checked by name."""
    values = literal_list("shapes", values)
    if not isinstance(values, (list, tuple)) or not 1 <= len(values) <= 16:
        fail("shapes", values, "a list of 1 to 16 pairs [d, L]")
    out = []
    for i, pair in enumerate(values):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            fail(f"shapes[{i}]", pair, "a pair [d, L]")
        out.append((check_int(f"shapes[{i}][0]", pair[0], 1, 16), check_int(f"shapes[{i}][1]", pair[1], 2, 128)))
    return tuple(out)


@dataclass(frozen=True)
class PhaseGrid:
    """The grid's values per axis; the first value of each list is the grid's centre (chapter 9).

    ``shapes`` are ``(d, L)`` pairs (so that a line d / L = const, the proportional regime, is a
    choice of pairs).  Validated at construction, each list by its parameter's name (``heads``,
    ``shapes``, ``sigma2s``, ``lrs``, ``init_scales``; at most 8 values each, 16 shapes): H in
    [1, 8], d in [1, 16], L in [2, 128], sigma^2 in [0, 10], lr in (0, 0.1], init scale in (0, 10].
    """

    heads: tuple
    shapes: tuple
    sigma2s: tuple
    lrs: tuple
    init_scales: tuple

    def __post_init__(self):
        checks = {
            "heads": lambda v: check_int_list("heads", v, 1, 8, max_len=8),
            "shapes": _shapes,
            "sigma2s": lambda v: check_float_list("sigma2s", v, 0.0, 10.0, max_len=8),
            "lrs": lambda v: check_float_list("lrs", v, 0.0, 0.1, lo_open=True, max_len=8),
            "init_scales": lambda v: check_float_list("init_scales", v, 0.0, 10.0, lo_open=True, max_len=8),
        }
        for name, check in checks.items():
            object.__setattr__(self, name, _distinct(name, check(getattr(self, name))))

    @property
    def centre(self) -> dict:
        """The first value of every axis, keyed as :data:`AXES` (``H`` is ``heads[0]``)."""
        (d, L) = self.shapes[0]
        return dict(zip(AXES, (self.heads[0], d, L, self.sigma2s[0], self.lrs[0], self.init_scales[0])))

    def full(self) -> list[Cell]:
        """Every combination of the axes' values (the ``paper`` profile), H varying slowest."""
        return [Cell(H, d, L, s, lr, g) for H, (d, L), s, lr, g in
                itertools.product(self.heads, self.shapes, self.sigma2s, self.lrs, self.init_scales)]

    def head_axis(self) -> list[Cell]:
        """Every head count at the centre's shape, noise, rate and scale."""
        c = self.centre
        return [Cell(H, c["d"], c["L"], c["sigma2"], c["lr"], c["init_scale"]) for H in self.heads]

    def slice(self, trap_heads: int = 2) -> list[Cell]:
        """The slice both profiles train: :meth:`head_axis`, then, for ``H = trap_heads``, each
        other value of one axis with every other axis at the centre: the other shapes, sigma^2, lr
        and initial scale.  ``trap_heads`` must be one of ``heads``."""
        trap_heads = check_int("trap_heads", trap_heads, 1, 8)
        if trap_heads not in self.heads:
            fail("trap_heads", trap_heads, f"one of heads {list(self.heads)}")
        t = dataclasses.replace(self.head_axis()[0], H=trap_heads)
        cells = self.head_axis()
        cells += [dataclasses.replace(t, d=d, L=L) for d, L in self.shapes[1:]]
        cells += [dataclasses.replace(t, sigma2=s) for s in self.sigma2s[1:]]
        cells += [dataclasses.replace(t, lr=lr) for lr in self.lrs[1:]]
        cells += [dataclasses.replace(t, init_scale=g) for g in self.init_scales[1:]]
        return list(dict.fromkeys(cells))

    def plan(self, profile: str, seeds: int | None = None, slice_seeds: int | None = None,
             trap_heads: int = 2) -> dict[Cell, int]:
        """``{cell: number of seeds}`` of a profile's :meth:`slice`: the head axis with ``seeds``
        each and the other cells with ``slice_seeds``.  ``None``: the profile's (:data:`GRID_SEEDS`:
        quick 12 and 4, paper 8 and 8, so that every cell of the paper profile can decide the
        every-cell claims).  :meth:`full_plan` is the full grid."""
        check_choice("profile", profile, ("quick", "paper"))
        seeds = GRID_SEEDS[profile][0] if seeds is None else check_int("seeds", seeds, 1, 256)
        slice_seeds = GRID_SEEDS[profile][1] if slice_seeds is None else check_int("slice_seeds", slice_seeds, 1, 256)
        axis = set(self.head_axis())
        return {c: seeds if c in axis else slice_seeds for c in self.slice(trap_heads)}

    def full_plan(self, seeds: int = FULL_SEEDS) -> dict[Cell, int]:
        """``{cell: seeds}`` of the full grid (:meth:`full`, ``seeds`` each): a cluster's work
        (``train-plan --executor dask``), projected by :func:`projected_seconds`."""
        return {c: check_int("seeds", seeds, 1, 256) for c in self.full()}


def profile_lrs(profile: str, lrs=None) -> tuple:
    """The Adam rates of the grid: ``lrs``, or the profile's (:data:`LRS`; the first is the
    profile's own rate, so that the centre's runs are those of chapters 2 and 5)."""
    check_choice("profile", profile, ("quick", "paper"))
    return LRS[profile] if lrs is None else lrs


def profile_grid(profile: str, heads=None, shapes=None, sigma2s=None, lrs=None, init_scales=None) -> PhaseGrid:
    """The profile's grid (:data:`AXIS_VALUES`, :func:`profile_lrs`) with the given axes in place of
    its own (``None``: the profile's)."""
    own = AXIS_VALUES[check_choice("profile", profile, ("quick", "paper"))]
    given = dict(heads=heads, shapes=shapes, sigma2s=sigma2s, init_scales=init_scales)
    axes = {k: own[k] if v is None else v for k, v in given.items()}
    return PhaseGrid(axes["heads"], axes["shapes"], axes["sigma2s"], profile_lrs(profile, lrs), axes["init_scales"])


def grid_specs(plan: Mapping[Cell, int], seed: int, train_cfg: TrainConfig) -> list[RunSpec]:
    """One :class:`RunSpec` per cell of ``plan`` (:meth:`PhaseGrid.plan`) and seed ``seed + k``
    (``k`` below the cell's number of seeds), cell by cell: the cell's data, heads and initial
    scale, ``train_cfg`` with the cell's learning rate.  Every cell uses the same first seeds, so
    cells of one shape and noise level see the same training prompts, and the centre's runs are
    chapter 2's (and the shapes of chapter 5's proportional regime its runs)."""
    counts = [check_int("seeds", k, 1, 256) for k in plan.values()]
    seed = check_int("seed", seed, 0, 2**62 - max(counts, default=1))
    if sum(counts) > MAX_RUNS:
        fail("seeds", max(counts), f"at most {MAX_RUNS} runs in all (here {sum(counts)} in {len(counts)} cells)")
    return [RunSpec(data=c.data(), model=ModelConfig(heads=c.H, init_scale=c.init_scale),
                    train=dataclasses.replace(train_cfg, lr=c.lr), seed=seed + k)
            for c, n in plan.items() for k in range(n)]


def train_grid(plan: Mapping[Cell, int], seed: int, train_cfg: TrainConfig, execution) -> dict[Cell, list[Run]]:
    """Train (or load) every run of the grid in one :func:`icl_lib.train` call, which packs runs
    of one shape and training configuration into ensembles; the specs are passed ordered by head
    count, so that an ensemble pads few heads.  ``execution``: where they train, resolved already
    (a chapter setup's :class:`~icl_lib.engine.execution.Execution`).  Returns ``{cell: [runs in seed order]}``."""
    specs = grid_specs(plan, seed, train_cfg)
    order = sorted(range(len(specs)), key=lambda i: specs[i].model.heads)
    runs_sorted = train([specs[i] for i in order], execution=execution)
    runs: list = [None] * len(specs)
    for i, r in zip(order, runs_sorted):
        runs[i] = r
    out, k = {}, 0
    for c, n in plan.items():
        out[c] = runs[k:k + n]
        k += n
    return out


# ------------------------------------------------------------------------------------ projection
def projected_seconds(specs: Sequence[RunSpec], rate: float, d: int = 5, L: int = 40) -> float:
    """Seconds to train ``specs`` at ``rate`` model-steps per second measured at shape ``(d, L)``,
    scaling each run's steps by ``(L' + 1)(d' + 1) / ((L + 1)(d + 1))``: the numbers drawn per
    step (the sampling that dominates a GPU step at large ensembles), the rest of a step taken to
    scale alike.  A projection from a measured rate, not a measurement."""
    rate = check_float("rate", rate, 0.0, lo_open=True)
    ref = (L + 1) * (d + 1)
    return sum(s.train.steps * (s.data.L + 1) * (s.data.d + 1) / ref for s in specs) / rate


def projected_grid_seconds(plan: Mapping[Cell, int], train_cfg: TrainConfig, rate: float, d: int = 5,
                           L: int = 40) -> float:
    """:func:`projected_seconds` of a grid's plan ``{cell: seeds}`` trained with ``train_cfg``,
    computed from the cells' counts without listing the runs (a full grid may hold more runs than
    :func:`grid_specs` lists at once)."""
    rate = check_float("rate", rate, 0.0, lo_open=True)
    ref = (L + 1) * (d + 1)
    return sum(n * train_cfg.steps * (c.L + 1) * (c.d + 1) / ref for c, n in plan.items()) / rate
