"""Shared helpers of the search tests, and a pytree comparison other tests use too (this
module holds no tests itself)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

import azx
from azx.envs import AbstractEnv


def assert_trees_equal(a, b):
    """Two pytrees have the same structure and exactly the same leaves (keys by their data)."""
    leaves_a, leaves_b = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(leaves_a) == len(leaves_b)
    for x, y in zip(leaves_a, leaves_b):
        if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
            x, y = jax.random.key_data(x), jax.random.key_data(y)
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


class ChainState(eqx.Module):
    position: Int[Array, ""]
    steps: Int[Array, ""]
    rewards: Float[Array, "1"]
    terminated: Bool[Array, ""]


class RewardChain(AbstractEnv):
    """A deterministic single-player game with a reward on every move.

    Eleven positions; from position p, action a (of 4) leads to (3p + 5a + 1) mod 11 and
    pays ((7p + 3a) mod 5) / 4 - 0.4. One action per position is illegal. The game ends
    after `length` moves. Small enough to search exhaustively, rich enough that returns
    depend on the discount.
    """

    name = "reward_chain"

    length: int = eqx.field(static=True)
    num_actions: int = eqx.field(static=True)
    num_players: int = eqx.field(static=True)
    observation_shape: tuple[int, ...] = eqx.field(static=True)
    observation_dtype: jnp.dtype = eqx.field(static=True)

    def __init__(self, length: int = 6):
        self.length = length
        self.num_actions = 4
        self.num_players = 1
        self.observation_shape = (11 + length + 1,)
        self.observation_dtype = jnp.dtype(jnp.float32)

    def init(self, key):
        position = jax.random.randint(key, (), 0, 11, dtype=jnp.int32)
        return ChainState(position, jnp.int32(0), jnp.zeros(1, jnp.float32), jnp.bool_(False))

    def step(self, state, action, key):
        del key
        action = action.astype(jnp.int32)
        position = (3 * state.position + 5 * action + 1) % 11
        reward = ((7 * state.position + 3 * action) % 5).astype(jnp.float32) / 4.0 - 0.4
        steps = state.steps + 1
        done = state.terminated
        return ChainState(
            position=jnp.where(done, state.position, position),
            steps=jnp.where(done, state.steps, steps),
            rewards=jnp.where(done, 0.0, reward)[None],
            terminated=done | (steps >= self.length),
        )

    def observation(self, state):
        return jnp.concatenate(
            [
                jax.nn.one_hot(state.position, 11, dtype=jnp.float32),
                jax.nn.one_hot(state.steps, self.length + 1, dtype=jnp.float32),
            ]
        )

    def legal_action_mask(self, state):
        return ((state.position + jnp.arange(4)) % 4 != 3) | state.terminated

    def rewards(self, state):
        return state.rewards

    def terminated(self, state):
        return state.terminated

    def truncated(self, state):
        return jnp.bool_(False)

    def current_player(self, state):
        return jnp.int32(0)


@eqx.filter_jit
def random_positions(env: AbstractEnv, key, batch_size: int, max_moves: int):
    """Positions reached by 0..max_moves random legal moves, never terminal."""

    def one(key):
        init_key, length_key, play_key = jax.random.split(key, 3)
        length = jax.random.randint(length_key, (), 0, max_moves + 1)

        def move(state, inputs):
            index, move_key = inputs
            action_key, step_key = jax.random.split(move_key)
            logits = jnp.where(env.legal_action_mask(state), 0.0, -jnp.inf)
            action = jax.random.categorical(action_key, logits).astype(jnp.int32)
            after = env.step(state, action, step_key)
            keep = (index < length) & ~env.terminated(after)
            return jax.tree.map(lambda new, old: jnp.where(keep, new, old), after, state), None

        moves = (jnp.arange(max_moves), jax.random.split(play_key, max_moves))
        return jax.lax.scan(move, env.init(init_key), moves)[0]

    return jax.vmap(one)(jax.random.split(key, batch_size))


MAX_MOVES = 12


@eqx.filter_jit
def _play(env: AbstractEnv, moves: Int[Array, "batch max_moves"]):
    def one(moves):
        def move(state, action):  # -1 pads the shorter move lists
            after = env.step(state, jnp.maximum(action, 0), jax.random.key(0))
            return jax.tree.map(
                lambda new, old: jnp.where(action >= 0, new, old), after, state
            ), None

        return jax.lax.scan(move, env.init(jax.random.key(0)), moves)[0]

    return jax.vmap(one)(moves)


def play(env: AbstractEnv, move_lists: list[list[int]]):
    """The batch of positions reached by each list of moves from the start of `env`."""
    padded = [moves + [-1] * (MAX_MOVES - len(moves)) for moves in move_lists]
    return _play(env, jnp.asarray(padded, jnp.int32))


@eqx.filter_jit
def search_uniform(search, env: AbstractEnv, states, key):
    """One search from a fresh tree with no knowledge but the rules: a uniform prior and
    zero value."""
    net = azx.nets.UniformPolicy(env.num_actions)
    return search(net, env, search.init(env, states.current_player.shape[0]), states, key=key)


def mlp(env: AbstractEnv, seed: int, bounded_value: bool = True):
    return azx.nets.MLP(
        env.observation_shape,
        env.num_actions,
        width=32,
        depth=2,
        bounded_value=bounded_value,
        key=jax.random.key(seed),
    )
