"""Matches: two agents play many games in parallel, colours alternated."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Int, Key, Shaped

from .._types import EnvState, PRNGKey
from ..envs import AbstractEnv
from ._agent import AbstractAgent


# A kept action after the game's last move.
NO_ACTION = -1


class MatchResult(eqx.Module):
    """Per-game results of a match, from `agent_a`'s point of view.

    The fields are arrays (so that `play_match` can be jitted); the counting properties
    return Python ints and need a concrete (not traced) result.
    """

    outcome: Int[Array, " num_games"]
    """+1 where agent_a won, 0 drawn (or unfinished with equal returns), -1 lost."""
    a_moved_first: Bool[Array, " num_games"]
    """Whether agent_a made the first move of the game."""
    finished: Bool[Array, " num_games"]
    """Whether the game ended by the rules (not truncated or stopped at `max_moves`)."""
    num_moves: Int[Array, " num_games"]
    """Moves played in each game."""
    actions: Int[Array, "kept num_games"] | None = None
    """With `play_match(..., keep_actions=kept)`: each game's first `kept` actions, in
    the order played, -1 after the game's last move; otherwise None."""
    init_keys: Key[Array, " num_games"] | None = None
    """With `keep_actions`: the key of each game's initial state (`env.init`)."""
    step_keys: Key[Array, "kept num_games"] | None = None
    """With `keep_actions`: the key `env.step` received with each kept action (the dice
    of a game of chance), so that `init_keys`, `actions` and these replay each game."""

    def _count(self, value: int, where=None) -> int:
        hit = self.outcome == value
        return int(jnp.sum(hit if where is None else hit & where))

    @property
    def num_games(self) -> int:
        return int(self.outcome.shape[0])

    @property
    def wins(self) -> int:
        return self._count(1)

    @property
    def draws(self) -> int:
        return self._count(0)

    @property
    def losses(self) -> int:
        return self._count(-1)

    @property
    def counts(self) -> tuple[int, int, int]:
        """`(wins, draws, losses)` of agent_a: the format [`azx.arena.elo_ratings`][] reads."""
        return self.wins, self.draws, self.losses

    @property
    def as_first(self) -> tuple[int, int, int]:
        """`(wins, draws, losses)` of agent_a in the games where it moved first."""
        first = self.a_moved_first
        return self._count(1, first), self._count(0, first), self._count(-1, first)

    @property
    def as_second(self) -> tuple[int, int, int]:
        """`(wins, draws, losses)` of agent_a in the games where it moved second."""
        second = ~self.a_moved_first
        return self._count(1, second), self._count(0, second), self._count(-1, second)

    @property
    def num_unfinished(self) -> int:
        return int(jnp.sum(~self.finished))

    @property
    def score(self) -> float:
        """agent_a's mean score: 1 per win, 1/2 per draw."""
        return (self.wins + 0.5 * self.draws) / self.num_games

    def score_interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """Wilson score interval for agent_a's expected score.

        Draws make a game's score less variable than a win-or-loss coin, so treating the
        score as a binomial proportion (as Wilson does) gives a slightly conservative
        interval; unlike the normal approximation it stays inside `[0, 1]` and is not
        empty at a perfect score.
        """
        if not 0 < confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
        z = _normal_quantile(0.5 + confidence / 2)
        n, p = self.num_games, self.score
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
        return max(0.0, centre - half), min(1.0, centre + half)

    def __str__(self) -> str:
        low, high = self.score_interval()
        return (
            f"{self.wins} wins, {self.draws} draws, {self.losses} losses "
            f"(as first {'/'.join(map(str, self.as_first))}, "
            f"as second {'/'.join(map(str, self.as_second))}); "
            f"score {self.score:.3f} [{low:.3f}, {high:.3f}]"
        )


def _normal_quantile(p: float) -> float:
    # Bisection on the normal CDF (math.erf): exact enough, and no scipy dependency.
    low, high = -10.0, 10.0
    for _ in range(100):
        middle = (low + high) / 2
        if 0.5 * (1 + math.erf(middle / math.sqrt(2))) < p:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def mean_interval(values: Shaped[ArrayLike, " n"], confidence: float = 0.95) -> tuple[float, float]:
    """Normal-approximation interval for the expected value of i.i.d. `values`: their
    mean plus or minus z standard errors (sample standard deviation / sqrt(n))."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    values = np.asarray(values, np.float64)
    if values.size < 2:
        raise ValueError(f"an interval needs at least 2 values, got {values.size}")
    z = _normal_quantile(0.5 + confidence / 2)
    mean = float(np.mean(values))
    error = float(np.std(values, ddof=1)) / math.sqrt(values.size)
    return mean - z * error, mean + z * error


def _rows_where(mask, new, old):
    return jax.tree.map(
        lambda n, o: jnp.where(jnp.reshape(mask, mask.shape + (1,) * (n.ndim - 1)), n, o),
        new,
        old,
    )


def play_match(
    env: AbstractEnv,
    agent_a: AbstractAgent,
    agent_b: AbstractAgent,
    *,
    num_games: int,
    key: PRNGKey,
    max_moves: int | None = None,
    keep_actions: int = 0,
) -> MatchResult:
    """Play `num_games` games of `agent_a` against `agent_b`, all at once.

    In the first half of the games agent_a makes the first move, in the second half
    agent_b does (pgx draws the first mover's player id at random; "moving first" means
    playing whichever player moves first). All games advance together in one
    `lax.while_loop` until every game has ended (or reached `max_moves` moves). Wrap the
    call in `equinox.filter_jit` to compile it once.

    Each step an agent is called on one half of the games (`num_games / 2` rows): in
    games where the turn alternates, agent_a moves in one half while agent_b moves in
    the other, so each agent does the work of one move per game every two steps. Should
    an agent be to move in both halves (a game where a player moves twice), one half
    waits a step.

    **Arguments:**

    - `env`: a two-player [`azx.envs.AbstractEnv`][].
    - `agent_a`, `agent_b`: the players ([`azx.arena.AbstractAgent`][]).
    - `num_games`: an even positive number of games.
    - `key`: randomness of the initial states, the agents and the environment.
    - `max_moves`: stop a game after this many moves (default: play until it ends).
    - `keep_actions`: keep each game's first `keep_actions` actions, and the keys of its
        start and its steps, in the result, so that the games can be replayed (0, the
        default: none, and those fields are None). The games played are the same
        either way.

    **Returns:** a [`azx.arena.MatchResult`][] for agent_a.
    """
    result, _, _ = play_games(
        env,
        agent_a,
        agent_b,
        num_games=num_games,
        key=key,
        max_moves=max_moves,
        keep_actions=keep_actions,
    )
    return result


def play_games(
    env: AbstractEnv,
    agent_a: AbstractAgent,
    agent_b: AbstractAgent,
    *,
    num_games: int,
    key: PRNGKey,
    max_moves: int | None = None,
    keep_actions: int = 0,
) -> tuple[MatchResult, EnvState, Int[Array, " num_games"]]:
    """[`azx.arena.play_match`][], also returning each game's final state and agent_a's
    player id in it, for scores that read the final position (backgammon's points)."""
    if isinstance(num_games, bool) or not isinstance(num_games, int) or num_games < 2:
        raise ValueError(f"num_games must be an even int >= 2, got {num_games!r}")
    if num_games % 2:
        raise ValueError(
            f"num_games must be even so that each agent moves first in half the games, "
            f"got {num_games}"
        )
    if max_moves is not None and (
        isinstance(max_moves, bool) or not isinstance(max_moves, int) or max_moves < 1
    ):
        raise ValueError(f"max_moves must be a positive int or None, got {max_moves!r}")
    if isinstance(keep_actions, bool) or not isinstance(keep_actions, int) or keep_actions < 0:
        raise ValueError(f"keep_actions must be an int >= 0, got {keep_actions!r}")
    if env.num_players != 2:
        raise ValueError(f"matches need a two-player game; {env!r} has {env.num_players}")
    half = num_games // 2
    init_key, loop_key = jax.random.split(key)
    init_keys = jax.random.split(init_key, num_games)
    state = jax.vmap(env.init)(init_keys)
    first_player = jax.vmap(env.current_player)(state)
    a_moved_first = jnp.arange(num_games) < half
    a_player = jnp.where(a_moved_first, first_player, 1 - first_player)
    limit = jnp.iinfo(jnp.int32).max if max_moves is None else max_moves

    def live(state, num_moves):
        ended = jax.vmap(env.terminated)(state) | jax.vmap(env.truncated)(state)
        return ~ended & (num_moves < limit)

    def act(agent, agent_state, state, to_move, key):
        """Actions of `agent` on the half where it is to move; `moved` marks those rows."""
        need = jnp.stack([jnp.any(to_move[:half]), jnp.any(to_move[half:])])
        start = jnp.argmax(need).astype(jnp.int32) * half

        def take(x):
            return jax.lax.dynamic_slice_in_dim(x, start, half)

        def run(agent_state):
            action, new = agent(
                env, jax.tree.map(take, agent_state), jax.tree.map(take, state), key=key
            )
            agent_state = jax.tree.map(
                lambda x, n: jax.lax.dynamic_update_slice_in_dim(x, n, start, 0), agent_state, new
            )
            return jnp.zeros(num_games, jnp.int32).at[start + jnp.arange(half)].set(
                action
            ), agent_state

        action, agent_state = jax.lax.cond(
            jnp.any(need),
            run,
            lambda agent_state: (jnp.zeros(num_games, jnp.int32), agent_state),
            agent_state,
        )
        rows = jnp.arange(num_games)
        in_half = (rows >= start) & (rows < start + half)
        return action, agent_state, to_move & in_half & jnp.any(need)

    def keep(kept, num_moves, moved, action, step_keys):
        """`kept` (actions and step keys) with each game's move `num_moves`, where it
        moved, set to `action` and its step key (past `keep_actions`: dropped)."""
        if kept is None:
            return None
        rows = jnp.arange(num_games)
        at = jnp.where(moved, num_moves, keep_actions)
        actions, keys = kept
        return (
            actions.at[at, rows].set(action, mode="drop"),
            keys.at[at, rows].set(step_keys, mode="drop"),
        )

    def body(carry):
        state, states_a, states_b, returns, num_moves, index, kept = carry
        a_key, b_key, step_key = jax.random.split(jax.random.fold_in(loop_key, index), 3)
        alive = live(state, num_moves)
        a_to_move = jax.vmap(env.current_player)(state) == a_player
        action_a, states_a, moved_a = act(agent_a, states_a, state, alive & a_to_move, a_key)
        action_b, states_b, moved_b = act(agent_b, states_b, state, alive & ~a_to_move, b_key)
        action = jnp.where(moved_a, action_a, action_b)
        moved = moved_a | moved_b
        step_keys = jax.random.split(step_key, num_games)
        stepped = jax.vmap(env.step)(state, action, step_keys)
        state = _rows_where(moved, stepped, state)
        returns = returns + jnp.where(moved[:, None], jax.vmap(env.rewards)(state), 0.0)
        done = ~live(state, num_moves + moved.astype(jnp.int32))
        # Both agents see every move, so that a kept search tree follows the game.
        states_a = _rows_where(moved, agent_a.observe(states_a, action, done), states_a)
        states_b = _rows_where(moved, agent_b.observe(states_b, action, done), states_b)
        kept = keep(kept, num_moves, moved, action, step_keys)
        num_moves = num_moves + moved.astype(jnp.int32)
        return state, states_a, states_b, returns, num_moves, index + 1, kept

    # Agent states cover all games; each call works on a slice of one half.
    carry = (
        state,
        agent_a.init(env, num_games),
        agent_b.init(env, num_games),
        jnp.zeros((num_games, 2), jnp.float32),
        jnp.zeros(num_games, jnp.int32),
        jnp.int32(0),
        (
            jnp.full((keep_actions, num_games), NO_ACTION, jnp.int32),
            jnp.broadcast_to(loop_key, (keep_actions, num_games)),  # (overwritten where kept)
        )
        if keep_actions
        else None,
    )
    state, _, _, returns, num_moves, _, kept = jax.lax.while_loop(
        lambda carry: jnp.any(live(carry[0], carry[4])), body, carry
    )
    rows = jnp.arange(num_games)
    a_return = returns[rows, a_player]
    b_return = returns[rows, 1 - a_player]
    outcome = (a_return > b_return).astype(jnp.int32) - (a_return < b_return).astype(jnp.int32)
    result = MatchResult(
        outcome=outcome,
        a_moved_first=a_moved_first,
        finished=jax.vmap(env.terminated)(state),
        num_moves=num_moves,
        actions=None if kept is None else kept[0],
        init_keys=None if kept is None else init_keys,
        step_keys=None if kept is None else kept[1],
    )
    return result, state, a_player
