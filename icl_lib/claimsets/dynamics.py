"""Chapter 3's claims: the training dynamics of paper 1, Sections 3, 4.1, 4.2 and C.4.

The claims that describe the pattern's dynamics are decided on the runs that formed it (the
positive/negative pattern at the end), and each prints how many runs it leaves out: whether the
pattern forms is chapter 2's claim (``pattern-consistently``), decided there once.
"""

from __future__ import annotations

from ..claims.rules import Above, Below, Equivalent, Within
from ..claims.spec import ChapterClaims, ClaimSpec

__all__ = ["CLAIMS"]

P1 = dict(kind="paper")
_PN = "pattern runs"
_MORE = ("more than the run store's seeds (36 per head count, 52 two-head and 40 three-head with chapter 2's sample "
         "extension; 500,000 Adam steps each) are not trained")
_Q = "the quick profile's 4,000 steps end before some runs with more heads finish Stage II (the stage table)"

CLAIMS = ChapterClaims("03_two_stage_dynamics", (
    ClaimSpec("pattern-early", "the attention model quickly develops the pattern in (3.1), identified in Observation "
              "1, during the early stages of training", "P1 §3", finding="p1-two-stage", rule=Below(0.25),
              word="larger than", estimand="the median over every run of the step from which (3.1) holds to the "
              "end, as a share of the training steps (a run that never holds it counts beyond the end)",
              unit="runs", undecided=_MORE, **P1),
    ClaimSpec("pattern-kept", "The attention model continues to optimize the loss function with this pattern "
              "preserved throughout the training process", "P1 §3", finding="p1-two-stage",
              rule="every run that formed (3.1)", word="every",
              estimand="the runs that, once of the form (3.1), keep it to the end, read with the band of the "
              "definition kind-band (a run leaves the form only when a ratio rises above shape-tol * (1 + "
              "band))", population=_PN,
              known_failure="a run that formed (3.1) ends out of the form (the runs that lost it, shown below the "
                            "claim)", **P1),
    ClaimSpec("stage-I-before-II", "Following this, the training dynamic undergoes two stages: • In Stage I, two "
              "patterns emerged—sign matching and zero-sum OV ... • In Stage II, the [·]'s converge to homogeneous "
              "KQ scaling", "P1 §4.2", finding="p1-two-stage", rule=Above(0.9), word="training does",
              estimand="among the pattern's runs with both stages, the fraction whose Stage I comes strictly before "
              "Stage II, of those not tied at the snapshots' resolution",
              population=_PN, unit="untied runs", undecided=_MORE, **P1),
    ClaimSpec("stages-reached-H{H}", "the training dynamic undergoes two stages (H = {H})", "P1 §4.2",
              finding="p1-two-stage", rule=Above(0.9), word="training does",
              estimand="the fraction of the pattern's H-head runs in which both Stage I and Stage II are found",
              population=_PN, unit="runs in the pattern", undecided=_MORE,
              known_failure={"stages-reached-H3": {"quick": _Q}, "stages-reached-H4": {"quick": _Q}}, **P1),
    ClaimSpec("manifold-slide-H{H}", "Finally, [·]'s fall into the solution manifold in (4.5) defined by scale of "
              "[·] (H = {H})", "P1 §4.2 (4.5)", finding="p1-two-stage", rule=Within(-1.25, -0.75),
              word="of order", rival="OV-fixed",
              departs="lying on the manifold (4.5), a curve mu proportional to 1/omega, read as the slope of "
              "log(group mu) on log|omega| along the slide in a window around the curve's -1",
              estimand="the median over the runs with a slide of the slope of log(sum of the positive group's mu) on "
              "log|omega| after (4.3) holds (on the manifold: -1)", population=_PN, unit="runs with a slide",
              undecided=_MORE, **P1),
    ClaimSpec("eta-before-stage-II", "optimality equality in (4.3) holds approximately, which facilitates "
              "subsequent evolution ... after (4.2) and (4.3) are established, the training enters the second "
              "stage", "P1 §4.2", finding="p1-two-stage", rule=Above(0.9), word="training does",
              estimand="among the pattern's runs where both are found, the fraction in which (4.3) holds strictly "
              "before Stage II, of those not tied at the snapshots' resolution",
              population=_PN, unit="untied runs", undecided=_MORE, **P1),
    ClaimSpec("omega-falls-H{H}", "the training dynamics of the KQ circuits are not monotonic. The magnitudes of "
              "[·]'s first increase and then decrease to stabilize (H = {H})",
              "P1 §3 (Obs. 4)", finding="p1-two-stage", rule=Above(0.9), word="training does",
              estimand="the fraction of the pattern's H-head runs whose live heads' |omega_h| ends at least 10 % "
              "below its peak (median head)", population=_PN, unit="runs in the pattern", undecided=_MORE, **P1),
    ClaimSpec("mu-grows-H{H}", "Whereas the magnitude of OV circuits, i.e., [·], increases steadily (H = {H})",
              "P1 §3 (Obs. 4)", finding="p1-two-stage", rule=Above(0.0), word="increases steadily",
              estimand="the median over the pattern's runs of the trend of log|sum_h mu_h| on log step in the second "
              "half of training, the smaller of the run's two groups (order-statistic interval)", population=_PN,
              unit="runs in the pattern", undecided=_MORE, **P1),
    ClaimSpec("approx-error-order-L", "the approximation error vanishing as the ICL sample size L increases "
              "(Proposition 4.1)", "P1 §4.1 (Prop. 4.1)", finding="p1-approx-loss", rule=Within(-1.25, -0.75),
              word="of order", rival="L^(-1/2)",
              departs="the order of the vanishing is in Proposition 4.1's lost formula: the book reads it as 1/L, "
              "the slope of log|error| on log L in a window around -1, the neighbouring order L^(-1/2) excluded",
              estimand="the slope of log|true loss - (4.1)| on log L at small omega (L = 20 to "
              "160), Monte Carlo", population="not seeds", unit="Monte Carlo sequences per length",
              undecided="more sequences", **P1),
    ClaimSpec("approx-degrades", "the approximation ... performs particularly well when [·] is small (see Figure "
              "5a)", "P1 §4.1 (Fig. 5)", finding="p1-approx-loss", rule=Above(3.0), word="larger than",
              estimand="|true - (4.1)| at the largest omega of the grid over that at the smallest", population="not "
              "seeds", unit="Monte Carlo sequences", undecided="more sequences", **P1),
    ClaimSpec("valley-true-decreases", "The gray arrow highlights the 'river valley' loss landscape where the loss "
              "decreases gradually in that direction towards minimum", "P1 §4.2 (Fig. 5b)",
              finding="p1-approx-loss", rule=Above(0.0), word="larger than",
              estimand="the true loss at the valley's largest omega minus at its smallest (Monte Carlo)",
              population="not seeds", **P1),
    ClaimSpec("valley-true-limit", "along the valley the true loss tends to the optimal debiased GD risk",
              "P1 §4.2-4.3", finding="p1-approx-loss", rule=Equivalent(-0.005, 0.005), word="equals",
              departs="the book's reading of the valley's end (Sections 4.2-4.3): at the valley's smallest omega the "
              "true loss equals the optimal debiased GD risk within 0.005",
              rival="(4.1)-infimum", estimand="the true loss at the valley's smallest omega minus the optimal "
              "debiased GD risk (Monte Carlo)", population="not seeds", **P1),
    ClaimSpec("norm-concentrates-fixed-d", "with a fixed d, the norm concentrates around 0 as the length L "
              "increases", "P1 §C.4 (Fig. 19a)", finding="p1-approx-loss", rule=Below(0.25), word="larger than",
              estimand="the median norm at the largest L over that at the smallest", population="not seeds",
              unit="draws per length", undecided="more draws", **P1),
    ClaimSpec("norm-decreases-fixed-d", "with a fixed d, the norm concentrates around 0 as the length L increases",
              "P1 §C.4 (Fig. 19a)", finding="p1-approx-loss", rule="median,q90 strictly decreasing in L",
              word="every", departs="'concentrates as L increases' read as a fall at every step of L of the median "
              "and the 90 % quantile, counted exactly", estimand="the median and the 90 % quantile of the norm at every L",
              population="not seeds", **P1),
    ClaimSpec("norm-proportional-scaled", "with omega ~ 1/sqrt(d) the norm concentrates at 0 in the proportional "
              "regime", "P1 §C.4 (Fig. 19c)", finding="p1-approx-loss", rule=Equivalent(-0.25, 0.25),
              word="close to", rival="no-concentration",
              departs="'concentrates at 0' read as the median norm following the book's law L^(-1/2) within 25 % "
              "(the rival: the norm staying at its value at the smallest L)", estimand="the relative gap of the median norm from the law L^(-1/2) in the "
              "proportional regime", population="not seeds", unit="draws per length", undecided="more draws", **P1),
    ClaimSpec("norm-decreases-scaled", "with omega ~ 1/sqrt(d) the norm concentrates at 0 in the proportional "
              "regime", "P1 §C.4 (Fig. 19c)", finding="p1-approx-loss", rule="median,q90 strictly decreasing in L",
              word="every", departs="'concentrates' read as a fall at every step of L of the median and the 90 % "
              "quantile, counted exactly", estimand="the median and the 90 % quantile of the norm at every L",
              population="not seeds", **P1),
    ClaimSpec("gd41-groups-H{H}", "By comparing Figures 20a and 20b, we observe that the approximate loss "
              "effectively captures the evolution of parameters seen in the full model (H = {H}: the same groups)",
              "P1 §C.4 (Fig. 20)", finding="p1-approx-loss", rule=Above(0.5), word="we observe",
              estimand="the fraction of the pattern's runs whose gradient descent on (4.1) from the same start ends "
              "in the same groups of live heads", population=_PN, unit="runs in the pattern", undecided=_MORE,
              **P1),
    ClaimSpec("gd41-eta-H{H}", "the approximate loss effectively captures the evolution of parameters seen in the "
              "full model ... performs particularly well when [·] is small (H = {H}: the same effective rate)",
              "P1 §C.4 (Fig. 20), §4.1", finding="p1-approx-loss", rule="every run: |eta_GD / eta_full - 1| < 0.1",
              word="every", departs="an observation of the paper's run read strictly: in every run whose groups "
              "agree, the effective rates within 10 %", estimand="the largest |eta_GD / eta_full - 1| over the pattern's runs whose groups "
              "agree (small omega: (4.1)'s domain)", population=_PN, **P1),
))
