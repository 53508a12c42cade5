"""An agent whose first plies are random: varied games between deterministic players."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Int, PyTree

from .._types import EnvState, PRNGKey
from .._validate import check_non_negative_int
from ..envs import AbstractEnv
from ._agent import AbstractAgent, legal_mask, random_legal


class RandomOpening(AbstractAgent):
    """`inner`, except that its moves in the first `plies` plies of each game (counting
    both players' moves) are uniformly random legal moves.

    Two agents that play deterministically (a network's argmax, a search without noise)
    repeat one game per colour; wrapping both in `RandomOpening` makes every game start
    from its own random position, as `azx eval --opening-plies N` does. `inner` is still
    called on those plies (its choice discarded), so that agents keeping state between
    moves follow the game as usual.

    `env`, if given, is the environment `inner` sees instead of the match's: the same
    game observed differently (an agent trained with `azx.envs.make(...,
    observe_legal_moves=True)` against one trained without), since a match steps one game
    state that both environments wrap.
    """

    inner: AbstractAgent
    plies: int = eqx.field(static=True)
    env: AbstractEnv | None = None

    def __check_init__(self):
        check_non_negative_int("plies", self.plies)

    def _inner_env(self, env: AbstractEnv) -> AbstractEnv:
        return env if self.env is None else self.env

    def init(self, env: AbstractEnv, batch_size: int) -> PyTree:
        return self.inner.init(self._inner_env(env), batch_size), jnp.zeros(batch_size, jnp.int32)

    def __call__(
        self, env: AbstractEnv, agent_state: PyTree, env_state: EnvState, *, key: PRNGKey
    ) -> tuple[Int[Array, " batch"], PyTree]:
        inner_state, plies = agent_state
        inner_key, random_key = jax.random.split(key)
        action, inner_state = self.inner(
            self._inner_env(env), inner_state, env_state, key=inner_key
        )
        random_action = random_legal(legal_mask(env, env_state), key=random_key)
        action = jnp.where(plies < self.plies, random_action, action).astype(jnp.int32)
        return action, (inner_state, plies)

    def observe(
        self, agent_state: PyTree, action: Int[Array, " batch"], done: Bool[Array, " batch"]
    ) -> PyTree:
        inner_state, plies = agent_state
        inner_state = self.inner.observe(inner_state, action, done)
        return inner_state, jnp.where(done, 0, plies + 1)
