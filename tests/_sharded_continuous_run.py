"""Run in a subprocess: PPO with continuous actions (Pendulum, tanh-squashed Normal) on
1 device and on a 4-device CPU mesh must train identically."""

import os


os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402


jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")

import azx  # noqa: E402


def main():
    assert len(jax.devices()) == 4, jax.devices()
    env = azx.envs.make("gymnax:Pendulum-v1")
    config = azx.ppo.Config(
        num_envs=8,
        rollout_length=12,
        num_minibatches=4,
        normalize_observations=True,
        action_distribution="tanh_normal",
        critic_learning_rate=1e-3,
    )
    trainer = azx.ppo.PPO(env, config)
    net = azx.ppo.ContinuousActorCritic((3,), 1, hidden_sizes=(16,), key=jax.random.key(0))
    state = trainer.init(net, key=jax.random.key(1))
    keys = jax.random.split(jax.random.key(2), 2)
    single = state
    for key in keys:
        single = eqx.filter_jit(trainer.step)(single, key)
    mesh = azx.parallel.make_mesh()
    sharded = azx.parallel.shard_state(state, mesh)
    for key in keys:
        sharded = eqx.filter_jit(azx.parallel.sharded_step(trainer, mesh))(sharded, key)
    for a, b in zip(jax.tree.leaves(single.env_state), jax.tree.leaves(sharded.env_state)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for a, b in zip(jax.tree.leaves(single.params), jax.tree.leaves(sharded.params)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    for a, b in zip(
        jax.tree.leaves(single.observation_stats), jax.tree.leaves(sharded.observation_stats)
    ):
        np.testing.assert_allclose(a, b, rtol=1e-5)
    for name in ("loss", "approx_kl", "entropy", "explained_variance"):
        np.testing.assert_allclose(
            getattr(single.metrics, name), getattr(sharded.metrics, name), rtol=1e-4, atol=1e-6
        )
    print("SHARDED OK")


if __name__ == "__main__":
    main()
