"""Configuration dataclasses, validated once at construction.

Every experiment in the book is described by three frozen dataclasses and a seed:

* :class:`DataConfig`  -- the in-context regression task (paper 1, Section 2; anisotropic B.3;
  multi-task B.4),
* :class:`ModelConfig` -- the one-layer multi-head attention (paper 1, eq. 2.2) or a variant,
* :class:`TrainConfig` -- optimiser, steps, batch and what the history records,

bundled per trained model in :class:`RunSpec`.  A bad value raises :class:`ValueError` naming the
parameter, the value and what is accepted, before any work starts (used by every chapter through
its ``parameters`` cell).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field

import torch

from .validate import check_choice, check_float, check_int, fail
from .version import FUSED_CODE_VERSION, MODEL_CODE_VERSION

__all__ = [
    "DataConfig",
    "ModelConfig",
    "TrainConfig",
    "RunSpec",
    "ATTENTION_KINDS",
    "OPTIMIZERS",
    "DTYPES",
    "kms_covariance",
    "resolve_device",
    "resolve_dtype",
]

ATTENTION_KINDS = ("softmax", "linear", "one_plus_tanh", "quadratic", "square")
MODEL_INITS = ("authors", "per-head")  # the initialisations of ModelConfig.init (icl_lib.models)
FORMS = ("full", "3.1")  # what trains (ModelConfig.form; icl_lib.engine.forms)
COVARIATES = ("gaussian", "sphere")  # how covariates are drawn (DataConfig.covariates)
OPTIMIZERS = ("adam", "sgd")
DTYPES = ("float32", "float64")
DEVICES = ("auto", "cpu", "cuda")


def kms_covariance(d: int, rho: float, dtype=torch.float64) -> torch.Tensor:
    """Kac-Murdock-Szego matrix ``Sigma_ij = rho^|i-j|`` (paper 1, B.3; chapter 6)."""
    i = torch.arange(d, dtype=dtype)
    return torch.as_tensor(rho, dtype=dtype) ** (i[:, None] - i[None, :]).abs()


def resolve_device(device: str | torch.device) -> torch.device:
    """The device ``device`` names: ``"auto"`` is CUDA when available, else CPU; ``"cuda"`` without a
    GPU is an error."""
    if isinstance(device, torch.device):
        device = device.type
    check_choice("device", device, DEVICES)
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' is invalid: no CUDA device is available (use 'cpu' or 'auto')")
    return torch.device(device)


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        dtype = str(dtype).removeprefix("torch.")
    check_choice("dtype", dtype, DTYPES)
    return getattr(torch, dtype)


def _as_nested_tuple(value):
    if value is None:
        return None
    return tuple(tuple(row) for row in value)


# --------------------------------------------------------------------------------------------
# the three configurations
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DataConfig:
    """In-context linear regression task (paper 1, Section 2; B.3; B.4).

    ``x_i, x_q ~ N(0, Sigma)``, ``beta_n ~ N(0, I_{|S_n|} / |S_n|)`` on the support ``S_n`` of task
    ``n``, ``y_n = beta_n^T x_{S_n} + eps``, ``eps ~ N(0, sigma2)``; so ``E y^2 = 1 + sigma2`` when
    ``Sigma`` has unit diagonal.  ``covariates="sphere"`` draws ``x`` uniformly on the sphere of
    radius ``sqrt(d)`` instead (``E x x^T = I``; paper 1, §4.3: the single head is a
    Nadaraya-Watson estimator "when the covariates are sampled from a sphere"; chapter 5).  Used by
    every chapter of paper 1.
    """

    d: int = 5  # covariate dimension
    L: int = 40  # context length: number of demonstrations (x_i, y_i) before the query
    sigma2: float = 0.1  # label-noise variance sigma^2
    rho: float = 0.0  # Kac-Murdock-Szego covariance Sigma_ij = rho^|i-j| (0: isotropic)
    covariance: tuple[tuple[float, ...], ...] | None = None  # explicit Sigma (overrides rho)
    supports: tuple[tuple[int, ...], ...] | None = None  # multi-task supports S_n, 0-based
    covariates: str = "gaussian"  # "gaussian": N(0, Sigma); "sphere": uniform on the sphere of radius sqrt(d)

    def __post_init__(self):
        object.__setattr__(self, "d", check_int("d", self.d, 1, 4096))
        object.__setattr__(self, "L", check_int("L", self.L, 1, 1_000_000))
        object.__setattr__(self, "sigma2", check_float("sigma2", self.sigma2, 0.0))
        object.__setattr__(self, "rho", check_float("rho", self.rho, -1.0, 1.0, True, True))
        cov = _as_nested_tuple(self.covariance)
        if cov is not None:
            cov = tuple(tuple(float(v) for v in row) for row in cov)
            t = torch.tensor(cov, dtype=torch.float64)
            if t.shape != (self.d, self.d):
                fail("covariance", f"shape {tuple(t.shape)}", f"a symmetric positive-definite {self.d}x{self.d} matrix")
            if not torch.allclose(t, t.T) or torch.linalg.eigvalsh(t).min() <= 0:
                fail("covariance", "the given matrix", f"a symmetric positive-definite {self.d}x{self.d} matrix")
        object.__setattr__(self, "covariance", cov)
        sup = _as_nested_tuple(self.supports)
        if sup is not None:
            if len(sup) == 0:
                fail("supports", self.supports, "a non-empty list of non-empty index lists")
            for n, s in enumerate(sup):
                if len(s) == 0 or len(set(s)) != len(s):
                    fail(f"supports[{n}]", list(s), "a non-empty list of distinct coordinates")
                for i in s:
                    check_int(f"supports[{n}] index", i, 0, self.d - 1)
            sup = tuple(tuple(int(i) for i in s) for s in sup)
        object.__setattr__(self, "supports", sup)
        check_choice("covariates", self.covariates, COVARIATES)
        if self.covariates == "sphere" and (self.rho != 0.0 or cov is not None):
            fail("covariates", self.covariates, "'gaussian' with a covariance other than the identity")

    @property
    def n_tasks(self) -> int:
        """Number of regression tasks N (outputs of the model)."""
        return 1 if self.supports is None else len(self.supports)

    @property
    def D(self) -> int:
        """Token dimension ``d + N``: covariates then the N labels."""
        return self.d + self.n_tasks

    def covariance_matrix(self, dtype=torch.float64) -> torch.Tensor:
        """``Sigma`` as a ``(d, d)`` tensor (identity, KMS ``rho^|i-j|``, or the explicit matrix)."""
        if self.covariance is not None:
            return torch.tensor(self.covariance, dtype=dtype)
        return kms_covariance(self.d, self.rho, dtype=dtype)

    def support_mask(self, dtype=torch.float64) -> torch.Tensor:
        """``(N, d)`` 0/1 mask of each task's support."""
        if self.supports is None:
            return torch.ones(1, self.d, dtype=dtype)
        m = torch.zeros(self.n_tasks, self.d, dtype=dtype)
        for n, s in enumerate(self.supports):
            m[n, list(s)] = 1
        return m


@dataclass(frozen=True)
class ModelConfig:
    """One-layer H-head attention (paper 1, eq. 2.2) and its variants (B.1 linear, B.2 activations).

    ``attention``: ``"softmax"`` (the paper's model), ``"linear"`` (scores divided by the fixed
    length ``norm_length``, B.1), or a normalised activation ``f(s_i) / sum_j f(s_j)`` with
    ``"one_plus_tanh"`` (``f = 1 + tanh``), ``"quadratic"`` (``f(s) = 1 + s + s^2/2``) or ``"square"``
    (``f(s) = (1 + s)^2``, first-order coefficient ``c_f = 2``), B.2.  ``form="3.1"`` trains the
    model held to paper 1's form (3.1), only each head's ``(omega_h, mu_h)`` moving from the
    projection of its initialisation (:mod:`icl_lib.engine.forms`; chapter 9).
    """

    heads: int = 4  # number of attention heads H
    attention: str = "softmax"  # softmax | linear | one_plus_tanh | quadratic | square
    norm_length: int | None = None  # linear attention's fixed normaliser (None: the training L)
    init_scale: float = 1.0  # multiplies PyTorch's default nn.Linear initialisation
    init: str = "authors"  # "authors": paper 1's layout (one output layer of fan-in D H); "per-head"
    form: str = "full"  # "full": every weight trains; "3.1": only each head's (omega_h, mu_h) (chapter 9)

    def __post_init__(self):
        object.__setattr__(self, "heads", check_int("heads", self.heads, 1, 256))
        check_choice("form", self.form, FORMS)
        if self.form != "full" and self.attention != "softmax":
            fail("form", self.form, "'full' for attention other than softmax")
        check_choice("attention", self.attention, ATTENTION_KINDS)
        if self.norm_length is not None:
            object.__setattr__(self, "norm_length", check_int("norm_length", self.norm_length, 1))
        object.__setattr__(self, "init_scale", check_float("init_scale", self.init_scale, 0.0, lo_open=True))
        check_choice("init", self.init, MODEL_INITS)


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation on fresh batches (paper 1, Section 2: Adam, lr 1e-3, batch 256, 500k steps)."""

    steps: int = 3000  # optimiser steps
    batch: int = 256  # fresh sequences per step
    lr: float = 1e-3  # learning rate
    optimizer: str = "adam"  # adam | sgd
    n_log: int = 100  # history snapshots: half log-spaced (early zoom), half linear
    val_size: int = 2048  # fixed held-out validation sequences (shared by all models)
    dtype: str = "float32"  # float32 | float64

    def __post_init__(self):
        object.__setattr__(self, "steps", check_int("steps", self.steps, 1, 100_000_000))
        object.__setattr__(self, "batch", check_int("batch", self.batch, 2, 1_000_000))
        object.__setattr__(self, "lr", check_float("lr", self.lr, 0.0, 10.0, lo_open=True))
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        object.__setattr__(self, "n_log", check_int("n_log", self.n_log, 2, 100_000))
        object.__setattr__(self, "val_size", check_int("val_size", self.val_size, 1, 10_000_000))
        check_choice("dtype", self.dtype, DTYPES)

    def log_steps(self) -> list[int]:
        """Steps at which the history records losses and circuits (always 0 and ``steps``)."""
        half = max(self.n_log // 2, 1)
        lin = torch.linspace(0, self.steps, half + 1, dtype=torch.float64)
        geo = torch.logspace(0, math.log10(self.steps), half, dtype=torch.float64)
        steps = {0, self.steps} | {int(round(v)) for v in lin.tolist()} | {int(round(v)) for v in geo.tolist()}
        return sorted(s for s in steps if 0 <= s <= self.steps)


@dataclass(frozen=True)
class RunSpec:
    """One trained model: data, model, training and its seed (initialisation and data stream).

    Runs that share ``d``, ``L``, the number of tasks, the attention kind and the whole
    :class:`TrainConfig` are trained side by side as one ensemble; the result of a run does not
    depend on which others share its ensemble (tested).
    """

    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    seed: int = 0  # seeds the initialisation, and the training data stream unless data_seed is given
    data_seed: int | None = None  # seeds the training data stream apart from the initialisation (None: seed)

    def __post_init__(self):
        for name, cls in (("data", DataConfig), ("model", ModelConfig), ("train", TrainConfig)):
            if not isinstance(getattr(self, name), cls):
                fail(name, getattr(self, name), f"a {cls.__name__}")
        object.__setattr__(self, "seed", check_int("seed", self.seed, 0, 2**62))
        if self.data_seed is not None:  # the seed's own stream is no other experiment: no data_seed
            data_seed = check_int("data_seed", self.data_seed, 0, 2**62)
            object.__setattr__(self, "data_seed", None if data_seed == self.seed else data_seed)

    @property
    def stream_seed(self) -> int:
        """The seed of the training data stream: ``data_seed``, or ``seed`` when it is not given
        (chapter 9 trains one initialisation on several data streams)."""
        return self.seed if self.data_seed is None else self.data_seed

    def to_dict(self) -> dict:
        """The configuration as plain data; ``data_seed`` only when it is given and the model's
        ``form`` only when it is not the full model, so that a run without them keeps the key it
        had before the fields existed (run cache and store)."""
        out = dataclasses.asdict(self)
        if self.data_seed is None:
            del out["data_seed"]
        if self.model.form == "full":  # likewise the full model
            del out["model"]["form"]
        if self.data.covariates == "gaussian":  # and Gaussian covariates
            del out["data"]["covariates"]
        return out

    @classmethod
    def from_dict(cls, raw: dict) -> "RunSpec":
        """The spec of :meth:`to_dict`'s data (as the run cache and the store's provenance keep it)."""
        return cls(data=DataConfig(**raw["data"]), model=ModelConfig(**raw["model"]),
                   train=TrainConfig(**raw["train"]), seed=raw["seed"], data_seed=raw.get("data_seed"))

    def key(self, device: str = "cpu", draw_ahead: int = 1, backend: str = "eager") -> str:
        """Hash of the full configuration, the device type, the model-code version and, when they
        are not the defaults, the number of steps whose batches are drawn at once and the CPU
        backend (both decide the random numbers; a fused key names ``FUSED_CODE_VERSION`` too) (run cache)."""
        fields = {"spec": self.to_dict(), "device": str(device), "code": MODEL_CODE_VERSION}
        if draw_ahead != 1:
            fields["draw_ahead"] = int(draw_ahead)
        if backend != "eager":
            fields["backend"] = str(backend)
            fields["fused_code"] = FUSED_CODE_VERSION
        payload = json.dumps(fields, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:24]

    def group_key(self) -> tuple:
        """Runs with equal group keys have compatible shapes and can share one ensemble."""
        d = self.data
        m = self.model
        return (d.d, d.L, d.n_tasks, m.attention, m.norm_length or d.L, m.form, self.train)
