"""Chapter 4's claims: the gradient flow of (4.1) and its three phases (paper 1, App. D).

The flows are solved numerically and are deterministic: each interval is the solved value itself.
Quotes are paper 1's words (``[·]`` marks mathematics its text lost; a short parenthesis of the book
may follow).  The limits of Phase III name as their rival the same gap where Phase II ends (a flow
that stopped where Phase III begins).
"""

from __future__ import annotations

from ..claims.rules import Above, Below, Equivalent, Within
from ..claims.spec import ChapterClaims, ClaimSpec

__all__ = ["CLAIMS"]

P1 = dict(kind="paper", finding="p1-ode", population="not seeds", unit="solved flows")
_CHECK = dict(kind="check", finding="checks-derivations", population="not seeds", unit="solved flows")

CLAIMS = ChapterClaims("04_ode_phases", (
    ClaimSpec("phase1-duration-d{d}", "Phase I (Exponential and Synchronous Growth). From a small initialization, "
              "both [·] grow exponentially fast in t at nearly the same rate (d = {d})", "P1 App. D (Phase I)",
              rule=Equivalent(-0.01, 0.01), word="close to", rival="first-order law",
              margin_departs="the ±1 % window was set for the solver's agreement with the third-order expansion "
                             "(its neglected terms move t_I by well under 1 %) before the rival was named; the "
                             "first-order law, pure exponential growth at rate 2 to the same omega, lies about 1 % "
                             "away, so the window reaches it and the solved value must exclude it",
              estimand="the solved end of Phase I over the linearisation's prediction (rate 2), minus 1", **P1),
    ClaimSpec("phase1-ratio-d{d}", "Phase I: the ratio mu/omega stays close to one (it starts at 1 in Definition "
              "D.1 and the flow keeps it there to O(omega^5): a check of the solver) (d = {d})",
              "P1 App. D (Phase I)", rule=Below(0.05),
              estimand="the largest |mu/omega - 1| during Phase I", **_CHECK),
    ClaimSpec("single-peak-d{d}", "Phase II (Slowed Growth and Peak Formation). As [·] and [·] increase, their "
              "growth rate in time decreases ... Moreover, [·] eventually reaches its maximum value [·] (d = {d})",
              "P1 App. D (Phase II)", rule="one + to - change, no - to + change, 0 < t_I < t_II", word="is",
              departs="'eventually reaches its maximum value', after which omega only declines (Phase III), read "
                      "as one peak: the sign changes of d omega / dt counted exactly on the solved flow",
              estimand="the sign changes of d omega / dt along the solved flow", **P1),
    ClaimSpec("phase2-loss-drop-d{d}", "Although the parameters no longer grow exponentially, the loss decreases "
              "sharply until [·] begins to decline (d = {d})", "P1 App. D (Phase II)",
              rule=Above(2.0), word="significantly",
              estimand="the loss drop during Phase II over that during Phase I", **P1),
    ClaimSpec("after-peak-d{d}", "After [·] reaches its peak, it decreases to zero while [·] continues increasing "
              "(d = {d})", "P1 App. D (Phase III)", rule="d omega / dt < 0 and d mu / dt > 0 at every step after t_II",
              word="every", estimand="the signs of the solved derivatives after the peak", **P1),
    ClaimSpec("mu-rises-d{d}", "Whereas the magnitude of OV circuits, i.e., [·], increases steadily (under the "
              "gradient flow, d = {d})", "P1 §3 (Obs. 4)", rule="d mu / dt > 0 at every step",
              word="increases steadily",
              departs="on a solved flow 'steadily' is read at every step: d mu / dt > 0 counted exactly on every "
                      "solver step, stricter than the table's rising trend over the second half",
              estimand="the sign of the solved d mu / dt at every step", **P1),
    ClaimSpec("s-converges-d{d}", "Moreover, while t increases, the product [·] remains almost constant and converges "
              "to [·] during this phase (d = {d}: 2 mu omega and s*)", "P1 App. D (Phase III)",
              rule=Equivalent(0.0, 0.001), word="equals", rival="stopped at the end of Phase II",
              estimand="the relative gap (s* - 2 mu omega) / s* at the end of the solved flow", **P1),
    ClaimSpec("gap-slope-d{d}", "derived here: the gap s* - 2 mu omega decays like t^(-2/3) (d = {d})",
              "P1 App. D (Phase III)", rule=Within(-2 / 3 - 0.05, -2 / 3 + 0.05),
              estimand="the fitted slope of log(s* - 2 mu omega) on log t late in the flow", **_CHECK),
    ClaimSpec("loss-converges-d{d}", "In addition, the loss converges to the minimum value (d = {d}: "
              "1 + sigma^2 - s*)", "P1 App. D (Phase III)", rule=Equivalent(0.0, 0.001), word="equals",
              rival="stopped at the end of Phase II",
              estimand="the relative gap of the loss from its minimum at the end of the solved flow", **P1),
    ClaimSpec("mu-tracks-mu-star-d{d}", "the last phase exhibits an interesting phenomenon: the difference between "
              "[·] and [·] gradually becomes negligible ... when t is sufficiently large, we regard that [·] is "
              "almost equal to [·] (d = {d}: mu and mu*(omega) of (D.17))", "P1 App. D (Phase III)",
              rule=Equivalent(-0.001, 0.001), word="equals", rival="stopped at the end of Phase II",
              estimand="the relative lag of mu behind mu*(omega) at the end of the solved flow", **P1),
    ClaimSpec("valley-law-d{d}", "derived here: leading-order residuals of the valley phase (d = {d})",
              "P1 App. D (Phase III)", rule=Below(0.2),
              estimand="the largest relative error of the three predicted residuals", **_CHECK),
    ClaimSpec("same-t-I-d-vs-d2", "the two settings behave almost identically (App. D): the same Phase I (its rate "
              "2 does not depend on d: a check of the solver)", "P1 App. D", rule=Within(-0.1, 0.1),
              estimand="t_I of the second d over that of the first, minus 1", **_CHECK),
    ClaimSpec("peak-order-d-vs-d2", "derived here: the peak is lower and earlier for larger d", "P1 App. D",
              rule="larger d: lower, earlier peak of omega", estimand="the two flows' peaks", **_CHECK),
))
