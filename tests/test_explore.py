"""`azx explore`'s server: its analysis is azx.search's on the same position, network and
key, the agent's replies are `run.agent()`'s, and no request (a path outside the page, an
illegal move, an unknown game, a deleted run, malformed JSON) gets more than a message."""

import json
import shutil
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _cli import azx_cli, one_line_error
from _explore_server import explorer_server, position, request, untrained_run

import azx
import azx.explore


SIMULATIONS = 8


@pytest.fixture(scope="module")
def served(trained):
    with explorer_server([trained]) as (explorer, port):
        yield explorer, port


def expected(run, state, key, simulations):
    """azx.search's own numbers for `state`: the search from an empty tree with one row's
    key, and the network on the observation."""
    search = run.search(simulations)
    env = run.env
    output = eqx.filter_jit(
        lambda net, state, key: search(net, env, search.init(env, 1), state, key=key)
    )(run.net, state, jax.random.split(key, 1))
    one = jax.tree.map(lambda x: x[0], state)
    logits, value = run.net(env.observation(one))
    legal = env.legal_action_mask(one)
    prior = jax.nn.softmax(jnp.where(legal, logits, -jnp.inf))
    root = output.tree
    return {
        "action": int(output.action[0]),
        "value": float(value),
        "root_value": float(output.root_value[0]),
        "prior": np.asarray(prior),
        "policy": np.asarray(output.policy_target[0]),
        "visits": np.asarray(root.edge_visits[0, azx.search.ROOT_INDEX, : env.num_actions]),
        "q": np.asarray(root.edge_q[0, azx.search.ROOT_INDEX, : env.num_actions]),
    }


def check_analysis(analysis, reference):
    assert analysis["action"] == reference["action"]
    np.testing.assert_array_equal(analysis["visits"], reference["visits"])
    visits = reference["visits"]
    np.testing.assert_allclose(analysis["visit_share"], visits / visits.sum(), rtol=1e-6)
    q = [np.nan if v is None else v for v in analysis["q"]]
    np.testing.assert_allclose(
        q, np.where(visits > 0, reference["q"], np.nan), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(analysis["prior"], reference["prior"], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(analysis["policy"], reference["policy"], rtol=1e-5, atol=1e-7)
    for name in ("value", "root_value"):
        np.testing.assert_allclose(analysis[name], reference[name], rtol=1e-5, atol=1e-6)
    assert analysis["pv"][0] == analysis["action"]


@pytest.mark.slow  # (CI runs the slow tier too)
def test_analysis_and_replies_are_the_search_and_the_agent(served, trained):
    explorer, port = served
    run = explorer.runs[0].run
    status, game = request(
        port, "POST", "/api/games",
        {"run": 0, "human_first": False, "seed": 3, "simulations": SIMULATIONS},
    )  # fmt: skip
    assert status == 200, game
    # The agent moved first: its analysis is the search's on the initial position.
    (reply,) = game["history"]
    assert reply["by"] == "azx"
    state, key = position(run, 3, [])
    check_analysis(game["last_analysis"], expected(run, state, key, SIMULATIONS))
    agent = run.agent(num_simulations=SIMULATIONS)
    act = eqx.filter_jit(
        lambda agent, state, key: agent(run.env, agent.init(run.env, 1), state, key=key)
    )
    actions, _ = act(agent, state, key)
    assert reply["action"] == int(actions[0])

    # The person's move; the agent's reply is `run.agent()`'s on that position and key.
    mine = game["legal"][0]
    status, game = request(port, "POST", f"/api/games/{game['id']}/move", {"action": mine})
    assert status == 200, game
    played = [move["action"] for move in game["history"]]
    assert played[:2] == [reply["action"], mine]
    state, key = position(run, 3, played[:2])
    actions, _ = act(agent, state, key)
    assert played[2] == int(actions[0])

    # Undo takes back the person's move and the reply.
    status, undone = request(port, "POST", f"/api/games/{game['id']}/undo")
    assert status == 200 and [m["action"] for m in undone["history"]] == played[:1]


@pytest.mark.slow
def test_analysis_with_other_simulations_is_the_search(served):
    explorer, port = served
    run = explorer.runs[0].run
    status, game = request(
        port, "POST", "/api/games",
        {"run": 0, "human_first": True, "seed": 5, "simulations": SIMULATIONS},
    )  # fmt: skip
    status, game = request(port, "POST", f"/api/games/{game['id']}/move", {"action": 0})
    played = [move["action"] for move in game["history"]]
    status, analysis = request(port, "GET", f"/api/games/{game['id']}/analysis?simulations=16")
    assert status == 200, analysis
    state, key = position(run, 5, played)
    check_analysis(analysis, expected(run, state, key, 16))


def test_bad_requests_get_a_message_and_the_server_carries_on(served):
    explorer, port = served
    status, game = request(
        port, "POST", "/api/games", {"run": 0, "human_first": True, "simulations": SIMULATIONS}
    )
    assert status == 200, game
    other_status, other = request(
        port, "POST", "/api/games", {"run": 0, "human_first": True, "simulations": SIMULATIONS}
    )
    assert other_status == 200 and other["id"] != game["id"]
    name = game["id"]
    status, game = request(port, "POST", f"/api/games/{name}/move", {"action": 4})
    assert status == 200, game
    taken = [move["action"] for move in game["history"]]
    bad = [
        # Paths outside the page: refused, nothing of the file served.
        ("GET", "/../pyproject.toml", None, 404),
        ("GET", "/static/../_server.py", None, 404),
        ("GET", "/static/..%2f_server.py", None, 404),
        ("GET", "/static/%2e%2e/%2e%2e/cli.py", None, 404),
        ("GET", "/static/index.html/../../__init__.py", None, 404),
        ("GET", "/etc/passwd", None, 404),
        ("GET", "/api/runs/../../run.py", None, 404),
        ("GET", "/static/_session.py", None, 404),
        # Illegal moves, malformed moves, unknown games and runs, bad settings.
        ("POST", f"/api/games/{name}/move", {"action": taken[0]}, 400),
        ("POST", f"/api/games/{name}/move", {"action": 9}, 400),
        ("POST", f"/api/games/{name}/move", {"action": -1}, 400),
        ("POST", f"/api/games/{name}/move", {"action": "4"}, 400),
        ("POST", f"/api/games/{name}/move", {"action": True}, 400),
        ("POST", f"/api/games/{name}/move", {"move": 4}, 400),
        ("POST", f"/api/games/{name}/move", b"{not json", 400),
        ("POST", f"/api/games/{name}/move", b"[4]", 400),
        ("POST", f"/api/games/{name}/move", b"\xff\xfe", 400),
        ("POST", "/api/games/nope/move", {"action": 4}, 404),
        ("GET", "/api/games/nope", None, 404),
        ("GET", "/api/games/nope/analysis", None, 404),
        ("GET", f"/api/games/{name}/analysis?simulations=0", None, 400),
        ("GET", f"/api/games/{name}/analysis?simulations=-3", None, 400),
        ("GET", f"/api/games/{name}/analysis?simulations=lots", None, 400),
        ("GET", f"/api/games/{name}/analysis?simulations=99999999", None, 400),
        ("POST", "/api/games", {"run": 7}, 404),
        ("POST", "/api/games", {"run": "../ttt"}, 400),
        ("POST", "/api/games", {"run": 0, "seed": -1}, 400),
        ("POST", "/api/games", {"run": 0, "human_first": "yes"}, 400),
        ("POST", "/api/games", {"run": 0, "simulations": 0}, 400),
        ("DELETE", "/api/runs", None, 405),
        ("GET", "/api/games", None, 405),
    ]
    for method, path, body, want in bad * 3:  # a burst, several times over
        raw = body if isinstance(body, bytes) else None
        status, answer = request(port, method, path, None if raw else body, raw=raw)
        assert status == want, (method, path, body, status, answer)
        assert isinstance(answer, dict) and answer["error"], (path, answer)
        assert "Traceback" not in answer["error"]
    # The game is as it was, the other one untouched, and both carry on.
    status, again = request(port, "GET", f"/api/games/{name}")
    assert status == 200 and [m["action"] for m in again["history"]] == taken
    status, untouched = request(port, "GET", f"/api/games/{other['id']}")
    assert status == 200 and untouched["history"] == other["history"]
    status, listed = request(port, "GET", "/api/runs")
    assert status == 200 and listed["runs"][0]["game"] == "tic_tac_toe"


def test_a_run_deleted_while_served_is_a_message(trained, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(trained, copy)
    with explorer_server([copy]) as (_, port):
        status, game = request(port, "POST", "/api/games", {"run": 0, "simulations": SIMULATIONS})
        assert status == 200, game
        shutil.rmtree(copy)
        for method, path, body in [
            ("POST", "/api/games", {"run": 0}),
            ("POST", f"/api/games/{game['id']}/move", {"action": game["legal"][0]}),
            ("GET", f"/api/games/{game['id']}", None),
        ]:
            status, answer = request(port, method, path, body)
            assert status == 410 and "deleted or moved" in answer["error"], answer
        status, page = request(port, "GET", "/")
        assert status == 200 and "azx explore" in page


def test_command_line_errors_are_one_line(tmp_path):
    one_line_error(azx_cli("explore", "--run", tmp_path), "not an azx run")


def test_learning_curves_are_the_metrics(served, trained):
    _, port = served
    status, curves = request(port, "GET", "/api/runs/0/curves")
    assert status == 200, curves
    records = azx.run.read_metrics(trained)
    (seed,) = curves["seeds"]
    assert seed["points"]["loss"] == [[r["iteration"], r["loss"]] for r in records if "loss" in r]
    score = "eval.search.random.score"
    assert score in curves["metrics"]
    assert [p[1] for p in seed["points"][score]] == [
        r["eval"]["search"]["random"]["score"] for r in records
    ]
    for path in ("/api/runs/5/curves", "/api/runs/x/curves", "/api/runs/-1/curves"):
        status, answer = request(port, "GET", path)
        assert status == 404 and answer["error"], (path, answer)


def test_play_explain_prints_the_analysis_of_each_move(trained):
    moves = "".join(f"{cell}\n" for cell in range(1, 10))
    result = azx_cli(
        "play", "--run", trained, "--second", "--explain", "--simulations", SIMULATIONS,
        input=moves,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    played = [line.split()[-1] for line in lines if line.startswith("azx plays ")]
    chosen = [line.split()[0] for line in lines if line.endswith("<- played")]
    assert played and played == chosen
    assert sum("principal variation: " + move in line for line, move in zip(
        [line for line in lines if "principal variation" in line], played
    )) == len(played)  # fmt: skip


def record_of(directory):
    return json.loads((directory / "random-0.json").read_text())["actions"] + [None]


def test_recorded_games_replay_with_the_analysis_that_chose_them(trained, tmp_path):
    run = azx.load_run(trained)
    lines = azx.explore.record_games(
        run, ["random"], tmp_path, seed=4, simulations=SIMULATIONS, games=1
    )
    assert lines == [f"recorded {tmp_path / 'random-0'}.json: " + lines[0].split(": ")[-1]]
    animation = (tmp_path / "random-0.svg").read_text()
    assert "@keyframes" in animation and animation.count('id="_fr') == len(record_of(tmp_path))
    record = json.loads((tmp_path / "random-0.json").read_text())
    assert record["opponent"] == "random" and record["by"][:2] == ["azx", "random"]
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(azx.run.RunError, match="cannot be replayed"):
        azx.explore.Explorer([], [tmp_path / "bad.json"])
    with pytest.raises(azx.run.RunError, match="serve that run too"):
        azx.explore.Explorer([], [tmp_path / "random-0.json"])
    (tmp_path / "bad.json").unlink()
    with explorer_server([trained], [tmp_path / "random-0.json"]) as (_, port):
        status, listed = request(port, "GET", "/api/runs")
        assert [replay["name"] for replay in listed["replays"]] == ["random-0"]
        status, game = request(port, "POST", "/api/replays", {"replay": 0})
        assert status == 200, game
        assert [move["action"] for move in game["history"]] == record["actions"]
        assert game["result"] == record["result"]
        for index, by in enumerate(record["by"]):
            status, frame = request(port, "GET", f"/api/games/{game['id']}/frames/{index}")
            assert status == 200 and frame["by"] == by
            if by == "azx":  # the search on that position and key plays the recorded move
                assert frame["analysis"]["action"] == record["actions"][index]
            else:
                assert frame["analysis"] is None
        status, answer = request(port, "POST", f"/api/games/{game['id']}/move", {"action": 0})
        assert status == 400 and "recorded" in answer["error"]


def test_eval_record_is_checked_before_the_evaluation(trained, tmp_path):
    (tmp_path / "file").write_text("")
    one_line_error(azx_cli("eval", "--run", trained, "--record", tmp_path / "file"), "--record")


def recorded_eval(run, options, tmp_path, out):
    """`azx eval` of `run` with `options` and `--record out`: its output and saved result,
    checked to be what the same evaluation without `--record` prints and saves (the same
    games)."""
    plain = azx_cli("eval", "--run", run, *options, "--json", tmp_path / "plain.json")
    assert plain.exit_code == 0, plain.output
    result = azx_cli(
        "eval", "--run", run, *options, "--json", tmp_path / "result.json", "--record", out
    )
    assert result.exit_code == 0, result.output
    assert result.output.startswith(plain.output.replace("plain.json", "result.json"))
    saved = json.loads((tmp_path / "result.json").read_text())
    assert saved == json.loads((tmp_path / "plain.json").read_text())
    return result.output, saved


def opened_replays(run, out):
    """Every record in `out` as `azx explore` opens it, with `run` served: `(game,
    record)` pairs, each game checked to replay its record's moves to its result."""
    explorer = azx.explore.Explorer(azx.explore.load_explored([run]), sorted(out.glob("*.json")))
    opened = []
    for index, replay in enumerate(explorer.replays):
        game = explorer.game(explorer.open_replay(index))
        assert game.actions == replay["actions"] and game.result() == replay["result"]
        opened.append((game, replay))
    return opened


@pytest.mark.slow
def test_eval_record_writes_the_games_the_evaluation_counts(trained, tmp_path):
    out = tmp_path / "replays"
    specs, games = ("random",), 4
    options = ["--games", games, "--opponent", "random"]
    options += ["--simulations", SIMULATIONS]
    output, saved = recorded_eval(trained, options, tmp_path, out)
    assert sorted(path.name for path in out.iterdir()) == sorted(
        f"{spec}-{index}.{kind}"
        for spec in specs
        for index in range(games)
        for kind in ("json", "svg")
    )
    assert output.count("recorded the 4 games vs ") == 1
    for spec in specs:
        records = [json.loads((out / f"{spec}-{index}.json").read_text()) for index in range(games)]
        outcome = {"azx wins.": 0, "Draw.": 1, f"{spec} wins.": 2}
        counts, as_first = [0, 0, 0], [0, 0, 0]
        for record in records:
            counts[outcome[record["result"]]] += 1
            if not record["human_first"]:
                as_first[outcome[record["result"]]] += 1
        counted = saved["results"][spec]
        assert counts == [counted["wins"], counted["draws"], counted["losses"]]
        assert as_first == counted["as_first"]
        # The agent moves first in the first half of the games, as in the match.
        assert [record["human_first"] for record in records] == [False, False, True, True]
        assert all(record["opponent"] == spec for record in records)
        animation = (out / f"{spec}-0.svg").read_text()
        assert animation.count('id="_fr') == len(records[0]["actions"]) + 1
    assert len(opened_replays(trained, out)) == games
    # Each record holds its game's keys: one for the start and one for each move.
    record = json.loads((out / "random-0.json").read_text())
    assert len(record["step_keys"]) == len(record["actions"]) and len(record["init_key"]) == 2
    record["step_keys"] = record["step_keys"][1:]
    (tmp_path / "bad.json").write_text(json.dumps(record))
    with pytest.raises(azx.run.RunError, match="cannot be replayed: .* need as many step_keys"):
        azx.explore.Explorer(azx.explore.load_explored([trained]), [tmp_path / "bad.json"])


def test_a_missing_extra_is_one_line_naming_it(trained, monkeypatch):
    monkeypatch.setitem(sys.modules, "starlette.applications", None)
    one_line_error(azx_cli("explore", "--run", trained), 'pip install "azx[explore]"')


@pytest.mark.slow  # 2048's search with chance nodes compiles, twice: 90 s
def test_eval_record_writes_the_episodes_the_evaluation_counts(tmp_path):
    trained = untrained_run(tmp_path / "run", "2048", ["buffer_capacity=1024"])
    out, episodes = tmp_path / "replays", 4
    output, saved = recorded_eval(trained, ["--games", episodes, "--simulations", 4], tmp_path, out)
    assert sorted(path.name for path in out.iterdir()) == sorted(
        f"episode-{index}.{kind}" for index in range(episodes) for kind in ("json", "svg")
    )
    assert output.count(f"recorded the {episodes} episodes of ") == 1
    records = [json.loads((out / f"episode-{index}.json").read_text()) for index in range(episodes)]
    (counted,) = saved["results"].values()
    returns = np.asarray([record["return"] for record in records], np.float32)
    np.testing.assert_allclose(returns.min(), counted["return_min"], rtol=1e-6)
    np.testing.assert_allclose(returns.max(), counted["return_max"], rtol=1e-6)
    np.testing.assert_allclose(returns.mean(), counted["return_mean"], rtol=1e-6)
    assert all(record["opponent"] is None for record in records)
    opened = opened_replays(trained, out)
    assert len(opened) == episodes
    for game, replay in opened:  # each to its return, frame by frame
        assert game.frame(len(game.actions))["return"] == pytest.approx(replay["return"])
