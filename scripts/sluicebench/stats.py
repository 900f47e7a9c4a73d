"""Medians, percentiles, ratios and spreads over lists that may hold None
(a run that produced no number)."""

import math
import statistics


def values(xs):
    return [x for x in xs if x is not None]


def median(xs):
    """Median of the non-None values, or None when there are none."""
    xs = values(xs)
    return statistics.median(xs) if xs else None


def percentile(xs, pct):
    """Nearest-rank percentile (0..100) of the non-None values, or None."""
    xs = sorted(values(xs))
    if not xs:
        return None
    k = math.ceil(pct / 100.0 * len(xs)) - 1
    return xs[max(0, min(len(xs) - 1, k))]


def ratio(a, b):
    """a / b, or None when either is missing or b is 0."""
    if a is None or b is None or b == 0:
        return None
    return a / b


def spread(xs):
    """(max - min) / median of the non-None values; None for fewer than 2."""
    xs = values(xs)
    if len(xs) < 2:
        return None
    m = statistics.median(xs)
    return (max(xs) - min(xs)) / m if m else None


def fmt(x, spec):
    """format(x, spec), or '-' for None."""
    return "-" if x is None else format(x, spec)
