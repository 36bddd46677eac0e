"""Chapter 9's setup: beyond the papers, the single-sign trap (how often
training misses paper 1's positive/negative pattern of Sections 3, 4.2 and C.1) and the grid of
where each solution emerges.

The chapter's entry point, :mod:`icl_lib.chapters.phase_diagram`, gives it with every other
library name the chapter's code uses."""

from __future__ import annotations

from dataclasses import dataclass

from ..parameters import renamed
from ..config import RunSpec, TrainConfig
from ..paper1.phase_diagram.grid import PhaseGrid, grid_specs, profile_grid
from ..paper1.phase_diagram.causes import CauseDesign, cause_design
from ..paper1.phase_diagram.trap import TrapSweep, continued_specs, horizon_config, longer_specs, trap_specs, trap_sweep
from ..validate import check_float, check_int, fail
from .base import ChapterSetup, resolve_common

__all__ = ["DESCENT_STEPS", "GRID_PARAMETERS", "PhaseDiagramSetup"]

DESCENT_STEPS = {"quick": 1000, "paper": 3000}  # gradient descent from the trap's end points, by profile
GRID_PARAMETERS = ("heads", "shapes", "sigma2s", "lrs", "init_scales", "seeds", "slice_seeds")  # the grid's, as grid_<axis>


@dataclass(frozen=True)
class PhaseDiagramSetup(ChapterSetup):
    """Chapter 9 (beyond the papers): the trap sweep (:attr:`sweep`, from ``trap_heads``,
    ``init_scales``, ``lrs``, ``seeds``, ``anchor_seeds``), the grid (:attr:`grid`) and its
    profile's slice (:attr:`grid_plan`), both trained to :attr:`horizon` from seed ``seed``; the
    initialisations trained on several data streams and the switches (:attr:`causes`, from
    ``cause_inits``, ``cause_draws``, ``switch_draws``); and the sizes of the Monte Carlo, the
    Hessian, the restricted dynamics, the descent from the trap's end points and the losses."""

    chapter = "09_phase_diagram"

    steps: int | None
    sweep: TrapSweep
    grid: PhaseGrid
    grid_plan: dict
    causes: CauseDesign
    horizon: TrainConfig
    n_mc: int
    n_batches: int
    restricted_steps: int
    descent_steps: int
    descent_batch: int
    kick: float
    n_test: int

    @classmethod
    def from_parameters(cls, *, profile, seed, device, steps, trap_heads, init_scales, lrs, seeds, anchor_seeds, n_mc,
                        n_batches, restricted_steps, grid_heads, grid_shapes, grid_sigma2s, grid_lrs,
                        grid_init_scales, grid_seeds, grid_slice_seeds, cause_inits, cause_draws, switch_draws,
                        descent_steps, descent_batch, kick, n_test) -> "PhaseDiagramSetup":
        """Validate chapter 9's parameters (a bad one raises ``ValueError`` naming it: the sweep's
        and the grid's own checks report the chapter's names, ``trap_heads``, ``grid_heads``, ...)
        and resolve the profile on the device and the profile's sweep and grid (``None``)."""
        profile, seed, device = resolve_common(profile, seed, device, span=4096)
        with renamed(heads="trap_heads"):
            sweep = trap_sweep(profile, heads=trap_heads, lrs=lrs, seeds=seeds, init_scales=init_scales,
                               anchor_seeds=anchor_seeds)
        with renamed(**{k: f"grid_{k}" for k in GRID_PARAMETERS}):
            grid = profile_grid(profile, grid_heads, grid_shapes, grid_sigma2s, grid_lrs, grid_init_scales)
            grid_plan = grid.plan(profile, grid_seeds, grid_slice_seeds)
        if sum(grid_plan.values()) > 6000:
            fail("grid_seeds", grid_seeds, "a grid of at most 6000 runs")
        with renamed(inits="cause_inits", draws="cause_draws"):
            causes = cause_design(profile, cause_inits, cause_draws, switch_draws)
        horizon = horizon_config(profile, steps)
        n_mc = check_int("n_mc", n_mc, 1000, 1_000_000)
        n_batches = check_int("n_batches", n_batches, 4, 256)
        restricted_steps = check_int("restricted_steps", restricted_steps, 10, 100_000)
        descent_steps = DESCENT_STEPS[profile] if descent_steps is None else check_int(
            "descent_steps", descent_steps, 10, 100_000)
        descent_batch = check_int("descent_batch", descent_batch, 16, 65_536)
        kick = check_float("kick", kick, 0.0, 1.0, lo_open=True)
        n_test = check_int("n_test", n_test, 500, 50_000)
        return cls(profile, seed, device, steps, sweep, grid, grid_plan, causes, horizon, n_mc, n_batches,
                   restricted_steps, descent_steps, descent_batch, kick, n_test)

    def runs(self) -> dict[str, list[RunSpec]]:
        """``{"sweep": ..., "grid": ..., "causes: base": ..., "causes: <switch>": ...}``: the trap sweep's runs
        (:func:`~icl_lib.paper1.phase_diagram.trap.trap_specs` of ``sweep.plan()``), then the grid slice's
        (:func:`~icl_lib.paper1.phase_diagram.grid.grid_specs` of :attr:`grid_plan`), the longer runs of four corner
        cells (:func:`~icl_lib.paper1.phase_diagram.trap.longer_specs`) and of the two-head anchor cell
        (:func:`~icl_lib.paper1.phase_diagram.trap.continued_specs`); the chapter trains each
        plan with :func:`~icl_lib.paper1.phase_diagram.grid.train_grid` (seed ``seed``, :attr:`horizon`), then the
        runs of :attr:`causes` (:meth:`~icl_lib.paper1.phase_diagram.causes.CauseDesign.runs`)."""
        return {"sweep": trap_specs(self.sweep, self.profile, self.seed, self.steps),
                "grid": grid_specs(self.grid_plan, self.seed, self.horizon),
                "longer": longer_specs(self.profile, self.seed, self.steps),
                "continued": continued_specs(self.sweep, self.profile, self.seed, self.steps),
                **{f"causes: {k}": v for k, v in self.causes.runs(self.seed, self.horizon).items()}}
