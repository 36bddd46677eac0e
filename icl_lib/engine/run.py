"""A trained run and the models built from runs (chapters 1-7).

:class:`Run` is what training returns and the run cache stores: the :class:`~icl_lib.config.RunSpec`,
the final parameters, the logged history (losses and circuits) and where and how fast it trained.
:func:`stack_models` turns trained runs back into one :class:`~icl_lib.models.AttentionEnsemble`
for batched evaluation; :func:`empty_model` builds the zero ensemble the trainer starts from;
:func:`describe_sources` says in words where a chapter's runs came from (trained now, the run
cache, or the run store and the device and dates they were trained on).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import torch

from ..circuits import PatternSummary, mu_of, omega_of, summarize_pattern
from ..config import RunSpec
from ..models import AttentionEnsemble

__all__ = ["Run", "stack_models", "empty_model", "norm_length", "describe_sources", "meta_key"]


@dataclass
class Run:
    """One trained model: its spec, final parameters, history and timing (chapters 1-7)."""

    spec: RunSpec
    params: dict  # Q, K, V (H, D, D) and O (H, N, D), on the CPU
    history: dict  # step (T,), train_loss (T,), val_loss (T,), KQ (T, H, D, D), OV (T, H, N, D)
    meta: dict = field(default_factory=dict)  # device, ensemble size, seconds, model_steps_per_s, cached, stored

    @property
    def source(self) -> str:
        """Where this run came from: ``"store"`` (the run store: trained elsewhere, its device and
        date in ``meta``), ``"cache"`` (the run cache) or ``"trained"`` (trained by this call)."""
        if self.meta.get("stored"):
            return "store"
        return "cache" if self.meta.get("cached") else "trained"

    @property
    def d(self) -> int:
        return self.spec.data.d

    @property
    def KQ(self) -> torch.Tensor:
        """Final ``KQ_h`` circuits, ``(H, D, D)``."""
        return self.history["KQ"][-1]

    @property
    def OV(self) -> torch.Tensor:
        """Final ``OV_h`` circuits, ``(H, N, D)``."""
        return self.history["OV"][-1]

    @property
    def omega(self) -> torch.Tensor:
        return omega_of(self.KQ, self.d)

    @property
    def mu(self) -> torch.Tensor:
        return mu_of(self.OV, self.d)

    @property
    def val_loss(self) -> float:
        return float(self.history["val_loss"][-1])

    def pattern(self, kq_form: bool = True) -> PatternSummary:
        """The book's reading of the final circuits (:func:`~icl_lib.circuits.summarize_pattern`;
        ``kq_form=False``: the OV shape only, for anisotropic covariates)."""
        return summarize_pattern(self.KQ, self.OV, self.d, kq_form=kq_form)

    def model(self, device="cpu", dtype=torch.float64) -> AttentionEnsemble:
        """The trained model as an ensemble of one."""
        return stack_models([self], device=device, dtype=dtype)


_SOURCE_WORDS = {"store": "loaded from the run store", "cache": "loaded from the run cache", "trained": "trained now"}


def describe_sources(runs: Sequence[Run]) -> str:
    """Where ``runs`` came from, in words, for a chapter's training line (chapters 2, 6, 7, 9):
    ``"trained now"``, ``"loaded from the run cache"``, ``"loaded from the run store (trained on
    cpu, 2026-11-20 to 2026-12-02)"``, or, when they came from several places, each with its count
    (``"30 loaded from the run store (...), 18 trained now"``)."""
    runs = list(runs)
    if not runs:
        raise ValueError("runs=[] is invalid: accepted at least one Run")
    counts = {k: sum(r.source == k for r in runs) for k in _SOURCE_WORDS}
    parts = []
    for k, words in _SOURCE_WORDS.items():
        if not counts[k]:
            continue
        if k == "store":
            stored = [r for r in runs if r.source == "store"]
            devices = ", ".join(sorted({str(r.meta.get("device", "?")) for r in stored}))
            days = sorted({str(r.meta.get("date", "?"))[:10] for r in stored})
            span = days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}"
            words = f"{words} (trained on {devices}, {span})"
        parts.append(words if counts[k] == len(runs) else f"{counts[k]} {words}")
    return ", ".join(parts)


def meta_key(spec: RunSpec, meta: dict) -> str:
    """The run-cache key of a run trained as its ``meta`` says (device, draw-ahead, backend)."""
    return spec.key(meta["device"], meta.get("draw_ahead", 1), meta.get("backend", "eager"))


def norm_length(spec: RunSpec) -> int | None:
    """Linear attention's fixed normaliser: the configured one, else the training length L."""
    m = spec.model
    return m.norm_length or (spec.data.L if m.attention == "linear" else None)


def empty_model(specs: Sequence[RunSpec], device, dtype) -> AttentionEnsemble:
    """A zero :class:`AttentionEnsemble` with one model per spec (same d, tasks, attention kind)."""
    s0 = specs[0]
    shape0 = (s0.data.d, s0.data.n_tasks, s0.model.attention, norm_length(s0))
    for k, s in enumerate(specs):
        if (s.data.d, s.data.n_tasks, s.model.attention, norm_length(s)) != shape0:
            raise ValueError(
                f"specs[{k}] has another d, number of tasks, attention kind or linear normaliser than specs[0]: "
                "accepted models of one architecture"
            )
    return AttentionEnsemble(
        [s.model.heads for s in specs],
        s0.data.d,
        n_tasks=s0.data.n_tasks,
        attention=s0.model.attention,
        norm_length=norm_length(s0),
        device=device,
        dtype=dtype,
    )


def stack_models(runs: Sequence[Run], device="cpu", dtype=torch.float64) -> AttentionEnsemble:
    """Trained runs (one architecture: same ``d``, tasks and attention kind) as one
    :class:`AttentionEnsemble` for batched evaluation (chapter 5's length generalisation, for instance)."""
    runs = list(runs)
    model = empty_model([r.spec for r in runs], device, dtype)
    with torch.no_grad():
        for i, r in enumerate(runs):
            H = r.spec.model.heads
            for k in "QKVO":
                getattr(model, k)[i, :H] = r.params[k].to(device, dtype)
    return model.requires_grad_(False)
