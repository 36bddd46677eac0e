"""Length generalisation: trained models at context lengths other than their own (paper 1, Figure 3, B.1, Figure 10).

* :func:`length_errors`, :func:`length_sweep` -- per-sequence squared errors (and per-set losses)
  of every model of an ensemble at several context lengths ``L``;
* :func:`group_errors`, :func:`posneg_index` -- the errors of every group of runs (the sweep by
  ``H``, the 2-head variants by kind) on the same test sets, and the positions of the
  positive/negative runs;
* :func:`length_curves`, :func:`length_table`, :func:`median_curves`, :func:`labelled`,
  :func:`reference_lines` -- the curves and tables of chapter 5's Figures 3 and 10;
* :func:`length_estimates` -- the chapter's claims on Figure 3, with Bonferroni-simultaneous
  intervals (:func:`~icl_lib.stats.extreme`, :func:`~icl_lib.stats.seed_ratio` for the means over
  the positive/negative seeds, :func:`median_ratio_extreme` for the medians over every seed).

Used by chapter 5.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from ...config import DataConfig
from ...sampling import sample_chunks
from ...engine import Run, stack_models
from ...seeding import derive_seed
from ...stats import LEVEL, Estimate, extreme, interval_image, median_of, seed_ratio
from ...stats.combine import _extreme_of_intervals, _quantile
from ...validate import check_int
from .trained import NAN, check_lengths

__all__ = [
    "LengthValues",
    "length_errors",
    "length_sweep",
    "group_errors",
    "posneg_index",
    "length_curves",
    "length_table",
    "length_estimates",
    "labelled",
    "reference_lines",
    "median_curves",
    "median_ratio_extreme",
]


# ----------------------------------------------------------------------------- losses against L
@torch.no_grad()
def length_errors(
    model, data: DataConfig, Ls: Sequence[int], n: int, n_sets: int, seed: int, chunk: int = 2_000
) -> torch.Tensor:
    """Squared error of every model of ``model`` (an :class:`~icl_lib.models.AttentionEnsemble`)
    on every sequence of ``n_sets`` independent test sets of ``n`` sequences at every ``L`` of
    ``Ls``, shared by all models (set ``k`` at length index ``j``: purpose ``"length-sweep"``,
    index ``(j, k)``; the sequences of :func:`~icl_lib.estimators.model_risk`).

    Returns ``(R, len(Ls), n_sets n)``, float64.  Paper 1, Figure 3 (length generalisation); chapter 5.
    """
    Ls = check_lengths(Ls)
    n, n_sets = check_int("n", n, 2), check_int("n_sets", n_sets, 1)
    out = torch.empty(model.R, len(Ls), n_sets * n, dtype=torch.float64)
    for j, L in enumerate(Ls):
        for k in range(n_sets):
            parts = []
            for b in sample_chunks(data, n, derive_seed(seed, "length-sweep", j, k), chunk, L=L, dtype=model.Q.dtype):
                b = b.to(model.Q.device)
                parts.append(((model(b) - b.yq) ** 2).mean(-1).double().cpu())  # (R, B)
            out[:, j, k * n:(k + 1) * n] = torch.cat(parts, dim=1)
    return out


def length_sweep(model, data: DataConfig, Ls: Sequence[int], n: int, n_sets: int, seed: int) -> torch.Tensor:
    """ICL loss of every model on each test set of :func:`length_errors`: ``(R, len(Ls), n_sets)``.
    Paper 1, Figure 3; chapter 5."""
    e = length_errors(model, data, Ls, n, n_sets, seed)
    return e.reshape(e.shape[0], e.shape[1], n_sets, n).mean(-1)


# ----------------------------------------------------------------------------- Figure 3
def group_errors(
    groups: Mapping[object, Sequence[Run]], data: DataConfig, Ls: Sequence[int], n: int, n_sets: int, seed: int
) -> dict[object, torch.Tensor]:
    """:func:`length_errors` of every run of every group on the same test sets (purpose
    ``"length-sweep"``; one stacked evaluation per group, so groups may differ in architecture):
    ``{group: (R_group, len(Ls), n_sets n)}``, groups with no run left out.  Chapter 5 (the sweep
    by ``H``; the 2-head variants by kind)."""
    s = derive_seed(seed, "length-sweep")
    return {g: length_errors(stack_models(rs), data, Ls, n, n_sets, s) for g, rs in groups.items() if rs}


def posneg_index(groups: Mapping[object, Sequence[Run]]) -> dict[object, list[int]]:
    """Per group, the positions of its runs that ended in the positive/negative pattern
    (:func:`~icl_lib.paper1.optimality.trained.posneg_runs`; every position for single-head groups)."""
    return {g: [k for k, r in enumerate(rs) if rs[0].spec.model.heads == 1 or r.pattern().kind == "pos/neg"]
            for g, rs in groups.items()}


def length_curves(
    errors: Mapping[int, torch.Tensor], Ls: Sequence[int], keep: Mapping[int, Sequence[int]] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Length generalisation of the sweep (paper 1, Figure 3) from :func:`group_errors`: per ``H``
    the loss averaged over the seeds ``keep[H]`` (all when ``keep`` is ``None``) and the standard
    error of that average over the test sequences, ``(len(Ls), groups)`` each, one column per ``H``
    with at least one kept model, index ``L`` (the grid ``Ls`` of the errors; chapter 5)."""
    curve, curve_se = {}, {}
    for H, e in errors.items():
        idx = list(range(e.shape[0])) if keep is None else list(keep.get(H, []))
        if idx:
            avg = e[idx].mean(0)  # (|Ls|, N): the seed average per sequence
            curve[H] = avg.mean(-1).numpy()
            curve_se[H] = (avg.std(-1) / math.sqrt(avg.shape[-1])).numpy()
    index = pd.Index(check_lengths(Ls), name="L")
    return pd.DataFrame(curve, index=index), pd.DataFrame(curve_se, index=index)


def length_table(curve: pd.DataFrame, ref: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """The values behind chapter 5's Figure 3: the loss of every ``H`` (columns ``H=1, ...``) and
    the reference risks of :func:`~icl_lib.paper1.optimality.risks.reference_curves` (without the
    Bayes standard error)."""
    refs = pd.DataFrame({k: v for k, v in ref.items() if k != "Bayes se"}, index=curve.index)
    return pd.concat([curve.rename(columns="H={}".format), refs], axis=1)


def _seed_mean(e: torch.Tensor) -> tuple[float, float, float | None]:
    """Mean loss of the models ``e (R, n)`` (squared errors on shared sequences), its error (the test
    set's and the spread over seeds, as :func:`~icl_lib.stats.seed_ratio`) and degrees of freedom (``R - 1``)."""
    e = e.double()
    R, n = e.shape
    var = float(e.mean(0).var()) / n + (float(e.mean(-1).var()) / R if R > 1 else 0.0)
    return float(e.mean()), math.sqrt(var), (R - 1 if R > 1 else None)


def _model_losses(e: torch.Tensor, level: float) -> list[Estimate]:
    """Each model's mean loss over the ``n`` sequences of ``e (R, n)``, with its normal interval."""
    z = float(_quantile(level, 1))
    m, se = e.mean(-1).numpy(), (e.std(-1) / math.sqrt(e.shape[-1])).numpy()
    return [Estimate(float(a), float(a - z * b), float(a + z * b), level) for a, b in zip(m, se)]


def median_ratio_extreme(pairs: Sequence[tuple[torch.Tensor, torch.Tensor]], what: str,
                         level: float = LEVEL) -> Estimate:
    """The largest ``median_a / median_b - 1`` over ``pairs`` of groups scored on the same sequences,
    ``(a (Ra, n), b (Rb, n))`` squared errors, where ``median`` is the median over a group's seeds
    of each model's loss (:func:`~icl_lib.stats.median_of`: order statistics over the seeds' own
    intervals).  Each of the ``2 m`` medians is taken at level ``1 - (1 - level) / (2 m)``, so the
    interval ``[largest lower end, largest upper end]`` holds the largest true ratio with
    probability ``level`` (Bonferroni).  A median over every seed is not moved by a minority of
    seeds far from the others (the single-sign seeds), as a mean is.  Chapter 5."""
    m = len(pairs)
    each = 1 - (1 - level) / (2 * max(m, 1))
    vals, los, his = [], [], []
    for a, b in pairs:
        ma, mb = median_of(_model_losses(a, each), each), median_of(_model_losses(b, each), each)
        vals.append(ma.value / mb.value - 1)
        bounded = all(math.isfinite(x) for x in (ma.lo, ma.hi, mb.lo, mb.hi))
        los.append(ma.lo / mb.hi - 1 if bounded and mb.hi > 0 else -math.inf)
        his.append(ma.hi / mb.lo - 1 if bounded and mb.lo > 0 else math.inf)
    return _extreme_of_intervals(vals, los, his, "max", what)


@dataclass(frozen=True)
class LengthValues:
    """What :func:`length_estimates` reads off Figure 3 besides its estimates: the tracking
    deviation ``track``, the length ``track_L`` and loss ratio ``track_ratio`` where it is largest,
    the ratio to vanilla GD at the shortest length, the spread between head counts, the
    tracking tolerance ``track_tol``, and the single head's largest ``|loss / R_dGD - 1|`` over
    the lengths (``one_head_track``, the rival of tracking) and its smallest ``loss_1 / loss_H - 1``
    (``one_head_gap``, the rival of the same loss for every ``H``); NaN where they are missing."""

    track: float
    track_L: float
    track_ratio: float
    gd_ratio_short: float
    spread: float
    track_tol: float
    one_head_track: float = NAN
    one_head_gap: float = NAN


def length_estimates(
    errors: Mapping[int, torch.Tensor], keep: Mapping[int, Sequence[int]], ref: Mapping[str, np.ndarray],
    Ls: Sequence[int], tol: float,
) -> tuple[dict, LengthValues]:
    """Chapter 5's claims on Figure 3 (paper 1, Section 3) from :func:`group_errors` of the sweep,
    the kept (positive/negative) seeds ``keep`` and :func:`~icl_lib.paper1.optimality.risks.reference_curves` ``ref``:

    * ``decreasing`` -- the largest relative change ``loss(L') / loss(L) - 1`` between consecutive
      lengths of the grid over *every* model (all ``H``, all seeds; independent test sets);
    * ``spread``, ``spread all seeds`` -- the largest ``loss_H / loss_H' - 1`` over lengths and
      pairs of head counts ``H, H' >= 2``: of the mean losses over the kept seeds
      (:func:`~icl_lib.stats.seed_ratio`), and of the median losses over every seed
      (:func:`median_ratio_extreme`);
    * ``track``, ``track all seeds`` -- the largest ``|loss_H / R_dGD(eta_learned) - 1|`` over
      ``H >= 2`` and lengths (the kept seeds; every seed);
    * ``rivals`` -- at the shortest length, the smallest over ``H >= 2`` and two rival predictors
      (vanilla GD at the learned rate, debiased GD at ``eta*(L)``) of
      ``(|loss - R_rival| - |loss - R_dGD|) / R_dGD``: positive when the loss is nearer debiased GD
      at the learned rate;
    * ``beats single``, ``beats single all seeds`` -- the largest ``loss_H / loss_1 - 1`` over
      ``H >= 2`` and lengths (means over the kept seeds, medians over every seed).

    Each an :class:`~icl_lib.stats.Estimate` with Bonferroni-simultaneous intervals (``None``
    where its groups are missing).  ``values`` (:class:`LengthValues`): the deviation ``track``, the ``L`` and
    loss ratio where it is largest, the ratio to vanilla GD at the shortest ``L``, and
    ``spread``; NaN without ``H >= 2``.  ``tol`` is the tracking tolerance (glued)."""
    Ls = check_lengths(Ls)
    multi = [H for H in errors if H >= 2 and keep.get(H)]
    out: dict = dict.fromkeys(("decreasing", "spread", "spread all seeds", "track", "track all seeds", "rivals",
                               "beats single", "beats single all seeds"))
    values = dict(track=NAN, track_L=NAN, track_ratio=NAN, gd_ratio_short=NAN, spread=NAN, track_tol=float(tol))
    # decreasing: every model, consecutive lengths, independent test sets
    v, s = [], []
    for e in errors.values():
        m = e.mean(-1).numpy()  # (R, |Ls|)
        se = (e.std(-1) / math.sqrt(e.shape[-1])).numpy()
        ratio = m[:, 1:] / m[:, :-1]
        v.append(ratio - 1)
        s.append(ratio * np.hypot(se[:, 1:] / m[:, 1:], se[:, :-1] / m[:, :-1]))
    if v and len(Ls) >= 2:
        out["decreasing"] = extreme(np.concatenate([x.ravel() for x in v]), np.concatenate([x.ravel() for x in s]),
                                    "max", what="largest loss(L')/loss(L) - 1 of every model and step of the grid")
    if not multi:
        return out, LengthValues(**values)

    def pairs(sel):
        vals, ses, dfs = [], [], []
        for H in multi:
            for H2 in multi:
                if H2 != H:
                    for j in range(len(Ls)):
                        r, se, df = seed_ratio(errors[H][sel(H), j], errors[H2][sel(H2), j])
                        vals.append(r), ses.append(se), dfs.append(np.nan if df is None else df)
        return vals, ses, dfs

    kept = lambda H: list(keep[H])  # noqa: E731
    if len(multi) >= 2:
        vals, ses, dfs = pairs(kept)
        out["spread"] = extreme(vals, ses, "max", df=dfs,
                                what="largest loss_H/loss_H' - 1 over L and H, H' >= 2 (pos/neg seeds)")
        out["spread all seeds"] = median_ratio_extreme(
            [(errors[H][:, j], errors[H2][:, j]) for H in multi for H2 in multi if H2 != H for j in range(len(Ls))],
            "largest median loss_H / median loss_H' - 1 over L and H, H' >= 2 (every seed)")
        values["spread"] = out["spread"].value
    # tracking debiased GD at the learned rate, and its rivals at the shortest length
    dgd = np.asarray(ref["debiased GD"], dtype=float)

    def tracking(sel, what):
        st = {H: [_seed_mean(errors[H][sel(H), j]) for j in range(len(Ls))] for H in multi}
        dv = np.array([[m / dgd[j] - 1 for j, (m, _, _) in enumerate(st[H])] for H in multi])
        est = extreme(dv.ravel(), np.array([[se / dgd[j] for j, (_, se, _) in enumerate(st[H])]
                                            for H in multi]).ravel(), "absmax",
                      df=[np.nan if df is None else df for H in multi for (_, _, df) in st[H]], what=what)
        return st, dv, est

    stats, dev, out["track"] = tracking(kept, "largest |loss/R_dGD(eta_learned) - 1| over H >= 2 and L")
    out["track all seeds"] = tracking(lambda H: slice(None), "the same over every seed")[2]
    if 1 in errors:
        one = np.array([float(errors[1][:, j].mean()) for j in range(len(Ls))])
        values["one_head_track"] = float(np.max(np.abs(one / dgd - 1)))
    jt = int(np.unravel_index(np.argmax(np.abs(dev)), dev.shape)[1])
    loss = np.array([[m for (m, _, _) in stats[H]] for H in multi])  # (|multi|, |Ls|)
    values.update(track=out["track"].value, track_L=int(Ls[jt]), track_ratio=float(loss[:, jt].mean() / dgd[jt]),
                  gd_ratio_short=float(loss[:, 0].mean() / ref["vanilla GD"][0]))
    rivals = {"vanilla GD": ref["vanilla GD"][0], "debiased GD, eta*(L)": ref["debiased GD, eta*(L)"][0]}
    m_all = len(multi) * len(rivals)
    qv, qlo, qhi = [], [], []
    for H in multi:
        m, se, df = stats[H][0]
        q = _quantile(LEVEL, m_all, df)
        for R_riv in rivals.values():
            f = lambda x, a=float(R_riv), b=float(dgd[0]): (abs(x - a) - abs(x - b)) / b  # noqa: E731
            lo, hi = interval_image(f, m - q * se, m + q * se, breaks=(float(R_riv), float(dgd[0])))
            qv.append(f(m)), qlo.append(lo), qhi.append(hi)
    out["rivals"] = _extreme_of_intervals(qv, qlo, qhi, "min",
                                          f"smallest (|loss - R_rival| - |loss - R_dGD|)/R_dGD at L = {Ls[0]}")
    # multi-head against the single head
    if 1 in errors:
        vals, ses, dfs = [], [], []
        for H in multi:
            for j in range(len(Ls)):
                r, se, df = seed_ratio(errors[H][kept(H), j], errors[1][:, j])
                vals.append(r), ses.append(se), dfs.append(np.nan if df is None else df)
        out["beats single"] = extreme(vals, ses, "max", df=dfs,
                                      what="largest loss_H/loss_1 - 1 over H >= 2 and L (beats single)")
        values["one_head_gap"] = float(1 / (1 + max(vals)) - 1)
        out["beats single all seeds"] = median_ratio_extreme(
            [(errors[H][:, j], errors[1][:, j]) for H in multi for j in range(len(Ls))],
            "largest median loss_H / median loss_1 - 1 over H >= 2 and L (every seed)")
    return out, LengthValues(**values)


def labelled(table: pd.DataFrame, fmt: str = "{}", drop: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """The columns of ``table`` (but ``drop``) as ``{fmt.format(column): values}``, the form of the
    curves of :func:`~icl_lib.figures.plot_against_L` (chapter 5: ``"H = {}"``)."""
    return {fmt.format(c): table[c].to_numpy() for c in table.columns if c not in drop}


def reference_lines(ref: Mapping[str, np.ndarray], eta: float, bayes: bool = True) -> dict:
    """The reference curves of :func:`~icl_lib.paper1.optimality.risks.reference_curves` labelled
    for a loss-against-``L`` figure: vanilla and debiased GD at ``eta``, debiased GD at ``eta*(L)``
    and, if ``bayes``, the Bayes risk (chapter 5's Figures 3 and 10)."""
    lines = {f"vanilla GD, eta = {eta:.3f}": ref["vanilla GD"],
             f"debiased GD, eta = {eta:.3f}": ref["debiased GD"],
             "debiased GD, eta*(L)": ref["debiased GD, eta*(L)"]}
    if bayes:
        lines["Bayes"] = ref["Bayes"]
    return lines


def median_curves(
    errors: Mapping[str, torch.Tensor], labels: Mapping[str, str]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Per kind of ``labels``, the median over seeds of the per-model losses of :func:`group_errors`
    ``(R, |Ls|, N)`` and the median over seeds of their standard errors over the test sequences,
    keyed by the label: the curves of chapter 5's Figure 10 and B.1 figure."""
    curves, ses = {}, {}
    for a, label in labels.items():
        e = errors[a]
        curves[label] = e.mean(-1).median(0).values.numpy()
        ses[label] = (e.std(-1) / math.sqrt(e.shape[-1])).median(0).values.numpy()
    return curves, ses
