"""Does a tic-tac-toe network pick an optimal move in every position where it matters?

    python -m benchmarks.tictactoe_exact RUN_DIR [RUN_DIR ...] [--examples 5]
    python -m benchmarks.tictactoe_exact --train 0 1 2 [--set FIELD=VALUE ...]

The first form checks trained runs (their newest checkpoints). The second trains the
`tic_tac_toe` preset from scratch for each seed (the whole run in one jitted call, no
evaluations, so faster than `azx train`) and checks the result; `--set` changes a field of
the preset's `Config` (`--set random_opening_moves=2`), `network.`, `search.` a network or
search option (`--set network.width=128`), and `iterations`, `search`, `network`,
`search_options`, `network_options` those fields of the preset (`--set 'search="gumbel"'
--set 'search_options={"num_simulations": 64}'`): the paired
runs of benchmarks/notes.md.

Every position reachable from the empty board with the game not over is enumerated, and
each legal move's exact game value (win, draw or loss for the mover) is computed by a
brute-force negamax written here, apart from [`azx.arena.TicTacToeSolver`][]'s tables
(tests/test_tictactoe_exact.py checks that the two agree). A position is *decisive* when
its legal moves do not all have the same value. The network's move is the argmax of its
policy logits over the legal moves (no search); it is optimal when its value is the best
one. The states are built by replaying each position's moves through `azx.envs`, so the
network sees exactly the observations that self-play gives it.
"""

import argparse
import dataclasses
import functools
import time
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import azx

from . import _settings


_LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
#: Marker for "no move" in padded move lists and for illegal moves in value arrays.
NO_MOVE = -1
ILLEGAL = -2


def _winner(board: tuple[int, ...]) -> int:
    """1 or 2 if that player has a line, else 0. `board` holds 0 (empty), 1 (first
    player's mark), 2 (second player's)."""
    for a, b, c in _LINES:
        if board[a] and board[a] == board[b] == board[c]:
            return board[a]
    return 0


@functools.cache
def _negamax(board: tuple[int, ...]) -> int:
    """Game value (+1, 0, -1) of a non-terminal `board` for the player to move."""
    return max(_move_values(board).values())


def _move_values(board: tuple[int, ...]) -> dict[int, int]:
    """Exact value of each legal move of a non-terminal `board` for the player to move."""
    mover = 1 if board.count(1) == board.count(2) else 2
    values = {}
    for cell in (c for c in range(9) if board[c] == 0):
        child = board[:cell] + (mover,) + board[cell + 1 :]
        if _winner(child):
            values[cell] = 1
        elif 0 not in child:
            values[cell] = 0
        else:
            values[cell] = -_negamax(child)
    return values


@dataclasses.dataclass(frozen=True)
class Positions:
    """Reachable non-terminal positions, one row each."""

    moves: np.ndarray
    """`int32[n, 8]`: the moves (cells 0-8, row by row) that reach the position from the
    empty board, padded with `NO_MOVE`."""
    boards: np.ndarray
    """`int8[n, 9]`: 0 empty, 1 first player's mark, 2 second player's."""
    move_values: np.ndarray
    """`int8[n, 9]`: exact value of each move for the player to move (+1 win, 0 draw,
    -1 loss with perfect play afterwards); `ILLEGAL` where the cell is taken."""

    @property
    def optimal_mask(self) -> np.ndarray:
        """`bool[n, 9]`: the legal moves of the best value."""
        return self.move_values == self.move_values.max(axis=1, keepdims=True)

    @property
    def decisive(self) -> np.ndarray:
        """`bool[n]`: positions whose legal moves do not all have the same value."""
        legal = self.move_values != ILLEGAL
        return (self.optimal_mask != legal).any(axis=1)

    def select(self, rows: np.ndarray) -> "Positions":
        return Positions(self.moves[rows], self.boards[rows], self.move_values[rows])


@functools.cache
def reachable_positions() -> Positions:
    """Every position reachable from the empty board with the game not over (4,520),
    each reached by the first move order a depth-first walk finds."""
    found: dict[tuple[int, ...], tuple[int, ...]] = {}

    def walk(board: tuple[int, ...], moves: tuple[int, ...]) -> None:
        if board in found or _over(board):
            return
        found[board] = moves
        mover = 1 if board.count(1) == board.count(2) else 2
        for cell in (c for c in range(9) if board[c] == 0):
            walk(board[:cell] + (mover,) + board[cell + 1 :], moves + (cell,))

    walk((0,) * 9, ())
    boards = list(found)
    moves = np.full((len(boards), 8), NO_MOVE, np.int32)
    values = np.full((len(boards), 9), ILLEGAL, np.int8)
    for row, board in enumerate(boards):
        moves[row, : len(found[board])] = found[board]
        for cell, value in _move_values(board).items():
            values[row, cell] = value
    return Positions(moves, np.array(boards, np.int8), values)


@functools.cache
def decisive_positions() -> Positions:
    """The reachable positions whose legal moves differ in value."""
    positions = reachable_positions()
    return positions.select(np.flatnonzero(positions.decisive))


def replay(env: azx.envs.AbstractEnv, moves: np.ndarray):
    """The batch of environment states reached by playing each row of `moves` (padded
    with `NO_MOVE`) from the initial state."""
    return jax.jit(functools.partial(_replay, env))(jnp.asarray(moves))


def _replay(env: azx.envs.AbstractEnv, moves):

    def one(row):
        state = env.init(jax.random.key(0))
        for move in row:  # 8 moves at most: unrolled
            stepped = env.step(state, jnp.maximum(move, 0), jax.random.key(0))
            state = jax.tree.map(lambda new, old: jnp.where(move >= 0, new, old), stepped, state)
        return state

    return jax.vmap(one)(moves)


@dataclasses.dataclass(frozen=True)
class Result:
    positions: Positions
    """The decisive positions checked."""
    chosen: np.ndarray
    """`int[n]`: the move picked in each."""

    @property
    def optimal(self) -> np.ndarray:
        return self.positions.optimal_mask[np.arange(len(self.chosen)), self.chosen]

    @property
    def num_optimal(self) -> int:
        return int(self.optimal.sum())

    @property
    def num_positions(self) -> int:
        return len(self.chosen)

    def summary(self) -> str:
        return f"{self.num_optimal} of {self.num_positions} decisive positions played optimally"

    def describe_miss(self, index: int) -> str:
        """One missed position: the board (X moves first, the mover's move marked `*`)
        and the values of the chosen and the optimal moves."""
        board = self.positions.boards[index]
        values = self.positions.move_values[index]
        chosen = int(self.chosen[index])
        marks = ["." if v == 0 else "XO"[v - 1] for v in board]
        marks[chosen] = "*"
        rows = " / ".join("".join(marks[r * 3 : r * 3 + 3]) for r in range(3))
        names = {1: "wins", 0: "draws", -1: "loses"}
        best = np.flatnonzero(self.positions.optimal_mask[index]).tolist()
        return (
            f"{rows}  moves {[int(m) for m in self.positions.moves[index] if m >= 0]}: "
            f"played {chosen} ({names[int(values[chosen])]}), "
            f"optimal {best} ({names[int(values.max())]})"
        )


def check(
    choose: Callable[[azx.envs.AbstractEnv, object], np.ndarray],
    env: azx.envs.AbstractEnv | None = None,
) -> Result:
    """Play `choose(env, states) -> moves` on every decisive position.

    **Arguments:**

    - `choose`: maps a batch of tic-tac-toe states to one legal move per state.
    - `env`: the tic-tac-toe environment (default `azx.envs.make("tic_tac_toe")`).
    """
    env = env or azx.envs.make("tic_tac_toe")
    positions = decisive_positions()
    chosen = np.asarray(choose(env, replay(env, positions.moves)))
    legal = positions.move_values != ILLEGAL
    if not legal[np.arange(len(chosen)), chosen].all():
        raise ValueError("choose returned an illegal move")
    return Result(positions, chosen)


def network_moves(net) -> Callable[[azx.envs.AbstractEnv, object], np.ndarray]:
    """The raw network's choice: argmax of its policy logits over the legal moves."""

    def choose(env, states):
        logits, _ = jax.vmap(net)(jax.vmap(env.observation)(states))
        legal = jax.vmap(env.legal_action_mask)(states)
        return jnp.argmax(jnp.where(legal, logits, -jnp.inf), axis=-1)

    return choose


def check_network(net, env: azx.envs.AbstractEnv | None = None) -> Result:
    """[`check`][] for the argmax of `net`'s policy (a network on ONE observation)."""
    return check(network_moves(net), env)


def agent_moves(
    agent: azx.arena.AbstractAgent,
) -> Callable[[azx.envs.AbstractEnv, object], np.ndarray]:
    """An arena agent's choice (a fresh agent state, key 0), e.g. a search agent's."""

    def choose(env, states):
        batch = jax.tree.leaves(states)[0].shape[0]
        action, _ = agent(env, agent.init(env, batch), states, key=jax.random.key(0))
        return action

    return choose


@dataclasses.dataclass(frozen=True)
class PerfectPlayResult:
    """The positions a deterministic agent can face against an opponent that plays only
    optimal moves, with the agent moving first and second."""

    num_positions: int
    """Distinct positions where the agent moved."""
    mistakes: list[tuple[tuple[int, ...], int]]
    """`(moves, chosen)`: the moves that reach a position and the agent's move there, whose
    exact value is below the position's best. On these lines the agent's best is always a
    draw, so each mistake is a game the perfect opponent can win."""

    def summary(self) -> str:
        return (
            f"{len(self.mistakes)} losing moves in {self.num_positions} positions "
            f"against perfect play"
        )


def against_perfect_play(
    choose: Callable[[azx.envs.AbstractEnv, object], np.ndarray],
    env: azx.envs.AbstractEnv | None = None,
) -> PerfectPlayResult:
    """Walk every line of the game where the agent `choose(env, states) -> moves` meets an
    opponent that picks any move of the best exact value: the agent's move is read once per
    position (positions reached by different move orders are one), the opponent's every
    optimal reply followed. A line stops at the game's end or at the agent's first mistake.
    No mistakes means that no opponent that plays perfectly (such as
    [`azx.arena.TicTacToeSolver`][], whose moves are among these) can beat the agent, in any
    number of games. `choose` must not depend on anything but the position (e.g. a search
    with its noise off).
    """
    env = env or azx.envs.make("tic_tac_toe")
    choose_after = eqx.filter_jit(lambda moves: choose(env, _replay(env, moves)))
    num_positions = 0
    mistakes = []
    # The positions where the agent is to move next, each with one line that reaches it:
    # the empty board (the agent first) and the opponent's optimal openings.
    empty = (0,) * 9
    openings = _move_values(empty)
    frontier = {empty: ()} | {
        _board((cell,)): (cell,)
        for cell, value in openings.items()
        if value == max(openings.values())
    }
    while frontier:
        lines = list(frontier.values())
        frontier = {}
        # Rows padded to a power of two (empty boards), so that few batch sizes compile.
        padded = np.full((1 << (len(lines) - 1).bit_length(), 8), NO_MOVE, np.int32)
        for row, moves in enumerate(lines):
            padded[row, : len(moves)] = moves
        chosen = np.asarray(choose_after(jnp.asarray(padded)))[: len(lines)]
        num_positions += len(lines)  # distinct boards: the frontier is keyed by board
        for moves, move in zip(lines, chosen.tolist(), strict=True):
            values = _move_values(_board(moves))
            if values.get(move, ILLEGAL) < max(values.values()):
                mistakes.append((moves, move))
                continue
            after = _board(moves + (move,))
            if _over(after):
                continue
            replies = _move_values(after)
            best = max(replies.values())
            for reply in (cell for cell, value in replies.items() if value == best):
                line = moves + (move, reply)
                board = _board(line)
                if not _over(board):
                    frontier.setdefault(board, line)
    return PerfectPlayResult(num_positions=num_positions, mistakes=mistakes)


def _over(board: tuple[int, ...]) -> bool:
    """The game has ended: a line is complete or the board is full."""
    return bool(_winner(board)) or 0 not in board


def _board(moves: tuple[int, ...]) -> tuple[int, ...]:
    board = [0] * 9
    for index, cell in enumerate(moves):
        board[cell] = 1 + index % 2
    return tuple(board)


def preset_with(settings: list[str]) -> azx.presets.Preset:
    """The `tic_tac_toe` preset with `FIELD=VALUE` changes (values read as JSON)."""
    return _settings.preset_with("tic_tac_toe", settings)


def train_and_check(preset: azx.presets.Preset, seed: int) -> tuple[Result, float]:
    """Train `preset` for `seed` (one jitted call) and check its network; also returns the
    training time in seconds, compile included."""
    trainer, state = preset.build(seed=seed)
    start = time.perf_counter()
    state = jax.block_until_ready(eqx.filter_jit(trainer.train)(state, preset.iterations))
    return check_network(state.net, trainer.env), time.perf_counter() - start


def _report(name: str, result: Result, examples: int) -> None:
    print(f"{name}: {result.summary()}")
    for index in np.flatnonzero(~result.optimal)[:examples]:
        print("  " + result.describe_miss(int(index)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="*", help="tic_tac_toe run directories")
    parser.add_argument("--examples", type=int, default=5, help="missed positions to show")
    parser.add_argument("--train", type=int, nargs="+", metavar="SEED", help="train and check")
    _settings.add_set_option(parser)
    args = parser.parse_args()
    for directory in args.runs:
        run = azx.load_run(directory)
        result = check_network(run.net, run.env)
        _report(f"{directory} (iteration {run.iteration})", result, args.examples)
    if args.train:
        preset = preset_with(args.set)
        for seed in args.train:
            result, seconds = train_and_check(preset, seed)
            _report(f"seed {seed} {args.set} ({seconds:.0f} s)", result, args.examples)


if __name__ == "__main__":
    main()
