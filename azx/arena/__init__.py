"""The arena: agents that play games, matches between them, and Elo ratings."""

from ._agent import (
    AbstractAgent as AbstractAgent,
    GreedyAgent as GreedyAgent,
    NetworkAgent as NetworkAgent,
    RandomAgent as RandomAgent,
    SearchAgent as SearchAgent,
)
from ._backgammon import (
    BackgammonResult as BackgammonResult,
    backgammon_match as backgammon_match,
    rule_points as rule_points,
)
from ._elo import elo_ratings as elo_ratings
from ._game2048 import (
    Expectimax2048Agent as Expectimax2048Agent,
    Result2048 as Result2048,
    evaluate_2048 as evaluate_2048,
    expectimax_values as expectimax_values,
    heuristic_2048 as heuristic_2048,
)
from ._gnubg import GNUBG_LEVELS as GNUBG_LEVELS, GnubgAgent as GnubgAgent
from ._match import MatchResult as MatchResult, play_match as play_match
from ._opening import RandomOpening as RandomOpening
from ._openspiel import (
    OpenSpielAlphaBetaAgent as OpenSpielAlphaBetaAgent,
    OpenSpielMCTSAgent as OpenSpielMCTSAgent,
)
from ._opponents import opponent as opponent
from ._pubeval import (
    FullMoveAgent as FullMoveAgent,
    PubevalAgent as PubevalAgent,
    pubeval_score as pubeval_score,
)
from ._returns import (
    Episodes as Episodes,
    episode_returns as episode_returns,
    play_episodes as play_episodes,
)
from ._rollout import RolloutMCTSAgent as RolloutMCTSAgent
from ._solver import TicTacToeSolver as TicTacToeSolver
from ._value_move import ValueMoveAgent as ValueMoveAgent
