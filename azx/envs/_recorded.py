"""What the adapters of single-player JAX environments (gymnax, brax) share: a state that
records what its last step gave, read back by the interface's accessors."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, Shaped

from .._types import EnvState
from ._abstract import AbstractEnv


class RecordedStepEnv(AbstractEnv):
    """A single-player environment whose state holds `observation`, `reward`, `terminated`
    and `truncated` as its last step gave them, every action legal. Subclasses step the
    wrapped environment and pass the new state through `hold_finished`."""

    @staticmethod
    def hold_finished(state: EnvState, stepped: EnvState) -> EnvState:
        """`stepped`, except where `state` had already ended: a finished episode stays as
        it ended, with zero reward."""
        done = state.terminated | state.truncated
        finished = eqx.tree_at(lambda s: s.reward, state, jnp.zeros((), jnp.float32))
        return jax.tree.map(lambda old, new: jnp.where(done, old, new), finished, stepped)

    def observation(self, state: EnvState) -> Shaped[Array, "..."]:
        return state.observation

    def legal_action_mask(self, state: EnvState) -> Bool[Array, " num_actions"]:
        return jnp.ones(self.num_actions, jnp.bool_)

    def rewards(self, state: EnvState) -> Float[Array, " num_players"]:
        return jnp.reshape(state.reward, (1,))

    def terminated(self, state: EnvState) -> Bool[Array, ""]:
        return state.terminated

    def truncated(self, state: EnvState) -> Bool[Array, ""]:
        return state.truncated

    def current_player(self, state: EnvState) -> Int[Array, ""]:
        return jnp.zeros((), jnp.int32)
