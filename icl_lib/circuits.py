"""KQ / OV circuits of trained attention and the pattern metrics of paper 1, Section 3.

The trained circuits take the form (paper 1, eq. 3.1)

    KQ_h = [[omega_h I_d, *], [0^T, *]],     OV_h = (0, ..., 0, mu_h),

and the heads show sign matching ``sign(omega_h) = sign(mu_h)``, zero-sum OV ``sum_h mu_h ~ 0``,
homogeneous ``|omega_h|`` over non-dummy heads, and group into positive, negative and dummy heads.
Only the first ``d`` columns of ``KQ_h`` matter (the query's label slot is 0).

The read-outs of the circuits, one place for all chapters: :func:`omega_of` and :func:`mu_of`
(the scalars of (3.1)), :func:`kq_blocks` and :func:`kq_diagonal` (the covariate block and its
diagonal), :func:`mu_matrix` (every head's OV entry per task), :func:`effective_preconditioner`
and :func:`effective_rate` (the linearised predictor: pre-conditioned debiased GD).  They keep the
dtype of their input.

Used by chapters 2 (final patterns), 3 (their emergence) and 5-7.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .definitions import DEFINITIONS
from .definitions import value as definition

__all__ = [
    "omega_of",
    "mu_of",
    "kq_blocks",
    "kq_diagonal",
    "mu_matrix",
    "effective_preconditioner",
    "effective_rate",
    "kq_offdiag_ratio",
    "ov_offlast_ratio",
    "dummy_heads",
    "pattern_kinds",
    "PatternSummary",
    "summarize_pattern",
    "pattern_history",
    "DUMMY_TOL",
    "SHAPE_TOL",
    "PATTERNS",
]

# The values in force of the definitions of a live head and of the form (3.1) (icl_lib.definitions:
# "live-tol", "shape-tol"); the functions below read the definitions when called, so that a chapter
# executed under an alternative (ICL_DEFINITIONS) measures with it.
DUMMY_TOL = DEFINITIONS["live-tol"].value
SHAPE_TOL = DEFINITIONS["shape-tol"].value
PATTERNS = ("pos/neg", "single-sign", "single-head", "unformed")  # what a model's circuits are


def omega_of(KQ: torch.Tensor, d: int) -> torch.Tensor:
    """``omega_h``: mean of the diagonal of the top-left ``d x d`` block of ``KQ (..., H, D, D)``."""
    return KQ[..., :d, :d].diagonal(dim1=-2, dim2=-1).mean(-1)


def mu_of(OV: torch.Tensor, d: int, task: int = 0) -> torch.Tensor:
    """``mu_h``: the entry of ``OV_h (..., H, N, D)`` reading task ``task``'s label, shape ``(..., H)``."""
    return OV[..., task, d + task]


def kq_blocks(KQ: torch.Tensor, d: int) -> torch.Tensor:
    """The covariate blocks ``KQ_h[:d, :d]`` of ``KQ (..., H, D, D)``: ``(..., H, d, d)`` (chapter 6)."""
    return KQ[..., :d, :d]


def kq_diagonal(KQ: torch.Tensor, d: int) -> torch.Tensor:
    """``omega_h`` as a vector: the diagonal of the top-left ``d x d`` block, ``(..., H, d)`` (chapter 7)."""
    return KQ[..., :d, :d].diagonal(dim1=-2, dim2=-1)


def mu_matrix(OV: torch.Tensor, d: int) -> torch.Tensor:
    """``mu_{h,n} = OV_h[n, d + n]``: head ``h``'s weight from task ``n``'s label to output ``n``,
    ``(..., H, N)`` (chapter 7)."""
    return torch.stack([mu_of(OV, d, n) for n in range(OV.shape[-2])], -1)


def effective_preconditioner(KQ: torch.Tensor, OV: torch.Tensor, d: int, c_f: float = 1.0) -> torch.Tensor:
    """``Gamma = c_f sum_h mu_h KQ_h[:d, :d]`` from circuits ``KQ (..., H, D, D)``, ``OV (..., H, N, D)``.

    Linearising every head's normalised attention at small scores, ``f(s_i) / sum_j f(s_j) ~
    (1 + c_f (s_i - sbar)) / L`` with ``s_i = x_i^T KQ_h[:d,:d] x_q + y_i KQ_h[d,:d] x_q``, the
    prediction's part linear in the labels is ``(1/L) sum_i y_i (x_i - xbar)^T Gamma x_q``:
    pre-conditioned debiased GD (paper 1, Theorem 4.2 (i), B.2, B.3; chapters 5 and 6).  Returns
    ``(..., d, d)``.
    """
    mu = OV[..., 0, d]  # (..., H)
    return c_f * (mu[..., None, None] * KQ[..., :d, :d]).sum(-3)


def effective_rate(KQ: torch.Tensor, OV: torch.Tensor, d: int, c_f: float = 1.0) -> torch.Tensor:
    """``eta = c_f sum_h mu_h omega_h`` (``2 mu omega c_f`` for two symmetric heads; paper 1,
    Section 4.3, Table 1), i.e. ``tr(Gamma) / d`` of :func:`effective_preconditioner` (chapter 5)."""
    return torch.diagonal(effective_preconditioner(KQ, OV, d, c_f), dim1=-2, dim2=-1).mean(-1)


def _kq_parts(KQ: torch.Tensor, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Squared mass off and on the diagonal of ``KQ[:, :d]`` (the columns that meet ``x_q``), per head."""
    block = KQ[..., :, :d]  # (..., H, D, d)
    diag2 = block[..., :d, :].diagonal(dim1=-2, dim2=-1).pow(2).sum(-1)
    off2 = (block.pow(2).sum((-1, -2)) - diag2).clamp_min(0)
    return off2, diag2


def _ov_parts(OV: torch.Tensor, d: int, task: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Squared mass of ``OV_h[task]`` off and on its label entry, per head."""
    row = OV[..., task, :]
    last2 = row[..., d + task].pow(2)
    return (row.pow(2).sum(-1) - last2).clamp_min(0), last2


def _pooled_ratio(off2: torch.Tensor, on2: torch.Tensor) -> torch.Tensor:
    return off2.sum(-1).sqrt() / on2.sum(-1).sqrt()


def kq_offdiag_ratio(KQ: torch.Tensor, d: int) -> torch.Tensor:
    """Mass of ``KQ_h[:, :d]`` off its diagonal (off-diagonal block entries and the label row)
    relative to the diagonal, ``sqrt(sum off^2) / sqrt(sum diag^2)``, per head ``(..., H)``."""
    off2, diag2 = _kq_parts(KQ, d)
    return off2.sqrt() / diag2.sqrt()


def ov_offlast_ratio(OV: torch.Tensor, d: int, task: int = 0) -> torch.Tensor:
    """``||OV_h[task] off the label entry|| / |mu_h|``, per head ``(..., H)``."""
    off2, last2 = _ov_parts(OV, d, task)
    return off2.sqrt() / last2.sqrt()


def dummy_heads(omega: torch.Tensor, mu: torch.Tensor, tol: float | None = None) -> torch.Tensor:
    """Dummy heads (paper 1, Section 4.2 and C.1: a head that "degenerates"), by the definitions
    ``live-head`` and ``live-tol`` (:mod:`icl_lib.definitions`): in force, ``|mu_h|`` (what it
    writes to the output) or ``|omega_h|`` (what makes its attention read the query) below
    ``tol`` times the model's largest, so that the head adds no term ``mu_h omega_h`` of the
    predictor's size; a head whose OV has died while its KQ keeps its scale is dummy, the sign of
    its ``mu_h`` noise.  Under the alternative ``live-head=both``, only a head with both scales
    small is dummy.  ``tol``: ``None`` reads ``live-tol``.  A single-head model has no dummy head.
    ``(..., H)`` -> ``(..., H)`` booleans."""
    tol = definition("live-tol") if tol is None else tol
    small_w = omega.abs() < tol * omega.abs().amax(-1, keepdim=True)
    small_m = mu.abs() < tol * mu.abs().amax(-1, keepdim=True)
    dummy = (small_w & small_m) if definition("live-head") == "both" else (small_w | small_m)
    if omega.shape[-1] == 1:
        dummy = torch.zeros_like(dummy)
    return dummy


def pattern_kinds(KQ: torch.Tensor, OV: torch.Tensor, d: int, tol: float | None = None,
                  shape_tol: float | None = None, kq_form: bool = True) -> tuple[np.ndarray, torch.Tensor]:
    """The book's one definition of paper 1's pattern, for circuits ``KQ (..., H, D, D)``, ``OV
    (..., H, N, D)`` (one model, or a history of snapshots): ``(kind (...) of str, live (..., H))``.

    A model is in the positive/negative pattern (``"pos/neg"``) when its circuits have the form
    (3.1) -- pooled over the live heads (:func:`dummy_heads`), the KQ mass off the diagonal and the
    OV mass off the label entry below ``shape_tol`` of the diagonal and label mass -- and its live
    heads have both signs of ``omega_h``; of the form with one sign, ``"single-sign"`` (H >= 2: the
    kernel-regressor trap) or ``"single-head"`` (H = 1); not of the form, ``"unformed"`` (the signs
    alone never make a pattern).  ``kq_form=False`` asks the OV shape only: with anisotropic
    covariates the KQ block is ``omega_h Gamma``, not diagonal, while "the pattern of the OV circuits
    as in Observation 1 in §3 persists" (paper 1, B.3; chapter 6).  Chapters 2, 3, 5, 6, 7 and 9
    read every model with it.  ``tol`` and ``shape_tol``: ``None`` reads the definitions
    ``live-tol`` and ``shape-tol`` (:mod:`icl_lib.definitions`)."""
    shape_tol = definition("shape-tol") if shape_tol is None else shape_tol
    KQ, OV = KQ.detach().double().cpu(), OV.detach().double().cpu()
    H = KQ.shape[-3]
    w, m = omega_of(KQ, d), mu_of(OV, d)
    live = ~dummy_heads(w, m, tol)
    off2, diag2 = _kq_parts(KQ, d)
    offo2, last2 = _ov_parts(OV, d)
    kq = (off2 * live).sum(-1).sqrt() / (diag2 * live).sum(-1).sqrt()
    ov = (offo2 * live).sum(-1).sqrt() / (last2 * live).sum(-1).sqrt()
    shape = ((kq < shape_tol) & (ov < shape_tol) if kq_form else ov < shape_tol).numpy()
    both = ((live & (w > 0)).any(-1) & (live & (w < 0)).any(-1)).numpy()
    kind = np.where(both, "pos/neg", "single-sign") if H > 1 else np.full(shape.shape, "single-head")
    return np.where(shape, kind, "unformed"), live


@dataclass
class PatternSummary:
    """Pattern metrics of one trained model (paper 1, Section 3), computed by :func:`summarize_pattern`."""

    heads: int
    omega: list[float]  # omega_h per head
    mu: list[float]  # mu_h per head
    groups: list[str]  # "positive" | "negative" | "dummy" per head
    eta: float  # effective rate sum_h mu_h omega_h
    kq_offdiag: float  # off-diagonal + label-row mass of the KQ blocks / diagonal mass, non-dummy heads pooled
    ov_offlast: float  # mass of the OV rows off the label entry / label-entry mass, non-dummy heads pooled
    sign_matched: bool  # sign(omega_h) = sign(mu_h) for every non-dummy head
    zero_sum: float  # |sum_h mu_h| / sum_h |mu_h| (nan for H = 1)
    omega_spread: float  # (max - min) / mean of |omega_h| over non-dummy heads
    kind: str  # one of PATTERNS (pattern_kinds): "pos/neg", "single-sign", "single-head", "unformed"

    @property
    def n_dummy(self) -> int:
        return self.groups.count("dummy")


def summarize_pattern(KQ: torch.Tensor, OV: torch.Tensor, d: int, tol: float | None = None,
                      kq_form: bool = True) -> PatternSummary:
    """Summarise one model's circuits ``KQ (H, D, D)``, ``OV (H, N, D)`` (only its real heads); its
    ``kind`` is :func:`pattern_kinds`'s (``kq_form``: as there)."""
    KQ, OV = KQ.detach().double().cpu(), OV.detach().double().cpu()
    H = KQ.shape[0]
    w, m = omega_of(KQ, d), mu_of(OV, d)
    kinds, live = pattern_kinds(KQ, OV, d, tol, kq_form=kq_form)
    groups = ["dummy" if not live[h] else ("positive" if w[h] > 0 else "negative") for h in range(H)]
    aw = w[live].abs()
    kind = str(kinds)
    return PatternSummary(
        heads=H,
        omega=w.tolist(),
        mu=m.tolist(),
        groups=groups,
        eta=float((w * m).sum()),
        kq_offdiag=float(_pooled_ratio(*_kq_parts(KQ[live], d))),
        ov_offlast=float(_pooled_ratio(*_ov_parts(OV[live], d))),
        sign_matched=bool((torch.sign(w[live]) == torch.sign(m[live])).all()),
        zero_sum=float(m.sum().abs() / m.abs().sum()) if H > 1 else float("nan"),
        omega_spread=float((aw.max() - aw.min()) / aw.mean()) if len(aw) else float("nan"),
        kind=kind,
    )


def pattern_history(KQ: torch.Tensor, OV: torch.Tensor, d: int, tol: float | None = None) -> list[PatternSummary]:
    """:func:`summarize_pattern` at every logged step of a run's history ``KQ (T, H, D, D)``,
    ``OV (T, H, N, D)`` (chapters 2 and 3: when does a pattern appear)."""
    return [summarize_pattern(KQ[t], OV[t], d, tol) for t in range(KQ.shape[0])]
