"""Run in a subprocess as `python _muzero_sharded_run.py [muzero | stochastic]`: MuZero
(the default) or Stochastic MuZero on 1 device and on a 4-device CPU mesh must train alike
(the same games and replay; parameters and metrics within float tolerance)."""

import os
import sys


os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"

import jax  # noqa: E402
import numpy as np  # noqa: E402


jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")

from _four_devices import train_on_one_and_four  # noqa: E402

import azx  # noqa: E402
import azx.muzero as mz  # noqa: E402


def muzero():
    """The tests' small CartPole MuZero, and its loss metrics."""
    from test_muzero import _trainer

    trainer, state = _trainer()
    return trainer, state, ("loss", "value_loss", "reward_loss")


def stochastic_muzero():
    """A small Stochastic MuZero on the dice race, and its loss metrics."""
    env = azx.envs.DiceRace(goal=5, moves=4)
    config = mz.Config(
        num_envs=8,
        collect_steps=8,
        train_steps=2,
        batch_size=16,
        buffer_capacity=8 * 32,
        unroll_steps=3,
        td_steps=4,
    )
    trainer = mz.StochasticMuZero(env, azx.search.Gumbel(8), config)
    net = mz.stochastic_mlp_net(
        env.observation_shape, 2, num_codes=4, embedding_size=8, width=16, key=jax.random.key(0)
    )
    state = trainer.init(net, key=jax.random.key(1))
    return trainer, state, ("loss", "q_loss", "chance_loss", "commitment_loss")


ALGORITHMS = {
    "muzero": (muzero, "MUZERO SHARDED OK"),
    "stochastic": (stochastic_muzero, "STOCHASTIC MUZERO SHARDED OK"),
}


def main(algorithm: str = "muzero"):
    make, done = ALGORITHMS[algorithm]
    trainer, state, losses = make()
    keys = jax.random.split(jax.random.key(2), 3)
    single, sharded = train_on_one_and_four(trainer, state, keys)
    # The same games (actions, episode ends, ring positions exactly); values computed with
    # parameters that differ by float rounding (gradients summed over shards in another
    # order) agree within tolerance.
    one, four = single.replay, sharded.replay
    for name in ("action", "terminated", "truncated"):
        np.testing.assert_array_equal(getattr(one.steps, name), getattr(four.steps, name))
    np.testing.assert_array_equal(one.written, four.written)
    np.testing.assert_array_equal(one.position, four.position)
    for name in ("observation", "reward", "root_value", "policy_target"):
        np.testing.assert_allclose(
            getattr(one.steps, name), getattr(four.steps, name), rtol=1e-3, atol=1e-4
        )
    for a, b in zip(jax.tree.leaves(single.params), jax.tree.leaves(sharded.params)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
    assert int(single.metrics.updates_applied) == int(sharded.metrics.updates_applied) == 2
    assert int(single.metrics.replay_segments) == int(sharded.metrics.replay_segments) > 0
    for name in (*losses, "root_value"):
        np.testing.assert_allclose(
            getattr(single.metrics, name), getattr(sharded.metrics, name), rtol=1e-4, atol=1e-6
        )
    print(done)


if __name__ == "__main__":
    main(*sys.argv[1:])
