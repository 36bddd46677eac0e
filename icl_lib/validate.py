"""Parameter validation with one message format, used by every configuration and chapter.

A bad value raises :class:`ValueError` whose text names the parameter, the value and what is
accepted, e.g. ``heads=0 is invalid: accepted an integer in [1, 256]``, before any work starts.
"""

from __future__ import annotations

import ast
import math
import numbers
from typing import Any, Sequence

__all__ = ["fail", "check_int", "check_float", "check_choice", "check_int_list", "check_float_list", "literal_list"]


def fail(name: str, value: Any, accepted: str) -> None:
    """Raise the library's ``ValueError`` for parameter ``name`` with ``value``."""
    raise ValueError(f"{name}={value!r} is invalid: accepted {accepted}")


def check_int(name: str, value: Any, lo: int | None = None, hi: int | None = None) -> int:
    """Return ``value`` as an int, or raise ``ValueError`` naming ``name`` and the range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) and not (
        isinstance(value, numbers.Real) and float(value).is_integer()
    ):
        fail(name, value, _range_text("an integer", lo, hi))
    value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        fail(name, value, _range_text("an integer", lo, hi))
    return value


def check_float(
    name: str,
    value: Any,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
) -> float:
    """Return ``value`` as a finite float inside the given (open or closed) bounds."""
    text = _interval_text(lo, hi, lo_open, hi_open)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        fail(name, value, f"a real number in {text}")
    value = float(value)
    bad = not math.isfinite(value)
    if lo is not None:
        bad |= value <= lo if lo_open else value < lo
    if hi is not None:
        bad |= value >= hi if hi_open else value > hi
    if bad:
        fail(name, value, f"a real number in {text}")
    return value


def check_choice(name: str, value: Any, choices: Sequence[str]) -> str:
    """Return ``value`` if it is one of ``choices``."""
    if value not in choices:
        fail(name, value, "one of " + ", ".join(repr(c) for c in choices))
    return value


def check_int_list(
    name: str, values: Any, lo: int | None = None, hi: int | None = None, max_len: int | None = None
) -> tuple[int, ...]:
    """A non-empty list (or tuple, or its text as papermill's ``-p`` passes it: :func:`literal_list`)
    of at most ``max_len`` integers, each checked as ``name[i]``."""
    values = _sequence(name, values, "integers", max_len)
    return tuple(check_int(f"{name}[{i}]", v, lo, hi) for i, v in enumerate(values))


def check_float_list(
    name: str,
    values: Any,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
    max_len: int | None = None,
) -> tuple[float, ...]:
    """A non-empty list (or tuple, or its text: :func:`literal_list`) of at most ``max_len`` finite
    numbers, each checked as ``name[i]``."""
    values = _sequence(name, values, "numbers", max_len)
    return tuple(check_float(f"{name}[{i}]", v, lo, hi, lo_open, hi_open) for i, v in enumerate(values))


def _sequence(name: str, values: Any, kind: str, max_len: int | None) -> list | tuple:
    values = literal_list(name, values)
    most = "" if max_len is None else f" (at most {max_len})"
    if not isinstance(values, (list, tuple)) or len(values) == 0 or (max_len is not None and len(values) > max_len):
        fail(name, values, f"a non-empty list of {kind}{most}")
    return values


def _range_text(kind: str, lo, hi) -> str:
    if lo is not None and hi is not None:
        return f"{kind} in [{lo}, {hi}]"
    if lo is not None:
        return f"{kind} >= {lo}"
    if hi is not None:
        return f"{kind} <= {hi}"
    return kind


def _interval_text(lo, hi, lo_open, hi_open) -> str:
    left = "(" if lo is None or lo_open else "["
    right = ")" if hi is None or hi_open else "]"
    return f"{left}{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}{right}"


def literal_list(name: str, value: Any) -> Any:
    """A list parameter typed on papermill's command line as the list it spells.

    ``papermill -p heads [3]`` passes the *string* ``"[3]"`` (``-p`` converts only numbers,
    booleans and ``None``); a string that starts with ``[`` or ``(`` is read as a Python literal
    (``ast.literal_eval``), anything else is returned unchanged for the parameter's own check.
    """
    if not isinstance(value, str) or not value.strip().startswith(("[", "(")):
        return value
    try:
        return ast.literal_eval(value.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        fail(name, value, "a list literal such as [1, 2]")
