import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Shaped

from .._types import PRNGKey
from ._common import as_float, check_positive_int, check_shape, flat_size, value_out


class MLP(eqx.Module):
    """Fully connected policy-value network over the flattened observation."""

    trunk: eqx.nn.MLP
    policy_head: eqx.nn.Linear
    value_head: eqx.nn.Linear
    observation_shape: tuple[int, ...] = eqx.field(static=True)
    bounded_value: bool = eqx.field(static=True)

    def __init__(
        self,
        observation_shape: tuple[int, ...],
        num_actions: int,
        *,
        width: int = 128,
        depth: int = 2,
        bounded_value: bool = True,
        key: PRNGKey,
    ):
        """**Arguments:**

        - `observation_shape`: shape of one observation (any rank; it is flattened).
        - `num_actions`: number of policy logits.
        - `width`: units in each hidden layer.
        - `depth`: number of hidden layers (at least 1).
        - `bounded_value`: squash the value with `tanh` into `[-1, 1]` (two-player zero-sum
          games); set `False` for single-player games whose returns are unbounded.
        - `key`: random key for the initial weights (keyword-only).
        """
        self.observation_shape = check_shape(observation_shape)
        check_positive_int("num_actions", num_actions)
        check_positive_int("width", width)
        check_positive_int("depth", depth)
        trunk_key, policy_key, value_key = jax.random.split(key, 3)
        self.trunk = eqx.nn.MLP(
            flat_size(self.observation_shape),
            width,
            width,
            depth - 1,
            activation=jax.nn.relu,
            final_activation=jax.nn.relu,
            key=trunk_key,
        )
        self.policy_head = eqx.nn.Linear(width, num_actions, key=policy_key)
        self.value_head = eqx.nn.Linear(width, "scalar", key=value_key)
        self.bounded_value = bounded_value

    def __call__(
        self, observation: Shaped[Array, "..."]
    ) -> tuple[Float[Array, " num_actions"], Float[Array, ""]]:
        """**Arguments:** one observation of shape `observation_shape`.

        **Returns:** `(logits, value)`.
        """
        if observation.shape != self.observation_shape:
            raise ValueError(
                f"MLP expects one observation of shape {self.observation_shape}, got "
                f"{observation.shape}; batch with jax.vmap"
            )
        hidden = self.trunk(jnp.ravel(as_float(observation)))
        return self.policy_head(hidden), value_out(self.value_head(hidden), self.bounded_value)
