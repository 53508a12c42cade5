"""Baseline agents by name, as the command line spells them."""

from ..envs import AbstractEnv
from ._agent import AbstractAgent, GreedyAgent, RandomAgent
from ._game2048 import EXPECTIMAX_DEPTHS, Expectimax2048Agent
from ._gnubg import GNUBG_LEVELS, GnubgAgent
from ._openspiel import SUPPORTED_GAMES, OpenSpielAlphaBetaAgent, OpenSpielMCTSAgent
from ._pubeval import PubevalAgent
from ._rollout import RolloutMCTSAgent
from ._solver import TicTacToeSolver


OPPONENT_SPECS = (
    "random, greedy, mcts:N (rollout MCTS with N simulations), solver, "
    "openspiel-mcts:N (OpenSpiel's rollout MCTS), openspiel-alphabeta:DEPTH "
    "(OpenSpiel's alpha-beta search), pubeval or gnubg / gnubg:LEVEL (backgammon) or "
    "expectimax / expectimax:DEPTH (2048, depth 1 or 2)"
)


def _only_for(spec: str, game: str, env: AbstractEnv | None) -> None:
    if env is not None and env.name != game:
        raise ValueError(f"opponent {spec!r} plays {game} only, not {env.name!r}")


def opponent(spec: str, env: AbstractEnv | None = None) -> AbstractAgent:
    """The baseline agent named by `spec`.

    **Arguments:**

    - `spec`: `"random"` ([`azx.arena.RandomAgent`][]), `"greedy"`
      ([`azx.arena.GreedyAgent`][]), `"mcts:N"` ([`azx.arena.RolloutMCTSAgent`][] with N
      simulations), `"solver"` ([`azx.arena.TicTacToeSolver`][], tic-tac-toe only),
      `"openspiel-mcts:N"` ([`azx.arena.OpenSpielMCTSAgent`][] with N simulations) or
      `"openspiel-alphabeta:DEPTH"` ([`azx.arena.OpenSpielAlphaBetaAgent`][] searching
      DEPTH moves ahead; 9 solves tic-tac-toe). The OpenSpiel agents play tic_tac_toe,
      connect_four and othello. `"pubeval"` ([`azx.arena.PubevalAgent`][], backgammon
      only); `"gnubg"` or `"gnubg:LEVEL"` ([`azx.arena.GnubgAgent`][] at its `"expert"`
      level or LEVEL, one of [`azx.arena.GNUBG_LEVELS`][]; backgammon only);
      `"expectimax"` or `"expectimax:DEPTH"` ([`azx.arena.Expectimax2048Agent`][]
      of depth 2, or DEPTH 1 or 2; 2048 only).
    - `env`: the game it will play, if known: agents that cannot play it are refused.

    **Raises:** `ValueError` naming the spec and the accepted forms (or the games it
    plays); `ImportError` for an OpenSpiel agent when `open_spiel` is not installed, and
    for gnubg without `gnubg`.
    """
    if not isinstance(spec, str):
        raise ValueError(f"opponent must be a string ({OPPONENT_SPECS}), got {spec!r}")
    name, colon, argument = spec.strip().partition(":")
    if name == "random" and not colon:
        return RandomAgent()
    if name == "greedy" and not colon:
        return GreedyAgent()
    if name == "mcts":
        if not argument.isdigit() or int(argument) < 1:
            raise ValueError(
                f"opponent {spec!r}: mcts needs a positive number of simulations, as in mcts:1000"
            )
        return RolloutMCTSAgent(int(argument))
    if name == "solver" and not colon:
        if env is not None and env.name != "tic_tac_toe":
            raise ValueError(f"opponent 'solver' exists for tic_tac_toe only, not {env.name!r}")
        return TicTacToeSolver()
    if name in ("openspiel-mcts", "openspiel-alphabeta"):
        if not argument.isdigit() or int(argument) < 1:
            what = "number of simulations" if name == "openspiel-mcts" else "search depth"
            raise ValueError(
                f"opponent {spec!r}: {name} needs a positive {what}, as in "
                f"{name}:{1000 if name == 'openspiel-mcts' else 9}"
            )
        if env is not None and env.name not in SUPPORTED_GAMES:
            raise ValueError(
                f"opponent {spec!r} plays {', '.join(SUPPORTED_GAMES)} (OpenSpiel's versions "
                f"of the pgx games), not {env.name!r}"
            )
        if name == "openspiel-mcts":
            return OpenSpielMCTSAgent(int(argument))
        return OpenSpielAlphaBetaAgent(int(argument))
    if name == "pubeval" and not colon:
        _only_for(spec, "backgammon", env)
        return PubevalAgent()
    if name == "gnubg":
        if colon and argument not in GNUBG_LEVELS:
            raise ValueError(
                f"opponent {spec!r}: gnubg takes a level of {', '.join(GNUBG_LEVELS)}, as in "
                "gnubg:beginner"
            )
        _only_for(spec, "backgammon", env)
        return GnubgAgent(argument if colon else "expert")
    if name == "expectimax":
        depths = tuple(map(str, EXPECTIMAX_DEPTHS))
        if colon and argument not in depths:
            raise ValueError(
                f"opponent {spec!r}: expectimax takes a depth of {' or '.join(depths)}, "
                "as in expectimax:2"
            )
        _only_for(spec, "2048", env)
        return Expectimax2048Agent(int(argument) if colon else 2)
    raise ValueError(f"opponent {spec!r} not understood; expected {OPPONENT_SPECS}")
