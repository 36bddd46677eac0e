"""Sampler moments within Monte Carlo error (paper 1, Section 2, B.3, B.4)."""

import math

import pytest
import torch

from icl_lib import DataConfig, TaskSampler, kms_covariance, sample_batch
from icl_lib.seeding import generator, make_generators


def test_isotropic_moments():
    data = DataConfig(d=5, L=10, sigma2=0.1)
    b = sample_batch(data, 40_000, 0)
    y = torch.cat([b.y.flatten(), b.yq.flatten()])
    n = y.numel() / 11  # labels inside a sequence share beta: count sequences for the error
    se = y.pow(2).std() / math.sqrt(n)
    assert abs(y.pow(2).mean() - 1.1) < 4 * se
    x = b.x.reshape(-1, 5)
    torch.testing.assert_close(x.T @ x / x.shape[0], torch.eye(5, dtype=torch.float64), atol=0.01, rtol=0)
    # beta ~ N(0, I/d)
    assert abs(b.beta.pow(2).sum(-1).mean() - 1.0) < 0.02
    # query token columns: y_q = beta^T x_q + noise
    resid = b.yq[:, 0] - (b.beta[:, 0] * b.xq).sum(-1)
    assert abs(resid.var() - 0.1) < 0.005


def test_anisotropic_covariance():
    data = DataConfig(d=4, L=20, rho=0.6)
    b = sample_batch(data, 20_000, 1)
    x = b.x.reshape(-1, 4)
    emp = x.T @ x / x.shape[0]
    torch.testing.assert_close(emp, kms_covariance(4, 0.6), atol=0.015, rtol=0)
    assert torch.allclose(kms_covariance(3, 0.5), torch.tensor([[1, .5, .25], [.5, 1, .5], [.25, .5, 1]],
                                                               dtype=torch.float64))
    explicit = DataConfig(d=2, L=5, covariance=[[2.0, 0.3], [0.3, 0.5]])
    xe = sample_batch(explicit, 20_000, 2).x.reshape(-1, 2)
    torch.testing.assert_close(xe.T @ xe / xe.shape[0], torch.tensor([[2.0, 0.3], [0.3, 0.5]], dtype=torch.float64),
                               atol=0.03, rtol=0)


def test_multitask_supports():
    data = DataConfig(d=6, L=8, supports=[[0, 1, 2, 3], [2, 3, 4, 5]])
    b = sample_batch(data, 20_000, 3)
    assert b.y.shape == (20_000, 8, 2) and data.D == 8
    assert torch.all(b.beta[:, 0, 4:] == 0) and torch.all(b.beta[:, 1, :2] == 0)
    assert abs(b.yq.pow(2).mean() - 1.1) < 0.03
    # task labels depend only on their support
    resid = b.yq[:, 1] - (b.beta[:, 1, 2:] * b.xq[:, 2:]).sum(-1)
    assert abs(resid.var() - 0.1) < 0.005


def test_fresh_and_reproducible():
    data = DataConfig(d=3, L=4)
    s = TaskSampler([data, data])
    g1 = [make_generators(5, "train", "cpu"), make_generators(6, "train", "cpu")]
    g2 = [make_generators(5, "train", "cpu"), make_generators(6, "train", "cpu")]
    a, a2 = s.sample(8, g1), s.sample(8, g1)
    b = s.sample(8, g2)
    assert not torch.equal(a.tokens, a2.tokens)  # fresh each call
    torch.testing.assert_close(a.tokens, b.tokens)  # same seeds, same numbers
    # a model's numbers do not depend on its ensemble neighbours
    alone = TaskSampler([data]).sample(8, [make_generators(6, "train", "cpu")])
    torch.testing.assert_close(alone.tokens[0], a.tokens[1])
    assert a.tokens.dtype == torch.float32 and a.tokens.device.type == "cpu"


def test_length_override():
    b = sample_batch(DataConfig(d=3, L=4), 5, 0, L=11)
    assert b.x.shape == (5, 11, 3) and b.L == 11


def test_sample_chunks_cover_n_from_one_generator():
    from icl_lib.sampling import sample_chunks

    data = DataConfig(d=3, L=4)
    parts = list(sample_chunks(data, 7, seed=3, chunk=3))
    assert [p.tokens.shape[0] for p in parts] == [3, 3, 1]
    gen = generator(3, "test")
    again = [sample_batch(data, m, gen) for m in (3, 3, 1)]
    for a, b in zip(parts, again):
        assert torch.equal(a.tokens, b.tokens) and torch.equal(a.beta, b.beta)
    one = next(sample_chunks(data, 3, seed=3))  # n <= chunk: the batch sample_batch draws for that seed
    assert torch.equal(one.tokens, sample_batch(data, 3, 3).tokens)


def test_derive_seed_names_independent_streams():
    """Purposes and indices give distinct seeds; the engine's run streams keep their codes 0-3
    (the model-code numerics); a bad purpose or seed is refused by name."""
    from icl_lib.seeding import derive_seed

    seeds = {derive_seed(0, p, *i) for p in ("init", "train", "val", "test", "test-loss", "mc-bayes")
             for i in ((), (1,), (2, 3))}
    assert len(seeds) == 6 * 3
    assert derive_seed(5, "test-loss") == derive_seed(5, "test-loss", 0) != derive_seed(6, "test-loss")
    import numpy as np

    legacy = np.random.SeedSequence([7, 1, 1]).generate_state(1, np.uint64)[0] >> np.uint64(1)
    assert derive_seed(7, "train", 1) == int(legacy)
    with pytest.raises(ValueError, match="purpose=''"):
        derive_seed(0, "")
    with pytest.raises(ValueError, match="seed=-1"):
        derive_seed(-1, "test")
