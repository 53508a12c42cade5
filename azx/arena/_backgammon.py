"""Backgammon's measure of strength: points per game, single wins, gammons and
backgammons counted from the final position by the rules."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Int

from .._types import EnvState, PRNGKey
from ..envs import AbstractEnv
from ._agent import AbstractAgent, require_game
from ._match import mean_interval, play_games


def rule_points(board: Int[Array, "28"]) -> Int[Array, ""]:
    """Points the winner scores by the rules, from a finished pgx backgammon board (seen
    by the winner, as pgx leaves it): 1 for a single game, 2 for a gammon (the loser
    has borne no checker off), 3 for a backgammon (a gammon with a loser's checker
    still in the winner's home board or on the bar).

    pgx's own rewards count the home board but not the bar, so a gammon with a loser's
    checker on the bar is 2 points in pgx's rewards and 3 here.
    """
    gammon = board[27] == 0  # the loser's borne-off checkers (negative in pgx)
    left_behind = jnp.any(board[18:24] < 0) | (board[25] < 0)
    return 1 + gammon.astype(jnp.int32) + (gammon & left_behind).astype(jnp.int32)


class BackgammonResult(eqx.Module):
    """Per-game points of a backgammon match, from `agent_a`'s point of view.

    The fields are arrays (so that [`azx.arena.backgammon_match`][] can be jitted); the
    summaries return Python numbers and need a concrete result.
    """

    points: Int[Array, " num_games"]
    """agent_a's points: +1, +2, +3 for its single win, gammon, backgammon; -1, -2, -3
    for its losses; 0 for a game that did not finish."""
    a_moved_first: Bool[Array, " num_games"]
    """Whether agent_a made the first move of the game."""
    finished: Bool[Array, " num_games"]
    """Whether the game ended by the rules (not truncated or stopped at `max_moves`)."""

    @property
    def num_games(self) -> int:
        return int(self.points.shape[0])

    @property
    def points_per_game(self) -> float:
        """agent_a's mean points per game (unfinished games count 0)."""
        return float(jnp.mean(self.points.astype(jnp.float32)))

    def interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """Normal-approximation interval for agent_a's expected points per game: the
        mean plus or minus z standard errors (the sample standard deviation over the
        square root of the number of games). Points lie in [-3, 3], so the mean of a
        few hundred games is close to normal."""
        return mean_interval(self.points, confidence)

    @property
    def counts(self) -> dict[int, int]:
        """How many games ended with each number of points, `{3: ..., 2: ..., 1: ...,
        0: ..., -1: ..., -2: ..., -3: ...}`, from agent_a's side."""
        return {value: int(jnp.sum(self.points == value)) for value in range(3, -4, -1)}

    @property
    def num_unfinished(self) -> int:
        return int(jnp.sum(~self.finished))

    def __str__(self) -> str:
        low, high = self.interval()
        counts = self.counts
        return (
            f"{self.points_per_game:+.3f} points per game [{low:+.3f}, {high:+.3f}] over "
            f"{self.num_games} games; won {counts[1]} single, {counts[2]} gammons, "
            f"{counts[3]} backgammons; lost {counts[-1]} single, {counts[-2]} gammons, "
            f"{counts[-3]} backgammons; {self.num_unfinished} unfinished"
        )


def backgammon_match(
    env: AbstractEnv,
    agent_a: AbstractAgent,
    agent_b: AbstractAgent,
    *,
    num_games: int,
    key: PRNGKey,
    max_moves: int | None = None,
) -> BackgammonResult:
    """Play `num_games` games of backgammon between two agents and score them in points.

    The games are [`azx.arena.play_match`][]'s: agent_a makes the first move in half of
    them, agent_b in the other half (pgx also draws each game's player ids at random,
    so both agents play both colours). A game's points are read from its final board by
    the rules ([`azx.arena.rule_points`][]), not from pgx's rewards, which miss the
    backgammon of a loser with a checker on the bar. Wrap the call in
    `equinox.filter_jit` to compile it once.

    **Arguments:**

    - `env`: pgx's backgammon, `azx.envs.make("backgammon")`.
    - `agent_a`, `agent_b`: the players ([`azx.arena.AbstractAgent`][]).
    - `num_games`: an even positive number of games.
    - `key`: randomness of the dice, the first rolls and the agents.
    - `max_moves`: stop a game after this many micro-actions (pgx's moves of one
      checker; default: play until it ends). A stopped game scores 0.

    **Returns:** a [`azx.arena.BackgammonResult`][] for agent_a: points per game with
    its interval, and the count of each result.
    """
    require_game("backgammon_match", env, "backgammon")
    result, state, a_player = play_games(
        env, agent_a, agent_b, num_games=num_games, key=key, max_moves=max_moves
    )
    return BackgammonResult(
        points=_points(env, state, a_player),
        a_moved_first=result.a_moved_first,
        finished=result.finished,
    )


def _points(
    env: AbstractEnv, state: EnvState, a_player: Int[Array, " num_games"]
) -> Int[Array, " num_games"]:
    # At the end pgx leaves the board seen by the winner, whose turn it was.
    winner = jax.vmap(env.current_player)(state)
    magnitude = jax.vmap(rule_points)(state._board)
    sign = jnp.where(winner == a_player, 1, -1)
    return jnp.where(jax.vmap(env.terminated)(state), sign * magnitude, 0).astype(jnp.int32)
