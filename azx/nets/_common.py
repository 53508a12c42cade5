import math

import jax.numpy as jnp
from jaxtyping import Array, Float, Shaped


def check_positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


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
