"""A backgammon player that rates the full moves of its roll by a network's value alone,
averaged over the opponent's rolls (one ply of expectimax, no search)."""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from ..envs import AbstractEnv, PgxBackgammon, unary_backgammon, unwrap
from ..envs._pgx_chance import _ROLL_PROBABILITIES, _ROLLS
from ._agent import require_game
from ._backgammon import rule_points
from ._pubeval import _OFF, FullMoveAgent, full_moves


# The opponent's 21 rolls as pgx's observation shows them: how many of each die (1 to 6
# pips) are left to play at the start of the turn (four for a double).
_DICE_LEFT = np.zeros((len(_ROLLS), 6), np.int32)
for _row, (_low, _high) in enumerate(_ROLLS):
    _DICE_LEFT[_row, _low] += 2 if _low == _high else 1
    _DICE_LEFT[_row, _high] += 2 if _low == _high else 1

# A won move outranks every value (in [-1, 1] for a tanh head, a few points when scaled).
_WON = 1e6


def _turn_board(boards: Int[np.ndarray, "*batch 28"]) -> Int[np.ndarray, "*batch 28"]:
    """pgx boards seen by the other player, as pgx turns the board when the turn passes:
    the points in reverse order, the two bars and the two borne-off counts swapped, every
    count negated."""
    boards = np.asarray(boards)
    turned = np.empty_like(boards)
    turned[..., :24] = -boards[..., 23::-1]
    turned[..., 24:26] = -boards[..., 25:23:-1]
    turned[..., 26:28] = -boards[..., 27:25:-1]
    return turned


def _encoding(env: AbstractEnv) -> str:
    """The observation encoding of `env`'s backgammon (`"pgx"` or `"unary"`)."""
    env = unwrap(env)
    return env.encoding if isinstance(env, PgxBackgammon) else "pgx"


@eqx.filter_jit
def _values(net: Any, encoding: str, observations: Int[Array, "n 34"]) -> Float[Array, " n"]:
    """The network's values of pgx observations, encoded as the environment encodes them."""
    if encoding == "unary":
        observations = jax.vmap(unary_backgammon)(observations)
    return jax.vmap(net)(observations)[1]


class ValueMoveAgent(FullMoveAgent):
    """Plays backgammon with a trained network's value and no search, a whole move for
    the roll as the classic programs play.

    For every full move pgx allows (enumerated as [`azx.arena.FullMoveAgent`][] does),
    the agent averages the network's value of the position the opponent then faces over
    the opponent's 21 rolls, weighted by their probabilities, and plays the move that
    leaves the opponent the least; a move that bears off the last checker is played
    before any other (the one that scores most points by the rules). That is one ply of
    expectimax over full moves, the network's value at its leaves.

    Cheap next to the search (one network call per move and roll, batched for the whole
    turn), it measures what the value network has learned, apart from the search.
    Deterministic: ties go to the move found first.
    """

    net: Any
    encoding: str = eqx.field(static=True)

    def __init__(self, net: Any, env: AbstractEnv):
        """**Arguments:**

        - `net`: a network mapping ONE observation of `env` to `(logits, value)`, its
          value for the player to move.
        - `env`: pgx's backgammon as azx makes it (`azx.envs.make("backgammon")`, with
          either encoding), whose observations the network reads.

        **Raises:** `ValueError` for another game, or an observation that is neither of
        azx's backgammon encodings.
        """
        require_game(type(self).__name__, env, "backgammon")
        encoding = _encoding(env)
        expected = {"pgx": (34,), "unary": (202,)}[encoding]
        if tuple(env.observation_shape) != expected:
            raise ValueError(
                f"{type(self).__name__} reads backgammon's {encoding} observation of shape "
                f"{expected}; this environment's has shape {tuple(env.observation_shape)}"
            )
        self.net = net
        self.encoding = encoding

    def move_values(self, board: Int[np.ndarray, "28"], dice: list[int]) -> dict[tuple, float]:
        """Each final position of the roll's full moves with the value the agent gives it:
        minus the network's value for the opponent, averaged over its rolls, or `1e6`
        plus the points scored for a position that wins."""
        positions = list(full_moves(board, dice))
        return dict(zip(positions, self._rate(np.array(positions, np.int32)), strict=True))

    def _rate(self, positions: Int[np.ndarray, "moves 28"]) -> list[float]:
        turned = np.repeat(_turn_board(positions)[:, None], len(_ROLLS), axis=1)
        dice_left = np.broadcast_to(_DICE_LEFT, turned.shape[:2] + (6,))
        observations = np.concatenate([turned, dice_left], axis=-1).reshape(-1, 34)
        # Padded to a power of two, so that a few shapes compile, not one per count.
        size = max(32, 1 << int(np.ceil(np.log2(len(observations)))))
        padded = np.zeros((size, 34), np.int32)
        padded[: len(observations)] = observations
        values = np.asarray(_values(self.net, self.encoding, padded))[: len(observations)]
        expected = values.reshape(len(positions), len(_ROLLS)) @ _ROLL_PROBABILITIES
        return [
            _WON + int(rule_points(jnp.asarray(position)))
            if position[_OFF] == 15
            else -float(value)
            for position, value in zip(positions, expected, strict=True)
        ]

    def choose(self, board: Int[np.ndarray, "28"], dice: list[int]) -> list[int]:
        finals = full_moves(board, dice)
        scores = self._rate(np.array(list(finals), np.int32))
        return list(finals.values())[int(np.argmax(scores))]  # ties: the move found first
