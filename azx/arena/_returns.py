"""Single-player episodes: every move is the agent's."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, Key

from .._types import EnvState, PRNGKey
from .._validate import check_positive_int
from ..envs import AbstractEnv
from ._agent import AbstractAgent
from ._match import NO_ACTION


class Episodes(eqx.Module):
    """The episodes of [`azx.arena.play_episodes`][], with what replays each of them.

    Each episode's `init_keys`, its `actions` and its `step_keys` make it again:
    `env.init(init_keys[i])`, then `env.step(state, actions[t, i], step_keys[t, i])` for
    each of its `num_moves[i]` moves."""

    returns: Float[Array, " num_games"]
    """Each episode's undiscounted return."""
    finished: Bool[Array, " num_games"]
    """Whether it ended (terminated or truncated) within `max_moves` moves."""
    num_moves: Int[Array, " num_games"]
    """The moves it took."""
    actions: Int[Array, "kept num_games"]
    """Its first `keep_actions` actions, in the order played, -1 after its last move."""
    init_keys: Key[Array, " num_games"]
    """The key of its initial state."""
    step_keys: Key[Array, "kept num_games"]
    """The key `env.step` received with each kept action."""


def episode_returns(
    env: AbstractEnv,
    agent: AbstractAgent,
    *,
    num_games: int,
    key: PRNGKey,
    max_moves: int = 10_000,
) -> tuple[Float[Array, " num_games"], Bool[Array, " num_games"]]:
    """Play `num_games` single-player episodes with `agent`, all at once.

    For single-player games (2048, MinAtar): every move is the agent's. Wrap the call in
    `equinox.filter_jit`.

    **Returns:** `(returns, finished)`: each episode's undiscounted return, and whether it
    ended (terminated or truncated) within `max_moves` moves.
    """
    returns, finished, _, _ = episodes_with_states(
        env, agent, num_games=num_games, key=key, max_moves=max_moves
    )
    return returns, finished


def play_episodes(
    env: AbstractEnv,
    agent: AbstractAgent,
    *,
    num_games: int,
    key: PRNGKey,
    keep_actions: int,
    max_moves: int = 10_000,
) -> Episodes:
    """[`azx.arena.episode_returns`][]'s episodes (the same ones, from the same `key`),
    each with its first `keep_actions` actions and the keys of its start and its steps,
    so that it can be replayed (`azx eval --record`)."""
    check_positive_int("keep_actions", keep_actions)
    returns, finished, _, kept = episodes_with_states(
        env, agent, num_games=num_games, key=key, max_moves=max_moves, keep_actions=keep_actions
    )
    return Episodes(returns, finished, *kept)


def episodes_with_states(
    env: AbstractEnv,
    agent: AbstractAgent,
    *,
    num_games: int,
    key: PRNGKey,
    max_moves: int = 10_000,
    keep_actions: int = 0,
) -> tuple[Float[Array, " num_games"], Bool[Array, " num_games"], EnvState, tuple | None]:
    """[`azx.arena.episode_returns`][], also returning each episode's final state, for
    measures that read the final position (2048's largest tile), and with
    `keep_actions` its moves, actions, start key and step keys (otherwise None)."""
    if env.num_players != 1:
        raise ValueError(
            f"episode_returns is for single-player games; this one has {env.num_players} "
            "players (use play_match)"
        )
    check_positive_int("num_games", num_games)
    init_key, key = jax.random.split(key)
    init_keys = jax.random.split(init_key, num_games)
    state = jax.vmap(env.init)(init_keys)

    def done(state):
        return jax.vmap(env.terminated)(state) | jax.vmap(env.truncated)(state)

    def keep(kept, moving, action, step_keys):
        """`kept` with each moving episode's next action and step key (past
        `keep_actions`: dropped)."""
        if kept is None:
            return None
        num_moves, actions, keys = kept
        rows = jnp.arange(num_games)
        at = jnp.where(moving, num_moves, keep_actions)
        actions = actions.at[at, rows].set(action, mode="drop")
        keys = keys.at[at, rows].set(step_keys, mode="drop")
        return num_moves + moving.astype(jnp.int32), actions, keys

    def cond(carry):
        state, _, _, moves, _, _ = carry
        return (moves < max_moves) & ~jnp.all(done(state))

    def body(carry):
        state, agent_state, returns, moves, key, kept = carry
        key, act_key, step_key = jax.random.split(key, 3)
        finished = done(state)
        action, agent_state = agent(env, agent_state, state, key=act_key)
        step_keys = jax.random.split(step_key, num_games)
        state = jax.vmap(env.step)(state, action, step_keys)
        reward = jax.vmap(env.rewards)(state)[:, 0]
        returns = returns + jnp.where(finished, 0.0, reward)
        agent_state = agent.observe(agent_state, action, done(state))
        kept = keep(kept, ~finished, action, step_keys)
        return state, agent_state, returns, moves + 1, key, kept

    carry = (
        state,
        agent.init(env, num_games),
        jnp.zeros(num_games, jnp.float32),
        jnp.int32(0),
        key,
        (
            jnp.zeros(num_games, jnp.int32),
            jnp.full((keep_actions, num_games), NO_ACTION, jnp.int32),
            jnp.broadcast_to(init_key, (keep_actions, num_games)),  # (overwritten where kept)
        )
        if keep_actions
        else None,
    )
    state, _, returns, _, _, kept = jax.lax.while_loop(cond, body, carry)
    if kept is not None:
        kept = (*kept[:2], init_keys, kept[2])
    return returns, done(state), state, kept
