"""The compiled kernels of the fused CPU backend (:mod:`icl_lib.engine.fused`), written with numba.

One call of :func:`chunk_grads` takes a list of work items, each ``CH`` sequences of one model
at one step, and for each: draws the sequences' Gaussian numbers inside the loop
(:mod:`icl_lib.engine.fused_random`), turns them into the model's task (paper 1, Section 2; B.3's
covariance, B.4's supports), runs the forward pass of eq. (2.2) in circuit form (attention kinds
:data:`ATTENTION_CODES`), the analytic backward pass to the circuits ``KQ_h`` and ``OV_h``, and adds the
item's loss and circuit gradients to its own output slot.  The ``CH`` sequences of an item are the
SIMD lanes: every loop has them innermost, so the compiler vectorises across sequences and no step
needs a horizontal sum; the sums over tokens and features keep their accumulators in registers
(explicit vectors, :mod:`icl_lib.engine.fused_simd`, each lane summed in the scalar loops' order,
so the numbers are the same bits).  :func:`reduce_grads` then sums the items of each model in a fixed order
and applies the chain rule to ``Q, K, V, O``, so the numbers do not depend on how items were spread
over threads.  :func:`step_grads` is one step of a whole ensemble (:func:`circuits`, the items,
the reduction); :func:`adam_update`, :func:`adam_update4` and :func:`sgd_update` are
torch.optim's updates.  The maths the kernels use is :mod:`icl_lib.engine.fused_math`'s.
"""

from __future__ import annotations

import math
import os

os.environ.setdefault("NUMBA_SLP_VECTORIZE", "1")  # numba leaves LLVM's SLP vectoriser off by default

import numpy as np  # noqa: E402
import numba  # noqa: E402
from numba import njit  # noqa: E402

from .fused_math import _JIT, _exp, _tanh  # noqa: E402
from .fused_random import CH, _fill_normals, _make_data, _seed_lanes  # noqa: E402
from .fused_simd import add_outer, dot_tokens, max_tokens, pool_tokens, query_vectors  # noqa: E402

__all__ = ["ATTENTION_CODES", "chunk_grads", "reduce_grads", "circuits", "adam_update", "adam_update4", "sgd_update",
           "step_grads", "step_grads_serial"]

ATTENTION_CODES = {"softmax": 0, "linear": 1, "one_plus_tanh": 2, "quadratic": 3, "square": 4}  # attention codes


# ------------------------------------------------------------------------------------------ model
@njit(**_JIT)
def circuits(Q, K, V, O, heads, KQ, OV):
    """``KQ_h = K_h^T Q_h / sqrt(D)`` (first ``d`` columns: the query's label is 0) and
    ``OV_h = O_h V_h`` of every model, into ``KQ (R, H, D, d)`` and ``OV (R, H, N, D)``; heads past
    a model's count stay 0."""
    R, H, D = Q.shape[0], Q.shape[1], Q.shape[2]
    d, N = KQ.shape[3], O.shape[2]
    inv = 1.0 / math.sqrt(D)
    KQ[:] = 0.0
    OV[:] = 0.0
    for r in range(R):
        for h in range(heads[r]):
            for a in range(D):
                for c in range(d):
                    acc = 0.0
                    for e in range(D):
                        acc += K[r, h, e, a] * Q[r, h, e, c]
                    KQ[r, h, a, c] = acc * inv
            for n in range(N):
                for c in range(D):
                    acc = 0.0
                    for e in range(D):
                        acc += O[r, h, n, e] * V[r, h, e, c]
                    OV[r, h, n, c] = acc


@njit(**_JIT)
def chunk_grads(items, step, keys, KQ, OV, heads, chol, xmode, noise_std, beta_scale, kind, norm_len, B, L,
                out_loss, out_gKQ, out_gOV):
    """For each work item ``(r, c)`` of ``items (n, 2)``: draw sequences ``c CH .. c CH + CH - 1`` of
    model ``r``'s batch at ``step`` (those ``< B``), and write their summed loss
    ``sum_b mean_n (y_hat - y_q)^2 / B`` to ``out_loss[i]`` and its gradients with respect to the
    model's ``KQ (H, D, d)`` and ``OV (H, N, D)`` to ``out_gKQ[i]``, ``out_gOV[i]``.

    ``xmode``: per model, how its covariates are drawn (:data:`~icl_lib.engine.fused_random.XMODES`);
    ``kind``: :data:`ATTENTION_CODES`; ``norm_len``: linear attention's normaliser.  The forward pass is
    paper 1's eq. (2.2) as :meth:`icl_lib.models.AttentionEnsemble.forward` computes it; the
    backward pass is its derivative written out (tested against autograd)."""
    H, D, d = KQ.shape[1], KQ.shape[2], KQ.shape[3]
    N = OV.shape[2]
    T = L + 1
    dt = KQ.dtype
    rows = D * T + N * d
    rows2 = rows + (rows & 1)
    state = np.empty((4, CH), np.uint32)
    raw = np.empty((rows2, CH), np.float32)
    Z = np.empty((D, T, CH), dt)
    beta = np.empty((N, d, CH), dt)
    u = np.empty((H, D, CH), dt)
    s = np.empty((H, L, CH), dt)
    a = np.empty((H, L, CH), dt)
    fp = np.empty((H, L, CH), dt)  # f'(s) of the normalised activations
    tot = np.empty((H, CH), dt)
    pooled = np.empty((H, D, CH), dt)
    gp = np.empty((H, D, CH), dt)
    gu = np.empty((H, D, CH), dt)
    dy = np.empty((N, CH), dt)
    w = np.empty(CH, dt)  # 1 for the lanes inside the batch, 0 past its end
    gKQ = np.empty((H, D, d, CH), dt)
    gOV = np.empty((H, N, D, CH), dt)
    lossv = np.empty(CH, dt)
    dot = np.empty(CH, dt)
    consts = np.empty(6, dt)  # scalars in the model's dtype, so float32 arithmetic stays float32
    consts[0], consts[1], consts[2], consts[3] = 0.0, 1.0, 2.0, 0.5
    consts[4], consts[5] = 2.0 / (B * N), 1.0 / norm_len
    zero, one, two, half, scale, inv_len = consts[0], consts[1], consts[2], consts[3], consts[4], consts[5]
    for it in range(items.shape[0]):
        r, c = items[it, 0], items[it, 1]
        Hr = heads[r]
        _seed_lanes(state, keys[r, 0], keys[r, 1], step, c)
        _fill_normals(raw, state, rows2)
        _make_data(Z, beta, raw, chol[r], xmode[r], noise_std[r], beta_scale[r], d, N, T)
        for b in range(CH):
            w[b] = one if c * CH + b < B else zero
        gKQ[:] = 0.0
        gOV[:] = 0.0
        # forward: u_h = KQ_h x_q, scores s_hi = z_i . u_h, weights, pooled_h = sum_i a_hi z_i
        query_vectors(u, KQ[r], Z, Hr, zero)
        dot_tokens(s, u, Z, Hr, zero)
        if kind == 0:
            max_tokens(tot, s, Hr)  # softmax's shift
        for h in range(Hr):
            if kind == 0:  # softmax
                for i in range(L):
                    for b in range(CH):
                        a[h, i, b] = _exp(s[h, i, b] - tot[h, b])
            elif kind == 1:  # linear: s / norm_len
                for i in range(L):
                    for b in range(CH):
                        a[h, i, b] = s[h, i, b] * inv_len
            else:  # normalised activation f(s) / sum f, with f'(s) kept for the backward pass
                for i in range(L):
                    for b in range(CH):
                        x = s[h, i, b]
                        if kind == 2:
                            f = one + _tanh(x)
                            fp[h, i, b] = (two - f) * f
                        elif kind == 3:
                            f = one + x + half * x * x
                            fp[h, i, b] = one + x
                        else:
                            f = (one + x) * (one + x)
                            fp[h, i, b] = two * (one + x)
                        a[h, i, b] = f
            if kind != 1:
                for b in range(CH):
                    tot[h, b] = zero
                for i in range(L):
                    for b in range(CH):
                        tot[h, b] += a[h, i, b]
                for b in range(CH):
                    tot[h, b] = one / tot[h, b]
                for i in range(L):
                    for b in range(CH):
                        a[h, i, b] *= tot[h, b]
        pool_tokens(pooled, a, Z, Hr, zero)
        # output and loss: y_hat_n = sum_h OV_h[n] . pooled_h
        for b in range(CH):
            lossv[b] = zero
        for n in range(N):
            for b in range(CH):
                dy[n, b] = -Z[d + n, L, b]
            for h in range(Hr):
                for e in range(D):
                    o = OV[r, h, n, e]
                    for b in range(CH):
                        dy[n, b] += o * pooled[h, e, b]
            for b in range(CH):
                err = dy[n, b] * w[b]
                lossv[b] += err * err
                dy[n, b] = err * scale
        # backward: gp_h = sum_n dy_n OV_h[n], then ga_hi = gp_h . z_i (into s)
        for h in range(Hr):
            for e in range(D):
                for b in range(CH):
                    gp[h, e, b] = zero
            for n in range(N):
                for e in range(D):
                    o = OV[r, h, n, e]
                    for b in range(CH):
                        gOV[h, n, e, b] += dy[n, b] * pooled[h, e, b]
                        gp[h, e, b] += dy[n, b] * o
        dot_tokens(s, gp, Z, Hr, zero)
        # the scores' gradient gs_hi (overwrites s)
        for h in range(Hr):
            if kind == 1:
                for i in range(L):
                    for b in range(CH):
                        s[h, i, b] *= inv_len
            else:
                for b in range(CH):
                    dot[b] = zero
                for e in range(D):
                    for b in range(CH):
                        dot[b] += gp[h, e, b] * pooled[h, e, b]  # sum_j a_j ga_j = gp . pooled
                if kind == 0:
                    for i in range(L):
                        for b in range(CH):
                            s[h, i, b] = a[h, i, b] * (s[h, i, b] - dot[b])
                else:  # a = f / S: d a_j / d f_i = (delta_ij - a_j) / S, and tot = 1 / S
                    for i in range(L):
                        for b in range(CH):
                            s[h, i, b] = (s[h, i, b] - dot[b]) * tot[h, b] * fp[h, i, b]
        # gu_h = sum_i gs_hi z_i; then gKQ_h[e, k] += gu_h[e] x_q[k]
        pool_tokens(gu, s, Z, Hr, zero)
        add_outer(gKQ, gu, Z, Hr)
        acc = 0.0
        for b in range(CH):
            acc += lossv[b]
        out_loss[it] = acc / (B * N)
        for h in range(H):
            for e in range(D):
                for k in range(d):
                    acc = 0.0
                    for b in range(CH):
                        acc += gKQ[h, e, k, b]
                    out_gKQ[it, h, e, k] = acc
            for n in range(N):
                for e in range(D):
                    acc = 0.0
                    for b in range(CH):
                        acc += gOV[h, n, e, b]
                    out_gOV[it, h, n, e] = acc


@njit(**_JIT)
def reduce_grads(n_items, item_loss, item_gKQ, item_gOV, Q, K, V, O, heads, loss, gQ, gK, gV, gO):
    """Sum the ``n_items`` consecutive items of each model (in order) and apply the chain rule of
    ``KQ = K^T Q / sqrt(D)`` and ``OV = O V``: ``loss (R,)`` and the gradients of ``Q, K, V, O``."""
    R, H, D = Q.shape[0], Q.shape[1], Q.shape[2]
    d, N = item_gKQ.shape[3], O.shape[2]
    inv = 1.0 / math.sqrt(D)
    gKQ = np.zeros((H, D, d), Q.dtype)
    gOV = np.zeros((H, N, D), Q.dtype)
    gQ[:] = 0.0
    gK[:] = 0.0
    gV[:] = 0.0
    gO[:] = 0.0
    for r in range(R):
        acc = 0.0
        gKQ[:] = 0.0
        gOV[:] = 0.0
        for j in range(n_items):
            i = r * n_items + j
            acc += item_loss[i]
            gKQ += item_gKQ[i]
            gOV += item_gOV[i]
        loss[r] = acc
        for h in range(heads[r]):
            for e in range(D):
                for c in range(d):  # dL/dQ[e, c] = sum_a K[e, a] gKQ[a, c] / sqrt(D)
                    t = 0.0
                    for a_ in range(D):
                        t += K[r, h, e, a_] * gKQ[h, a_, c]
                    gQ[r, h, e, c] = t * inv
                for a_ in range(D):  # dL/dK[e, a] = sum_c Q[e, c] gKQ[a, c] / sqrt(D)
                    t = 0.0
                    for c in range(d):
                        t += Q[r, h, e, c] * gKQ[h, a_, c]
                    gK[r, h, e, a_] = t * inv
            for n in range(N):
                for e in range(D):  # dL/dO[n, e] = sum_c gOV[n, c] V[e, c]
                    t = 0.0
                    for c in range(D):
                        t += gOV[h, n, c] * V[r, h, e, c]
                    gO[r, h, n, e] = t
            for e in range(D):
                for c in range(D):  # dL/dV[e, c] = sum_n O[n, e] gOV[n, c]
                    t = 0.0
                    for n in range(N):
                        t += O[r, h, n, e] * gOV[h, n, c]
                    gV[r, h, e, c] = t


@njit(**_JIT)
def adam_update(p, g, m, v, lr, beta1, beta2, eps, step):
    """torch.optim.Adam's update (no weight decay, no amsgrad) of flat ``p`` from gradient ``g``,
    first and second moments ``m, v`` in place, at optimiser step ``step`` (from 1)."""
    bc1 = 1.0 - beta1**step
    bc2_sqrt = math.sqrt(1.0 - beta2**step)
    step_size = lr / bc1
    for i in range(p.size):
        gi = g[i]
        m[i] += (gi - m[i]) * (1.0 - beta1)
        v[i] = v[i] * beta2 + (1.0 - beta2) * gi * gi
        p[i] -= step_size * m[i] / (math.sqrt(v[i]) / bc2_sqrt + eps)


@njit(**_JIT)
def sgd_update(p, g, lr):
    """torch.optim.SGD's update (no momentum) of flat ``p``."""
    for i in range(p.size):
        p[i] -= lr * g[i]


@njit(parallel=True, **_JIT)
def step_grads(threads, items, step, keys, Q, K, V, O, heads, KQ, OV, chol, xmode, noise_std, beta_scale, kind,
               norm_len, B, L, n_chunks, item_loss, item_gKQ, item_gOV, loss, gQ, gK, gV, gO):
    """One step's losses and gradients of the whole ensemble in one call: the circuits, the work
    items in ``threads`` contiguous blocks (numba's threads, one block each), then
    :func:`reduce_grads`.  Each item writes its own slot, so the numbers do not depend on
    ``threads``."""
    circuits(Q, K, V, O, heads, KQ, OV)
    n = items.shape[0]
    for t in numba.prange(threads):
        a, b = n * t // threads, n * (t + 1) // threads
        chunk_grads(items[a:b], step, keys, KQ, OV, heads, chol, xmode, noise_std, beta_scale, kind, norm_len, B, L,
                    item_loss[a:b], item_gKQ[a:b], item_gOV[a:b])
    reduce_grads(n_chunks, item_loss, item_gKQ, item_gOV, Q, K, V, O, heads, loss, gQ, gK, gV, gO)


@njit(**_JIT)
def step_grads_serial(threads, items, step, keys, Q, K, V, O, heads, KQ, OV, chol, xmode, noise_std, beta_scale,
                      kind, norm_len, B, L, n_chunks, item_loss, item_gKQ, item_gOV, loss, gQ, gK, gV, gO):
    """:func:`step_grads` on the calling thread alone (every item in one block; ``threads`` is
    not read).  A parallel loop of one block still wakes numba's thread pool, whose idle threads
    spin at its barrier on every step and take a core from other work on the machine.  It is a
    function of its own, not :func:`step_grads` compiled without ``parallel``: numba's on-disk cache
    keys compiled code by the Python function and the signature, not by ``parallel``, so two
    compilations of one function would load each other's code (the parallel step then ran on
    one thread wherever the serial one had been cached first)."""
    circuits(Q, K, V, O, heads, KQ, OV)
    chunk_grads(items, step, keys, KQ, OV, heads, chol, xmode, noise_std, beta_scale, kind, norm_len, B, L,
                item_loss, item_gKQ, item_gOV)
    reduce_grads(n_chunks, item_loss, item_gKQ, item_gOV, Q, K, V, O, heads, loss, gQ, gK, gV, gO)


@njit(**_JIT)
def adam_update4(ps, gs, ms, vs, count, lr, beta1, beta2, eps):
    """:func:`adam_update` of the four parameters ``Q, K, V, O`` (flat views in the tuples), whose
    optimiser step counts (views ``(1,)`` of torch's step tensors, in ``count``) are incremented first."""
    for j in range(4):
        count[j][0] += 1.0
    adam_update(ps[0], gs[0], ms[0], vs[0], lr, beta1, beta2, eps, float(count[0][0]))
    adam_update(ps[1], gs[1], ms[1], vs[1], lr, beta1, beta2, eps, float(count[1][0]))
    adam_update(ps[2], gs[2], ms[2], vs[2], lr, beta1, beta2, eps, float(count[2][0]))
    adam_update(ps[3], gs[3], ms[3], vs[3], lr, beta1, beta2, eps, float(count[3][0]))
