"""Two-head gradient flow on (4.1): symmetry, linearisation, phase rules, solver, late-time law."""

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.linalg import expm

from icl_lib.paper1.approx_loss import ApproxLossConfig
from icl_lib.paper1.ode import FlowConfig, flow_rhs, gradient_flow, growth_rate_fit, initial_theta, valley_omega


def reduced_rhs(t, y, d, L, s2):
    """(dm/dt, dw/dt) of the symmetric flow, written out by hand from the reduced loss
    1 + s2 - 4 m w + 4 m^2 w^2 + 4 c m^2 sinh(d w^2), with dm/dt = -(1/2) dL/dm."""
    m, w = y
    c = (1 + s2) / L
    return [2 * w - 4 * m * w**2 - 4 * c * m * math.sinh(d * w**2),
            2 * m - 4 * m**2 * w - 4 * c * d * m**2 * w * math.cosh(d * w**2)]


@pytest.fixture(scope="module")
def flow5():
    return gradient_flow(FlowConfig(loss=ApproxLossConfig(5, 40, 0.1), eps=1e-3, t_max=50.0))


def test_initialisation_definition_d1():
    np.testing.assert_array_equal(initial_theta(1e-3), [1e-3, -1e-3, 1e-3, -1e-3])


def test_symmetry_is_preserved_and_matches_the_reduced_ode(flow5):
    th = flow5.theta
    assert np.abs(th[:, 0] + th[:, 1]).max() < 1e-9 * np.abs(th[:, 0]).max()
    assert np.abs(th[:, 2] + th[:, 3]).max() < 1e-9 * np.abs(th[:, 2]).max()
    ref = solve_ivp(reduced_rhs, (0, 50.0), [1e-3, 1e-3], method="DOP853", rtol=1e-12, atol=1e-14,
                    dense_output=True, args=(5, 40, 0.1))
    ts = np.array([1.0, 3.0, 3.8, 5.0, 20.0, 50.0])
    np.testing.assert_allclose(flow5.sample(ts)[:, [0, 2]], ref.sol(ts).T, rtol=1e-6, atol=1e-10)


@pytest.mark.parametrize("d, L, s2", [(5, 40, 0.1), (10, 40, 0.1), (4, 8, 1.0)])
def test_small_init_growth_matches_linearisation(d, L, s2):
    # Near theta = 0, exp(d omega omega^T) = 1 1^T + O(omega^2), so (4.1)'s flow linearises to
    #   dmu/dt = 2 omega - 2 c 1 1^T mu,  domega/dt = 2 mu,   c = (1 + s2)/L.
    # On the symmetric set 1^T mu = 0: the eigenvalue is 2, eigenvector mu = omega.
    c = (1 + s2) / L
    ones = np.ones((2, 2))
    J = np.block([[-2 * c * ones, 2 * np.eye(2)], [2 * np.eye(2), np.zeros((2, 2))]])
    eps, T = 1e-6, 2.0
    res = gradient_flow(FlowConfig(loss=ApproxLossConfig(d, L, s2), eps=eps, t_max=T))
    ts = np.linspace(0.2, T, 10)
    rate, r2 = growth_rate_fit(ts, res.sample(ts)[:, 2])
    assert abs(rate - 2.0) < 1e-4 and r2 > 1 - 1e-10
    assert abs(res.rate0 - 2.0) < 1e-8
    # a generic (non-symmetric) small start follows exp(J t) theta_0, which tests the c-term
    theta0 = eps * np.array([1.0, 0.3, -0.5, 0.8])
    sol = solve_ivp(lambda t, y: flow_rhs(y, ApproxLossConfig(d, L, s2)), (0, T), theta0, method="Radau",
                    rtol=1e-11, atol=1e-16)
    np.testing.assert_allclose(sol.y[:, -1], expm(J * T) @ theta0, rtol=1e-5)


def test_phase_rules_located_correctly(flow5):
    cfg = flow5.config
    # end of Phase I: growth rate of log omega equals the stated fraction of its initial rate
    m, w = flow5.sample(flow5.t_phase1)[0, [0, 2]]
    rate = reduced_rhs(0, [m, w], 5, 40, 0.1)[1] / w
    assert abs(rate - cfg.phase1_fraction * flow5.rate0) < 1e-6
    ts = np.linspace(0, flow5.t_phase1, 200)[1:]
    th = flow5.sample(ts)
    rates = np.array([reduced_rhs(0, [a, b], 5, 40, 0.1)[1] / b for a, b in th[:, [0, 2]]])
    assert (rates > cfg.phase1_fraction * flow5.rate0 - 1e-9).all()
    # end of Phase II: the maximum of omega over a fine grid
    grid = np.linspace(0, 50, 200_001)
    w_grid = flow5.sample(grid)[:, 2]
    assert abs(grid[w_grid.argmax()] - flow5.t_peak) < 1e-3
    assert abs(w_grid.max() - flow5.omega_peak) < 1e-9
    assert len(flow5.t_dw_zero) == 1 and flow5.dw_zero_dir.tolist() == [-1]
    assert 0 < flow5.t_phase1 < flow5.t_peak


def test_radau_agrees_with_an_explicit_reference():
    res = gradient_flow(FlowConfig(loss=ApproxLossConfig(10, 40, 0.1), eps=1e-3, t_max=60.0))
    ref = solve_ivp(reduced_rhs, (0, 60.0), [1e-3, 1e-3], method="DOP853", rtol=1e-12, atol=1e-14,
                    args=(10, 40, 0.1))
    np.testing.assert_allclose(res.theta[-1, [0, 2]], ref.y[:, -1], rtol=1e-7)
    for method in ("BDF", "LSODA"):
        other = gradient_flow(FlowConfig(loss=ApproxLossConfig(10, 40, 0.1), t_max=60.0, method=method))
        assert abs(other.t_peak - res.t_peak) < 1e-6 and abs(other.t_phase1 - res.t_phase1) < 1e-6


def test_late_time_law_of_the_valley():
    res = gradient_flow(FlowConfig(loss=ApproxLossConfig(5, 40, 0.1), t_max=1e4))
    assert abs(res.omega[-1, 0] / valley_omega(1e4, res.config.loss) - 1) < 0.01


@pytest.mark.parametrize(
    "kwargs, name",
    [({"eps": 0.0}, "eps"), ({"eps": 0.5}, "eps"), ({"t_max": -1.0}, "t_max"), ({"method": "RK45"}, "method"),
     ({"phase1_fraction": 1.0}, "phase1_fraction"), ({"rtol": 0.1}, "rtol"), ({"loss": {"d": 5}}, "loss")],
)
def test_flow_config_validation(kwargs, name):
    with pytest.raises(ValueError, match=rf"^{name}=.* is invalid: accepted"):
        FlowConfig(**kwargs)
