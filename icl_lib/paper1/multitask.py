"""Multi-task in-context regression (paper 1, B.4 and C.3): references, risks, modes.  Chapter 7.

``N`` tasks share the covariates ``x ~ N(0, I_d)``; task ``n`` reads the coordinates ``S_n``
(``s_n = |S_n|``): ``y_n = beta_n^T x_{S_n} + eps_n``, ``beta_n ~ N(0, I_{s_n} / s_n)``, noise
``N(0, sigma2)`` independent across tasks.  A token is ``(x, y_1..y_N)`` and the attention model
has ``N`` output rows (:class:`~icl_lib.models.AttentionEnsemble` with ``n_tasks = N``).

**Per-task references.**  The tasks' vectors and noises are independent, so the Bayes predictor of
task ``n`` uses task ``n``'s labels only: ridge regression on ``x_{S_n}`` with penalty
``sigma2 * s_n`` (the posterior mean under the prior ``N(0, I / s_n)``).  Debiased GD with a
diagonal pre-conditioner ``Gamma = diag(gamma)`` (the step folded into ``gamma``),

    y_hat_n = (1/L) sum_i y_{i,n} (x_i - xbar)^T Gamma x_q,

has the closed-form risk (derived in :func:`debiased_gd_diag_risk`)

    R_n(gamma) = 1 + s2 - 2 (L-1)/L <gamma, 1_{S_n}> / s_n
                 + (L-1)/L^2 ( L ||gamma_{S_n}||^2 / s_n + (1 + s2) ||gamma||^2 ),

which contains debiased GD on the true support (``gamma = eta 1_{S_n}``: the isotropic risk with
``d`` replaced by ``s_n``), on all coordinates (``gamma = eta 1_d``: the isotropic risk of
dimension ``d``) and the best diagonal pre-conditioner shared by all tasks (Modes I/II).

**What a trained model computes.**  With diagonal KQ blocks ``diag(omega_h)`` and OV entries
``mu_{h,n}`` (head ``h`` reading and writing task ``n``'s label), a first-order expansion of the
softmax in ``omega_h`` gives, per task,

    y_hat_n ~ (sum_h mu_{h,n}) ybar_n + (1/L) sum_i y_{i,n} (x_i - xbar)^T diag(Gamma_n) x_q,
    Gamma_n = sum_h mu_{h,n} omega_h,

a debiased GD with the *effective pre-conditioner* ``Gamma_n`` (:func:`effective_gamma`) when the
OV entries of each task sum to zero.

**Modes** (paper 1, B.4): rules on the learned circuits, :func:`head_roles` and
:func:`classify_mode`; :func:`pattern_table` lists the KQ diagonal by coordinate group and the OV
entries per task.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from ..circuits import DUMMY_TOL, kq_diagonal, mu_matrix
from ..config import DataConfig
from ..data import Batch, sample_chunks
from ..engine import stack_models
from ..estimators import debiased_gd_predict
from ..seeding import derive_seed, generator
from ..stats import LEVEL, Estimate, largest, mean_se_from_sums, median_ci, proportion_ci, seed_median_ci
from ..validate import check_float, check_int, check_int_list, fail

__all__ = [
    "CoordinateGroup",
    "coordinate_groups",
    "shared_and_single",
    "check_supports",
    "task_batch",
    "debiased_gd_diag_risk",
    "support_gamma",
    "optimal_gamma_shared",
    "bayes_task_risk",
    "reference_risks",
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
    "predicted_shared_ratio",
    "global_pattern_table",
    "paper_mode_table",
    "paper_mode_fractions",
    "shown_seeds",
    "per_model_table",
    "task_loss_table",
    "loss_gap_estimates",
    "mode_estimates",
    "global_pattern_estimates",
    "shared_ratio_estimates",
    "gamma_off_estimates",
    "mode_history_fractions",
    "MODES",
    "MAX_TASKS",
    "BAYES_WORK",
    "TEST_WORK",
    "max_bayes_draws",
    "max_test_prompts",
    "WRITE_TOL",
    "SUPPORT_TOL",
    "PATTERN_TOL",
]

WRITE_TOL = DUMMY_TOL  # head h writes to task n when |mu_{h,n}| >= WRITE_TOL * max_{h',n'} |mu_{h',n'}|
SUPPORT_TOL = 0.5  # KQ on S_n: RMS of omega_h off S_n <= SUPPORT_TOL * RMS of omega_h on S_n
PATTERN_TOL = 0.5  # global pattern (B.4): both ratios of global_pattern below this (chapter 2's 0.5)
MAX_TASKS = 8  # chapter 7's supports: at most this many tasks (each adds an output row and a label)
BAYES_WORK = 5 * 10**9  # chapter 7: Bayes Monte Carlo draws x L x sum_n |S_n| (about 5 minutes on a CPU core)
TEST_WORK = 25 * 10**9  # chapter 7: test prompts x models x max H x L x (d + N) (about 5 minutes on a CPU core)
MODES = ("kernel", "shared-dGD", "allocated", "superposition", "mixed", "other")


# ------------------------------------------------------------------------------ coordinate groups
@dataclass(frozen=True)
class CoordinateGroup:
    """Coordinates read by exactly the tasks ``tasks`` (0-based), e.g. task-1-only, shared, task-2-only."""

    name: str
    coords: tuple[int, ...]
    tasks: tuple[int, ...]


def _supports(data: DataConfig) -> tuple[tuple[int, ...], ...]:
    return data.supports if data.supports is not None else (tuple(range(data.d)),)


def shared_and_single(data: DataConfig) -> tuple[list[int], list[int]]:
    """The coordinates read by at least two tasks and those read by exactly one (0-based, in the
    order of :func:`coordinate_groups`): the two sides of the "shared / single-task" KQ ratio of
    paper 1, B.4 (i)-(ii).  Chapter 7."""
    groups = coordinate_groups(data)
    shared = [j for g in groups if len(g.tasks) >= 2 for j in g.coords]
    single = [j for g in groups if len(g.tasks) == 1 for j in g.coords]
    return shared, single


def coordinate_groups(data: DataConfig) -> list[CoordinateGroup]:
    """Split ``0..d-1`` by which tasks read each coordinate (paper 1, C.3's division of ``[d]``).

    Groups come in the order of their first coordinate; names are ``"task n only"``, ``"shared"``
    (all tasks), ``"tasks a,b"`` (some) and ``"unused"``, with 1-based task numbers.  Chapter 7.
    """
    sup = [set(s) for s in _supports(data)]
    N = len(sup)
    member: dict[tuple[int, ...], list[int]] = {}
    for j in range(data.d):
        member.setdefault(tuple(n for n in range(N) if j in sup[n]), []).append(j)
    groups = []
    for tasks, coords in sorted(member.items(), key=lambda kv: kv[1][0]):
        if not tasks:
            name = "unused"
        elif len(tasks) == 1:
            name = f"task {tasks[0] + 1} only" if N > 1 else "support"
        elif len(tasks) == N:
            name = "shared"
        else:
            name = "tasks " + ",".join(str(n + 1) for n in tasks)
        groups.append(CoordinateGroup(name, tuple(coords), tasks))
    return groups


def check_supports(supports, d: int, max_tasks: int = MAX_TASKS) -> tuple[tuple[int, ...], ...]:
    """Chapter 7's ``supports`` parameter: 2 to ``max_tasks`` tasks, each a non-empty list of
    distinct 0-based coordinates in ``[0, d - 1]`` (the ``S_n`` of paper 1, Definition B.1).

    Returns it as a tuple of tuples; a bad value raises the library's ``ValueError`` naming
    ``supports`` (or ``supports[n]``, ``supports[n][i]``).
    """
    d = check_int("d", d, 1)
    if not isinstance(supports, (list, tuple)) or not 2 <= len(supports) <= max_tasks:
        fail("supports", supports, f"a list of 2 to {max_tasks} tasks, each a list of coordinates in [0, {d - 1}]")
    out = []
    for n, S in enumerate(supports):
        S = check_int_list(f"supports[{n}]", S, 0, d - 1)
        if len(set(S)) != len(S):
            fail(f"supports[{n}]", list(S), "a list of distinct coordinates")
        out.append(S)
    return tuple(out)


def max_bayes_draws(L: int, supports) -> int:
    """The most design matrices :func:`reference_risks` may draw for chapter 7's ``n_bayes`` so that
    its Monte Carlo (``n x L x |S_n|`` normal numbers per task) stays within :data:`BAYES_WORK`."""
    return max(2, BAYES_WORK // (check_int("L", L, 1) * sum(len(S) for S in supports)))


def max_test_prompts(heads: Sequence[int], seeds: int, L: int, D: int) -> int:
    """The most test prompts :func:`task_loss_table` may use for chapter 7's ``n_test`` so that
    evaluating ``len(heads) x seeds`` models (padded to ``max(heads)`` heads, tokens of size ``D``)
    stays within :data:`TEST_WORK`."""
    models = len(heads) * check_int("seeds", seeds, 1)
    return max(2, TEST_WORK // (models * max(heads) * check_int("L", L, 1) * check_int("D", D, 1)))


# ------------------------------------------------------------------------------ per-task predictors
def task_batch(batch: Batch, task: int, coords: Sequence[int] | None = None) -> Batch:
    """Task ``task``'s single-task view of a multi-task batch, covariates restricted to ``coords``
    (all when ``None``), so the single-task predictors of :mod:`icl_lib.estimators` apply."""
    x, y, xq, yq = batch.x, batch.y, batch.xq, batch.yq
    if coords is not None:
        idx = torch.as_tensor(list(coords), dtype=torch.long, device=x.device)
        x, xq = x.index_select(-1, idx), xq.index_select(-1, idx)
    return Batch.from_arrays(x, y[..., task : task + 1], xq, yq[..., task : task + 1])


def _mask(data: DataConfig, task: int) -> torch.Tensor:
    return data.support_mask()[check_int("task", task, 0, data.n_tasks - 1)]  # (d,)


def debiased_gd_diag_risk(gamma, data: DataConfig, task: int) -> float:
    """Exact risk of debiased GD with pre-conditioner ``diag(gamma)`` on task ``task`` (isotropic
    covariates; paper 1, C.3).  Derivation: with ``W = Xc^T Xc ~ Wishart_d(I, L-1)`` and
    ``h = (W beta + Xc^T eps) / L``, the risk is ``s2 + E||Gamma h - beta||^2``; ``E[h | beta] =
    (L-1)/L beta``, ``E[W A W] = (L-1) L A + (L-1) tr(A) I`` for symmetric ``A``, and
    ``E||beta||^2 = 1``, ``E[beta^T A beta] = tr(A_{S_n}) / s_n`` give

        1 + s2 - 2 (L-1)/L <gamma, 1_S>/s + (L-1)/L^2 (L ||gamma_S||^2 / s + (1 + s2) ||gamma||^2).

    ``gamma`` is a length-``d`` sequence or tensor."""
    if data.covariance is not None or data.rho != 0.0:
        raise ValueError("data has a non-identity covariance: accepted isotropic covariates (rho=0)")
    g = torch.as_tensor(gamma, dtype=torch.float64).reshape(-1)
    if g.numel() != data.d:
        raise ValueError(f"gamma has {g.numel()} entries: accepted d={data.d}")
    m = _mask(data, task)
    s, L, s2 = float(m.sum()), data.L, data.sigma2
    lin = float((g * m).sum()) / s
    quad_S = float((g * g * m).sum()) / s
    quad = float((g * g).sum())
    return 1 + s2 - 2 * (L - 1) / L * lin + (L - 1) / L**2 * (L * quad_S + (1 + s2) * quad)


def support_gamma(data: DataConfig, task: int, coords: str = "support") -> torch.Tensor:
    """Optimal debiased GD pre-conditioner ``eta* 1_T`` on ``T = S_n`` (``coords="support"``:
    ``eta* = L / (L + s_n (1 + s2))``, the best of all diagonal pre-conditioners for task ``n``) or
    on all coordinates (``coords="all"``: ``eta* = L / (L + d (1 + s2))``).  Shape ``(d,)``."""
    m = _mask(data, task)
    if coords == "support":
        k = float(m.sum())
    elif coords == "all":
        k, m = float(data.d), torch.ones_like(m)
    else:
        raise ValueError(f"coords={coords!r} is invalid: accepted 'support' or 'all'")
    return m * data.L / (data.L + k * (1 + data.sigma2))


def optimal_gamma_shared(data: DataConfig) -> torch.Tensor:
    """Best diagonal pre-conditioner shared by all tasks (minimises the task-averaged risk; the
    weighted debiased GD of Modes I/II): ``gamma_j = L a_j / (L a_j + N (1 + s2))`` with
    ``a_j = sum_n 1[j in S_n] / s_n``.  Shape ``(d,)``; larger on coordinates read by more tasks."""
    masks = data.support_mask()  # (N, d)
    a = (masks / masks.sum(-1, keepdim=True)).sum(0)  # (d,)
    L, N = data.L, masks.shape[0]
    return L * a / (L * a + N * (1 + data.sigma2))


@torch.no_grad()
def bayes_task_risk(data: DataConfig, task: int, n: int = 200_000, seed: int = 0, chunk: int = 20_000) -> tuple[float, float]:
    """Bayes risk of task ``task``: ``s2 + s2 E tr((X_S^T X_S + s2 s I)^{-1})`` (the posterior
    covariance ``s2 (X_S^T X_S + s2 s I)^{-1}`` averaged against ``x_q ~ N(0, I)``), the expectation
    by Monte Carlo over ``n`` design matrices: (mean, std error)."""
    s2 = data.sigma2
    S = _supports(data)[task]
    s, L = len(S), data.L
    if s2 == 0 and L < s:
        raise ValueError(f"sigma2=0 with L={L} < |S|={s}: the posterior is not defined, accepted sigma2 > 0 or L >= |S|")
    n = check_int("n", n, 2)
    gen = generator(seed, "bayes-task")
    vals, done = [], 0
    eye = torch.eye(s, dtype=torch.float64)
    while done < n:
        b = min(chunk, n - done)
        X = torch.randn(b, L, s, generator=gen, dtype=torch.float64)  # (b, L, s)
        A = X.transpose(-1, -2) @ X + s2 * s * eye  # (b, s, s)
        vals.append(s2 + s2 * torch.linalg.inv(A).diagonal(dim1=-2, dim2=-1).sum(-1))
        done += b
    v = torch.cat(vals)
    return float(v.mean()), float(v.std() / math.sqrt(v.numel()))


def reference_risks(data: DataConfig, n_bayes: int = 200_000, seed: int = 0) -> "pandas.DataFrame":  # noqa: F821
    """Per-task reference risks (rows: tasks 1..N): optimal debiased GD on the true support, on all
    coordinates, with the best shared pre-conditioner, and Bayes (with its Monte Carlo std error).
    Chapter 7's horizontal lines."""
    g_shared = optimal_gamma_shared(data)
    rows = []
    for t in range(data.n_tasks):
        bayes, bayes_se = bayes_task_risk(data, t, n=n_bayes, seed=derive_seed(seed, "task", t))
        rows.append({
            "task": t + 1,
            "support size": len(_supports(data)[t]),
            "dGD on support": debiased_gd_diag_risk(support_gamma(data, t, "support"), data, t),
            "dGD on all coordinates": debiased_gd_diag_risk(support_gamma(data, t, "all"), data, t),
            "shared weighted dGD": debiased_gd_diag_risk(g_shared, data, t),
            "Bayes": bayes,
            "Bayes se": bayes_se,
        })
    return pd.DataFrame(rows).set_index("task")


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
               write_tol: float = WRITE_TOL, support_tol: float = SUPPORT_TOL) -> list[HeadRole]:
    """Per-head roles of one model ``KQ (H, D, D)``, ``OV (H, N, D)`` (paper 1, B.4), by rule:

    * head ``h`` writes to task ``n`` when ``|mu_{h,n}| >= write_tol * max |mu|``;
    * its sign for task ``n`` is ``sign(mu_{h,n})``; its KQ sign for task ``n`` the sign of the mean
      of ``omega_h`` over ``S_n`` (sign matching per task: the two agree);
    * its KQ diagonal is *on* ``S_n`` when the RMS of ``omega_h`` off ``S_n`` is at most
      ``support_tol`` times the RMS on ``S_n`` (``S_n`` = all coordinates: always on).
    """
    write_tol = check_float("write_tol", write_tol, 0.0, 1.0)
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
                  write_tol: float = WRITE_TOL, support_tol: float = SUPPORT_TOL) -> ModeSummary:
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
    elif max(kq_off, ov_off) >= PATTERN_TOL:
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
# ``sweep`` is :func:`icl_lib.paper1.sweeps.heads_sweep`'s ``{H: [Run per seed]}`` and ``modes`` the
# matching ``{H: [ModeSummary per seed]}`` of :func:`classify_mode`; rows follow their order.


def predicted_shared_ratio(data: DataConfig) -> float:
    """The shared / single-task ratio of the best shared debiased GD (paper 1, B.4 (ii)):
    ``mean gamma over shared coordinates / mean gamma over single-task ones`` for the
    pre-conditioner of :func:`optimal_gamma_shared`; NaN when either side is empty.  Chapter 7."""
    shared, single = shared_and_single(data)
    if not shared or not single:
        return float("nan")
    gamma = optimal_gamma_shared(data)  # (d,)
    return float(gamma[shared].mean() / gamma[single].mean())


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


@torch.no_grad()
def task_loss_table(sweep: dict, modes: dict, data: DataConfig, n: int = 20_000, seed: int = 0,
                    pair_H: int | None = None, chunk: int = 2_000) -> "pandas.DataFrame":  # noqa: F821
    """Per-task test ICL loss of every model of the sweep on one shared set of ``n`` fresh prompts
    (:func:`~icl_lib.data.sample_chunks` with ``seed``, chunks of ``chunk``), paired on the same prompts with the three
    debiased GD references of :func:`reference_risks` (Chapter 7; paper 1, C.3).  One row per
    (model, task): ``H``, ``seed``, ``task`` (1-based), ``loss``, ``se`` (its test-set standard
    error), ``mode``; for each reference ``ref`` in ``support``, ``all``, ``shared``: ``gap ref`` =
    mean(model error - reference error) / R_ref (the reference's closed-form risk) and its paired
    ``gap ref se``; ``prefers shared`` = [E(y_hat - y_all)^2 - E(y_hat - y_shared)^2] / E(y_shared -
    y_all)^2 over the prompts (+1: the model predicts as the shared-weighted debiased GD, -1: as
    all-coordinate debiased GD) with its paired ``prefers shared se``; and with ``pair_H``, ``gap
    H<pair_H>`` = mean(model error - error of the model with ``pair_H`` heads and the same seed) /
    R_support with its se (nan without that model)."""
    runs = [r for rs in sweep.values() for r in rs]
    mode_of = [s.mode for H in sweep for s in modes[H]]  # aligned with runs
    model = stack_models(runs)
    N, n = data.n_tasks, check_int("n", n, 2)
    gammas = {"support": [support_gamma(data, t, "support") for t in range(N)],
              "all": [support_gamma(data, t, "all") for t in range(N)],
              "shared": [optimal_gamma_shared(data)] * N}  # per task (d,)
    closed = {k: [debiased_gd_diag_risk(g[t], data, t) for t in range(N)] for k, g in gammas.items()}
    index = {(r.spec.model.heads, r.spec.seed): k for k, r in enumerate(runs)}
    partner = [index.get((pair_H, r.spec.seed), -1) for r in runs]  # -1: none
    sums: dict[str, list] = {}  # name -> [sum, sum of squares] over the prompts, each (R, N)

    def add(name, q):  # q (R, B, N): accumulate its first two moments over the prompts
        acc = sums.setdefault(name, [0.0, 0.0])
        acc[0] = acc[0] + q.sum(1)
        acc[1] = acc[1] + (q * q).sum(1)

    for b in sample_chunks(data, n, seed, chunk, dtype=model.Q.dtype):
        b = b.to(model.Q.device)
        out = model(b)  # (R, B, N)
        err = ((out - b.yq) ** 2).cpu()
        add("loss", err)
        preds = {k: torch.stack([debiased_gd_predict(task_batch(b, t), 1.0, torch.diag(g[t])) for t in range(N)], -1)
                 for k, g in gammas.items()}  # (B, N) each
        for k in gammas:
            add(f"gap {k}", err - ((preds[k] - b.yq) ** 2).cpu())
        add("prefers shared", ((out - preds["all"]) ** 2 - (out - preds["shared"]) ** 2).cpu())
        add("delta2", ((preds["shared"] - preds["all"]) ** 2).cpu()[None])
        if pair_H is not None:
            add(f"gap H{pair_H}", err - err[[max(j, 0) for j in partner]])
    mean, se = {}, {}
    for k, (s1, s2) in sums.items():
        mean[k], se[k] = mean_se_from_sums(s1, s2, n)
    scale = {f"gap {k}": torch.tensor(closed[k]) for k in gammas}  # per task
    scale["prefers shared"] = mean["delta2"][0]  # E(y_shared - y_all)^2 per task
    if pair_H is not None:
        scale[f"gap H{pair_H}"] = torch.tensor(closed["support"])
    rows = []
    for k, r in enumerate(runs):
        for t in range(N):
            row = {"H": r.spec.model.heads, "seed": r.spec.seed, "task": t + 1, "loss": float(mean["loss"][k, t]),
                   "se": float(se["loss"][k, t]), "mode": mode_of[k]}
            for name, sc in scale.items():
                missing = name == f"gap H{pair_H}" and partner[k] < 0
                row[name] = float("nan") if missing else float(mean[name][k, t] / sc[t])
                row[name + " se"] = float("nan") if missing else float(se[name][k, t] / sc[t])
            rows.append(row)
    return pd.DataFrame(rows)


def loss_gap_estimates(losses: "pandas.DataFrame", H: int, column: str, level: float = LEVEL) -> dict[int, Estimate]:  # noqa: F821,E501
    """Per task (1-based keys): the median over the seeds of ``H`` heads of ``losses[column]`` (a
    paired gap of :func:`task_loss_table`) with :func:`~icl_lib.stats.seed_median_ci`,
    widened by the largest paired se (``column + " se"``); empty without such rows.  Chapter 7's loss
    claims combine the tasks with ``largest``, ``smallest`` or ``envelope``."""
    rows = losses[(losses["H"] == H) & losses[column].notna()]
    return {int(t): seed_median_ci(g[column], g[column + " se"], level) for t, g in rows.groupby("task")}


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
