"""The book's one figure style: seaborn's white grid, head colours, the diverging colour map.

Imported by every figure module of :mod:`icl_lib.figures` (which sets the style once).
"""

from __future__ import annotations

import contextlib

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
import torch

__all__ = ["set_style", "as_array", "fixed_jitter", "HEAD_COLORS", "CMAP"]

HEAD_COLORS = sns.color_palette("tab10")
CMAP = "RdBu_r"


def set_style() -> None:
    """The book's plotting style (called on import)."""
    sns.set_theme(context="notebook", style="whitegrid", font_scale=0.9)
    plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 100, "axes.titlesize": 10, "figure.autolayout": False})


def as_array(t) -> np.ndarray:
    """A tensor or array-like as a float64 numpy array."""
    return t.detach().double().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t, dtype=float)



@contextlib.contextmanager
def fixed_jitter(seed: int = 0):
    """Seaborn's strip plots jitter their dots with numpy's global random state; inside this block
    that state is seeded, so a figure is the same at every build (the state is restored after)."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


set_style()
