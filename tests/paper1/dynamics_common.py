"""What test_dynamics.py, test_dynamics_tables.py, test_dynamics_figures.py share: helpers, fixtures and constants."""

from types import SimpleNamespace

import torch

from icl_lib import DataConfig
from icl_lib.paper1.approx_loss import ApproxLossConfig
from icl_lib.paper1.dynamics.landscape import reparam_circuits



# ------------------------------------------------------------------------------- attention norms


CFG = ApproxLossConfig(5, 40, 0.1)
DATA = DataConfig(d=5, L=40, sigma2=0.1)


# ----------------------------------------------------------------------------- chapter 3's tables
def fake_run(seed, omega, mu, steps=None, d=5):
    """A run-like object whose history holds circuits of the form (3.1) for ``omega, mu (T, H)``."""
    omega, mu = torch.as_tensor(omega, dtype=torch.float64), torch.as_tensor(mu, dtype=torch.float64)
    KQ, OV = reparam_circuits(omega, mu, d)
    steps = torch.arange(len(omega)) * 10 if steps is None else torch.as_tensor(steps)
    return SimpleNamespace(history={"KQ": KQ, "OV": OV, "step": steps}, spec=SimpleNamespace(seed=seed))


# two heads that form Stage I at t = 2 and Stage II at t = 3; |omega| rises to 0.5 and falls to 0.3
POSNEG_OMEGA = [[0.05, 0.04], [0.3, 0.2], [0.5, -0.3], [0.4, -0.4], [0.3, -0.3]]
POSNEG_MU = [[0.1, 0.1], [0.5, 0.4], [1.0, -1.0], [1.5, -1.5], [2.0, -2.0]]
SINGLE_OMEGA = [[0.05, 0.04], [0.2, 0.2], [0.3, 0.3], [0.3, 0.3], [0.3, 0.3]]  # one sign throughout
SINGLE_MU = [[0.1, 0.1], [0.3, 0.3], [0.5, 0.5], [0.6, 0.6], [0.6, 0.6]]


def fake_sweep():
    """{2: [a positive/negative run (seed 0), a single-sign run (seed 1)]}."""
    return {2: [fake_run(0, POSNEG_OMEGA, POSNEG_MU), fake_run(1, SINGLE_OMEGA, SINGLE_MU)]}
