"""`azx train --seeds N`: several seeds trained as one program, each in its own run
directory that matches the run of that seed alone (within float tolerance: batching
changes the order of XLA's sums), `azx eval` across the seeds, and `--resume`.

Small runs of the real ppo_cartpole preset (two iterations): the point is the plumbing.
"""

import json
import shutil

import jax
import numpy as np
import pytest
from _cli import azx_cli, trained_once
from test_seeds import _leaves

import azx


SMALL = ["--preset", "ppo_cartpole", "--log-every", "1", "--eval-every", "2"]
SMALL += ["--eval-episodes", "4", "--quiet"]
# Wall-clock fields: they differ from one run to the next.
_CLOCK = {"elapsed_s", "steps_per_s"}


@pytest.fixture(scope="module")
def together(tmp_path_factory):
    """Seeds 3 and 4 of ppo_cartpole, two iterations, as one `azx train --seeds 2`."""
    return trained_once(
        tmp_path_factory, "seeds", "--seed", 3, "--seeds", 2, "--iterations", 2, *SMALL
    )


def _assert_records_close(actual: list[dict], expected: list[dict]) -> None:
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        assert got.keys() == want.keys()
        for name in want.keys() - _CLOCK:
            if isinstance(want[name], dict):
                _assert_records_close([got[name]], [want[name]])
            elif isinstance(want[name], float):
                assert got[name] == pytest.approx(want[name], rel=1e-4, abs=1e-5), name
            else:
                assert got[name] == want[name], name


# Slow tier, with the rest of the command's seeds (a second training run each): the
# default run checks the seeds' library (test_seeds.py) and refuses a bad count (below).
@pytest.mark.slow
def test_each_seed_writes_what_its_own_run_writes(together, tmp_path):
    alone = tmp_path / "alone"
    result = azx_cli("train", "--out", alone, "--seed", 4, "--iterations", 2, *SMALL)
    assert result.exit_code == 0, result.output
    config = json.loads((together / "config.json").read_text())
    assert config["seed"] == 3 and config["seeds"] == 2
    assert sorted(p.name for p in together.iterdir()) == [
        "config.json", "learning_curve.png", "seed3", "seed4",
    ]  # fmt: skip
    mine = together / "seed4"
    assert json.loads((mine / "config.json").read_text()) == json.loads(
        (alone / "config.json").read_text()
    )
    _assert_records_close(azx.run.read_metrics(mine), azx.run.read_metrics(alone))
    assert sorted(p.name for p in (mine / "checkpoints").iterdir()) == ["2"]
    expected = _leaves(azx.load_run(alone).state)
    actual = _leaves(azx.load_run(mine).state)
    assert actual.keys() == expected.keys()
    for path, want in expected.items():
        if np.issubdtype(want.dtype, np.floating):
            np.testing.assert_allclose(actual[path], want, rtol=1e-4, atol=1e-5, err_msg=path)
        else:
            np.testing.assert_array_equal(actual[path], want, err_msg=path)
    # The seeds differ from each other.
    first, second = (azx.run.read_metrics(together / f"seed{s}")[-1] for s in (3, 4))
    assert first["loss"] != second["loss"]
    for directory in (together, mine):
        assert (directory / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_eval_reports_each_seed_and_the_mean_over_seeds(together, tmp_path):
    path = tmp_path / "eval.json"
    result = azx_cli("eval", "--run", together, "--episodes", 6, "--json", path)
    assert result.exit_code == 0, result.output
    assert "seed3 at iteration 2" in result.output and "seed4 at iteration 2" in result.output
    assert "mean of 2 seeds" in result.output
    saved = json.loads(path.read_text())
    returns = [saved["seeds"][s]["return_mean"] for s in ("3", "4")]
    interval = saved["across_seeds"]["return"]
    assert interval["mean"] == pytest.approx(np.mean(returns))
    assert interval["low"] <= min(returns) <= max(returns) <= interval["high"]
    # Each seed's result is its own run's `azx eval`.
    alone = azx_cli("eval", "--run", together / "seed4", "--episodes", 6, "--json", tmp_path / "4")
    assert alone.exit_code == 0, alone.output
    assert json.loads((tmp_path / "4").read_text())["return_mean"] == returns[1]


# Slow tier: the default run checks resuming one seed exactly (test_cli.py's
# test_resume_continues_exactly) and the seeds' directories (above).
@pytest.mark.slow
def test_resume_continues_every_seed_exactly(tmp_path):
    # A 3-iteration run, and a copy of it resumed from its checkpoint at iteration 2 (the
    # same run throughout: its learning rate anneals over the 3 iterations it was given).
    straight = tmp_path / "straight"
    result = azx_cli(
        "train", "--out", straight, "--seed", 3, "--seeds", 2, "--iterations", 3, *SMALL
    )
    assert result.exit_code == 0, result.output
    resumed = tmp_path / "resumed"
    shutil.copytree(straight, resumed)
    for seed in (3, 4):
        shutil.rmtree(resumed / f"seed{seed}" / "checkpoints" / "3")
    result = azx_cli("train", "--out", resumed, "--resume", "--iterations", 3, *SMALL[2:])
    assert result.exit_code == 0, result.output
    assert azx.load_run(resumed / "seed3").iteration == 3  # trained again from 2
    for seed in (3, 4):
        got, want = (azx.run.read_metrics(d / f"seed{seed}") for d in (resumed, straight))
        assert [{k: v for k, v in r.items() if k not in _CLOCK} for r in got] == [
            {k: v for k, v in r.items() if k not in _CLOCK} for r in want
        ]


@pytest.mark.slow
def test_a_seeds_directory_is_opened_seed_by_seed(together):
    with pytest.raises(azx.run.RunError, match="holds 2 seeds' runs: load one of"):
        azx.load_run(together)
    runs = azx.run.load_runs(together)
    assert [run.seed for run in runs] == [3, 4]
    assert [run.directory.name for run in runs] == ["seed3", "seed4"]


def test_seeds_must_be_a_positive_count(tmp_path):
    with pytest.raises(azx.run.RunError, match="`seeds` must be a positive number"):
        azx.run.train(tmp_path / "x", preset="ppo_cartpole", seeds=0)
    result = azx_cli("train", "--out", tmp_path / "y", "--seeds", 0, *SMALL)
    assert result.exit_code == 2 and "--seeds" in result.output


@pytest.mark.slow
def test_alphazero_seeds_train_evaluate_and_draw_together(tmp_path):
    out = tmp_path / "ttt"
    small = ["--iterations", 1, "--log-every", 1, "--eval-every", 1, "--eval-games", 10]
    result = azx_cli("train", "--out", out, "--seeds", 2, *small, "--opponent", "random", "--quiet")
    assert result.exit_code == 0, result.output
    for seed in (0, 1):
        records = azx.run.read_metrics(out / f"seed{seed}")
        assert [r["iteration"] for r in records] == [0, 1]
        assert records[-1]["eval"]["search"]["random"]["games"] == 10
    assert (out / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    result = azx_cli("eval", "--run", out, "--games", 10, "--json", tmp_path / "e.json")
    assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / "e.json").read_text())
    scores = [saved["seeds"][s]["results"]["random"]["score"] for s in ("0", "1")]
    assert saved["across_seeds"]["vs random"]["mean"] == pytest.approx(np.mean(scores))


@pytest.mark.slow
def test_muzero_seeds_train_one_after_another_as_their_own_runs(tmp_path):
    # On the CPU MuZero's seeds, like AlphaZero's, are mapped: bit for bit their own runs.
    small = {"iterations": 2, "eval_every": 2, "log_every": 1, "quiet": True}
    azx.run.train(tmp_path / "both", preset="muzero_cartpole", seeds=2, **small)
    azx.run.train(tmp_path / "one", preset="muzero_cartpole", seed=1, **small)
    wall = ("elapsed_s", "steps_per_s")
    together, alone = (
        [{k: v for k, v in r.items() if k not in wall} for r in azx.run.read_metrics(path)]
        for path in (tmp_path / "both" / "seed1", tmp_path / "one")
    )
    assert together == alone and len(alone) == 3
    # The run's episodes are its search's, exploration off unless sampling is asked for.
    run = azx.load_run(tmp_path / "one")
    for greedy, search_greedily in ((None, True), (True, True), (False, False)):
        direct = azx.muzero.evaluate(
            run.trainer,
            run.state.net,
            num_episodes=2,
            key=jax.random.key(5),
            greedy=search_greedily,
        )
        played = run.play_episodes(2, key=jax.random.key(5), greedy=greedy)
        np.testing.assert_array_equal(np.asarray(played.lengths), np.asarray(direct.lengths))
