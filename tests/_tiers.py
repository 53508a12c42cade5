"""Which cases of a parametrised check the default run makes, and which only the slow tier."""

import pytest


def slow_repeats(cases, slow):
    """`cases` for `pytest.mark.parametrize`, those in `slow` marked `slow`: the slow tier
    repeats the check on them, the default run makes it on the others. A tuple case
    (several arguments) stays one case."""
    unknown = set(slow) - set(cases)
    if unknown:
        raise ValueError(f"slow cases {sorted(map(str, unknown))} are not among {list(cases)}")
    return [
        pytest.param(*(case if isinstance(case, tuple) else (case,)), marks=pytest.mark.slow)
        if case in slow
        else case
        for case in cases
    ]
