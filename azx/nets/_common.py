import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Shaped

from .._types import PRNGKey
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


def orthogonal_linear(
    in_features: int, out_features: int, scale: float, *, key: PRNGKey
) -> eqx.nn.Linear:
    """A linear layer with an orthogonal weight of gain `scale` and a zero bias: the
    initialisation that PPO implementations use (policy heads at gain 0.01 start with a
    near-uniform policy)."""
    layer = eqx.nn.Linear(in_features, out_features, key=key)
    weight = jax.nn.initializers.orthogonal(scale)(key, (in_features, out_features)).T
    return eqx.tree_at(
        lambda linear: (linear.weight, linear.bias), layer, (weight, jnp.zeros(out_features))
    )


#: Activations a network's hidden layers can use, by the name a configuration gives.
ACTIVATIONS = {"tanh": jax.nn.tanh, "relu": jax.nn.relu}


def check_activation(activation: object) -> str:
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"activation must be one of {', '.join(map(repr, ACTIVATIONS))}, got {activation!r}"
        )
    return activation  # type: ignore[return-value]
