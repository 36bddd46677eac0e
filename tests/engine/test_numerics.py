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
import math

from icl_lib import DataConfig, EnsembleTrainer, ModelConfig, RunSpec, TrainConfig
from icl_lib.version import FUSED_CODE_VERSION, MODEL_CODE_VERSION, NUMERICS_DIGESTS

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


# The fused backend's reference values under each FUSED_CODE_VERSION (icl_lib/version.py): per
# run of reference_ensembles() trained with backend="fused", its validation losses, then the sum
# and the sum of squares of each of Q, K, V, O.  Its normals are float32 polynomials, so values
# are compared within a relative 1e-5 (a CPU's other rounding of them moves a value by about
# 1e-7) instead of by a digest; another random stream or kernel moves them by far more.
FUSED_REFERENCE = {
    "1": [
        [1.236863613, 1.229609251, 1.223268628, 1.1827842, -0.3803341171, 1.599126378, 0.2048644187, -0.8111115869, 1.422879068, 1.314941925, 1.2355096, 0.3561296483],
        [1.244056702, 1.236193538, 1.207407594, 1.179603338, 2.455229577, 1.483466637, 0.8775147734, 0.1451650816, 2.584000002, 2.860975339, 2.885565381, 0.3246061391],
        [1.314848781, 1.3059448, 1.306712151, 1.155951858, 2.264608201, -2.462208654, 1.783269909, -0.9833978192, 3.811797547, 4.380897458, 3.454758764, 0.4545651187],
        [1.00000608, 1.000006318, 0.9927828908, 0.9832104445, 1.099213443, -0.8694206044, 0.3174653443, 1.11327826, 3.0608236, 3.131824984, 3.062005611, 0.3989974691],
        [1.177336335, 1.181761742, 1.199191689, 1.195238948, 0.8668701923, 0.5658834246, -0.7554038427, 0.2496929188, 0.627442753, 0.7782614236, 0.6250308201, 0.04668476537],
        [1.093557239, 1.100539565, 1.108797193, 1.115100861, -2.076100201, -3.234936511, -1.32146834, 1.748862344, 6.608170189, 5.87744915, 5.908034791, 0.5998471029],
        [1.338694811, 1.325921535, 1.23105216, 1.251559019, 2.713708727, 1.273168709, -0.5351165352, 0.01640213913, 3.038397128, 2.658003082, 2.831962027, 0.2621337057],
        [1.210370779, 1.206419468, 1.220796943, 1.235843778, 2.712402042, 1.210975207, -0.4584915593, 0.04082122594, 3.101180612, 2.760597471, 2.662100392, 0.1390192003],
        [1.189749479, 1.193967462, 1.196819663, 1.204211116, 2.779940436, 1.25262625, -0.4232283963, 0.01995886647, 3.081887807, 2.70480056, 2.658422658, 0.1399509324],
        [1.2671417, 1.268693089, 1.281713009, 1.258972883, 2.783186954, 1.217658471, -0.4547066612, 0.08180996147, 3.034317174, 2.674551508, 2.674098702, 0.1618794546],
        [1.246223211, 1.247717142, 1.245568156, 1.260537863, 0.05126918587, -3.273659521, 1.253276853, 0.8233962359, 2.643937902, 2.249752127, 2.181406831, 0.1919031028],
    ],
}


def fused_reference_values() -> list[list[float]]:
    out = []
    for specs in reference_ensembles():
        for run in EnsembleTrainer(specs, "cpu", progress=False, backend="fused").run():
            row = [float(v) for v in run.history["val_loss"].double()]
            row += [float(run.params[k].double().sum()) for k in "QKVO"]
            row += [float((run.params[k].double() ** 2).sum()) for k in "QKVO"]
            out.append(row)
    return out


def test_fused_numerics_match_the_reference_of_this_fused_code_version():
    got = fused_reference_values()
    want = FUSED_REFERENCE.get(FUSED_CODE_VERSION)
    assert want is not None and len(got) == len(want), f"no reference recorded for FUSED_CODE_VERSION={FUSED_CODE_VERSION!r}"
    for r, (a, b) in enumerate(zip(got, want)):
        assert len(a) == len(b) and all(math.isclose(x, y, rel_tol=1e-5, abs_tol=1e-9) for x, y in zip(a, b)), (
            f"the numbers of fused training changed (run {r}: {a} against {b}): if that is intended, bump "
            "FUSED_CODE_VERSION in icl_lib/version.py and record its values here (every cached fused run then "
            "trains again); if not, the change altered the fused numerics by mistake"
        )
