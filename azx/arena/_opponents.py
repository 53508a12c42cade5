"""Baseline agents by name, as the command line spells them."""

from ..envs import AbstractEnv
from ._agent import AbstractAgent, GreedyAgent, RandomAgent
from ._rollout import RolloutMCTSAgent
from ._solver import TicTacToeSolver


OPPONENT_SPECS = "random, greedy, mcts:N (rollout MCTS with N simulations) or solver"


def opponent(spec: str, env: AbstractEnv | None = None) -> AbstractAgent:
    """The baseline agent named by `spec`.

    **Arguments:**

    - `spec`: `"random"` ([`azx.arena.RandomAgent`][]), `"greedy"`
      ([`azx.arena.GreedyAgent`][]), `"mcts:N"` ([`azx.arena.RolloutMCTSAgent`][] with N
      simulations) or `"solver"` ([`azx.arena.TicTacToeSolver`][], tic-tac-toe only).
    - `env`: the game it will play, if known: `"solver"` is refused for other games.

    **Raises:** `ValueError` naming the spec and the accepted forms.
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
        game = getattr(env, "name", None)
        if env is not None and game != "tic_tac_toe":
            raise ValueError(f"opponent 'solver' exists for tic_tac_toe only, not {game!r}")
        return TicTacToeSolver()
    raise ValueError(f"opponent {spec!r} not understood; expected {OPPONENT_SPECS}")
