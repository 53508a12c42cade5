"""Several seeds as one program: `Preset.build_seeds` and `azx.parallel.over_seeds` train
each seed as its own run would: bit for bit one after another, within float tolerance
under `vmap` (batching changes the order of XLA's sums), for PPO and AlphaZero."""

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


@pytest.mark.parametrize(
    ("make", "vmap"),
    [
        # The default run trains ppo_cartpole's seeds under `vmap` through `azx train
        # --seeds` and compares each with its own run (tests/test_cli_seeds.py); the slow
        # tier makes every check here. One after another, seeds are bit for bit their own
        # runs.
        pytest.param(
            lambda: azx.presets.get("ppo_cartpole"), True, id="ppo-vmap", marks=pytest.mark.slow
        ),
        pytest.param(
            lambda: azx.presets.get("ppo_cartpole"),
            False,
            id="ppo-one-after-another",
            marks=pytest.mark.slow,
        ),
        # AlphaZero vmaps its seeds on accelerators only (`Preset.vmaps_seeds`).
        pytest.param(_small_alphazero, True, id="alphazero-vmap", marks=pytest.mark.slow),
        pytest.param(
            _small_alphazero, False, id="alphazero-one-after-another", marks=pytest.mark.slow
        ),
    ],
)
def test_seeds_train_as_their_own_runs(make, vmap):
    preset, seeds, iterations = make(), [0, 5], 3
    trainer, states = preset.build_seeds(seeds, vmap=vmap)
    assert int(states.iteration.shape[0]) == len(seeds)
    train = azx.parallel.over_seeds(trainer.train, vmap=vmap)
    trained = eqx.filter_jit(train)(states, iterations)
    together = [_leaves(azx.presets.take_seed(trained, i)) for i in range(len(seeds))]
    for index, seed in enumerate(seeds):
        alone_trainer, state = preset.build(seed=seed)
        alone = _leaves(eqx.filter_jit(alone_trainer.train)(state, iterations))
        assert alone.keys() == together[index].keys()
        for path, expected in alone.items():
            actual = together[index][path]
            if not vmap:  # the seed's own program: the same bits
                np.testing.assert_array_equal(actual, expected, err_msg=path)
            elif np.issubdtype(expected.dtype, np.floating):
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
    with pytest.raises(ValueError, match="at least one state"):
        azx.presets.stack_seeds([])


def test_stack_seeds_inverts_take_seed():
    parts = [azx.presets.get("ppo_cartpole").build(seed=seed)[1] for seed in (3, 4)]
    stacked = azx.presets.stack_seeds(parts)
    for index, part in enumerate(parts):
        assert _leaves(azx.presets.take_seed(stacked, index)).keys() == _leaves(part).keys()
        for path, leaf in _leaves(part).items():
            np.testing.assert_array_equal(
                _leaves(azx.presets.take_seed(stacked, index))[path], leaf
            )


def test_alphazero_maps_its_seeds_on_the_cpu_and_vmaps_them_on_accelerators():
    # On the CPU, vmapped searches cost more than seeds one after another (benchmarks.seeds).
    alphazero, ppo = azx.presets.get("tic_tac_toe"), azx.presets.get("ppo_cartpole")
    assert not alphazero.vmaps_seeds("cpu") and alphazero.vmaps_seeds("gpu")
    assert ppo.vmaps_seeds("cpu") and ppo.vmaps_seeds("gpu")
