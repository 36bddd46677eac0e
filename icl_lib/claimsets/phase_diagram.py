"""Chapter 9's claims (``09_phase_diagram``): beyond the papers, the single-sign trap.

Written before the runs that decide them (the ``written`` date of each).
"""

from __future__ import annotations

from ..claims.rules import Above, Below, Outside
from ..claims.spec import ChapterClaims, ClaimSpec

__all__ = ["CLAIMS"]

_TRAPPED = ("every trapped two-head end point in the run store: chapter 2's 500,000-step runs and the "
            "trapped seeds of chapter 9's anchor cell at paper 1's setting")
_SWITCH = {"batch-4096": "the batch noise (256 to 4,096 sequences per step)",
           "sgd": "the optimiser (Adam to SGD at the matched step)",
           "form-3.1": "the parametrisation (the full model to the form (3.1))"}


def _stationarity() -> list[ClaimSpec]:
    common = dict(section="beyond P1 §4.2", kind="beyond", finding="trap-stationarity", population="not seeds",
                  unit="trapped end points", written="2026-12-05")
    return [
        ClaimSpec("trapped-points-left-by-population-gd", "near-population gradient descent (large fresh batches, "
                  "a small constant step) from a trapped end point leaves the single-sign trap, as it would leave a "
                  "saddle of the measured curvature", rule=Above(0.9), word="consistently",
                  estimand="the fraction of trapped end points whose gradient-descent continuation ends with live "
                  "heads of both signs; " + _TRAPPED, **common),
        ClaimSpec("trapped-points-left-by-adam", "Adam at the training rate from a trapped end point leaves the "
                  "single-sign trap", rule=Above(0.9), word="consistently",
                  estimand="the fraction of trapped end points whose Adam continuation ends with live heads of "
                  "both signs; " + _TRAPPED, **common),
        ClaimSpec("trapped-points-left-after-kick", "a kick along the softest direction of the true loss's Hessian "
                  "(a tenth of the end point's size), then gradient descent, leaves the single-sign trap",
                  rule=Above(0.9), word="consistently",
                  estimand="the fraction of trapped end points left after the kick (either sign of the "
                  "direction); " + _TRAPPED, **common),
        ClaimSpec("gd-settles-at-trapped-points", "gradient descent from a trapped end point that it does not "
                  "leave settles at a stationary point of the true loss", rule=Above(0.9), word="consistently",
                  estimand="the fraction of the trapped end points not left whose gradient norm ends below twice "
                  "its Monte Carlo error", **common),
        ClaimSpec("settled-trap-is-strict-minimum", "where gradient descent settles in the trap, the true loss "
                  "has a strict local minimum (every Hessian eigenvalue above 0)", rule=Above(0.0),
                  estimand="the smallest Hessian eigenvalue of the true loss over the settled trapped points "
                  "(Bonferroni over the points)", rival="a saddle (an eigenvalue below 0)", **common),
        ClaimSpec("pattern-points-stay-under-gd", "gradient descent from a positive/negative end point stays in "
                  "the pattern", rule="every pattern end point", word="every",
                  estimand="the pattern end points (the controls) whose continuation keeps live heads of both "
                  "signs", **{**common, "kind": "check"}),
    ]


def _initialisation() -> list[ClaimSpec]:
    common = dict(section="beyond P1 §4.2", kind="beyond", finding="trap-initialisation", unit="initialisations",
                  written="2026-12-05")
    return [
        ClaimSpec("outcome-set-by-initialisation", "the initialisation, not the data draw, decides whether two "
                  "heads are trapped: a predictor read from the initialisation could reach the chapter's 0.9",
                  rule=Above(0.9), word="consistently",
                  estimand="the leave-one-draw-out accuracy: each run's outcome predicted by the majority of the "
                  "same initialisation's runs on the other data streams (an achievable predictor that reads the "
                  "initialisation only); bootstrap interval over initialisations", **common),
        ClaimSpec("predictors-reach-ceiling", "the chapter's best predictor read from the initialisation reads "
                  "as much of the outcome as the initialisation holds", rule=Above(-0.05),
                  estimand="the best predictor's accuracy on the crossed runs minus the leave-one-draw-out "
                  "accuracy (paired, bootstrap interval over initialisations)", **common),
    ]


def _switches() -> list[ClaimSpec]:
    common = dict(section="beyond P1 §4.2", kind="beyond", finding="trap-causes", unit="initialisations",
                  written="2026-12-05")
    out = []
    for tag, what in _SWITCH.items():
        out += [
            ClaimSpec(f"outcomes-changed-by-{tag}", f"switching {what} changes which runs are trapped more than "
                      "a new data draw does", rule=Above(0.0),
                      estimand="the share of (initialisation, data stream) pairs whose outcome changes with the "
                      "switch minus the share whose outcome changes between the first two data streams of the "
                      "same initialisation (paired by initialisation, bootstrap interval)", **common),
            ClaimSpec(f"trap-rate-changed-by-{tag}", f"switching {what} changes the trap rate by more than 0.1",
                      rule=Outside(-0.1, 0.1),
                      estimand="the trap rate with the switch minus without it, on the same (initialisation, data "
                      "stream) pairs (paired, bootstrap interval over initialisations)", **common),
        ]
    return out


def _landscape() -> list[ClaimSpec]:
    common = dict(section="beyond P1 §4.2", kind="beyond", finding="trap-landscape", unit="seeds per cell",
                  written="2026-12-05")
    fit = ("the trap rate fitted by a logistic regression on {axis} at its last value minus at its first (two "
           "heads, every other axis at paper 1's setting, 64 seeds a cell; delta-method interval)")
    return [
        ClaimSpec("trap-grows-with-d", "at a fixed ratio L / d = 8, two heads are trapped more often in higher "
                  "dimension", rule=Above(0.0), estimand=fit.format(axis="d (d = 3 to 10, L = 8 d)"), **common),
        ClaimSpec("trap-changes-with-L", "at d = 5, the trap rate changes by more than 0.1 with the context "
                  "length", rule=Outside(-0.1, 0.1), estimand=fit.format(axis="log L (L = 10 to 80)"), **common),
        ClaimSpec("trap-grows-with-lr", "a larger Adam rate traps two heads more often", rule=Above(0.0),
                  estimand=fit.format(axis="log lr (3e-4 to 3e-2)"), **common),
        ClaimSpec("trap-falls-with-heads", "the trap rate falls as heads are added", rule=Below(0.0),
                  estimand=fit.format(axis="H (2 to 5)").replace("(two heads, ", "("), **common),
        ClaimSpec("trap-changes-with-noise", "the trap rate changes by more than 0.1 with the label noise",
                  rule=Outside(-0.1, 0.1), estimand=fit.format(axis="sigma^2 (0 to 1)"), **common),
        ClaimSpec("longer-runs-keep-outcome", "the outcome at the 20,000-step horizon is the outcome at 100,000 "
                  "steps", rule=Below(0.1), kind="check", finding="trap-landscape", section="design",
                  estimand="the fraction of runs of four corner cells (d = 10 and L = 80; Adam rate 3e-2; initial "
                  "scale 0.03; sigma^2 = 1), 8 seeds each trained to 100,000 steps, whose outcome changes after "
                  "step 20,000", unit="runs", written="2026-12-05"),
    ]


CLAIMS = ChapterClaims("09_phase_diagram", tuple(_stationarity() + _initialisation() + _switches() + _landscape()))
