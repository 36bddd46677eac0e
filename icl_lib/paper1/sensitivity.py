"""The same predictor for every head count and every optimiser setting (paper 1, §3, C.1, §4.2).

Paper 1 says that all multi-head models learn the same predictor -- "across different models, the
limiting value of [|omega|] are the same", as is the summed OV entry of each sign group (C.1 (ii)),
with dummy heads appearing "when H > 2" and never at H = 2, where "there should be at least one
positive head and one negative head" (C.1 (iii)) -- and that "the results are not sensitive to the
choice of optimization algorithm, hyperparameters such as batch size and learning rate" (C.1),
while "the learned scale [omega] depends on the learning rate, training steps, and batch size (if
SGD or Adam is applied) due to the 'river valley' loss landscape" (§4.2).  Chapter 2 measures both:

* :func:`group_scales` -- per model in the positive/negative pattern, the mean ``|omega_h|`` over
  its live heads and the summed ``mu_h`` of its positive group (C.1 (ii));
* :func:`dummy_fraction` -- the fraction of models with a dummy head, per head count (C.1 (iii));
* :func:`end_states`, :func:`end_state_table` -- per setting, the seeds in the pattern, the
  learned rate and the scale;
* :data:`ALTERNATIVES`, :func:`alternative_configs`, :func:`sensitivity_specs` -- the profile's
  training with one factor changed at a time: a learning rate 3 times the profile's, a batch of 64
  instead of 256, and plain SGD instead of Adam.  SGD's rate, 0.03, was chosen from a pilot of
  20,000 steps on two three-head seeds (900, 901, not used here) at 0.003, 0.01, 0.03 and 0.1: the
  rates that left the single head's loss within the first 10,000 steps were 0.01 to 0.1, and 0.03
  is their middle.  The runs use fresh seeds (:data:`SENSITIVITY_SEED`, from
  :data:`~icl_lib.paper1.seed_ranges.SEED_RANGES`; the pilot's seeds are there too).
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ..circuits import PatternSummary
from ..config import DataConfig, ModelConfig, RunSpec, TrainConfig
from ..engine import Run
from .seed_ranges import first_seed
from ..stats import LEVEL, Estimate, median_ci, proportion_ci
from ..validate import check_choice, check_int

__all__ = ["ALTERNATIVES", "SENSITIVITY_SEED", "SENSITIVITY_SGD_LR", "alternative_configs", "sensitivity_specs",
           "group_scales", "model_scales", "dummy_fraction", "end_states", "end_state_table"]

SENSITIVITY_SGD_LR = 0.03  # plain SGD's rate (see the module's docstring)
SENSITIVITY_SEED = first_seed("sensitivity")  # fresh seeds (:data:`~icl_lib.paper1.seed_ranges.SEED_RANGES`)
# one factor at a time, against the profile's training: name -> what changes
ALTERNATIVES = {
    "lr x3": "Adam at three times the profile's learning rate",
    "batch 64": "Adam with 64 fresh sequences per step instead of 256",
    "SGD": f"plain SGD at learning rate {SENSITIVITY_SGD_LR} instead of Adam",
}


def alternative_configs(base: TrainConfig) -> dict[str, TrainConfig]:
    """The profile's :class:`TrainConfig` ``base`` with one factor of :data:`ALTERNATIVES` changed
    (steps, history and validation set unchanged).  Chapter 2."""
    return {
        "lr x3": dataclasses.replace(base, lr=3 * base.lr),
        "batch 64": dataclasses.replace(base, batch=64),
        "SGD": dataclasses.replace(base, optimizer="sgd", lr=SENSITIVITY_SGD_LR),
    }


def sensitivity_specs(heads: int, seeds: int, seed: int, data: DataConfig, base: TrainConfig) -> dict[str, list[RunSpec]]:
    """``{alternative: [RunSpec per seed]}``: ``seeds`` models of ``heads`` heads with run seeds
    ``seed, seed + 1, ...`` for every alternative of :func:`alternative_configs`.  Chapter 2."""
    heads = check_int("heads", heads, 2, 16)
    seeds = check_int("seeds", seeds, 1, 1_000)
    seed = check_int("seed", seed, 0)
    return {name: [RunSpec(data=data, model=ModelConfig(heads=heads), train=cfg, seed=seed + k) for k in range(seeds)]
            for name, cfg in alternative_configs(base).items()}


def _live(p: PatternSummary) -> list[int]:
    return [h for h in range(p.heads) if p.groups[h] != "dummy"]


def group_scales(patterns: Sequence[PatternSummary]) -> dict[str, np.ndarray]:
    """For the models of ``patterns`` in the positive/negative pattern: ``"omega"``, each model's
    mean ``|omega_h|`` over its live heads, and ``"mu+"``, its positive group's summed ``mu_h``
    (paper 1, C.1 (ii): both the same for every H).  Chapter 2."""
    pn = [p for p in patterns if p.kind == "pos/neg"]
    return {"omega": np.array([np.mean([abs(p.omega[h]) for h in _live(p)]) for p in pn]),
            "mu+": np.array([sum(m for m in p.mu if m > 0) for p in pn])}


def model_scales(patterns: Sequence[PatternSummary]) -> dict[str, np.ndarray]:
    """For every model of ``patterns`` whatever its pattern: ``"omega"``, its mean ``|omega_h|`` over
    its live heads, and ``"mu+"``, the larger of its two groups' ``|summed mu_h|`` (the one group of a
    single-sign model): the whole population's figures beside :func:`group_scales`.  Chapter 2."""
    def group_mu(p):
        live = _live(p)
        pos = sum(p.mu[h] for h in live if p.omega[h] > 0)
        neg = sum(p.mu[h] for h in live if p.omega[h] < 0)
        return max(abs(pos), abs(neg))

    ps = list(patterns)
    return {"omega": np.array([np.mean([abs(p.omega[h]) for h in _live(p)]) for p in ps]),
            "mu+": np.array([group_mu(p) for p in ps])}


def dummy_fraction(patterns: Sequence[PatternSummary], level: float = LEVEL, among: str = "pos/neg") -> Estimate:
    """The fraction of the models of ``patterns`` that have at least one dummy head, with its exact
    interval (paper 1, C.1 (iii)): among those in the positive/negative pattern (``among="pos/neg"``)
    or among all of them (``"all"``; a two-head model in the pattern has two live heads by
    definition, so only ``"all"`` can find a dummy head there).  Chapter 2."""
    check_choice("among", among, ("pos/neg", "all"))
    pool = list(patterns) if among == "all" else [p for p in patterns if p.kind == "pos/neg"]
    if not pool:
        return Estimate(float("nan"), -float("inf"), float("inf"), level, f"no model ({among})")
    return proportion_ci(sum(p.n_dummy > 0 for p in pool), len(pool), level)


def end_states(runs: Mapping[str, Sequence[Run]]) -> dict[str, dict]:
    """Per setting of ``runs`` (``{name: [runs]}``): ``"seeds"``, ``"pos/neg"`` (how many end in the
    positive/negative pattern), ``"eta"`` (the median learned rate over those, with its
    order-statistic interval; unbounded with fewer than six), ``"eta all"`` (the same over every
    model) and ``"omega"`` (each such model's mean ``|omega_h|`` over its live heads,
    :func:`group_scales`).  Chapter 2."""
    out = {}
    for name, rs in runs.items():
        ps = [r.pattern() for r in rs]
        pn = [p for p in ps if p.kind == "pos/neg"]
        eta = median_ci([p.eta for p in pn]) if pn else Estimate(float("nan"), -float("inf"), float("inf"))
        out[name] = {"seeds": len(ps), "pos/neg": len(pn), "eta": eta, "eta all": median_ci([p.eta for p in ps]),
                     "omega": group_scales(pn)["omega"]}
    return out


def end_state_table(states: Mapping[str, dict]) -> pd.DataFrame:
    """One row per setting of :func:`end_states`: seeds, seeds in the pattern, the median learned
    rate with its interval, and the median ``|omega|``.  Chapter 2."""
    return pd.DataFrame([{"setting": name, "seeds": s["seeds"], "pos/neg": s["pos/neg"], "eta": s["eta"].value,
                          "eta lo": s["eta"].lo, "eta hi": s["eta"].hi,
                          "median |omega|": float(np.median(s["omega"])) if len(s["omega"]) else float("nan")}
                         for name, s in states.items()])
