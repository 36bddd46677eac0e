"""The numerics fingerprint: tiny reference runs whose digest is recorded beside MODEL_CODE_VERSION.

Trained runs are cached under a key that includes ``MODEL_CODE_VERSION``.  A change to the numbers a
run produces (model, initialisation, sampler, loss, optimiser, trainer) without a new version would
let the run cache serve runs of the old code; this test trains a few tiny runs that touch every part
(mixed head counts in one ensemble, a covariance, several tasks, every attention kind, SGD) and
compares a digest of their parameters and histories with ``NUMERICS_DIGESTS[MODEL_CODE_VERSION]``.
It fails on any such change until the version is bumped and its digest recorded together
(``icl_lib/version.py``).  Runs are in float64 and values are rounded to 10 significant digits,
so the digest does not depend on the CPU's last-bit rounding, while any change to the
computation itself moves values by far more.
"""

import hashlib

from icl_lib import DataConfig, EnsembleTrainer, ModelConfig, RunSpec, TrainConfig
from icl_lib.version import MODEL_CODE_VERSION, NUMERICS_DIGESTS

TC = TrainConfig(steps=12, batch=8, lr=1e-2, n_log=4, val_size=16, dtype="float64")


def reference_ensembles() -> list[list[RunSpec]]:
    """One list of specs per ensemble, each trained on its own."""
    d3 = DataConfig(d=3, L=6, sigma2=0.1)
    mixed = [RunSpec(d3, ModelConfig(heads=h), TC, seed=s) for h, s in ((1, 0), (2, 1), (3, 2))]
    cov = [RunSpec(DataConfig(d=3, L=6, sigma2=0.2, rho=0.5), ModelConfig(heads=2), TC, seed=3),
           RunSpec(DataConfig(d=3, L=6, covariance=[[1, 0.2, 0], [0.2, 2, 0.1], [0, 0.1, 0.5]]),
                   ModelConfig(heads=2, init_scale=0.5), TC, seed=4)]
    tasks = [RunSpec(DataConfig(d=4, L=6, supports=[[0, 1, 2], [1, 2, 3]]), ModelConfig(heads=3), TC, seed=5)]
    kinds = [[RunSpec(d3, ModelConfig(heads=2, attention=a), TC, seed=6)]
             for a in ("linear", "one_plus_tanh", "quadratic", "square")]
    sgd = [RunSpec(d3, ModelConfig(heads=2), TrainConfig(**{**TC.__dict__, "optimizer": "sgd", "lr": 0.05}), seed=7)]
    return [mixed, cov, tasks, *kinds, sgd]


def numerics_digest() -> str:
    h = hashlib.sha256()
    for specs in reference_ensembles():
        for run in EnsembleTrainer(specs, "cpu", progress=False).run():
            for part, names in (("params", "QKVO"), ("history", ("val_loss", "train_loss", "KQ", "OV"))):
                for name in names:
                    values = getattr(run, part)[name].double().reshape(-1).tolist()
                    h.update(f"{part}/{name}:".encode() + ",".join(f"{v:.9e}" for v in values).encode())
    return h.hexdigest()[:32]


def test_numerics_match_the_recorded_digest_of_this_model_code_version():
    digest = numerics_digest()
    assert NUMERICS_DIGESTS.get(MODEL_CODE_VERSION) == digest, (
        f"the numbers of training changed (reference digest {digest}, recorded for MODEL_CODE_VERSION="
        f"{MODEL_CODE_VERSION!r}: {NUMERICS_DIGESTS.get(MODEL_CODE_VERSION)}): if that is intended, bump "
        f"MODEL_CODE_VERSION in icl_lib/version.py and record NUMERICS_DIGESTS[<new version>] = {digest!r} "
        "(every cached run then trains again); if not, the change altered the numerics by mistake"
    )


def test_each_version_has_its_own_digest():
    """A digest recorded under two versions means a version was bumped with no change, or a digest
    was copied instead of measured."""
    assert len(set(NUMERICS_DIGESTS.values())) == len(NUMERICS_DIGESTS)
