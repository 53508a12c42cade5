"""A tiny two-player game written in pure JAX, implementing azx.envs.AbstractEnv.

It shows that any JAX environment plugs into azx through the same interface as pgx.
Subtraction game: a pile of stones, each player in turn takes 1, 2 or 3; whoever takes
the last stone wins. The player to move loses exactly when the pile is a multiple of 4,
a known game value the tests check the environment (and later the search) against.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from azx.envs import AbstractEnv


class SubtractionState(eqx.Module):
    pile: Int[Array, ""]
    current_player: Int[Array, ""]
    rewards: Float[Array, "2"]
    terminated: Bool[Array, ""]


class SubtractionGame(AbstractEnv):
    """Take 1-3 stones; the last to take wins. Actions: 0, 1, 2 take 1, 2, 3 stones."""

    name = "subtraction"

    start_pile: int = eqx.field(static=True)
    num_actions: int = eqx.field(static=True)
    num_players: int = eqx.field(static=True)
    observation_shape: tuple[int, ...] = eqx.field(static=True)
    observation_dtype: jnp.dtype = eqx.field(static=True)

    def __init__(self, start_pile: int = 10):
        self.start_pile = start_pile
        self.num_actions = 3
        self.num_players = 2
        self.observation_shape = (start_pile + 1,)
        self.observation_dtype = jnp.dtype(jnp.float32)

    def init(self, key):
        del key
        return SubtractionState(
            pile=jnp.int32(self.start_pile),
            current_player=jnp.int32(0),
            rewards=jnp.zeros(2, jnp.float32),
            terminated=jnp.bool_(False),
        )

    def step(self, state, action, key):
        del key
        take = jnp.minimum(action.astype(jnp.int32) + 1, state.pile)
        pile = state.pile - take
        won = (pile == 0) & ~state.terminated
        mover = state.current_player
        sign = jnp.where(jnp.arange(2) == mover, 1.0, -1.0).astype(jnp.float32)
        return SubtractionState(
            pile=jnp.where(state.terminated, state.pile, pile),
            current_player=jnp.where(state.terminated, mover, 1 - mover),
            rewards=jnp.where(won, sign, jnp.zeros(2, jnp.float32)),
            terminated=state.terminated | won,
        )

    def observation(self, state):
        return jax.nn.one_hot(state.pile, self.start_pile + 1, dtype=jnp.float32)

    def legal_action_mask(self, state):
        return (jnp.arange(3) < state.pile) | state.terminated

    def rewards(self, state):
        return state.rewards

    def terminated(self, state):
        return state.terminated

    def truncated(self, state):
        return jnp.bool_(False)

    def current_player(self, state):
        return state.current_player


class CountdownState(eqx.Module):
    time: Int[Array, ""]
    length: Int[Array, ""]
    reward: Float[Array, ""]
    terminated: Bool[Array, ""]
    truncated: Bool[Array, ""]


class Countdown(AbstractEnv):
    """A scripted single-player environment for checking a rollout's bookkeeping.

    Each episode draws a length in `[1, max_length]` and terminates after that many steps,
    unless the time limit `limit` truncates it first. Step `t` (counted from 0) pays
    reward `t + 1`, whatever the action. The observation is `[t, length]`, so every step
    says where in which episode it is. Action `t % num_actions` is illegal at step `t`.
    """

    name = "countdown"

    max_length: int = eqx.field(static=True)
    limit: int = eqx.field(static=True)
    num_actions: int = eqx.field(static=True)
    num_players: int = eqx.field(static=True)
    observation_shape: tuple[int, ...] = eqx.field(static=True)
    observation_dtype: jnp.dtype = eqx.field(static=True)

    def __init__(self, max_length: int = 6, limit: int = 4, num_actions: int = 3):
        self.max_length = max_length
        self.limit = limit
        self.num_actions = num_actions
        self.num_players = 1
        self.observation_shape = (2,)
        self.observation_dtype = jnp.dtype(jnp.float32)

    def init(self, key):
        return CountdownState(
            time=jnp.int32(0),
            length=jax.random.randint(key, (), 1, self.max_length + 1),
            reward=jnp.float32(0.0),
            terminated=jnp.bool_(False),
            truncated=jnp.bool_(False),
        )

    def step(self, state, action, key):
        del action, key
        done = state.terminated | state.truncated
        time = jnp.where(done, state.time, state.time + 1)
        terminated = state.terminated | (time == state.length)
        return CountdownState(
            time=time,
            length=state.length,
            reward=jnp.where(done, 0.0, (state.time + 1).astype(jnp.float32)),
            terminated=terminated,
            truncated=state.truncated | ((time == self.limit) & ~terminated),
        )

    def observation(self, state):
        return jnp.stack([state.time, state.length]).astype(jnp.float32)

    def legal_action_mask(self, state):
        return jnp.arange(self.num_actions) != state.time % self.num_actions

    def rewards(self, state):
        return state.reward[None]

    def terminated(self, state):
        return state.terminated

    def truncated(self, state):
        return state.truncated

    def current_player(self, state):
        return jnp.int32(0)
