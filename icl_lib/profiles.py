"""Run profiles: ``quick`` (CPU, minutes) and ``paper`` (the paper's settings, for a GPU).

``paper`` is paper 1's training (Section 2, authors' code): Adam, lr 1e-3, batch 256, 500,000
steps.  ``quick`` keeps Adam and the batch, trains for 4,000 steps and uses a 3x larger learning
rate (3e-3): at 4,000 steps this brings more seeds through Stage II (measured on 4 seeds per H:
2-head models reached the positive/negative pattern in 4/4 seeds at 3e-3 against 2/4 at 1e-3, with
the same test loss); the paper reports the patterns insensitive to optimiser and hyper-parameters.
It does not reach the slow drift along the "river valley" of Section 4.2.
``auto`` is ``paper`` on a CUDA device and ``quick`` otherwise; the environment variable
``ICL_PROFILE`` (``quick`` or ``paper``) overrides ``auto``.  Every chapter's ``parameters`` cell
has ``profile = "auto"``.
"""

from __future__ import annotations

import dataclasses
import os

from .config import TrainConfig, check_choice, resolve_device

__all__ = ["PROFILES", "resolve_profile", "train_config"]

PROFILES = ("auto", "quick", "paper")

_TRAIN = {
    "quick": TrainConfig(steps=4000, batch=256, lr=3e-3, n_log=120, val_size=2048),
    "paper": TrainConfig(steps=500_000, batch=256, lr=1e-3, n_log=400, val_size=8192),
}


def resolve_profile(profile: str = "auto", device: str = "auto") -> str:
    """``quick`` or ``paper`` for the requested profile (``auto`` looks at ``ICL_PROFILE``, then the device)."""
    check_choice("profile", profile, PROFILES)
    if profile != "auto":
        return profile
    env = os.environ.get("ICL_PROFILE")
    if env:
        return check_choice("ICL_PROFILE", env, PROFILES[1:])
    return "paper" if resolve_device(device).type == "cuda" else "quick"


def train_config(profile: str, **overrides) -> TrainConfig:
    """The profile's :class:`TrainConfig`; ``overrides`` whose value is ``None`` are ignored."""
    base = _TRAIN[check_choice("profile", profile, PROFILES[1:])]
    return dataclasses.replace(base, **{k: v for k, v in overrides.items() if v is not None})
