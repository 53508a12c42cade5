"""Self-play with search, as AlphaZero and MuZero share it: the keys of a move, the games'
bookkeeping after it, the metrics both report, and the minibatch drawn row by row from a
replay.

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

from ._trainer import AbstractTrainState, mean_over_updates, row_keys, select_rows
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


def zero_metrics(metrics_type: type[Metrics]) -> Metrics:
    """`metrics_type` with every field zero, as before the first step: `int32` for the
    fields declared `Int` (counts), `float32` for the rest."""

    def zero(field: dataclasses.Field) -> Array:
        return jnp.int32(0) if field.type.dtype is Int else jnp.float32(0.0)

    return metrics_type(**{field.name: zero(field) for field in dataclasses.fields(metrics_type)})


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
#: (what `AbstractTrainer.play_moves` adds up into the metrics).
Finished = tuple[Int[Array, ""], Float[Array, ""], Int[Array, ""], Float[Array, ""]]


def move_keys(key: PRNGKey, first_row: Int[Array, ""], rows: int) -> tuple[PRNGKeys, ...]:
    """A move's keys for each of `rows` games (from their global row indices): for the
    search, for the environment's step, and for restarting the game and random moves."""
    keys = jax.vmap(lambda k: jax.random.split(k, 3))(row_keys(key, first_row, rows))
    return keys[:, 0], keys[:, 1], keys[:, 2]


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
