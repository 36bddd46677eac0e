"""What test_figures.py, test_figures_chapters.py, test_figures_sweeps.py share: helpers, fixtures and constants."""

import numpy as np
import torch

from icl_lib.paper1.dynamics.landscape import reparam_circuits
from icl_lib.paper1.dynamics.stage_detection import detect_stages



def _stage_summary():
    """A two-head history (steps 0, 10, ..., 50): pattern (3.1) throughout, Stage I from 20, Stage II from 40."""
    omega = [[0.1, 0.05]] * 2 + [[0.1, -0.05]] * 2 + [[0.1, -0.1]] * 2
    mu = [[0.1, 0.1]] * 2 + [[1.0, -1.0]] * 4
    KQ, OV = reparam_circuits(torch.tensor(omega, dtype=torch.float64), torch.tensor(mu, dtype=torch.float64), 5)
    st = detect_stages(KQ, OV, torch.arange(6) * 10, 5)
    assert st.marks() == {"(3.1)": 0, "I": 20, "II": 40}  # the design the figure tests rely on
    return st


def _vlines(ax):
    """x positions of the vertical lines (axvline) of ``ax``."""
    return [float(ln.get_xdata()[0]) for ln in ax.lines if len(set(np.asarray(ln.get_xdata(), float))) == 1
            and len(ln.get_xdata()) == 2 and ln.get_transform() is not ax.transData]


def _hlines(ax):
    """y positions of the horizontal lines (axhline) of ``ax``."""
    return [float(ln.get_ydata()[0]) for ln in ax.lines if len(ln.get_ydata()) == 2
            and ln.get_ydata()[0] == ln.get_ydata()[1] and ln.get_transform() is not ax.transData]
