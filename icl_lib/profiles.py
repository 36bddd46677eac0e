"""Run profiles: ``quick`` (CPU, minutes) and ``paper`` (the paper's settings, for a GPU).

``paper`` is paper 1's training (Section 2, authors' code): Adam, lr 1e-3, batch 256, 500,000
steps.  ``quick`` keeps batch and learning rate and trains for fewer steps: enough for the patterns
of Section 3 to form, not for the slow drift along the "river valley" of Section 4.2.
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
    "quick": TrainConfig(steps=3000, batch=256, lr=1e-3, n_log=120, val_size=2048),
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
