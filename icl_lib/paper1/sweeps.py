"""Experiments shared between chapters, defined once so that their runs share the run cache.

:func:`heads_sweep_specs` lists the runs of models with H heads for every H in ``heads`` and
``seeds`` seeds each (paper 1, Section 3: H = 1, 2, 3, 4), which a chapter's setup declares and
trains with its execution as one call of the engine.  Chapter 2 (patterns), chapter 3 (their
dynamics) and chapter 5 (what the trained models compute) declare it with the same defaults and
so reuse each other's trained models.

Chapter 2's read-outs of a sweep ``{H: [runs]}`` are here too: :func:`sweep_patterns` (the
pattern metrics of :func:`~icl_lib.circuits.summarize_pattern` for every run), :func:`head_table`
(one row per head), :func:`model_table` (one row per model), :func:`pattern_counts` (fractions of
seeds per pattern), :func:`scale_comparison` (single head against multi-head scales) and
:func:`pos_neg_history` (the positive/negative pattern along training).

Chapter 2's intervals (:class:`~icl_lib.stats.Estimate`): :func:`median_by_H` (a column's median
over seeds per head count; the chapter combines such medians with :func:`~icl_lib.stats.median_of`,
:func:`~icl_lib.stats.ratio` and :func:`~icl_lib.stats.spread`); :data:`NO_SEEDS` stands for a
median without any seed to measure (every rule is then INCONCLUSIVE).  On one shared set of test
prompts (:func:`prompt_set`), :func:`prompt_statistics` gives every model's test loss, its paired
excess over the optimal debiased GD step, and its :func:`debiasing_fraction`: how much of debiased
GD's centring term the model implements (1 for debiased GD, 0 for vanilla GD), the statistic that
tells the two predictors apart.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from scipy import stats as sps

from ..circuits import PatternSummary, omega_of, pattern_history
from ..definitions import value as definition
from ..config import DataConfig, ModelConfig, RunSpec, TrainConfig
from ..sampling import sample_chunks
from ..engine import Run
from ..engine.run import stack_models
from ..estimators import optimal_eta_debiased, relative_excess
from ..stats import LEVEL, Estimate, median_ci, median_of
from ..validate import check_int, fail, literal_list

__all__ = [
    "as_heads",
    "heads_sweep_specs",
    "sweep_patterns",
    "head_table",
    "model_table",
    "shape_counts",
    "pattern_counts",
    "scale_comparison",
    "pos_neg_history",
    "median_by_H",
    "NO_SEEDS",
    "PromptSet",
    "prompt_set",
    "debiasing_fraction",
    "prompt_statistics", "median_debiasing",
    "estimates_by_H",
    "add_estimates",
]


def as_heads(heads: int | Sequence[int], hi: int = 256) -> list[int]:
    """A chapter's ``heads`` parameter as a validated, de-duplicated, sorted list of head counts in
    ``[1, hi]``: one int (papermill ``-p heads 3``), a list or tuple of them, or the text of a
    bracketed list (papermill's ``-p heads [1,2]`` passes the string ``"[1,2]"``)."""
    hi = check_int("hi", hi, 1, 256)
    accepted = f"a head count in [1, {hi}] or a non-empty list of them"
    heads = literal_list("heads", heads)
    if isinstance(heads, numbers.Real) and not isinstance(heads, bool):
        heads = [heads]
    if not isinstance(heads, (list, tuple)) or not heads:
        fail("heads", heads, accepted)
    return sorted({check_int("heads", h, 1, hi) for h in heads})


def heads_sweep_specs(
    heads: int | Sequence[int], seeds: int, seed: int, data: DataConfig, train_cfg: TrainConfig,
    extra: dict[int, int] | None = None, **model_kw
) -> list[RunSpec]:
    """One :class:`RunSpec` per (H, k) with run seed ``seed + k``, ``k < seeds`` (``k < seeds +
    extra[H]`` for a head count given more seeds, a sample extension), ordered by H then k."""
    seeds = check_int("seeds", seeds, 1, 10_000)
    seed = check_int("seed", seed, 0)
    extra = {int(H): check_int(f"extra[{H}]", n, 0, 10_000) for H, n in (extra or {}).items()}
    return [
        RunSpec(data=data, model=ModelConfig(heads=H, **model_kw), train=train_cfg, seed=seed + k)
        for H in as_heads(heads)
        for k in range(seeds + extra.get(H, 0))
    ]


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
    :class:`~icl_lib.circuits.PatternSummary`; and ``initial spread``, the spread ``(max - min) /
    mean`` of every head's ``|omega_h|`` at step 0 (where homogeneous scales would come from if
    training kept them: the rival of the homogeneous scale).  ``patterns`` defaults to
    :func:`sweep_patterns`.  Chapter 2."""
    patterns = sweep_patterns(sweep) if patterns is None else patterns
    rows = []
    for H, runs in sweep.items():
        for run, p in zip(runs, patterns[H]):
            w0 = omega_of(run.history["KQ"][0].double(), run.d).abs()
            rows.append({"H": H, "seed": run.spec.seed, "pattern": p.kind, "dummy heads": p.n_dummy,
                         "KQ off-diag": p.kq_offdiag, "OV off-last": p.ov_offlast,
                         "sign matched": p.sign_matched, "zero-sum": p.zero_sum,
                         "omega spread": p.omega_spread, "eta": p.eta,
                         "initial spread": float((w0.max() - w0.min()) / w0.mean()) if H > 1 else math.nan})
    return pd.DataFrame(rows)


def shape_counts(models: "pandas.DataFrame") -> tuple[int, int, int]:  # noqa: F821
    """``(diagonal KQ, last-entry OV, models)``: how many rows of :func:`model_table`'s ``models``
    have their KQ off-diagonal and OV off-label ratios below the form's tolerance (the definition
    ``shape-tol``, :mod:`icl_lib.definitions`).  Chapter 2's shape claims."""
    tol = definition("shape-tol")
    return int((models["KQ off-diag"] < tol).sum()), int((models["OV off-last"] < tol).sum()), len(models)


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


def _live_mean_abs(p: PatternSummary, key: str) -> float:
    """Mean of ``|omega_h|`` or ``|mu_h|`` (``key``) over the non-dummy heads of one model."""
    return float(np.mean([abs(getattr(p, key)[h]) for h in range(p.heads) if p.groups[h] != "dummy"]))


def scale_comparison(patterns: dict[int, list[PatternSummary]]) -> dict:
    """Single head against multi-head scales (paper 1, Section 3: the single head has the larger
    KQ and the smaller OV circuit).  Returns ``{"multi_H": [...]}``, the head counts ``H >= 2``
    with at least one model in the positive/negative pattern, and, when ``H = 1`` and such an
    ``H`` are both present, medians over seeds with their order-statistic intervals
    (:func:`~icl_lib.stats.median_ci`): ``w1`` of ``|omega|`` and ``m1`` of ``|mu|`` over the
    single-head seeds; over the multi-head models in the positive/negative pattern (one value per
    model, so that the values are independent), ``w_multi`` of the model's mean ``|omega_h|`` over
    its non-dummy heads and ``mu_multi_group`` of its positive group's summed ``mu_h``.  Chapter 2."""
    multi_H = [H for H in patterns if H >= 2 and any(p.kind == "pos/neg" for p in patterns[H])]
    out: dict = {"multi_H": multi_H}
    if 1 in patterns and multi_H:
        posneg = [p for H in multi_H for p in patterns[H] if p.kind == "pos/neg"]
        out["w1"] = median_ci([abs(p.omega[0]) for p in patterns[1]])
        out["m1"] = median_ci([abs(p.mu[0]) for p in patterns[1]])
        out["w_multi"] = median_ci([_live_mean_abs(p, "omega") for p in posneg])
        out["mu_multi_group"] = median_ci([sum(m for m in p.mu if m > 0) for p in posneg])
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


# ------------------------------------------------------------------ chapter 2's intervals
NO_SEEDS = Estimate(math.nan, -math.inf, math.inf, what="no seed to measure")


def median_by_H(models: "pandas.DataFrame", column: str, pattern: str | None = None) -> dict[int, Estimate]:  # noqa: F821
    """``{H: median over the seeds of H of models[column]}`` with the order-statistic interval of
    :func:`~icl_lib.stats.median_ci`, over the rows of :func:`model_table` whose ``pattern`` is
    ``pattern`` (every seed when ``None``); head counts without such a row are left out.  Chapter 2."""
    out = {}
    for H, rows in models.groupby("H"):
        if pattern is not None:
            rows = rows[rows["pattern"] == pattern]
        if len(rows):
            out[int(H)] = median_ci(rows[column].to_numpy(float))
    return out


@dataclass
class PromptSet:
    """One shared set of ``n`` test prompts and what chapter 2 compares on it (float64)."""

    pred: torch.Tensor  # (R, n) every model's prediction
    y: torch.Tensor  # (n,) the query labels y_q
    g: torch.Tensor  # (n,) vanilla GD at unit step: (1/L) sum_i y_i x_i^T x_q
    c: torch.Tensor  # (n,) the centring term at unit step: ybar xbar^T x_q (debiased GD: eta (g - c))

    def errors(self) -> torch.Tensor:
        """``(R, n)`` squared errors of the models."""
        return (self.pred - self.y) ** 2

    def gd_errors(self, eta: float, debiased: bool) -> torch.Tensor:
        """``(n,)`` squared errors of one (debiased) GD step ``eta`` on the same prompts."""
        return (eta * (self.g - self.c if debiased else self.g) - self.y) ** 2


@torch.no_grad()
def prompt_set(model, data: DataConfig, n: int = 20_000, seed: int = 0, chunk: int = 2_000) -> PromptSet:
    """Every model of an :class:`~icl_lib.models.AttentionEnsemble` (single task) and the GD
    predictors' ingredients on one shared set of ``n`` fresh prompts drawn in float64 (the models
    read them in their own dtype).  Chapter 2."""
    n = check_int("n", n, 2)
    if data.n_tasks != 1:
        fail("data", data, "a single-task DataConfig")
    dtype, device = model.Q.dtype, model.Q.device
    parts: dict[str, list] = {"pred": [], "y": [], "g": [], "c": []}
    for b in sample_chunks(data, n, seed, chunk):
        parts["pred"].append(model(b._replace(tokens=b.tokens.to(device, dtype)))[..., 0].double().cpu())
        x, y, xq = b.x, b.y[..., 0], b.xq  # (B, L, d), (B, L), (B, d)
        parts["y"].append(b.yq[..., 0])
        parts["g"].append(((y[..., None] * x).mean(-2) * xq).sum(-1))
        parts["c"].append(y.mean(-1) * (x.mean(-2) * xq).sum(-1))
    return PromptSet(torch.cat(parts["pred"], 1), *(torch.cat(parts[k]) for k in ("y", "g", "c")))


def debiasing_fraction(pred, g, c, level: float = LEVEL) -> Estimate:
    """How much of debiased GD's centring term a predictor implements: the least-squares fit
    ``pred ~ a g - b c`` over the prompts (``g``, ``c`` of :class:`PromptSet`; vanilla GD is
    ``eta g``, debiased GD ``eta (g - c)``, paper 1, Section 4.3) and ``t = b / a``: 1 for debiased
    GD, 0 for vanilla GD, whatever the step size.  The interval is the delta method on the
    heteroscedasticity-robust (HC0) covariance of ``(a, b)``.  Chapter 2."""
    p = torch.as_tensor(pred, dtype=torch.float64).reshape(-1)
    X = torch.stack([torch.as_tensor(g, dtype=torch.float64).reshape(-1),
                     -torch.as_tensor(c, dtype=torch.float64).reshape(-1)], 1)  # (n, 2)
    if X.shape[0] != p.shape[0] or len(p) < 3:
        fail("g", f"{X.shape[0]} values", f"as many as pred ({len(p)}, at least 3)")
    XtX_inv = torch.linalg.inv(X.T @ X)
    a, b = (XtX_inv @ (X.T @ p)).tolist()
    r = p - X @ torch.tensor([a, b], dtype=torch.float64)
    cov = XtX_inv @ (X.T @ (r[:, None] ** 2 * X)) @ XtX_inv
    grad = torch.tensor([-b / a**2, 1 / a], dtype=torch.float64)
    se = float(grad @ cov @ grad) ** 0.5
    z = float(sps.norm.ppf(0.5 + level / 2))
    t = b / a
    return Estimate(t, t - z * se, t + z * se, level, f"least squares on {len(p)} prompts, delta-method interval")


def prompt_statistics(ps: PromptSet, eta_dgd: float, level: float = LEVEL) -> dict[str, list[Estimate]]:
    """Per model of ``ps``: ``"loss"``, the test loss with its normal interval from the test-set
    standard error; ``"vs dGD*"``, the paired excess risk over the debiased GD step ``eta_dgd`` on
    the same prompts (:func:`~icl_lib.estimators.relative_excess`); ``"debiasing"``, its
    :func:`debiasing_fraction`.  Chapter 2."""
    z = float(sps.norm.ppf(0.5 + level / 2))
    err = ps.errors()  # (R, n)
    ref = ps.gd_errors(eta_dgd, debiased=True)
    loss = []
    for e in err:
        m, se = float(e.mean()), float(e.std() / math.sqrt(len(e)))
        loss.append(Estimate(m, m - z * se, m + z * se, level, f"mean over {len(e)} prompts, normal interval"))
    return {
        "loss": loss,
        "vs dGD*": [relative_excess(e, ref, level) for e in err],
        "debiasing": [debiasing_fraction(p, ps.g, ps.c, level) for p in ps.pred],
    }


def estimates_by_H(models: "pandas.DataFrame", estimates: Sequence[Estimate],  # noqa: F821
                   pattern: str | None = None) -> dict[int, list[Estimate]]:
    """``{H: [the estimates of H's seeds]}`` for per-model ``estimates`` in the row order of
    :func:`model_table`'s ``models``, over the rows whose ``pattern`` is ``pattern`` (all when
    ``None``); head counts without such a row are left out.  Chapter 2."""
    if len(estimates) != len(models):
        fail("estimates", f"{len(estimates)} Estimates", f"one per row of models ({len(models)})")
    out: dict[int, list[Estimate]] = {}
    for (_, row), e in zip(models.iterrows(), estimates):
        if pattern is None or row["pattern"] == pattern:
            out.setdefault(int(row["H"]), []).append(e)
    return out


def median_debiasing(runs: Sequence[Run], data: DataConfig, n: int, seed: int) -> Estimate:
    """The median over the models of ``runs`` (one shape, trained on ``data``) of their
    :func:`debiasing_fraction`, each on one shared :func:`prompt_set` of ``n`` prompts of ``data``
    drawn from ``seed``, at ``data``'s optimal debiased GD step
    (:func:`~icl_lib.estimators.optimal_eta_debiased`), with :func:`~icl_lib.stats.median_of`'s
    interval over seeds and prompts: 1 for debiased GD, 0 for vanilla GD (paper 1, Section 4.3).
    Chapter 5 (the proportional regime, the other activations); chapter 2 reads the same
    statistic beside the loss from :func:`prompt_statistics`."""
    ps = prompt_set(stack_models(list(runs)), data, n=n, seed=seed)
    return median_of(prompt_statistics(ps, optimal_eta_debiased(data.d, data.L, data.sigma2))["debiasing"])


def add_estimates(models: "pandas.DataFrame", name: str, estimates: Sequence[Estimate]) -> "pandas.DataFrame":  # noqa: F821
    """A copy of :func:`model_table`'s ``models`` with per-model ``estimates`` (in its row order) as
    columns ``name``, ``name + " lo"`` and ``name + " hi"`` (the table of chapter 2 and
    :func:`~icl_lib.figures.interval_strip` read them)."""
    if len(estimates) != len(models):
        fail("estimates", f"{len(estimates)} Estimates", f"one per row of models ({len(models)})")
    return models.assign(**{name: [e.value for e in estimates], name + " lo": [e.lo for e in estimates],
                            name + " hi": [e.hi for e in estimates]})
