"""`azx explore` on the single-player runs of PPO and MuZero: each episode the page shows
is the run's own evaluation's (`run.play_episodes` with the same key, one episode), frame
by frame with the return so far."""

import json

import jax
import pytest
from _cli import azx_cli
from _explore_server import explorer_server, request

import azx
from azx.explore._episode import record_episode


pytestmark = pytest.mark.slow  # runs trained by `azx train` (20 to 50 s each)

SMALL = ["--iterations", 1, "--log-every", 1, "--eval-every", 1, "--quiet"]
POLICY = ["--eval-episodes", 2, "--set=num_envs=2", "--set=rollout_length=16"]
TRAIN = {
    # Feed-forward, discrete actions.
    "ppo_cartpole": POLICY,
    # Continuous actions, standardised observations.
    "ppo_pendulum": [*POLICY, "--set=num_minibatches=2"],
    # A recurrent policy: its memory, previous action and reward.
    "ppo_minigrid": [*POLICY, "--set=num_minibatches=2"],
    # A search over a learned model.
    "muzero_cartpole": [
        f"--set={setting}"
        for setting in (
            "num_envs=4", "collect_steps=4", "train_steps=1", "batch_size=8", "unroll_steps=2",
            "td_steps=5", "buffer_capacity=256", "eval_games=2",
            "search_options.num_simulations=4", "network_options.width=16",
            "network_options.embedding_size=16",
        )
    ],
}  # fmt: skip


def _as_evaluated(total) -> pytest.approx:
    """The evaluation's return, as one played step by step must equal it: exactly for
    whole-number rewards; within float32 rounding for a continuous task's, whose rewards
    the two compilations (one step a call, a loop of steps) may round differently in the
    last bit on some CPUs (Pendulum's: -1630.28809 against -1630.28821 on one host)."""
    return pytest.approx(float(total), rel=1e-6, abs=0.0)


@pytest.fixture(scope="module")
def trained_runs(tmp_path_factory):
    """Tiny runs of each preset, trained when first asked for: the plumbing, not strength."""
    out, made = tmp_path_factory.mktemp("runs"), {}

    def train(preset):
        if preset not in made:
            if preset == "ppo_minigrid":
                pytest.importorskip("xminigrid")
            args = ["train", "--preset", preset, "--out", out / preset, *SMALL, *TRAIN[preset]]
            result = azx_cli(*args)
            assert result.exit_code == 0, result.output
            made[preset] = out / preset
        return made[preset]

    return train


@pytest.mark.parametrize("preset", list(TRAIN))
def test_a_recorded_episode_is_the_evaluation_s(trained_runs, preset):
    run = azx.load_run(trained_runs(preset))
    for seed in range(3):
        key = jax.random.key(seed)
        episode = record_episode(run, key=key, max_steps=1000)
        evaluation = run.play_episodes(1, key=key)
        assert episode.returns()[-1] == _as_evaluated(evaluation.returns[0])
        assert len(episode.actions) == int(evaluation.lengths[0])
        assert episode.over == bool(evaluation.finished[0])
        assert len(episode.states) == len(episode.actions) + 1
    # Stopped at `max_steps`: that many steps, not over.
    short = record_episode(run, key=jax.random.key(0), max_steps=3)
    assert len(short.actions) == 3 and not short.over


def test_the_page_shows_each_episode_frame_by_frame(trained_runs):
    presets = ["ppo_cartpole", "muzero_cartpole", "ppo_pendulum"]
    with explorer_server([trained_runs(preset) for preset in presets]) as (explorer, port):
        status, listed = request(port, "GET", "/api/runs")
        assert status == 200, listed
        for index, described in enumerate(listed["runs"]):
            assert described["plays"] is None and described["episodes"], described
            assert not described["analysed"]
            run = explorer.runs[index].run
            status, game = request(port, "POST", "/api/games", {"run": index, "seed": 7})
            assert status == 200, game
            evaluation = run.play_episodes(1, key=jax.random.key(7))
            assert game["single_player"] and game["over"]
            assert game["move"] == game["frames"] - 1 == int(evaluation.lengths[0])
            assert game["return"] == _as_evaluated(evaluation.returns[0])
            assert game["result"] == f"Return {float(evaluation.returns[0]):g}"
            returns = []
            for frame_index in (0, 1, game["frames"] - 1):
                path = f"/api/games/{game['id']}/frames/{frame_index}"
                status, frame = request(port, "GET", path)
                assert status == 200, frame
                assert frame["svg"].startswith("<svg") and frame["analysis"] is None
                returns.append(frame["return"])
            assert returns[0] == 0.0 and returns[-1] == game["return"]
            if run.env.name == "Pendulum-v1":  # its continuous actions, as the env got them
                name = game["history"][0]["name"]
                assert name.startswith("(") and -2 <= float(name[1:-1]) <= 2
            for method, path, body in [
                ("POST", f"/api/games/{game['id']}/move", {"action": 0}),
                ("POST", f"/api/games/{game['id']}/undo", None),
                ("GET", f"/api/games/{game['id']}/analysis", None),
                ("GET", f"/api/games/{game['id']}/frames/{game['frames']}", None),
            ]:
                status, answer = request(port, method, path, body)
                assert status in (400, 404) and answer["error"], (path, answer)
        assert len(explorer.games) == len(presets)


def test_eval_record_writes_a_muzero_run_s_counted_episodes(trained_runs, tmp_path):
    run, out = trained_runs("muzero_cartpole"), tmp_path / "replays"
    result = azx_cli(
        "eval", "--run", run, "--games", 2, "--json", tmp_path / "r.json", "--record", out
    )
    assert result.exit_code == 0, result.output
    # CartPole has no pgx drawing: the records alone, each replaying to its counted return.
    assert sorted(path.name for path in out.iterdir()) == ["episode-0.json", "episode-1.json"]
    (counted,) = json.loads((tmp_path / "r.json").read_text())["results"].values()
    returns = [json.loads((out / f"episode-{i}.json").read_text())["return"] for i in range(2)]
    assert sum(returns) / 2 == pytest.approx(counted["return_mean"])
    with explorer_server([run], sorted(out.glob("*.json"))) as (explorer, port):
        status, game = request(port, "POST", "/api/replays", {"replay": 1})
        assert status == 200 and game["return"] == pytest.approx(returns[1]), game
    # A PPO run's episodes are its policy's own, not an arena agent's: refused.
    ppo = azx_cli("eval", "--run", trained_runs("ppo_cartpole"), "--record", out)
    assert ppo.exit_code == 2 and "--record" in ppo.output
