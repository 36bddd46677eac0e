"""Training a model held to paper 1's form (3.1): only each head's two scales move.

Paper 1 describes the trained circuits by the form (3.1),

    KQ_h = omega_h [[I_d, 0], [0, 0]],        OV_h = (0, ..., 0, mu_h),

and its Stage I argument (Section 4.2, Appendix D) follows the dynamics of ``(omega_h, mu_h)``
alone.  :class:`FormOptimizer` trains an :class:`~icl_lib.models.AttentionEnsemble` in that form
(``ModelConfig(form="3.1")``): at construction it projects each model's initialisation onto the
form (``omega_h``: the mean of the diagonal of ``KQ_h``'s covariate block, ``mu_h``: the label
entry of ``OV_h``, :mod:`icl_lib.circuits`) and writes it back as

    Q_h = sqrt(D) omega_h [[I_d, 0], [0, 0]],  K_h = I_D,  V_h = e_D e_D^T,  O_h = mu_h e_D^T,

so that ``KQ_h = K_h^T Q_h / sqrt(D)`` and ``OV_h = O_h V_h`` are the form's circuits; each step
reads the gradients of ``Q`` and ``O`` that the engine computes for the full model (eager or
fused: the same batches as a full run of the same seeds), takes their components along the
form (``dL/d omega_h = sqrt(D) sum_i dL/dQ_h[i, i]`` over the covariate block, ``dL/d mu_h =
dL/dO_h[0, D-1]``), applies the run's optimiser (Adam or SGD, :mod:`torch.optim`) to ``(omega,
mu)`` and writes the form back.  ``K`` and ``V`` never move.  One task only (``N = 1``).

Chapter 9 switches the parametrisation of two-head runs from the full model to this form, from
the same initialisations and data draws.
"""

from __future__ import annotations

import math

import torch

from ..circuits import mu_of, omega_of
from ..validate import fail

__all__ = ["FormOptimizer"]


class FormOptimizer(torch.optim.Optimizer):
    """Adam or SGD (``optimizer``, ``lr``) on the scales ``(omega_h, mu_h)`` of the form (3.1) of
    ``model``'s heads, for a trainer that computes the full model's gradients (see the module).

    Its ``state_dict`` holds the inner optimiser's state and the scales, so a checkpoint resumes to
    the numbers of an uninterrupted run."""

    def __init__(self, model, optimizer: str, lr: float):
        if model.n_tasks != 1:
            fail("n_tasks", model.n_tasks, "1 (the form (3.1) has one label)")
        self.model = model
        d, D = model.d, model.D
        params = [model.Q, model.K, model.V, model.O]
        super().__init__(params, {"lr": lr})
        with torch.no_grad():
            KQ, OV = model.circuits()
            mask = model.head_mask
            self.omega = (omega_of(KQ, d) * mask).detach().clone()  # (R, H)
            self.mu = (mu_of(OV, d) * mask).detach().clone()  # (R, H)
            eye = torch.eye(D, dtype=model.K.dtype, device=model.K.device)
            model.K.copy_(eye * mask[..., None, None])
            model.V.zero_()
            model.V[..., D - 1, D - 1] = mask
        self.scale = math.sqrt(D)
        inner = [self.omega, self.mu]
        self.inner = (torch.optim.SGD(inner, lr=lr) if optimizer == "sgd" else torch.optim.Adam(inner, lr=lr))
        self._write()

    @torch.no_grad()
    def _write(self) -> None:
        """Set ``Q`` and ``O`` from the scales (the rest of both stays 0)."""
        m, d = self.model, self.model.d
        m.Q.zero_()
        idx = torch.arange(d, device=m.Q.device)
        m.Q[..., idx, idx] = (self.scale * self.omega)[..., None]
        m.O.zero_()
        m.O[..., 0, m.D - 1] = self.mu

    @torch.no_grad()
    def step(self, closure=None):
        """One step of the inner optimiser on the scales, from the full gradients of ``Q`` and
        ``O`` (missing gradients count as 0), then the form written back."""
        m, d = self.model, self.model.d
        idx = torch.arange(d, device=m.Q.device)
        gQ = m.Q.grad if m.Q.grad is not None else torch.zeros_like(m.Q)
        gO = m.O.grad if m.O.grad is not None else torch.zeros_like(m.O)
        self.omega.grad = self.scale * gQ[..., idx, idx].sum(-1) * m.head_mask
        self.mu.grad = gO[..., 0, m.D - 1] * m.head_mask
        self.inner.step()
        self._write()
        return None

    def state_dict(self) -> dict:
        return {"inner": self.inner.state_dict(), "omega": self.omega.detach().clone(),
                "mu": self.mu.detach().clone()}

    def load_state_dict(self, state: dict) -> None:
        with torch.no_grad():
            self.omega.copy_(state["omega"])
            self.mu.copy_(state["mu"])
        self.inner.load_state_dict(state["inner"])
        self._write()
