"""The model against a plain per-sequence, per-head loop (paper 1, eq. 2.2) and the (3.2) predictor."""

import math

import pytest
import torch

from icl_lib import AttentionEnsemble, DataConfig, kernel_regression_predict, mu_of, omega_of, sample_batch
from icl_lib.sampling import Batch
from icl_lib.seeding import make_generators


def loop_forward(Q, K, V, O, x, y, xq, attention="softmax", norm_length=None):
    """Token-wise reference: project every token with Q, K, V, one sequence and one head at a time."""
    B, L, d = x.shape
    N = y.shape[-1]
    H, D = Q.shape[0], d + N
    out = torch.zeros(B, N, dtype=x.dtype)
    for b in range(B):
        Zc = torch.cat([x[b], y[b]], -1)  # (L, D)
        zq = torch.cat([xq[b], torch.zeros(N, dtype=x.dtype)])  # query token (x_q, 0)
        for h in range(H):
            q = Q[h] @ zq
            scores = torch.stack([(K[h] @ Zc[i]) @ q for i in range(L)]) / math.sqrt(D)
            if attention == "softmax":
                a = torch.exp(scores - scores.max())
                a = a / a.sum()
            elif attention == "linear":
                a = scores / norm_length
            else:
                f = {"one_plus_tanh": 1 + torch.tanh(scores), "quadratic": 1 + scores + scores**2 / 2,
                     "square": (1 + scores) ** 2}[attention]
                a = f / f.sum()
            values = torch.stack([V[h] @ Zc[i] for i in range(L)])  # (L, D)
            out[b] += O[h] @ (a[:, None] * values).sum(0)
    return out


@pytest.mark.parametrize("attention", ["softmax", "linear", "one_plus_tanh", "quadratic", "square"])
@pytest.mark.parametrize("data", [DataConfig(d=3, L=7), DataConfig(d=4, L=6, rho=0.5, supports=[[0, 1], [1, 2, 3]])])
def test_forward_matches_token_loop(attention, data, gen):
    heads = [2, 3]
    m = AttentionEnsemble(heads, data.d, n_tasks=data.n_tasks, attention=attention, norm_length=data.L,
                          dtype=torch.float64)
    m.reset_parameters([torch.Generator().manual_seed(k) for k in range(2)], init_scale=2.0)
    b = sample_batch(data, 5, gen)
    pred = m(b)  # shared batch: (R, B, N)
    assert pred.shape == (2, 5, data.n_tasks)
    for r, H in enumerate(heads):
        ref = loop_forward(m.Q[r, :H], m.K[r, :H], m.V[r, :H], m.O[r, :H], b.x, b.y, b.xq, attention, data.L)
        torch.testing.assert_close(pred[r], ref, rtol=1e-10, atol=1e-12)


def test_ensemble_batch_per_model(gen):
    data = DataConfig(d=3, L=5)
    m = AttentionEnsemble([1, 2], 3, dtype=torch.float64)
    m.reset_parameters([torch.Generator().manual_seed(k) for k in range(2)])
    b0, b1 = sample_batch(data, 4, 1), sample_batch(data, 4, 2)
    both = Batch(torch.stack([b0.tokens, b1.tokens]), torch.stack([b0.beta, b1.beta]))
    pred = m(both)
    torch.testing.assert_close(pred[0], m(b0)[0])
    torch.testing.assert_close(pred[1], m(b1)[1])


def test_shard_views_the_ensemble():
    m = AttentionEnsemble([1, 3, 2], 3, dtype=torch.float64)
    m.reset_parameters([torch.Generator().manual_seed(k) for k in range(3)])
    sh = m.shard(1, 3)
    assert sh.R == 2 and sh.heads == [3, 2] and sh.Q.shape == (2, 3, 4, 4) and sh.Q.is_leaf
    b = sample_batch(DataConfig(d=3, L=5), 6, 0)
    torch.testing.assert_close(sh(b), m(b)[1:], rtol=0, atol=0)
    with torch.no_grad():
        m.Q.add_(1.0)  # an optimizer step on the whole ensemble moves the shard
    torch.testing.assert_close(sh.Q, m.Q[1:], rtol=0, atol=0)
    sh.loss(b).sum().backward()
    assert m.Q.grad is None and torch.all(sh.Q.grad[1, 2:] == 0)  # the shard's own leaves; masks kept
    with pytest.raises(ValueError, match="stop"):
        m.shard(2, 2)


def test_masked_heads_are_inert():
    m = AttentionEnsemble([1, 3], 3, dtype=torch.float64)
    m.reset_parameters([torch.Generator().manual_seed(k) for k in range(2)])
    assert torch.all(m.Q[0, 1:] == 0) and torch.all(m.O[0, 1:] == 0)
    b = sample_batch(DataConfig(d=3, L=5), 8, 0)
    m.loss(b).sum().backward()
    for p in (m.Q, m.K, m.V, m.O):
        assert torch.all(p.grad[0, 1:] == 0)


def test_initialisation_is_pytorch_default_and_independent_of_ensemble():
    D = 6
    gens = lambda: make_generators(7, "init", "cpu", streams=1)  # noqa: E731
    alone = AttentionEnsemble(2, 5, dtype=torch.float64).reset_parameters(gens())
    paired = AttentionEnsemble([4, 2], 5, dtype=torch.float64).reset_parameters(
        [torch.Generator().manual_seed(1), gens()[0]])
    torch.testing.assert_close(alone.Q[0], paired.Q[1, :2])
    big = AttentionEnsemble(64, 5, dtype=torch.float64).reset_parameters(gens())
    bound = 1 / math.sqrt(D)
    assert big.Q.abs().max() <= bound
    # U(-b, b) has variance b^2 / 3
    assert abs(big.Q.var().item() - bound**2 / 3) < 0.05 * bound**2 / 3


def test_hand_set_circuits_give_kernel_regression(gen):
    """KQ = [[omega I, 0], [0, 0]], OV = (0, mu) is exactly the predictor (3.2)."""
    d, H = 5, 3
    D = d + 1
    omega = torch.tensor([0.3, -0.2, 0.05], dtype=torch.float64)
    mu = torch.tensor([1.5, -0.7, 0.2], dtype=torch.float64)
    KQ = torch.zeros(1, H, D, D, dtype=torch.float64)
    KQ[0, :, :d, :d] = omega[:, None, None] * torch.eye(d, dtype=torch.float64)
    OV = torch.zeros(1, H, 1, D, dtype=torch.float64)
    OV[0, :, 0, d] = mu
    m = AttentionEnsemble.from_circuits(KQ, OV, d)
    b = sample_batch(DataConfig(d=d, L=40), 64, gen)
    torch.testing.assert_close(m(b)[0, :, 0], kernel_regression_predict(omega, mu, b.x, b.y, b.xq), rtol=1e-12,
                               atol=1e-12)
    # and the ensemble form of (3.2)
    torch.testing.assert_close(kernel_regression_predict(omega[None], mu[None], b.x, b.y, b.xq)[0],
                               kernel_regression_predict(omega, mu, b.x, b.y, b.xq))


def test_circuit_extraction_round_trips(gen):
    R, H, d, N = 2, 3, 4, 2
    D = d + N
    KQ = torch.randn(R, H, D, D, dtype=torch.float64, generator=gen)
    OV = torch.randn(R, H, N, D, dtype=torch.float64, generator=gen)
    m = AttentionEnsemble.from_circuits(KQ, OV, d)
    KQ2, OV2 = m.circuits()
    torch.testing.assert_close(KQ2, KQ)
    torch.testing.assert_close(OV2, OV)
    torch.testing.assert_close(omega_of(KQ, d), KQ[..., :d, :d].diagonal(dim1=-2, dim2=-1).mean(-1))
    torch.testing.assert_close(mu_of(OV, d, task=1), OV[..., 1, d + 1])
    # circuits computed from random Q, K, V, O equal K^T Q / sqrt(D) and O V
    m.reset_parameters([torch.Generator().manual_seed(k) for k in range(R)])
    KQ3, OV3 = m.circuits()
    torch.testing.assert_close(KQ3[1, 2], m.K[1, 2].T @ m.Q[1, 2] / math.sqrt(D))
    torch.testing.assert_close(OV3[0, 1], m.O[0, 1] @ m.V[0, 1])


def test_activation_first_order_coefficients():
    """c_f of paper 1, B.2 against f'(0) / f(0) by autograd, and every normalised kind is listed."""
    from icl_lib.config import ATTENTION_KINDS
    from icl_lib.models import ACTIVATIONS

    assert set(ACTIVATIONS) == set(ATTENTION_KINDS) - {"linear"}
    for name, (f, c_f) in ACTIVATIONS.items():
        s = torch.zeros((), dtype=torch.float64, requires_grad=True)
        v = f(s)
        (g,) = torch.autograd.grad(v, s)
        assert abs(float(g / v.detach()) - c_f) < 1e-12, name


# --------------------------------------------------------------------------- the authors' layout
class AuthorsAttention(torch.nn.Module):
    """Paper 1's model as its public code lays it out: the H heads' queries, keys and values are
    three ``nn.Linear(D, D H)`` and the output is one ``nn.Linear(D H, N)`` (PyTorch's default
    initialisation, no bias); the query attends to the L context tokens, scores divided by sqrt(D)."""

    def __init__(self, H: int, D: int, N: int = 1):
        super().__init__()
        self.H, self.D = H, D
        self.q, self.k, self.v = (torch.nn.Linear(D, D * H, bias=False) for _ in range(3))
        self.o = torch.nn.Linear(D * H, N, bias=False)

    def forward(self, Z, zq):  # Z (B, L, D) context tokens, zq (B, D) the query token (x_q, 0)
        B, L, _ = Z.shape
        q = self.q(zq).view(B, self.H, self.D)  # (B, H, D)
        k = self.k(Z).view(B, L, self.H, self.D)  # (B, L, H, D)
        v = self.v(Z).view(B, L, self.H, self.D)
        a = torch.softmax(torch.einsum("blhd,bhd->bhl", k, q) / self.D**0.5, dim=-1)  # (B, H, L)
        heads = torch.einsum("bhl,blhd->bhd", a, v).reshape(B, self.H * self.D)
        return self.o(heads)  # (B, N)

    def transplant(self, model: AttentionEnsemble) -> AttentionEnsemble:
        """Copy the weights into ``model`` (an ensemble of one with H heads)."""
        D = self.D
        with torch.no_grad():
            for h in range(self.H):
                rows = slice(h * D, (h + 1) * D)
                model.Q[0, h] = self.q.weight[rows]
                model.K[0, h] = self.k.weight[rows]
                model.V[0, h] = self.v.weight[rows]
                model.O[0, h] = self.o.weight[:, rows]
        return model


@pytest.mark.parametrize("H, N", [(1, 1), (3, 1), (2, 2)])
def test_forward_equals_the_authors_layout(H, N):
    d = 4
    D = d + N
    torch.manual_seed(H)
    ref = AuthorsAttention(H, D, N).double()
    data = DataConfig(d=d, L=9) if N == 1 else DataConfig(d=d, L=9, supports=[[0, 1], [1, 2, 3]])
    model = ref.transplant(AttentionEnsemble(H, d, n_tasks=N, dtype=torch.float64))
    b = sample_batch(data, 32, 0)
    Z = b.context.transpose(-1, -2)  # (B, L, D)
    zq = torch.cat([b.xq, torch.zeros(32, N, dtype=torch.float64)], -1)
    torch.testing.assert_close(model(b)[0], ref(Z, zq), rtol=1e-12, atol=1e-14)


def test_initialisation_has_the_authors_distributions():
    """init="authors" draws Q, K, V and O as the authors' nn.Linear layers do (two-sample KS tests
    against PyTorch's own initialisation of that layout, over many seeds), so mu_h starts with
    std 1/(3 sqrt(D H)) (0.096 for H = 2, d = 5) instead of the per-head 1/(3 sqrt(D)) (0.136)."""
    from scipy import stats

    d, H = 5, 2
    D = d + 1
    seeds = 300
    model = AttentionEnsemble([H] * seeds, d, dtype=torch.float64)
    gens = [make_generators(s, "init", "cpu", streams=1)[0] for s in range(seeds)]
    model.reset_parameters(gens)  # the default: the authors' layout
    torch.manual_seed(0)
    refs = [AuthorsAttention(H, D) for _ in range(seeds)]
    for name, ours, theirs in (("Q", model.Q, [r.q.weight for r in refs]), ("V", model.V, [r.v.weight for r in refs]),
                               ("O", model.O, [r.o.weight for r in refs])):
        a = ours.detach().reshape(-1).numpy()
        b = torch.cat([t.detach().reshape(-1) for t in theirs]).double().numpy()
        assert stats.ks_2samp(a, b).pvalue > 1e-3, name
    with torch.no_grad():
        mu = mu_of(model.circuits()[1], d)  # (seeds, H)
        assert abs(float(mu.std()) - 1 / (3 * (D * H) ** 0.5)) < 0.01
        gens = [make_generators(s, "init", "cpu", streams=1)[0] for s in range(seeds)]
        per_head = AttentionEnsemble([H] * seeds, d, dtype=torch.float64).reset_parameters(gens, init="per-head")
        assert abs(float(mu_of(per_head.circuits()[1], d).std()) - 1 / (3 * D**0.5)) < 0.012
    assert torch.equal(per_head.Q, model.Q)  # the same draws: only O's scale differs
    with pytest.raises(ValueError, match="init='other'"):
        per_head.reset_parameters(gens, init="other")
