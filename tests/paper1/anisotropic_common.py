"""What test_anisotropic.py, test_anisotropic_helpers.py, test_anisotropic_claims.py share: helpers, fixtures and constants."""

import math

import torch

import icl_lib as icl
from icl_lib.paper1.anisotropic.preconditioner import optimal_preconditioner



# ------------------------------------------------------------------------------- learned Gamma


D, LL, S2 = 5, 40, 0.1


def kms(rho, d=D):
    return icl.kms_covariance(d, rho)


# ------------------------------------------------------------------------------- chapter 6's helpers
def _mirror_circuits(blocks, mus, d):
    """KQ (H, D, D) with the given covariate blocks (H, d, d), OV (H, 1, D) with OV[h, 0, d] = mu_h."""
    H, D = len(mus), d + 1
    KQ = torch.zeros(H, D, D, dtype=torch.float64)
    KQ[:, :d, :d] = torch.stack([torch.as_tensor(b, dtype=torch.float64) for b in blocks])
    OV = torch.zeros(H, 1, D, dtype=torch.float64)
    OV[:, 0, d] = torch.tensor(mus, dtype=torch.float64)
    return KQ, OV


def _run(KQ, OV, rho=0.5, seed=0, d=3, L=10, sigma2=0.1, KQ_hist=None, steps=None):
    """A hand-built two-head Run whose final circuits are KQ, OV (parameters K = V = I, Q = sqrt(D) KQ,
    O = OV, so that stack_models rebuilds the same circuits); the history is KQ_hist (T, ...) if given."""
    D = d + 1
    spec = icl.RunSpec(data=icl.DataConfig(d=d, L=L, sigma2=sigma2, rho=rho), model=icl.ModelConfig(heads=2),
                       seed=seed)
    eye = torch.eye(D, dtype=torch.float64).expand(2, D, D).clone()
    params = {"Q": KQ * math.sqrt(D), "K": eye, "V": eye.clone(), "O": OV}
    KQ_h = KQ[None] if KQ_hist is None else KQ_hist
    T = KQ_h.shape[0]
    history = {"step": torch.arange(T) * 25 if steps is None else torch.as_tensor(steps), "KQ": KQ_h,
               "OV": OV[None].expand(T, *OV.shape).clone()}
    return icl.Run(spec=spec, params=params, history=history, meta={"ensemble": 1, "seconds": 0.0})


def _optimal_model_run(d, L, s2, rho, omega, seed=0):
    """KQ_{1,2} = +-omega Gamma*, OV = (0.., +-mu), 2 mu omega = 1: linearised, debiased GD with Gamma*."""
    G = optimal_preconditioner(kms(rho, d), L, s2)
    mu = 0.5 / omega
    return _run(*_mirror_circuits([omega * G, -omega * G], [mu, -mu], d), rho=rho, seed=seed, d=d, L=L, sigma2=s2)
