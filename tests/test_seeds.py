"""Several seeds as one program: `Preset.build_seeds` and `eqx.filter_vmap(trainer.train)`
train each seed as its own run would, within float tolerance (batching changes the order
of XLA's sums), for PPO and AlphaZero."""

import dataclasses

import equinox as eqx
import jax
import numpy as np
import pytest

import azx


def _leaves(state):
    """Every array of `state` as NumPy (keys as their data), with its path."""
    out = {}
    for path, leaf in jax.tree_util.tree_leaves_with_path(eqx.filter(state, eqx.is_array)):
        if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        out[jax.tree_util.keystr(path)] = np.asarray(leaf)
    return out


def _small_alphazero():
    preset = azx.presets.get("tic_tac_toe")
    config = dataclasses.replace(
        preset.config, num_envs=16, collect_steps=2, train_steps=2, batch_size=32
    )
    options = preset.recipe.search_options | {"num_simulations": 8}
    return preset.replace(config=config, search_options=options)


@pytest.mark.parametrize("make", [lambda: azx.presets.get("ppo_cartpole"), _small_alphazero])
def test_vmapped_seeds_train_as_their_own_runs(make):
    preset, seeds, iterations = make(), [0, 5], 3
    trainer, states = preset.build_seeds(seeds)
    assert int(states.iteration.shape[0]) == len(seeds)
    trained = eqx.filter_jit(eqx.filter_vmap(trainer.train))(states, iterations)
    together = [_leaves(azx.presets.take_seed(trained, i)) for i in range(len(seeds))]
    for index, seed in enumerate(seeds):
        _, state = preset.build(seed=seed)
        alone = _leaves(eqx.filter_jit(trainer.train)(state, iterations))
        assert alone.keys() == together[index].keys()
        for path, expected in alone.items():
            actual = together[index][path]
            if np.issubdtype(expected.dtype, np.floating):
                np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5, err_msg=path)
            else:  # counters, actions, keys, boards: the same
                np.testing.assert_array_equal(actual, expected, err_msg=path)
    assert int(trained.iteration[0]) == iterations
    # Independent agents: the two seeds' networks differ.
    first, second = (azx.presets.take_seed(trained.net, i) for i in range(2))
    assert not np.array_equal(
        *(jax.tree.leaves(eqx.filter(n, eqx.is_array))[0] for n in (first, second))
    )


def test_build_seeds_needs_a_seed():
    with pytest.raises(ValueError, match="at least one seed"):
        azx.presets.get("ppo_cartpole").build_seeds([])
