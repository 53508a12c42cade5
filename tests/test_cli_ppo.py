"""The `azx` command with a PPO preset: the run directory, exact resumption, evaluation
with an interval, `load_run`, and the options that belong to the other algorithm.

Small runs of the real ppo_cartpole preset (a few iterations): the point is the plumbing.
"""

import json
import shutil

import jax
import numpy as np
import pytest
from _cli import trained_once
from test_cli import _azx, _leaves, _one_line_error

import azx


SMALL = ["--preset", "ppo_cartpole", "--log-every", "1", "--eval-every", "2"]
SMALL += ["--eval-episodes", "4", "--quiet"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A 2-iteration ppo_cartpole run, made by `azx train`."""
    return trained_once(tmp_path_factory, "ppo_cartpole", "--iterations", 2, *SMALL)


def test_train_writes_metrics_with_returns_and_a_curve(trained):
    config = json.loads((trained / "config.json").read_text())
    preset = azx.presets.from_dict(config["preset"])
    assert isinstance(preset.recipe, azx.presets.PPORecipe) and preset.env == "gymnax:CartPole-v1"
    # The preset anneals over its whole length: over the run's, given `--iterations`.
    assert azx.presets.get("ppo_cartpole").config.anneal_iterations == 1000
    assert preset.iterations == preset.config.anneal_iterations == 2
    # The untrained policy's evaluation comes first, as iteration 0.
    untrained, *records = azx.run.read_metrics(trained)
    assert untrained["iteration"] == untrained["env_steps"] == 0 and "loss" not in untrained
    assert untrained["eval"]["episodes"] == 4
    assert [r["iteration"] for r in records] == [1, 2]
    steps = preset.config.num_envs * preset.config.rollout_length
    for record in records:
        assert record["env_steps"] == record["iteration"] * steps
        for name in ("loss", "policy_loss", "value_loss", "entropy", "steps_per_s"):
            assert np.isfinite(record[name]), name
        # An untrained CartPole policy drops the pole within a few dozen steps: every
        # iteration of 4 x 128 steps ends episodes, whose mean length is their return.
        assert record["episodes"] > 4
        assert record["episode_return"] == pytest.approx(record["episode_length"])
    evaluation = records[-1]["eval"]
    assert evaluation["episodes"] == 4 and evaluation["unfinished"] == 0
    assert evaluation["return_low"] <= evaluation["return_mean"] <= evaluation["return_high"]
    assert sorted(p.name for p in (trained / "checkpoints").iterdir()) == ["2"]  # the eval
    assert (trained / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# Slow tier: the default run checks resuming exactly through test_cli.py (AlphaZero),
# test_fourth_algorithm.py and PPO's trainer (test_ppo_continuous.py).
@pytest.mark.slow
def test_resume_continues_exactly(trained, tmp_path):
    resumed = tmp_path / "resumed"
    shutil.copytree(trained, resumed)
    result = _azx("train", "--out", resumed, "--resume", "--iterations", 3, *SMALL[2:])
    assert result.exit_code == 0, result.output
    assert [r["iteration"] for r in azx.run.read_metrics(resumed)] == [0, 1, 2, 3]
    # The run's own preset: the anneal over the 2 iterations it was started for.
    preset = azx.load_run(resumed).preset
    assert preset.iterations == 3 and preset.config.anneal_iterations == 2
    trainer, state = preset.build(seed=0)
    straight = trainer.train(state, 3)
    for a, b in zip(_leaves(azx.load_run(resumed).state), _leaves(straight), strict=True):
        np.testing.assert_array_equal(a, b)


def test_eval_gives_the_mean_return_with_an_interval(trained, tmp_path):
    path = tmp_path / "eval.json"
    result = _azx("eval", "--run", trained, "--episodes", 6, "--greedy", "--json", path)
    assert result.exit_code == 0, result.output
    assert "return" in result.output and "over 6 episodes (greedy)" in result.output
    saved = json.loads(path.read_text())
    assert saved["iteration"] == 2 and saved["episodes"] == 6 and saved["greedy"]
    # The interval is mean ± t(0.975, 5) * s / sqrt(6) around the episodes' mean.
    run = azx.load_run(trained)
    again = run.play_episodes(6, key=jax.random.key(0), greedy=True)
    returns = np.asarray(again.returns, np.float64)
    assert saved["return_mean"] == pytest.approx(returns.mean())
    half = 2.5706 * returns.std(ddof=1) / np.sqrt(6)
    assert saved["return_high"] - saved["return_mean"] == pytest.approx(half, rel=1e-3)


def test_load_run_gives_the_policy_network(trained):
    run = azx.load_run(trained)
    assert run.algorithm == "ppo" and run.iteration == 2
    observation = run.env.observation(run.env.init(jax.random.key(0)))
    logits, value = run.net(observation)
    assert logits.shape == (2,) and value.shape == ()
    with pytest.raises(azx.run.RunError, match="needs an AlphaZero run"):
        run.agent()


def test_options_of_the_other_algorithm_are_refused(trained, tmp_path):
    _one_line_error(
        _azx("train", "--preset", "ppo_cartpole", "--out", tmp_path / "a", "--opponent", "random"),
        "--opponent applies to alphazero presets",
    )
    _one_line_error(
        _azx("train", "--out", tmp_path / "b", "--eval-episodes", 5),
        "--eval-episodes applies to ppo presets",
    )
    _one_line_error(_azx("eval", "--run", trained, "--games", 10), "--games applies to alphazero")
    _one_line_error(_azx("play", "--run", trained), "azx play", "ppo run")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_env_of_another_kind_than_the_preset_is_refused(tmp_path):
    _one_line_error(
        _azx("train", "--env", "gymnax:Pendulum-v1", "--preset", "ppo_minigrid", "--out", tmp_path),
        "--env",
        "continuous",
        "preset 'ppo_minigrid' trains 1-player with discrete actions",
    )


@pytest.mark.parametrize("name", azx.presets.names())
def test_presets_round_trip_through_json(name):
    preset = azx.presets.get(name)
    assert azx.presets.from_dict(json.loads(json.dumps(preset.to_dict()))) == preset


def test_progress_names_each_phase_and_logs_at_least_every_log_seconds(tmp_path, monkeypatch):
    import azx._loop

    # Off a terminal the phases are lines (on one they sit beside the progress bar), and a
    # progress line comes at least every `LOG_SECONDS`: here after every training call.
    monkeypatch.setattr(azx._loop, "LOG_SECONDS", 0.0)
    args = ["--preset", "ppo_cartpole", "--log-every", "1", "--eval-every", "1"]
    result = _azx("train", "--out", tmp_path, "--iterations", 2, "--eval-episodes", 4, *args)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    compiling = lines.index("compiling the training step…")
    evaluating = lines.index("evaluating the policy (4 episodes)…")
    assert compiling < evaluating
    assert lines[evaluating + 1].startswith("iteration 0 (untrained): return ")
    progress = [line for line in lines if line.startswith("iteration ") and "/2 |" in line]
    assert [line.split(" |")[0] for line in progress] == ["iteration 1/2", "iteration 2/2"]
    for line in progress:
        assert "steps/s" in line and "| eta " in line
