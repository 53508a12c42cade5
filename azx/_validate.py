"""Argument checks shared by every module, so that errors read the same everywhere."""

import math


def check_positive_int(name: str, value: object) -> None:
    """`value` must be an int >= 1 (bools are refused)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


def check_non_negative_int(name: str, value: object, *, optional: bool = False) -> None:
    """`value` must be an int >= 0 (bools are refused), or None where `optional`."""
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        allowed = "None or an int >= 0" if optional else "an int >= 0"
        raise ValueError(f"{name} must be {allowed}, got {value!r}")


def check_non_negative_number(name: str, value: object) -> None:
    """`value` must be a finite int or float >= 0 (bools are refused)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not (math.isfinite(value) and value >= 0)
    ):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


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
