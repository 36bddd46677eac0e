"""How a chapter's declared claim is read when it is decided (:class:`~icl_lib.claims.report.Claims`).

For each decision: the chapter's report of a non-reproduction in this build's profile
(:func:`_known_in`), where the rule comes from (:func:`_source`), the population and who it leaves
out, the declared rivals and their values (:func:`_rivals`), whether an equivalence's margin
follows the margin rule given its rival (:func:`_margin`), the whole population's figure beside a
subpopulation's (:func:`_whole`), what a fraction's number of units can decide at all
(:func:`_design`), the verdicts under the reading alternatives of the book's definitions
(:func:`_reading_alternatives`, :mod:`icl_lib.definitions`), and, for an undecided claim, which way
it leans and the size that would decide it (:func:`_lean`, :func:`_decide_text`).
"""

from __future__ import annotations

import math

from ..definitions import DEFINITIONS, active, label
from .rules import Above, Rule, _All, format_value
from .spec import PROFILES

__all__: list[str] = []  # helpers of Claims; the public API is icl_lib.claims


def _known_of(spec, cid: str, fields: dict) -> str:
    """The chapter's report of where claim ``cid`` does not reproduce: its declaration's text, or
    for a claim of several ids the text given for this one."""
    known = spec.known_failure
    if isinstance(known, dict):
        return known.get(cid, "")
    return known.format(**fields) if known else ""


def _known_in(spec, cid: str, fields: dict, profile: str) -> str:
    """:func:`_known_of` for this build's ``profile``: a report given per profile (``{"paper":
    text}``, or ``{id: {"paper": text}}`` for a claim of several ids) holds in that profile only."""
    known = spec.known_failure
    if isinstance(known, dict) and known and set(known) <= set(PROFILES):
        return known.get(profile, "")
    text = known.get(cid, "") if isinstance(known, dict) else None
    if isinstance(text, dict):
        return text.get(profile, "")
    return _known_of(spec, cid, fields)


def _source(spec) -> str:
    """Where the rule comes from: the words-to-rules entry, or why it departs from it."""
    if spec.departs:
        return f"departs from the table{' (' + spec.word + ')' if spec.word else ''}: {' '.join(spec.departs.split())}"
    return f"the table: {spec.word}" if spec.word else ""


def _population(spec, left_out: str) -> str:
    text = spec.population
    return f"{text}; left out: {' '.join(left_out.split())}" if left_out.strip() else text


def _names(spec) -> tuple:
    return (spec.rival,) if isinstance(spec.rival, str) and spec.rival else tuple(spec.rival or ())


def _rivals(spec, key: str, value) -> dict:
    """``{name: value}`` of the declared rivals whose values the chapter passed."""
    if value is None:
        return {}
    names = _names(spec)
    values = value if isinstance(value, dict) else {names[0] if names else "": value}
    unknown = [k for k in values if k not in names]
    if unknown:
        raise ValueError(f"rival={value!r} is invalid: claim {key!r} declares the rivals {list(names)}")
    return {k: float(v) for k, v in values.items()}


def _rival(spec, value) -> str:
    names = _names(spec)
    if not names:
        return ""
    if value is None:
        return ", ".join(names)
    values = value if isinstance(value, dict) else {names[0]: value}
    return ", ".join(f"{k} = {format_value(float(values[k]))}" if k in values else k for k in names)


def _with_threshold(rule: Rule, old: float, new: float) -> Rule:
    """``rule`` with every ``Above(old)`` part read as ``Above(new)``."""
    if isinstance(rule, _All):
        parts = [_with_threshold(r, old, new) for r in rule.rules]
        out = parts[0]
        for r in parts[1:]:
            out = out & r
        return out
    return Above(new) if isinstance(rule, Above) and rule.t == old else rule


def _reading_alternatives(spec, rule: Rule, estimate) -> dict:
    """``{definition=alternative: verdict}`` for the reading definitions of ``spec``'s entry (the
    0.9 of "consistently", the 0.5 of a one-run observation), decided on the same estimate."""
    from .words import WORDS

    entry = WORDS.get(spec.word)
    if entry is None or not entry.definition or spec.departs.strip():
        return {}
    d = DEFINITIONS[entry.definition]
    return {label(d.key, alt): _with_threshold(rule, d.value, alt).verdict(estimate) for alt in d.alternatives}


def _claimed(rule: Rule) -> tuple[float, float] | None:
    """``(claimed value, half-width)`` of an equivalence or window rule (one-sided ``[-inf, b]``:
    the claimed value 0 of a spread, half-width ``b``)."""
    parts = rule.rules if isinstance(rule, _All) else (rule,)
    for r in parts:
        a, b = getattr(r, "a", None), getattr(r, "b", None)
        if a is None or type(r).__name__ not in ("Equivalent", "Within"):
            continue
        if math.isinf(a):
            return 0.0, b
        return (a + b) / 2, (b - a) / 2
    return None


def _margin(spec, rivals: dict) -> str:
    """For a claim read as an equivalence with its rivals' values: whether its margin follows the
    margin rule (:data:`~icl_lib.claims.words.MARGIN_RULE`), or why it departs."""
    if not spec.reads_equivalence or not rivals or isinstance(spec.rule, str):
        return ""
    claimed = _claimed(spec.rule)
    if claimed is None:
        return ""
    c, h = claimed
    name, v = min(rivals.items(), key=lambda kv: abs(kv[1] - c))
    dist = abs(v - c)
    if h <= dist / 2:
        return f"follows the margin rule: half-width {format_value(h)}, nearest rival {name} at {format_value(dist)}"
    if spec.margin_departs.strip():
        return f"departs from the margin rule: {' '.join(spec.margin_departs.split())}"
    return (f"wider than the margin rule: half-width {format_value(h)}, nearest rival {name} at "
            f"{format_value(dist)} (the interval must exclude it)")


def _whole(whole) -> str:
    """The whole population's figure of a claim decided on a subpopulation, as text."""
    if whole is None:
        return ""
    if isinstance(whole, str):
        return " ".join(whole.split())
    if hasattr(whole, "interval") and hasattr(whole, "value"):
        lo, hi = whole.interval
        return f"{format_value(whole.value)} [{format_value(lo)},{format_value(hi)}]"
    return format_value(whole)


def _design(rule, estimate, n: int | None, unit: str) -> str:
    """The best a fraction's ``n`` can show (every unit agreeing), against the rule: whether the
    design can decide the claim at all."""
    if (not n or estimate.at_size is None or not 0.0 <= estimate.value <= 1.0 or isinstance(rule, str)
            or "order-statistic" in estimate.what):  # a median, not a fraction
        return ""
    from ..stats import proportion_ci

    best = proportion_ci(n, n, level=estimate.level)
    worst = proportion_ci(0, n, level=estimate.level)
    can_pass = rule.verdict(best) == "PASS" or rule.verdict(worst) == "PASS"
    bound = best.interval[0] if rule.verdict(best) == "PASS" or not can_pass else worst.interval[1]
    if can_pass:
        return f"{n} {unit} can decide it: all {n} agreeing give an interval bound of {format_value(bound)}"
    return (f"{n} {unit} cannot decide a PASS: all {n} agreeing give an interval bound of "
            f"{format_value(best.interval[0])}")


def _defs() -> dict:
    """The measurement definitions this run uses away from their own (``{}`` in force)."""
    return {k: v for k, v in active().items()}


def _lean(rule, estimate) -> str:
    """The verdict the point estimate alone gives (``""`` when it sits on the rule's boundary)."""
    from ..stats import Estimate

    point = Estimate(estimate.value, estimate.value, estimate.value, estimate.level)
    v = rule.verdict(point)
    return v if v in ("PASS", "FAIL") else ""


def _extrapolates(estimate) -> bool:
    """Whether growing ``estimate``'s units shrinks its interval as :func:`~icl_lib.stats.size_to_decide`
    assumes: where the estimate knows its interval at another size (``at_size``: exact for
    fractions, the measured spread's quantiles for the order-statistic interval of a median), and a
    guide for t, normal and score intervals and fitted slopes; not for a hull or bound of several
    intervals."""
    if estimate.at_size is not None:
        return True
    what = estimate.what
    return "order-statistic" not in what and any(w in what for w in ("t interval", "normal interval", "score",
                                                                    "slope", "delta-method", "bootstrap"))


def _decide_text(estimate, rule: Rule, n: int | None, unit: str, undecided: str, lean: str) -> str:
    """What would decide an INCONCLUSIVE claim and which way it leans: ``"leans PASS (its point
    estimate satisfies the rule); about 36 seeds per head count would decide it at the measured
    value and spread (12 here); <undecided>"``."""
    from ..stats import size_to_decide  # stats imports validate only; claims is imported by stats' users

    lean_text = {"PASS": "leans PASS (its point estimate satisfies the rule)",
                 "FAIL": "leans FAIL (its point estimate fails the rule)"}.get(lean, "its point estimate sits on the "
                                                                                   "rule's boundary")
    if n is None:
        text = "the size that would decide it is not given"
    elif n < 1:
        text = f"nothing to decide it on: no {unit} measured"
    elif not _extrapolates(estimate):
        kind = f" ({estimate.what})" if estimate.what else ""
        text = (f"its interval{kind} is not known to shrink as one over the root of the {unit}, so no size "
                f"that would decide it is extrapolated ({n:,} here)")
    else:
        need = size_to_decide(estimate, rule.decide, n)
        text = (f"about {need:,} {unit} would decide it at the measured value and spread ({n:,} here)" if need
                else f"no number of {unit} would decide it at the measured value (it lies on the condition's "
                     f"boundary, or the interval is unbounded; {n:,} here)")
    return lean_text + "; " + text + (f"; {' '.join(undecided.split())}" if undecided.strip() else "")


def _known(text: str) -> str:
    if not isinstance(text, str) or (text and not text.strip()):
        raise ValueError(f"known_failure={text!r} is invalid: accepted '' or a sentence saying where the claim "
                         "fails and where the chapter shows it")
    return " ".join(text.split())
