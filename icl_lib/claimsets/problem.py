"""Chapter 1's claims: the problem, the data and the classical predictors (paper 1, §2, App. F)."""

from __future__ import annotations

from ..claims.rules import Within
from ..claims.spec import ChapterClaims, ClaimSpec

__all__ = ["CLAIMS"]

_CHECK = dict(kind="check", finding="checks-setup", population="not seeds", unit="Monte Carlo sequences",
              undecided="more sequences")

CLAIMS = ChapterClaims("01_setup", (
    ClaimSpec("label-moment", "E y^2 = 1 + sigma^2 for the data model of Section 2", "P1 §2",
              rule=Within(0.97, 1.03), estimand="the Monte Carlo mean of y_q^2 over 1 + sigma^2", **_CHECK),
    ClaimSpec("vanilla-gd-closed-form", "the closed-form risk of the optimal step of vanilla GD (F.28)",
              "P1 App. F.3", rule=Within(-0.03, 0.03),
              estimand="the Monte Carlo risk of vanilla GD at its optimal step over the closed form, minus 1",
              **_CHECK),
    ClaimSpec("debiased-gd-closed-form", "the closed-form risk of the optimal step of debiased GD", "P1 App. F.3",
              rule=Within(-0.03, 0.03),
              estimand="the Monte Carlo risk of debiased GD at its optimal step over the closed form, minus 1",
              **_CHECK),
    ClaimSpec("debiased-vanilla-gap", "the optimal debiased GD step's risk exceeds the optimal vanilla step's by "
              "the closed-form gap, which vanishes only as L grows", "P1 §4.3, App. F.3", rule=Within(-0.3, 0.3),
              estimand="the paired Monte Carlo gap of the two risks over the closed-form gap, minus 1", **_CHECK),
    ClaimSpec("trained-learns", "we first conduct experiments to empirically investigate how multi-head softmax "
              "attention models learn to solve ICL with linear data", "P1 §2-3", kind="paper",
              finding="p1-learns", rule="Bayes - 3 se < loss < (1 + sigma^2) / 2", word="is",
              departs="'learn to solve ICL', the plural of the table's 'learns to': read on the chapter's one "
                      "training run as a test loss above the Bayes risk (less three standard errors) and below "
                      "half the loss of predicting 0, the rival of a model that has not learnt the task",
              estimand="the trained model's test loss against the Bayes risk (Monte Carlo) and half the trivial "
              "predictor's", population="not seeds"),
))
