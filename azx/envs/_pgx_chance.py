"""pgx's games with chance (2048, backgammon) as AbstractChanceEnv.

Written against pgx's state fields (`_board`, `_dice`, `_playable_dice`, `_turn`,
`_step_count`) and the rules its `step` plays by; tests/test_chance_envs.py checks every
outcome against pgx's own `step`.
"""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, Shaped

from .._numerics import third_party_numerics
from .._types import EnvState, PRNGKey
from ._abstract import AbstractEnv
from ._chance import AbstractChanceEnv, validate_outcome
from ._pgx import PgxEnv, mark_truncated
from ._symmetry import Symmetry


class _AbstractPgxChanceEnv(AbstractChanceEnv):
    """What the pgx chance adapters share: everything but chance (and an observation an
    adapter encodes its own way) is `plain`'s, so `init` and `step` are pgx's own, bit
    for bit."""

    plain: eqx.AbstractVar[PgxEnv]

    @property
    def name(self) -> str:
        return self.plain.name

    @property
    def env(self) -> Any:
        """The pgx environment, as [`azx.envs.PgxEnv`][]'s `env`."""
        return self.plain.env

    @property
    def max_episode_steps(self) -> int | None:
        return self.plain.max_episode_steps

    @property
    def num_actions(self) -> int:
        return self.plain.num_actions

    @property
    def num_players(self) -> int:
        return self.plain.num_players

    @property
    def observation_shape(self) -> tuple[int, ...]:
        return self.plain.observation_shape

    @property
    def observation_dtype(self) -> jnp.dtype:
        return self.plain.observation_dtype

    def init(self, key: PRNGKey) -> EnvState:
        return self.plain.init(key)

    def step(self, state: EnvState, action: Int[Array, ""], key: PRNGKey) -> EnvState:
        return self.plain.step(state, action, key)

    def observation(self, state: EnvState) -> Shaped[Array, "..."]:
        return self.plain.observation(state)

    def legal_action_mask(self, state: EnvState) -> Bool[Array, " num_actions"]:
        return self.plain.legal_action_mask(state)

    def rewards(self, state: EnvState) -> Float[Array, " num_players"]:
        return self.plain.rewards(state)

    def terminated(self, state: EnvState) -> Bool[Array, ""]:
        return self.plain.terminated(state)

    def truncated(self, state: EnvState) -> Bool[Array, ""]:
        return self.plain.truncated(state)

    def current_player(self, state: EnvState) -> Int[Array, ""]:
        return self.plain.current_player(state)

    def symmetries(self) -> tuple[Symmetry, ...]:
        return self.plain.symmetries()

    def _observe(self, state: EnvState) -> EnvState:
        # pgx's step ends by observing the state; azx's adapter then marks truncation.
        with third_party_numerics():
            state = state.replace(observation=self.env.observe(state))
        return mark_truncated(state, self.max_episode_steps)


def _require_game(plain: PgxEnv, name: str) -> None:
    if not isinstance(plain, PgxEnv) or plain.name != name:
        raise ValueError(f"expected azx.envs.PgxEnv of pgx's {name!r}, got {plain!r}")


# --- 2048 ------------------------------------------------------------------------------


def _slide_row_left(row: Int[Array, "4"]) -> tuple[Int[Array, "4"], Int[Array, ""]]:
    """One row of exponents slid left, equal neighbours merged once each from the left,
    and the value of the merged tiles."""
    row = row[jnp.argsort(row == 0, stable=True)]
    reward = jnp.int32(0)
    for i in range(3):
        merge = (row[i] != 0) & (row[i] == row[i + 1])
        row = jnp.where(merge, row.at[i].add(1).at[i + 1].set(0), row)
        reward = reward + jnp.where(merge, jnp.left_shift(jnp.int32(1), row[i]), 0)
    return row[jnp.argsort(row == 0, stable=True)], reward


def _slides(board: Int[Array, "16"]) -> tuple[Int[Array, "4 16"], Int[Array, "4"]]:
    """The board after each of 2048's moves (0 left, 1 up, 2 right, 3 down: the board
    turned a quarter anticlockwise per action number, slid left, turned back)."""
    square = board.reshape(4, 4)
    boards, rewards = [], []
    for turns in range(4):
        slid, reward = jax.vmap(_slide_row_left)(jnp.rot90(square, turns))
        boards.append(jnp.rot90(slid, -turns).reshape(16))
        rewards.append(jnp.sum(reward))
    return jnp.stack(boards), jnp.stack(rewards)


def _legal_moves_2048(board: Int[Array, "16"]) -> Bool[Array, "4"]:
    """The moves that change the board."""
    boards, _ = _slides(board)
    return jnp.any(boards != board[None], axis=1)


class _Afterstate2048(eqx.Module):
    state: Any  # pgx's state with the tiles moved, before the new tile
    moved: Bool[Array, ""]  # false where the game had already ended: nothing moves
    illegal: Bool[Array, ""]
    chance: Bool[Array, ""]


class Pgx2048(_AbstractPgxChanceEnv):
    """pgx's `2048` with its new tile exposed as chance.

    After every move of a game still in play, pgx puts a new tile on an empty cell chosen
    uniformly: a 2 with probability 0.9, a 4 with 0.1. Outcome `cell + 16 * k` (32 in all)
    puts a 2 (`k = 0`) or a 4 (`k = 1`) on `cell` (row-major, 0 to 15). An illegal move
    ends the game with reward -1 and still adds a tile, as pgx's step does; on a full
    board (where pgx draws from all-zero probabilities) the afterstate has no chance. A
    game that has ended has no chance. Everything else is `plain`'s.
    """

    plain: PgxEnv

    def __init__(self, plain: PgxEnv):
        """**Arguments:** `plain`: pgx's `2048` as a [`azx.envs.PgxEnv`][]."""
        _require_game(plain, "2048")
        self.plain = plain

    @property
    def num_outcomes(self) -> int:
        return 32

    def afterstate(self, state: EnvState, action: Int[Array, ""]) -> _Afterstate2048:
        boards, merged = _slides(state._board)
        moved = ~(state.terminated | state.truncated)
        board = jnp.where(moved, boards[action], state._board)
        reward = jnp.where(moved, merged[action], 0).astype(jnp.float32)
        after = state.replace(
            _board=board,
            rewards=reward[None],
            _step_count=state._step_count + moved.astype(jnp.int32),
        )
        return _Afterstate2048(
            state=after,
            moved=moved,
            illegal=~state.legal_action_mask[action],
            chance=moved & jnp.any(board == 0),
        )

    def has_chance(self, afterstate: _Afterstate2048) -> Bool[Array, ""]:
        return afterstate.chance

    def chance_probabilities(self, afterstate: _Afterstate2048) -> Float[Array, " 32"]:
        empty = afterstate.state._board == 0
        count = jnp.maximum(jnp.sum(empty), 1).astype(jnp.float32)
        cell = empty.astype(jnp.float32) / count
        probabilities = jnp.concatenate([0.9 * cell, 0.1 * cell])
        one_state = (jnp.arange(32) == 0).astype(jnp.float32)
        return jnp.where(afterstate.chance, probabilities, one_state)

    def apply_outcome(self, afterstate: _Afterstate2048, outcome: Int[Array, ""]) -> EnvState:
        outcome, valid = validate_outcome(outcome, self.num_outcomes)
        state = afterstate.state
        tile = state._board.at[outcome % 16].set(outcome // 16 + 1)
        board = jnp.where(afterstate.chance, tile, state._board)
        legal = jnp.where(afterstate.moved, _legal_moves_2048(board), state.legal_action_mask)
        terminated = jnp.where(afterstate.moved, ~jnp.any(legal), state.terminated)
        terminated = terminated | afterstate.illegal
        rewards = jnp.where(afterstate.illegal, -1.0, state.rewards)
        state = state.replace(
            _board=board,
            rewards=jnp.where(valid, rewards, jnp.nan),
            terminated=terminated,
            # pgx marks every action legal once the game has ended.
            legal_action_mask=legal | terminated,
        )
        return self._observe(state)


# --- backgammon --------------------------------------------------------------------------

# The 21 distinct rolls, as pairs of die indices (0 to 5 for 1 to 6 pips), smaller first.
_ROLLS = np.array([(low, high) for low in range(6) for high in range(low, 6)], np.int32)
_ROLL_PROBABILITIES = np.where(_ROLLS[:, 0] == _ROLLS[:, 1], 1 / 36, 2 / 36).astype(np.float32)


def _legal_moves_backgammon(board: Int[Array, "28"], dice: Int[Array, "2"]) -> Bool[Array, "156"]:
    """pgx's legal moves for the player to move, whose checkers are positive on `board`
    and travel from point 0 towards 23 (24: own bar, 26: borne off). Action `6 * source
    + die`: source 0 is "no move", 1 the bar, 2 to 25 the points 0 to 23; die 0 to 5 for
    1 to 6 pips. No move is legal exactly when nothing else is."""
    pips = jnp.arange(1, 7)[None]  # [1, 6]
    points = jnp.arange(24)[:, None]  # [24, 1]
    on_bar = board[24]
    own = board[:24] >= 1
    enter = (on_bar >= 1) & (board[pips[0] - 1] >= -1)  # onto points 0..5
    target = points + pips  # [24, 6]
    stays_on_board = target <= 23
    to_point = stays_on_board & (board[jnp.minimum(target, 23)] >= -1) & (on_bar == 0)
    all_home = (on_bar == 0) & jnp.all(board[:18] <= 0)
    rearmost = jnp.argmax(own)
    distance = 24 - points
    exact_or_rearmost = (distance == pips) | ((points == rearmost) & (distance < pips))
    bear_off = ~stays_on_board & all_home & exact_or_rearmost
    moves = jnp.concatenate(
        [jnp.zeros((1, 6), bool), enter[None], own[:, None] & (to_point | bear_off)]
    )  # [26, 6]
    rolled = jnp.any(jnp.arange(6)[None] == dice[:, None], axis=0)
    mask = jnp.ravel(moves & rolled[None])
    return jnp.where(jnp.any(mask), mask, jnp.arange(156) < 6)


_ENCODINGS = ("pgx", "unary")


def unary_backgammon(observation: Int[Array, "34"]) -> Float[Array, "202"]:
    """pgx's backgammon observation (signed checker counts, the player to move's
    positive) in the unary encoding of [`azx.envs.PgxBackgammon`][]`(encoding="unary")`."""
    board = observation[:28].astype(jnp.float32)
    dice_left = observation[28:].astype(jnp.float32)

    def units(count):  # [24] -> [24 * 4]: at least 1, 2, 3 checkers; half the rest
        columns = [count >= 1, count >= 2, count >= 3, jnp.maximum(count - 3, 0) / 2]
        return jnp.stack([c.astype(jnp.float32) for c in columns], axis=-1).ravel()

    bar_and_off = jnp.stack([board[24] / 2, -board[25] / 2, board[26] / 15, -board[27] / 15])
    own, opponent = jnp.maximum(board[:24], 0), jnp.maximum(-board[:24], 0)
    return jnp.concatenate([units(own), units(opponent), bar_and_off, dice_left / 2])


class _AfterstateBackgammon(eqx.Module):
    state: Any  # pgx's state after the move; if the turn passed, with the dice unrolled
    chance: Bool[Array, ""]


class PgxBackgammon(_AbstractPgxChanceEnv):
    """pgx's `backgammon` with its dice exposed as chance.

    In pgx one action moves one checker by one die; the dice are rolled when a turn
    ends (all dice played, or the "no move" action when none can be), for the next
    player, after the board is turned to face them. Doubles give four moves. Outcome `k`
    (21 in all) is the `k`-th distinct roll in `(1, 1), (1, 2), ..., (1, 6), (2, 2), ...,
    (6, 6)`, probability 1/36 for doubles and 2/36 otherwise. pgx stores its two dice in
    the order it draws them; `apply_outcome` stores the smaller first, so its state can
    differ from pgx's in the order of `_dice` and `_playable_dice` alone, which no
    observation, legal move, reward or later step depends on. A move that does not end
    the turn, or wins, has no chance. The opening roll is no outcome: pgx's `init` draws
    it (never a double; each of the 15 others with probability 1/15) together with who
    starts (a fair coin, independent of the roll). Everything else is `plain`'s, the
    observation too unless `encoding="unary"`.
    """

    plain: PgxEnv
    encoding: str = eqx.field(static=True)

    def __init__(self, plain: PgxEnv, encoding: str = "pgx"):
        """**Arguments:**

        - `plain`: pgx's `backgammon` as a [`azx.envs.PgxEnv`][].
        - `encoding`: the observation. `"pgx"`: pgx's own, 34 integers (the board's 28
          signed checker counts, seen by the player to move, then how many of each die
          are left to play). `"unary"`: 202 floats in TD-Gammon's unary style, which a
          network reads far more easily than signed counts: for each of the 24 points
          and each side, whether it holds at least 1, 2 and 3 checkers and half the
          number beyond 3; each side's checkers on the bar (halved) and borne off (over
          15); half the count of each die left to play.
        """
        _require_game(plain, "backgammon")
        if encoding not in _ENCODINGS:
            raise ValueError(f"encoding must be one of {_ENCODINGS}, got {encoding!r}")
        self.plain = plain
        self.encoding = encoding

    @property
    def observation_shape(self) -> tuple[int, ...]:
        return self.plain.observation_shape if self.encoding == "pgx" else (202,)

    @property
    def observation_dtype(self) -> jnp.dtype:
        return self.plain.observation_dtype if self.encoding == "pgx" else jnp.dtype(jnp.float32)

    def observation(self, state: EnvState) -> Shaped[Array, "..."]:
        observation = self.plain.observation(state)
        return observation if self.encoding == "pgx" else unary_backgammon(observation)

    @property
    def num_outcomes(self) -> int:
        return len(_ROLLS)

    def afterstate(self, state: EnvState, action: Int[Array, ""]) -> _AfterstateBackgammon:
        # pgx's step with any key gives the move; the dice it rolls, if the turn passes
        # (which flips `_turn`), are replaced by the outcome's.
        with third_party_numerics():
            after = self.env.step(state, action, jax.random.key(0))
        rolls = after._turn != state._turn
        after = after.replace(
            _dice=jnp.where(rolls, -1, after._dice),
            _playable_dice=jnp.where(rolls, -1, after._playable_dice),
        )
        return _AfterstateBackgammon(state=after, chance=rolls)

    def has_chance(self, afterstate: _AfterstateBackgammon) -> Bool[Array, ""]:
        return afterstate.chance

    def chance_probabilities(self, afterstate: _AfterstateBackgammon) -> Float[Array, " 21"]:
        one_state = (jnp.arange(len(_ROLLS)) == 0).astype(jnp.float32)
        return jnp.where(afterstate.chance, jnp.asarray(_ROLL_PROBABILITIES), one_state)

    def apply_outcome(self, afterstate: _AfterstateBackgammon, outcome: Int[Array, ""]) -> EnvState:
        outcome, valid = validate_outcome(outcome, self.num_outcomes)
        state = afterstate.state
        dice = jnp.asarray(_ROLLS)[outcome]
        playable = jnp.where(
            dice[0] == dice[1], jnp.full(4, dice[0]), jnp.concatenate([dice, jnp.full(2, -1)])
        )
        legal = _legal_moves_backgammon(state._board, dice) | state.terminated
        rolled = state.replace(_dice=dice, _playable_dice=playable, legal_action_mask=legal)
        rolled = self._observe(rolled)
        unrolled = mark_truncated(state, self.max_episode_steps)
        state = jax.tree.map(lambda r, u: jnp.where(afterstate.chance, r, u), rolled, unrolled)
        return state.replace(rewards=jnp.where(valid, state.rewards, jnp.nan))


ADAPTER_OPTIONS = {"backgammon": ("encoding",)}
"""The keywords of `azx.envs.make` that go to a game's chance adapter, not to pgx."""


def expose_chance(env: PgxEnv, **options) -> AbstractEnv:
    """`env` with its chance exposed where azx knows how ([`azx.envs.Pgx2048`][],
    [`azx.envs.PgxBackgammon`][], which takes `options`); `env` itself for other games."""
    adapters = {"2048": Pgx2048, "backgammon": PgxBackgammon}
    adapter = adapters.get(env.name)
    return env if adapter is None else adapter(env, **options)
