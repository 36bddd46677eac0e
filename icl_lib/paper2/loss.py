"""Paper 2's losses: the finite-n training loss, the population loss, the regulariser and ``Q``.

Goel, Soltanolkotabi, Bartlett (2026).  With ``theta = (A, B)``, ``A (p, d)``, ``B (d, d)``:

* model (Section 3): ``y_hat(x_i) = A sum_j softmax_j(x_i^T B x_j) x_j``, every sample attending
  to all ``n`` samples of its sequence, itself included;
* training loss (Section 3): ``L_hat = 1/(2n) sum_i ||y_hat(x_i) - y_i||^2``;
* population loss (Section 4, ``n -> infinity``; Gaussian tilting
  ``E[e^{a^T x} x] / E[e^{a^T x}] = Sigma a``): ``L = 1/2 ||(A Sigma B^T - M) Sigma^{1/2}||_F^2
  + 1/2 E||z||^2``;
* regulariser (Section 4): ``R = 1/8 ||A~^T A~ - B~^T B~||_F^2`` with ``A~ = A Sigma^{1/2}``,
  ``B~ = Sigma^{1/2} B Sigma^{1/2}``, i.e. ``1/8 tr(N Sigma N Sigma)``, ``N = A^T A - B^T Sigma B``;
  its empirical version ``R_hat`` puts the sequence's ``Sigma_hat = X^T X / n`` for ``Sigma``;
* ``Q = L + R`` and ``Q_hat = L_hat + R_hat`` (Section 5);
* the P-geometry form of ``Q`` (Section 4): ``L* + 1/8 ||P^{1/2}(theta Sigma theta^T - 2 Sym(M))
  P^{1/2}||_F^2 - 1/2 ||M Sigma^{1/2}||_F^2`` with ``theta = [A; B]``, ``P = diag(I_p, Sigma)``,
  ``Sym(M) = [[0, M], [M^T, 0]]``.

All functions take a leading repetition dimension ``R``; losses return ``(R,)``.  Used by chapter 8.
"""

from __future__ import annotations

import torch

__all__ = [
    "transpose",
    "attention_mean",
    "predict",
    "empirical_loss",
    "empirical_regulariser",
    "empirical_Q",
    "empirical_loss_grad",
    "regulariser_grad",
    "population_loss",
    "excess_loss",
    "regulariser",
    "population_Q",
    "population_grad",
    "Q_P_geometry",
    "stack_theta",
    "P_matrix",
]

_CHUNK_ELEMENTS = 2**22  # score-matrix entries per autograd chunk (bounds memory at large n)


def transpose(X: torch.Tensor) -> torch.Tensor:
    """``X^T`` over the last two dimensions (batched matrices)."""
    return X.transpose(-1, -2)


def attention_mean(X: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """``mu_i = sum_j softmax_j(x_i^T B x_j) x_j`` for every sample of every sequence (Section 3).

    ``X (R, K, n, d)``, ``B (R, d, d)`` -> ``mu (R, K, n, d)``.  Each sample attends to all ``n``
    samples of its sequence, itself included.
    """
    S = X @ B[:, None] @ transpose(X)  # (R, K, n, n) scores x_i^T B x_j
    return torch.softmax(S, dim=-1) @ X  # (R, K, n, d)


def predict(X: torch.Tensor, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """``y_hat(x_i) = A mu_i`` (paper 2, Section 3): ``(R, K, n, d) -> (R, K, n, p)``."""
    return attention_mean(X, B) @ transpose(A)[:, None]


def empirical_loss(A, B, X, Y) -> torch.Tensor:
    """``L_hat`` (paper 2, Section 3) averaged over the ``K`` sequences: ``(R,)``.

    ``L_hat = 1/(2n) sum_i ||y_hat(x_i) - y_i||^2`` for one sequence of ``n`` samples.
    """
    res = predict(X, A, B) - Y  # (R, K, n, p)
    return 0.5 * res.pow(2).sum(-1).mean(dim=(-1, -2))


def _empirical_cov(X: torch.Tensor) -> torch.Tensor:
    return transpose(X) @ X / X.shape[-2]  # (R, K, d, d) Sigma_hat = X^T X / n (mean known to be 0)


def regulariser(A: torch.Tensor, B: torch.Tensor, Sigma: torch.Tensor) -> torch.Tensor:
    """``R = 1/8 tr(N Sigma N Sigma)``, ``N = A^T A - B^T Sigma B`` (paper 2, Section 4).

    Equal to ``1/8 ||A~^T A~ - B~^T B~||_F^2`` in whitened coordinates.  ``Sigma`` may carry extra
    leading dimensions after ``R`` (``(R, K, d, d)``), in which case ``A, B`` broadcast.
    """
    extra = Sigma.dim() - 3
    A_ = A.reshape(A.shape[:1] + (1,) * extra + A.shape[1:])
    B_ = B.reshape(B.shape[:1] + (1,) * extra + B.shape[1:])
    N = transpose(A_) @ A_ - transpose(B_) @ Sigma @ B_  # (R, .., d, d)
    NS = N @ Sigma
    return 0.125 * (NS * transpose(NS)).sum(dim=(-1, -2))  # tr(NS NS)


def empirical_regulariser(A, B, X) -> torch.Tensor:
    """``R_hat``: ``R`` with each sequence's ``Sigma_hat = X^T X / n``, averaged over sequences: ``(R,)``."""
    return regulariser(A, B, _empirical_cov(X)).mean(-1)


def empirical_Q(A, B, X, Y, regularised: bool = True) -> torch.Tensor:
    """``Q_hat = L_hat + R_hat`` (Section 5), or ``L_hat`` alone, averaged over sequences: ``(R,)``."""
    q = empirical_loss(A, B, X, Y)
    return q + empirical_regulariser(A, B, X) if regularised else q


def population_loss(A, B, M, Sigma, noise_var: float = 0.0) -> torch.Tensor:
    """``L = 1/2 ||(A Sigma B^T - M) Sigma^{1/2}||_F^2 + 1/2 E||z||^2`` (paper 2, Section 4): ``(R,)``."""
    return excess_loss(A, B, M, Sigma) + 0.5 * noise_var


def excess_loss(A, B, M, Sigma) -> torch.Tensor:
    """``L - L* = 1/2 tr(E Sigma E^T)``, ``E = A Sigma B^T - M`` (``L* = E||z||^2 / 2``): ``(R,)``."""
    E = A @ Sigma @ transpose(B) - M  # (R, p, d)
    return 0.5 * ((E @ Sigma) * E).sum(dim=(-1, -2))


def population_Q(A, B, M, Sigma, noise_var: float = 0.0, regularised: bool = True) -> torch.Tensor:
    """``Q = L + R`` (paper 2, Section 4), or ``L`` alone: ``(R,)``."""
    q = population_loss(A, B, M, Sigma, noise_var)
    return q + regulariser(A, B, Sigma) if regularised else q


def population_grad(A, B, M, Sigma, regularised: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Closed-form gradient of ``Q = L + R`` (or of ``L``) in ``(A, B)`` (paper 2, Section 4).

    With ``G = (A Sigma B^T - M) Sigma`` and ``N = A^T A - B^T Sigma B``:

    ``grad_A L = G B Sigma``,  ``grad_B L = G^T A Sigma``,
    ``grad_A R = 1/2 A Sigma N Sigma``,  ``grad_B R = -1/2 Sigma B Sigma N Sigma``.
    """
    G = (A @ Sigma @ transpose(B) - M) @ Sigma  # (R, p, d)
    gA = G @ B @ Sigma
    gB = transpose(G) @ A @ Sigma
    if regularised:
        rA, rB = regulariser_grad(A, B, Sigma)
        gA, gB = gA + rA, gB + rB
    return gA, gB


def stack_theta(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """``theta = [A; B]``, ``(R, p + d, d)`` (paper 2, Section 4)."""
    return torch.cat([A, B], dim=-2)


def P_matrix(Sigma: torch.Tensor, p: int) -> torch.Tensor:
    """The extended covariance ``P = diag(I_p, Sigma)``, ``(R, p + d, p + d)`` (paper 2, Section 4)."""
    R, d, _ = Sigma.shape
    P = torch.zeros(R, p + d, p + d, dtype=Sigma.dtype, device=Sigma.device)
    P[:, :p, :p] = torch.eye(p, dtype=Sigma.dtype, device=Sigma.device)
    P[:, p:, p:] = Sigma
    return P


def Q_P_geometry(A, B, M, Sigma, noise_var: float = 0.0) -> torch.Tensor:
    """``Q`` written in the P-geometry (paper 2, Section 4), to be compared with ``L + R``.

    ``L* + 1/8 ||P^{1/2}(theta Sigma theta^T - 2 Sym(M)) P^{1/2}||_F^2 - 1/2 ||M Sigma^{1/2}||_F^2``
    with ``Sym(M) = [[0, M], [M^T, 0]]``; ``||P^{1/2} X P^{1/2}||_F^2 = tr(X P X P)`` for symmetric X.
    """
    p = A.shape[-2]
    theta = stack_theta(A, B)  # (R, p+d, d)
    SymM = torch.zeros(theta.shape[0], theta.shape[1], theta.shape[1], dtype=A.dtype, device=A.device)
    SymM[:, :p, p:] = M
    SymM[:, p:, :p] = transpose(M)
    X = theta @ Sigma @ transpose(theta) - 2 * SymM  # (R, p+d, p+d)
    XP = X @ P_matrix(Sigma, p)
    main = (XP * transpose(XP)).sum(dim=(-1, -2))
    m2 = ((M @ Sigma) * M).sum(dim=(-1, -2))  # ||M Sigma^{1/2}||_F^2
    return 0.5 * noise_var + 0.125 * main - 0.5 * m2


def empirical_loss_grad(A, B, X, Y, per_sequence: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradient of the sequence-averaged ``L_hat`` in ``(A, B)`` by explicit back-propagation.

    The same quantity as autograd of :func:`empirical_Q` with ``regularised=False`` (tested against it), with
    less memory and time: with ``P = softmax(X B X^T)``, ``mu = P X``, ``r = mu A^T - Y`` and
    ``dmu = r A / (n K)`` per sequence,

    ``grad_A = sum_k r^T mu / (n K)``,
    ``grad_B = sum_k X^T (P * (dmu X^T - rowsum(dmu * mu))) X``.
    ``per_sequence=True`` returns each sequence's own gradient instead, ``(R, K, p, d)`` and
    ``(R, K, d, d)`` (their mean is the default result; Theorem 3's Monte Carlo needs their spread).
    Used by the gradient oracle of chapter 8.
    """
    R, K, n, _ = X.shape
    chunk = max(1, min(K, _CHUNK_ELEMENTS // max(1, R * n * n)))
    gA = torch.zeros_like(A)
    gB = torch.zeros_like(B)
    seqA, seqB = [], []
    scale = n if per_sequence else n * K
    At = transpose(A)[:, None]  # (R, 1, d, p)
    for k0 in range(0, K, chunk):
        Xc, Yc = X[:, k0 : k0 + chunk], Y[:, k0 : k0 + chunk]
        Xt = transpose(Xc)  # (R, k, d, n)
        P = torch.softmax(Xc @ B[:, None] @ Xt, dim=-1)  # (R, k, n, n)
        mu = P @ Xc  # (R, k, n, d)
        r = mu @ At - Yc  # (R, k, n, p)
        a = transpose(r) @ mu / scale  # (R, k, p, d)
        dmu = r @ A[:, None] / scale  # (R, k, n, d)
        dS = dmu @ Xt
        dS -= (dmu * mu).sum(-1, keepdim=True)
        dS *= P  # (R, k, n, n) gradient in the scores
        b = Xt @ (dS @ Xc)  # (R, k, d, d)
        if per_sequence:
            seqA.append(a)
            seqB.append(b)
        else:
            gA += a.sum(1)
            gB += b.sum(1)
    if per_sequence:
        return torch.cat(seqA, 1), torch.cat(seqB, 1)
    return gA, gB


def regulariser_grad(A, B, Sigma, per_sequence: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Closed-form gradient of ``R`` (paper 2, Section 4), ``Sigma (R, .., d, d)`` broadcasting.

    ``grad_A R = 1/2 A Sigma N Sigma``, ``grad_B R = -1/2 Sigma B Sigma N Sigma``,
    ``N = A^T A - B^T Sigma B``.  With a per-sequence ``Sigma_hat (R, K, d, d)`` the mean over the
    sequences is the gradient of ``R_hat`` (``per_sequence=True``: each sequence's, ``(R, K, ., .)``).
    """
    extra = Sigma.dim() - 3
    A_ = A.reshape(A.shape[:1] + (1,) * extra + A.shape[1:])
    B_ = B.reshape(B.shape[:1] + (1,) * extra + B.shape[1:])
    SNS = Sigma @ (transpose(A_) @ A_ - transpose(B_) @ Sigma @ B_) @ Sigma
    gA = 0.5 * A_ @ SNS
    gB = -0.5 * Sigma @ B_ @ SNS
    if per_sequence:
        return gA, gB
    for _ in range(extra):
        gA, gB = gA.mean(1), gB.mean(1)
    return gA, gB

