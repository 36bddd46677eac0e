"""One-layer multi-head attention for in-context regression, as an ensemble of R models.

Paper 1, eq. (2.2): with ``Z_ctx = [[x_1 .. x_L], [y_1 .. y_L]]`` and ``z_q = (x_q, 0)``,

    y_hat = sum_h O_h V_h Z_ctx softmax( Z_ctx^T K_h^T Q_h z_q / sqrt(D) ),     D = d + N.

The query attends to the L context tokens only.  Each head has ``Q_h, K_h, V_h`` of size
``D x D`` and an output ``O_h`` of size ``N x D`` (N = number of tasks, 1 except in chapter 7).
Everything carries a leading ensemble dimension ``R``: R independent models (own initialisation,
own data) evaluated in one batched program.  The forward pass is computed in circuit form,
``KQ_h = K_h^T Q_h / sqrt(D)`` and ``OV_h = O_h V_h`` formed once per call instead of projecting
every token -- mathematically identical to the token-wise form (tested against a plain loop).

Variants (paper 1, B.1 and B.2): ``linear`` attention divides the scores by a fixed length instead
of normalising, and normalised activations replace ``exp`` in the softmax by ``f``.

Also here: the reparameterised kernel-regression predictor of eq. (3.2), chapter 1 and 2.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import nn

from .config import ATTENTION_KINDS, MODEL_INITS
from .sampling import Batch
from .validate import check_choice, check_int

__all__ = ["AttentionEnsemble", "kernel_regression_predict", "ACTIVATIONS"]


def _one_plus_tanh(s):
    return 1.0 + torch.tanh(s)


def _quadratic(s):
    return 1.0 + s + 0.5 * s * s  # > 0 for every s; second-order Taylor polynomial of exp


def _square(s):
    return (1.0 + s) ** 2  # >= 0; f(s) = 1 + 2 s + s^2, so c_f = 2 (chapter 5)


# normalised activations f of paper 1, B.2, with the first-order coefficient c_f of f(s) ~ f(0)(1 + c_f s)
ACTIVATIONS = {
    "softmax": (torch.exp, 1.0),
    "one_plus_tanh": (_one_plus_tanh, 1.0),
    "quadratic": (_quadratic, 1.0),
    "square": (_square, 2.0),
}


class AttentionEnsemble(nn.Module):
    """R independent one-layer H-head attention models (paper 1, eq. 2.2), chapters 1-7.

    ``heads`` is one head count for all models or one per model; models with fewer heads than
    ``max(heads)`` have their extra heads masked to zero (output and gradients), so models with
    different H train side by side.
    """

    def __init__(
        self,
        heads: int | Sequence[int],
        d: int,
        n_tasks: int = 1,
        attention: str = "softmax",
        norm_length: int | None = None,
        R: int | None = None,
        device="cpu",
        dtype=torch.float32,
    ):
        super().__init__()
        if isinstance(heads, int):
            heads = [heads] * (1 if R is None else R)
        heads = [check_int("heads", h, 1, 256) for h in heads]
        if R is not None and len(heads) != R:
            raise ValueError(f"heads has {len(heads)} entries: accepted one per model (R={R})")
        self.d = check_int("d", d, 1)
        self.n_tasks = check_int("n_tasks", n_tasks, 1)
        self.attention = check_choice("attention", attention, ATTENTION_KINDS)
        if attention == "linear" and norm_length is None:
            raise ValueError("norm_length=None is invalid for attention='linear': accepted the training length L")
        self.norm_length = norm_length
        self.heads = heads
        R, H, D, N = len(heads), max(heads), self.D, n_tasks
        kw = dict(device=device, dtype=dtype)
        self.Q = nn.Parameter(torch.zeros(R, H, D, D, **kw))  # (R, H, D, D) query weights Q_h
        self.K = nn.Parameter(torch.zeros(R, H, D, D, **kw))  # (R, H, D, D) key weights K_h
        self.V = nn.Parameter(torch.zeros(R, H, D, D, **kw))  # (R, H, D, D) value weights V_h
        self.O = nn.Parameter(torch.zeros(R, H, N, D, **kw))  # (R, H, N, D) output rows O_h
        mask = torch.tensor([[1.0 if h < Hr else 0.0 for h in range(H)] for Hr in heads], **kw)
        self.register_buffer("head_mask", mask)  # (R, H)

    @property
    def D(self) -> int:
        return self.d + self.n_tasks

    def shard(self, start: int, stop: int) -> "AttentionEnsemble":
        """Models ``start .. stop-1`` as an ensemble whose parameters share this one's storage.

        The shard's ``Q, K, V, O`` are leaf tensors viewing rows ``start:stop`` (so an optimizer
        step on this ensemble moves the shard too) and keep all ``max(heads)`` head slots, so a
        model computes the same numbers in a shard as in the whole ensemble.  Used by the CPU
        training engine (:class:`~icl_lib.engine.trainer.EnsembleTrainer`) to train shards in parallel.
        """
        R = self.R
        start, stop = check_int("start", start, 0, R - 1), check_int("stop", stop, start + 1, R)
        m = AttentionEnsemble.__new__(AttentionEnsemble)
        nn.Module.__init__(m)
        m.d, m.n_tasks, m.attention, m.norm_length = self.d, self.n_tasks, self.attention, self.norm_length
        m.heads = self.heads[start:stop]
        for k in "QKVO":
            setattr(m, k, nn.Parameter(getattr(self, k).detach()[start:stop]))
        m.register_buffer("head_mask", self.head_mask[start:stop])
        return m

    @property
    def R(self) -> int:
        return len(self.heads)

    # ---------------------------------------------------------------- initialisation
    @torch.no_grad()
    def reset_parameters(
        self,
        generators: Sequence[torch.Generator],
        init_scale: float | Sequence[float] = 1.0,
        init: str | Sequence[str] = "authors",
    ):
        """PyTorch's default ``nn.Linear`` initialisation, per model (paper 1's training setup).

        ``init="authors"`` is the layout of paper 1's code: the heads' queries, keys and values are
        three ``nn.Linear(D, D H)`` and the output is one ``nn.Linear(D H, N)``, so ``Q_h, K_h, V_h``
        are drawn from ``U(-1/sqrt(D), 1/sqrt(D))`` and ``O_h`` from ``U(-1/sqrt(D H), 1/sqrt(D H))``
        (fan-in ``D H``).  ``init="per-head"`` draws ``O_h`` from ``U(-1/sqrt(D), 1/sqrt(D))`` too, as
        if each head had its own output layer (the book's initialisation before model-code version 5:
        an OV circuit about ``sqrt(H)`` times larger at initialisation).  Model ``r`` draws its
        ``H_r`` heads (Q, then K, V, O) from ``generators[r]``, so its initialisation does not depend
        on the rest of the ensemble; ``init_scale`` multiplies everything.
        """
        R = self.R
        if isinstance(init_scale, (int, float)):
            init_scale = [float(init_scale)] * R
        if isinstance(init, str):
            init = [init] * R
        D, N = self.D, self.n_tasks
        for p in (self.Q, self.K, self.V, self.O):
            p.zero_()
        for r, (Hr, gen, scale, kind) in enumerate(zip(self.heads, generators, init_scale, init)):
            check_choice("init", kind, MODEL_INITS)
            out_fan_in = D * Hr if kind == "authors" else D  # kaiming_uniform_(a=sqrt(5)): bound 1/sqrt(fan_in)
            sizes = [Hr * D * D] * 3 + [Hr * N * D]
            bounds = [1 / math.sqrt(D)] * 3 + [1 / math.sqrt(out_fan_in)]
            flat = torch.empty(sum(sizes), dtype=torch.float64, device=gen.device).uniform_(-1.0, 1.0, generator=gen)
            parts = [p * (b * scale) for p, b in zip(torch.split(flat, sizes), bounds)]
            self.Q[r, :Hr] = parts[0].view(Hr, D, D).to(self.Q)
            self.K[r, :Hr] = parts[1].view(Hr, D, D).to(self.K)
            self.V[r, :Hr] = parts[2].view(Hr, D, D).to(self.V)
            self.O[r, :Hr] = parts[3].view(Hr, N, D).to(self.O)
        return self

    @classmethod
    def from_circuits(cls, KQ: torch.Tensor, OV: torch.Tensor, d: int, **kw) -> "AttentionEnsemble":
        """A model whose circuits are the given ``KQ (R, H, D, D)`` and ``OV (R, H, N, D)``.

        Sets ``K = I``, ``Q = sqrt(D) KQ``, ``V = I``, ``O = OV`` (chapter 1's hand-set check of (3.2)).
        """
        R, H, D, _ = KQ.shape
        N = OV.shape[-2]
        m = cls(H, d, n_tasks=N, R=R, device=KQ.device, dtype=KQ.dtype, **kw)
        eye = torch.eye(D, device=KQ.device, dtype=KQ.dtype)
        with torch.no_grad():
            m.K.copy_(eye.expand_as(m.K))
            m.V.copy_(eye.expand_as(m.V))
            m.Q.copy_(KQ * math.sqrt(D))
            m.O.copy_(OV)
        return m

    # ---------------------------------------------------------------- circuits and forward
    def circuits(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``KQ_h = K_h^T Q_h / sqrt(D)`` (R, H, D, D) and ``OV_h = O_h V_h`` (R, H, N, D), masked."""
        KQ = (self.K.mT @ self.Q) / math.sqrt(self.D)  # (R, H, D, D)
        OV = self.O @ self.V * self.head_mask[:, :, None, None]  # (R, H, N, D)
        return KQ, OV

    def attention_weights(self, s: torch.Tensor) -> torch.Tensor:
        """Normalise scores ``s (..., H, L)`` over the L context tokens (last dim)."""
        if self.attention == "softmax":
            return torch.softmax(s, dim=-1)
        if self.attention == "linear":
            return s / self.norm_length
        f = ACTIVATIONS[self.attention][0](s)
        return f / f.sum(dim=-1, keepdim=True)

    def forward(self, batch: Batch) -> torch.Tensor:
        """Predictions ``(R, B, N)`` for a batch with tokens ``(R, B, D, L+1)`` or ``(B, D, L+1)``.

        Circuit form of paper 1, eq. (2.2): ``y_hat = sum_h OV_h Z softmax(Z^T KQ_h z_q)`` with
        ``z_q = (x_q, 0)``.  The per-model products are batched matrix multiplications over the
        whole ensemble (few, large ops: the engine's step is dominated by op count at small R).
        A batch without the leading R is shared by all models.
        """
        KQ, OV = self.circuits()
        R, H, D, d = self.R, KQ.shape[1], self.D, self.d
        Wq = KQ[..., :d].permute(0, 3, 1, 2).reshape(R, d, H * D)  # (R, d, H D): u_h = KQ_h z_q = x_q^T Wq
        Wo = OV.permute(0, 1, 3, 2).reshape(R, H * D, -1)  # (R, H D, N): y_hat = sum_h OV_h pooled_h
        Zt, xq = batch.context, batch.xq.contiguous()  # (R|., B, D, L) context tokens as columns, (R|., B, d)
        if Zt.dim() == 3:  # shared data: batch over sequences, models x heads as rows, no copy of Zt
            B = Zt.shape[0]
            u = (xq @ Wq).view(R, B, H, D).transpose(0, 1).reshape(B, R * H, D)  # (B, R H, D)
            a = self.attention_weights(u @ Zt)  # (B, R H, L)
            pooled = (a @ Zt.mT).view(B, R, H * D).transpose(0, 1)  # (R, B, H D)
            return pooled @ Wo  # (R, B, N)
        u = torch.bmm(xq, Wq).view(R, -1, H, D)  # (R, B, H, D)
        s = u @ Zt  # (R, B, H, L) scores z_i^T KQ_h z_q
        a = self.attention_weights(s)  # (R, B, H, L)
        pooled = (a @ Zt.mT).view(R, -1, H * D)  # (R, B, H D) = sum_i a_ih z_i, heads side by side
        return torch.bmm(pooled, Wo)  # (R, B, N)

    predict = forward

    def loss(self, batch: Batch) -> torch.Tensor:
        """Per-model ICL loss ``mean_b mean_n (y_hat - y_q)^2``, shape ``(R,)`` (paper 1, Section 2)."""
        return ((self(batch) - batch.yq) ** 2).mean(dim=(1, 2))


def kernel_regression_predict(
    omega: torch.Tensor, mu: torch.Tensor, x: torch.Tensor, y: torch.Tensor, xq: torch.Tensor
) -> torch.Tensor:
    """Sum of H kernel regressors, paper 1 eq. (3.2): ``sum_h mu_h sum_i y_i softmax_i(omega_h x_i^T x_q)``.

    ``omega, mu``: ``(H,)`` or ``(R, H)``; data ``x (.., B, L, d)``, ``y (.., B, L, 1)`` or
    ``(.., B, L)``, ``xq (.., B, d)``.  Returns ``(.., B)`` (with a leading R when omega has one).
    """
    if y.dim() == x.dim():
        y = y[..., 0]  # (.., B, L)
    g = (x @ xq[..., None])[..., 0]  # (.., B, L) = x_i^T x_q
    if omega.dim() == 2:  # (R, H): add the ensemble dim to data lacking it
        if g.dim() == 2:
            g, y = g.expand(omega.shape[0], *g.shape), y.expand(omega.shape[0], *y.shape)
        om, m = omega[:, None, None, :], mu[:, None, :]  # (R, 1, 1, H), (R, 1, H)
    else:
        om, m = omega, mu
    a = torch.softmax(g[..., None] * om, dim=-2)  # (.., B, L, H)
    return ((a * y[..., None]).sum(-2) * m).sum(-1)
