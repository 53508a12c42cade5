"""Run in a subprocess: PPO with continuous actions (Pendulum, tanh-squashed Normal) on
1 device and on a 4-device CPU mesh must train identically."""

import os


os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"

import jax  # noqa: E402
import numpy as np  # noqa: E402


jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")

from _four_devices import train_on_one_and_four  # noqa: E402

import azx  # noqa: E402


def main():
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
    single, sharded = train_on_one_and_four(trainer, state, jax.random.split(jax.random.key(2), 2))
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
