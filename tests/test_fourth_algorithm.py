"""A fourth algorithm in one module (`_fourth_algorithm`: REINFORCE on CartPole) trains,
evaluates, resumes and plays through `azx train`, `azx eval` and `azx.load_run`, with
nothing but its registered recipe and preset.
"""

import json
import shutil

import _fourth_algorithm as reinforce
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _cli import azx_cli, one_line_error, trained_once

import azx


TRAIN = ["--preset", "reinforce_cartpole", "--log-every", "1", "--eval-every", "2"]
TRAIN += ["--eval-episodes", "4", "--quiet"]


def _leaves(state):
    return [
        np.asarray(jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x)
        for x in jax.tree.leaves(state)
    ]


@pytest.fixture(scope="module", autouse=True)
def registered():
    """The algorithm registered for this module's tests only: the other tests of the same
    process see azx's own algorithms and presets (a test lists them)."""
    registries = (azx.presets._PRESETS, azx.presets.RECIPES)
    before = [dict(registry) for registry in registries]
    reinforce.register()
    yield
    for registry, entries in zip(registries, before, strict=True):
        registry.clear()
        registry.update(entries)


@pytest.fixture(scope="module")
def trained(registered, tmp_path_factory):
    """A 2-iteration reinforce_cartpole run, made by `azx train`."""
    return trained_once(tmp_path_factory, "reinforce", "--iterations", 2, *TRAIN)


def test_train_writes_the_algorithms_records_and_evaluations(trained):
    config = json.loads((trained / "config.json").read_text())
    assert config["preset"]["algorithm"] == "reinforce"
    preset = azx.presets.from_dict(config["preset"])
    assert isinstance(preset.recipe, reinforce.ReinforceRecipe) and preset.iterations == 2
    untrained, *records = azx.run.read_metrics(trained)
    assert untrained["iteration"] == 0 and untrained["eval"]["episodes"] == 4
    assert [r["iteration"] for r in records] == [1, 2]
    for record in records:
        assert record["env_steps"] == record["iteration"] * 8 * 32
        assert np.isfinite(record["loss"]) and 0 < record["episode_return"] <= 32
    evaluation = records[-1]["eval"]
    assert evaluation["episodes"] == 4 and evaluation["unfinished"] == 0
    assert evaluation["return_low"] <= evaluation["return_mean"] <= evaluation["return_high"]
    # The run reads back as the new algorithm's, with the evaluated checkpoint.
    run = azx.load_run(trained)
    assert run.algorithm == "reinforce" and run.iteration == 2
    assert sorted(p.name for p in (trained / "checkpoints").iterdir()) == ["2"]


def test_the_run_is_the_one_a_script_trains(trained):
    trainer, state = reinforce.PRESET.replace(iterations=2).build(seed=0)
    straight = eqx.filter_jit(trainer.train)(state, 2)
    for a, b in zip(_leaves(azx.load_run(trained).state), _leaves(straight), strict=True):
        np.testing.assert_array_equal(a, b)


def test_resume_continues_exactly(trained, tmp_path):
    resumed = tmp_path / "resumed"
    shutil.copytree(trained, resumed)
    result = azx_cli("train", "--out", resumed, "--resume", "--iterations", 3, *TRAIN[2:])
    assert result.exit_code == 0, result.output
    assert [r["iteration"] for r in azx.run.read_metrics(resumed)] == [0, 1, 2, 3]
    trainer, state = azx.load_run(resumed).preset.build(seed=0)
    straight = eqx.filter_jit(trainer.train)(state, 3)
    run = azx.load_run(resumed)
    assert run.iteration == 3
    for a, b in zip(_leaves(run.state), _leaves(straight), strict=True):
        np.testing.assert_array_equal(a, b)


def test_eval_is_the_loaded_runs_episodes(trained, tmp_path):
    path = tmp_path / "eval.json"
    result = azx_cli("eval", "--run", trained, "--episodes", 6, "--seed", 3, "--json", path)
    assert result.exit_code == 0, result.output
    saved = json.loads(path.read_text())
    assert saved["iteration"] == 2 and saved["episodes"] == 6 and not saved["greedy"]
    # The same episodes from the loaded run, and by hand from its policy network.
    run = azx.load_run(trained)
    played = run.play_episodes(6, key=jax.random.key(3))
    direct = azx.ppo.evaluate(run.env, run.net, num_episodes=6, key=jax.random.key(3))
    np.testing.assert_array_equal(played.returns, direct.returns)
    returns = np.asarray(played.returns, np.float64)
    assert np.all(np.isfinite(returns)) and np.all(returns >= 1)
    assert saved["return_mean"] == pytest.approx(returns.mean())
    assert saved["return_min"] == returns.min() and saved["return_max"] == returns.max()


def test_other_algorithms_options_are_refused(trained, tmp_path):
    one_line_error(azx_cli("eval", "--run", trained, "--games", 10), "--games applies to")
    one_line_error(azx_cli("play", "--run", trained), "azx play")


def test_register_recipe_refuses_what_is_not_a_recipe():
    with pytest.raises(ValueError, match="must be a dataclass subclassing"):
        azx.presets.register_recipe(azx.presets.AbstractPolicyRecipe)
    with pytest.raises(ValueError, match="taken by azx's own algorithms"):
        azx.presets.register_recipe(azx.presets.PPORecipe)
