"""`azx explore` on the other board games: othello, go 9x9 and backgammon through the
page's generic layout. Each starts a game against an untrained run (built, not trained:
the page's plumbing, not strength), gets the agent's move with its analysis (the move
`run.agent()` plays on the same position and key), takes a person's move by its action
number and refuses an illegal one."""

import equinox as eqx
import pytest
from _explore_server import explorer_server, position, request, untrained_run

import azx
from azx.explore import Moves


SIMULATIONS = 4


@pytest.mark.slow  # a game's search and steps compile: 15 to 40 s each
@pytest.mark.parametrize(
    ("preset", "game", "layout"),
    [("othello", "othello", "grid"), ("pgx:go_9x9", "go_9x9", "grid"),
     ("backgammon", "backgammon", "list")],
    ids=["othello", "go_9x9", "backgammon"],
)  # fmt: skip
def test_a_game_is_played_through_the_page(tmp_path, preset, game, layout):
    directory = untrained_run(tmp_path / "run", preset)
    with explorer_server([directory]) as (explorer, port):
        run = explorer.runs[0].run
        status, listed = request(port, "GET", "/api/runs")
        assert status == 200 and listed["runs"][0]["plays"] is None, listed
        assert listed["runs"][0]["game"] == game
        body = {"run": 0, "human_first": False, "seed": 2, "simulations": SIMULATIONS}
        status, view = request(port, "POST", "/api/games", body)
        assert status == 200, view
        assert view["svg"].startswith("<svg") and view["layout"]["kind"] == layout
        assert view["to_move"] == "you" and view["legal"]

        # The agent's moves (backgammon: one per die) are `run.agent()`'s on each
        # position and key, and the last of them comes with the search's analysis.
        played = [move["action"] for move in view["history"]]
        assert {move["by"] for move in view["history"]} == {"azx"}
        agent = run.agent(num_simulations=SIMULATIONS)
        act = eqx.filter_jit(
            lambda agent, state, key: agent(run.env, agent.init(run.env, 1), state, key=key)[0]
        )
        for move, action in enumerate(played):
            state, key = position(run, 2, played[:move])
            assert int(act(agent, state, key)[0]) == action
        analysis = view["last_analysis"]
        assert analysis["action"] == played[-1] and analysis["move"] == len(played) - 1
        assert len(analysis["visits"]) == run.env.num_actions
        assert analysis["pv"][0] == played[-1]
        assert analysis["legal"] and played[-1] in analysis["legal"]

        # A person's move by its action number; an illegal one is refused by name.
        name = view["id"]
        illegal = next(a for a in range(run.env.num_actions) if a not in view["legal"])
        status, answer = request(port, "POST", f"/api/games/{name}/move", {"action": illegal})
        assert status == 400 and "not a legal move" in answer["error"], answer
        mine = view["legal"][-1]
        status, after = request(port, "POST", f"/api/games/{name}/move", {"action": mine})
        assert status == 200, after
        history = after["history"][len(played) :]
        assert history[0] == {"by": "you", "action": mine, "name": Moves(run.env).name(mine)}
        status, undone = request(port, "POST", f"/api/games/{name}/undo")
        assert status == 200 and [m["action"] for m in undone["history"]] == played


def test_moves_are_named_as_players_write_them():
    go = Moves(azx.envs.make("go_9x9"))
    assert [go.name(a) for a in (0, 8, 80, 81)] == ["a1", "i1", "i9", "pass"]
    assert go.layout()["kind"] == "grid" and go.layout()["names"][-1] == "pass"
    backgammon = Moves(azx.envs.make("backgammon"))
    # pgx's action is 6 * source + die - 1: source 0 no move, 1 the bar, 2 + i point i
    # in the mover's direction of play (the usual 24 - i).
    assert [backgammon.name(a) for a in (0, 6, 6 + 5, 12, 12 + 2, 2 * 6 + 23 * 6 + 3)] == [
        "no move", "bar/24", "bar/19", "24/23", "24/21", "1/off",
    ]  # fmt: skip
