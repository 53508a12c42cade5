"""`azx train --set KEY=VALUE` and `--env`: a preset changed from the command line trains
as the same preset changed in Python, `config.json` records the change, `--resume`
continues with it, and a key, value or environment that does not fit is one clear error
before anything is written."""

import dataclasses
import json

import jax
import numpy as np
import pytest
from _cli import azx_cli, one_line_error, trained_once

import azx


PPO = ["--preset", "ppo_cartpole", "--log-every", "1", "--eval-every", "2", "--quiet"]
SETS = ["--set", "config.num_envs=8", "--set", "config.learning_rate=0.001"]
SETS += ["--set", "network_options.hidden_sizes=[32, 32]", "--set", "eval_episodes=3"]


@pytest.fixture(scope="module")
def changed(tmp_path_factory):
    return trained_once(tmp_path_factory, "set", "--iterations", 2, *PPO, *SETS)


def _preset(out):
    return azx.presets.from_dict(json.loads((out / "config.json").read_text())["preset"])


def test_set_changes_the_preset_and_config_json_records_it(changed):
    preset = _preset(changed)
    base = azx.presets.get("ppo_cartpole")
    assert preset.config.num_envs == 8 and preset.config.learning_rate == 0.001
    assert preset.network_options["hidden_sizes"] == (32, 32) and preset.recipe.eval_episodes == 3
    # Everything not set is the preset's (the run's length aside).
    expected = base.replace(
        config=dataclasses.replace(
            base.config, num_envs=8, learning_rate=0.001, anneal_iterations=2
        ),
        network_options={**base.network_options, "hidden_sizes": (32, 32)},
        eval_episodes=3,
        iterations=2,
        eval_every=2,
        log_every=1,
    )
    assert preset == expected
    # The trained network has the width that was set: its first layer maps to 32 units.
    run = azx.load_run(changed)
    widths = {leaf.shape[0] for leaf in jax.tree.leaves(run.net) if np.ndim(leaf) == 2}
    assert 32 in widths and 64 not in widths, widths


def test_resume_keeps_the_settings_and_refuses_other_ones(changed, tmp_path):
    result = azx_cli("train", "--out", changed, "--resume", "--iterations", 3, "--quiet")
    assert result.exit_code == 0, result.output
    preset = _preset(changed)
    assert preset.iterations == 3 and preset.config.learning_rate == 0.001
    assert azx.run.read_metrics(changed)[-1]["iteration"] == 3
    # The same settings again are accepted; evaluation settings may change; a training
    # setting may not.
    again = ["--resume", "--iterations", 3, "--quiet", *SETS, "--set", "eval_episodes=5"]
    assert azx_cli("train", "--out", changed, *again).exit_code == 0
    result = azx_cli(
        "train", "--out", changed, "--resume", "--set", "config.learning_rate=0.01", "--quiet"
    )
    one_line_error(result, "--set", "learning_rate", "0.001", "0.01")


@pytest.mark.parametrize(
    "setting, needles",
    [
        ("config.nope=1", ["--set", "'config.nope'", "learning_rate"]),
        ("nope=1", ["--set", "'nope'", "eval_episodes"]),
        ("config.learning_rate=fast", ["--set", "learning_rate", "float", "'fast'"]),
        ("config.num_envs=2.5", ["--set", "num_envs", "int", "2.5"]),
        ("learning_rate", ["--set", "KEY=VALUE"]),
        ("algorithm=alphazero", ["--set", "KEY=VALUE"]),
        ("config.num_envs=0", ["--set", "num_envs"]),
    ],
)
def test_a_setting_that_does_not_fit_is_refused_before_anything_is_written(
    tmp_path, setting, needles
):
    out = tmp_path / "run"
    result = azx_cli("train", "--out", out, "--iterations", 1, *PPO, "--set", setting)
    one_line_error(result, *needles)
    assert not out.exists()


@pytest.mark.slow  # (the refusals of other kinds stay in the default run)
def test_env_trains_a_preset_on_another_environment_of_its_kind(tmp_path):
    out = tmp_path / "acrobot"
    args = ["--env", "gymnax:Acrobot-v1", "--iterations", 1, *PPO, "--set", "config.num_envs=4"]
    result = azx_cli("train", "--out", out, *args, "--set", "eval_episodes=2")
    assert result.exit_code == 0, result.output
    assert _preset(out).env == "gymnax:Acrobot-v1" and _preset(out).name == "ppo_cartpole"
    run = azx.load_run(out)
    assert run.env.num_actions == 3  # Acrobot's, not CartPole's 2
    # The resumed run stays on it; another environment is refused.
    assert azx_cli("train", "--out", out, "--resume", "--iterations", 2, "--quiet").exit_code == 0
    result = azx_cli("train", "--out", out, "--resume", "--env", "gymnax:CartPole-v1")
    one_line_error(result, "--env", "Acrobot")


def test_env_names_itself_in_the_description():
    preset = azx.presets.get("ppo_cartpole")
    moved = preset.changed(env="gymnax:Acrobot-v1")
    assert moved.description == "gymnax:Acrobot-v1, ppo_cartpole's setup"
    assert moved.changed(settings=["description=mine"]).description == "mine"
    assert preset.changed(env=preset.env) is preset


@pytest.mark.parametrize(
    "preset, env, needles",
    [
        ("ppo_cartpole", "gymnax:Pendulum-v1", ["--env", "continuous", "discrete"]),
        ("tic_tac_toe", "gymnax:CartPole-v1", ["--env", "1-player", "2-player"]),
        ("ppo_cartpole", "gymnax:NoSuchGame-v0", ["--env", "NoSuchGame"]),
    ],
)
def test_env_of_another_kind_is_refused(tmp_path, preset, env, needles):
    result = azx_cli("train", "--out", tmp_path / "x", "--preset", preset, "--env", env)
    one_line_error(result, *needles)
    assert not (tmp_path / "x").exists()


def test_python_train_takes_the_same_settings(changed, tmp_path):
    # The run's own settings resume it (here with nothing left to train); another value of
    # one of them is refused, naming it.
    settings = SETS[1::2]
    run = azx.run.train(changed, resume=True, settings=settings, quiet=True)
    assert run.preset.config.num_envs == 8 and run.preset.recipe.eval_episodes == 3
    changing = [*settings, "config.learning_rate=0.01"]
    with pytest.raises(
        azx.run.RunError,
        match=r"`settings` would change config\.learning_rate \(0\.001 there, 0\.01 here\)",
    ):
        azx.run.train(changed, resume=True, settings=changing, quiet=True)
    with pytest.raises(azx.run.RunError, match="`nope` is not an option"):
        azx.run.train(tmp_path / "bad", preset="ppo_cartpole", nope=1)
    with pytest.raises(azx.run.RunError, match="`eval_games` applies to alphazero"):
        azx.run.train(tmp_path / "bad", preset="ppo_cartpole", eval_games=10)
