"""GNU Backgammon's neural-network evaluator as a backgammon opponent (the optional
`gnubg` package: Python bindings of the GNU Backgammon engine)."""

from typing import Any

import equinox as eqx
import numpy as np
from jaxtyping import Int

from ._pubeval import Board, FullMoveAgent, full_moves


GNUBG_LEVELS = {
    "beginner": 0.060,
    "casual": 0.050,
    "intermediate": 0.040,
    "advanced": 0.015,
    "expert": 0.0,
}
"""GNU Backgammon's named playing levels that evaluate at 0 ply, with the noise each adds
to its evaluations (gnubg's own settings; "expert" adds none)."""


def _gnubg() -> Any:
    try:
        import gnubg
    except ImportError as error:
        raise ImportError(
            "the gnubg opponent needs GNU Backgammon's Python bindings: pip install 'azx[gnubg]'"
        ) from error
    return gnubg


def gnubg_board(board: Board) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A pgx board (seen by the player who just moved, who is no longer on roll) as
    gnubg's two lists of 25 counts, the player not on roll first: each side's points 1
    to 24 counted from its own home, then its bar.

    pgx's point `p` is the mover's point `24 - p` and the opponent's point `p + 1`.
    """
    board = np.asarray(board)
    mover, opponent = [0] * 25, [0] * 25
    for point in range(24):
        if board[point] > 0:
            mover[23 - point] = int(board[point])
        elif board[point] < 0:
            opponent[point] = int(-board[point])
    mover[24], opponent[24] = int(board[24]), int(-board[25])
    return tuple(mover), tuple(opponent)


class GnubgAgent(FullMoveAgent):
    """GNU Backgammon's checker play at 0 ply: for the roll, plays the full move (among
    those pgx allows) after which gnubg's neural network gives the opponent, now on roll,
    the lowest cubeless money equity (win, gammon and backgammon chances weighed 1, 2
    and 3 points). `level` is one of gnubg's 0-ply playing levels
    ([`azx.arena.GNUBG_LEVELS`][]): all share the network and differ in the noise added
    to each evaluation, which gnubg draws from the position ("deterministic" noise), so
    that the agent plays the same move in the same position every time. Needs the
    optional `gnubg` package (`pip install 'azx[gnubg]'`), imported when the agent is
    made.
    """

    level: str = eqx.field(static=True)

    def __init__(self, level: str = "expert"):
        if level not in GNUBG_LEVELS:
            raise ValueError(f"gnubg's level must be one of {list(GNUBG_LEVELS)}, got {level!r}")
        _gnubg()
        self.level = level

    def choose(self, board: Int[np.ndarray, "28"], dice: list[int]) -> list[int]:
        gnubg = _gnubg()
        context = gnubg.evalcontext(0, 0, 1, 0, GNUBG_LEVELS[self.level])
        cube = gnubg.cubeinfo()

        def score(final: tuple[int, ...]) -> float:
            if final[26] == 15:  # the last checker borne off: won
                return np.inf
            # The opponent's equity (the last entry), on roll after the move.
            return -gnubg.evaluate(gnubg_board(final), cube, context)[-1]

        finals = full_moves(board, dice)
        return finals[max(finals, key=score)]  # ties: the move found first
