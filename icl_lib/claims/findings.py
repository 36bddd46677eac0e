"""The findings the book's claims are grouped into, each counted once on the claims dashboard.

One phenomenon often shows in several claims: the single-sign trap touches the rate at which the
pattern forms, whether runs reach Stage II, and which predictor the trapped runs implement.  The
dashboard counts findings, not claims: a finding of a paper *reproduces* when every one of its
claims passes, *does not reproduce* when one of them fails, and is *undecided* otherwise; its
sentence is written from the verdicts (:func:`finding_verdict`).  Every declared claim names its
finding (:attr:`~icl_lib.claims.spec.ClaimSpec.finding`; a test holds them to :data:`FINDINGS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

__all__ = ["Finding", "FINDINGS", "SOURCES", "finding_verdict", "Untested", "UNTESTED"]

SOURCES = {"P1": "Paper 1 (He, Pan, Chen, Yang)", "P2": "Paper 2 (Goel, Soltanolkotabi, Bartlett)",
           "book": "Beyond the papers", "checks": "Checks of the book's own derivations and design"}


@dataclass(frozen=True)
class Finding:
    """A finding: its ``source`` (a key of :data:`SOURCES`), a short ``title`` and what the paper
    (or the book) ``says``, in one sentence a theorist could quote."""

    source: str
    title: str
    says: str


FINDINGS: dict[str, Finding] = {
    # paper 1
    "p1-learns": Finding("P1", "In-context learning", "a trained one-layer softmax attention model learns linear "
                         "regression in context, between the Bayes risk and the trivial predictor"),
    "p1-form": Finding("P1", "The circuits' form (3.1)", "the trained circuits take the form (3.1): a diagonal KQ "
                       "block, an OV that reads the label only, positive and negative heads whose KQ and OV signs "
                       "match, OV scales that sum to zero, one KQ scale across the live heads, and dummy heads once "
                       "there are more than two"),
    "p1-consistency": Finding("P1", "The pattern forms consistently", "despite random initialisations the "
                              "positive/negative pattern forms consistently, with any number of heads, learning "
                              "rate, batch or optimiser"),
    "p1-scales": Finding("P1", "The scales of the heads", "one head has a larger KQ scale and a smaller OV scale "
                         "than several; the limiting KQ scale and each sign group's summed OV scale are the same for "
                         "every H >= 2; the KQ scale depends on the learning rate and the batch"),
    "p1-debiased-gd": Finding("P1", "Debiased gradient descent at its optimal step", "positive and negative heads "
                              "implement one step of debiased gradient descent, at the step eta* that is optimal for "
                              "it, whatever the number of heads and the optimiser's settings"),
    "p1-multi-vs-single": Finding("P1", "Several heads against one", "multi-head attention beats single-head "
                                  "attention, and performs nearly identically for every H >= 2"),
    "p1-two-stage": Finding("P1", "Two stages of training", "training has two stages: the pattern's signs emerge "
                            "early from a small initialisation, then the KQ scales first grow and then fall to "
                            "stabilise while the OV scales grow, on the manifold of optimal steps, with the pattern "
                            "kept"),
    "p1-approx-loss": Finding("P1", "The approximate loss (4.1)", "the approximate loss (4.1) has an error of order "
                              "1/L, is accurate for small KQ scales, and gradient descent on it follows the full "
                              "model's groups and rate"),
    "p1-ode": Finding("P1", "Three phases of the gradient flow", "the gradient flow of (4.1) from a small "
                      "symmetric start has three phases: a plateau, one peak of the KQ scale, and a slow slide to "
                      "the optimum"),
    "p1-optimality": Finding("P1", "Optimality across lengths", "the trained model's loss falls with L, stays near "
                             "debiased gradient descent at every length, and in the proportional regime is near the "
                             "Bayes risk"),
    "p1-single-head": Finding("P1", "The single head", "a single head implements a Nadaraya-Watson kernel "
                              "regressor at the scales that are optimal for it"),
    "p1-linear-attention": Finding("P1", "Linear attention (B.1)", "linear attention with a fixed normaliser "
                                   "matches softmax at the training length and loses away from it"),
    "p1-activations": Finding("P1", "Other activations (B.2)", "other normalised activations form the same pattern "
                              "and implement the same debiased gradient descent, their effective rates consistent "
                              "across activations"),
    "p1-anisotropic": Finding("P1", "Anisotropic covariates (B.3)", "with anisotropic covariates the heads learn a "
                              "pre-conditioner close to the optimal one, keep sign matching and zero-sum OV, and "
                              "implement pre-conditioned debiased gradient descent with the effective rate of the "
                              "isotropic case"),
    "p1-multitask": Finding("P1", "Several tasks (B.4)", "with several tasks the heads allocate themselves to the "
                            "tasks' supports in modes set by the number of heads"),
    # paper 2
    "p2-population": Finding("P2", "The loss and its population limit", "the empirical loss tends to its "
                             "population limit at rate 1/n, and the structure lemmas (1, 2, 4) hold near the "
                             "minima"),
    "p2-convergence": Finding("P2", "Geometric convergence of Algorithm 1", "preconditioned gradient descent from a "
                              "spectral start converges geometrically to a floor, at a rate that depends neither on "
                              "the conditioning nor on the dimension, where plain gradient descent slows"),
    "p2-spectral": Finding("P2", "The spectral start", "the spectral initialisation lands in the basin of the "
                           "minima, at a distance that falls as n^(-1/2), and escapes the saddle at the origin"),
    # the book's own
    "book-regulariser": Finding("book", "The regulariser from random starts", "the book asks whether paper 2's "
                                "regulariser speeds gradient descent from small random starts, which paper 2 does "
                                "not claim"),
    "book-b3-rate": Finding("book", "The anisotropic rate at a stated normalisation", "the book asks whether, with "
                            "the pre-conditioner normalised to unit mean diagonal, the effective rate with anisotropic "
                            "covariates equals the isotropic one"),
    "book-mu-late": Finding("book", "The OV scales late in training", "the book asks whether the OV scales are "
                            "still rising in the second half of Adam's training"),
    "book-trap-rate": Finding("book", "How often the trap happens", "the book measures how often two to four heads "
                              "end single-sign, and how the rate moves with the initial scale, the learning rate and "
                              "the number of heads"),
    "trap-stationarity": Finding("book", "Minimum or saddle", "the book decides by the dynamics whether trapped end "
                                 "points are left, and where gradient descent settles, whether it is a minimum"),
    "trap-initialisation": Finding("book", "Initialisation or data", "the book separates the initialisation from "
                                   "the data draw and measures how much of the outcome the initialisation fixes"),
    "trap-predictors": Finding("book", "Predictors read from the initialisation", "the book asks which readings of "
                               "the initialisation predict the trap"),
    "trap-causes": Finding("book", "Causes switched one at a time", "the book switches the batch noise, the "
                           "optimiser and the parametrisation from the same initialisations and data"),
    "trap-landscape": Finding("book", "Where the trap lives", "the book measures the trap rate along the grid's "
                              "axes: dimension, context length, noise, learning rate and heads"),
    # checks
    "checks-setup": Finding("checks", "Sampler and closed forms", "the sampler's moments and the closed-form risks "
                            "the chapters compare against"),
    "checks-derivations": Finding("checks", "The book's derivations", "closed forms, expansions and identities the "
                                  "book derives"),
    "checks-design": Finding("checks", "The study's design", "horizons, stored outcomes and the design choices the "
                             "chapters rest on"),
}


@dataclass(frozen=True)
class Untested:
    """A sentence of a paper the book does not test as written: its ``source`` (a key of
    :data:`SOURCES`), ``section``, the paper's ``quote`` and ``why`` (what the book measures
    instead, or what a test would need).  The claims dashboard lists them in its headline."""

    source: str
    section: str
    quote: str
    why: str


UNTESTED: tuple[Untested, ...] = (
    Untested("P1", "B.3", "Thus, the effective learning rate, [·], is the same as in the isotropic case",
             "under the anisotropic covariates the effective rate depends on how Gamma is normalised, which the "
             "paper's text leaves to its lost equations; the book decides the rate at one stated normalisation as "
             "its own question (book-b3-rate), not the paper's sentence"),
    Untested("P2", "§1, §5", "the regularizer obtained in Section 4 which helps it avoid spurious stationary points",
             "the book measures the saddle at the origin (its growth rate and plateau) and the regulariser from "
             "small random starts as its own question (book-regulariser); whether the regulariser removes "
             "stationary points that plain gradient descent would stop at is not tested"),
)


def finding_verdict(verdicts: Iterable[str]) -> str:
    """A finding's verdict from its claims' verdicts (``NOT-RUN`` aside): ``FAIL`` when one fails,
    ``INCONCLUSIVE`` when none fails and one is undecided, ``PASS`` when every one passes,
    ``NOT-RUN`` when none was decided."""
    v = [x for x in verdicts if x != "NOT-RUN"]
    if not v:
        return "NOT-RUN"
    if "FAIL" in v:
        return "FAIL"
    return "INCONCLUSIVE" if "INCONCLUSIVE" in v else "PASS"
