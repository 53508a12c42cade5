"""Validation of search configuration, shared by the native and mctx backends."""

import math

from .._validate import check_positive_int as check_positive_int


def check_optional_positive_int(name: str, value: object) -> None:
    if value is not None:
        check_positive_int(name, value)


def check_float(
    name: str,
    value: object,
    *,
    low: float = -math.inf,
    high: float = math.inf,
    low_open: bool = False,
) -> None:
    """`value` must be a real number in `[low, high]` (or `(low, high]` when `low_open`)."""
    bracket = "(" if low_open else "["
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < low
        or (low_open and value == low)
        or value > high
    ):
        raise ValueError(
            f"{name} must be a finite number in {bracket}{low}, {high}], got {value!r}"
        )


def check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")


Q_NORMALISATIONS = ("siblings", "tree")
"""How Q-values are scaled to [0, 1] before they enter selection:

- `"siblings"`: by the min and max over the node's value and its children's Q (mctx's
  `qtransform_by_parent_and_siblings`; for Gumbel, mctx's rescaling of completed Q).
- `"tree"`: by the min and max Q over every visited edge of the whole tree (MuZero's
  normalisation; suits single-player games whose returns are on an unknown scale).
"""
