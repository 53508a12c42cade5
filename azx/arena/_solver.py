"""Perfect play for tic-tac-toe: a minimax table over every position, read with one gather."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Int

from .._types import EnvState, PRNGKey
from ..envs import AbstractEnv
from ._agent import AbstractAgent, _Stateless, _stateless, random_legal


_LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
_NUM_CODES = 3**9
#: Base-3 place value of each cell: digit 0 empty, 1 mark of the player to move, 2 opponent's.
_PLACE = tuple(3**cell for cell in range(9))


def _has_line(cells: frozenset[int]) -> bool:
    return any(all(c in cells for c in line) for line in _LINES)


@functools.cache
def _tables() -> tuple[np.ndarray, np.ndarray]:
    """Optimal moves and game values of all positions reachable from the empty board.

    Positions are seen by the player to move. A position's score is positive for a win,
    larger the sooner it comes (`1 + empty cells` at the end), negative for a loss, zero
    for a draw, so that optimal moves win fastest and lose slowest. Unreachable codes
    allow every empty cell and have value 0.
    """
    optimal = np.zeros((_NUM_CODES, 9), np.bool_)
    value = np.zeros(_NUM_CODES, np.int8)

    @functools.cache
    def score(mine: frozenset[int], theirs: frozenset[int]) -> int:
        empty = [c for c in range(9) if c not in mine and c not in theirs]
        if _has_line(theirs):  # the opponent just completed a line
            return -(1 + len(empty))
        if not empty:
            return 0
        # The child is seen by the opponent, who then moves: negamax.
        child_scores = [-score(theirs, mine | {c}) for c in empty]
        best = max(child_scores)
        code = sum(_PLACE[c] for c in mine) + sum(2 * _PLACE[c] for c in theirs)
        for c, s in zip(empty, child_scores):
            optimal[code, c] = s == best
        value[code] = np.sign(best)
        return best

    score(frozenset(), frozenset())
    # Codes never reached (or terminal): any empty cell, so the agent stays legal.
    unset = ~optimal.any(axis=1)
    digits = (np.arange(_NUM_CODES)[:, None] // np.array(_PLACE)[None, :]) % 3
    optimal[unset] = digits[unset] == 0
    return optimal, value


class TicTacToeSolver(AbstractAgent):
    """Perfect tic-tac-toe: plays a game-theoretically optimal move, chosen at random
    among the optimal ones, preferring the fastest win (or the slowest loss).

    At construction a negamax over the 5,478 reachable positions (plain Python, well
    under a second) fills a table indexed by the board as seen by the player to move;
    at play time the board is read from pgx's observation (plane 0: the mover's marks,
    plane 1: the opponent's) and looked up with one gather.
    """

    optimal_action_mask: Bool[Array, "19683 9"]
    """Optimal moves of each position, indexed by its base-3 code (see `code`)."""
    position_value: Int[Array, " 19683"]
    """Game value for the player to move: +1 win, 0 draw, -1 loss with perfect play."""

    def __init__(self):
        optimal, value = _tables()
        self.optimal_action_mask = jnp.asarray(optimal)
        self.position_value = jnp.asarray(value, jnp.int32)

    @staticmethod
    def code(env: AbstractEnv, env_state: EnvState) -> Int[Array, " batch"]:
        """Table index of each position in a batch of tic-tac-toe states."""
        if env.num_actions != 9 or env.observation_shape != (3, 3, 2):
            raise ValueError(
                "TicTacToeSolver plays pgx tic_tac_toe only (9 actions, (3, 3, 2) "
                f"observations); got {env!r}"
            )
        observation = jax.vmap(env.observation)(env_state)
        planes = observation.reshape(observation.shape[0], 9, 2).astype(jnp.int32)
        digits = planes[:, :, 0] + 2 * planes[:, :, 1]
        return jnp.sum(digits * jnp.asarray(_PLACE, jnp.int32)[None, :], axis=1)

    def value(self, env: AbstractEnv, env_state: EnvState) -> Int[Array, " batch"]:
        """Game value for the player to move (+1, 0, -1) of each state in a batch."""
        return self.position_value[self.code(env, env_state)]

    def init(self, env: AbstractEnv, batch_size: int) -> _Stateless:
        return _stateless(batch_size)

    def observe(self, agent_state, action, done):
        del action, done
        return agent_state

    def __call__(
        self, env: AbstractEnv, agent_state: _Stateless, env_state: EnvState, *, key: PRNGKey
    ) -> tuple[Int[Array, " batch"], _Stateless]:
        optimal = self.optimal_action_mask[self.code(env, env_state)]
        legal = jax.vmap(env.legal_action_mask)(env_state)
        return random_legal(optimal & legal, key=key), agent_state
