"""Explicit SIMD vectors for the fused CPU backend's kernels (:mod:`icl_lib.engine.fused_kernels`).

The kernels keep an item's ``CH`` sequences as the lanes of every array (the last axis, contiguous).
A loop with the lanes innermost vectorises by itself, but a sum over tokens or features written that
way reads and writes its accumulator in memory at every term.  The sums here hold their accumulators
in registers instead: a :class:`Vec` is :data:`VEC_BYTES` bytes of lanes (64: 16 float32 or 8
float64, one AVX-512 register or two AVX2 ones; 32 on Intel's AVX-512 CPUs), loaded from and
stored to a C-contiguous array at a flat index.
Each lane is summed term by term in the same order and with the same operations (``acc + x * y``
under numba's ``fastmath``) as the scalar loops they replace, so the numbers are the same bits.

* :class:`Vec`, ``vload``, ``vstore``, ``vsplat``, ``vfma``, ``vmul``, ``vmax``, ``vload_as`` -- the vectors and their operations;
* :func:`query_vectors`, :func:`add_outer` -- ``u_h = KQ_h x_q``, and ``gKQ_h += gu_h x_q^T``;
* :func:`max_tokens` -- ``out[h] = max_i s[h, i]`` (softmax's shift);
* :func:`dot_tokens` -- ``out[h, i] = sum_e vec[h, e] Z[e, i]`` (scores, the weights' gradients);
* :func:`pool_tokens` -- ``out[h, e] = sum_i wts[h, i] Z[e, i]`` (pooled tokens, ``gu``);
* :func:`copy_rows` -- the covariates and the labels' noise from the normals;
* :func:`add_labels` -- ``Z[d + n, i] += sum_k Z[k, i] beta[n, k]`` (labels from covariates).
"""

from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.core.datamodel import models
from numba.extending import intrinsic, overload, register_model

from .fused_math import _JIT

__all__ = ["CH", "Vec", "vload", "vstore", "vsplat", "vfma", "vmul", "vmax", "vload_as", "copy_rows", "query_vectors", "add_outer", "max_tokens", "dot_tokens", "pool_tokens", "add_labels", "VEC_BYTES"]

CH = 64  # sequences per work item: the SIMD lanes of every loop (16 and 32 vectorised worse, measured)


def _vector_bytes() -> int:
    """Bytes of lanes per vector for numba's compile target: 64 (two AVX2 registers, one AVX-512
    register on AMD), or 32 on Intel CPUs with AVX-512, for which LLVM prefers 256-bit vectors (a
    512-bit FMA lowers the clock of the older ones) as the loops it vectorises itself do."""
    import llvmlite.binding as llvm
    from numba.core import config

    name = config.CPU_NAME or llvm.get_host_cpu_name()
    feats = config.CPU_FEATURES if config.CPU_FEATURES is not None else llvm.get_host_cpu_features().flatten()
    avx512 = "+avx512f" in feats.split(",") or (feats == "" and name.startswith(_INTEL_AVX512))
    return 32 if avx512 and not name.startswith("znver") else 64


# LLVM's names of Intel CPUs with AVX-512 (for NUMBA_CPU_FEATURES="", a named CPU's own features)
_INTEL_AVX512 = ("skylake-avx512", "cascadelake", "cooperlake", "cannonlake", "icelake", "tigerlake", "rocketlake",
                 "sapphirerapids", "emeraldrapids", "graniterapids", "diamondrapids", "knl", "knm", "x86-64-v4")


VEC_BYTES = _vector_bytes()


class Vec(types.Type):
    """``lanes`` numbers of ``dtype`` held as one LLVM vector."""

    def __init__(self, dtype, lanes: int):
        self.dtype, self.lanes = dtype, lanes
        super().__init__(name=f"Vec({dtype}, {lanes})")


@register_model(Vec)
class _VecModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, ir.VectorType(dmm.lookup(fe_type.dtype).get_value_type(), fe_type.lanes))


def _vec(dtype) -> Vec:
    return Vec(dtype, VEC_BYTES // (dtype.bitwidth // 8))


def width(dtype):  # pragma: no cover - replaced by the overload below inside compiled code
    raise NotImplementedError


@overload(width, inline="always", jit_options=_JIT)
def _width_overload(dtype):
    """The lanes of a vector of ``dtype``'s numbers (a compile-time constant)."""
    w = _vec(dtype.dtype if isinstance(dtype, types.Array) else dtype).lanes
    return lambda dtype: w


@intrinsic
def vload(typingctx, arr, idx):
    """The vector at flat index ``idx`` of the C-contiguous array ``arr``."""
    vt = _vec(arr.dtype)

    def codegen(context, builder, sig, args):
        a = context.make_array(sig.args[0])(context, builder, args[0])
        ptr = builder.bitcast(builder.gep(a.data, [args[1]]), context.get_value_type(vt).as_pointer())
        return builder.load(ptr, align=arr.dtype.bitwidth // 8)

    return vt(arr, idx), codegen


@intrinsic
def vload_as(typingctx, arr, idx, like):
    """The vector of ``like``'s dtype at flat index ``idx`` of the C-contiguous array ``arr``, whose
    numbers are converted (float32 to float64 exactly, as the scalar loops convert them)."""
    vt = _vec(like.dtype)
    src = Vec(arr.dtype, vt.lanes)

    def codegen(context, builder, sig, args):
        a = context.make_array(sig.args[0])(context, builder, args[0])
        ptr = builder.bitcast(builder.gep(a.data, [args[1]]), context.get_value_type(src).as_pointer())
        v = builder.load(ptr, align=arr.dtype.bitwidth // 8)
        if arr.dtype == vt.dtype:
            return v
        return builder.fpext(v, context.get_value_type(vt))

    return vt(arr, idx, like), codegen


@intrinsic
def vstore(typingctx, arr, idx, v):
    """Store vector ``v`` at flat index ``idx`` of the C-contiguous array ``arr``."""

    def codegen(context, builder, sig, args):
        a = context.make_array(sig.args[0])(context, builder, args[0])
        ptr = builder.bitcast(builder.gep(a.data, [args[1]]), args[2].type.as_pointer())
        builder.store(args[2], ptr, align=arr.dtype.bitwidth // 8)
        return context.get_dummy_value()

    return types.none(arr, idx, v), codegen


@intrinsic
def vsplat(typingctx, x):
    """The vector of every lane ``x``."""
    vt = _vec(x)

    def codegen(context, builder, sig, args):
        v = ir.Constant(context.get_value_type(vt), ir.Undefined)
        for k in range(vt.lanes):
            v = builder.insert_element(v, args[0], ir.Constant(ir.IntType(32), k))
        return v

    return vt(x), codegen


@intrinsic
def vfma(typingctx, acc, x, y):
    """``acc + x * y`` lane by lane, the scalar loops' ``acc += x * y`` under ``fastmath``."""

    def codegen(context, builder, sig, args):
        return builder.fadd(args[0], builder.fmul(args[1], args[2], flags=("fast",)), flags=("fast",))

    return acc(acc, x, y), codegen


@intrinsic
def vmul(typingctx, x, y):
    """``x * y`` lane by lane."""

    def codegen(context, builder, sig, args):
        return builder.fmul(args[0], args[1], flags=("fast",))

    return x(x, y), codegen


@intrinsic
def vmax(typingctx, acc, x):
    """``x if x > acc else acc`` lane by lane: the scalar loops' ``max(acc, x)``."""

    def codegen(context, builder, sig, args):
        return builder.select(builder.fcmp_ordered(">", args[1], args[0], flags=("fast",)), args[1], args[0])

    return acc(acc, x), codegen


@njit(inline="always", **_JIT)
def query_vectors(u, KQ, Z, Hr, zero):
    """``u[h, e, b] = sum_k KQ[h, e, k] Z[k, L, b]`` (``k < d`` in order) for the heads ``h < Hr``:
    each head's ``KQ_h x_q``, the query token ``x_q`` in column ``L = T - 1``."""
    D, T, d = Z.shape[0], Z.shape[1], KQ.shape[2]
    L = T - 1
    W = width(Z)
    for h in range(Hr):
        for e in range(D):
            for b0 in range(0, CH, W):
                acc = vsplat(zero)
                for k in range(d):
                    acc = vfma(acc, vsplat(KQ[h, e, k]), vload(Z, (k * T + L) * CH + b0))
                vstore(u, (h * D + e) * CH + b0, acc)


@njit(inline="always", **_JIT)
def add_outer(gKQ, gu, Z, Hr):
    """``gKQ[h, e, k, b] += gu[h, e, b] Z[k, L, b]`` for the heads ``h < Hr`` (``k < d``): the circuits'
    gradients ``gu_h x_q^T`` of each sequence."""
    D, T, d = Z.shape[0], Z.shape[1], gKQ.shape[2]
    L = T - 1
    W = width(Z)
    for h in range(Hr):
        for e in range(D):
            for k in range(d):
                for b0 in range(0, CH, W):
                    j = ((h * D + e) * d + k) * CH + b0
                    vstore(gKQ, j, vfma(vload(gKQ, j), vload(gu, (h * D + e) * CH + b0), vload(Z, (k * T + L) * CH + b0)))


@njit(inline="always", **_JIT)
def max_tokens(out, s, Hr):
    """``out[h, b] = max_i s[h, i, b]`` (from ``i = 0`` up) for the heads ``h < Hr``: softmax's shift."""
    L = s.shape[1]
    W = width(s)
    for h in range(Hr):
        for b0 in range(0, CH, W):
            m = vload(s, (h * L) * CH + b0)
            for i in range(1, L):
                m = vmax(m, vload(s, (h * L + i) * CH + b0))
            vstore(out, h * CH + b0, m)


@njit(inline="always", **_JIT)
def dot_tokens(out, vec, Z, Hr, zero):
    """``out[h, i, b] = sum_e vec[h, e, b] Z[e, i, b]`` (``e`` in order) for the tokens ``i < L``
    and heads ``h < Hr``: the scores ``z_i . u_h`` forward, ``z_i . gp_h`` backward.  Four heads
    at a time share each token's loads."""
    D, T, L = Z.shape[0], Z.shape[1], out.shape[1]
    W = width(Z)
    h = 0
    while h + 4 <= Hr:
        for i in range(L):
            for b0 in range(0, CH, W):
                a0, a1, a2, a3 = vsplat(zero), vsplat(zero), vsplat(zero), vsplat(zero)
                for e in range(D):
                    z = vload(Z, (e * T + i) * CH + b0)
                    a0 = vfma(a0, vload(vec, (h * D + e) * CH + b0), z)
                    a1 = vfma(a1, vload(vec, ((h + 1) * D + e) * CH + b0), z)
                    a2 = vfma(a2, vload(vec, ((h + 2) * D + e) * CH + b0), z)
                    a3 = vfma(a3, vload(vec, ((h + 3) * D + e) * CH + b0), z)
                vstore(out, (h * L + i) * CH + b0, a0)
                vstore(out, ((h + 1) * L + i) * CH + b0, a1)
                vstore(out, ((h + 2) * L + i) * CH + b0, a2)
                vstore(out, ((h + 3) * L + i) * CH + b0, a3)
        h += 4
    while h < Hr:
        for i in range(L):
            for b0 in range(0, CH, W):
                a0 = vsplat(zero)
                for e in range(D):
                    a0 = vfma(a0, vload(vec, (h * D + e) * CH + b0), vload(Z, (e * T + i) * CH + b0))
                vstore(out, (h * L + i) * CH + b0, a0)
        h += 1


@njit(inline="always", **_JIT)
def pool_tokens(out, wts, Z, Hr, zero):
    """``out[h, e, b] = sum_i wts[h, i, b] Z[e, i, b]`` (``i`` in order, ``i < L``) for the heads
    ``h < Hr``: the pooled tokens ``sum_i a_hi z_i`` forward, ``gu_h = sum_i gs_hi z_i`` backward."""
    D, T, L = Z.shape[0], Z.shape[1], wts.shape[1]
    W = width(Z)
    h = 0
    while h + 4 <= Hr:
        for e in range(D):
            for b0 in range(0, CH, W):
                a0, a1, a2, a3 = vsplat(zero), vsplat(zero), vsplat(zero), vsplat(zero)
                for i in range(L):
                    z = vload(Z, (e * T + i) * CH + b0)
                    a0 = vfma(a0, vload(wts, (h * L + i) * CH + b0), z)
                    a1 = vfma(a1, vload(wts, ((h + 1) * L + i) * CH + b0), z)
                    a2 = vfma(a2, vload(wts, ((h + 2) * L + i) * CH + b0), z)
                    a3 = vfma(a3, vload(wts, ((h + 3) * L + i) * CH + b0), z)
                vstore(out, (h * D + e) * CH + b0, a0)
                vstore(out, ((h + 1) * D + e) * CH + b0, a1)
                vstore(out, ((h + 2) * D + e) * CH + b0, a2)
                vstore(out, ((h + 3) * D + e) * CH + b0, a3)
        h += 4
    while h < Hr:
        for e in range(D):
            for b0 in range(0, CH, W):
                a0 = vsplat(zero)
                for i in range(L):
                    a0 = vfma(a0, vload(wts, (h * L + i) * CH + b0), vload(Z, (e * T + i) * CH + b0))
                vstore(out, (h * D + e) * CH + b0, a0)
        h += 1


@njit(inline="always", **_JIT)
def copy_rows(Z, raw, start, stop, factor, scaled):
    """Flat elements ``start .. stop - 1`` of ``Z`` from those of ``raw`` (float32, converted to
    ``Z``'s dtype), times ``factor`` where ``scaled``: the covariates, and the noise of the labels."""
    W = width(Z)
    if scaled:
        f = vsplat(factor)
        for j in range(start, stop, W):
            vstore(Z, j, vmul(f, vload_as(raw, j, Z)))
    else:
        for j in range(start, stop, W):
            vstore(Z, j, vload_as(raw, j, Z))


@njit(inline="always", **_JIT)
def add_labels(Z, beta, d, N, T):
    """``Z[d + n, i, b] += sum_k Z[k, i, b] beta[n, k, b]`` (``k`` in order): each task's labels
    from the covariates, onto their noise."""
    W = width(Z)
    for n in range(N):
        for i in range(T):
            for b0 in range(0, CH, W):
                acc = vload(Z, ((d + n) * T + i) * CH + b0)
                for k in range(d):
                    acc = vfma(acc, vload(Z, (k * T + i) * CH + b0), vload(beta, (n * d + k) * CH + b0))
                vstore(Z, ((d + n) * T + i) * CH + b0, acc)
