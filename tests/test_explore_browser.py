"""`azx explore` in a real browser: headless Chromium (Debian's `chromium`) driven by
Playwright plays whole games through the page's buttons; every reply of the agent is
checked against `run.agent()` on the same position and key, and the screenshots are those
of docs/explore.md."""

import shutil
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _cli import SMALL, azx_cli
from _explore_server import explorer_server, position


playwright = pytest.importorskip("playwright.sync_api")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DOCS = Path(__file__).resolve().parent.parent / "docs" / "images"
SIMULATIONS = 8

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(), reason="needs chromium (apt-get install chromium)"
    ),
]


@pytest.fixture(scope="module")
def connect_four(tmp_path_factory):
    """A one-iteration connect four run with a small network: the page's plumbing, not
    strength."""
    out = tmp_path_factory.mktemp("run") / "c4"
    settings = ["num_envs=8", "train_steps=1", "batch_size=16", "collect_steps=2",
                "search.num_simulations=4", "network_options.width=16"]  # fmt: skip
    args = [f"--set={setting}" for setting in settings]
    result = azx_cli(
        "train", "--preset", "connect_four", "--out", out, "--iterations", 1, "--quiet",
        *SMALL[:4], "--eval-games", 2, "--opponent", "random", *args,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def browser():
    with playwright.sync_playwright() as driver:
        chromium = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


def ready(page):
    page.wait_for_selector("body[data-state=ready]", timeout=600_000)


def new_game(page, *, run: int, first: bool, seed: int):
    page.select_option("#run", str(run))
    page.select_option("#side", "first" if first else "second")
    page.fill("#seed", str(seed))
    page.fill("#simulations", str(SIMULATIONS))
    page.click("#new")
    ready(page)


def history(page) -> list[tuple[str, str]]:
    return [tuple(item.split(": ")) for item in page.locator("#history li").all_inner_texts()]


def play_to_the_end(page, names: list[str]) -> list[tuple[str, str]]:
    """Click the first legal move until the game ends; the moves played, by whom."""
    while True:
        buttons = page.locator("#moves button:enabled")
        if page.locator("#status").inner_text().split(" (")[0] in (
            "You win!",
            "Draw.",
            "azx wins.",
        ):
            return history(page)
        assert buttons.count() > 0, page.locator("#status").inner_text()
        moves = len(history(page))
        buttons.first.click()
        ready(page)
        assert len(history(page)) > moves
        assert page.locator("#error").is_hidden(), page.locator("#error").inner_text()


def check_replies(run, seed, played, names):
    """Every move of azx in `played` is `run.agent()`'s on that position and key."""
    actions = [names.index(name) for _, name in played]
    agent = run.agent(num_simulations=SIMULATIONS)
    act = eqx.filter_jit(
        lambda agent, state, key: agent(run.env, agent.init(run.env, 1), state, key=key)[0]
    )
    replies = 0
    for move, (by, _) in enumerate(played):
        if by == "azx":
            state, key = position(run, seed, actions[:move])
            assert actions[move] == int(act(agent, state, key)[0]), (move, played)
            replies += 1
    assert replies > 0


def test_whole_games_by_clicks(trained, connect_four, browser):
    with explorer_server([trained, connect_four]) as (explorer, port):
        page = browser.new_page(viewport={"width": 1100, "height": 720})
        page.goto(f"http://127.0.0.1:{port}/")
        ready(page)
        # Tic-tac-toe, the agent first: every one of its replies is run.agent()'s.
        new_game(page, run=0, first=False, seed=1)
        run = explorer.runs[0].run
        names = [str(action + 1) for action in range(9)]
        assert page.locator("#analysis tbody tr.chosen").count() == 1
        DOCS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=DOCS / "explore-tic-tac-toe.png")
        played = play_to_the_end(page, names)
        check_replies(run, 1, played, names)
        assert page.locator("#status").inner_text().split(" (")[0] in (
            "You win!", "Draw.", "azx wins.",
        )  # fmt: skip

        # The analysis button on a fresh position: the table lists every legal move.
        new_game(page, run=0, first=True, seed=2)
        page.click("#analyse")
        ready(page)
        assert page.locator("#analysis tbody tr").count() == 9
        page.screenshot(path=DOCS / "explore-analysis.png")

        # Connect four, to the end.
        new_game(page, run=1, first=True, seed=0)
        c4 = explorer.runs[1].run
        names = [str(column + 1) for column in range(7)]
        played = play_to_the_end(page, names)
        check_replies(c4, 0, played, names)
        page.screenshot(path=DOCS / "explore-connect-four.png")

        # Two tabs play two games: a move in one leaves the other as it was.
        first = browser.new_page()
        second = browser.new_page()
        for tab in (first, second):
            tab.goto(f"http://127.0.0.1:{port}/")
            ready(tab)
            new_game(tab, run=0, first=True, seed=0)
        first.locator("#moves button[data-action='0']").click()
        ready(first)
        assert len(history(first)) == 2 and history(second) == []
        second.locator("#moves button[data-action='8']").click()
        ready(second)
        assert history(first)[0] == ("you", "1") and history(second)[0] == ("you", "9")
        assert first.evaluate("document.body.dataset.game") != second.evaluate(
            "document.body.dataset.game"
        )


@pytest.fixture(scope="module")
def game_2048(tmp_path_factory):
    """A one-iteration 2048 run with a small network: a single-player agent to watch."""
    out = tmp_path_factory.mktemp("run") / "2048"
    settings = ["num_envs=8", "train_steps=1", "batch_size=16", "collect_steps=2",
                "search.num_simulations=4", "network_options.width=16"]  # fmt: skip
    args = [f"--set={setting}" for setting in settings]
    result = azx_cli(
        "train", "--preset", "2048", "--out", out, "--iterations", 1, "--quiet",
        *SMALL[:4], "--eval-games", 2, *args,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return out


def test_episodes_replays_and_curves(trained, game_2048, browser, tmp_path):
    import azx.explore

    replays = tmp_path / "replays"
    azx.explore.record_games(
        azx.load_run(trained), ["greedy"], replays, seed=0, simulations=SIMULATIONS, games=1
    )
    with explorer_server([trained, game_2048], [replays / "greedy-0.json"]) as (explorer, port):
        page = browser.new_page(viewport={"width": 1100, "height": 760})
        page.goto(f"http://127.0.0.1:{port}/")
        ready(page)

        # The learning curve of the tic-tac-toe run: one line (one seed).
        assert page.locator("#curve svg polyline").count() == 1
        page.locator("#curves-panel").screenshot(path=DOCS / "explore-curves.png")

        # A replay of an evaluation game, stepped from its start.
        page.select_option("#replay", "0")
        page.click("#open-replay")
        ready(page)
        assert page.locator("#status").inner_text().startswith("Replay of azx against greedy")
        assert page.locator("#frame-label").inner_text().startswith("position 0 of ")
        page.click("#forward")
        ready(page)
        assert page.locator("#frame-label").inner_text().startswith("position 1 of ")
        title = page.locator("#analysis-title").inner_text()
        assert title.startswith(("Why azx played", "greedy played")), title

        # A single-player episode, frame by frame, with its return so far.
        page.select_option("#run", "1")
        ready(page)
        page.fill("#simulations", "4")
        page.click("#new")
        ready(page)
        status = page.locator("#status").inner_text()
        assert status.startswith("Episode of 2048"), status
        game = page.evaluate("document.body.dataset.game")
        episode = explorer.games[game]
        for index in range(3):
            page.click("#first") if index == 0 else page.click("#forward")
            ready(page)
            label = page.locator("#frame-label").inner_text()
            frame = episode.frame(index)
            shown, _, total = label.partition(" · return ")
            assert shown == f"position {index} of {frame['frames'] - 1}", label
            assert float(total) == pytest.approx(frame["return"], rel=1e-5), label
            assert page.locator("#board svg").count() == 1
        assert page.locator("#analysis tbody tr.chosen").count() == 1
        page.screenshot(path=DOCS / "explore-episode.png")

        # 2048's chance after the chosen move: the outcomes' probabilities, the game's own.
        page.click("#first")
        ready(page)
        env, start = episode.env, episode.states[0]
        analysis = episode.frame(0)["analysis"]
        one = jax.tree.map(lambda x: x[0], start)
        after = env.afterstate(one, jnp.int32(analysis["action"]))
        probabilities = np.asarray(env.chance_probabilities(after))
        assert [o["outcome"] for o in analysis["chance"]] == list(np.flatnonzero(probabilities))
        np.testing.assert_allclose(
            [o["probability"] for o in analysis["chance"]], probabilities[probabilities > 0]
        )
        assert page.locator("#chance tbody tr").count() == len(analysis["chance"])
