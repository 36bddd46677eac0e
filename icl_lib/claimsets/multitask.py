"""Chapter 7's claims (``07_multitask``): several tasks (paper 1, B.4 and C.3).

Quotes are paper 1's words; ``[·]`` marks mathematics its text lost.
"""

from __future__ import annotations

from ..claims.rules import Above, Below, Equivalent
from ..claims.spec import ChapterClaims, ClaimSpec

__all__ = ["CLAIMS"]

P1 = dict(kind="paper", finding="p1-multitask", undecided="more seeds")

CLAIMS = ChapterClaims("07_multitask", (
    ClaimSpec("global-kq-diagonal", "Regardless of the number of heads, we observe the following consistent global "
              "pattern ... the KQ circuit exhibits a diagonal-only pattern in the top [·] submatrix with other "
              "entries equal to zero", "P1 §B.4", rule=Above(0.9), word="consistently",
              estimand="the fraction of every model whose KQ mass off the diagonal is below half the diagonal mass",
              unit="models", **P1),
    ClaimSpec("global-ov-label-block", "Regardless of the number of heads, we observe the following consistent "
              "global pattern ... the OV circuit has non-zero values exclusively in the last [·] matrix",
              "P1 §B.4", rule=Above(0.9), word="consistently",
              estimand="the fraction of every model whose OV mass off the label block is below half its mass",
              unit="models", **P1),
    ClaimSpec("mode-H{H}-superposition", "(iii) ... we observe an interesting head that simultaneously serves as a "
              "positive head for task one and a negative head for task two (H = {H})", "P1 §B.4, C.3",
              rule=Above(0.25), word="can",
              departs="one mode of several the paper describes for three heads and two tasks: a quarter of the "
                      "seeds, written before the runs",
              estimand="the fraction of the H-head seeds with a superposed head", **P1),
    ClaimSpec("mode-H{H}-{mode}", "the model behavior depends on the task-to-head ratio (H = {H}: {mode})",
              "P1 §B.4, C.3", rule=Above(0.5), word="typically",
              estimand="the fraction of the H-head seeds in the mode the paper describes for H heads and N tasks",
              known_failure={"mode-H4-allocated": "fails in the quick profile: at 4,000 steps few seeds have "
                                                  "allocated their heads to the tasks (the mode table above)"},
              **P1),
    ClaimSpec("shared-coords-larger-H{H}", "assigning higher weights to the informative entries, i.e., the entries "
              "that are shared by more [·]'s (H = {H})", "P1 §B.4", rule="every seed of the mode: ratio > 1",
              word="every", estimand="the seeds in the mode whose KQ diagonal on the shared coordinates over the "
              "others exceeds 1", **P1),
    ClaimSpec("gamma-on-support-H{H}", "the model effectively implements N independent debiased GD predictors "
              "(H = {H})", "P1 §B.4, C.3", rule=Below(0.5), word="is",
              estimand="the median over seeds of the worse task's pre-conditioner mass off its support over the "
              "mass on it", **P1),
    ClaimSpec("gamma-shared-H2", "(ii) H = 2: The two-head attention learns to act as one weighted pre-conditioned "
              "GD predictor", "P1 §B.4", rule=Above(0.5), word="is",
              estimand="the median over seeds of the pre-conditioner's mass shared between the tasks' supports, "
              "relative", **P1),
    ClaimSpec("loss-H{H}-near-dgd-support", "the transformer learns to implement N independent debiased GD "
              "predictors ... these heads learn to use the true support to solve the task (H = {H} >= 2N)",
              "P1 §B.4", rule=Equivalent(-0.05, 0.05), word="close to",
              estimand="the hull over tasks of the median loss over debiased GD's on the task's support, minus 1",
              **P1),
    ClaimSpec("loss-H{H}-below-dgd-all", "these heads learn to use the true support to solve the task (H = {H})",
              "P1 §B.4", rule=Below(0.0), word="larger than",
              estimand="the largest over tasks of the median loss over debiased GD's on every coordinate, minus 1",
              **P1),
    ClaimSpec("loss-H{H}-near-H{Hb}", "Superposition enables the transformer model to approximate the performance "
              "of the N debiased GD predictors (H = {H})", "P1 §C.3", rule=Equivalent(-0.05, 0.05),
              word="close to", estimand="the hull over tasks of the median loss of the H-head model over the same "
              "seed's loss with enough heads, minus 1", **P1),
    ClaimSpec("loss-H2-near-shared-dgd", "(ii) H = 2: The two-head attention learns to act as one weighted "
              "pre-conditioned GD predictor", "P1 §B.4", rule=Equivalent(-0.05, 0.05), word="close to",
              estimand="the hull over tasks of the median loss over the best shared weighted debiased GD's, "
              "minus 1", **P1),
    ClaimSpec("pred-H2-shared-not-all", "(ii) H = 2: ... one weighted pre-conditioned GD predictor with also higher "
              "weight assigned to the informative entries", "P1 §B.4", rule=Above(0.0), word="larger than",
              estimand="the smallest over tasks of how much nearer the models' predictions are to the shared "
              "weighted debiased GD than to debiased GD on every coordinate", **P1),
))
