"""Run in a subprocess: Stochastic MuZero on 1 device and on a 4-device CPU mesh must train
alike (the same games and replay; parameters and metrics within float tolerance)."""

import os


os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402


jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")

import azx  # noqa: E402
import azx.muzero as mz  # noqa: E402


def main():
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
    keys = jax.random.split(jax.random.key(2), 3)
    single = state
    for key in keys:
        single = eqx.filter_jit(trainer.step)(single, key)
    mesh = azx.parallel.make_mesh()
    sharded = azx.parallel.shard_state(state, mesh)
    assert len(sharded.replay.position.sharding.device_set) == 4
    for key in keys:
        sharded = eqx.filter_jit(azx.parallel.sharded_step(trainer, mesh))(sharded, key)
    one, four = single.replay, sharded.replay
    for name in ("action", "terminated", "truncated"):
        np.testing.assert_array_equal(getattr(one.steps, name), getattr(four.steps, name))
    np.testing.assert_array_equal(one.position, four.position)
    for name in ("observation", "reward", "root_value", "policy_target"):
        np.testing.assert_allclose(
            getattr(one.steps, name), getattr(four.steps, name), rtol=1e-3, atol=1e-4
        )
    for a, b in zip(jax.tree.leaves(single.params), jax.tree.leaves(sharded.params)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
    assert int(single.metrics.updates_applied) == int(sharded.metrics.updates_applied) == 2
    for name in ("loss", "q_loss", "chance_loss", "commitment_loss", "root_value"):
        np.testing.assert_allclose(
            getattr(single.metrics, name), getattr(sharded.metrics, name), rtol=1e-4, atol=1e-6
        )
    print("STOCHASTIC MUZERO SHARDED OK")


if __name__ == "__main__":
    main()
