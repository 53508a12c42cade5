"""Argument checks shared by every module, so that errors read the same everywhere."""


def check_positive_int(name: str, value: object) -> None:
    """`value` must be an int >= 1 (bools are refused)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
