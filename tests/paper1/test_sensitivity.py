"""Chapter 2's scales and dummy heads across head counts, and its other optimiser settings."""

import pytest
import torch

from icl_lib import TrainConfig
from icl_lib.circuits import summarize_pattern
from icl_lib.paper1 import sensitivity as sens
from icl_lib.paper1.dynamics.landscape import reparam_circuits

D = 3


def _pattern(omega, mu):
    KQ, OV = reparam_circuits(torch.tensor([omega], dtype=torch.float64),
                              torch.tensor([mu], dtype=torch.float64), D)
    return summarize_pattern(KQ[0], OV[0], D)


def test_a_two_head_model_in_the_pattern_never_has_a_dummy_head_so_the_claim_counts_every_model():
    pos_neg = _pattern([0.3, -0.3], [2.0, -2.0])
    one_dead = _pattern([0.3, 0.01], [2.0, 0.01])  # one live head: single-sign, with a dummy head
    assert pos_neg.kind == "pos/neg" and pos_neg.n_dummy == 0
    assert one_dead.kind == "single-sign" and one_dead.n_dummy == 1
    models = [pos_neg, pos_neg, one_dead]
    assert sens.dummy_fraction(models).value == 0.0  # among the pattern: 0 by construction
    every = sens.dummy_fraction(models, among="all")
    assert every.value == pytest.approx(1 / 3) and every.lo < 1 / 3 < every.hi
    with pytest.raises(ValueError, match="^among="):
        sens.dummy_fraction(models, among="pattern")


def test_group_scales_average_the_live_heads_and_sum_the_positive_group():
    three = _pattern([0.2, 0.2, -0.4], [1.0, 1.5, -2.5])
    scales = sens.group_scales([three, _pattern([0.3, 0.3], [1.0, 1.0])])  # the second is single-sign
    assert scales["omega"].tolist() == pytest.approx([(0.2 + 0.2 + 0.4) / 3])
    assert scales["mu+"].tolist() == pytest.approx([2.5])


def test_each_alternative_changes_one_factor_of_the_profile_training():
    base = TrainConfig(steps=100, batch=256, lr=1e-3)
    alts = sens.alternative_configs(base)
    assert set(alts) == set(sens.ALTERNATIVES)
    changes = {name: {f: getattr(cfg, f) for f in ("lr", "batch", "optimizer") if getattr(cfg, f) != getattr(base, f)}
               for name, cfg in alts.items()}
    assert changes == {"lr x3": {"lr": pytest.approx(3e-3)}, "batch 64": {"batch": 64},
                       "SGD": {"optimizer": "sgd", "lr": sens.SENSITIVITY_SGD_LR}}
    assert all(cfg.steps == base.steps and cfg.n_log == base.n_log for cfg in alts.values())
