"""Chapter 8's claims (``08_preconditioned_convergence``): paper 2's preconditioned gradient descent.

Quotes are paper 2's words.  Chapter 8 trains no network: every claim is measured on problems drawn
by the chapter (Monte Carlo), not on seeds of trained models.
"""

from __future__ import annotations

from ..claims.rules import Above, Below, Equivalent, Within
from ..claims.spec import ChapterClaims, ClaimSpec

__all__ = ["CLAIMS"]

P2 = dict(kind="paper", population="not seeds", unit="problems")
_CHECK = dict(kind="check", finding="checks-derivations", population="not seeds")

CLAIMS = ChapterClaims("08_preconditioned_convergence", (
    ClaimSpec("population-limit-{key}", "the population loss is the asymptotic limit of the training loss as n -> "
              "infinity ({key})", "P2 §4, §1.1", finding="p2-population", rule=Equivalent(-0.01, 0.01),
              word="close to", estimand="the fitted limit of the Monte Carlo training loss as n grows over the "
              "population loss, minus 1", unit="Monte Carlo tokens per n", undecided="more Monte Carlo tokens",
              **{k: v for k, v in P2.items() if k != "unit"}),
    ClaimSpec("gap-order-1/n-{key}", "the finite-n correction of the population loss is of order 1/n (the book's "
              "reading of the limit, Section 4) ({key})", "P2 §4", finding="p2-population",
              rule=Within(-1.1, -0.9), word="of order",
              estimand="the fitted slope of log(training loss - its limit) on log n", **P2),
    ClaimSpec("one-point-{kind}", "While this loss is globally nonconvex, we prove that it exhibits one-point strong "
              "convexity and one-point smoothness near the manifold of global minima ({kind})",
              "P2 §4, Theorem 1(iii)", rule=Above(0.95),
              estimand="the fraction of random directions near S at which the one-point inequality holds",
              unit="random directions", **{**_CHECK, "finding": "p2-population", "kind": "check"}),
    ClaimSpec("manifold-dimension", "the regularized population loss has infinitely many global minima which "
              "together form a smooth connected manifold (dimension d(d-1)/2)", "P2 §1.1, Theorem 1",
              rule="null directions == d(d-1)/2", estimand="the null directions of Q's Hessian at a minimum",
              **_CHECK),
    ClaimSpec("lemma1-symmetry", "the matrix Delta^T P theta* Sigma is symmetric, theta* the projection of theta "
              "onto S in the P-norm (Lemma 1: an identity of the projection, checked on the book's solver)",
              "P2 §4, Lemma 1", rule=Below(1e-6), rival="whitened projection",
              estimand="the largest relative asymmetry over points near S", unit="points near S",
              undecided="a projection solved to a tighter tolerance", **_CHECK),
    ClaimSpec("lemma2-quadratic-bound", "Q(theta) - Q* <= beta/2 ||Delta||_P^2 (Lemma 2)", "P2 §5, Lemma 2",
              finding="p2-population", rule=Above(0.95), word="every",
              departs="a bound at every point near S, measured on sampled points: the fraction of them that meet "
                      "it above 0.95",
              estimand="the fraction of points near S at which the bound holds", unit="points near S",
              undecided="more directions in the scan", **{k: v for k, v in P2.items() if k != "unit"}),
    ClaimSpec("spectral-start-in-basin", "a data-dependent spectral initialization of parameters which lie near the "
              "manifold of global minima with high probability", "P2 §5, Lemma 3", finding="p2-spectral",
              rule=Above(0.9), word="consistently",
              estimand="the fraction of problems whose spectral start lies inside Theorem 1(iii)'s neighbourhood",
              known_failure="fails at seed 7 and on setting B of 'On other settings'", **P2),
    ClaimSpec("alg1-floor", "with the finite-n oracle L(theta_m) - L* <~ n^-2 log^6 n + mu^m: the excess settles at "
              "a floor", "P2 §5, Theorem 2", finding="p2-convergence", rule=Equivalent(-0.2, 0.2),
              word="close to", estimand="the relative drift of Algorithm 1's excess over the second half of the "
              "run", **P2),
    ClaimSpec("alg1-finite-rate", "We propose a simple first-order algorithm which converges to the optimal "
              "self-attention parameters at a geometric rate (Theorem 2, the mu^m term)",
              "P2 §5, Theorem 2, Lemma 4", finding="p2-convergence", rule=Equivalent(0.5, 2.0), word="close to",
              estimand="the geometric rate with the finite-n oracle over that with the population oracle", **P2),
    ClaimSpec("lemma4-smoothness", "||P_hat^-1 Z_hat||_P^2 <= beta~ ||Delta||_P^2 + nu ||P^-1/2 xi||_F^2 (Lemma 4)",
              "P2 §5, Lemma 4, App. B.4", finding="p2-convergence", rule=Below(1.0), word="every",
              estimand="the largest ratio of the left side to the right side over points near S",
              unit="sequences per point", undecided="more sequences per point",
              **{k: v for k, v in P2.items() if k != "unit"}),
    ClaimSpec("rate-kappa-alg1", "our algorithm can be viewed as evolving each of the self-attention parameters in "
              "the geometry most natural to that parameter (its rate does not change with kappa)", "P2 §1.1, §5",
              rule=Within(-0.1, 0.1), estimand="the fitted slope of log(contraction) on log kappa for Algorithm 1",
              unit="problems per kappa", **{**_CHECK, "finding": "p2-convergence"}),
    ClaimSpec("rate-kappa-{method}", "a preconditioner which reflects the reweighting of the inner product: without "
              "it the rate degrades with the condition number ({method})", "P2 §1.1, §5",
              finding="p2-convergence", rule=Below(-0.5), word="depends on",
              estimand="the fitted slope of log(contraction) on log kappa", **P2),
    ClaimSpec("rate-vs-d-alg1", "we establish a fast geometric convergence rate: Algorithm 1's mu, set by alpha and "
              "beta, does not degrade with d at a fixed spectrum", "P2 §2, Theorem 2", finding="p2-convergence",
              rule=Above(-0.1), word="insensitive to", rival="1/d",
              departs="one-sided: a rate that does not degrade with d (a slope above -0.1), the rival 1/d excluded",
              estimand="the fitted slope of log(1 - mu) on log d", unit="problems per d",
              undecided="more problems per dimension", **{k: v for k, v in P2.items() if k != "unit"}),
    ClaimSpec("saddle-growth", "a preconditioner and regularizer which help avoid spurious stationary points: "
              "theta = 0 is a spurious stationary point, small starts grow at the rate of its negative curvature",
              "P2 §1.1", finding="p2-spectral", rule=Equivalent(0.98, 1.02), word="close to",
              estimand="the growth factor per step of a small start over the negative curvature's",
              known_failure="fails on setting B of 'On other settings'", **P2),
    ClaimSpec("saddle-plateau", "plain GD from a small random start lingers at theta = 0 for ~ln(1/eps) steps (the "
              "regularizer and spectral start avoid spurious stationary points)", "P2 §1.1", finding="p2-spectral",
              rule=Equivalent(0.9, 1.1), word="close to",
              estimand="the plateau's length over ln(1/eps) / ln(growth)",
              known_failure="fails on setting B of 'On other settings'", **P2),
    ClaimSpec("regulariser-random-starts", "the book's question, which paper 2 does not ask: from the same small "
              "random starts, gradient descent on Q passes the stationary points of L in fewer iterations than "
              "gradient descent on L", "beyond P2 §1.1, §2", kind="beyond", finding="book-regulariser",
              rule=Below(0.9), population="not seeds",
              estimand="the median over problems and random starts of the paired ratio of the iterations GD on Q "
              "and GD on L need to pass the stationary points", unit="random starts",
              undecided="more problems and starts",
              known_failure="fails in both profiles: GD on Q needs about as many iterations as GD on L (the figure "
                            "above); paper 2 uses the regulariser near S, from its spectral start"),
    ClaimSpec("spectral-distance", "we expect this initialization to be near S with high probability: theta_0 is "
              "eps-close in P-norm to S (Lemma 3), eps ~ n^-1/2", "P2 §5, Lemma 3", finding="p2-spectral",
              rule=Within(-0.6, -0.4), word="of order",
              estimand="the fitted slope of log(P-distance of the spectral start to S) on log n",
              unit="problems per n", undecided="more problems, or larger n",
              **{k: v for k, v in P2.items() if k != "unit"}),
    ClaimSpec("gradient-bias-slope", "||E[grad Q_hat(theta)] - grad Q(theta)||_F^2 <= C n^-2 log^6 n (Theorem 3)",
              "P2 §5, Theorem 3", finding="p2-convergence", rule=Below(0.0), word="of order", rival="n^-1",
              estimand="the fitted slope of log(squared gradient bias) on log n minus the slope of n^-2 log^6 n "
                       "over the same range of n", **P2),
    ClaimSpec("floor-slope", "L(theta_m) - L* <~ n^-2 log^6 n + mu^m: the error floor decays at least as fast as "
              "n^-2 log^6 n", "P2 §5, Theorem 2", finding="p2-convergence", rule=Below(0.0), word="of order",
              rival="n^-1", estimand="the fitted slope of log(error floor) on log n minus the slope of n^-2 log^6 "
                                     "n over the same range of n", **P2),
))
