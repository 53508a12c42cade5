"""The reward and discount of a move for the player who made it: what the search's
transitions and the trainers' stored steps both carry."""

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._types import EnvState
from ._abstract import AbstractEnv


def mover_reward_and_discount(
    env: AbstractEnv, state: EnvState, next_state: EnvState, gamma: float
) -> tuple[Float[Array, " batch"], Float[Array, " batch"]]:
    """For a batch of moves from `state` to `next_state` (leading axis `batch`): the reward
    to the player who moved, and the signed discount, `+gamma` when that player moves
    again at `next_state` and `-gamma` when the turn passes to the other player.

    With these, the value of `state` for its mover is `reward + discount * value`, where
    `value` is `next_state`'s for its own mover: the sign convention of
    [`azx.search.Transition`][], so that values back up without knowing the players.
    """
    mover = jax.vmap(env.current_player)(state)
    rewards = jax.vmap(env.rewards)(next_state)
    reward = jnp.take_along_axis(rewards, mover[:, None], axis=1)[:, 0]
    same_mover = jax.vmap(env.current_player)(next_state) == mover
    discount = jnp.where(same_mover, gamma, -gamma).astype(jnp.float32)
    return reward, discount
