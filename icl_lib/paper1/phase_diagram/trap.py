"""The single-sign trap: how often two-head training misses the positive/negative pattern, on what
that depends, which seeds, and why (chapter 9).

Paper 1 says the positive/negative pattern forms "despite random initializations" and
"consistently" (Sections 3 and 4.2), from "a small initialization" (Stage I), and that a two-head
model has "at least one positive head and one negative head" (C.1).  A run that ends with every
live head of one sign is a kernel regressor at the single head's loss: the *trap*.  This module
declares the sweep that measures it and reads its runs.

* :class:`TrapSweep` -- the cells (head count, initial scale, Adam rate) and their seeds: every
  head count at the paper's rate over the initial scales, and the two-head model also at the other
  rates; the anchor cells -- the paper's rate at the first and the smallest scale of every head
  count, and the two-head model's first scale at the other rates -- get ``anchor_seeds`` seeds
  (in the paper profile enough to decide "consistently" and the comparisons between anchors at
  the rates the sweep measures), the others ``seeds``.  The seeds start at ``seed`` (the other chapters use seeds below 100), and every cell
  uses the same seeds, so that a seed's initialisation at scale ``g`` is ``g`` times its
  initialisation at scale 1 (:meth:`AttentionEnsemble.reset_parameters`).
* :data:`STEPS` -- the training horizon by profile: the stored 500,000-step runs of chapter 2 settle
  their outcome long before it (:func:`settled_step`), so the sweep trains to that horizon with
  margin instead of 500,000 steps.

The cells are :class:`~icl_lib.paper1.phase_diagram.grid.Cell` objects of chapter 9's grid and train through
:func:`~icl_lib.paper1.phase_diagram.grid.train_grid` (one call of the engine, cached and stored per run).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from scipy import stats as sps

from ...circuits import mu_of, omega_of
from ...config import DataConfig, RunSpec, TrainConfig
from ...engine.profiles import train_config
from ...engine.run import Run, stack_models
from ...estimators import model_risk
from ...seeding import content_seed
from ...engine.store import RunStore
from ...stats import LEVEL, Estimate, fraction_diff, proportion_ci
from ...validate import check_choice, check_float_list, check_int, check_int_list, fail
from .grid import Cell, grid_specs
from .outcomes import outcome_codes
from ..seed_ranges import first_seed
from ..sweeps import heads_sweep_specs

__all__ = ["TrapSweep", "STEPS", "SWEEP", "TRAP_SEED", "trap_sweep", "trap_specs", "horizon_config", "run_outcome",
           "run_outcomes", "select", "pattern_rate", "pattern_rates", "trap_given", "rank_auc", "settled_steps",
           "stored_long_runs", "summary", "anchor_plan", "anchor_specs", "longer_plan",
           "longer_specs", "LONGER", "continued_specs", "left_by", "test_losses"]

STEPS = {"quick": 6_000, "paper": 20_000}  # the horizon: Adam steps of every run of the sweep
TRAP_SEED = first_seed("trap")  # the sweep's first seed: fresh (:data:`~icl_lib.paper1.seed_ranges.SEED_RANGES`)
# the sweep by profile: head counts, initial scales (first: PyTorch's default), Adam rates (first:
# the paper's 1e-3), seeds per cell, seeds of the anchor cells
SWEEP = {
    "quick": dict(heads=(2, 3), init_scales=(1.0, 0.1), lrs=(1e-3, 3e-3), seeds=8, anchor_seeds=16),
    "paper": dict(heads=(2, 3, 4), init_scales=(1.0, 0.3, 0.1, 0.03), lrs=(1e-3, 3e-3), seeds=64,
                  anchor_seeds=128),
}
D, L, SIGMA2 = 5, 40, 0.1  # paper 1's setting (Section 2)


@dataclass(frozen=True)
class TrapSweep:
    """The trap sweep's cells and seeds (chapter 9), validated by parameter name.

    ``heads`` (H in [2, 8]) train at ``lrs[0]`` over every initial scale; ``lr_heads`` (one of
    ``heads``, default the first) also at every other rate.  The first initial scale and the first rate are the
    paper's (PyTorch's default, 1e-3); the anchor cells -- ``lrs[0]`` at the first and the last
    initial scale, every head count, and ``lr_heads`` at the first scale and every other rate --
    train ``anchor_seeds`` seeds, the others ``seeds``.
    """

    heads: tuple = (2, 3, 4)
    init_scales: tuple = (1.0, 0.3, 0.1, 0.03)
    lrs: tuple = (1e-3, 3e-3)
    seeds: int = 24
    anchor_seeds: int = 48
    lr_heads: int | None = None  # None: heads[0]

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
        if self.lr_heads is None:
            object.__setattr__(self, "lr_heads", self.heads[0])
        if self.lr_heads not in self.heads:
            fail("lr_heads", self.lr_heads, f"one of heads {list(self.heads)}")

    def cell(self, H: int, init_scale: float | None = None, lr: float | None = None) -> Cell:
        """The cell of ``H`` heads at ``init_scale`` and ``lr`` (default: the paper's, the first)."""
        g = self.init_scales[0] if init_scale is None else init_scale
        return Cell(H, D, L, SIGMA2, self.lrs[0] if lr is None else lr, g)

    def anchors(self) -> list[Cell]:
        """The cells with ``anchor_seeds`` seeds: the paper's rate at the first and last scale,
        every head count, then ``lr_heads`` at the first scale and every other rate."""
        ends = dict.fromkeys((self.init_scales[0], self.init_scales[-1]))
        return ([self.cell(H, g) for H in self.heads for g in ends]
                + [self.cell(self.lr_heads, None, lr) for lr in self.lrs[1:]])

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


# The horizon checked on longer runs: four corner cells of the grid (two heads: d = 10 and L = 80;
# Adam's rate 3e-2; initial scale 0.03; sigma^2 = 1), a few seeds each, trained LONGER times the
# horizon; chosen before the grid's cells were trained.
LONGER = 5
LONGER_SEEDS = {"quick": 2, "paper": 8}


def longer_plan(profile: str) -> dict[Cell, int]:
    """``{cell: seeds}`` of the longer runs (:data:`LONGER`, :data:`LONGER_SEEDS`)."""
    n = LONGER_SEEDS[check_choice("profile", profile, ("quick", "paper"))]
    c = Cell(2, D, L, SIGMA2, 1e-3, 1.0)
    cells = [dataclasses.replace(c, d=10, L=80), dataclasses.replace(c, lr=3e-2),
             dataclasses.replace(c, init_scale=0.03), dataclasses.replace(c, sigma2=1.0)]
    return {cell: n for cell in cells}


def longer_specs(profile: str, seed: int = TRAP_SEED, steps: int | None = None) -> list[RunSpec]:
    """The runs of :func:`longer_plan`: :data:`LONGER` times the horizon, from seed ``seed``."""
    horizon = horizon_config(profile, steps)
    longer = dataclasses.replace(horizon, steps=LONGER * horizon.steps)
    return grid_specs(longer_plan(profile), seed, longer)


def continued_specs(sweep: TrapSweep, profile: str, seed: int = TRAP_SEED, steps: int | None = None) -> list[RunSpec]:
    """The two-head anchor cell at paper 1's setting (``sweep.lr_heads`` heads, its first rate and
    scale, ``anchor_seeds`` seeds) trained :data:`LONGER` times the horizon: Adam continued from
    every end point of the cell, trapped or not (a run's first ``horizon`` steps are the stored
    anchor's own)."""
    horizon = horizon_config(profile, steps)
    longer = dataclasses.replace(horizon, steps=LONGER * horizon.steps)
    return grid_specs({sweep.cell(sweep.lr_heads): sweep.anchor_seeds}, seed, longer)


def trap_specs(sweep: TrapSweep, profile: str, seed: int = TRAP_SEED, steps: int | None = None) -> list[RunSpec]:
    """Every run of ``sweep``: seeds ``seed, seed + 1, ...`` per cell, :func:`horizon_config` at
    the cell's rate."""
    return grid_specs(sweep.plan(), seed, horizon_config(profile, steps))


# ------------------------------------------------------------------------------------ the runs' outcomes
def run_outcome(run: Run) -> dict:
    """One run's row: its seed, whether it ends in the positive/negative pattern (``pattern``: the
    outcome ``pos/neg`` of :func:`~icl_lib.paper1.phase_diagram.outcomes.outcome_codes`, chapter 2's rules; anything
    else -- single-sign, or circuits not of the form (3.1) -- is the trap), its raw outcome, the step
    from which that binary outcome no longer changes (``settled``), the outcome at half the horizon
    (``pattern at half``), and the initialisation's predictors: whether
    every ``mu_h`` at step 0 has one sign (``same sign``) and the off-diagonal KQ mass relative to
    the diagonal at step 0, pooled over the heads (``KQ off/diag``), with ``omega0``, ``mu0``."""
    h, d = run.history, run.d
    out, _ = outcome_codes(h["KQ"], h["OV"], d)
    steps = h["step"].numpy()
    pattern = out == "pos/neg"
    changed = np.nonzero(pattern != pattern[-1])[0]
    settled = int(steps[changed[-1] + 1]) if len(changed) else int(steps[0])
    half = max(int(np.searchsorted(steps, steps[-1] / 2, side="right")) - 1, 0)
    KQ0, OV0 = h["KQ"][0].double(), h["OV"][0].double()
    w0, m0 = omega_of(KQ0, d).numpy(), mu_of(OV0, d).numpy()
    off2, diag2 = (KQ0[:, :, :d].pow(2).sum((-1, -2)) - KQ0[:, :d, :d].diagonal(dim1=-2, dim2=-1).pow(2).sum(-1),
                   KQ0[:, :d, :d].diagonal(dim1=-2, dim2=-1).pow(2).sum(-1))
    return {"seed": run.spec.seed, "pattern": bool(pattern[-1]), "outcome": str(out[-1]), "settled": settled,
            "pattern at half": bool(pattern[half]),
            "same sign": bool((m0 > 0).all() or (m0 < 0).all()),
            "KQ off/diag": float(math.sqrt(off2.sum() / diag2.sum())), "omega0": w0, "mu0": m0}


TEST_PROMPTS = 2048  # the shared test prompts of a run's final loss in chapter 9's tables


def test_losses(runs: Sequence[Run], n: int = TEST_PROMPTS) -> np.ndarray:
    """Each run's final ICL loss on ``n`` test prompts drawn on the CPU from a seed that depends on
    its task only (:func:`~icl_lib.seeding.content_seed`): one test set per task whatever device
    trained a run, where a stored history's validation loss was drawn on that device."""
    runs = list(runs)
    out = np.empty(len(runs))
    groups: dict = {}
    for k, r in enumerate(runs):
        groups.setdefault(json.dumps(r.spec.to_dict()["data"], sort_keys=True), []).append(k)
    for key, idx in groups.items():
        data = runs[idx[0]].spec.data
        model = stack_models([runs[k] for k in idx], dtype=torch.float64)
        mean, _ = model_risk(model, data, n=n, seed=content_seed({"data": json.loads(key), "test": n}))
        out[idx] = mean.numpy()
    return out


def run_outcomes(runs: Mapping[Cell, Sequence[Run]], losses: bool = True) -> pd.DataFrame:
    """One row per run (:func:`run_outcome`) with its cell's ``H``, ``lr``, ``init_scale``, ``d``,
    ``L`` and ``sigma2``, and its ``test loss`` (:func:`test_losses`; NaN without ``losses``)."""
    flat = [(c, r) for c, rs in runs.items() for r in rs]
    losses = test_losses([r for _, r in flat]) if losses else np.full(len(flat), np.nan)
    return pd.DataFrame([{"H": c.H, "lr": c.lr, "init_scale": c.init_scale, "d": c.d, "L": c.L, "sigma2": c.sigma2,
                          **run_outcome(r), "test loss": float(e)} for (c, r), e in zip(flat, losses)])


def left_by(run: Run, horizon: int) -> dict:
    """Whether a run is in the pattern at the last logged step at or before ``horizon`` and at its
    end (Adam continued past the horizon: chapter 9's stationarity)."""
    h, d = run.history, run.d
    out, _ = outcome_codes(h["KQ"], h["OV"], d)
    steps = h["step"].numpy()
    k = max(int(np.searchsorted(steps, horizon, side="right")) - 1, 0)
    return {"H": run.spec.model.heads, "seed": run.spec.seed, "steps": int(steps[-1]),
            "pattern at horizon": bool(out[k] == "pos/neg"), "pattern at end": bool(out[-1] == "pos/neg")}


def select(models: pd.DataFrame, H: int, lr: float, init_scale: float) -> pd.DataFrame:
    """The rows of one cell."""
    return models[(models.H == H) & np.isclose(models.lr, lr) & np.isclose(models.init_scale, init_scale)]


def pattern_count(models: pd.DataFrame) -> int:
    """How many of ``models`` end in the pattern (chapter 9's sweep counts)."""
    return int(models.pattern.sum())


def trap_count(models: pd.DataFrame) -> int:
    """How many of ``models`` do not end in the pattern: the trapped seeds."""
    return int((~models.pattern).sum())


def pattern_rate(models: pd.DataFrame, level: float = LEVEL) -> Estimate:
    """The fraction of ``models`` that end in the pattern, with its exact interval."""
    return proportion_ci(int(models.pattern.sum()), len(models), level)


def pattern_rates(models: pd.DataFrame) -> pd.DataFrame:
    """Per cell: seeds, seeds in the pattern and in the trap (and how many of those end with circuits
    not of the form (3.1), ``unformed``), the pattern's fraction with its exact 95 % interval, the
    median test loss (:func:`test_losses`) of the trapped seeds and of the others."""
    rows = []
    for (H, lr, g), sub in models.groupby(["H", "lr", "init_scale"], sort=False):
        e = pattern_rate(sub)
        trapped = sub[~sub.pattern]
        rows.append({"H": H, "lr": lr, "init": g, "seeds": len(sub), "pattern": int(sub.pattern.sum()),
                     "trap": len(trapped), "of which unformed": int((trapped.outcome == "unformed").sum()),
                     "rate": e.value, "lo": e.lo, "hi": e.hi,
                     "loss (pattern)": float(sub[sub.pattern]["test loss"].median()) if sub.pattern.any() else math.nan,
                     "loss (trap)": float(trapped["test loss"].median()) if len(trapped) else math.nan})
    return pd.DataFrame(rows)


def trap_given(models: pd.DataFrame, column: str) -> Estimate:
    """``P(trap | column) - P(trap | not column)`` over ``models`` (a boolean predictor column read
    from the initialisation), with :func:`~icl_lib.stats.fraction_diff`'s interval."""
    yes, no = models[models[column]], models[~models[column]]
    if not len(yes) or not len(no):
        return Estimate(math.nan, -math.inf, math.inf, LEVEL, f"no seed with {column} {'false' if len(yes) else 'true'}")
    return fraction_diff(int((~yes.pattern).sum()), len(yes), int((~no.pattern).sum()), len(no))


def rank_auc(score: Sequence[float], label: Sequence[bool]) -> float:
    """The probability that a random trapped seed (``label`` true) has a larger ``score`` than a
    random seed in the pattern (ties count half): the area under the ROC curve, 0.5 for no signal."""
    s, y = np.asarray(score, dtype=float), np.asarray(label, dtype=bool)
    if y.all() or not y.any():
        return math.nan
    return float(sps.mannwhitneyu(s[y], s[~y]).statistic / (y.sum() * (~y).sum()))


def settled_steps(runs: Sequence[Run]) -> pd.DataFrame:
    """For stored long runs (chapter 2's 500,000 steps): each run's heads, seed, whether it ends in
    the pattern and the step from which that no longer changes (:func:`run_outcome`'s ``settled``)."""
    losses = test_losses(runs)
    return pd.DataFrame([{"H": r.spec.model.heads, **{k: v for k, v in run_outcome(r).items()
                                                        if k in ("seed", "pattern", "settled")}, "test loss": float(e)}
                         for r, e in zip(runs, losses)])


def stored_long_runs(heads: Sequence[int] = (2, 3, 4), seeds: int = 36) -> dict[int, list[Run]]:
    """Chapter 2's paper-profile runs (500,000 Adam steps, seeds ``0 .. seeds - 1``) of ``heads``
    from the run store, ``{H: [runs]}``; a head count the store does not hold whole is left out
    (nothing is trained)."""
    store = RunStore()
    data = DataConfig(d=D, L=L, sigma2=SIGMA2)
    out = {}
    for H in heads:
        specs = heads_sweep_specs([H], seeds, 0, data, train_config("paper"))
        if all(store.entry(s) is not None for s in specs):
            out[H] = [store.load(s) for s in specs]
    return out


def summary(models: pd.DataFrame, sweep: TrapSweep, claims) -> str:
    """Chapter 9's summary in sentences, from this build's sweep (``models``, :func:`run_outcomes`)
    and the verdicts its ``claims`` recorded: per head count the pattern's rate at the paper's
    setting (decided in chapter 2) and at the smallest initial scale, then every other verdict of
    the chapter with its claim's words."""
    verdict = {c.cid: c for c in claims.items}
    g0, g1, lr0 = sweep.init_scales[0], sweep.init_scales[-1], sweep.lrs[0]
    lines = []
    for H in sweep.heads:
        parts = []
        for tag, g in dict.fromkeys([("", g0), ("-small-init", g1)]):
            sub = select(models, H, lr0, g)
            e = pattern_rate(sub)
            words = (f"\"consistently\" at a small scale {verdict[f'consistently{tag}-H{H}'].verdict}"
                     if f"consistently{tag}-H{H}" in verdict else "the paper's \"consistently\": chapter 2")
            parts.append(f"{int(sub.pattern.sum())} of {len(sub)} seeds reach the pattern at initial scale {g:g} "
                         f"({e.value:.0%}, 95 % interval {e.lo:.0%} to {e.hi:.0%}; {words})")
        lines.append(f"- H = {H}: " + "; ".join(parts) + ".")
    trapped = models[~models.pattern]
    if len(trapped):
        lines.append(f"- The {len(trapped)} trapped runs of the sweep end at a median test loss of "
                     f"{trapped['test loss'].median():.3f}, those in the pattern at "
                     f"{models[models.pattern]['test loss'].median():.3f}.")
    for c in claims.items:
        if c.cid.startswith("consistently-small-init"):
            continue
        lines.append(f"- `{c.cid}` **{c.verdict}**: {c.statement}.")
    return "\n".join(lines)


def anchor_plan(heads: Sequence[int], profile: str) -> dict[Cell, int]:
    """``{cell: anchor seeds}`` of the profile's sweep at the paper's setting (PyTorch's
    initialisation, Adam at the paper's rate) for every H of ``heads`` the sweep has."""
    sweep = trap_sweep(profile)
    return {sweep.cell(H): sweep.anchor_seeds for H in heads if H in sweep.heads}


def anchor_specs(heads: Sequence[int], profile: str) -> list[RunSpec]:
    """The runs of :func:`anchor_plan` (seeds from :data:`TRAP_SEED`, to the profile's horizon):
    chapter 2 trains them with its setup's execution and counts them with its own seeds."""
    return grid_specs(anchor_plan(heads, profile), TRAP_SEED, horizon_config(profile))

