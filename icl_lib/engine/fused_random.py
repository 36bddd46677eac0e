"""Counter-based random numbers and the data of a work item of the fused CPU backend (:mod:`icl_lib.engine.fused`).

A work item is ``CH`` sequences of one model at one step; its random numbers are a function of the
model's key, the step and the item, so a run resumes from its step counter alone:

* Philox4x32-10 (Salmon et al., SC 2011) maps ``(key, (step, step_hi, item, lane))`` to the
  128-bit state of one xoshiro128++ generator (Blackman and Vigna) per lane
  (:func:`philox4x32`);
* each lane's xoshiro128++ draws that sequence's numbers, 64 bits per pair of normals;
* Box-Muller turns a pair of 31- and 32-bit uniforms into two normals: ``r = sqrt(-2 ln u1)``
  with ``u1`` in ``[2^-31, 1]`` (the largest radius is 6.56, the tail beyond it has probability
  5e-11), and the angle from two quadrant bits and a 30-bit fraction (:func:`normals`).

The float32 arithmetic runs under ``fastmath``, so the last bits of the normals depend on the
compile target and on the CPU: the AVX2 code divides and takes square roots from the CPU's
reciprocal estimates (``vrcpps``, ``vrsqrtps``) and a Newton step, and those estimates differ from
one implementation to another (``tests/engine/test_fused_bits.py`` holds the bits per target, on
the AMD CPUs they were recorded on).  Everywhere they are standard normals to float32's accuracy.

``_make_data`` turns an item's normals into its sequences: the model's task (paper 1, Section 2;
B.3's covariance, B.4's supports); :func:`chunk_batch` returns them as a batch (tests and the
check of the fused data against the sampler's distribution).  The kernels of
:mod:`icl_lib.engine.fused_kernels` draw them inside their loop.
"""

from __future__ import annotations

import math
import os

os.environ.setdefault("NUMBA_SLP_VECTORIZE", "1")  # numba leaves LLVM's SLP vectoriser off by default

import numpy as np  # noqa: E402
from numba import njit  # noqa: E402

from .fused_math import _JIT, _M32, _bits_f32, _f32_bits, _rotl, _u32, log_approx, sincos_approx  # noqa: E402
from .fused_simd import CH, add_labels, copy_rows  # noqa: E402

__all__ = ["CH", "philox4x32", "normals", "chunk_batch", "XMODES"]

XMODES = {"gaussian": 0, "covariance": 1, "sphere": 2}  # how a model's covariates are drawn (_make_data)


# ------------------------------------------------------------------------------------------ RNG
_PM0, _PM1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_PW0, _PW1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)


@njit(inline="always", **_JIT)
def philox4x32(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 of counter ``(c0, c1, c2, c3)`` under key ``(k0, k1)``: four uint32 words."""
    c0, c1, c2, c3 = np.uint64(c0), np.uint64(c1), np.uint64(c2), np.uint64(c3)
    k0, k1 = np.uint64(k0), np.uint64(k1)
    for _ in range(10):
        p0 = _PM0 * c0
        p1 = _PM1 * c2
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ k0) & _M32, p1 & _M32, ((p0 >> np.uint64(32)) ^ c3 ^ k1) & _M32, p0 & _M32
        k0 = (k0 + _PW0) & _M32
        k1 = (k1 + _PW1) & _M32
    return _u32(c0), _u32(c1), _u32(c2), _u32(c3)


@njit(**_JIT)
def _seed_lanes(state, k0, k1, step, item):
    """Every lane's xoshiro128++ state ``(4, CH)`` for ``item`` at ``step``."""
    slo = _u32(step)
    shi = _u32(np.uint64(step) >> np.uint64(32))
    for b in range(CH):
        s0, s1, s2, s3 = philox4x32(slo, shi, item, b, k0, k1)
        state[0, b], state[1, b], state[2, b], state[3, b] = s0, s1, s2, s3


@njit(inline="always", **_JIT)
def _xoshiro_next(s0, s1, s2, s3):
    """One draw of xoshiro128++: the 32-bit output and the next state."""
    r = _u32(np.uint64(_rotl(_u32(np.uint64(s0) + np.uint64(s3)), 7)) + np.uint64(s0))
    t = _u32(np.uint64(s1) << np.uint64(9))
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = _rotl(s3, 11)
    return r, s0, s1, s2, s3


@njit(inline="always", **_JIT)
def _radius(r1):
    """Box-Muller's radius ``sqrt(-2 ln u1)`` of a 32-bit word, ``u1 = (floor(r1 / 2) + 1) 2^-31``
    in ``(0, 1]`` (the integer is converted as int32: ``2^31`` wraps to ``-2^31``, and ``abs``
    brings it back exactly)."""
    k = np.int32(_u32(np.uint64(r1 >> np.uint32(1)) + np.uint64(1)))
    u1 = abs(np.float32(k)) * np.float32(2.0**-31)
    return np.sqrt(np.float32(-2.0) * log_approx(u1))


@njit(inline="always", **_JIT)
def _polar(rad, r2):
    """The pair of normals at radius ``rad`` and the angle of the 32-bit word ``r2``: two
    quadrant bits and a 30-bit fraction."""
    two30 = np.float32(2.0**-30)
    halfpi = np.float32(math.pi / 2)
    quarterpi = np.float32(math.pi / 4)
    q = r2 >> np.uint32(30)
    phi = (np.float32(np.int32(r2 & np.uint32(0x3FFFFFFF))) + np.float32(0.5)) * two30 * halfpi - quarterpi
    s, c = sincos_approx(phi)
    odd = (q & np.uint32(1)) != np.uint32(0)
    x0 = s if odd else c
    y0 = c if odd else s
    negx = ((q ^ (q >> np.uint32(1))) & np.uint32(1)) != np.uint32(0)
    negy = (q & np.uint32(2)) != np.uint32(0)
    return (-rad * x0 if negx else rad * x0), (-rad * y0 if negy else rad * y0)


@njit(inline="always", **_JIT)
def _fill_normals(out, state, rows):
    """``out[:rows]`` ``(rows, CH)`` with standard normals, a pair of rows per 64 bits of each
    lane's xoshiro128++ (``rows`` even).  Three passes over the rows (the words, kept as the rows'
    bits; the radii; the angles and the normals): each pass's loop is short enough for the CPU
    to overlap many lanes' dependency chains."""
    for j in range(0, rows, 2):
        for b in range(CH):
            s0, s1, s2, s3 = state[0, b], state[1, b], state[2, b], state[3, b]
            r1, s0, s1, s2, s3 = _xoshiro_next(s0, s1, s2, s3)
            r2, s0, s1, s2, s3 = _xoshiro_next(s0, s1, s2, s3)
            state[0, b], state[1, b], state[2, b], state[3, b] = s0, s1, s2, s3
            out[j, b] = _bits_f32(r1)
            out[j + 1, b] = _bits_f32(r2)
    for j in range(0, rows, 2):
        for b in range(CH):
            out[j, b] = _radius(_f32_bits(out[j, b]))
    for j in range(0, rows, 2):
        for b in range(CH):
            out[j, b], out[j + 1, b] = _polar(out[j, b], _f32_bits(out[j + 1, b]))


@njit(**_JIT)
def normals(k0, k1, step, item, rows):
    """The standard normals of one work item, ``(rows rounded up to even, CH)`` float32 (tests and
    :func:`chunk_batch`)."""
    rows2 = rows + (rows & 1)
    state = np.empty((4, CH), np.uint32)
    _seed_lanes(state, k0, k1, step, item)
    out = np.empty((rows2, CH), np.float32)
    _fill_normals(out, state, rows2)
    return out


# ------------------------------------------------------------------------------------------ data
@njit(inline="always", **_JIT)
def _make_data(Z, beta, raw, chol, xmode, noise_std, beta_scale, d, N, T):
    """Turn an item's normals ``raw`` into its sequences: ``Z (D, T, CH)`` tokens (covariates, then
    labels; column ``T - 1`` is the query) and ``beta (N, d, CH)``, in the sampler's layout
    (:meth:`icl_lib.sampling.TaskSampler.sample`: ``x^T``, then the noise, then ``beta``).  ``xmode``:
    how the covariates are drawn (:data:`XMODES`): 0 standard normal, 1 normal with covariance
    ``chol chol^T``, 2 uniform on the sphere of radius ``sqrt(d)``."""
    copy_rows(Z, raw, 0, d * T * CH, noise_std, False)  # row k T + i of raw is Z[k, i]
    if xmode == 2:  # x = sqrt(d) z / |z|: uniform on the sphere, E x x^T = I
        root = np.sqrt(np.float64(d))
        for i in range(T):
            for b in range(CH):
                acc = Z[0, i, b] * Z[0, i, b]
                for k in range(1, d):
                    acc += Z[k, i, b] * Z[k, i, b]
                f = root / np.sqrt(acc)
                for k in range(d):
                    Z[k, i, b] = Z[k, i, b] * f
    if xmode == 1:  # x = C z with C lower triangular: row k needs z_0..z_k, so fill from the last row up
        for k in range(d - 1, -1, -1):
            for i in range(T):
                for b in range(CH):
                    acc = Z[0, i, b] * chol[k, 0]
                    for j in range(1, k + 1):
                        acc += chol[k, j] * Z[j, i, b]
                    Z[k, i, b] = acc
    copy_rows(Z, raw, d * T * CH, (d + N) * T * CH, noise_std, True)  # the labels' noise, rows d T ..
    off = (d + N) * T
    for n in range(N):
        for k in range(d):
            for b in range(CH):
                beta[n, k, b] = raw[off + n * d + k, b] * beta_scale[n, k]
    add_labels(Z, beta, d, N, T)


@njit(**_JIT)
def chunk_batch(k0, k1, step, item, chol, xmode, noise_std, beta_scale, d, N, L, dtype_probe):
    """One work item's ``CH`` sequences as ``tokens (CH, D, L+1)`` and ``beta (CH, N, d)`` (the
    batch a fused step trains on, for tests and the final loss)."""
    D, T = d + N, L + 1
    raw = normals(k0, k1, step, item, D * T + N * d)
    Z = np.empty((D, T, CH), dtype_probe.dtype)
    beta = np.empty((N, d, CH), dtype_probe.dtype)
    _make_data(Z, beta, raw, chol, xmode, noise_std, beta_scale, d, N, T)
    return Z.transpose(2, 0, 1).copy(), beta.transpose(2, 0, 1).copy()
