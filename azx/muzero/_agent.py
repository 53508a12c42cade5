"""MuZero in the arena: the search over a learned model as an [`azx.arena.AbstractAgent`][]."""

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Int

from .._types import EnvState, PRNGKey
from ..arena import AbstractAgent
from ..envs import AbstractEnv
from ..search import AbstractSearch
from ._nets import MuZeroNet
from ._stochastic import learned_search_states
from ._stochastic_nets import StochasticMuZeroNet


class MuZeroAgent(AbstractAgent):
    """Plays the action of a search over `net`'s learned model, which sees the game only
    through its observations and legal actions: [`azx.muzero.search_states`][] for a
    [`azx.muzero.MuZeroNet`][], [`azx.muzero.stochastic_search_states`][] (through chance
    nodes over its codes) for a [`azx.muzero.StochasticMuZeroNet`][]. Every move's search
    starts afresh, so the agent keeps no state between moves. Configure the search to
    play greedily for evaluation (e.g. [`azx.muzero.greedy_search`][]).
    """

    net: MuZeroNet | StochasticMuZeroNet
    search: AbstractSearch

    def __init__(self, net: MuZeroNet | StochasticMuZeroNet, search: AbstractSearch):
        """**Arguments:**

        - `net`: the trained [`azx.muzero.MuZeroNet`][] or
          [`azx.muzero.StochasticMuZeroNet`][].
        - `search`: any [`azx.search.AbstractSearch`][] (native or mctx; for a
          `StochasticMuZeroNet`, native or [`azx.search.MctxPUCT`][]), without tree reuse.
        """
        if not isinstance(net, MuZeroNet | StochasticMuZeroNet):
            raise ValueError(
                f"net must be an azx.muzero.MuZeroNet or StochasticMuZeroNet, got "
                f"{type(net).__name__}"
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
        # One key per row, so that a row's search does not depend on the other rows.
        keys = jax.random.split(key, batch_size)
        output = learned_search_states(self.search, self.net, env, env_state, key=keys)
        return output.action.astype(jnp.int32), agent_state

    def observe(self, agent_state, action, done):
        del action, done
        return agent_state


StochasticMuZeroAgent = MuZeroAgent
"""Stochastic MuZero's agent: [`azx.muzero.MuZeroAgent`][] itself, which plays a
[`azx.muzero.StochasticMuZeroNet`][] by a search through its chance nodes."""
