"""Chapter 2's claims: the trained circuits of paper 1, Section 3 and C.1.

Quotes are paper 1's words; ``[·]`` marks mathematics its text lost.
"""

from __future__ import annotations

import math

from ..claims.rules import Above, Below, Equivalent, Outside
from ..claims.spec import ChapterClaims, ClaimSpec

__all__ = ["CLAIMS"]

P1 = dict(kind="paper")
_PN = "pattern runs"  # measured on the models in the positive/negative pattern; the others printed as left out
_SEEDS = ("the paper profile trains 36 seeds per head count, 52 two-head and 40 three-head with its sample extension "
          "(and reads chapter 9's 128 fresh seeds at the paper's setting)")

CLAIMS = ChapterClaims("02_patterns", (
    ClaimSpec("kq-diagonal-H{H}", "regardless of the number of heads, attention models consistently learn the "
              "diagonal-only and last-entry-only patterns in (3.1) (H = {H}: the diagonal-only KQ)", "P1 §1 (ii)(a), §3 (3.1), §4.3", finding="p1-form",
              rule=Above(0.9), word="consistently",
              estimand="the fraction of H-head models whose KQ mass off the diagonal (off-diagonal block entries and "
              "the label row) is below half the diagonal mass; chapter 2's seeds and, at paper 1's setting, chapter "
              "9's fresh seeds", unit="seeds per head count", undecided=_SEEDS, **P1),
    ClaimSpec("ov-last-entry-H{H}", "the last-entry-only pattern in OV circuits (H = {H}): regardless of the number "
              "of heads, attention models consistently learn the diagonal-only and last-entry-only patterns in (3.1)",
              "P1 §3 (3.1), §4.3", finding="p1-form", rule=Above(0.9), word="consistently",
              estimand="the fraction of H-head models whose OV mass off the label entry is below half |mu_h|; "
              "chapter 2's seeds and, at paper 1's setting, chapter 9's fresh seeds",
              unit="seeds per head count", undecided=_SEEDS, **P1),
    ClaimSpec("sign-matching", "KQ and OV share the same sign for each head", "P1 §1 (ii)(b), (4.2)", finding="p1-form", rule="every model", word="every",
              estimand="the models whose live heads (icl_lib.circuits.pattern_kinds) all have sign(omega_h) = "
              "sign(mu_h)", **P1),
    ClaimSpec("zero-sum-ov-H{H}", "the average effective OV weight is approximately zero (H = {H})",
              "P1 §1 (iii), §3, (4.2)", finding="p1-form", rule=Below(0.1), word="close to",
              departs="a spread of a quantity that cannot be negative: |sum_h mu_h| / sum_h |mu_h| below 0.1, the "
              "order of the rivals' values (one sign: 1) kept far outside", rival="one-sign",
              estimand="the median over the pattern's models of |sum_h mu_h| / sum_h |mu_h|, order-statistic "
              "interval", population=_PN, undecided="more seeds in the pattern", **P1),
    ClaimSpec("homogeneous-omega-H{H}", "the diagonal KQ weights across all heads are nearly homogeneous in magnitude "
              "(H = {H})", "P1 §1 (iii), §3, C.1 (i)", finding="p1-form", rule=Below(0.25), word="the same as",
              departs="a spread (max - min) / mean of the live heads' |omega_h|, which cannot be negative: the "
              "median over models below 0.25", rival="initial-spread",
              estimand="the median over the pattern's models of the spread of the live heads' |omega_h|, "
              "order-statistic interval", population=_PN, undecided="more seeds in the pattern", **P1),
    ClaimSpec("single-head-larger-omega", "in the two-head attention model, the magnitude of KQ circuits ( [·] is "
              "smaller than that of the single-head attention ( [·] ) ... the trained multi-head model ... works in "
              "a regime with a significantly smaller magnitudes of KQ parameters", "P1 §3, App. E.1", finding="p1-scales", rule=Above(2),
              word="larger than", estimand="the median |omega| of one head over the median |omega_h| of the "
              "pattern's multi-head models (ratio of independent medians, Bonferroni)", population=_PN, **P1),
    ClaimSpec("multi-head-larger-mu", "and the magnitude of OV circuits ( [·] ) is larger than that of the "
              "single-head attention model ( [·] )", "P1 §3", finding="p1-scales", rule=Above(1), word="larger than",
              estimand="the median summed mu of the positive group of the pattern's multi-head models over the median "
              "|mu| of one head", population=_PN, **P1),
    ClaimSpec("omega-equal-across-H", "across different models, the limiting value of [·] are the same",
              "P1 §3, C.1 (ii)", finding="p1-scales", rule=Equivalent(-math.inf, 0.1), word="the same as",
              rival="1/sqrt(H)", estimand="the spread max/min - 1 over H >= 2 of the pattern's median |omega|, "
              "Bonferroni over H (the rival: a scale shared out as 1/sqrt(H))",
              population=_PN, undecided="more seeds in the pattern", **P1),
    ClaimSpec("summed-mu-equal-across-H", "the magnitude of OV circuits aligns across positive and negative groups "
              "(the same predictor for every H >= 2)", "P1 §3, C.1 (ii)", finding="p1-scales",
              rule=Equivalent(-math.inf, 0.1), word="the same as", rival="sqrt(H)",
              estimand="the spread max/min - 1 over H >= 2 of the pattern's median summed mu of the positive group "
              "(the rival: a group's OV growing with its heads as sqrt(H))",
              population=_PN, undecided="more seeds in the pattern", **P1),
    ClaimSpec("no-dummy-head-H2", "Different from the two-head scenarios where the dummy heads will not occur due to "
              "the constraint of solution manifold [·], i.e., there should be at least one positive head and one "
              "negative head", "P1 C.1 (iii)", finding="p1-form", rule=Below(0.1), word="consistently",
              departs="the complement of a fraction of at least 0.9: the fraction of two-head models with a dummy "
              "head below 0.1", estimand="the fraction of every two-head model with a dummy head (exact interval)",
              unit="two-head models", undecided="more two-head seeds", **P1),
    ClaimSpec("dummy-heads-appear", "Dummy heads will appear when H > 2", "P1 C.1 (iii), Fig. 13",
              finding="p1-form", rule=Above(0.05), word="can",
              estimand="the fraction of the pattern's models with H > 2 that have a dummy head", population=_PN,
              unit="models in the pattern", **P1),
    ClaimSpec("same-eta-H{H}", "the two-head and four-head attention model learns the same predictor ... all "
              "multi-head attention models with [·] consistently learn nearly identical predictors (H = {H}): the "
              "optimal debiased GD step", "P1 §3, Thm 4.2 (ii)", finding="p1-debiased-gd",
              rule=Equivalent(-0.05, 0.05), word="close to", rival="eta*_GD",
              margin_departs="the margin allows for s(omega) < s* at the trained scales (below 3.5 %) and Adam's jitter; "
              "vanilla GD's optimal step, 2.2 % below, sits inside it and the interval must exclude it",
              estimand="the median over the pattern's models of sum_h mu_h omega_h / eta*_dGD - 1",
              population=_PN, undecided="more seeds in the pattern", **P1),
    ClaimSpec("multi-beats-single-H{H}", "Multi-head attention outperforms single-head attention (H = {H})",
              "P1 §3 (a)", finding="p1-multi-vs-single", rule=Below(0.8), word="larger than",
              estimand="the median test loss of the H-head models over that of one head (ratio of independent "
              "medians), every seed", unit="seeds per head count", undecided=_SEEDS, **P1),
    ClaimSpec("multi-near-debiased-gd-H{H}", "the learned predictor performs nearly identically to the debiased GD "
              "predictor (H = {H})", "P1 §4.3, Fig. 3b", finding="p1-debiased-gd", rule=Equivalent(-0.02, 0.02),
              word="close to", rival="vanilla-GD*",
              margin_departs="2 % is what 'nearly identically' can mean for a test loss; vanilla GD at its optimal "
              "step, 1.3 % above debiased GD's risk, sits inside it and the interval must exclude it",
              estimand="the median over the pattern's models of the paired test loss relative to the optimal "
              "debiased GD's, minus 1 (the seeds' own test-set intervals)", population=_PN,
              undecided="more seeds in the pattern", **P1),
    ClaimSpec("debiased-not-vanilla-H{H}", "Positive and negative heads are coupled to approximate gradient descent "
              "(GD) ... but with an additional debiasing term (H = {H})", "P1 §4.3, Thm 4.2 (i)",
              finding="p1-debiased-gd", rule=Equivalent(0.5, 1.5), word="close to", rival="vanilla-GD",
              estimand="the median over the pattern's models of the debiasing fraction t (1: debiased GD, 0: "
              "vanilla GD, the rival, half a unit outside the margin)", population=_PN,
              undecided="more seeds in the pattern", **P1),
    ClaimSpec("multi-heads-equal", "while maintaining nearly identical performance across different the number of "
              "heads used", "P1 §3 (a)", finding="p1-multi-vs-single", rule=Equivalent(-math.inf, 0.03),
              word="the same as", rival="one-head-gap",
              estimand="the spread max/min - 1 over H >= 2 of the pattern's median test loss (Bonferroni over H; "
              "the rival: the gap from one head to two, as if each added head gained as much)", population=_PN, undecided="more seeds in the pattern", **P1),
    ClaimSpec("pattern-consistently-H{H}", "Despite random initializations, the parameter evolution follows a highly "
              "consistent trajectory ... Starting from random initializations, we show that the parameters evolve "
              "to form a pattern consistently similar (H = {H})", "P1 §3, §4.2, C.1", finding="p1-consistency",
              rule=Above(0.9), word="consistently",
              estimand="the fraction of H-head models in the positive/negative pattern (icl_lib.circuits."
              "pattern_kinds): chapter 2's seeds and chapter 9's 128 fresh seeds at paper 1's setting, decided here "
              "once (chapter 9 reads the same count)", unit="seeds", undecided=_SEEDS,
              known_failure={"pattern-consistently-H2": "below 0.9 for two heads in the paper profile: a quarter "
                             "of the seeds end single-sign (the table and figure above; chapter 9)"}, **P1),
    ClaimSpec("same-eta-{setting}", "we found that the results are not sensitive to the choice of optimization "
              "algorithm, hyperparameters such as batch size and learning rate ({setting}: the same predictor, "
              "eta = eta*_dGD)", "P1 C.1, Thm 4.2 (ii)", finding="p1-debiased-gd",
              rule=Equivalent(-0.05, 0.05), word="insensitive to", rival="eta*_GD",
              margin_departs="the margin allows for s(omega) < s* at the trained scales (below 3.5 %) and Adam's jitter; "
              "vanilla GD's optimal step, 2.2 % below, sits inside it and the interval must exclude it",
              estimand="the median over the setting's pattern models of sum_h mu_h omega_h / eta*_dGD - 1",
              population=_PN, unit="seeds in the pattern", undecided="more seeds per setting", **P1),
    ClaimSpec("omega-depends-on-{factor}", "We remark that the learned scale [·] depends on the learning rate, "
              "training steps, and batch size ({factor})", "P1 §4.2", finding="p1-scales",
              rule=Outside(0.95, 1.05), word="depends on",
              estimand="the median |omega_h| of the setting's pattern models over the base setting's (ratio of "
              "independent medians)", population=_PN, unit="seeds in the pattern",
              undecided="more seeds per setting", **P1),
    ClaimSpec("pattern-insensitive-H{H}", "we found that the results are not sensitive to the choice of "
              "optimization algorithm, hyperparameters such as batch size and learning rate (H = {H})",
              "P1 C.1", finding="p1-consistency", rule=Above(0.9), word="consistently",
              departs="'not sensitive' read for the pattern at sens_heads heads: it forms consistently at every "
              "other setting (pooled fraction of at least 0.9); the two heads' pattern under the optimiser and "
              "batch switches is decided in chapter 9 (pattern-insensitive-to-*)",
              estimand="the fraction of the other settings' models in the positive/negative pattern, pooled",
              unit="seeds over the settings", undecided="more seeds per setting", **P1),
))
