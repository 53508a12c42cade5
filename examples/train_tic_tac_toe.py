"""Train AlphaZero on tic-tac-toe on a CPU and watch it learn.

    python examples/train_tic_tac_toe.py

Every few iterations it prints the losses and the raw network's results (argmax of its
policy, no search) against a uniformly random player, as first and as second player.
"""

import time

import equinox as eqx
import jax
import jax.numpy as jnp

import azx


ITERATIONS, EVAL_EVERY, EVAL_GAMES = 400, 50, 500


@eqx.filter_jit
def versus_random(env, net, key, net_moves_first: bool):
    """Wins, draws and losses of the greedy network against a random player."""
    init_key, play_key = jax.random.split(key)
    state = jax.vmap(env.init)(jax.random.split(init_key, EVAL_GAMES))
    first = jax.vmap(env.current_player)(state)
    net_player = first if net_moves_first else 1 - first

    def move(carry, key):
        state, result = carry
        legal = jax.vmap(env.legal_action_mask)(state)
        logits, _ = jax.vmap(net)(jax.vmap(env.observation)(state))
        greedy = jnp.argmax(jnp.where(legal, logits, -jnp.inf), axis=-1)
        random = jax.random.categorical(key, jnp.where(legal, 0.0, -jnp.inf), axis=-1)
        action = jnp.where(jax.vmap(env.current_player)(state) == net_player, greedy, random)
        state = jax.vmap(env.step)(state, action, jax.random.split(key, EVAL_GAMES))
        reward = jnp.take_along_axis(jax.vmap(env.rewards)(state), net_player[:, None], axis=1)
        return (state, result + reward[:, 0]), None

    carry = (state, jnp.zeros(EVAL_GAMES, jnp.float32))
    (_, result), _ = jax.lax.scan(move, carry, jax.random.split(play_key, 9))
    return jnp.sum(result > 0), jnp.sum(result == 0), jnp.sum(result < 0)


def main():
    env = azx.envs.make("tic_tac_toe")
    net = azx.nets.MLP(env.observation_shape, env.num_actions, width=64, key=jax.random.key(0))
    config = azx.alphazero.Config(
        num_envs=64,
        collect_steps=8,
        train_steps=8,
        batch_size=256,
        buffer_capacity=4096,
        learning_rate=3e-3,
    )
    trainer = azx.alphazero.AlphaZero(env, azx.search.PUCT(num_simulations=64), config)
    state = trainer.init(net, key=jax.random.key(1))
    train = eqx.filter_jit(trainer.train)

    start = time.perf_counter()
    for done in range(0, ITERATIONS, EVAL_EVERY):
        state = train(state, EVAL_EVERY)
        metrics = state.metrics
        first = versus_random(env, state.net, jax.random.key(done), True)
        second = versus_random(env, state.net, jax.random.key(done), False)
        print(
            f"iteration {done + EVAL_EVERY:4d}  {time.perf_counter() - start:6.1f}s  "
            f"loss {float(metrics.loss):.3f} (policy {float(metrics.policy_loss):.3f}, "
            f"value {float(metrics.value_loss):.3f})  vs random as first W/D/L "
            f"{'/'.join(str(int(x)) for x in first)}, as second "
            f"{'/'.join(str(int(x)) for x in second)}",
            flush=True,
        )


if __name__ == "__main__":
    main()
