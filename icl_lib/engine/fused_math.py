"""Bits and float32 maths of the fused CPU backend's kernels (:mod:`icl_lib.engine.fused`), written with numba.

``ln``, ``sin``, ``cos`` and float32 ``exp`` are polynomials written here (accurate to a few float32
ulps; tested), because numba's ``math`` functions call the C library one number at a time and
stop the vectoriser (numba's vector math library needs a build of llvmlite that PyPI does not
ship).  float64 models take ``math.exp`` and ``math.tanh``; the normals are float32 in both.

* :func:`log_approx`, :func:`sincos_approx`, :func:`exp_approx` -- the polynomials; ``_exp`` and
  ``_tanh`` pick them (float32) or ``math`` (float64) inside the kernels;
* ``_f32_bits``, ``_bits_f32``, ``_u32``, ``_rotl`` -- the bit reinterpretations and 32-bit
  arithmetic of the random numbers (:mod:`icl_lib.engine.fused_random`);
* ``_JIT`` -- the compilation flags of every kernel.

The random numbers of :mod:`icl_lib.engine.fused_random` and the kernels of
:mod:`icl_lib.engine.fused_kernels` are built on it (paper 1's training on a CPU, every chapter).
"""

from __future__ import annotations

import math
import os

os.environ.setdefault("NUMBA_SLP_VECTORIZE", "1")  # numba leaves LLVM's SLP vectoriser off by default

import numpy as np  # noqa: E402
from llvmlite import ir  # noqa: E402
from numba import njit, types  # noqa: E402
from numba.extending import intrinsic, overload  # noqa: E402

__all__ = ["exp_approx", "log_approx", "sincos_approx"]

_JIT = dict(nogil=True, fastmath=True, cache=True, error_model="numpy")
_M32 = np.uint64(0xFFFFFFFF)


# ------------------------------------------------------------------------------------------ bits
@intrinsic
def _f32_bits(typingctx, x):
    """The bits of a float32 as uint32 (a reinterpretation, no conversion)."""
    sig = types.uint32(types.float32)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return sig, codegen


@intrinsic
def _bits_f32(typingctx, x):
    """The float32 whose bits are the uint32 ``x``."""
    sig = types.float32(types.uint32)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())

    return sig, codegen


@njit(inline="always", **_JIT)
def _u32(x):
    return np.uint32(np.uint64(x) & _M32)


@njit(inline="always", **_JIT)
def _rotl(x, k):
    x = np.uint64(x)
    return _u32((x << np.uint64(k)) | (x >> np.uint64(32 - k)))


# ------------------------------------------------------------------------------------------ maths
_LN2 = np.float32(0.6931471805599453)
_LOG2E = np.float32(1.4426950408889634)
_LN2_HI = np.float32(0.693145751953125)
_LN2_LO = np.float32(1.428606765330187e-06)
_SQRT2 = np.float32(1.4142135623730951)


@njit(inline="always", **_JIT)
def log_approx(x):
    """``ln x`` for a positive normal float32 (exponent and mantissa split, ``2 atanh`` series on
    ``[sqrt(1/2), sqrt(2))``)."""
    b = _f32_bits(np.float32(x))
    e = np.int32((b >> np.uint32(23)) & np.uint32(0xFF)) - np.int32(127)
    m = _bits_f32(np.uint32((b & np.uint32(0x7FFFFF)) | np.uint32(0x3F800000)))
    big = m > _SQRT2
    m = np.float32(m * np.float32(0.5)) if big else m
    e = e + np.int32(1) if big else e
    t = (m - np.float32(1.0)) / (m + np.float32(1.0))
    t2 = t * t
    p = np.float32(1.0) + t2 * (np.float32(1 / 3) + t2 * (np.float32(1 / 5) + t2 * (np.float32(1 / 7) + t2 * np.float32(1 / 9))))
    return np.float32(e) * _LN2 + np.float32(2.0) * t * p


@njit(inline="always", **_JIT)
def sincos_approx(phi):
    """``(sin phi, cos phi)`` for float32 ``|phi| <= pi/4`` (Taylor polynomials of degree 9 and 10)."""
    p2 = phi * phi
    s = phi * (np.float32(1.0) - p2 * (np.float32(1 / 6) - p2 * (np.float32(1 / 120) - p2 * (np.float32(1 / 5040) - p2 * np.float32(1 / 362880)))))
    c = np.float32(1.0) - p2 * (np.float32(0.5) - p2 * (np.float32(1 / 24) - p2 * (np.float32(1 / 720) - p2 * (np.float32(1 / 40320) - p2 * np.float32(1 / 3628800)))))
    return s, c


@njit(inline="always", **_JIT)
def exp_approx(x):
    """``exp x`` for float32 (``2^n e^f`` with ``|f| <= ln2 / 2``, degree-7 polynomial); ``x`` is
    clamped to ``[-87, 88]``, where float32 is normal."""
    x = min(max(np.float32(x), np.float32(-87.0)), np.float32(88.0))
    n = np.floor(x * _LOG2E + np.float32(0.5))
    f = (x - n * _LN2_HI) - n * _LN2_LO
    p = np.float32(1.0) + f * (np.float32(1.0) + f * (np.float32(0.5) + f * (np.float32(1 / 6) + f * (
        np.float32(1 / 24) + f * (np.float32(1 / 120) + f * (np.float32(1 / 720) + f * np.float32(1 / 5040)))))))
    return p * _bits_f32(np.uint32((np.int32(n) + np.int32(127)) << np.int32(23)))


def _exp(x):  # pragma: no cover - replaced by the overload below inside compiled code
    return math.exp(x)


@overload(_exp, inline="always", jit_options=_JIT)
def _exp_overload(x):
    if isinstance(x, types.Float) and x.bitwidth == 32:
        return lambda x: exp_approx(x)
    return lambda x: math.exp(x)


def _tanh(x):  # pragma: no cover - replaced by the overload below inside compiled code
    return math.tanh(x)


@overload(_tanh, inline="always", jit_options=_JIT)
def _tanh_overload(x):
    if isinstance(x, types.Float) and x.bitwidth == 32:
        def tanh32(x):
            e = exp_approx(np.float32(-2.0) * x)  # tanh x = (1 - e^{-2x}) / (1 + e^{-2x})
            return (np.float32(1.0) - e) / (np.float32(1.0) + e)
        return tanh32
    return lambda x: math.tanh(x)
