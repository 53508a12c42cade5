"""Run in a subprocess: 1 device vs a 4-device CPU mesh must train identically, for
AlphaZero and for PPO (feed-forward and recurrent)."""

import dataclasses
import os


os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402


jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")

from _four_devices import train_on_one_and_four  # noqa: E402
from _games import Countdown  # noqa: E402
from _trainer_setup import tic_tac_toe  # noqa: E402

import azx  # noqa: E402


def check_ppo(net_kind: str, **config):
    """PPO on one device and on four: the same episodes, parameters and statistics."""
    env = Countdown(max_length=6, limit=4)
    trainer = azx.ppo.PPO(env, azx.ppo.Config(**config))
    if net_kind == "ff":
        net = azx.nets.ActorCritic((2,), 3, hidden_sizes=(16,), key=jax.random.key(0))
    else:
        net = azx.nets.RecurrentActorCritic((2,), 3, hidden_size=8, key=jax.random.key(0))
    state = trainer.init(net, key=jax.random.key(1))
    single, sharded = train_on_one_and_four(trainer, state, jax.random.split(jax.random.key(2), 2))
    for a, b in zip(jax.tree.leaves(single.env_state), jax.tree.leaves(sharded.env_state)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(single.previous_action, sharded.previous_action)
    for a, b in zip(jax.tree.leaves(single.params), jax.tree.leaves(sharded.params)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    for a, b in zip(
        jax.tree.leaves(single.observation_stats), jax.tree.leaves(sharded.observation_stats)
    ):
        np.testing.assert_allclose(a, b, rtol=1e-5)
    assert int(single.metrics.episodes) == int(sharded.metrics.episodes) > 0
    for name in ("loss", "approx_kl", "explained_variance", "episode_return"):
        np.testing.assert_allclose(
            getattr(single.metrics, name), getattr(sharded.metrics, name), rtol=1e-4, atol=1e-6
        )


def check_seeds():
    """Several seeds stacked: trained on four devices (each device its rows of every
    seed), all at once or one after another, as on one device under `vmap`."""
    env = Countdown(max_length=6, limit=4)
    trainer = azx.ppo.PPO(env, azx.ppo.Config(num_envs=8, rollout_length=12, num_minibatches=4))

    def build(seed):
        net = azx.nets.ActorCritic((2,), 3, hidden_sizes=(16,), key=jax.random.key(seed))
        return trainer.init(net, key=jax.random.key(seed + 10))

    parts = [build(seed) for seed in (0, 1, 2)]
    states = azx.presets.stack_seeds(parts)
    one, one_history = eqx.filter_jit(azx.parallel.over_seeds(trainer.train_and_record))(states, 2)
    mesh = azx.parallel.make_mesh()
    sharded = azx.parallel.shard_state(states, mesh, seeds=True)
    assert len(sharded.env_state.time.sharding.device_set) == 4
    for vmap_seeds in (True, False):
        train = azx.parallel.sharded_train(trainer, mesh, seeds=True, vmap_seeds=vmap_seeds)
        four, four_history = eqx.filter_jit(train)(sharded, 2)
        for a, b in zip(jax.tree.leaves(one.env_state), jax.tree.leaves(four.env_state)):
            np.testing.assert_array_equal(a, b)
        for a, b in zip(jax.tree.leaves(one.params), jax.tree.leaves(four.params)):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(one_history.loss, four_history.loss, rtol=1e-4, atol=1e-6)
        assert four_history.loss.shape == (3, 2)
    # The seeds are independent agents.
    first_layer = jax.tree.leaves(one.params)[0]
    assert not np.allclose(first_layer[0], first_layer[1])


def main():
    assert len(jax.devices()) == 4, jax.devices()
    check_seeds()
    check_ppo(
        "ff",
        num_envs=8,
        rollout_length=12,
        num_minibatches=4,
        normalize_observations=True,
        normalize_advantages="batch",
    )
    check_ppo("recurrent", num_envs=16, rollout_length=8, num_minibatches=4)
    recurrent = azx.ppo.PPO(Countdown(), azx.ppo.Config(num_envs=8, num_minibatches=4))
    state = recurrent.init(
        azx.nets.RecurrentActorCritic((2,), 3, hidden_size=4, key=jax.random.key(0)),
        key=jax.random.key(1),
    )
    try:
        azx.parallel.sharded_step(recurrent, azx.parallel.make_mesh())(state, jax.random.key(0))
    except ValueError as error:
        assert "must divide the environments on each device (2)" in str(error), error
    else:
        raise AssertionError("4 minibatches of 2 recurrent rows per device were accepted")
    # With playout-cap randomisation and root values in the value targets: every shard
    # must draw the same full-or-fast coin per move, and the policy term's count of
    # positions with a target is summed over the shards.
    trainer, state = tic_tac_toe(num_envs=8)
    config = dataclasses.replace(
        trainer.config,
        fast_search_simulations=4,
        full_search_probability=0.5,
        root_value_weight=0.5,
    )
    trainer = azx.alphazero.AlphaZero(trainer.env, trainer.search, config)
    keys = jax.random.split(jax.random.key(11), 3)
    single, sharded = train_on_one_and_four(trainer, state, keys)

    # Same self-play games, move by move: positions, legal moves and game states agree
    # exactly; the search's policy targets and the parameters up to float summation order.
    experience_1, experience_4 = single.buffer.experience, sharded.buffer.experience
    np.testing.assert_array_equal(experience_1.observation, experience_4.observation)
    np.testing.assert_array_equal(experience_1.legal_action_mask, experience_4.legal_action_mask)
    np.testing.assert_array_equal(single.buffer.has_target, sharded.buffer.has_target)
    np.testing.assert_allclose(experience_1.policy_target, experience_4.policy_target, atol=1e-5)
    for a, b in zip(jax.tree.leaves(single.env_state), jax.tree.leaves(sharded.env_state)):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(jax.tree.leaves(single.params), jax.tree.leaves(sharded.params)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert int(single.metrics.updates_applied) > 0
    np.testing.assert_allclose(single.metrics.loss, sharded.metrics.loss, rtol=1e-5)
    assert int(single.metrics.episodes) == int(sharded.metrics.episodes)
    # Each of the 12 moves was a full search in every game or a fast one in every game,
    # and both kinds ran.
    with_target = np.sum(experience_1.policy_target[:, :12], axis=-1) > 0
    assert np.all(with_target == with_target[:1]) and 0 < with_target[0].mean() < 1

    # With past opponents: every shard draws the same past version per move, and the rows
    # that play it are the same global rows (every second one here).
    trainer, state = tic_tac_toe(num_envs=8)
    config = dataclasses.replace(
        trainer.config, past_opponent_fraction=0.5, past_opponents=2, past_opponent_interval=1
    )
    trainer = azx.alphazero.AlphaZero(trainer.env, trainer.search, config)
    state = trainer.init(state.net, key=jax.random.key(1))
    single, sharded = train_on_one_and_four(trainer, state, keys)
    np.testing.assert_array_equal(
        single.buffer.experience.observation, sharded.buffer.experience.observation
    )
    for a, b in zip(jax.tree.leaves(single.env_state), jax.tree.leaves(sharded.env_state)):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(jax.tree.leaves(single.past_params), jax.tree.leaves(sharded.past_params)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # Odd rows have positions without a policy target (the past network's moves).
    no_target = np.sum(single.buffer.experience.policy_target[:, :12], axis=-1) == 0
    assert not no_target[0::2].any() and no_target[1::2].any()

    mesh = azx.parallel.make_mesh()
    bad_trainer, _ = tic_tac_toe(num_envs=6)
    try:
        azx.parallel.sharded_step(bad_trainer, mesh)
    except ValueError as error:
        assert "num_envs (6) must be divisible by the number of devices" in str(error), error
    else:
        raise AssertionError("num_envs=6 on 4 devices was accepted")
    try:
        azx.parallel.shard_state(tic_tac_toe(num_envs=6)[1], mesh)
    except ValueError as error:
        assert "has 6 rows, which 4 devices cannot split evenly" in str(error), error
    else:
        raise AssertionError("a state of 6 rows was placed on 4 devices")

    gathered = azx.parallel.gather(sharded)
    assert gathered.buffer.position.sharding.device_set == {jax.devices()[0]}
    for a, b in zip(jax.tree.leaves(sharded.buffer), jax.tree.leaves(gathered.buffer), strict=True):
        np.testing.assert_array_equal(a, b)
    key_data = jax.random.key_data
    np.testing.assert_array_equal(key_data(sharded.key), key_data(gathered.key))
    print("SHARDED OK")


if __name__ == "__main__":
    main()
