"""Chapter 6's parameters and runs: one two-head model per correlation ``rho`` and seed (paper 1, B.3).

* :func:`check_rhos`, :func:`check_eval_lengths` -- the chapter's correlations and context lengths;
* :func:`rho_specs` -- the runs, KMS covariance ``rho^|i-j|`` (chapter 6's setup trains them as
  one call of the engine);
* :func:`training_summary`, :func:`pos_neg_runs` -- what training did, and the runs that ended in
  the positive/negative pattern (the chapter's selection rule).

Used by chapter 6 and by the book's training plan (:mod:`icl_lib.book.plan`).
"""

from __future__ import annotations

import numbers
from typing import Mapping, Sequence

from ...config import DataConfig, ModelConfig, RunSpec, TrainConfig
from ...engine import Run, describe_sources
from ...validate import check_float, check_int, fail, literal_list

__all__ = [
    "check_rhos",
    "check_eval_lengths",
    "training_summary",
    "pos_neg_runs",
]


# ------------------------------------------------------------------------------- chapter 6: parameters
def _as_list(name: str, values, accepted: str, max_len: int) -> list:
    """``values`` as a list of 1 to ``max_len`` entries: one number becomes ``[number]``, and text
    that spells a list (papermill's ``-p rhos [0.5]`` passes ``"[0.5]"``) becomes that list; any
    other value fails naming ``name``."""
    values = literal_list(name, values)
    if isinstance(values, str):
        fail(name, values, accepted)
    if isinstance(values, numbers.Real) and not isinstance(values, bool):
        values = [values]
    if not isinstance(values, (list, tuple)) or not 1 <= len(values) <= max_len:
        fail(name, values, accepted)
    return list(values)


def check_rhos(name: str, values, max_len: int = 8) -> tuple[float, ...]:
    """A chapter's correlations ``rho`` of the KMS covariance: one number or a list of 1 to
    ``max_len`` (also as text, ``"[0.5]"``), each in ``(-1, 1)`` and checked as ``name[i]``
    (chapter 6's ``rhos``)."""
    values = _as_list(name, values, f"a number or a list of 1 to {max_len} numbers in (-1, 1)", max_len)
    return tuple(check_float(f"{name}[{i}]", r, -1.0, 1.0, True, True) for i, r in enumerate(values))


def check_eval_lengths(name: str, values, lo: int = 2, hi: int = 640, max_len: int = 12) -> tuple[int, ...]:
    """A chapter's context lengths: one integer or a list of 1 to ``max_len`` (also as text,
    ``"[10, 40]"``), each in ``[lo, hi]`` and checked as ``name[i]`` (chapter 6's ``eval_L``)."""
    values = _as_list(name, values, f"an integer or a list of 1 to {max_len} integers in [{lo}, {hi}]", max_len)
    return tuple(check_int(f"{name}[{i}]", v, lo, hi) for i, v in enumerate(values))


# ------------------------------------------------------------------------------- chapter 6: training
def rho_specs(
    rhos: Sequence[float], seeds: int, seed: int, d: int, L: int, sigma2: float, train_cfg: TrainConfig
) -> list[RunSpec]:
    """The runs of chapter 6's correlation sweep: one two-head model per ``(rho, k)``, KMS covariance
    ``rho^|i-j|``, run seed ``seed + k``, ordered by ``rho`` then ``k`` (chapter 6)."""
    return [RunSpec(data=DataConfig(d=d, L=L, sigma2=sigma2, rho=r), model=ModelConfig(heads=2), train=train_cfg,
                    seed=seed + k) for r in rhos for k in range(seeds)]


def training_summary(runs: Mapping[float, Sequence[Run]]) -> str:
    """What training did, in lines that fit the page: models and model-steps, the ensembles with
    their seconds, and, last, where the runs came from (:func:`~icl_lib.engine.run.describe_sources`:
    trained now, the run cache, or the run store with the device and dates they trained on)
    (chapter 6)."""
    every = [run for rs in runs.values() for run in rs]
    steps = sum(run.spec.train.steps for run in every)
    ensembles = sorted({(r.meta["ensemble"], round(r.meta["seconds"])) for r in every})
    lines = [f"{len(every)} models, {steps:,} model-steps; trained as ensembles of"]
    for k, (R, t) in enumerate(ensembles):  # "R models in t s" never split
        item = f"{R} models in {t} s" + ("," if k < len(ensembles) - 1 else "")
        if len(lines[-1]) + 1 + len(item) > 78:
            lines.append(item)
        else:
            lines[-1] += " " + item
    return "\n".join(lines + [describe_sources(every)])


def pos_neg_runs(runs: Sequence[Run]) -> list[Run]:
    """The runs whose heads end with both signs of ``omega_h`` (pattern ``pos/neg`` of
    :func:`~icl_lib.circuits.summarize_pattern`; chapter 6's selection rule)."""
    return [run for run in runs if run.pattern(kq_form=False).kind == "pos/neg"]
