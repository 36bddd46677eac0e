"""Experiments shared between chapters, defined once so that their runs share the run cache.

:func:`heads_sweep` trains models with H heads for every H in ``heads`` and ``seeds`` seeds each,
as one ensemble (paper 1, Section 3: H = 1, 2, 3, 4).  Chapter 2 (patterns), chapter 3 (their
dynamics) and chapter 5 (what the trained models compute) call it with the same defaults and so
reuse each other's trained models.

Chapter 2's read-outs of a sweep ``{H: [runs]}`` are here too: :func:`sweep_patterns` (the
pattern metrics of :func:`~icl_lib.circuits.summarize_pattern` for every run), :func:`head_table`
(one row per head), :func:`model_table` (one row per model), :func:`pattern_counts` (fractions of
seeds per pattern), :func:`scale_comparison` (single head against multi-head scales) and
:func:`pos_neg_history` (the positive/negative pattern along training).
"""

from __future__ import annotations

import ast
import numbers
from typing import Sequence

import numpy as np
import pandas as pd

from ..circuits import PatternSummary, pattern_history
from ..config import DataConfig, ModelConfig, RunSpec, TrainConfig
from ..engine import Run, train
from ..validate import check_int, fail

__all__ = [
    "as_heads",
    "heads_sweep_specs",
    "heads_sweep",
    "sweep_patterns",
    "head_table",
    "model_table",
    "pattern_counts",
    "scale_comparison",
    "pos_neg_history",
]


def as_heads(heads: int | Sequence[int], hi: int = 256) -> list[int]:
    """A chapter's ``heads`` parameter as a validated, de-duplicated, sorted list of head counts in
    ``[1, hi]``: one int (papermill ``-p heads 3``), a list or tuple of them, or the text of a
    bracketed list (papermill's ``-p heads [1,2]`` passes the string ``"[1,2]"``)."""
    hi = check_int("hi", hi, 1, 256)
    accepted = f"a head count in [1, {hi}] or a non-empty list of them"
    if isinstance(heads, str) and heads.strip().startswith("["):
        try:
            heads = ast.literal_eval(heads.strip())
        except (ValueError, SyntaxError):
            fail("heads", heads, accepted)
    if isinstance(heads, numbers.Real) and not isinstance(heads, bool):
        heads = [heads]
    if not isinstance(heads, (list, tuple)) or not heads:
        fail("heads", heads, accepted)
    return sorted({check_int("heads", h, 1, hi) for h in heads})


def heads_sweep_specs(
    heads: int | Sequence[int], seeds: int, seed: int, data: DataConfig, train_cfg: TrainConfig, **model_kw
) -> list[RunSpec]:
    """One :class:`RunSpec` per (H, k) with run seed ``seed + k``, ``k < seeds``, ordered by H then k."""
    seeds = check_int("seeds", seeds, 1, 10_000)
    seed = check_int("seed", seed, 0)
    return [
        RunSpec(data=data, model=ModelConfig(heads=H, **model_kw), train=train_cfg, seed=seed + k)
        for H in as_heads(heads)
        for k in range(seeds)
    ]


def heads_sweep(
    heads: int | Sequence[int],
    seeds: int,
    seed: int,
    data: DataConfig,
    train_cfg: TrainConfig,
    device: str = "auto",
    **model_kw,
) -> dict[int, list[Run]]:
    """Train (or load) the sweep; returns ``{H: [runs for seeds seed, seed+1, ...]}``."""
    specs = heads_sweep_specs(heads, seeds, seed, data, train_cfg, **model_kw)
    runs = train(specs, device=device)
    out: dict[int, list[Run]] = {}
    for s, r in zip(specs, runs):
        out.setdefault(s.model.heads, []).append(r)
    return out


# ------------------------------------------------------------------ chapter 2's read-outs
def sweep_patterns(sweep: dict[int, list[Run]]) -> dict[int, list[PatternSummary]]:
    """The pattern metrics of paper 1, Section 3 (:func:`~icl_lib.circuits.summarize_pattern` of
    the final circuits) for every run of a sweep, ``{H: [one summary per seed]}``.  Chapter 2."""
    return {H: [r.pattern() for r in runs] for H, runs in sweep.items()}


def head_table(sweep: dict[int, list[Run]], patterns: dict | None = None) -> "pandas.DataFrame":  # noqa: F821
    """One row per head of every model, indexed by ``(H, seed, head)`` (heads from 1): the KQ scale
    ``omega_h``, the OV entry ``mu_h`` (pattern (3.1)), the head's group, the model's effective rate
    ``eta = sum_h mu_h omega_h`` and its pattern (paper 1, Section 3).  ``patterns`` defaults to
    :func:`sweep_patterns`.  Chapter 2."""
    patterns = sweep_patterns(sweep) if patterns is None else patterns
    rows = []
    for H, runs in sweep.items():
        for run, p in zip(runs, patterns[H]):
            for h in range(H):
                rows.append({"H": H, "seed": run.spec.seed, "head": h + 1, "omega_h": p.omega[h],
                             "mu_h": p.mu[h], "group": p.groups[h], "eta (model)": p.eta,
                             "pattern": p.kind})
    return pd.DataFrame(rows).set_index(["H", "seed", "head"])


def model_table(sweep: dict[int, list[Run]], patterns: dict | None = None) -> "pandas.DataFrame":  # noqa: F821
    """One row per model of a sweep (paper 1, Section 3's observations as measurements): ``H``,
    ``seed``, ``pattern`` (``single-head``, ``pos/neg`` or ``single-sign``), ``dummy heads``,
    ``KQ off-diag`` and ``OV off-last`` (distance from the form (3.1)), ``sign matched``,
    ``zero-sum`` (``|sum_h mu_h| / sum_h |mu_h|``), ``omega spread`` and ``eta``; see
    :class:`~icl_lib.circuits.PatternSummary`.  ``patterns`` defaults to :func:`sweep_patterns`.
    Chapter 2."""
    patterns = sweep_patterns(sweep) if patterns is None else patterns
    rows = []
    for H, runs in sweep.items():
        for run, p in zip(runs, patterns[H]):
            rows.append({"H": H, "seed": run.spec.seed, "pattern": p.kind, "dummy heads": p.n_dummy,
                         "KQ off-diag": p.kq_offdiag, "OV off-last": p.ov_offlast,
                         "sign matched": p.sign_matched, "zero-sum": p.zero_sum,
                         "omega spread": p.omega_spread, "eta": p.eta})
    return pd.DataFrame(rows)


def pattern_counts(models: "pandas.DataFrame", steps: int) -> "pandas.DataFrame":  # noqa: F821
    """Per head count ``H`` (index), from :func:`model_table`'s ``models``: the number of ``seeds``,
    the fractions of models in the positive/negative pattern (``pos_neg``) and in the single-sign
    solution (``single_sign``), the fraction with a dummy head (``with_dummy``), and the training
    ``steps`` they had (paper 1, Section 3; chapter 2)."""
    has_dummy = models["dummy heads"] > 0
    counts = models.assign(**{"has dummy head": has_dummy}).groupby("H").agg(
        seeds=("seed", "size"),
        pos_neg=("pattern", lambda s: (s == "pos/neg").mean()),
        single_sign=("pattern", lambda s: (s == "single-sign").mean()),
        with_dummy=("has dummy head", "mean"),
    )
    counts["steps"] = steps
    return counts


def _live_abs(patterns: list[PatternSummary], key: str) -> list[float]:
    """``|omega_h|`` or ``|mu_h|`` (``key``) of the non-dummy heads of the pos/neg models."""
    return [abs(getattr(p, key)[h]) for p in patterns if p.kind == "pos/neg"
            for h in range(p.heads) if p.groups[h] != "dummy"]


def scale_comparison(patterns: dict[int, list[PatternSummary]]) -> dict:
    """Single head against multi-head scales (paper 1, Section 3: the single head has the larger
    KQ and the smaller OV circuit).  Returns ``{"multi_H": [...]}``, the head counts ``H >= 2``
    with at least one model in the positive/negative pattern, and, when ``H = 1`` and such an
    ``H`` are both present, the medians ``w1 = |omega|`` and ``m1 = |mu|`` over the single-head
    seeds, ``w_multi`` of ``|omega_h|`` over the non-dummy heads of the multi-head pos/neg models,
    and ``mu_multi_group`` of the positive group's summed ``mu_h`` per such model.  Chapter 2."""
    multi_H = [H for H in patterns if H >= 2 and len(_live_abs(patterns[H], "omega"))]
    out: dict = {"multi_H": multi_H}
    if 1 in patterns and multi_H:
        out["w1"] = float(np.median([abs(p.omega[0]) for p in patterns[1]]))
        out["m1"] = float(np.median([abs(p.mu[0]) for p in patterns[1]]))
        out["w_multi"] = float(np.median([w for H in multi_H for w in _live_abs(patterns[H], "omega")]))
        out["mu_multi_group"] = float(np.median([sum(abs(m) for m in p.mu if m > 0) for H in multi_H
                                                 for p in patterns[H] if p.kind == "pos/neg"]))
    return out


def pos_neg_history(sweep: dict[int, list[Run]]) -> tuple[np.ndarray, dict, dict]:
    """The positive/negative pattern along training, from the circuits in the runs' histories
    (:func:`~icl_lib.circuits.pattern_history`), for every ``H >= 2`` of a sweep whose runs share
    one training configuration.  Returns ``steps (T,)``, the logged steps; ``{H: (T,)}``, the
    fraction of seeds in the pattern at each logged step; and ``{H: [step or None per seed]}``,
    the first logged step from which a seed stays in the pattern to the end (``None``: not in it
    at the end).  Paper 1, Section 3; chapter 2."""
    steps = next(iter(sweep.values()))[0].history["step"].numpy()  # (T,)
    fractions, escape = {}, {}
    for H, runs in sweep.items():
        if H < 2:
            continue
        kinds = np.array([[p.kind == "pos/neg" for p in pattern_history(r.history["KQ"], r.history["OV"], r.d)]
                          for r in runs])  # (seeds, T)
        fractions[H] = kinds.mean(0)
        # stays from t on: the reversed cumulative product of the reversed row is 1 from t on
        escape[H] = [int(steps[np.argmax(np.cumprod(k[::-1])[::-1])]) if k[-1] else None for k in kinds]
    return steps, fractions, escape
