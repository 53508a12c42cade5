"""2048's referee and measure: a depth-limited expectimax player with a standard
heuristic, and the score and largest-tile distribution of an agent's games."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from .._types import EnvState, PRNGKey
from .._validate import check_positive_int
from ..envs import AbstractEnv
from ..envs._pgx_chance import _slides
from ..envs._wrappers import AbstractEnvWrapper, AbstractScaleRewards
from ._agent import AbstractAgent, _Stateless, _stateless, legal_mask, require_game
from ._match import mean_interval
from ._returns import episodes_with_states


#: The depths [`azx.arena.Expectimax2048Agent`][] plays: its tree has (4 * 32)^depth
#: leaves (moves times new tiles), 128 at depth 1, 16,384 at 2, two million at 3.
EXPECTIMAX_DEPTHS = (1, 2)
#: The value of a position with no legal move (the game is lost), below every heuristic
#: value a board can have.
LOST_VALUE = -1e9

# The heuristic's weights, per row or column: those of nneonneo's widely used 2048
# expectimax player (github.com/nneonneo/2048-ai), rewritten here on exponent boards.
_EMPTY_WEIGHT = 270.0
_MERGE_WEIGHT = 700.0
_MONOTONICITY_WEIGHT = 47.0
_MONOTONICITY_POWER = 4.0
_SUM_WEIGHT = 11.0
_SUM_POWER = 3.5
_LINE_BASE = 200_000.0


def _line_value(line: Int[Array, "4"]) -> Float[Array, ""]:
    """Heuristic value of one row or column of exponents (0 empty, k the tile 2^k)."""
    rank = line.astype(jnp.float32)
    empty = jnp.sum(line == 0).astype(jnp.float32)
    merges = jnp.sum((line[:-1] == line[1:]) & (line[:-1] != 0)).astype(jnp.float32)
    powered = rank**_MONOTONICITY_POWER
    steps = powered[1:] - powered[:-1]
    # A monotone line only rises or only falls; the smaller of the two sums is the cost.
    rising = jnp.sum(jnp.maximum(steps, 0.0))
    falling = jnp.sum(jnp.maximum(-steps, 0.0))
    return (
        _LINE_BASE
        + _EMPTY_WEIGHT * empty
        + _MERGE_WEIGHT * merges
        - _MONOTONICITY_WEIGHT * jnp.minimum(rising, falling)
        - _SUM_WEIGHT * jnp.sum(rank**_SUM_POWER)
    )


def heuristic_2048(board: Int[Array, "16"]) -> Float[Array, ""]:
    """The expectimax player's value of a 2048 board (exponents, row-major): over its
    four rows and four columns, rewards for empty cells and adjacent equal tiles (merges
    to come), penalties for lines that are not monotone and for large tiles (which must
    be merged away)."""
    square = board.reshape(4, 4)
    lines = jnp.concatenate([square, square.T])
    return jnp.sum(jax.vmap(_line_value)(lines))


def _new_tile_boards(board: Int[Array, "16"]) -> tuple[Int[Array, "32 16"], Float[Array, " 32"]]:
    """The 32 boards chance can make from `board` (a 2 or a 4 on each cell, as
    [`azx.envs.Pgx2048`][] numbers its outcomes), and their probabilities (0 on full
    cells)."""
    empty = board == 0
    cell = empty.astype(jnp.float32) / jnp.maximum(jnp.sum(empty), 1).astype(jnp.float32)
    probabilities = jnp.concatenate([0.9 * cell, 0.1 * cell])
    outcomes = jnp.arange(32)
    boards = jax.vmap(lambda outcome: board.at[outcome % 16].set(outcome // 16 + 1))(outcomes)
    return boards, probabilities


def _chance_value(after: Int[Array, "16"], decisions: int) -> Float[Array, ""]:
    """Expected value of the board `after` a move, before its new tile, with `decisions`
    more moves searched."""
    boards, probabilities = _new_tile_boards(after)
    values = jax.vmap(lambda board: _decision_value(board, decisions))(boards)
    return jnp.sum(probabilities * values)


def _decision_value(board: Int[Array, "16"], decisions: int) -> Float[Array, ""]:
    if decisions == 0:
        return heuristic_2048(board)
    slid, _ = _slides(board)
    legal = jnp.any(slid != board[None], axis=1)
    values = jax.vmap(lambda after: _chance_value(after, decisions - 1))(slid)
    return jnp.max(jnp.where(legal, values, LOST_VALUE))


def expectimax_values(board: Int[Array, "16"], depth: int) -> Float[Array, "4"]:
    """Each move's expectimax value at `board` (exponents, row-major), searching `depth`
    moves of the player, each followed by chance: the move, the expectation over its new
    tile, then `depth - 1` times the best next move and its new tile, then
    [`azx.arena.heuristic_2048`][] at the leaves. A position with no legal move is worth
    `LOST_VALUE`. Illegal moves (those that change nothing) are given no special value
    here; the agent masks them."""
    slid, _ = _slides(board)
    return jax.vmap(lambda after: _chance_value(after, depth - 1))(slid)


class Expectimax2048Agent(AbstractAgent):
    """A plain expectimax player of 2048, the baseline for 2048 agents.

    With `depth=2` its tree is decision, chance, decision, chance: every legal move, the
    expectation over every new tile (each empty cell, a 2 with probability 0.9 and a 4
    with 0.1, as pgx draws them), every legal move after that, every new tile again, and
    [`azx.arena.heuristic_2048`][] at the 16,384 leaves. It plays the legal move of the
    largest expected value (the lowest-numbered among equals). The value is the
    heuristic's alone, not the score: the score follows from keeping the board
    mergeable. The whole tree is one vectorised computation, batched over games.

    Plays pgx's `2048` (a [`azx.envs.Pgx2048`][] or its `PgxEnv`).
    """

    depth: int = eqx.field(static=True)

    def __init__(self, depth: int = 2):
        """**Arguments:** `depth`: moves searched, each followed by chance: 1 or 2.

        **Raises:** `ValueError` for another depth.
        """
        check_positive_int("depth", depth)
        if depth not in EXPECTIMAX_DEPTHS:
            raise ValueError(
                f"depth must be 1 or 2, got {depth} (the tree has (4 * 32)^depth leaves)"
            )
        self.depth = depth

    def init(self, env: AbstractEnv, batch_size: int) -> _Stateless:
        require_game("Expectimax2048Agent", env, "2048")
        return _stateless(batch_size)

    def __call__(
        self, env: AbstractEnv, agent_state: _Stateless, env_state: EnvState, *, key: PRNGKey
    ) -> tuple[Int[Array, " batch"], _Stateless]:
        del key  # deterministic
        require_game("Expectimax2048Agent", env, "2048")
        values = jax.vmap(lambda board: expectimax_values(board, self.depth))(env_state._board)
        values = jnp.where(legal_mask(env, env_state), values, -jnp.inf)
        return jnp.argmax(values, axis=-1).astype(jnp.int32), agent_state

    def observe(self, agent_state, action, done):
        del action, done
        return agent_state


class Result2048(eqx.Module):
    """Per-game results of an agent's 2048 games.

    The fields are arrays (so that [`azx.arena.evaluate_2048`][] can be jitted); the
    summaries return Python numbers and need a concrete result.
    """

    score: Float[Array, " num_games"]
    """The game's score: the sum of the tiles made by merging (pgx's rewards)."""
    largest_tile: Int[Array, " num_games"]
    """The largest tile on the final board (2, 4, ..., 2048, ...)."""
    finished: Bool[Array, " num_games"]
    """Whether the game ended (no move left, or truncated) within `max_moves` moves."""

    @property
    def num_games(self) -> int:
        return int(self.score.shape[0])

    @property
    def mean_score(self) -> float:
        return float(jnp.mean(self.score))

    def interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """Normal-approximation interval for the expected score (mean plus or minus z
        standard errors)."""
        return mean_interval(self.score, confidence)

    def share_reaching(self, tile: int) -> float:
        """The share of games whose largest tile is at least `tile`."""
        return float(jnp.mean(self.largest_tile >= tile))

    @property
    def tile_shares(self) -> dict[int, float]:
        """`{tile: share of games reaching it}` for every power of two from 2 up to the
        largest tile made."""
        top = int(jnp.max(self.largest_tile))
        return {2**k: self.share_reaching(2**k) for k in range(1, top.bit_length())}

    @property
    def num_unfinished(self) -> int:
        return int(jnp.sum(~self.finished))

    def __str__(self) -> str:
        low, high = self.interval()
        shares = ", ".join(
            f"{tile}: {share:.0%}" for tile, share in self.tile_shares.items() if tile >= 256
        )
        return (
            f"mean score {self.mean_score:.0f} [{low:.0f}, {high:.0f}] over {self.num_games} "
            f"games; largest tile reached: {shares}; {self.num_unfinished} unfinished"
        )


def evaluate_2048(
    env: AbstractEnv,
    agent: AbstractAgent,
    *,
    num_games: int,
    key: PRNGKey,
    max_moves: int = 100_000,
) -> Result2048:
    """Play `num_games` games of 2048 with `agent`, all at once, and measure them: the
    score of each game and the largest tile on its final board. Wrap the call in
    `equinox.filter_jit` to compile it once.

    **Arguments:**

    - `env`: pgx's 2048, `azx.envs.make("2048")`, or a wrapper of it; the score is the
      game's own, whatever scale a [`azx.envs.ScaleRewards`][] puts on the rewards the
      agent trains on.
    - `agent`: the player ([`azx.arena.AbstractAgent`][]).
    - `num_games`: a positive number of games.
    - `key`: randomness of the tiles and the agent.
    - `max_moves`: stop the games after this many moves (a game reaching 2048 lasts
      about a thousand).

    **Returns:** a [`azx.arena.Result2048`][]: mean score with its interval, and the
    share of games reaching each tile.
    """
    require_game("evaluate_2048", env, "2048")
    check_positive_int("max_moves", max_moves)
    score, finished, state, _ = episodes_with_states(
        env, agent, num_games=num_games, key=key, max_moves=max_moves
    )
    largest = jnp.left_shift(1, jnp.max(state._board, axis=-1)).astype(jnp.int32)
    return Result2048(score=score / _reward_scale(env), largest_tile=largest, finished=finished)


def _reward_scale(env: AbstractEnv) -> float:
    """The product of the scales that `env`'s wrappers put on the game's rewards."""
    scale = 1.0
    while isinstance(env, AbstractEnvWrapper):
        if isinstance(env, AbstractScaleRewards):
            scale *= env.scale
        env = env.env
    return scale
