"""What test_optimality.py, test_optimality_claims.py share: helpers, fixtures and constants."""

import torch

from icl_lib import AttentionEnsemble, DataConfig



def hand_set(omegas, mus, d, attention="softmax", off=0.0, seed=0):
    """Ensemble of one model with circuits KQ_h = omega_h I (+ small off-diagonal noise), OV_h = mu_h e_y."""
    H, D = len(omegas), d + 1
    KQ = torch.zeros(1, H, D, D, dtype=torch.float64)
    OV = torch.zeros(1, H, 1, D, dtype=torch.float64)
    g = torch.Generator().manual_seed(seed)
    for h, (w, m) in enumerate(zip(omegas, mus)):
        KQ[0, h, :d, :d] = w * torch.eye(d, dtype=torch.float64) + off * w * torch.randn(d, d, generator=g,
                                                                                          dtype=torch.float64)
        OV[0, h, 0, d] = m
    return AttentionEnsemble.from_circuits(KQ, OV, d, attention=attention), KQ, OV


# ----------------------------------------------------------------------------- chapter 5's sections
def fake_run(omegas, mus, d=3, L=10, seed=0, attention="softmax", sigma2=0.1, steps=(0, 5, 10)):
    """A Run with hand-set circuits KQ_h = omega_h I (pattern (3.1)), OV_h = mu_h e_y, ready for
    stack_models (its Q, K, V, O realise the circuits) and with a history growing to them."""
    from icl_lib.config import ModelConfig, RunSpec
    from icl_lib.engine import Run

    _, KQ, OV = hand_set(omegas, mus, d)
    norm = L if attention == "linear" else None  # linear attention's N = L_train
    model = AttentionEnsemble.from_circuits(KQ, OV, d, attention=attention, norm_length=norm)
    spec = RunSpec(data=DataConfig(d=d, L=L, sigma2=sigma2),
                   model=ModelConfig(heads=len(omegas), attention=attention), seed=seed)
    params = {k: getattr(model, k)[0].detach().clone() for k in "QKVO"}
    t = torch.tensor(steps, dtype=torch.float64)
    frac = (t / t[-1])[:, None, None, None]  # (T, 1, 1, 1)
    history = {"step": torch.tensor(steps), "KQ": frac * KQ[0], "OV": frac * OV[0]}
    return Run(spec=spec, params=params, history=history)
