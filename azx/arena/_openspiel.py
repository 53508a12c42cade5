"""OpenSpiel's search bots as arena agents: baselines written outside azx, and outside JAX.

OpenSpiel (C++ with Python bindings) cannot run inside a jitted match, so these agents
call back to the host once per move of a batch of games (`jax.pure_callback`). Their
agent state is each game's move history, kept as arrays; the host rebuilds every
game's OpenSpiel state by replaying it from the initial position, so the callback is a
pure function of its inputs and nothing lives on the host between moves. Replaying a
game costs at most a few hundred `apply_action` calls, next to a search's thousands.

`open_spiel` is imported when an agent is made, never by `import azx`.
"""

import abc
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Int, UInt32

from .._types import EnvState, PRNGKey
from .._validate import check_non_negative_number, check_positive_int
from ..envs import AbstractEnv
from ._agent import AbstractAgent


class _Game(NamedTuple):
    """How a pgx game maps onto OpenSpiel's game of the same rules."""

    openspiel_name: str
    num_actions: int
    max_moves: int
    """The most moves a pgx game can last."""
    closing_pass: int | None
    """pgx's pass action, where pgx ends a game with two passes in a row when neither
    player can move, while OpenSpiel ends it at once (othello); else None."""


#: Both libraries number the actions alike (cells row by row; connect four's columns;
#: othello's pass is 64), start from the same position with the first mover, and play by
#: the same rules, but for othello's closing passes. tests/test_openspiel.py checks, move
#: by move over random games, that legal moves, players, ends and winners agree.
_GAMES: dict[str, _Game] = {
    "tic_tac_toe": _Game("tic_tac_toe", 9, 9, None),
    "connect_four": _Game("connect_four", 7, 42, None),
    "othello": _Game("othello", 65, 128 + 2, 64),
}
SUPPORTED_GAMES = tuple(_GAMES)
#: A move-history slot not yet played.
_NO_MOVE = -1
_INSTALL = "pip install 'azx[openspiel]'"


def _pyspiel() -> Any:
    try:
        import pyspiel
    except ImportError as error:
        raise ImportError(
            f"the OpenSpiel agents need the open_spiel package: {_INSTALL}"
        ) from error
    return pyspiel


@functools.cache
def _game(pgx_name: str) -> Any:
    return _pyspiel().load_game(_GAMES[pgx_name].openspiel_name)


def _check_game(agent: str, env: AbstractEnv) -> str:
    """The pgx name of `env`, if OpenSpiel has the same game; a ValueError otherwise."""
    if env.name not in _GAMES or env.num_actions != _GAMES[env.name].num_actions:
        raise ValueError(
            f"{agent} plays {', '.join(SUPPORTED_GAMES)} (games whose OpenSpiel and pgx "
            f"versions agree move by move), not {env.name!r}"
        )
    return env.name


class _MoveHistory(eqx.Module):
    """Agent state of the OpenSpiel agents: the moves of each game so far."""

    moves: Int[Array, "batch max_moves"]
    """Actions in the order played; `_NO_MOVE` after the last."""
    num_moves: Int[Array, " batch"]


def _host_actions(
    pgx_name: str,
    choose: Callable[[Any, Any, int], int],
    moves: Int[ArrayLike, "batch max_moves"],
    num_moves: Int[ArrayLike, " batch"],
    live: Bool[ArrayLike, " batch"],
    legal_action_mask: Bool[ArrayLike, "batch num_actions"],
    seeds: UInt32[ArrayLike, " batch"],
) -> Int[np.ndarray, " batch"]:
    """`choose(game, state, seed)` in every live game, its state replayed from `moves`."""
    moves, num_moves, live, legal_action_mask, seeds = map(
        np.asarray, (moves, num_moves, live, legal_action_mask, seeds)
    )
    game = _game(pgx_name)
    closing_pass = _GAMES[pgx_name].closing_pass
    actions = np.zeros(moves.shape[0], np.int32)
    for row in np.flatnonzero(live):
        history = [int(action) for action in moves[row, : num_moves[row]]]
        state = game.new_initial_state()
        while history and history[0] in state.legal_actions():
            state.apply_action(history.pop(0))
        # Where neither player can move, OpenSpiel's othello is over, but pgx's goes on
        # until both players have passed (the only legal move).
        closing = state.is_terminal() and closing_pass is not None
        expected = np.zeros(legal_action_mask.shape[1], np.bool_)
        expected[[closing_pass] if closing else state.legal_actions()] = True
        in_step = all(closing and action == closing_pass for action in history)
        if not in_step or not np.array_equal(expected, legal_action_mask[row]):
            raise RuntimeError(
                f"an OpenSpiel agent lost track of game {row}: its {num_moves[row]} recorded "
                "moves do not lead to the position it was asked to play (it must see every "
                "move, through observe, from the start of the game)"
            )
        actions[row] = closing_pass if closing else choose(game, state, int(seeds[row]))
    return actions


def _mcts_move(
    num_simulations: int, exploration: float, num_rollouts: int, game: Any, state: Any, seed: int
) -> int:
    pyspiel = _pyspiel()
    evaluator = pyspiel.RandomRolloutEvaluator(num_rollouts, seed)
    bot = pyspiel.MCTSBot(
        game,
        evaluator,
        exploration,
        num_simulations,
        1000,  # max_memory_mb: a cap on the tree (1 GB)
        True,  # solve: back up proven wins and losses (MCTS-Solver), OpenSpiel's default
        (seed + 1) % 2**31,
        False,  # verbose
    )
    return int(bot.step(state))


def _alpha_beta_move(depth: int, game: Any, state: Any, seed: int) -> int:
    from open_spiel.python.algorithms import minimax

    mover = state.current_player()
    actions = state.legal_actions()
    # Every move gets its exact value (a full window per move), so that the moves of
    # equal value are known and one is picked at random.
    values = [
        minimax.alpha_beta_search(
            game,
            state=state.child(action),
            value_function=lambda leaf: 0.0,  # non-terminal leaves at the depth limit
            maximum_depth=depth - 1,
            maximizing_player_id=mover,
        )[0]
        for action in actions
    ]
    best = [action for action, value in zip(actions, values) if value == max(values)]
    return int(np.random.default_rng(seed).choice(best))


class _AbstractOpenSpielAgent(AbstractAgent):
    """What the OpenSpiel agents share: the move history as agent state, and one host
    callback per batch that replays each game and asks the bot for a move."""

    @abc.abstractmethod
    def _move(self) -> Callable[[Any, Any, int], int]:
        """`move(game, state, seed)`: the bot's action in an OpenSpiel state (on the host)."""

    def init(self, env: AbstractEnv, batch_size: int) -> _MoveHistory:
        max_moves = _GAMES[_check_game(type(self).__name__, env)].max_moves
        return _MoveHistory(
            moves=jnp.full((batch_size, max_moves), _NO_MOVE, jnp.int32),
            num_moves=jnp.zeros(batch_size, jnp.int32),
        )

    def observe(
        self, agent_state: _MoveHistory, action: Int[Array, " batch"], done: Bool[Array, " batch"]
    ) -> _MoveHistory:
        rows = jnp.arange(action.shape[0])
        moves = agent_state.moves.at[rows, agent_state.num_moves].set(action, mode="drop")
        # A finished game's history is cleared, ready for a new game in that row.
        moves = jnp.where(done[:, None], _NO_MOVE, moves)
        num_moves = jnp.where(done, 0, agent_state.num_moves + 1)
        return _MoveHistory(moves=moves, num_moves=num_moves)

    def __call__(
        self, env: AbstractEnv, agent_state: _MoveHistory, env_state: EnvState, *, key: PRNGKey
    ) -> tuple[Int[Array, " batch"], _MoveHistory]:
        name = _check_game(type(self).__name__, env)
        live = ~jax.vmap(env.terminated)(env_state) & ~jax.vmap(env.truncated)(env_state)
        # One seed per row: the same key gives the same moves. (31 bits: OpenSpiel's C++
        # seeds are signed ints.)
        seeds = jax.random.bits(key, live.shape, jnp.uint32) >> 1
        action = jax.pure_callback(
            functools.partial(_host_actions, name, self._move()),
            jax.ShapeDtypeStruct(live.shape, jnp.int32),
            agent_state.moves,
            agent_state.num_moves,
            live,
            jax.vmap(env.legal_action_mask)(env_state),
            seeds,
            vmap_method="sequential",
        )
        return action, agent_state


class OpenSpielMCTSAgent(_AbstractOpenSpielAgent):
    """OpenSpiel's Monte Carlo tree search with random rollouts: an independent rollout
    MCTS to compare with azx's own ([`azx.arena.RolloutMCTSAgent`][]).

    Each move, for each game, a fresh `pyspiel.MCTSBot` (OpenSpiel's C++ MCTS, which is
    30 times faster than its Python `open_spiel.python.algorithms.mcts.MCTSBot` on
    connect four and otherwise the same algorithm) searches from the current position
    with a `pyspiel.RandomRolloutEvaluator`. It runs OpenSpiel's defaults: UCT, and
    proven wins and losses backed up (MCTS-Solver). Its random number generators are
    seeded from the `key` of the call, so that equal keys give equal games.

    Plays pgx's `tic_tac_toe`, `connect_four` and `othello`, whose action numbers and
    rules OpenSpiel's games of the same names share (but for othello's end: where neither
    player can move, pgx's game goes on until both have passed, and the agent passes
    without a search). Needs `open_spiel`
    (`pip install 'azx[openspiel]'`); the searches run on the host, one game after the
    other, through `jax.pure_callback`.
    """

    num_simulations: int = eqx.field(static=True)
    exploration: float = eqx.field(static=True)
    num_rollouts: int = eqx.field(static=True)

    def __init__(self, num_simulations: int, *, exploration: float = 2.0, num_rollouts: int = 1):
        """**Arguments:**

        - `num_simulations`: simulations per move (each adds one node and evaluates it).
        - `exploration`: the UCT constant `c` in `Q + c * sqrt(ln N / n)`, with returns in
          `[-1, 1]`; 2 is the value OpenSpiel's own examples use.
        - `num_rollouts`: random playouts averaged to evaluate a new node.

        **Raises:** `ImportError` if `open_spiel` is not installed; `ValueError` for a
        bad number.
        """
        check_positive_int("num_simulations", num_simulations)
        check_positive_int("num_rollouts", num_rollouts)
        check_non_negative_number("exploration", exploration)
        _pyspiel()
        self.num_simulations = num_simulations
        self.exploration = float(exploration)
        self.num_rollouts = num_rollouts

    def _move(self) -> Callable[[Any, Any, int], int]:
        return functools.partial(
            _mcts_move, self.num_simulations, self.exploration, self.num_rollouts
        )


class OpenSpielAlphaBetaAgent(_AbstractOpenSpielAgent):
    """OpenSpiel's minimax search with alpha-beta pruning, to a fixed depth: an exact
    solver where the depth reaches the end of the game (9 for tic-tac-toe), a short-sighted
    tactician otherwise.

    Each move, every legal move is valued by `open_spiel.python.algorithms.minimax`'s
    `alpha_beta_search` to `depth` moves in all (the move itself included). Positions
    that end the game count their returns (+1 win, 0 draw, -1 loss); positions at the
    depth limit that do not count 0, as a draw: there is no heuristic, so the agent sees
    wins and losses within its horizon only. Among the moves of the best value it picks
    one at random, with a generator seeded from the `key` of the call.

    Plays pgx's `tic_tac_toe`, `connect_four` and `othello`, like
    [`azx.arena.OpenSpielMCTSAgent`][]. The search is Python (OpenSpiel's reference
    implementation), so its cost grows with the branching factor to the power `depth`:
    under 0.1 s for the first move at depth 9 in tic-tac-toe, where pruning does most of
    the work.
    """

    depth: int = eqx.field(static=True)

    def __init__(self, depth: int):
        """**Arguments:**

        - `depth`: moves searched ahead, the agent's own move included (1 takes a win
          in one move if there is one).

        **Raises:** `ImportError` if `open_spiel` is not installed; `ValueError` for a
        bad depth.
        """
        check_positive_int("depth", depth)
        _pyspiel()
        self.depth = depth

    def _move(self) -> Callable[[Any, Any, int], int]:
        return functools.partial(_alpha_beta_move, self.depth)
