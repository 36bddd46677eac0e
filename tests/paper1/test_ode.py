"""Two-head gradient flow on (4.1): symmetry, linearisation, phase rules, solver, late-time law."""

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.linalg import expm

from icl_lib.paper1.approx_loss import ApproxLossConfig
from icl_lib.paper1 import ode
from icl_lib.paper1.ode import (FlowConfig, FlowResult, flow_estimate, flow_rhs, gradient_flow, growth_rate_fit,
                                initial_theta, predicted_t_phase1, valley_omega)


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


def test_the_limits_rivals_are_the_gaps_at_the_peak(flow5):
    sm = ode.phase_summary(flow5)
    peak = flow5.sample([flow5.t_peak])
    ss, ls = flow5.s_star, flow5.config.loss.loss_star
    assert sm["s_gap_rel_II"] == pytest.approx((ss - flow5.product(peak)[0]) / ss, rel=1e-12)
    assert sm["loss_gap_rel_II"] == pytest.approx((flow5.loss(peak)[0] - ls) / ls, rel=1e-12)
    ms = flow5.mu_star(peak)[0, 0]
    assert sm["mu_lag_II"] == pytest.approx((peak[0, 0] - ms) / ms, rel=1e-12)
    assert sm["s_gap_rel_II"] > sm["s_gap_rel"] > 0  # the flow gets closer after the peak


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


# ------------------------------------------------------------------------ chapter 4's tables
def _fake_result(cfg, t_phase1, t_peak, omega_peak, mu_peak, n_steps, nfev, seconds):
    """A FlowResult with given phase marks; its dense output returns mu_1 = mu_peak everywhere."""
    theta = np.zeros((n_steps, 4))
    return FlowResult(cfg, np.linspace(0, cfg.t_max, n_steps), theta, 2.0, t_phase1, t_peak, omega_peak,
                      np.array([t_peak]), np.array([-1]), nfev, 0, seconds, "ok",
                      lambda t: np.tile([[mu_peak], [-mu_peak], [omega_peak], [-omega_peak]], (1, len(t))))


@pytest.mark.parametrize("d, L, s2, t_max", [(5, 40, 0.1, 1e5), (10, 40, 0.1, 1e5), (3, 7, 0.5, 2e3)])
def test_predicted_s_gap_is_the_closed_form(d, L, s2, t_max):
    """(s* - 2 mu omega)/s* at t_max from the valley law, written out: s* (c d^3)^(1/3) t^(-2/3) / 8."""
    c = (1 + s2) / L
    ss = 1 / (1 + (1 + s2) * d / L)
    cfg = FlowConfig(loss=ApproxLossConfig(d, L, s2), t_max=t_max)
    assert ode.predicted_s_gap(cfg) == pytest.approx(ss * (c * d**3) ** (1 / 3) * t_max ** (-2 / 3) / 8, rel=1e-12)
    with pytest.raises(ValueError, match="^cfg="):
        ode.predicted_s_gap(cfg.loss)


def test_limits_table_holds_c_s_star_and_the_floor():
    flows = {5: FlowConfig(loss=ApproxLossConfig(5, 40, 0.1)), 10: FlowConfig(loss=ApproxLossConfig(10, 20, 0.5))}
    t = ode.limits_table(flows)
    assert list(t.columns) == ["d = 5", "d = 10"]
    assert t.loc["c = (1+sigma2)/L", "d = 5"] == pytest.approx(1.1 / 40)
    assert t.loc["s*", "d = 5"] == pytest.approx(1 / (1 + 1.1 * 5 / 40))
    assert t.loc["1 + sigma2 - s*", "d = 10"] == pytest.approx(1.5 - 1 / (1 + 1.5 * 10 / 20))


def test_phase_and_timing_tables_read_the_results():
    cfg = FlowConfig(loss=ApproxLossConfig(5, 40, 0.1), t_max=10.0)
    results = {5: _fake_result(cfg, 2.0, 3.5, 0.6, 0.7, 11, 123, 0.25),
               10: _fake_result(cfg, 1.5, 3.0, 0.4, 0.9, 7, 45, 0.5)}
    p = ode.phase_table(results)
    assert p["d = 5"].tolist() == [2.0, 3.5, 0.6, 11, 123, 0.25]
    assert p.loc["solver steps", "d = 10"] == 7 and p.loc["t_II (peak of omega)", "d = 10"] == 3.0
    t = ode.timing_table(results)
    assert t.loc["t_II - t_I", "d = 5"] == pytest.approx(1.5)
    assert t.loc["omega_max * sqrt(d)", "d = 10"] == pytest.approx(0.4 * 10**0.5)
    assert t.loc["s at the peak", "d = 5"] == pytest.approx(2 * 0.7 * 0.6)  # 2 mu_1 omega_1 at t_II


def test_residual_table_pairs_each_measurement_with_its_prediction():
    keys = ["s_end", "s_gap_rel", "pred_s_gap_rel", "loss_gap_rel", "pred_loss_gap_rel", "mu_lag", "pred_mu_lag",
            "gap_slope"]
    summaries = {5: {k: float(i) for i, k in enumerate(keys)}, 10: {k: -float(i) for i, k in enumerate(keys)}}
    flows = {5: FlowConfig(loss=ApproxLossConfig(5, 40, 0.1)), 10: FlowConfig(loss=ApproxLossConfig(10, 40, 0.1))}
    t = ode.residual_table(summaries, flows)
    assert list(t.index) == ["d = 5", "d = 10"]
    assert t.loc["d = 5"].tolist() == [0.0, 1 / (1 + 1.1 * 5 / 40), 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    assert t.loc["d = 10", "s*"] == pytest.approx(1 / (1 + 1.1 * 10 / 40))
    assert t.loc["d = 10", "log-log slope of the gap"] == -7.0


@pytest.mark.parametrize("d, L, s2, f", [(5, 40, 0.1, 0.9), (10, 40, 0.1, 0.9), (4, 32, 0.05, 0.8)])
def test_predicted_t_phase1_integrates_the_cubic_flow(d, L, s2, f):
    # the closed form against a numerical solution of the truncated flow dw/dt = 2 w - 4 k w^3,
    # stopped where its rate (dw/dt)/w falls to f times its start
    cfg = FlowConfig(loss=ApproxLossConfig(d, L, s2), eps=1e-3, phase1_fraction=f)
    k = 1 + (1 + s2) / L * d
    rate0 = 2 - 4 * k * 1e-6

    def ev(t, y):
        return 2 - 4 * k * y[0] ** 2 - f * rate0

    ev.terminal = True
    sol = solve_ivp(lambda t, y: [2 * y[0] - 4 * k * y[0] ** 3], (0, 20), [1e-3], events=ev,
                    rtol=1e-12, atol=1e-16, method="DOP853")
    assert predicted_t_phase1(cfg) == pytest.approx(sol.t_events[0][0], rel=1e-8)
    # the first-order law (the rival): pure exponential growth at rate 2 to the same w_I
    w_I = math.sqrt((1 - f) / (2 * k) + f * 1e-6)
    assert predicted_t_phase1(cfg, order=1) == pytest.approx(0.5 * math.log(w_I / 1e-3), rel=1e-12)
    assert predicted_t_phase1(cfg, order=1) < predicted_t_phase1(cfg)
    with pytest.raises(ValueError, match="^order="):
        predicted_t_phase1(cfg, order=2)


def test_predicted_t_phase1_is_close_to_the_full_flow_at_the_defaults():
    cfg = FlowConfig(loss=ApproxLossConfig(5, 40, 0.1), eps=1e-3, t_max=10.0)
    res = gradient_flow(cfg)
    assert abs(res.t_phase1 / predicted_t_phase1(cfg) - 1) < 1e-3  # the neglected terms: O(c d^3 w^6)
    with pytest.raises(ValueError, match="cfg="):
        predicted_t_phase1(ApproxLossConfig())


def test_flow_estimate_is_a_narrow_deterministic_interval():
    e = flow_estimate(-2.0)
    assert e.value == -2.0 and e.lo == pytest.approx(-2.0 - 2e-6) and e.hi == pytest.approx(-2.0 + 2e-6)
    assert flow_estimate(0.0).interval == (0.0, 0.0) and "deterministic" in e.what
