"""The agent interface, and the agents that need no search of their own."""

import abc
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Int, PyTree

from .._types import EnvState, PRNGKey
from ..envs import AbstractEnv
from ..search import ILLEGAL_LOGIT, AbstractSearch


class AbstractAgent(eqx.Module):
    """Interface of a player in the arena: a batch of states and a key in, actions out.

    An agent is configuration only (a frozen Module). What changes between moves (e.g. a
    search tree kept for reuse) is the agent state, which the caller threads through
    `__call__` and `observe`. Every array leaf of an agent state has a leading axis of
    size `batch_size`, so that a match can update some rows and keep the others.
    """

    @abc.abstractmethod
    def init(self, env: AbstractEnv, batch_size: int) -> PyTree[Any]:
        """Agent state for `batch_size` games of `env` at their start."""

    @abc.abstractmethod
    def __call__(
        self, env: AbstractEnv, agent_state: PyTree[Any], env_state: EnvState, *, key: PRNGKey
    ) -> tuple[Int[Array, " batch"], PyTree[Any]]:
        """Pick a legal action for the player to move in each of the batched `env_state`.

        **Returns:** `(action, agent_state)`.
        """

    @abc.abstractmethod
    def observe(
        self,
        agent_state: PyTree[Any],
        action: Int[Array, " batch"],
        done: Bool[Array, " batch"],
    ) -> PyTree[Any]:
        """Agent state after `action` was played (by this agent or its opponent).

        `done` marks games that ended with that move.
        """


class _Stateless(eqx.Module):
    """Agent state of agents that remember nothing: one placeholder entry per game."""

    rows: Bool[Array, " batch"]


def _stateless(batch_size: int) -> _Stateless:
    return _Stateless(rows=jnp.zeros(batch_size, jnp.bool_))


def require_game(user: str, env: AbstractEnv, game: str) -> None:
    """A `ValueError` unless `env` is pgx's `game`, for agents and measures of one game."""
    if env.name != game:
        raise ValueError(f"{user} plays pgx's {game} (azx.envs.make({game!r})), not {env.name!r}")


def legal_mask(env: AbstractEnv, env_state: EnvState) -> Bool[Array, "batch num_actions"]:
    return jax.vmap(env.legal_action_mask)(env_state)


def random_legal(
    legal_action_mask: Bool[Array, "batch num_actions"], *, key: PRNGKey
) -> Int[Array, " batch"]:
    """A uniformly random legal action per row (action 0 where none is legal)."""
    noise = jax.random.uniform(key, legal_action_mask.shape, jnp.float32)
    return jnp.argmax(jnp.where(legal_action_mask, noise, -1.0), axis=-1).astype(jnp.int32)


class RandomAgent(AbstractAgent):
    """Plays a uniformly random legal move: the anchor (Elo 0) of the ratings."""

    def init(self, env: AbstractEnv, batch_size: int) -> _Stateless:
        return _stateless(batch_size)

    def __call__(
        self, env: AbstractEnv, agent_state: _Stateless, env_state: EnvState, *, key: PRNGKey
    ) -> tuple[Int[Array, " batch"], _Stateless]:
        return random_legal(legal_mask(env, env_state), key=key), agent_state

    def observe(self, agent_state, action, done):
        del action, done
        return agent_state


class GreedyAgent(AbstractAgent):
    """Looks one move ahead: plays a move that wins at once if there is one, else random.

    "Wins" means the move ends the game with the mover's reward strictly above every other
    player's. Every legal action is tried with one batched `env.step`.
    """

    def init(self, env: AbstractEnv, batch_size: int) -> _Stateless:
        return _stateless(batch_size)

    def __call__(
        self, env: AbstractEnv, agent_state: _Stateless, env_state: EnvState, *, key: PRNGKey
    ) -> tuple[Int[Array, " batch"], _Stateless]:
        legal = legal_mask(env, env_state)
        num_actions = legal.shape[-1]
        mover = jax.vmap(env.current_player)(env_state)
        # Chance games draw their own randomness in `step`; one key per move tried.
        step_keys = jax.random.split(jax.random.fold_in(key, 1), num_actions)

        def try_action(state, player, action, step_key):
            child = env.step(state, action, step_key)
            rewards = env.rewards(child)
            others = jnp.where(jnp.arange(rewards.shape[0]) == player, -jnp.inf, rewards)
            return env.terminated(child) & (rewards[player] > jnp.max(others))

        actions = jnp.arange(num_actions, dtype=jnp.int32)
        # [batch, num_actions]: every action from every state.
        wins = jax.vmap(
            lambda state, player: jax.vmap(try_action, in_axes=(None, None, 0, 0))(
                state, player, actions, step_keys
            )
        )(env_state, mover)
        winning = wins & legal
        choices = jnp.where(jnp.any(winning, axis=-1)[:, None], winning, legal)
        return random_legal(choices, key=key), agent_state

    def observe(self, agent_state, action, done):
        del action, done
        return agent_state


class NetworkAgent(AbstractAgent):
    """The network alone: plays the legal action with the largest policy logit, or with
    `sample`, an action drawn from the policy over the legal actions."""

    net: Any
    sample: bool = eqx.field(static=True)

    def __init__(self, net: Any, sample: bool = False):
        """**Arguments:**

        - `net`: a callable mapping ONE observation to `(logits, value)`.
        - `sample`: draw the action from the policy instead of taking its argmax.
        """
        self.net = net
        self.sample = sample

    def init(self, env: AbstractEnv, batch_size: int) -> _Stateless:
        return _stateless(batch_size)

    def __call__(
        self, env: AbstractEnv, agent_state: _Stateless, env_state: EnvState, *, key: PRNGKey
    ) -> tuple[Int[Array, " batch"], _Stateless]:
        logits, _ = jax.vmap(self.net)(jax.vmap(env.observation)(env_state))
        masked = jnp.where(legal_mask(env, env_state), logits, ILLEGAL_LOGIT)
        if self.sample:
            return jax.random.categorical(key, masked).astype(jnp.int32), agent_state
        # Deterministic: ties go to the lowest action index.
        return jnp.argmax(masked, axis=-1).astype(jnp.int32), agent_state

    def observe(self, agent_state, action, done):
        del action, done
        return agent_state


class SearchAgent(AbstractAgent):
    """The network with a search: plays the search's action, and keeps its tree.

    The search decides how the action is chosen; for evaluation one usually configures it
    to play greedily (e.g. temperature 0, or `gumbel_scale=0` for Gumbel search). After
    every move, by either player, the tree advances to the subtree under that move.
    """

    net: Any
    search: AbstractSearch

    def __init__(self, net: Any, search: AbstractSearch):
        """**Arguments:**

        - `net`: a callable mapping ONE observation to `(logits, value)`.
        - `search`: any [`azx.search.AbstractSearch`][] (native or mctx).
        """
        if not isinstance(search, AbstractSearch):
            raise ValueError(f"search must be an azx.search.AbstractSearch, got {search!r}")
        self.net = net
        self.search = search

    def init(self, env: AbstractEnv, batch_size: int) -> PyTree[Any]:
        return self.search.init(env, batch_size)

    def __call__(
        self, env: AbstractEnv, agent_state: PyTree[Any], env_state: EnvState, *, key: PRNGKey
    ) -> tuple[Int[Array, " batch"], PyTree[Any]]:
        batch_size = jax.tree.leaves(env_state)[0].shape[0]
        # One key per row, so that a row's search does not depend on the other rows.
        keys = jax.random.split(key, batch_size)
        output = self.search(self.net, env, agent_state, env_state, key=keys)
        return output.action.astype(jnp.int32), output.tree

    def observe(self, agent_state, action, done):
        return self.search.advance(agent_state, action, done)
