import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float, Shaped

from ._common import check_positive_int


class UniformPolicy(eqx.Module):
    """A parameter-free "network": uniform logits and zero value.

    Search with it is plain MCTS driven by the game's rewards alone: a baseline, and a way
    to test search against known game values without a trained network.
    """

    num_actions: int = eqx.field(static=True)

    def __init__(self, num_actions: int):
        check_positive_int("num_actions", num_actions)
        self.num_actions = num_actions

    def __call__(
        self, observation: Shaped[Array, "..."]
    ) -> tuple[Float[Array, " num_actions"], Float[Array, ""]]:
        del observation
        return jnp.zeros(self.num_actions, jnp.float32), jnp.zeros((), jnp.float32)
