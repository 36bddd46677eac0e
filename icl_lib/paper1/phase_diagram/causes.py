"""Initialisation or data, and the causes of the single-sign trap switched one at a time (chapter 9).

One seed sets both a run's initialisation and its data stream, so a seed's outcome cannot say
which of the two decides it.  Here the two are separated (:attr:`~icl_lib.config.RunSpec.data_seed`):

* :class:`CauseDesign` -- ``inits`` two-head initialisations at paper 1's setting (the anchor
  seeds of chapter 9's sweep, from :data:`~icl_lib.paper1.phase_diagram.trap.TRAP_SEED`), each trained on
  ``draws`` data streams (``data_seed = DATA_SEED0 + j``, the same streams for every
  initialisation: a crossed design); the *base* runs;
* the *switches* (:data:`SWITCHES`): the same initialisations and data streams (the first
  ``switch_draws`` of them; the first only for the big batch, whose runs cost 16 base runs each)
  with one factor changed: the batch noise (256 to :data:`BIG_BATCH` sequences per step; a fused
  step's first 256 sequences are the base run's), the optimiser
  (Adam to SGD at the matched step :data:`MATCHED_SGD_LR`) and the parametrisation (the full model to
  paper 1's form (3.1), :mod:`icl_lib.engine.forms`, from the projection of the same
  initialisation on the same batches).

:mod:`icl_lib.paper1.phase_diagram.attribution` reads them: the trap's probability per initialisation, how
much of the outcome the initialisation fixes (the ceiling of any predictor read from it), and
which switches change outcomes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ...config import DataConfig, ModelConfig, RunSpec, TrainConfig
from ...validate import check_choice, check_int

__all__ = ["CauseDesign", "CAUSES", "DATA_SEED0", "BIG_BATCH", "MATCHED_SGD_LR", "SWITCHES", "cause_design"]

DATA_SEED0 = 3_000_000  # the first data stream (fresh: no run's seed is this large)
BIG_BATCH = 4096  # the batch of the low-noise switch (16 times paper 1's 256)
# The SGD switch's rate: the rate whose first update is as long as Adam's.  Adam's first step moves
# every weight by its rate (1e-3), a step of length 1e-3 sqrt(P) (P = 228 weights of a two-head
# model at d = 5); SGD's moves by lr |g_0|.  Over the 64 initialisations of the paper profile the
# median |g_0| on their first batch is 0.1325, so the matched rate is 1e-3 sqrt(228) / 0.1325 =
# 0.114, rounded to 0.11.  (Computed from the initialisations before any run of the switch.)
MATCHED_SGD_LR = 0.11
SWITCHES = ("batch 4096", "SGD", "form (3.1)")
# by profile: initialisations, data streams per initialisation, data streams with the switches
CAUSES = {"quick": dict(inits=8, draws=3, switch_draws=1), "paper": dict(inits=64, draws=8, switch_draws=2)}
D, L, SIGMA2, HEADS, LR = 5, 40, 0.1, 2, 1e-3  # paper 1's setting (Section 2), two heads, Adam's rate


@dataclass(frozen=True)
class CauseDesign:
    """``inits`` initialisations (seeds ``seed .. seed + inits - 1``) x ``draws`` data streams,
    and the switches on the first ``switch_draws`` streams (chapter 9)."""

    inits: int = 64
    draws: int = 8
    switch_draws: int = 2

    def __post_init__(self):
        object.__setattr__(self, "inits", check_int("inits", self.inits, 2, 1024))
        object.__setattr__(self, "draws", check_int("draws", self.draws, 2, 64))
        object.__setattr__(self, "switch_draws", check_int("switch_draws", self.switch_draws, 1, self.draws))

    def base(self, seed: int, horizon: TrainConfig) -> list[RunSpec]:
        """The base runs, initialisation by initialisation, stream by stream: two heads at paper
        1's setting, Adam at its rate, ``horizon``'s steps and batch."""
        train = dataclasses.replace(horizon, lr=LR, optimizer="adam")
        return [_spec(seed + i, j, train) for i in range(self.inits) for j in range(self.draws)]

    def switched(self, name: str, seed: int, horizon: TrainConfig) -> list[RunSpec]:
        """The runs of switch ``name`` (one of :data:`SWITCHES`) on the first ``switch_draws``
        streams of every initialisation (the big batch: the first stream), in the order of
        :meth:`base`'s runs."""
        check_choice("switch", name, SWITCHES)
        train = dataclasses.replace(horizon, lr=LR, optimizer="adam")
        model, draws = ModelConfig(heads=HEADS), self.switch_draws
        if name == "batch 4096":
            train, draws = dataclasses.replace(train, batch=BIG_BATCH), 1
        elif name == "SGD":
            train = dataclasses.replace(train, optimizer="sgd", lr=MATCHED_SGD_LR)
        else:
            model = ModelConfig(heads=HEADS, form="3.1")
        return [_spec(seed + i, j, train, model) for i in range(self.inits) for j in range(draws)]

    def runs(self, seed: int, horizon: TrainConfig) -> dict[str, list[RunSpec]]:
        """``{"base": ..., <switch>: ...}``: every run of the design."""
        return {"base": self.base(seed, horizon), **{s: self.switched(s, seed, horizon) for s in SWITCHES}}


def _spec(seed: int, draw: int, train: TrainConfig, model: ModelConfig | None = None) -> RunSpec:
    return RunSpec(data=DataConfig(d=D, L=L, sigma2=SIGMA2), model=model or ModelConfig(heads=HEADS), train=train,
                   seed=seed, data_seed=DATA_SEED0 + draw)


def cause_design(profile: str, inits: int | None = None, draws: int | None = None,
                 switch_draws: int | None = None) -> CauseDesign:
    """The profile's design (:data:`CAUSES`) with the given values in place of its own."""
    base = CAUSES[check_choice("profile", profile, ("quick", "paper"))]
    inits = base["inits"] if inits is None else check_int("inits", inits, 2, 1024)
    draws = base["draws"] if draws is None else check_int("draws", draws, 2, 64)
    switch_draws = min(base["switch_draws"], draws) if switch_draws is None else check_int(
        "switch_draws", switch_draws, 1, draws)
    return CauseDesign(inits, draws, switch_draws)
