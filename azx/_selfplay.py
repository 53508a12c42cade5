"""Self-play with search, as AlphaZero and MuZero share it: the scan of moves, the keys of a
move, its random moves, the games' bookkeeping after it, the metrics both report, and the
minibatch drawn row by row from a replay.

Each trainer keeps what is its own: how it searches, what it stores of a move, and how it
learns. Their `Metrics` and `TrainState` declare their fields in their own order (what
checkpoints hold), and implement the abstract classes here, which name what this module
reads and writes.
"""

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PyTree

from ._trainer import (
    AbstractTrainer,
    AbstractTrainState,
    mean_over_updates,
    row_keys,
    rows_of,
    select_rows,
)
from ._types import EnvState, PRNGKey, PRNGKeys
from .envs import AbstractEnv


class AbstractSelfPlayMetrics(eqx.Module):
    """What the last `step` of a trainer that learns from self-play with search measured,
    means over all games and examples (all shards): the fields every such trainer reports.
    A trainer's `Metrics` adds the means of its own loss parts (see `record_learning`) and
    a count of what its replay holds."""

    loss: eqx.AbstractVar[Float[Array, ""]]
    policy_loss: eqx.AbstractVar[Float[Array, ""]]
    value_loss: eqx.AbstractVar[Float[Array, ""]]
    policy_entropy: eqx.AbstractVar[Float[Array, ""]]
    updates_applied: eqx.AbstractVar[Int[Array, ""]]
    """Learner updates that had data (the first steps may have none)."""
    episodes: eqx.AbstractVar[Int[Array, ""]]
    """Games that ended during this step's self-play."""
    episode_return: eqx.AbstractVar[Float[Array, ""]]
    """Mean return of player 0 over those games (0 when none ended)."""
    episode_length: eqx.AbstractVar[Float[Array, ""]]
    """Mean length of those games, in moves (0 when none ended)."""
    root_value: eqx.AbstractVar[Float[Array, ""]]
    """Mean search value at the root, for the player to move."""


Metrics = TypeVar("Metrics", bound=AbstractSelfPlayMetrics)


def record_learning(metrics: Metrics, parts: Any) -> Metrics:
    """`metrics` with the learner's `train_steps` updates recorded: each field of `parts`
    (sums over each update's examples, stacked over the updates, with their `count`) gives
    the mean over the updates that had data of its per-example mean, in the metric of its
    name; `updates_applied` counts those updates."""
    means = {
        field.name: mean_over_updates(getattr(parts, field.name), parts.count)[0]
        for field in dataclasses.fields(parts)
        if field.name != "count"
    }
    applied = mean_over_updates(parts.loss, parts.count)[1]
    return dataclasses.replace(metrics, **means, updates_applied=applied)


class AbstractSelfPlayState(AbstractTrainState):
    """The state of a trainer that plays games with search: what `end_move` updates after
    every move. Rows of these fields are the games."""

    env_state: eqx.AbstractVar[EnvState]
    episode_return: eqx.AbstractVar[Float[Array, " num_envs"]]
    """Return of player 0 so far in each running game."""
    episode_length: eqx.AbstractVar[Int[Array, " num_envs"]]
    metrics: eqx.AbstractVar[AbstractSelfPlayMetrics]


State = TypeVar("State", bound=AbstractSelfPlayState)

#: Per move: games ended, their summed return, their summed length, the summed root value
#: (what `play_moves` adds up into the metrics).
Finished = tuple[Int[Array, ""], Float[Array, ""], Int[Array, ""], Float[Array, ""]]


def move_keys(key: PRNGKey, first_row: Int[Array, ""], rows: int) -> tuple[PRNGKeys, ...]:
    """A move's keys for each of `rows` games (from their global row indices): for the
    search, for the environment's step, and for restarting the game and random moves."""
    keys = jax.vmap(lambda k: jax.random.split(k, 3))(row_keys(key, first_row, rows))
    return keys[:, 0], keys[:, 1], keys[:, 2]


def play_moves(
    trainer: AbstractTrainer,
    move: Callable[[State, PRNGKey, Int[Array, ""]], tuple[State, Finished]],
    state: State,
    key: PRNGKey,
    num_moves: int,
) -> State:
    """`num_moves` self-play moves of `trainer`, `move(state, key, first_row) -> (state,
    finished)` each under `fold_in(key, index)`, in one `lax.scan`; `finished` (see
    `Finished`) added up over the moves and the shards into `state.metrics`: `episodes`,
    the means `episode_return` and `episode_length` over those games (0 when none ended),
    and `root_value`, the mean over every move of every row."""
    first_row = trainer.first_row(rows_of(state))

    def play(state, index):
        return move(state, jax.random.fold_in(key, index), first_row)

    state, finished = jax.lax.scan(play, state, jnp.arange(num_moves))
    episodes, return_sum, length_sum, root_sum = (
        trainer.sum_over_shards(jnp.sum(x)) for x in finished
    )
    finished_games = jnp.maximum(episodes, 1).astype(jnp.float32)
    moves = trainer.num_envs * num_moves
    return eqx.tree_at(
        lambda s: (
            s.metrics.episodes,
            s.metrics.episode_return,
            s.metrics.episode_length,
            s.metrics.root_value,
        ),
        state,
        (
            episodes.astype(jnp.int32),
            return_sum / finished_games,
            length_sum.astype(jnp.float32) / finished_games,
            root_sum / moves,
        ),
    )


def random_moves(
    env: AbstractEnv,
    env_state: EnvState,
    action: Int[Array, " rows"],
    episode_length: Int[Array, " rows"],
    keys: PRNGKeys,
    *,
    opening_moves: int,
    probability: float,
) -> Int[Array, " rows"]:
    """Self-play's `action` per row, replaced by a uniformly random legal move for the first
    `opening_moves` moves of every game and, after them, with `probability` (the
    trainers' `random_opening_moves` and `random_move_probability`). `keys`: one per row;
    the draws use streams folded from them, apart from what else they key, so that with
    both settings 0 nothing changes."""
    if not (opening_moves or probability):
        return action
    opening_keys = jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)
    legal = jax.vmap(env.legal_action_mask)(env_state)
    noise = jax.vmap(lambda k: jax.random.uniform(k, legal.shape[1:]))(opening_keys)
    random_action = jnp.argmax(jnp.where(legal, noise, -1.0), axis=-1).astype(action.dtype)
    random_move = episode_length < opening_moves
    if probability:
        coin_keys = jax.vmap(lambda k: jax.random.fold_in(k, 2))(keys)
        coin = jax.vmap(jax.random.uniform)(coin_keys)
        random_move |= coin < probability
    return jnp.where(random_move, random_action, action)


def end_move(
    env: AbstractEnv,
    state: State,
    next_state: EnvState,
    done: Bool[Array, " rows"],
    reset_keys: PRNGKeys,
    root_value: Float[Array, " rows"],
) -> tuple[State, Finished]:
    """The games after a move that took `state.env_state` to `next_state`: player 0's
    return and every game's length brought up to date, and the games that ended (`done`)
    restarted from `reset_keys`, their return and length back to zero. Also what the move
    adds to the self-play metrics (see `Finished`), with `root_value` the search's value
    of each row's move."""
    episode_return = state.episode_return + jax.vmap(env.rewards)(next_state)[:, 0]
    episode_length = state.episode_length + 1
    finished = (
        jnp.sum(done, dtype=jnp.int32),
        jnp.sum(jnp.where(done, episode_return, 0.0)),
        jnp.sum(jnp.where(done, episode_length, 0), dtype=jnp.int32),
        jnp.sum(root_value),
    )
    state = eqx.tree_at(
        lambda s: (s.env_state, s.episode_return, s.episode_length),
        state,
        (
            select_rows(done, jax.vmap(env.init)(reset_keys), next_state),
            jnp.where(done, 0.0, episode_return),
            jnp.where(done, 0, episode_length),
        ),
    )
    return state, finished


Sample = TypeVar("Sample")


def sample_by_row(
    sample_row: Callable[[PyTree[Array], PRNGKey], Sample],
    replay: PyTree[Array],
    key: PRNGKey,
    first_row: Int[Array, ""],
) -> Sample:
    """A minibatch stratified by game row: `sample_row(row, key)` draws the same number of
    examples from ONE row of `replay` (its leaves without the row axis), each row with a
    key of its global index, and the rows' draws are laid end to end. The minibatch is
    then the same whether the rows sit on one device or are sharded over many."""
    rows = jax.tree.leaves(replay)[0].shape[0]
    samples = jax.vmap(sample_row)(replay, row_keys(key, first_row, rows))
    return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), samples)
