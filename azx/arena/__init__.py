"""The arena: agents that play games, matches between them, and Elo ratings."""

from ._agent import (
    AbstractAgent as AbstractAgent,
    GreedyAgent as GreedyAgent,
    NetworkAgent as NetworkAgent,
    RandomAgent as RandomAgent,
    SearchAgent as SearchAgent,
)
from ._elo import elo_ratings as elo_ratings
from ._match import MatchResult as MatchResult, play_match as play_match
from ._opening import RandomOpening as RandomOpening
from ._openspiel import (
    OpenSpielAlphaBetaAgent as OpenSpielAlphaBetaAgent,
    OpenSpielMCTSAgent as OpenSpielMCTSAgent,
)
from ._opponents import opponent as opponent
from ._returns import episode_returns as episode_returns
from ._rollout import RolloutMCTSAgent as RolloutMCTSAgent
from ._solver import TicTacToeSolver as TicTacToeSolver
