"""Tesauro's pubeval: a fixed linear evaluator of backgammon positions, the standard
benchmark opponent, as an arena agent for pgx's `backgammon`.

pgx splits a backgammon turn into micro-actions (one checker, one die). pubeval, as
Tesauro's program uses it, rates the position after the WHOLE move for the roll, so the
agent enumerates every full move on the host (`jax.pure_callback`, once per call for the
batch), plays the first micro-action of the best and keeps the rest as its plan for the
turn's next calls. Enumeration runs on the host because the number of full moves varies
from 1 to about 3,000 (gnubg's move generator allows 3,060), which a fixed-size array in
JAX would have to hold for every game at every call; the host walks only the moves that
exist, and drops repeated final positions with a set.
"""

import abc
import functools
from collections.abc import Sequence
from typing import TypeAlias

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float, Int

from .._types import EnvState, PRNGKey
from ..envs import AbstractEnv
from ._agent import AbstractAgent, require_game


# Tesauro's published weights (rec.games.backgammon, 1993; the files WT.race and WT.cntc
# of pubeval.c), in his input order: for each of the player's points 24 down to 1, five
# inputs (an opponent's blot; one, at least two, exactly three of the player's checkers;
# (n - 3) / 2 for n >= 4 of them), then the opponent's checkers on the bar / 2 and the
# player's checkers borne off / 15.
RACE_WEIGHTS = np.array(
    [
        0.00000, -0.17160, 0.27010, 0.29906, -0.08471, 0.00000, -1.40375, -1.05121,
        0.07217, -0.01351, 0.00000, -1.29506, -2.16183, 0.13246, -1.03508, 0.00000,
        -2.29847, -2.34631, 0.17253, 0.08302, 0.00000, -1.27266, -2.87401, -0.07456,
        -0.34240, 0.00000, -1.34640, -2.46556, -0.13022, -0.01591, 0.00000, 0.27448,
        0.60015, 0.48302, 0.25236, 0.00000, 0.39521, 0.68178, 0.05281, 0.09266,
        0.00000, 0.24855, -0.06844, -0.37646, 0.05685, 0.00000, 0.17405, 0.00430,
        0.74427, 0.00576, 0.00000, 0.12392, 0.31202, -0.91035, -0.16270, 0.00000,
        0.01418, -0.10839, -0.02781, -0.88035, 0.00000, 1.07274, 2.00366, 1.16242,
        0.22520, 0.00000, 0.85631, 1.06349, 1.49549, 0.18966, 0.00000, 0.37183,
        -0.50352, -0.14818, 0.12039, 0.00000, 0.13681, 0.13978, 1.11245, -0.12707,
        0.00000, -0.22082, 0.20178, -0.06285, -0.52728, 0.00000, -0.13597, -0.19412,
        -0.09308, -1.26062, 0.00000, 3.05454, 5.16874, 1.50680, 5.35000, 0.00000,
        2.19605, 3.85390, 0.88296, 2.30052, 0.00000, 0.92321, 1.08744, -0.11696,
        -0.78560, 0.00000, -0.09795, -0.83050, -1.09167, -4.94251, 0.00000, -1.00316,
        -3.66465, -2.56906, -9.67677, 0.00000, -2.77982, -7.26713, -3.40177, -12.32252,
        0.00000, 3.42040,
    ],
    np.float64,
)  # fmt: skip
CONTACT_WEIGHTS = np.array(
    [
        0.25696, -0.66937, -1.66135, -2.02487, -2.53398, -0.16092, -1.11725, -1.06654,
        -0.92830, -1.99558, -1.10388, -0.80802, 0.09856, -0.62086, -1.27999, -0.59220,
        -0.73667, 0.89032, -0.38933, -1.59847, -1.50197, -0.60966, 1.56166, -0.47389,
        -1.80390, -0.83425, -0.97741, -1.41371, 0.24500, 0.10970, -1.36476, -1.05572,
        1.15420, 0.11069, -0.38319, -0.74816, -0.59244, 0.81116, -0.39511, 0.11424,
        -0.73169, -0.56074, 1.09792, 0.15977, 0.13786, -1.18435, -0.43363, 1.06169,
        -0.21329, 0.04798, -0.94373, -0.22982, 1.22737, -0.13099, -0.06295, -0.75882,
        -0.13658, 1.78389, 0.30416, 0.36797, -0.69851, 0.13003, 1.23070, 0.40868,
        -0.21081, -0.64073, 0.31061, 1.59554, 0.65718, 0.25429, -0.80789, 0.08240,
        1.78964, 0.54304, 0.41174, -1.06161, 0.07851, 2.01451, 0.49786, 0.91936,
        -0.90750, 0.05941, 1.83120, 0.58722, 1.28777, -0.83711, -0.33248, 2.64983,
        0.52698, 0.82132, -0.58897, -1.18223, 3.35809, 0.62017, 0.57353, -0.07276,
        -0.36214, 4.37655, 0.45481, 0.21746, 0.10504, -0.61977, 3.54001, 0.04612,
        -0.18108, 0.63211, -0.87046, 2.47673, -0.48016, -1.27157, 0.86505, -1.11342,
        1.24612, -0.82385, -2.77082, 1.23606, -1.59529, 0.10438, -1.30206, -4.11520,
        5.62596, -2.75800,
    ],
    np.float64,
)  # fmt: skip
#: pubeval's value of a position with all the player's checkers borne off (a win).
ALL_OFF_SCORE = 99_999_999.0

# pgx's board, from the side of the player to move (own checkers positive, the
# opponent's negative): points 0..23 in the direction the player moves (home 18..23),
# then the player's bar, the opponent's bar, the player's and the opponent's borne-off.
_BAR, _OPPONENT_BAR, _OFF = 24, 25, 26
_NO_MOVE = -1
_MAX_MICRO_ACTIONS = 4

#: One pgx backgammon board: an array of 28 ints, or a list of them.
Board: TypeAlias = Int[ArrayLike, "28"] | Sequence[int]


def pubeval_inputs(
    boards: Int[ArrayLike, "*batch 28"] | Sequence[Sequence[int]],
) -> Float[np.ndarray, "*batch 122"]:
    """pubeval's 122 inputs for pgx backgammon boards (seen by the player to move).

    pgx's point `p` is the player's point `24 - p` in Tesauro's numbering, so his
    inputs for points 24 down to 1 are pgx's points 0 up to 23, five each.
    """
    boards = np.asarray(boards)
    points = boards[..., :24]
    inputs = np.zeros(boards.shape[:-1] + (24, 5))
    inputs[..., 0] = points == -1
    inputs[..., 1] = points == 1
    inputs[..., 2] = points >= 2
    inputs[..., 3] = points == 3
    inputs[..., 4] = np.where(points >= 4, (points - 3) / 2, 0.0)
    flat = inputs.reshape(boards.shape[:-1] + (120,))
    extra = np.stack([-boards[..., _OPPONENT_BAR] / 2, boards[..., _OFF] / 15], axis=-1)
    return np.concatenate([flat, extra], axis=-1)


def pubeval_score(
    boards: Int[ArrayLike, "*batch 28"] | Sequence[Sequence[int]], race: bool
) -> Float[np.ndarray, "*batch"]:
    """Tesauro's pubeval of pgx backgammon boards, for the player to move: larger is
    better for that player. `race` picks the race weights (no contact) over the contact
    weights; a board with all the player's checkers off scores `ALL_OFF_SCORE`."""
    boards = np.asarray(boards)
    weights = RACE_WEIGHTS if race else CONTACT_WEIGHTS
    score = pubeval_inputs(boards) @ weights
    return np.where(boards[..., _OFF] == 15, ALL_OFF_SCORE, score)


def is_race(board: Board) -> bool:
    """Whether no checker can hit or block another any more: nobody on the bar, and every
    checker of the player to move past every checker of the opponent."""
    board = np.asarray(board)
    if board[_BAR] or board[_OPPONENT_BAR]:
        return False
    own = np.flatnonzero(board[:24] > 0)
    opponent = np.flatnonzero(board[:24] < 0)
    return bool(own.size == 0 or opponent.size == 0 or opponent.max() < own.min())


def _single_moves(board: list[int], pips: int) -> list[int]:
    """pgx's legal micro-actions (`6 * source + pips - 1`; source 1 is the bar, 2 + p
    point p) that move one checker `pips` points."""
    die = pips - 1
    if board[_BAR] > 0:  # checkers on the bar must enter first
        return [6 + die] if board[pips - 1] >= -1 else []
    own = [point for point in range(24) if board[point] > 0]
    all_home = sum(max(count, 0) for count in board[18:24]) == 15 - board[_OFF]
    moves = []
    for point in own:
        target = point + pips
        if target <= 23:
            legal = board[target] >= -1
        else:  # bearing off: exactly, or from the rearmost checker with a larger die
            legal = all_home and (target == 24 or point == own[0])
        if legal:
            moves.append(6 * (point + 2) + die)
    return moves


def _apply(board: list[int], action: int) -> list[int]:
    """`board` after the micro-action `action`, as pgx plays it (hitting a lone
    opponent's checker sends it to the opponent's bar)."""
    source_code, pips = divmod(action, 6)
    pips += 1
    source = _BAR if source_code == 1 else source_code - 2
    target = pips - 1 if source == _BAR else source + pips
    target = target if target <= 23 else _OFF
    board = list(board)
    board[source] -= 1
    if board[target] == -1:
        board[_OPPONENT_BAR] -= 1
        board[target] = 0
    board[target] += 1
    return board


def full_moves(board: Board, dice: list[int]) -> dict[tuple[int, ...], list[int]]:
    """Every position the player to move can reach with the dice `dice` (pips, 1 to 6;
    four equal ones for a double, or what is left of them mid-turn), each with one
    sequence of pgx micro-actions that reaches it.

    The turn ends as pgx ends it: when the dice are used, when no die can be played
    (pgx's "no move", action 0), or when the last checker is borne off. For a double,
    only sequences that move from sources in non-decreasing order are walked: any other
    order of the same checker moves is legal exactly when that one is and ends in the
    same position (a checker can only move forward, hits and blocks do not depend on the
    order), so this reaches every position once or a few times instead of up to 24 times.
    """
    start = [int(count) for count in np.asarray(board)]
    double = len(set(dice)) == 1
    finals: dict[tuple[int, ...], list[int]] = {}
    seen: set[tuple] = set()

    def walk(board: list[int], dice: tuple[int, ...], path: list[int], lowest: int) -> None:
        key = (tuple(board), dice, lowest)
        if key in seen:
            return
        seen.add(key)
        if board[_OFF] == 15 or not dice:
            finals.setdefault(tuple(board), path)
            return
        moves = [
            (action, dice[:i] + dice[i + 1 :])
            for i, pips in enumerate(dice)
            if pips not in dice[:i]
            for action in _single_moves(board, pips)
        ]
        if not moves:
            finals.setdefault(tuple(board), path + [0])  # pgx's "no move" ends the turn
            return
        for action, rest in moves:
            # Out-of-order branches of a double end here; the ordered ones cover them.
            if not double or action // 6 >= lowest:
                walk(_apply(board, action), rest, path + [action], action // 6 if double else 0)

    walk(start, tuple(sorted(dice)), [], 0)
    return finals


def best_move(board: Board, dice: list[int], race: bool) -> list[int]:
    """The micro-actions of the full move whose final position pubeval rates best (the
    first such move in enumeration order where several tie)."""
    finals = full_moves(board, dice)
    positions = list(finals)
    scores = pubeval_score(np.array(positions), race)
    return finals[positions[int(np.argmax(scores))]]


def _host_plans(
    static: "FullMoveAgent",
    name: str,
    arrays: "FullMoveAgent",
    boards: Int[ArrayLike, "batch 28"],
    playable_dice: Int[ArrayLike, "batch 4"],
    played: Int[ArrayLike, " batch"],
    live: Bool[ArrayLike, " batch"],
    legal_action_mask: Bool[ArrayLike, "batch 156"],
    plans: Int[ArrayLike, "batch 4"],
) -> tuple[Int[np.ndarray, " batch"], Int[np.ndarray, "batch 4"]]:
    """The next micro-action of each live game, and the plans for the turns.

    A game at the start of a turn (nothing played yet), or whose plan's next action is
    not legal (the plan was made for another turn or another player), gets a new plan:
    `agent.choose(board, dice)`'s micro-actions for its position, where `agent` is the
    agent rebuilt on the host from its `static` part and its `arrays` (a network's
    parameters, say), which the callback hands over copied to the host's CPU.
    """
    choose = eqx.combine(arrays, static).choose
    boards, playable_dice, played, live, legal_action_mask, plans = map(
        np.array, (boards, playable_dice, played, live, legal_action_mask, plans)
    )
    plans = plans.astype(np.int32)
    actions = np.zeros(boards.shape[0], np.int32)
    for row in np.flatnonzero(live):
        step = int(played[row])
        planned = plans[row, step] if step < _MAX_MICRO_ACTIONS else _NO_MOVE
        if step == 0 or planned == _NO_MOVE or not legal_action_mask[row, planned]:
            dice = [int(die) + 1 for die in playable_dice[row] if die >= 0]
            move = choose(boards[row], dice)
            if not legal_action_mask[row, move[0]]:
                raise RuntimeError(
                    f"full_moves (for {name}) disagrees with pgx: it would play {move[0]} "
                    f"on board {boards[row].tolist()} with dice {dice}, which pgx forbids"
                )
            plans[row] = _NO_MOVE
            plans[row, step : step + len(move)] = move[: _MAX_MICRO_ACTIONS - step]
        actions[row] = plans[row, step]
    return actions, plans


class _Plan(eqx.Module):
    """Agent state of a [`azx.arena.FullMoveAgent`][]: each game's micro-actions for the
    turn, indexed by how many dice the turn has played (`_NO_MOVE` past its end)."""

    actions: Int[Array, "batch 4"]


class FullMoveAgent(AbstractAgent):
    """A backgammon player that picks a whole move for the roll, as the classic programs
    do, where pgx plays a turn as micro-actions (one checker, one die).

    At the first micro-action of a turn the agent enumerates every full move on the host
    (`jax.pure_callback`; see `full_moves` in this module), lets `choose` pick one, and
    keeps its micro-actions in the agent state, so that the turn's later calls play the
    rest of it. pgx, unlike the rules, does not oblige a player to use both dice (or the
    larger) where possible; the agent chooses among the full moves pgx allows.
    Subclasses give `choose`, which runs on the host: the agent's array fields (a
    network's parameters, say) reach it copied to the host's CPU, where it computes.
    """

    @abc.abstractmethod
    def choose(self, board: Int[np.ndarray, "28"], dice: list[int]) -> list[int]:
        """The micro-actions of the full move to play on `board` (pgx's, seen by the
        player to move) with `dice` (pips; four for a double, or what is left of them)."""

    def init(self, env: AbstractEnv, batch_size: int) -> _Plan:
        require_game(type(self).__name__, env, "backgammon")
        return _Plan(actions=jnp.full((batch_size, _MAX_MICRO_ACTIONS), _NO_MOVE, jnp.int32))

    def __call__(
        self, env: AbstractEnv, agent_state: _Plan, env_state: EnvState, *, key: PRNGKey
    ) -> tuple[Int[Array, " batch"], _Plan]:
        del key  # deterministic
        require_game(type(self).__name__, env, "backgammon")
        live = ~jax.vmap(env.terminated)(env_state) & ~jax.vmap(env.truncated)(env_state)
        batch = live.shape[0]
        arrays, static = eqx.partition(self, eqx.is_array)
        action, plans = jax.pure_callback(
            functools.partial(_host_plans, static, type(self).__name__),
            (
                jax.ShapeDtypeStruct((batch,), jnp.int32),
                jax.ShapeDtypeStruct((batch, _MAX_MICRO_ACTIONS), jnp.int32),
            ),
            arrays,
            env_state._board,
            env_state._playable_dice,
            env_state._played_dice_num,
            live,
            jax.vmap(env.legal_action_mask)(env_state),
            agent_state.actions,
            vmap_method="sequential",
        )
        return action, _Plan(actions=plans)

    def observe(self, agent_state, action, done):
        del action, done
        return agent_state


class PubevalAgent(FullMoveAgent):
    """Tesauro's pubeval (1993), the standard benchmark opponent of backgammon programs:
    for the roll, plays the full move whose final position its linear evaluator rates
    best, with the race weights where the position before the move is a race (no
    contact) and the contact weights otherwise, as Tesauro's program does.

    Plays pgx's `backgammon` (a [`azx.envs.PgxBackgammon`][] or its `PgxEnv`) through
    [`FullMoveAgent`][azx.arena.FullMoveAgent]'s enumeration of the full moves pgx
    allows. Deterministic: ties go to the move found first.
    """

    def choose(self, board: Int[np.ndarray, "28"], dice: list[int]) -> list[int]:
        return best_move(board, dice, is_race(board))
