"""Chapter 5's parameters and trained models (paper 1, Section 3, B.1, B.2).

* :func:`check_lengths`, :func:`check_heads` and :func:`check_omegas` validate chapter parameters;
* :data:`VARIANTS`, :func:`variant_specs` -- the 2-head variants of B.1 and B.2 (softmax, linear
  attention with a fixed normaliser, three other normalised activations), declared with the shared
  sweep's specifications (:data:`LABELS` names
  them, :data:`ACTIVATIONS_B2` lists those of Table 1);
* :func:`posneg_runs`, :func:`kept_variants`, :func:`posneg_counts` -- the runs that ended in the
  positive/negative pattern, on which the chapter measures its multi-head statements;
* :func:`median_abs_omega`, :func:`learned_rate`, :func:`stacked_circuits`, :func:`linearised` --
  the trained models' KQ scale, learned rate, circuits and linearised predictor (Theorem 4.2 (i)).

Used by chapter 5 and by the book's training plan (:mod:`icl_lib.book.plan`).
"""

from __future__ import annotations

import numbers
from typing import Mapping, Sequence

import numpy as np
import torch

from ...circuits import effective_preconditioner, effective_rate
from ...config import DataConfig, RunSpec, TrainConfig
from ...engine import Run
from ...validate import check_float_list, check_int, fail
from ..sweeps import as_heads, heads_sweep_specs

__all__ = [
    "check_lengths",
    "check_heads",
    "check_omegas",
    "VARIANTS",
    "ACTIVATIONS_B2",
    "LABELS",
    "variant_specs",
    "posneg_runs",
    "kept_variants",
    "posneg_counts",
    "median_abs_omega",
    "learned_rate",
    "stacked_circuits",
    "linearised",
]

NAN = float("nan")


def check_lengths(Ls: Sequence[int], name: str = "Ls", hi: int | None = None) -> list[int]:
    """A chapter's list of context lengths as sorted distinct ints in ``[2, hi]``; an element that
    is not is reported as ``name[i]`` (chapter 5's ``Ls``)."""
    if isinstance(Ls, (int, float)) and not isinstance(Ls, bool):
        Ls = [Ls]
    if not isinstance(Ls, (list, tuple)) or not Ls:
        fail(name, Ls, "a non-empty list of integers >= 2" if hi is None else
             f"a non-empty list of integers in [2, {hi}]")
    return sorted({check_int(f"{name}[{i}]", L, 2, hi) for i, L in enumerate(Ls)})


def check_heads(heads, hi: int) -> list[int]:
    """Chapter 5's ``heads`` parameter: one head count or a non-empty list of them, each in
    ``[1, hi]`` (reported as ``heads`` or ``heads[i]``), as :func:`~icl_lib.paper1.sweeps.as_heads`'s
    sorted distinct list."""
    if isinstance(heads, (list, tuple)):
        for i, h in enumerate(heads):
            check_int(f"heads[{i}]", h, 1, hi)
    elif isinstance(heads, numbers.Real) and not isinstance(heads, bool):
        check_int("heads", heads, 1, hi)
    return as_heads(heads)


def check_omegas(omegas, fit_max: float, name: str = "lin_omegas") -> list[float]:
    """Chapter 5's grid of KQ scales ``omega`` of Theorem 4.2 (i): a list (or its text) of at most
    20 floats in ``(0, 2]``, each reported as ``name[i]``, returned sorted and distinct; at least
    two of them at most ``fit_max`` (the points the order is fitted on)."""
    out = sorted(set(check_float_list(name, omegas, 0.0, 2.0, lo_open=True, max_len=20)))
    if sum(w <= fit_max for w in out) < 2:
        fail(name, omegas, f"a list with at least two values <= lin_fit_max = {fit_max:g}")
    return out


# ----------------------------------------------------------------------------- chapter 5's models
# the 2-head variants of chapter 5, in training order: softmax, linear attention with a fixed
# normaliser (B.1) and three other normalised activations (B.2)
VARIANTS = ("softmax", "linear", "one_plus_tanh", "quadratic", "square")
ACTIVATIONS_B2 = ("softmax", "one_plus_tanh", "quadratic", "square")  # Table 1, Figures 8-10
LABELS = {  # f of each variant, as the chapter's tables and figures name it
    "softmax": "exp (softmax)",
    "one_plus_tanh": "1 + tanh(s)",
    "quadratic": "1 + s + s^2/2",
    "square": "(1 + s)^2",
    "linear": "linear, N = L_train",
}


def variant_specs(seeds: int, seed: int, data: DataConfig, train_cfg: TrainConfig) -> list[RunSpec]:
    """The 2-head variants: ``seeds`` 2-head models of every kind of :data:`VARIANTS`
    (the shared sweep's specifications with ``attention=kind``), grouped by kind.  Chapter 5."""
    return [s for a in VARIANTS for s in heads_sweep_specs(2, seeds, seed, data, train_cfg, attention=a)]


def posneg_runs(groups: Mapping[object, Sequence[Run]]) -> dict[object, list[Run]]:
    """The runs of every multi-head group (``H >= 2``) that ended in the positive/negative pattern
    of paper 1, Section 3 (``PatternSummary.kind == "pos/neg"``); single-head groups are left out.
    Chapter 5 measures its multi-head statements on these."""
    return {k: [r for r in rs if r.pattern().kind == "pos/neg"]
            for k, rs in groups.items() if rs and rs[0].spec.model.heads >= 2}


def kept_variants(variants: Mapping[str, Sequence[Run]]) -> dict[str, list[Run]]:
    """The 2-head variants chapter 5 compares: those in the positive/negative pattern (all of them
    when none is, and always all of the linear attention ones, which have no constant to cancel
    and so no reason to split into two signs; paper 1, B.1)."""
    pn = posneg_runs(variants)
    return {a: (list(rs) if a == "linear" else pn[a]) or list(rs) for a, rs in variants.items()}


def posneg_counts(groups: Mapping[object, Sequence[Run]]) -> dict[object, str]:
    """``"n/m"``: how many of each multi-head group's ``m`` runs ended in the positive/negative
    pattern (linear attention left out: see :func:`kept_variants`).  Chapter 5."""
    pn = posneg_runs({k: rs for k, rs in groups.items() if k != "linear"})
    return {k: f"{len(v)}/{len(groups[k])}" for k, v in pn.items()}


def median_abs_omega(runs: Sequence[Run]) -> float:
    """Median ``|omega_h|`` over all heads of ``runs`` (NaN without runs): the KQ scale of the
    trained multi-head models (paper 1, Section 3; chapter 5's size of the linearisation error)."""
    w = [abs(w) for r in runs for w in r.omega.tolist()]
    return float(np.median(w)) if w else NAN


def learned_rate(posneg: Mapping[int, Sequence[Run]], fallback: float) -> float:
    """Median learned rate ``eta = sum_h mu_h omega_h`` over every run of ``posneg``
    (:func:`posneg_runs` of the sweep); ``fallback`` when there is none.  The rate a trained
    multi-head model carries to other context lengths (paper 1, Figure 3; chapter 5)."""
    eta = [r.pattern().eta for rs in posneg.values() for r in rs]
    return float(np.median(eta)) if eta else float(fallback)


def stacked_circuits(runs: Sequence[Run]) -> tuple[torch.Tensor, torch.Tensor]:
    """The final circuits of runs with one head count, in float64: ``KQ (R, H, D, D)`` and
    ``OV (R, H, N, D)`` (paper 1, eq. (2.2)'s ``KQ_h = K_h^T Q_h / sqrt(D)``, ``OV_h``)."""
    KQ = torch.stack([r.KQ for r in runs]).double()  # (R, H, D, D)
    OV = torch.stack([r.OV for r in runs]).double()  # (R, H, N, D)
    return KQ, OV


def linearised(runs: Sequence[Run], d: int, c_f: float = 1.0) -> tuple[torch.Tensor, np.ndarray]:
    """Every run's linearised predictor (paper 1, Theorem 4.2 (i), B.2): the pre-conditioner
    ``Gamma = c_f sum_h mu_h KQ_h[:d, :d]`` ``(R, d, d)`` and the rate
    ``eta = c_f sum_h mu_h omega_h`` ``(R,)``.  Chapter 5."""
    KQ, OV = stacked_circuits(runs)
    return effective_preconditioner(KQ, OV, d, c_f), effective_rate(KQ, OV, d, c_f).numpy()
