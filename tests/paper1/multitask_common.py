"""What test_multitask.py, test_multitask_tables.py share: helpers, fixtures and constants."""

import math

import torch

from icl_lib import DataConfig
from icl_lib.paper1.multitask.references import task_batch
from icl_lib.sampling import Batch, sample_chunks
from icl_lib.estimators import debiased_gd_predict



def debiased_gd_diag_predict(batch: Batch, task: int, gamma: torch.Tensor) -> torch.Tensor:
    """Debiased GD with pre-conditioner ``diag(gamma)`` (step included) for task ``task``:
    ``(1/L) sum_i y_{i,n} (x_i - xbar)^T diag(gamma) x_q`` (weighted debiased GD, C.3 Mode II)."""
    gamma = torch.as_tensor(gamma, dtype=batch.x.dtype, device=batch.x.device)
    return debiased_gd_predict(task_batch(batch, task), 1.0, Gamma=torch.diag(gamma))
DATA = DataConfig(d=6, L=40, sigma2=0.1, supports=[[0, 1, 2, 3], [2, 3, 4, 5]])
SMALL = DataConfig(d=5, L=10, sigma2=0.3, supports=[[0, 1], [1, 2, 3]])  # coordinate 4 unused


def _circuits(omegas, mus, d=6, N=2):
    """KQ (H, D, D) with diagonal block diag(omega_h), OV (H, N, D) with OV[h, n, d+n] = mu_{h,n}."""
    omegas = torch.tensor(omegas, dtype=torch.float64)
    mus = torch.tensor(mus, dtype=torch.float64)
    H, D = omegas.shape[0], d + N
    KQ = torch.zeros(H, D, D, dtype=torch.float64)
    KQ[:, :d, :d] = torch.diag_embed(omegas)
    OV = torch.zeros(H, N, D, dtype=torch.float64)
    for n in range(N):
        OV[:, n, d + n] = mus[:, n]
    return KQ, OV


# A sign-matched superposition (paper 1, C.3 Mode IV) solved by hand: per coordinate group (task 1
# only, shared, task 2 only) head 1 has omega = -(1, 1.5, 0.5), head 2 (0.5, 1.5, 1), head 3
# (-2.5, 0, 2.5); mu = (-1, -2), (2, 1), (-1, 1).  Then sum_h mu_{h,n} = 0 and Gamma_1 = 4.5 on S_1,
# 0 on task 2's own coordinates (and the mirror image for task 2).
SUPER_OMEGA = [[-1, -1, -1.5, -1.5, -0.5, -0.5], [0.5, 0.5, 1.5, 1.5, 1, 1], [-2.5, -2.5, 0, 0, 2.5, 2.5]]
SUPER_MU = [[-1, -2], [2, 1], [-1, 1]]


@torch.no_grad()
def per_task_risk(model, data: DataConfig, n: int, seed: int, chunk: int = 2_000):
    """Per-task squared errors of every model of an ensemble on ``n`` fresh prompts, written
    directly: ``(mean (R, N), std error (R, N), errors (R, n, N))``."""
    e = torch.cat([((model(b) - b.yq) ** 2) for b in sample_chunks(data, n, seed, chunk, dtype=model.Q.dtype)], 1)
    return e.mean(1), e.std(1) / math.sqrt(e.shape[1]), e
