import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

from .._types import EnvState, PRNGKey
from .._validate import check_positive_int
from ..envs import AbstractEnv
from ._agent import AbstractAgent


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
    returns, finished, _ = play_episodes(
        env, agent, num_games=num_games, key=key, max_moves=max_moves
    )
    return returns, finished


def play_episodes(
    env: AbstractEnv,
    agent: AbstractAgent,
    *,
    num_games: int,
    key: PRNGKey,
    max_moves: int = 10_000,
) -> tuple[Float[Array, " num_games"], Bool[Array, " num_games"], EnvState]:
    """[`azx.arena.episode_returns`][], also returning each episode's final state, for
    measures that read the final position (2048's largest tile)."""
    if env.num_players != 1:
        raise ValueError(
            f"episode_returns is for single-player games; this one has {env.num_players} "
            "players (use play_match)"
        )
    check_positive_int("num_games", num_games)
    init_key, key = jax.random.split(key)
    state = jax.vmap(env.init)(jax.random.split(init_key, num_games))

    def done(state):
        return jax.vmap(env.terminated)(state) | jax.vmap(env.truncated)(state)

    def cond(carry):
        state, _, _, moves, _ = carry
        return (moves < max_moves) & ~jnp.all(done(state))

    def body(carry):
        state, agent_state, returns, moves, key = carry
        key, act_key, step_key = jax.random.split(key, 3)
        finished = done(state)
        action, agent_state = agent(env, agent_state, state, key=act_key)
        state = jax.vmap(env.step)(state, action, jax.random.split(step_key, num_games))
        reward = jax.vmap(env.rewards)(state)[:, 0]
        returns = returns + jnp.where(finished, 0.0, reward)
        agent_state = agent.observe(agent_state, action, done(state))
        return state, agent_state, returns, moves + 1, key

    carry = (
        state,
        agent.init(env, num_games),
        jnp.zeros(num_games, jnp.float32),
        jnp.int32(0),
        key,
    )
    state, _, returns, _, _ = jax.lax.while_loop(cond, body, carry)
    return returns, done(state), state
