"""Comparing query answers: the same rows in any order, floating point within a tolerance.

Different plans may add floating-point numbers in a different order, so doubles are compared
with a relative tolerance; every other value (decimals included) must be equal.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Sequence

REL_TOL = 1e-6
ABS_TOL = 1e-9


def _sort_key(value: Any):
    if value is None:
        return (0,)
    if isinstance(value, float):
        if math.isnan(value):
            return (1, "nan")
        return (2, float(f"{value:.5g}"))
    if isinstance(value, (list, tuple)):
        return (3, tuple(_sort_key(v) for v in value))
    if isinstance(value, dict):
        return (4, tuple(sorted((str(k), _sort_key(v)) for k, v in value.items())))
    return (5, type(value).__name__, str(value))


def values_equal(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(values_equal(a[k], b[k]) for k in a)
    return a == b


def rows_equal(expected: Sequence, actual: Sequence) -> bool:
    """True when both hold the same rows, in any order (doubles within tolerance)."""
    return not difference(expected, actual)


def _canonical(value: Any):
    """A hashable form of a value in which doubles equal to ten significant digits are one
    value: most equal answers match exactly here, and only the rest need the tolerance."""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else float(f"{value + 0.0:.10g}")
    if isinstance(value, (list, tuple)):
        return tuple(_canonical(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted(((str(k), _canonical(v)) for k, v in value.items()), key=repr))
    return value


def difference(expected: Sequence, actual: Sequence, limit: int = 5) -> str:
    """Empty when the answers are equal, else a short description of how they differ."""
    if len(expected) != len(actual):
        return f"{len(expected)} rows expected, {len(actual)} returned"
    # Count the rows first (linear in the rows); only those without an exact twin are matched
    # within the tolerance, sorted and then pairwise.
    left_counts = Counter(_canonical(tuple(r)) for r in expected)
    right_counts = Counter(_canonical(tuple(r)) for r in actual)
    if left_counts == right_counts:
        return ""
    only_left, only_right = left_counts - right_counts, right_counts - left_counts
    originals = {}
    for r in list(expected) + list(actual):
        originals.setdefault(_canonical(tuple(r)), tuple(r))
    left = sorted((originals[k] for k in only_left.elements()), key=_sort_key)
    rest = sorted((originals[k] for k in only_right.elements()), key=_sort_key)
    missing = []
    for x in left:
        match = next((i for i, y in enumerate(rest) if values_equal(x, y)), None)
        if match is None:
            missing.append(x)
        else:
            rest.pop(match)
    if not missing:
        return ""
    shown = "; ".join(f"{m} vs {r}" for m, r in list(zip(missing, rest))[:limit])
    return f"{len(missing)} of {len(expected)} rows differ, e.g. expected vs returned: {shown}"
