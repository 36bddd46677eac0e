"""The fused backend's numbers bit for bit: its random streams, its batches, one step's losses and
gradients of small ensembles, and the weights of short training runs, as digests of their bytes.

Stored fused runs (``results/``) are keyed by their spec and code versions, not by their bits, so a
rewrite of the kernels (for speed) must give the same bits, or it would make new runs that differ
from the stored ones while keeping their keys.  The bits depend on the compile target (LLVM's
instruction selection and scheduling of the float32 polynomials and of the reductions differ from
one CPU model to another, and between LLVM versions), so digests are recorded per target and per
llvmlite release: this machine's own target where it is recorded, and on every x86-64 CPU with
AVX2 the ``haswell`` target (AVX2 and FMA, numba's ``NUMBA_CPU_NAME=haswell``) in a subprocess.

The bits also depend on the CPU that runs the code, not only on the target: under ``fastmath`` the
AVX2 code computes the float32 divisions and square roots of the normals (Box-Muller's logarithm
and radius) from the CPU's reciprocal estimates (``vrcpps``, ``vrsqrtps``) and one Newton step,
and the x86 manuals leave those estimates to each implementation (the AVX-512 code takes
``vrcp14ps`` and an exact ``vsqrtps``).  Two 12-bit estimates that differ give a
different float32 quotient after the Newton step for about 10 % of the inputs (an emulation of
the instruction sequence, tested below).  The digests were recorded on AMD CPUs (Zen 3; the same on Zen 4 and
Zen 5), so they are checked there and skipped on other vendors' CPUs.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys

import numpy as np
import pytest
import torch

# (llvmlite release, compile target) -> digests; "haswell" is the target with haswell's own features
PINNED = {
    ("0.50", "haswell"): {
        "normals": "7381f27d1d29db570304a3c5",
        "chunk_batch": "3553529fc1d2f5e92f764d87",
        "grads/softmax/float32/1": "3dd1212234bc43cf4e64a56f",
        "grads/softmax/float32/2": "3dd1212234bc43cf4e64a56f",
        "grads/linear/float32/1": "20d7da4ff424c2019a2a834a",
        "grads/linear/float32/2": "20d7da4ff424c2019a2a834a",
        "grads/one_plus_tanh/float32/1": "e85b73d96d4214dc4472aab7",
        "grads/one_plus_tanh/float32/2": "e85b73d96d4214dc4472aab7",
        "grads/quadratic/float32/1": "2eaa2acf3b9ffcb7a3f3df8d",
        "grads/quadratic/float32/2": "2eaa2acf3b9ffcb7a3f3df8d",
        "grads/square/float32/1": "c5514433a56f5b5c32d79a75",
        "grads/square/float32/2": "c5514433a56f5b5c32d79a75",
        "grads/softmax/float64/1": "0a9c080df9619ffa9f3d297d",
        "grads/softmax/float64/2": "0a9c080df9619ffa9f3d297d",
        "grads/linear/float64/1": "b95ec72700c1381894fbbc34",
        "grads/linear/float64/2": "b95ec72700c1381894fbbc34",
        "grads/one_plus_tanh/float64/1": "d4fe72b80a068de525628691",
        "grads/one_plus_tanh/float64/2": "d4fe72b80a068de525628691",
        "grads/quadratic/float64/1": "e5fe0f29ebff05eb333a0656",
        "grads/quadratic/float64/2": "e5fe0f29ebff05eb333a0656",
        "grads/square/float64/1": "735eb60d6a32b2f5b3d18b3d",
        "grads/square/float64/2": "735eb60d6a32b2f5b3d18b3d",
        "train/paper": "7b8e46c3b91cbcc844e18438",
        "train/tasks": "be62dd3cd2e12ac917c05558",
    },
    ("0.50", "znver3"): {
        "normals": "1e867b3fcc549fb4451ec85f",
        "chunk_batch": "daa683d4ede8622ad2ce76c8",
        "grads/softmax/float32/1": "0f9d7161756f7273e52dd974",
        "grads/softmax/float32/2": "0f9d7161756f7273e52dd974",
        "grads/linear/float32/1": "ce78aabc373d994ac9b263b1",
        "grads/linear/float32/2": "ce78aabc373d994ac9b263b1",
        "grads/one_plus_tanh/float32/1": "1cf09e1dafd1342b46973253",
        "grads/one_plus_tanh/float32/2": "1cf09e1dafd1342b46973253",
        "grads/quadratic/float32/1": "83a5b11d8a75a0780799111b",
        "grads/quadratic/float32/2": "83a5b11d8a75a0780799111b",
        "grads/square/float32/1": "9ad707c2035adf460ae6867e",
        "grads/square/float32/2": "9ad707c2035adf460ae6867e",
        "grads/softmax/float64/1": "37d421f64c5828c245506578",
        "grads/softmax/float64/2": "37d421f64c5828c245506578",
        "grads/linear/float64/1": "c482f158f17f7bf1ee92a444",
        "grads/linear/float64/2": "c482f158f17f7bf1ee92a444",
        "grads/one_plus_tanh/float64/1": "b92ff79c53c066cc6b3b2f68",
        "grads/one_plus_tanh/float64/2": "b92ff79c53c066cc6b3b2f68",
        "grads/quadratic/float64/1": "6c23274c2970512a436396e4",
        "grads/quadratic/float64/2": "6c23274c2970512a436396e4",
        "grads/square/float64/1": "28ed9483e9dae93368d7ce8e",
        "grads/square/float64/2": "28ed9483e9dae93368d7ce8e",
        "train/paper": "245694a5ff88b54ffbb53ae9",
        "train/tasks": "c8117246cd441349dc29f9ec",
    },
}


def _h(*arrays) -> str:
    m = hashlib.sha256()
    for a in arrays:
        m.update(np.ascontiguousarray(a).tobytes())
    return m.hexdigest()[:24]


def _program(specs, dtype, threads):
    from icl_lib.engine.fused import FusedProgram
    from icl_lib.engine.run import empty_model
    from icl_lib.seeding import make_generators

    model = empty_model(specs, "cpu", dtype)
    model.reset_parameters([make_generators(s.seed, "init", "cpu", 1)[0] for s in specs],
                           [s.model.init_scale for s in specs])
    return FusedProgram(model, specs, threads=threads)


def digests() -> dict:
    """The digests of this process's compiled kernels."""
    from icl_lib import DataConfig, EnsembleTrainer, ModelConfig, RunSpec, TrainConfig
    from icl_lib.engine.fused_random import chunk_batch, normals

    out = {"normals": _h(*[normals(k0, k1, s, i, r) for k0, k1, s, i, r in (
        (0, 0, 0, 0, 1), (11, 22, 3, 2, 250), (0xFFFFFFFF, 0x12345678, 2**32 + 7, 5, 99), (7, 9, 123456, 0, 2000))])}
    chol = np.array([[1.0, 0, 0], [0.6, 1.2, 0], [0.1, -0.3, 0.7]])
    scale = np.array([[1.0, 0.5, 0.0], [0.0, 0.7, 0.7]])
    parts = []
    for dt in (np.float32, np.float64):
        for xmode in (0, 1, 2):
            parts += chunk_batch(5, 6, 17, 1, chol.astype(dt), xmode, dt(0.3), scale.astype(dt), 3, 2, 9,
                                 np.empty(1, dt))
    out["chunk_batch"] = _h(*parts)
    for dtype in (torch.float32, torch.float64):
        tc = TrainConfig(steps=10, batch=2 * 64 + 7, dtype=str(dtype).removeprefix("torch."))
        for kind in ("softmax", "linear", "one_plus_tanh", "quadratic", "square"):
            specs = [RunSpec(DataConfig(d=3, L=7, sigma2=0.1), ModelConfig(heads=h, attention=kind), tc, seed=s)
                     for h, s in ((1, 0), (3, 1), (2, 2))]
            for threads in (1, 2):
                prog = _program(specs, dtype, threads)
                loss = prog.grads(5)
                out[f"grads/{kind}/{str(dtype)[6:]}/{threads}"] = _h(loss.numpy(), *[p.grad.numpy() for p in prog.params])
    tc = TrainConfig(steps=40, batch=256, lr=3e-3, n_log=3, val_size=64)
    paper = [RunSpec(DataConfig(d=5, L=40), ModelConfig(heads=4), tc, seed=s) for s in range(3)]
    tasks = [RunSpec(DataConfig(d=4, L=10, rho=0.5, supports=[[0, 1], [2, 3]]), ModelConfig(heads=2), tc, seed=9),
             RunSpec(DataConfig(d=4, L=10, covariates="sphere", supports=[[0, 1, 2], [3]]), ModelConfig(heads=3), tc,
                     seed=10)]
    for name, specs, shards in (("train/paper", paper, None), ("train/tasks", tasks, 1)):
        runs = EnsembleTrainer(specs, "cpu", progress=False, backend="fused", shards=shards).run()
        out[name] = _h(*[r.params[k].numpy() for r in runs for k in "QKVO"],
                       *[r.history["train_loss"].numpy() for r in runs])
    return out


RECORDED_ON = "AuthenticAMD"  # the vendor of the CPUs the digests were recorded on (/proc/cpuinfo)


def _vendor() -> str:
    """The CPU's vendor as Linux names it (``AuthenticAMD``, ``GenuineIntel``), or ``""`` elsewhere."""
    from icl_lib.engine.execution import cpu_fields

    return cpu_fields().get("vendor_id", "")


def _skip_other_vendors() -> None:
    if _vendor() != RECORDED_ON:
        pytest.skip(f"the digests were recorded on {RECORDED_ON} CPUs, whose reciprocal estimates the kernels' "
                    f"float32 divisions and square roots start from; this CPU is {_vendor() or 'of an unknown vendor'}")


def _release() -> str:
    import llvmlite

    return ".".join(llvmlite.__version__.split(".")[:2])


def _check(got: dict, key) -> None:
    want = PINNED[key]
    assert set(got) == set(want), sorted(set(got) ^ set(want))
    changed = [k for k in want if got[k] != want[k]]
    assert not changed, f"the fused backend's bits changed on target {key}: {changed}"


def test_the_fused_numbers_of_this_machines_target_are_todays():
    import llvmlite.binding as llvm
    from numba import config

    target = config.CPU_NAME or llvm.get_host_cpu_name()
    key = (_release(), target)
    if key not in PINNED or (config.CPU_NAME and config.CPU_FEATURES is None and llvm.get_host_cpu_features().get("avx512f")):
        pytest.skip(f"no digests recorded for target {key} with this CPU's features")
    _skip_other_vendors()
    _check(digests(), key)


def test_the_fused_numbers_of_the_avx2_target_are_todays():
    """Compiled for ``haswell`` (AVX2, FMA) in a subprocess: on every x86-64 CPU with AVX2."""
    import llvmlite.binding as llvm

    features = llvm.get_host_cpu_features()
    if platform.machine().lower() not in ("x86_64", "amd64") or not (features.get("avx2") and features.get("fma")):
        pytest.skip("the haswell target runs on x86-64 CPUs with AVX2 and FMA")
    key = (_release(), "haswell")
    if key not in PINNED:
        pytest.skip(f"no digests recorded for target {key}")
    _skip_other_vendors()
    env = dict(os.environ, NUMBA_CPU_NAME="haswell", NUMBA_CPU_FEATURES="")
    import icl_lib

    here = os.path.dirname(os.path.abspath(__file__))
    code = f"import json, sys; sys.path.insert(1, {here!r}); from test_fused_bits import digests; print(json.dumps(digests()))"
    root = os.path.dirname(os.path.dirname(os.path.abspath(icl_lib.__file__)))  # the icl_lib under test
    p = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    _check(json.loads(p.stdout.strip().splitlines()[-1]), key)


def test_two_reciprocal_estimates_give_different_quotients_after_the_newton_step():
    """Why the digests name the CPU vendor: the AVX2 code's quotient ``t = (m - 1) / (m + 1)`` of
    the logarithm is ``q0 = a x0`` refined by ``q = q0 - x0 (b q0 - a)`` (two fused multiply-adds)
    from an estimate ``x0 ~ 1 / b`` of 12 bits.  Emulated in float32 (each fused operation exact in
    float64, then rounded), two estimates that differ (1/b rounded down, and to nearest, to 12
    bits) give different quotients for some of the mantissas ``m`` the logarithm sees."""
    m = np.random.default_rng(0).uniform(np.sqrt(0.5), np.sqrt(2.0), 100_000).astype(np.float32)
    a, b = m - np.float32(1.0), m + np.float32(1.0)
    exact = 1.0 / b.astype(np.float64)
    e = np.floor(np.log2(exact))

    def quotient(x0):
        x0 = x0.astype(np.float32).astype(np.float64)
        q0 = (a * x0).astype(np.float32).astype(np.float64)
        r = (b * q0 - a).astype(np.float32).astype(np.float64)
        return (q0 - x0 * r).astype(np.float32)

    down = np.floor(exact / 2**e * 2**12) / 2**12 * 2**e
    nearest = np.round(exact / 2**e * 2**12) / 2**12 * 2**e
    qd, qn = quotient(down), quotient(nearest)
    assert np.allclose(qd, a / b, rtol=2e-7, atol=1e-30)  # both near the float32 quotient
    assert np.allclose(qn, a / b, rtol=2e-7, atol=1e-30)
    assert 0.01 < np.mean(qd != qn) < 0.5


if __name__ == "__main__":  # print this process's digests (to record a target)
    print(json.dumps(digests(), indent=1))
