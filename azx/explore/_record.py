"""`azx eval --record DIR`: the games of a run's agent that the evaluation counts (its
episodes, in a single-player game) written as pgx SVG animations and as small JSON
records that `azx explore --replays DIR` steps through with the search's analysis.

Each record keeps the keys of its game's start and steps, so that the game's chance
(backgammon's dice, 2048's tiles) comes again when it is replayed (`GamesRecorder`).
`record_games` plays and writes a few new games of its own."""

import dataclasses
import re
from pathlib import Path

import jax
import numpy as np

from .. import arena
from .._errors import RunError
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
    """Play and write `games` new games of `run`'s search agent against each opponent spec
    (the agent moving first in the even ones), each from its own seed (`seed`, `seed +
    1`, ...) with the explorer's keys, so that `azx explore` plays them again exactly;
    **returns** the lines to print. Each game is `SPEC-N.svg` and `SPEC-N.json`."""
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
            _write(game, directory / stem)
            lines.append(f"recorded {directory / stem}.json: {game.result()}")
    return lines


def _write(game: Game, path: Path) -> None:
    """`game` as `PATH.json` and, for a game pgx draws, `PATH.svg`."""
    import pgx  # (installed with azx; imported here as pgx imports are slow)

    states = [jax.tree.map(lambda x: x[0], state) for state in game.states]
    if hasattr(states[0], "to_svg"):
        pgx.save_svg_animation(states, path.with_suffix(".svg"))
    write_json(path.with_suffix(".json"), game.record())


@dataclasses.dataclass
class GamesRecorder:
    """An evaluation's `on_games` that writes every game it counts, as `SPEC-N.svg` and
    `SPEC-N.json` (`N`: the game's index in the match, the agent moving first in the
    first half; in a single-player game `episode-N`), and keeps the lines to print.

    Each record replays the game's moves with its own keys (the `init_keys` and
    `step_keys` of an [`azx.arena.MatchResult`][] or [`azx.arena.Episodes`][]), and one
    that does not end as it was counted is refused; `azx explore` analyses the agent's
    moves with the search of `simulations` simulations (the run's own, by default) and
    the keys of `seed`."""

    run: Run
    directory: Path
    seed: int
    simulations: int | None = None
    lines: list[str] = dataclasses.field(default_factory=list)

    def __call__(self, spec: str, games: arena.MatchResult | arena.Episodes) -> None:
        explored = ExploredRun(name=self.run.directory.name, run=self.run, group=0)
        simulations = self.simulations
        if simulations is None:
            simulations = self.run.search().num_simulations
        self.directory.mkdir(parents=True, exist_ok=True)
        match = isinstance(games, arena.MatchResult)
        stem = _file_name(spec) if match else "episode"
        # Read from the device once, not once a move.
        actions, num_moves = np.asarray(games.actions), np.asarray(games.num_moves)
        outcomes = {1: 0, 0: 0, -1: 0}
        for index, moves in enumerate(num_moves.tolist()):
            game = Game(
                explored,
                human_first=match and not bool(games.a_moved_first[index]),
                seed=self.seed,
                simulations=simulations,
                init_key=games.init_keys[index],
            )
            step_keys = list(games.step_keys[:moves, index])
            game.replay([int(a) for a in actions[:moves, index]], spec, step_keys)
            if match:
                outcomes[_check_outcome(game, games, index, spec)] += 1
            else:
                _check_return(game, games, index)
            _write(game, self.directory / f"{stem}-{index}")
        last = f"{self.directory / stem}-0.json to -{index}.json"
        if match:
            counts = "/".join(str(outcomes[outcome]) for outcome in (1, 0, -1))
            self.lines.append(f"recorded the {index + 1} games vs {spec} ({counts}): {last}")
        else:
            mean = float(np.mean(np.asarray(games.returns)))
            self.lines.append(
                f"recorded the {index + 1} episodes of {spec} (return {mean:.1f}): {last}"
            )


def _check_outcome(game: Game, match: arena.MatchResult, index: int, spec: str) -> int:
    """`game`'s outcome for the agent, if it is the one counted (`RunError` otherwise)."""
    outcome = _outcome(game)
    if outcome != int(match.outcome[index]):
        raise RunError(
            f"game {index} against {spec} does not replay from its moves and keys "
            f"({game.result()!r}, counted {int(match.outcome[index]):+d})"
        )
    return outcome


def _check_return(game: Game, episodes: arena.Episodes, index: int) -> None:
    """`RunError` unless episode `game` ends, and returns, as the one counted (its
    rewards summed in float32 one after another, as the evaluation sums them)."""
    total = np.float32(0.0)
    for reward in game.rewards:
        total = np.float32(total + np.float32(reward))
    counted = float(episodes.returns[index])
    if float(total) != counted or game.over() != bool(episodes.finished[index]):
        raise RunError(
            f"episode {index} does not replay from its moves and keys (return {float(total)}, "
            f"counted {counted})"
        )


def _outcome(game: Game) -> int:
    """+1 where the agent won `game`, 0 a draw (or a game that did not end), -1 a loss."""
    rewards = np.asarray(game.env.rewards(game.one()))
    if not game.over():
        return 0
    return int(np.sign(rewards[1 - game.human] - rewards[game.human]))


def _file_name(spec: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", spec).strip("-") or "game"
