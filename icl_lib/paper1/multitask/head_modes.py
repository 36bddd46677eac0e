"""What the heads of a multi-task model do: roles, modes and the global pattern (paper 1, B.4).

**What a trained model computes.**  With diagonal KQ blocks ``diag(omega_h)`` and OV entries
``mu_{h,n}`` (head ``h`` reading and writing task ``n``'s label), a first-order expansion of the
softmax in ``omega_h`` gives, per task,

    y_hat_n ~ (sum_h mu_{h,n}) ybar_n + (1/L) sum_i y_{i,n} (x_i - xbar)^T diag(Gamma_n) x_q,
    Gamma_n = sum_h mu_{h,n} omega_h,

a debiased GD with the *effective pre-conditioner* ``Gamma_n`` (:func:`effective_gamma`) when the
OV entries of each task sum to zero.

* :class:`HeadRole`, :func:`head_roles`, :class:`ModeSummary`, :func:`classify_mode`,
  :func:`effective_gamma` -- the rules (:data:`WRITE_TOL`, :data:`SUPPORT_TOL`,
  :data:`PATTERN_TOL`) and the modes they give (:data:`MODES`);
* :func:`global_pattern`, :func:`expected_mode`, :func:`mode_history` -- B.4's global pattern,
  the paper's mode for a head count, and the modes along training;
* chapter 7's tables and claims -- :func:`pattern_table`, :func:`mode_counts`,
  :func:`global_pattern_table`, :func:`paper_mode_table`, :func:`paper_mode_fractions`,
  :func:`shown_seeds`, :func:`per_model_table`, :func:`mode_estimates`,
  :func:`global_pattern_estimates`, :func:`shared_ratio_estimates`, :func:`gamma_off_estimates`,
  :func:`mode_history_fractions`.

Used by chapter 7 (its figures: :mod:`icl_lib.figures.strips`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from ...circuits import DUMMY_TOL, SHAPE_TOL, kq_diagonal, mu_matrix
from ...definitions import value as definition
from ...config import DataConfig
from ...stats import LEVEL, Estimate, largest, median_ci, proportion_ci
from ...validate import check_float, check_int
from .references import coordinate_groups, shared_and_single

__all__ = [
    "effective_gamma",
    "HeadRole",
    "ModeSummary",
    "head_roles",
    "classify_mode",
    "pattern_table",
    "mode_counts",
    "expected_mode",
    "mode_history",
    "global_pattern",
    "global_pattern_table",
    "paper_mode_table",
    "paper_mode_fractions",
    "shown_seeds",
    "per_model_table",
    "mode_estimates",
    "global_pattern_estimates",
    "shared_ratio_estimates",
    "gamma_off_estimates",
    "mode_history_fractions",
    "MODES",
    "WRITE_TOL",
    "SUPPORT_TOL",
    "PATTERN_TOL",
]

# head h writes to task n when |mu_{h,n}| >= WRITE_TOL * max_{h',n'} |mu_{h',n'}|: the share below which a
# head's scale counts as lost (the definition "live-tol", read when a model is classified)
WRITE_TOL = DUMMY_TOL
SUPPORT_TOL = 0.5  # KQ on S_n: RMS of omega_h off S_n <= SUPPORT_TOL * RMS of omega_h on S_n
PATTERN_TOL = SHAPE_TOL  # global pattern (B.4): both ratios of global_pattern below this ("shape-tol")
MODES = ("kernel", "shared-dGD", "allocated", "superposition", "mixed", "other")


# ------------------------------------------------------------------------------ circuits
def effective_gamma(KQ: torch.Tensor, OV: torch.Tensor, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Effective per-task pre-conditioner ``Gamma_n = sum_h mu_{h,n} omega_h`` ``(..., N, d)`` and the
    mean weight ``sum_h mu_{h,n}`` ``(..., N)``: the first-order expansion of the trained model
    (module docstring; paper 1, C.3 eqs. for Modes II-IV)."""
    w, m = kq_diagonal(KQ, d), mu_matrix(OV, d)  # (..., H, d), (..., H, N)
    return torch.einsum("...hn,...hd->...nd", m, w), m.sum(-2)


# ------------------------------------------------------------------------------ modes
@dataclass
class HeadRole:
    """What one head does, by the rules of :func:`head_roles`."""

    head: int  # 0-based
    tasks: list[int]  # tasks it writes to (0-based)
    signs: dict  # task -> +1 / -1: sign of mu_{h,n}
    kq_signs: dict  # task -> +1 / -1: sign of the mean of omega_h over S_n
    on_support: dict  # task -> bool: RMS(omega_h off S_n) <= SUPPORT_TOL * RMS(omega_h on S_n)
    off_ratio: dict  # task -> RMS(omega_h off S_n) / RMS(omega_h on S_n)

    @property
    def dummy(self) -> bool:
        return not self.tasks

    @property
    def label(self) -> str:
        """e.g. ``"+1 -2"``: positive for task 1, negative for task 2; ``"dummy"``."""
        if self.dummy:
            return "dummy"
        return " ".join(f"{'+' if self.signs[n] > 0 else '-'}{n + 1}" for n in self.tasks)


def head_roles(KQ: torch.Tensor, OV: torch.Tensor, data: DataConfig,
               write_tol: float | None = None, support_tol: float = SUPPORT_TOL) -> list[HeadRole]:
    """Per-head roles of one model ``KQ (H, D, D)``, ``OV (H, N, D)`` (paper 1, B.4), by rule:

    * head ``h`` writes to task ``n`` when ``|mu_{h,n}| >= write_tol * max |mu|``;
    * its sign for task ``n`` is ``sign(mu_{h,n})``; its KQ sign for task ``n`` the sign of the mean
      of ``omega_h`` over ``S_n`` (sign matching per task: the two agree);
    * its KQ diagonal is *on* ``S_n`` when the RMS of ``omega_h`` off ``S_n`` is at most
      ``support_tol`` times the RMS on ``S_n`` (``S_n`` = all coordinates: always on).
    """
    write_tol = check_float("write_tol", definition("live-tol") if write_tol is None else write_tol, 0.0, 1.0)
    support_tol = check_float("support_tol", support_tol, 0.0)
    KQ, OV = KQ.detach().double().cpu(), OV.detach().double().cpu()
    d = data.d
    w, m = kq_diagonal(KQ, d), mu_matrix(OV, d)  # (H, d), (H, N)
    masks = data.support_mask().bool()  # (N, d)
    big = m.abs().max()
    roles = []
    for h in range(w.shape[0]):
        tasks = [n for n in range(m.shape[1]) if big > 0 and m[h, n].abs() >= write_tol * big]
        signs, kq_signs, on, ratio = {}, {}, {}, {}
        for n in range(m.shape[1]):
            inside, outside = w[h][masks[n]], w[h][~masks[n]]
            rms_in = float(inside.pow(2).mean().sqrt())
            rms_out = float(outside.pow(2).mean().sqrt()) if outside.numel() else 0.0
            ratio[n] = rms_out / rms_in if rms_in > 0 else float("inf")
            on[n] = ratio[n] <= support_tol
            kq_signs[n] = 1 if float(inside.mean()) >= 0 else -1
            signs[n] = 1 if float(m[h, n]) >= 0 else -1
        roles.append(HeadRole(h, tasks, signs, kq_signs, on, ratio))
    return roles


@dataclass
class ModeSummary:
    """The mode of one trained model (paper 1, B.4) and the numbers behind it (:func:`classify_mode`)."""

    heads: int
    mode: str  # one of MODES
    reason: str  # why (for "other": which rule failed)
    roles: list[HeadRole]
    sign_matched: bool  # sign(mu_{h,n}) = KQ sign over S_n for every head and task it writes to
    group_omega: dict = field(default_factory=dict)  # group name -> per-head mean of omega_h over the group
    shared_ratio: float = float("nan")  # |mean omega on shared| / |mean omega on task-only coords|, live heads pooled
    gamma_off_ratio: list = field(default_factory=list)  # per task: RMS(Gamma_n off S_n) / RMS(Gamma_n on S_n)
    zero_sum: list = field(default_factory=list)  # per task: |sum_h mu_{h,n}| / sum_h |mu_{h,n}|

    @property
    def labels(self) -> list[str]:
        return [r.label for r in self.roles]


def _shared_ratio(w: torch.Tensor, data: DataConfig, live: torch.Tensor) -> float:
    """``mean_h |mean omega_h over shared| / mean_h |mean omega_h over single-task coordinates|``."""
    shared, single = shared_and_single(data)
    if not shared or not single or not bool(live.any()):
        return float("nan")
    ws = w[live][:, shared].mean(-1).abs().mean()
    wo = w[live][:, single].mean(-1).abs().mean()
    return float(ws / wo)


def classify_mode(KQ: torch.Tensor, OV: torch.Tensor, data: DataConfig,
                  write_tol: float | None = None, support_tol: float = SUPPORT_TOL) -> ModeSummary:
    """Mode of one model ``KQ (H, D, D)``, ``OV (H, N, D)`` by the rules of paper 1, B.4 (chapter 7).

    A mode is a local pattern on top of the global one: a model whose circuits lack the global
    pattern (either ratio of :func:`global_pattern` at least ``PATTERN_TOL``) is ``other``.
    Otherwise the rules apply in this order to the live (non-dummy) heads of :func:`head_roles`:

    * ``kernel`` (Mode I): every live head writes to every task, all with one sign;
    * ``shared-dGD`` (Mode II): every live head writes to every task with one sign for all tasks,
      and both signs occur among the heads;
    * ``allocated`` (Mode III): every live head writes to exactly one task, its KQ diagonal is on
      that task's support, and every task has a positive and a negative head;
    * ``superposition`` (Mode IV): some live head writes to two tasks with opposite signs, and every
      task has a positive and a negative head among those writing to it;
    * ``mixed``: no head has opposite signs, some head writes to several tasks and some to one,
      every task has a positive and a negative head (a shared head of one sign completed by
      dedicated heads: another way to reach per-task debiased GD, not named in the paper);
    * ``other``: none of these (``reason`` says what failed).
    """
    roles = head_roles(KQ, OV, data, write_tol, support_tol)
    N = data.n_tasks
    live = [r for r in roles if not r.dummy]
    KQd, OVd = KQ.detach().double().cpu(), OV.detach().double().cpu()
    w = kq_diagonal(KQd, data.d)  # (H, d)
    gamma, msum = effective_gamma(KQd, OVd, data.d)  # (N, d), (N,)
    m = mu_matrix(OVd, data.d)  # (H, N)
    masks = data.support_mask().bool()
    off = []
    for n in range(N):
        rin = gamma[n][masks[n]].pow(2).mean().sqrt()
        rout = gamma[n][~masks[n]].pow(2).mean().sqrt() if (~masks[n]).any() else torch.tensor(0.0)
        off.append(float(rout / rin))
    zero_sum = [float(msum[n].abs() / m[:, n].abs().sum()) for n in range(N)]
    sign_matched = all(r.signs[n] == r.kq_signs[n] for r in live for n in r.tasks)
    live_mask = torch.tensor([not r.dummy for r in roles])
    group_omega = {g.name: w[:, list(g.coords)].mean(-1).tolist() for g in coordinate_groups(data)}

    def both_signs(n):
        s = {r.signs[n] for r in live if n in r.tasks}
        return s == {1, -1}

    all_tasks = [r for r in live if len(r.tasks) == N]
    kq_off, ov_off = global_pattern(KQ, OV, data) if live else (float("inf"), float("inf"))
    if not live:
        mode, reason = "other", "no head writes to any task"
    elif max(kq_off, ov_off) >= definition("shape-tol"):
        mode, reason = "other", f"no global pattern (KQ off-diagonal {kq_off:.2f}, OV off-pattern {ov_off:.2f})"
    elif len(all_tasks) == len(live) and all(len({r.signs[n] for n in r.tasks}) == 1 for r in live):
        head_signs = {r.signs[0] for r in live}
        if len(head_signs) == 1:
            mode, reason = "kernel", "every live head writes to every task with one common sign"
        else:
            mode, reason = "shared-dGD", "every live head writes to every task, opposite heads"
    elif all(len(r.tasks) == 1 for r in live):
        if not all(both_signs(n) for n in range(N)):
            mode, reason = "other", "one head per task, but some task lacks a positive or a negative head"
        elif not all(r.on_support[r.tasks[0]] for r in live):
            mode, reason = "other", "heads allocated to tasks, but some KQ diagonal is not on its task's support"
        else:
            mode, reason = "allocated", "every live head writes to one task, KQ on its support, +/- per task"
    elif any(len({r.signs[n] for n in r.tasks}) == 2 for r in live):
        if all(both_signs(n) for n in range(N)):
            mode, reason = "superposition", "a head writes to two tasks with opposite signs; +/- per task"
        else:
            mode, reason = "other", "a head with opposite signs, but some task lacks a positive or a negative head"
    elif all(both_signs(n) for n in range(N)):
        mode, reason = "mixed", "a head shared by several tasks with one sign, others dedicated; +/- per task"
    else:
        mode, reason = "other", "heads shared with one sign, but some task lacks a positive or a negative head"
    return ModeSummary(
        heads=len(roles), mode=mode, reason=reason, roles=roles, sign_matched=sign_matched,
        group_omega=group_omega, shared_ratio=_shared_ratio(w, data, live_mask),
        gamma_off_ratio=off, zero_sum=zero_sum,
    )


def pattern_table(KQ: torch.Tensor, OV: torch.Tensor, data: DataConfig) -> "pandas.DataFrame":  # noqa: F821
    """One row per head: the mean KQ diagonal over each coordinate group (task-1-only, shared,
    task-2-only, ...), the OV entries ``mu_{h,n}`` per task, and the head's role (paper 1, C.3's
    tables).  Chapter 7."""
    KQ, OV = KQ.detach().double().cpu(), OV.detach().double().cpu()
    w, m = kq_diagonal(KQ, data.d), mu_matrix(OV, data.d)
    roles = head_roles(KQ, OV, data)
    rows = []
    for h in range(w.shape[0]):
        row = {"head": h + 1}
        for g in coordinate_groups(data):
            row[f"KQ {g.name}"] = float(w[h, list(g.coords)].mean())
        for n in range(m.shape[1]):
            row[f"OV task {n + 1}"] = float(m[h, n])
        row["role"] = roles[h].label
        rows.append(row)
    return pd.DataFrame(rows).set_index("head")


def mode_counts(summaries: dict[int, list[ModeSummary]]) -> "pandas.DataFrame":  # noqa: F821
    """Frequency of each mode per head count: ``{H: [ModeSummary per seed]}`` -> table (H x MODES)."""
    rows = {H: {mode: sum(s.mode == mode for s in ss) for mode in MODES} for H, ss in summaries.items()}
    df = pd.DataFrame(rows).T
    df.index.name = "H"
    df["seeds"] = df.sum(axis=1)
    return df



def expected_mode(H: int, N: int) -> str:
    """The paper's mode for ``H`` heads and ``N >= 2`` tasks (paper 1, B.4): ``kernel`` (H = 1),
    ``shared-dGD`` (H = 2), ``superposition`` (2 < H < 2N), ``allocated`` (H >= 2N)."""
    H, N = check_int("H", H, 1), check_int("N", N, 2)
    if H == 1:
        return "kernel"
    if H == 2:
        return "shared-dGD"
    return "allocated" if H >= 2 * N else "superposition"


def mode_history(KQ: torch.Tensor, OV: torch.Tensor, data: DataConfig) -> list[str]:
    """:func:`classify_mode` at every logged step of a run's history ``KQ (T, H, D, D)``,
    ``OV (T, H, N, D)``: when does a mode form (chapter 7)."""
    return [classify_mode(KQ[t], OV[t], data).mode for t in range(KQ.shape[0])]


def global_pattern(KQ: torch.Tensor, OV: torch.Tensor, data: DataConfig) -> tuple[float, float]:
    """Paper 1, B.4's global pattern as two ratios over the live heads of one model:
    the mass of ``KQ_h[:, :d]`` off the diagonal of its ``d x d`` block (off-diagonal entries and the
    label rows) over the diagonal mass, and the mass of ``OV_h`` off the entries ``(n, d + n)``
    over the mass on them.  Both are 0 for the pattern (B.8)."""
    KQ, OV = KQ.detach().double().cpu(), OV.detach().double().cpu()
    d, N = data.d, data.n_tasks
    live = torch.tensor([not r.dummy for r in head_roles(KQ, OV, data)])
    block = KQ[live][..., :, :d]  # (H', D, d) the columns that meet x_q
    diag2 = block[..., :d, :].diagonal(dim1=-2, dim2=-1).pow(2).sum()
    kq_off = float(((block.pow(2).sum() - diag2).clamp_min(0) / diag2).sqrt())
    ov = OV[live]  # (H', N, D)
    on = torch.zeros_like(ov, dtype=torch.bool)
    for n in range(N):
        on[:, n, d + n] = True
    ov_off = float((ov[~on].pow(2).sum() / ov[on].pow(2).sum()).sqrt())
    return kq_off, ov_off


# ------------------------------------------------------------------------------ chapter 7's tables
# ``sweep`` is the trained :func:`icl_lib.paper1.sweeps.heads_sweep_specs` as ``{H: [Run per seed]}`` and ``modes`` the
# matching ``{H: [ModeSummary per seed]}`` of :func:`classify_mode`; rows follow their order.


def global_pattern_table(sweep: dict, data: DataConfig) -> "pandas.DataFrame":  # noqa: F821
    """Paper 1, B.4's global pattern of every model: :func:`global_pattern`'s two ratios
    (``KQ off-diagonal``, ``OV off-pattern``), one row per ``(H, seed)``.  Chapter 7."""
    rows = []
    for H, runs in sweep.items():
        for r in runs:
            kq_off, ov_off = global_pattern(r.KQ, r.OV, data)
            rows.append({"H": H, "seed": r.spec.seed, "KQ off-diagonal": kq_off, "OV off-pattern": ov_off})
    return pd.DataFrame(rows).set_index(["H", "seed"])


def paper_mode_table(modes: dict, N: int) -> "pandas.DataFrame":  # noqa: F821
    """:func:`mode_counts` with a last column ``paper's mode``, :func:`expected_mode` of each head
    count for ``N`` tasks (paper 1, B.4).  Chapter 7."""
    tab = mode_counts(modes)
    tab["paper's mode"] = [expected_mode(H, N) for H in tab.index]
    return tab


def paper_mode_fractions(modes: dict, N: int) -> "pandas.DataFrame":  # noqa: F821
    """Per head count (index ``H``): the paper's mode for ``N`` tasks (``mode``), how many seeds
    are in it (``in mode``), the number of seeds (``seeds``) and their ratio (``fraction``).
    Chapter 7's mode claims (paper 1, B.4)."""
    rows = []
    for H, ss in modes.items():
        want = expected_mode(H, N)
        k = sum(s.mode == want for s in ss)
        rows.append({"H": H, "mode": want, "in mode": k, "seeds": len(ss), "fraction": k / len(ss)})
    return pd.DataFrame(rows).set_index("H")


def shown_seeds(modes: dict, N: int) -> dict[int, int]:
    """``{H: k}``: the position of the first seed of head count ``H`` in the paper's mode for ``N``
    tasks, 0 when none is (the model chapter 7 shows for each ``H``)."""
    return {H: next((k for k, s in enumerate(ss) if s.mode == expected_mode(H, N)), 0) for H, ss in modes.items()}


def per_model_table(sweep: dict, modes: dict) -> "pandas.DataFrame":  # noqa: F821
    """One row per ``(H, seed)``: its mode, its heads' roles (``+1 -2 | ...``), the shared /
    single-task KQ ratio and, per task ``n``, ``Gamma_n off/on`` (the RMS of ``Gamma_n`` off
    ``S_n`` over its RMS on ``S_n``).  Chapter 7 (paper 1, B.4)."""
    rows = []
    for H, runs in sweep.items():
        for r, s in zip(runs, modes[H]):
            row = {"H": H, "seed": r.spec.seed, "mode": s.mode, "heads": "  |  ".join(s.labels),
                   "shared/single KQ": s.shared_ratio}
            row.update({f"Gamma_{n + 1} off/on": v for n, v in enumerate(s.gamma_off_ratio)})
            rows.append(row)
    return pd.DataFrame(rows).set_index(["H", "seed"])


def mode_estimates(modes: dict, N: int, level: float = LEVEL) -> dict[int, Estimate]:
    """``{H: fraction of the seeds in the paper's mode}`` with its Clopper-Pearson interval (paper 1,
    B.4; chapter 7's mode claims)."""
    frac = paper_mode_fractions(modes, N)
    return {int(H): proportion_ci(int(r["in mode"]), int(r["seeds"]), level) for H, r in frac.iterrows()}


def global_pattern_estimates(gp: "pandas.DataFrame", level: float = LEVEL) -> dict[str, Estimate]:  # noqa: F821
    """For each column of :func:`global_pattern_table`: the largest over head counts of the median
    over seeds (order-statistic intervals, combined by
    :func:`~icl_lib.stats.largest`): "for every H" (paper 1, B.4; chapter 7)."""
    return {col: largest({f"H={H}": median_ci(g[col], level) for H, g in gp.groupby(level="H")}) for col in gp.columns}


def shared_ratio_estimates(modes: dict, level: float = LEVEL) -> dict:
    """The shared / single-task KQ ratio of B.4 (i)-(ii): ``{(H, "mode"): Estimate, (H, "all"):
    Estimate}`` for ``H = 1`` (``kernel`` seeds) and ``H = 2`` (``shared-dGD`` seeds), medians over those
    seeds and over all seeds of ``H`` (order-statistic intervals); keys without seeds are absent."""
    out = {}
    for H, want in ((1, "kernel"), (2, "shared-dGD")):
        ss = modes.get(H, [])
        for key, vals in (("mode", [s.shared_ratio for s in ss if s.mode == want]),
                          ("all", [s.shared_ratio for s in ss])):
            vals = [v for v in vals if not np.isnan(v)]
            if vals:
                out[(H, key)] = median_ci(vals, level)
    return out


def gamma_off_estimates(modes: dict, level: float = LEVEL) -> dict[int, Estimate]:
    """``{H: median over seeds of max_n RMS(Gamma_n off S_n) / RMS(Gamma_n on S_n)}`` with its
    order-statistic interval: is the worse task's effective pre-conditioner on its support (paper 1, C.3; chapter 7)?"""
    return {H: median_ci([max(s.gamma_off_ratio) for s in ss], level) for H, ss in modes.items()}


def mode_history_fractions(sweep: dict, data: DataConfig):
    """When do the modes form?  :func:`mode_history` of every run, as the fraction of seeds in the
    paper's mode at every logged step (paper 1, B.4; chapter 7).

    Returns ``(steps (T,), {"H = 3 (superposition)": fraction (T,), ...}, first_alloc)`` where
    ``first_alloc`` is the first logged step at which some seed with ``H >= 2N`` has allocated
    heads (``None`` when there is no such ``H`` or no seed ever has them).
    """
    N = data.n_tasks
    steps = next(iter(sweep.values()))[0].history["step"].numpy()
    fractions, first_alloc = {}, None
    for H, runs in sweep.items():
        want = expected_mode(H, N)
        hist = np.array([[m == want for m in mode_history(r.history["KQ"], r.history["OV"], data)]
                         for r in runs])  # (seeds, T)
        fractions[f"H = {H} ({want})"] = hist.mean(0)
        if want == "allocated" and hist.any():
            t = float(steps[hist.any(0).argmax()])
            first_alloc = t if first_alloc is None else min(first_alloc, t)
    return steps, fractions, first_alloc
