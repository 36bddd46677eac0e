"""Per-task references and risks of multi-task in-context regression (paper 1, B.4 and C.3).

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

* :class:`CoordinateGroup`, :func:`coordinate_groups`, :func:`shared_and_single` -- C.3's division
  of the coordinates by the tasks that read them;
* :func:`check_supports`, :func:`max_bayes_draws`, :func:`max_test_prompts` -- chapter 7's
  parameters and the sizes that keep its Monte Carlo within minutes;
* :func:`task_batch`, :func:`debiased_gd_diag_risk`, :func:`support_gamma`,
  :func:`optimal_gamma_shared`, :func:`bayes_task_risk`, :func:`reference_risks`,
  :func:`predicted_shared_ratio` -- the references per task;
* :func:`task_loss_table`, :func:`loss_gap_estimates`, :func:`reference_gap` -- every trained
  model's per-task loss against them, chapter 7's loss claims and their rivals.

Used by chapter 7.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import pandas as pd
import torch

from ...config import DataConfig
from ...sampling import Batch, sample_chunks
from ...engine import stack_models
from ...estimators import debiased_gd_predict
from ...seeding import derive_seed, generator
from ...stats import LEVEL, Estimate, mean_se_from_sums, seed_median_ci
from ...validate import check_int, check_int_list, fail

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
    "predicted_shared_ratio",
    "task_loss_table",
    "loss_gap_estimates",
    "reference_gap",
    "MAX_TASKS",
    "BAYES_WORK",
    "TEST_WORK",
    "max_bayes_draws",
    "max_test_prompts",
]

MAX_TASKS = 8  # chapter 7's supports: at most this many tasks (each adds an output row and a label)
BAYES_WORK = 5 * 10**9  # chapter 7: Bayes Monte Carlo draws x L x sum_n |S_n| (about 5 minutes on a CPU core)
TEST_WORK = 25 * 10**9  # chapter 7: test prompts x models x max H x L x (d + N) (about 5 minutes on a CPU core)


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


# ------------------------------------------------------------------------------ chapter 7's tables
# ``sweep`` is the trained :func:`icl_lib.paper1.sweeps.heads_sweep_specs` as ``{H: [Run per seed]}``; rows follow its
# order.


def predicted_shared_ratio(data: DataConfig) -> float:
    """The shared / single-task ratio of the best shared debiased GD (paper 1, B.4 (ii)):
    ``mean gamma over shared coordinates / mean gamma over single-task ones`` for the
    pre-conditioner of :func:`optimal_gamma_shared`; NaN when either side is empty.  Chapter 7."""
    shared, single = shared_and_single(data)
    if not shared or not single:
        return float("nan")
    gamma = optimal_gamma_shared(data)  # (d,)
    return float(gamma[shared].mean() / gamma[single].mean())


@torch.no_grad()
def task_loss_table(sweep: dict, modes: dict, data: DataConfig, n: int = 20_000, seed: int = 0,
                    pair_H: int | None = None, chunk: int = 2_000) -> "pandas.DataFrame":  # noqa: F821
    """Per-task test ICL loss of every model of the sweep on one shared set of ``n`` fresh prompts
    (:func:`~icl_lib.sampling.sample_chunks` with ``seed``, chunks of ``chunk``), paired on the same prompts with the three
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


def reference_gap(refs: "pandas.DataFrame", rival: str, ref: str) -> float:  # noqa: F821
    """The rival of a loss claim against the reference ``ref``: the paired gap a model computing the
    reference ``rival`` instead would have, ``R_rival / R_ref - 1`` per task from
    :func:`reference_risks`' columns, the task's value nearest to 0 (the nearest rival over the
    tasks).  Chapter 7."""
    for col in (rival, ref):
        if col not in refs.columns:
            fail("column", col, f"a column of reference_risks ({', '.join(map(str, refs.columns))})")
    gaps = (refs[rival] / refs[ref] - 1).to_numpy(dtype=float)
    return float(gaps[abs(gaps).argmin()])
