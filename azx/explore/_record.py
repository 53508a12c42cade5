"""`azx eval --record DIR`: games of a run's agent against the evaluation's opponents
(episodes, in a single-player game) written as pgx SVG animations and as small JSON
records that `azx explore --replays DIR` steps through with the search's analysis."""

import re
from pathlib import Path

import jax

from .. import arena
from .._rundir import Run, write_json
from ._session import ExploredRun, Game


#: Games recorded per opponent (alternate colours), or episodes of a single-player game.
RECORDED_GAMES = 2


def record_games(
    run: Run,
    opponents: list[str],
    directory: Path,
    *,
    seed: int,
    simulations: int | None = None,
    games: int = RECORDED_GAMES,
) -> list[str]:
    """Play and write `games` games of `run`'s search agent against each opponent spec
    (the agent moving first in the even ones), each from its own seed (`seed`, `seed +
    1`, ...) with the explorer's keys, so that `azx explore` plays them again exactly;
    **returns** the lines to print. Each game is `SPEC-N.svg` and `SPEC-N.json`."""
    import pgx  # (installed with azx; imported here as pgx imports are slow)

    explored = ExploredRun(name=run.directory.name, run=run, group=0)
    if simulations is None:
        simulations = run.search().num_simulations
    directory.mkdir(parents=True, exist_ok=True)
    specs = [None] if run.env.num_players == 1 else opponents
    lines = []
    for spec in specs:
        if spec is not None and spec.startswith("run:"):
            lines.append(f"not recorded: the games against {spec} (another run's agent)")
            continue
        opponent = None if spec is None else arena.opponent(spec, run.env)
        for index in range(games):
            game = Game(
                explored, human_first=index % 2 == 1, seed=seed + index, simulations=simulations
            )
            if opponent is None:
                game.reply()
            else:
                game.play_out(opponent, spec)
            stem = f"{_file_name(spec or 'episode')}-{index}"
            states = [jax.tree.map(lambda x: x[0], state) for state in game.states]
            if hasattr(states[0], "to_svg"):
                pgx.save_svg_animation(states, directory / f"{stem}.svg")
            write_json(directory / f"{stem}.json", game.record())
            lines.append(f"recorded {directory / stem}.json: {game.result()}")
    return lines


def _file_name(spec: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", spec).strip("-") or "game"
