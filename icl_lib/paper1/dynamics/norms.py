"""The attention-probability norm ``||softmax(omega X x_q)||_2`` and its large-L law (paper 1, C.4, Figure 19).

* :func:`attention_norms`, :func:`attention_norm_lln` -- draws of the norm and the large-L law of
  its quantiles (derived in chapter 3, not in the paper);
* :func:`attention_norm_settings`, :func:`attention_norm_study` -- the three panels of Figure 19;
* :func:`strictly_decreasing`, :func:`norm_statistics`, :func:`norm_estimates` -- chapter 3's values
  and claims on the norms.

Used by chapter 3.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch
from scipy import stats

from ...seeding import derive_seed, generator
from ...stats import Estimate, median_ci
from ...validate import check_float, check_int

__all__ = [
    "attention_norms",
    "attention_norm_lln",
    "attention_norm_settings",
    "attention_norm_study",
    "strictly_decreasing",
    "norm_statistics",
    "norm_estimates",
]


@torch.no_grad()
def attention_norms(d: int, L: int, omega: float, n: int = 4000, seed: int = 0, chunk: int | None = None) -> torch.Tensor:
    """``||softmax(omega X x_q)||_2`` for ``n`` draws of ``x_1..x_L, x_q ~ N(0, I_d)``: shape ``(n,)``.

    The attention-probability norm of paper 1, C.4 (Figure 19): small when attention spreads
    over many tokens, 1 when one token takes it all.  Chapter 3.
    """
    d, L, n = check_int("d", d, 1), check_int("L", L, 1), check_int("n", n, 1)
    omega = check_float("omega", omega)
    chunk = max(1, min(n, 4_000_000 // (L * d))) if chunk is None else check_int("chunk", chunk, 1)
    gen = generator(seed, "attention-norms")
    out = []
    done = 0
    while done < n:
        b = min(chunk, n - done)
        x = torch.randn(b, L, d, generator=gen, dtype=torch.float64)  # (b, L, d)
        xq = torch.randn(b, d, generator=gen, dtype=torch.float64)  # (b, d)
        p = torch.softmax(omega * (x @ xq[..., None])[..., 0], dim=-1)  # (b, L)
        out.append(p.norm(dim=-1))
        done += b
    return torch.cat(out)


def attention_norm_lln(d: int, L: int, omega: float, q: float = 0.5) -> float:
    """Large-L law of the ``q``-quantile of ``||softmax(omega X x_q)||_2`` (derived here, not in the paper).

    Given ``x_q``, the scores ``omega x_i^T x_q`` are i.i.d. ``N(0, omega^2 r^2)`` with
    ``r = ||x_q||``, so by the law of large numbers
    ``||p||^2 = sum e^{2 s_i} / (sum e^{s_i})^2 ~ E e^{2s} / (L (E e^s)^2) = exp(omega^2 r^2) / L``.
    The norm is increasing in ``r^2 ~ chi^2_d``, so its ``q``-quantile is
    ``sqrt(exp(omega^2 chi2_d.ppf(q)) / L)``.  Valid when ``L`` is large against
    ``exp(omega^2 r^2)``.  Chapter 3.
    """
    d, L = check_int("d", d, 1), check_int("L", L, 1)
    q = check_float("q", q, 0.0, 1.0, lo_open=True, hi_open=True)
    return math.sqrt(math.exp(omega**2 * stats.chi2.ppf(q, d)) / L)


# ------------------------------------------------------------------------------- Figure 19
NORM_L_FIXED = (10, 40, 160, 640, 2560)  # context lengths of panel (a), d fixed
NORM_L_PROP = (40, 80, 160, 320, 640)  # context lengths of panels (b) and (c), d/L fixed


def attention_norm_settings(d: int, L: int, omega: float) -> dict[str, list[tuple[str, int, int, float]]]:
    """The settings ``(label, d, L, omega)`` of the three panels of paper 1, Figure 19: (a) the
    chapter's ``d`` at the lengths ``NORM_L_FIXED``; (b) the ratio ``d/L`` at ``NORM_L_PROP`` with
    ``omega``; (c) the same with ``omega / sqrt(d)``.  Chapter 3."""
    d_prop = [max(1, round(Lp * d / L)) for Lp in NORM_L_PROP]
    return {
        "a": [(f"L={Lp}", d, Lp, omega) for Lp in NORM_L_FIXED],
        "b": [(f"L={Lp}, d={dp}", dp, Lp, omega) for Lp, dp in zip(NORM_L_PROP, d_prop)],
        "c": [(f"L={Lp}, d={dp}", dp, Lp, omega / math.sqrt(dp)) for Lp, dp in zip(NORM_L_PROP, d_prop)],
    }


def attention_norm_study(d: int, L: int, omega: float, draws: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Paper 1, Figure 19: ``draws`` attention-probability norms (:func:`attention_norms`) for every
    setting of :func:`attention_norm_settings`, each from ``derive_seed(seed, "attention-norms", k,
    ord(panel))``.  Returns the draws (one row each: ``panel, setting, L, d, omega, norm``) and
    their statistics per ``(panel, L)``: ``d``, ``omega``, ``median``, ``q90`` and, in panel (c),
    the large-L law of the median (:func:`attention_norm_lln`).  Chapter 3."""
    rows = []
    for panel, cases in attention_norm_settings(d, L, omega).items():
        for k, (label, dd, LL, om) in enumerate(cases):
            norms = attention_norms(dd, LL, om, n=draws, seed=derive_seed(seed, "attention-norms", k, ord(panel)))
            rows += [{"panel": panel, "setting": label, "L": LL, "d": dd, "omega": om, "norm": float(v)} for v in norms]
    draws_df = pd.DataFrame(rows)
    stats_df = draws_df.groupby(["panel", "L"]).agg(
        d=("d", "first"), omega=("omega", "first"), median=("norm", "median"), q90=("norm", lambda v: v.quantile(0.9))
    )
    stats_df["law median"] = [
        attention_norm_lln(int(r.d), L_, r.omega) if p == "c" else np.nan for (p, L_), r in stats_df.iterrows()
    ]
    return draws_df, stats_df


def strictly_decreasing(values) -> bool:
    """Whether ``values`` decrease strictly from each entry to the next."""
    return bool(np.all(np.diff(np.asarray(values)) < 0))


def norm_statistics(stats_df: pd.DataFrame) -> dict:
    """The values of chapter 3's norm claims from :func:`attention_norm_study`'s statistics: per
    panel ``p`` in ``a, b, c``, the median at the smallest and largest ``L`` (``p_first``,
    ``p_last``) and whether median and 90% quantile both decrease strictly (``p_decreasing``);
    and ``norm_rel_law = |median / law - 1|`` at the largest ``L`` of panel (c).  Figure 19."""
    out = {}
    for p in "abc":
        s = stats_df.loc[p]
        out[f"{p}_first"], out[f"{p}_last"] = float(s["median"].iloc[0]), float(s["median"].iloc[-1])
        out[f"{p}_decreasing"] = strictly_decreasing(s["median"]) and strictly_decreasing(s["q90"])
    s = stats_df.loc["c"]
    out["norm_rel_law"] = float(abs(s["median"].iloc[-1] / s["law median"].iloc[-1] - 1))
    return out


def norm_estimates(draws: pd.DataFrame, stats_df: pd.DataFrame) -> dict:
    """The estimates of chapter 3's norm claims (Figure 19) from :func:`attention_norm_study`:

    * ``a_ratio``: panel (a)'s median at the largest ``L`` over that at the smallest, with the
      interval of the two order-statistic intervals (lower: low over high);
    * ``c_law``: panel (c)'s median at the largest ``L`` over the large-``L`` law, minus 1, with
      the median's order-statistic interval;
    * ``c_rival``: the same ratio if the norm did not concentrate (the median at the smallest
      ``L`` over the law at the largest, minus 1): the rival of ``c_law``.
    """
    out = {}
    a = draws[draws.panel == "a"]
    lo_L, hi_L = a.L.min(), a.L.max()
    m0, m1 = median_ci(a[a.L == lo_L]["norm"]), median_ci(a[a.L == hi_L]["norm"])
    out["a_ratio"] = Estimate(m1.value / m0.value, m1.lo / m0.hi, m1.hi / m0.lo,
                              what="median ratio, order-statistic intervals")
    c = draws[draws.panel == "c"]
    cl = c[c.L == c.L.max()]
    law = float(stats_df.loc[("c", int(cl.L.iloc[0])), "law median"])
    mc = median_ci(cl["norm"])
    out["c_law"] = Estimate(mc.value / law - 1, mc.lo / law - 1, mc.hi / law - 1,
                            what="median / law - 1, order-statistic interval")
    out["c_rival"] = float(c[c.L == c.L.min()]["norm"].median() / law - 1)
    return out
