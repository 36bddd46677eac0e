"""Chapter 8's setup (paper 2: Goel, Soltanolkotabi, Bartlett, 2026).

:class:`ConvergenceSetup` validates the chapter's ``parameters`` cell once and holds the problem's
configuration, the oracles' run configurations and the sizes of its experiments in the resolved
profile (:class:`ConvergenceSizes`, each profile's in :data:`SIZES`).  The chapter's entry point,
:mod:`icl_lib.chapters.convergence`, gives it with every other library name the chapter's code uses.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..paper2.algorithms import RunConfig
from ..paper2.data import NORM_BOUND, P2Config
from ..validate import check_float, check_float_list, check_int, check_int_list, fail, literal_list
from .base import ChapterSetup, resolve_common

__all__ = ["SIZES", "ConvergenceSizes", "ConvergenceSetup"]

# The sizes of the chapter's experiments in each profile: ``quick`` runs in a few minutes on two CPU
# cores; ``paper`` uses longer sequences, more repetitions and more iterations (about an hour and a
# half on one core: its claims are recorded, icl_lib.book.records).
SIZES: dict[str, dict] = {
    "quick": dict(
        n=128, K=8, steps=300, steps_pop=400, kappas=(1, 4, 16, 64), R_kappa=4, steps_kappa=3000,
        init_scales=(1e-1, 1e-2, 1e-3, 1e-4, 1e-6), n_gap=(8, 16, 32, 64, 128, 256, 512), mc_tokens=2**18,
        n_dist=(16, 64, 256, 1024, 4096), R_dist=8, floor_multiples=(16, 24, 32, 48, 64), R_floor=8,
        steps_floor=60, R_compare=4, rate_start=0.5, n_rate=512, K_rate=2, R_rate=8, steps_rate=60,
        distances=(0.01, 0.03, 0.1, 0.3, 1.0), n_dirs=64, n_basin=64, bias_multiples=(4, 8, 16, 32, 64),
        bias_tokens=2**17, R_bias=4, lemma4_r=0.1, lemma4_dirs=8, lemma4_n_init=4096, lemma4_K=1024, R_reg=4,
        starts_reg=8, steps_reg=800, dims=(2, 4, 8, 16), R_dim=4, steps_dim=400, n_per_d=1024,
    ),
    "paper": dict(
        n=512, K=32, steps=400, steps_pop=600, kappas=(1, 4, 16, 64, 256), R_kappa=8, steps_kappa=20000,
        init_scales=(1e-1, 1e-2, 1e-3, 1e-4, 1e-6, 1e-8), n_gap=(8, 16, 32, 64, 128, 256, 512, 1024, 2048),
        mc_tokens=2**20, n_dist=(16, 64, 256, 1024, 4096, 16384), R_dist=32,
        floor_multiples=(16, 24, 32, 48, 64, 96, 128, 192, 256), R_floor=8, steps_floor=80, R_compare=8,
        rate_start=0.5, n_rate=1024, K_rate=2, R_rate=16, steps_rate=80,
        distances=(0.01, 0.03, 0.1, 0.2, 0.3, 0.5, 1.0), n_dirs=128, n_basin=256,
        bias_multiples=(4, 8, 16, 32, 64, 128), bias_tokens=2**20, R_bias=8, lemma4_r=0.1, lemma4_dirs=16,
        lemma4_n_init=16384, lemma4_K=512, R_reg=8, starts_reg=16, steps_reg=1500,
        dims=(2, 3, 4, 6, 8, 12, 16, 24), R_dim=8, steps_dim=600, n_per_d=1024,
    ),
}


@dataclass(frozen=True)
class ConvergenceSizes:
    """The sizes of chapter 8's experiments (:data:`SIZES` holds each profile's), validated."""

    n: int  # sequence length of the oracle in the method comparison (Figures 2, 4)
    K: int  # fresh sequences per oracle call
    steps: int  # iterations with the finite-n oracle
    steps_pop: int  # iterations with the population oracle
    kappas: tuple  # condition numbers of Sigma for the rate sweep
    R_kappa: int  # problems per condition number
    steps_kappa: int  # population-oracle iterations per rate fit
    init_scales: tuple  # small random starts (relative to the spectral start's norm)
    n_gap: tuple  # sequence lengths for the Monte Carlo of E[L_hat]
    mc_tokens: int  # K * n per sequence length in that Monte Carlo
    n_dist: tuple  # sample sizes for the spectral start's distance
    R_dist: int  # problems per sample size
    floor_multiples: tuple  # sequence lengths for the error floor, in units of d (see n_floor)
    R_floor: int  # problems per sequence length
    steps_floor: int  # iterations per floor run (the last half is averaged)
    R_compare: int  # problems of the finite-n comparison of the methods
    rate_start: float  # P-distance of the finite-n rate runs' start from S, relative to ||theta*||_P
    n_rate: int  # oracle length of the finite-n rate runs (a low floor leaves a long geometric phase)
    K_rate: int  # sequences per oracle call of those runs
    R_rate: int  # problems of those runs
    steps_rate: int  # iterations of the finite-n rate runs
    distances: tuple  # P-distances from S, relative to ||theta*||_P, of the one-point scan (Theorem 1(iii))
    n_dirs: int  # random directions of that scan (besides the Hessian's eigen-directions)
    n_basin: int  # spectral starts whose distance is compared with the scan's neighbourhood
    bias_multiples: tuple  # sequence lengths of the gradient-bias Monte Carlo (Theorem 3), in units of d
    bias_tokens: int  # K * n per sequence length in that Monte Carlo
    R_bias: int  # problems of that Monte Carlo
    lemma4_r: float  # Lemma 4's points: relative P-distance from S
    lemma4_dirs: int  # their number (random directions)
    lemma4_n_init: int  # samples of the empirical preconditioner P_hat there
    lemma4_K: int  # fresh sequences of the oracle's Monte Carlo at each point
    R_reg: int  # problems of the random-start runs with and without the regulariser
    starts_reg: int  # small random starts per problem
    steps_reg: int  # population-oracle iterations of those runs
    dims: tuple  # dimensions d of the rate-against-d sweep (p / d fixed)
    R_dim: int  # problems per dimension
    steps_dim: int  # population-oracle iterations per rate fit
    n_per_d: int  # samples per dimension of the spectral start and P_hat there (n_init = n_per_d d)

    def __post_init__(self):
        for name in ("n", "K", "steps", "steps_pop", "R_kappa", "steps_kappa", "mc_tokens", "R_dist", "R_floor",
                     "steps_floor", "R_compare", "n_rate", "K_rate", "R_rate", "steps_rate", "n_dirs", "n_basin",
                     "bias_tokens", "R_bias", "lemma4_dirs", "lemma4_n_init", "lemma4_K", "R_reg", "starts_reg",
                     "steps_reg", "R_dim", "steps_dim", "n_per_d"):
            object.__setattr__(self, name, check_int(name, getattr(self, name), 1))
        object.__setattr__(self, "n", check_int("n", self.n, 2))
        object.__setattr__(self, "kappas", check_float_list("kappas", self.kappas, 1.0))
        object.__setattr__(self, "init_scales", check_float_list("init_scales", self.init_scales, 0.0, 1.0, True))
        object.__setattr__(self, "n_gap", check_int_list("n_gap", self.n_gap, 1))
        object.__setattr__(self, "n_dist", check_int_list("n_dist", self.n_dist, 2))
        object.__setattr__(self, "floor_multiples", check_int_list("floor_multiples", self.floor_multiples, 2))
        object.__setattr__(self, "bias_multiples", check_int_list("bias_multiples", self.bias_multiples, 1))
        object.__setattr__(self, "distances", check_float_list("distances", self.distances, 0.0, 10.0, True))
        object.__setattr__(self, "R_compare", check_int("R_compare", self.R_compare, 2))
        object.__setattr__(self, "R_rate", check_int("R_rate", self.R_rate, 2))
        object.__setattr__(self, "R_bias", check_int("R_bias", self.R_bias, 2))
        object.__setattr__(self, "rate_start", check_float("rate_start", self.rate_start, 0.0, 1.0, True))
        object.__setattr__(self, "lemma4_r", check_float("lemma4_r", self.lemma4_r, 0.0, 1.0, True))
        object.__setattr__(self, "dims", check_int_list("dims", self.dims, 2, 64))
        for name in ("n_gap", "n_dist", "floor_multiples", "bias_multiples", "dims"):
            if len(getattr(self, name)) < 3:
                values = list(getattr(self, name))
                raise ValueError(f"{name}={values!r} is invalid: accepted at least 3 values (a slope is fitted)")
        if len(self.kappas) < 3:
            raise ValueError(f"kappas={list(self.kappas)!r} is invalid: accepted at least 3 values (a slope is fitted)")
        if len(self.init_scales) < 3:
            raise ValueError(f"init_scales={list(self.init_scales)!r} is invalid: accepted at least 3 values")

    def n_floor(self, d: int) -> tuple:
        """Sequence lengths of the error-floor experiment: ``floor_multiples`` times ``d``.

        The smallest is 16 d: with fewer samples the empirical preconditioner ``P_hat`` is too far
        from ``P`` (paper 2, Lemma 4 needs it close) and Algorithm 1 can diverge.
        """
        return tuple(m * d for m in self.floor_multiples)

    def n_bias(self, d: int) -> tuple:
        """Sequence lengths of the gradient-bias Monte Carlo (Theorem 3): ``bias_multiples`` times ``d``."""
        return tuple(m * d for m in self.bias_multiples)

    @property
    def K_low(self) -> int:
        """The smaller batch of the floor's noise test: a quarter of ``K`` (at least 1)."""
        return max(1, self.K // 4)


@dataclass(frozen=True)
class ConvergenceSetup(ChapterSetup):
    """Chapter 8's parameters, validated once, and what the chapter builds from them: the problems'
    configuration :attr:`config` (:class:`~icl_lib.paper2.data.P2Config`), the finite-n and
    population oracles' run configurations (:attr:`finite`, :attr:`population`) and the sizes of
    its experiments (:attr:`sizes`; ``S.n`` reads ``S.sizes.n``).  The chapter trains no network:
    the device only selects the profile (the matrices are tiny and stay on the CPU)."""

    chapter = "08_preconditioned_convergence"

    d: int
    p: int
    kappa: float
    m_op: float
    kappa_M: float
    noise_std: float
    eta_scale: float
    init_scale: float
    adam_lr: float
    sizes: ConvergenceSizes
    config: P2Config
    finite: RunConfig
    population: RunConfig

    @classmethod
    def from_parameters(cls, *, profile, seed, device, d, p, kappa, m_op, kappa_M, noise_std, n, K, kappas,
                        eta_scale, init_scale, adam_lr, dims) -> "ConvergenceSetup":
        """Validate chapter 8's parameters (a bad one raises ``ValueError`` naming it), resolve the
        profile on the device and the profile's sizes (``n``, ``K``, ``kappas``, ``dims``: ``None``)."""
        profile, seed, device = resolve_common(profile, seed, device)
        d = check_int("d", d, 2, 8)  # kappa needs d >= 2; the floor has n <= 256 d
        p = check_int("p", p, d, 32)  # Assumption 2: p >= d
        kappa = check_float("kappa", kappa, 1.0, 1024.0)
        m_op = check_float("m_op", m_op, 1e-3, NORM_BOUND, hi_open=True)  # Assumption 3: < 1/16
        kappa_M = check_float("kappa_M", kappa_M, 1.0, 100.0)
        noise_std = check_float("noise_std", noise_std, 0.0, 1.0)
        if n is not None:  # >= 16 d: P_hat close to P (Lemma 4); time ~ K n^2
            n = check_int("n", n, 16 * d, 512)
        if K is not None:  # at most the paper profile's 32
            K = check_int("K", K, 1, 32)
        if kappas is not None:  # a slope is fitted: 3 to 8 values
            kappas = check_float_list("kappas", literal_list("kappas", kappas), 1, 1024)
            if not 3 <= len(kappas) <= 8:
                fail("kappas", list(kappas), "3 to 8 condition numbers")
        eta_scale = check_float("eta_scale", eta_scale, 1e-3, 1.0)  # of the stable 2
        init_scale = check_float("init_scale", init_scale, 1e-8, 0.1)  # a small start
        adam_lr = check_float("adam_lr", adam_lr, 1e-5, 0.1)
        if dims is not None:  # a slope is fitted: 3 to 8 values of d
            dims = check_int_list("dims", literal_list("dims", dims), 2, 16)
            if not 3 <= len(dims) <= 8:
                fail("dims", list(dims), "3 to 8 dimensions")
            if max(dims) * p > 48 * d:  # p / d is kept: p <= 48 at the largest d
                fail("dims", list(dims), "dimensions with max(dims) * p / d <= 48")
        overrides = {k: v for k, v in dict(n=n, K=K, kappas=kappas, dims=dims).items() if v is not None}
        sizes = ConvergenceSizes(**{**SIZES[profile], **overrides})
        run_kw = dict(eta_scale=eta_scale, init_scale=init_scale, adam_lr=adam_lr)
        return cls(profile, seed, device, d, p, kappa, m_op, kappa_M, noise_std, eta_scale, init_scale, adam_lr,
                   sizes=sizes,
                   config=P2Config(d=d, p=p, kappa=kappa, m_op=m_op, kappa_M=kappa_M, noise_std=noise_std),
                   finite=RunConfig(n=sizes.n, K=sizes.K, steps=sizes.steps, **run_kw),
                   population=RunConfig(n=None, n_init=sizes.n, steps=sizes.steps_pop, **run_kw))

    @property
    def run_kw(self) -> dict:
        """The chapter's step rule, random-start scale and Adam rate, as :class:`RunConfig` keywords."""
        return dict(eta_scale=self.eta_scale, init_scale=self.init_scale, adam_lr=self.adam_lr)

    def __getattr__(self, name: str):
        """The sizes' fields read on the setup: ``S.n`` is ``S.sizes.n``."""
        if name.startswith("_") or name == "sizes":
            raise AttributeError(name)
        return getattr(self.sizes, name)
