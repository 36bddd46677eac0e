"""The run profiles, ``quick`` (a CPU, minutes) and ``paper`` (the papers' sizes), and the training
each gives paper 1's models: :data:`SETTINGS` (the engine's one registry; every chapter's own sizes
and seed counts per profile live in its setup, :mod:`icl_lib.setups`).

Paper 1 (``"paper1.train"``, :func:`train_config`): ``paper`` is the paper's training (Section 2,
authors' code): Adam, lr 1e-3, batch 256, 500,000 steps.  ``quick`` keeps Adam and the batch,
trains for 4,000 steps and uses a 3x larger learning rate (3e-3): at 4,000 steps this brings more
seeds through Stage II (measured on 4 seeds per H: 2-head models reached the positive/negative
pattern in 4/4 seeds at 3e-3 against 2/4 at 1e-3, with the same test loss); the paper reports the
patterns insensitive to optimiser and hyper-parameters.  It does not reach the slow drift along the
"river valley" of Section 4.2.

``auto`` is ``paper`` on a CUDA device and ``quick`` otherwise; the environment variable
``ICL_PROFILE`` (``quick`` or ``paper``) overrides ``auto``.  Every chapter's ``parameters`` cell
has ``profile = "auto"``.
"""

from __future__ import annotations

import dataclasses
import os

from ..config import TrainConfig, resolve_device
from ..validate import check_choice, fail

__all__ = ["PROFILE_CHOICES", "SETTINGS", "resolve_profile", "profile_settings", "train_config"]

PROFILE_CHOICES = ("auto", "quick", "paper")

SETTINGS: dict[str, dict[str, dict]] = {
    "paper1.train": {
        "quick": dict(steps=4000, batch=256, lr=3e-3, n_log=120, val_size=2048),
        "paper": dict(steps=500_000, batch=256, lr=1e-3, n_log=400, val_size=8192),
    },
}


def resolve_profile(profile: str, device: str) -> str:
    """``quick`` or ``paper`` for the requested profile (``auto`` looks at ``ICL_PROFILE``, then the
    device).  ``device``: the device the work runs on, resolved already (``"cpu"`` or ``"cuda"``, a
    chapter setup's, used as it is) or ``"auto"`` (this machine's, resolved here)."""
    check_choice("profile", profile, PROFILE_CHOICES)
    if profile != "auto":
        return profile
    env = os.environ.get("ICL_PROFILE")
    if env:
        return check_choice("ICL_PROFILE", env, PROFILE_CHOICES[1:])
    if device not in ("cpu", "cuda"):
        device = resolve_device(device).type
    return "paper" if device == "cuda" else "quick"


def profile_settings(experiment: str, profile: str) -> dict:
    """A copy of ``experiment``'s settings in ``profile`` (``quick`` or ``paper``)."""
    check_choice("experiment", experiment, tuple(SETTINGS))
    settings = SETTINGS[experiment].get(profile)  # a resolved profile, checked where it was resolved
    if settings is None:
        fail("profile", profile, f"one of {PROFILE_CHOICES[1:]} (resolved: resolve_profile)")
    return dict(settings)


def train_config(profile: str, **overrides) -> TrainConfig:
    """Paper 1's :class:`TrainConfig` in ``profile``; ``overrides`` whose value is ``None`` are ignored."""
    base = TrainConfig(**profile_settings("paper1.train", profile))
    return dataclasses.replace(base, **{k: v for k, v in overrides.items() if v is not None})
