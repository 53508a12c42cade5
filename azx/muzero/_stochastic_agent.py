"""A trained Stochastic MuZero playing: its search as an arena agent, and its episodes."""

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Int

from .._episodes import EvaluationResult, play_episodes
from .._types import EnvState, PRNGKey
from .._validate import check_positive_int
from ..arena import AbstractAgent
from ..envs import AbstractEnv
from ..search import AbstractSearch
from ._stochastic import stochastic_search_states
from ._stochastic_nets import StochasticMuZeroNet
from ._stochastic_trainer import StochasticMuZero


class StochasticMuZeroAgent(AbstractAgent):
    """Plays the action of a search over `net`'s learned stochastic model
    ([`azx.muzero.stochastic_search_states`][]), afresh at every move, as
    [`azx.muzero.MuZeroAgent`][] does for MuZero."""

    net: StochasticMuZeroNet
    search: AbstractSearch

    def __init__(self, net: StochasticMuZeroNet, search: AbstractSearch):
        """**Arguments:** the trained [`azx.muzero.StochasticMuZeroNet`][], and a native
        search or [`azx.search.MctxPUCT`][], without tree reuse."""
        if not isinstance(net, StochasticMuZeroNet):
            raise ValueError(
                f"net must be an azx.muzero.StochasticMuZeroNet, got {type(net).__name__}"
            )
        if not isinstance(search, AbstractSearch):
            raise ValueError(f"search must be an azx.search.AbstractSearch, got {search!r}")
        if search.reuse_tree:
            raise ValueError(
                "a learned model's search starts afresh at every move: pass reuse_tree=False"
            )
        self.net = net
        self.search = search

    def init(self, env: AbstractEnv, batch_size: int) -> Bool[Array, " batch"]:
        return jnp.zeros(batch_size, bool)

    def __call__(
        self,
        env: AbstractEnv,
        agent_state: Bool[Array, " batch"],
        env_state: EnvState,
        *,
        key: PRNGKey,
    ) -> tuple[Int[Array, " batch"], Bool[Array, " batch"]]:
        batch_size = jax.tree.leaves(env_state)[0].shape[0]
        keys = jax.random.split(key, batch_size)
        output = stochastic_search_states(self.search, self.net, env, env_state, key=keys)
        return output.action.astype(jnp.int32), agent_state

    def observe(self, agent_state, action, done):
        del action, done
        return agent_state


def stochastic_evaluate(
    trainer: StochasticMuZero,
    net: StochasticMuZeroNet,
    *,
    num_episodes: int,
    key: PRNGKey,
    max_steps: int = 100_000,
    greedy: bool = True,
) -> EvaluationResult:
    """Play `num_episodes` episodes of a single-player `trainer.env`, each move chosen by
    the trainer's search over `net`'s learned stochastic model, with its exploration off
    (or, with `greedy=False`, as self-play runs it), as [`azx.muzero.evaluate`][] does for
    MuZero.

    **Returns:** an [`azx.ppo.EvaluationResult`][].
    """
    check_positive_int("num_episodes", num_episodes)
    check_positive_int("max_steps", max_steps)
    env = trainer.env
    if env.num_players != 1:
        raise ValueError(
            f"stochastic_evaluate plays single-player episodes; the environment has "
            f"num_players={env.num_players}"
        )
    search = trainer.search.without_exploration() if greedy else trainer.search

    def move(env_state, running, keys):
        del running  # an ended episode's row plays on; play_episodes ignores its moves
        pairs = jax.vmap(jax.random.split)(keys)
        action = stochastic_search_states(search, net, env, env_state, key=pairs[:, 0]).action
        next_state = jax.vmap(env.step)(env_state, action, pairs[:, 1])
        reward = jax.vmap(env.rewards)(next_state)[:, 0]
        ended = jax.vmap(env.terminated)(next_state) | jax.vmap(env.truncated)(next_state)
        return next_state, reward, ended

    return play_episodes(
        jax.vmap(env.init), move, num_episodes=num_episodes, key=key, max_steps=max_steps
    )
