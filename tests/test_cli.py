"""The `azx` command end to end: train, resume, Ctrl-C, eval, play, load_run, bad input.

Small runs of the real tic_tac_toe preset (2-4 iterations, few evaluation games): the
point is the plumbing (files, checkpoints, exact resumption, exit codes), not strength.
"""

import dataclasses
import json
import signal
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _cli import (
    SMALL,
    azx_cli as _azx,
    one_line_error as _one_line_error,
)

import azx


def _leaves(state):
    return [
        np.asarray(jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x)
        for x in jax.tree.leaves(state)
    ]


def test_train_writes_config_metrics_checkpoints_and_curve(trained):
    config = json.loads((trained / "config.json").read_text())
    assert config["seed"] == 0
    assert azx.presets.Preset.from_dict(config["preset"]).env == "tic_tac_toe"
    # The untrained agent's evaluation comes first, as iteration 0.
    untrained, *records = azx.run.read_metrics(trained)
    assert untrained["iteration"] == untrained["env_steps"] == 0 and "loss" not in untrained
    assert untrained["eval"]["search"]["random"]["games"] == 10
    assert [r["iteration"] for r in records] == [1, 2]
    preset = azx.presets.get("tic_tac_toe")
    moves = preset.config.num_envs * preset.config.collect_steps
    for record in records:
        assert record["env_steps"] == record["iteration"] * moves
        for name in ("loss", "policy_loss", "value_loss", "selfplay_steps_per_s"):
            assert np.isfinite(record[name]), name
        assert record["loss"] == pytest.approx(
            record["policy_loss"] + preset.config.value_loss_weight * record["value_loss"], rel=1e-5
        )
        search = record["eval"]["search"]["random"]
        assert search["games"] == 10
        assert search["wins"] + search["draws"] + search["losses"] == 10
        assert sum(search["as_first"]) == sum(search["as_second"]) == 5
        assert search["score_low"] <= search["score"] <= search["score_high"]
    assert sorted(p.name for p in (trained / "checkpoints").iterdir()) == ["1", "2"]
    assert (trained / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_load_run_gives_env_network_config_and_agent(trained):
    run = azx.load_run(trained)
    assert run.iteration == 2
    # The preset's configuration, its learning-rate decay over the run's 2 iterations.
    preset = azx.presets.get("tic_tac_toe")
    assert run.config == dataclasses.replace(preset.config, decay_iterations=2)
    observation = run.env.observation(run.env.init(jax.random.key(0)))
    logits, value = run.net(observation)
    assert logits.shape == (run.env.num_actions,) and value.shape == ()
    # The agent plays real games (the solver never loses, so the agent cannot win).
    result = azx.arena.play_match(
        run.env, run.agent(), azx.arena.TicTacToeSolver(), num_games=4, key=jax.random.key(1)
    )
    assert result.wins == 0 and result.num_unfinished == 0
    earlier = azx.load_run(trained, step=1)
    assert earlier.iteration == 1
    with pytest.raises(azx.run.RunError, match="no checkpoint 7"):
        azx.load_run(trained, step=7)


# The slow tier: the default run resumes exactly through `azx train --resume` in
# test_fourth_algorithm, test_cli_ppo and test_cli_seeds, and in a fresh process in
# test_checkpoint.
@pytest.mark.slow
def test_resume_continues_exactly(trained, tmp_path):
    # A copy trained on to 4 iterations by --resume equals 4 iterations of the API (of
    # the run's preset: its learning-rate decay over the 2 iterations it was started for).
    import shutil

    resumed = tmp_path / "resumed"
    shutil.copytree(trained, resumed)
    result = _azx("train", "--out", resumed, "--resume", "--iterations", 4, "--quiet", *SMALL)
    assert result.exit_code == 0, result.output
    # Iteration 0 (the untrained agent) is evaluated once, not again on resuming.
    assert [r["iteration"] for r in azx.run.read_metrics(resumed)] == [0, 1, 2, 3, 4]
    preset = azx.load_run(resumed).preset
    assert preset.iterations == 4 and preset.config.decay_iterations == 2
    trainer, state = preset.build(seed=0)
    straight = trainer.train(state, 4)
    for a, b in zip(_leaves(azx.load_run(resumed).state), _leaves(straight), strict=True):
        np.testing.assert_array_equal(a, b)


def test_eval_prints_counts_and_writes_json(trained, tmp_path):
    path = tmp_path / "eval.json"
    result = _azx("eval", "--run", trained, "--opponent", "solver", "--games", 10, "--json", path)
    assert result.exit_code == 0, result.output
    assert "vs solver: W/D/L 0/" in result.output
    saved = json.loads(path.read_text())
    assert saved["iteration"] == 2 and saved["num_simulations"] == 64
    record = saved["results"]["solver"]
    assert record["wins"] == 0 and record["draws"] + record["losses"] == 10


@pytest.mark.slow  # a run of its own with five evaluations; the slow tier keeps it
def test_evaluations_more_often_than_logs_end_the_training_calls_early(tmp_path):
    # Four evaluations: the newest three checkpoints and the evaluated ones are kept. An
    # evaluation interval shorter than the logging one ends the training calls early.
    run = tmp_path / "run"
    result = _azx(
        "train", "--out", run, "--iterations", 8, "--quiet", "--log-every", 4,
        "--eval-every", 2, "--eval-games", 2, "--opponent", "random",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert azx.checkpoint.Checkpointer(run / "checkpoints").all_steps() == [2, 4, 6, 8]
    evaluated = [r["iteration"] for r in azx.run.read_metrics(run) if "eval" in r]
    assert evaluated == [0, 2, 4, 6, 8]


def test_eval_against_checkpoints_of_a_run(trained, tmp_path):
    path = tmp_path / "eval.json"
    result = _azx(
        "eval", "--run", trained, "--agent", "network", "--opponent", f"run:{trained}@1",
        "--opponent", f"run:{trained}", "--opponent", "random", "--opening-plies", 2,
        "--games", 20, "--json", path,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "the first 2 plies of every game random" in result.output
    saved = json.loads(path.read_text())
    assert saved["opening_plies"] == 2
    # Without @ITERATION the newest checkpoint plays, named by its iteration.
    assert list(saved["results"]) == [f"run:{trained}@1", f"run:{trained}@2", "random"]
    for record in saved["results"].values():
        assert record["games"] == 20 and sum(record["as_first"]) == 10
    assert "Elo relative to the agent" in result.output
    # Deterministic agents on both sides without random plies would repeat two games.
    _one_line_error(
        _azx("eval", "--run", trained, "--opponent", f"run:{trained}"), "--opening-plies"
    )
    _one_line_error(
        _azx("eval", "--run", trained, "--opponent", "run:", "--opening-plies", 2), "'run:'"
    )
    _one_line_error(
        _azx("eval", "--run", trained, "--opponent", f"run:{tmp_path}", "--opening-plies", 2),
        "no config.json",
    )
    _one_line_error(
        _azx("eval", "--run", trained, "--opponent", f"run:{trained}@7", "--opening-plies", 2),
        f"run:{trained}@7",
    )


def test_play_from_piped_input_reasks_illegal_moves(trained):
    # Every cell in order: the ones the agent took (and the bad inputs) are asked again.
    moves = "0\nten\n" + "\n".join(str(cell) for cell in range(1, 10)) + "\n"
    result = _azx("play", "--run", trained, input=moves)
    assert result.exit_code == 0, result.output
    assert "'0' is not a legal move; legal: 1 2 3 4 5 6 7 8 9" in result.output
    assert "'ten' is not a legal move" in result.output
    assert result.output.count("azx plays") >= 3
    assert result.output.rstrip().splitlines()[-1] in ("You win!", "Draw.", "azx wins.")


def test_bad_input_is_one_line_with_exit_code_2(trained, tmp_path):
    _one_line_error(_azx("train", "--env", "chess_960", "--out", tmp_path / "a"), "'chess_960'")
    _one_line_error(
        _azx("train", "--preset", "nope", "--out", tmp_path / "a"), "'nope'", "tic_tac_toe"
    )
    _one_line_error(_azx("train", "--out", tmp_path / "empty", "--resume"), "--resume", "empty")
    _one_line_error(
        _azx("train", "--out", tmp_path / "a", "--opponent", "mcts:many"), "'mcts:many'"
    )
    _one_line_error(_azx("eval", "--run", trained, "--opponent", "rnd"), "'rnd'", "mcts:N")
    _one_line_error(_azx("train", "--out", trained, "--seed", 5), "different configuration", "seed")
    again = _azx("train", "--out", trained, "--iterations", 2)  # (its schedule: 2 iterations)
    _one_line_error(again, "already holds this run", "--resume")
    _one_line_error(_azx("eval", "--run", tmp_path), "no config.json")
    assert not (tmp_path / "a").exists()


def test_the_installed_command_exits_2_without_traceback():
    result = subprocess.run(
        [sys.executable, "-m", "azx.cli", "train", "--preset", "nope"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "azx: error: unknown preset 'nope'; available: " + ", ".join(azx.presets.names())
    ]


@pytest.mark.slow
def test_ctrl_c_saves_a_checkpoint_and_resume_continues(tmp_path):
    out = tmp_path / "interrupted"
    command = [sys.executable, "-m", "azx.cli", "train", "--out", str(out), "--quiet"]
    command += ["--iterations", "10000", "--log-every", "1", "--eval-every", "10000"]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        deadline = time.monotonic() + 300
        while not azx.run.read_metrics(out) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stdout + stderr
    assert f"continue with: azx train --out {out} --resume" in stderr
    last = azx.run.read_metrics(out)[-1]["iteration"]
    assert azx.load_run(out).iteration == last
    result = _azx("train", "--out", out, "--resume", "--iterations", last + 1, "--quiet", *SMALL)
    assert result.exit_code == 0, result.output
    assert azx.load_run(out).iteration == last + 1


ALPHAZERO_PRESETS = [
    name
    for name in azx.presets.names()
    if isinstance(azx.presets.get(name).recipe, azx.presets.AbstractAgentRecipe)
]


@pytest.mark.parametrize("name", ALPHAZERO_PRESETS)
def test_alphazero_presets_round_trip_through_json(name):
    preset = azx.presets.get(name)
    assert azx.presets.Preset.from_dict(json.loads(json.dumps(preset.to_dict()))) == preset
    recipe = preset.recipe
    simulations = (recipe.search_options | recipe.eval_search)["num_simulations"]
    assert recipe.make_eval_search().num_simulations == simulations


def test_eval_search_changes_the_evaluation_search_only():
    recipe = azx.presets.AlphaZeroRecipe(
        search="gumbel",
        search_options={"num_simulations": 32, "max_num_considered_actions": 4},
        eval_search={"search": "puct", "num_simulations": 64},
    )
    train, evaluate = recipe.make_search(), recipe.make_eval_search()
    assert isinstance(train, azx.search.Gumbel) and train.num_simulations == 32
    assert isinstance(evaluate, azx.search.PUCT) and evaluate.num_simulations == 64
    assert evaluate.root_policy.temperature == 0 and evaluate.root_policy.dirichlet_fraction == 0
    assert recipe.make_eval_search(num_simulations=8).num_simulations == 8  # azx eval's own
    same_kind = dataclasses.replace(recipe, eval_search={"num_simulations": 128})
    evaluate = same_kind.make_eval_search()
    assert isinstance(evaluate, azx.search.Gumbel) and evaluate.num_simulations == 128
    assert evaluate.root_policy.max_num_considered_actions == 4  # the training search's option
    with pytest.raises(
        ValueError, match="eval_search: algo must be one of 'puct', 'gumbel'; got 'x'"
    ):
        dataclasses.replace(recipe, eval_search={"search": "x", "num_simulations": 8})
    with pytest.raises(ValueError, match=r"another kind of search \('puct'\) must give num_sim"):
        dataclasses.replace(recipe, eval_search={"search": "puct"})
    for search_recipe in (recipe, azx.presets.MuZeroRecipe()):
        with pytest.raises(ValueError, match="search_options must give num_simulations, got"):
            dataclasses.replace(search_recipe, search_options={"gamma": 0.9})


def test_opponent_specs_parse_or_name_the_problem():
    env = azx.envs.make("connect_four")
    assert azx.arena.opponent("mcts:1000", env).num_simulations == 1000
    assert isinstance(azx.arena.opponent(" greedy ", env), azx.arena.GreedyAgent)
    for spec, message in [
        ("mcts:0", "positive number of simulations"),
        ("mcts", "positive number of simulations"),
        ("random:3", "not understood"),
        ("solver", "tic_tac_toe only"),
    ]:
        with pytest.raises(ValueError, match=message):
            azx.arena.opponent(spec, env)


def test_metrics_log_survives_a_partial_last_line(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"iteration": 1}\n{"iteration": 2}\n{"itera')
    assert azx.run.read_metrics(tmp_path) == [{"iteration": 1}, {"iteration": 2}]
    (tmp_path / "metrics.jsonl").write_text('{"itera\n{"iteration": 2}\n')
    with pytest.raises(azx.run.RunError, match="metrics.jsonl line 1 is not valid JSON"):
        azx.run.read_metrics(tmp_path)


def test_play_second_says_the_agent_is_thinking(trained):
    result = _azx("play", "--run", trained, "--second", input="quit\n")
    assert result.exit_code == 0, result.output
    thinking = result.output.index("azx is thinking… (compiling its search first)")
    assert thinking < result.output.index("azx plays") < result.output.index("your move")


def test_play_draws_the_board_under_observe_legal_moves():
    # The othello preset's environment observes a flat board followed by the legal moves;
    # the game is drawn from the board it wraps. The person tries every square (and pass)
    # in turn until one is legal, so the game reaches its end.
    from azx._play import play

    env = azx.envs.make("othello", observe_legal_moves=True)
    tries = iter([f"{col}{row}" for row in range(1, 9) for col in "abcdefgh"] + ["pass"])
    lines = []

    def read(prompt):
        nonlocal tries
        text = next(tries, None)
        if text is None:
            tries = iter([f"{col}{row}" for row in range(1, 9) for col in "abcdefgh"] + ["pass"])
            text = next(tries)
        return text

    outcome = play(
        env, azx.arena.RandomAgent(), human_first=True, seed=0, read=read, write=lines.append
    )
    start = lines[1].splitlines()
    assert start[0].split() == list("abcdefgh")
    # The start position: d4/e5 for O, d5/e4 for X, X to move on d3, c4, f5 and e6.
    assert start[4].split()[1:] == list("..*OX...") and start[5].split()[1:] == list("...XO*..")
    assert outcome in (-1, 0, 1) and lines[-1] in ("You win!", "Draw.", "azx wins.")


def test_version_and_help():
    result = _azx("--version")
    assert result.exit_code == 0 and result.output.strip() == f"azx {azx.__version__}"
    for command in ("train", "eval", "play"):
        result = _azx(command, "--help")
        assert result.exit_code == 0, result.output
        assert "<bool>" not in result.output and "[default:" in result.output
    train_help = _azx("train", "--help").output
    # Flags are plain flags; the preset flag says what it takes, including pgx:GAME.
    assert "--resume " in train_help and "--quiet " in train_help and "pgx:GAME" in train_help


def test_usage_errors_are_one_line_with_exit_code_2():
    _one_line_error(_azx("train", "--iterations", 0), "'--iterations'")
    _one_line_error(_azx("train", "--no-such-flag"), "--no-such-flag")
    _one_line_error(_azx("eval"), "--run")


def test_import_azx_loads_no_command_line_or_checkpoint_libraries():
    code = "import sys, azx; print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    ).stdout.split()
    for heavy in ("matplotlib", "rich", "typer", "click", "orbax", "tqdm", "pgx", "flax"):
        assert heavy not in loaded, heavy
    assert azx.checkpoint.Checkpointer and azx.run.train  # still reachable as attributes


@pytest.mark.slow
def test_any_two_player_pgx_game_trains_with_the_generic_setup(tmp_path):
    out = tmp_path / "hex"
    result = _azx(
        "train", "--preset", "pgx:hex", "--out", out, "--iterations", 2, "--quiet", *SMALL
    )
    assert result.exit_code == 0, result.output
    run = azx.load_run(out)
    assert run.iteration == 2 and run.preset.name == "pgx:hex" and run.env.num_actions == 122
    assert [r["iteration"] for r in run.metrics()] == [0, 1, 2]
    _one_line_error(_azx("train", "--preset", "pgx:2048"), "pgx:2048", "two")
    _one_line_error(_azx("train", "--preset", "pgx:chess_960"), "'chess_960'", "hex")


@pytest.mark.parametrize(
    ("preset", "options", "needle"),
    [
        ("tic_tac_toe", ["--opponent", "mcts"], "positive number of simulations"),
        ("tic_tac_toe", ["--games", "7"], "--games must be even"),
        ("tic_tac_toe", ["--agent", "nope"], "--agent must be"),
        ("tic_tac_toe", ["--agent", "full-move"], "plays backgammon; this game is 'tic_tac_toe'"),
        ("muzero_tic_tac_toe", ["--agent", "full-move"], "MuZero's is its model's"),
        ("connect_four", ["--opponent", "solver"], "tic_tac_toe only"),
        ("ppo_cartpole", ["--opponent", "solver"], "--opponent applies to alphazero runs"),
        ("2048", ["--opening-plies", "2"], "two-player games"),
    ],
)
def test_eval_options_are_checked_before_any_checkpoint_is_read(tmp_path, preset, options, needle):
    # A run directory with its configuration and no checkpoint: the options are refused
    # first, not "no checkpoint yet".
    run = tmp_path / "run"
    run.mkdir()
    config = {"azx_version": azx.__version__, "seed": 0}
    (run / "config.json").write_text(
        json.dumps(config | {"preset": azx.presets.get(preset).to_dict()})
    )
    _one_line_error(_azx("eval", "--run", run, *options), needle)
