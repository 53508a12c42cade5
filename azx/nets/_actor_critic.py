import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Shaped

from .._types import PRNGKey
from ._common import (
    ACTIVATIONS,
    as_float,
    check_activation,
    check_positive_int,
    check_shape,
    flat_size,
    orthogonal_linear,
)


def _torso(sizes: tuple[int, ...], *, key: PRNGKey) -> tuple[eqx.nn.Linear, ...]:
    keys = jax.random.split(key, len(sizes) - 1)
    return tuple(orthogonal_linear(a, b, 2**0.5, key=k) for a, b, k in zip(sizes, sizes[1:], keys))


def _hidden_sizes(hidden_sizes: object) -> tuple[int, ...]:
    if not isinstance(hidden_sizes, tuple | list) or not hidden_sizes:
        raise ValueError(f"hidden_sizes must be a non-empty tuple of ints, got {hidden_sizes!r}")
    for size in hidden_sizes:
        check_positive_int("every hidden size", size)
    return tuple(hidden_sizes)


class ActorCritic(eqx.Module):
    """Feed-forward actor-critic for PPO: one observation in, `(logits, value)` out.

    Multilayer perceptrons over the flattened observation, a policy torso and a value torso
    of their own (or one shared torso), initialised as PPO implementations do: orthogonal
    hidden layers of gain √2, a policy head of gain 0.01 (a near-uniform first policy), a
    value head of gain 1, zero biases. The value is unbounded.
    """

    policy_torso: tuple[eqx.nn.Linear, ...]
    value_torso: tuple[eqx.nn.Linear, ...]
    """Empty when the torso is shared: the value head then reads the policy torso."""
    policy_head: eqx.nn.Linear
    value_head: eqx.nn.Linear
    observation_shape: tuple[int, ...] = eqx.field(static=True)
    activation: str = eqx.field(static=True)

    def __init__(
        self,
        observation_shape: tuple[int, ...],
        num_actions: int,
        *,
        hidden_sizes: tuple[int, ...] = (64, 64),
        activation: str = "tanh",
        shared_torso: bool = False,
        key: PRNGKey,
    ):
        """**Arguments:**

        - `observation_shape`: shape of one observation (any rank; it is flattened).
        - `num_actions`: number of policy logits.
        - `hidden_sizes`: units of each hidden layer of a torso.
        - `activation`: `"tanh"` or `"relu"`, after every hidden layer.
        - `shared_torso`: one torso under both heads instead of one each.
        - `key`: random key for the initial weights (keyword-only).
        """
        self.observation_shape = check_shape(observation_shape)
        check_positive_int("num_actions", num_actions)
        sizes = (flat_size(self.observation_shape), *_hidden_sizes(hidden_sizes))
        self.activation = check_activation(activation)
        if not isinstance(shared_torso, bool):
            raise ValueError(f"shared_torso must be True or False, got {shared_torso!r}")
        policy_key, value_key, policy_head_key, value_head_key = jax.random.split(key, 4)
        self.policy_torso = _torso(sizes, key=policy_key)
        self.value_torso = () if shared_torso else _torso(sizes, key=value_key)
        self.policy_head = orthogonal_linear(sizes[-1], num_actions, 0.01, key=policy_head_key)
        self.value_head = orthogonal_linear(sizes[-1], 1, 1.0, key=value_head_key)

    def _features(self, layers: tuple[eqx.nn.Linear, ...], x: Float[Array, " n"]):
        activation = ACTIVATIONS[self.activation]
        for layer in layers:
            x = activation(layer(x))
        return x

    def __call__(
        self, observation: Shaped[Array, "..."]
    ) -> tuple[Float[Array, " num_actions"], Float[Array, ""]]:
        """**Arguments:** one observation of shape `observation_shape`.

        **Returns:** `(logits, value)`.
        """
        if observation.shape != self.observation_shape:
            raise ValueError(
                f"ActorCritic expects one observation of shape {self.observation_shape}, got "
                f"{observation.shape}; batch with jax.vmap"
            )
        x = jnp.ravel(as_float(observation))
        policy_features = self._features(self.policy_torso, x)
        value_features = (
            self._features(self.value_torso, x) if self.value_torso else policy_features
        )
        return self.policy_head(policy_features), self.value_head(value_features)[0]
