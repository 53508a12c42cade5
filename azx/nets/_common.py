import math

import jax.numpy as jnp
from jaxtyping import Array, Float, Shaped

from .._validate import check_positive_int as check_positive_int


def check_shape(observation_shape: object) -> tuple[int, ...]:
    if (
        not isinstance(observation_shape, tuple | list)
        or len(observation_shape) == 0
        or not all(
            isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in observation_shape
        )
    ):
        raise ValueError(
            "observation_shape must be a non-empty tuple of positive ints, "
            f"got {observation_shape!r}"
        )
    return tuple(observation_shape)


def as_float(observation: Shaped[Array, "..."]) -> Float[Array, "..."]:
    # pgx observations are bool, int32 or float32; networks always compute in float32.
    return jnp.asarray(observation).astype(jnp.float32)


def value_out(raw: Float[Array, ""], bounded_value: bool) -> Float[Array, ""]:
    return jnp.tanh(raw) if bounded_value else raw


def flat_size(shape: tuple[int, ...]) -> int:
    return math.prod(shape)
