"""Network-vs-random matches for the learning tests (the full arena lives in azx.arena)."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp

from azx.search import ILLEGAL_LOGIT


@functools.partial(eqx.filter_jit, donate="none")
def play_vs_random(env, net, key, num_games: int, net_moves_first: bool, max_moves: int = 400):
    """Returns the net's result per game (+1 win, 0 draw, -1 loss), greedy argmax policy."""
    init_key, play_key = jax.random.split(key)
    state = jax.vmap(env.init)(jax.random.split(init_key, num_games))
    net_player = jnp.where(net_moves_first, 1, 0) * jax.vmap(env.current_player)(state) + (
        jnp.where(net_moves_first, 0, 1) * (1 - jax.vmap(env.current_player)(state))
    )

    def body(carry, key):
        state, result = carry
        legal = jax.vmap(env.legal_action_mask)(state)
        logits, _ = jax.vmap(net)(jax.vmap(env.observation)(state))
        greedy = jnp.argmax(jnp.where(legal, logits, ILLEGAL_LOGIT), axis=-1)
        action_key, step_key = jax.random.split(key)
        random = jax.random.categorical(action_key, jnp.where(legal, 0.0, -jnp.inf), axis=-1)
        mover = jax.vmap(env.current_player)(state)
        action = jnp.where(mover == net_player, greedy, random)
        state = jax.vmap(env.step)(state, action, jax.random.split(step_key, num_games))
        rewards = jax.vmap(env.rewards)(state)
        result = result + jnp.take_along_axis(rewards, net_player[:, None], axis=1)[:, 0]
        return (state, result), None

    (state, result), _ = jax.lax.scan(
        body, (state, jnp.zeros(num_games, jnp.float32)), jax.random.split(play_key, max_moves)
    )
    return result, jax.vmap(env.terminated)(state)
