"""What every azx trainer shares: the `init` / `step` / `train` contract, per-row randomness,
and the sums over shards that make sharded training equal to single-device training.

[`azx.alphazero.AlphaZero`][] and [`azx.ppo.PPO`][] implement it; [`azx.parallel`][] shards
any implementation without knowing which one it is.
"""

import abc
import dataclasses
from typing import Any, ClassVar, Generic, TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Bool, Float, Int, PyTree, Shaped

from ._numerics import third_party_numerics
from ._types import PRNGKey, PRNGKeys
from .envs import AbstractEnv


class AbstractTrainState(eqx.Module):
    """Everything that changes during training, arrays only (a `lax.scan` carry, and what a
    checkpoint holds).

    `row_fields` names the fields whose leading axis is the environment row: those are
    split over devices by [`azx.parallel`][]; every other field is replicated.
    """

    row_fields: ClassVar[tuple[str, ...]]
    params: eqx.AbstractVar[PyTree[Array]]
    iteration: eqx.AbstractVar[Int[Array, ""]]
    key: eqx.AbstractVar[PRNGKey]
    net_static: eqx.AbstractVar[Any]

    @property
    def net(self):
        """The current network (`params` put back into the network's static skeleton)."""
        return eqx.combine(self.params, self.net_static)


State = TypeVar("State", bound=AbstractTrainState)


class AbstractTrainer(eqx.Module, Generic[State]):
    """A training algorithm as configuration only: `init(net, *, key) -> state` and the pure
    `step(state, key) -> state`, to be jitted, scanned or sharded by the caller.

    Implementations run the same code on one device and inside `jax.shard_map`: with
    `axis_name` set, `step` sees only its shard's environment rows and adds what must be
    global (gradients, counts, metrics) over that mesh axis.
    """

    env: eqx.AbstractVar[AbstractEnv]
    axis_name: eqx.AbstractVar[str | None]

    @property
    @abc.abstractmethod
    def num_envs(self) -> int:
        """Environment rows over all shards."""

    @property
    @abc.abstractmethod
    def env_steps_per_iteration(self) -> int:
        """Environment steps that one `step` takes over all rows."""

    @abc.abstractmethod
    def init(self, net: Any, *, key: PRNGKey) -> State:
        """The state before training, with `net` as the network to train."""

    @abc.abstractmethod
    def step(self, state: State, key: PRNGKey) -> State:
        """One training iteration. Pure: the same state and key give the same result."""

    @abc.abstractmethod
    def with_axis_name(self, axis_name: str | None) -> "AbstractTrainer[State]":
        """The same trainer, for running `step` on one shard of a mesh axis."""

    def check_shards(self, num_shards: int) -> None:
        """Raise `ValueError` if the rows cannot be split evenly over `num_shards`."""
        if self.num_envs % num_shards:
            suggestion = max(num_shards, self.num_envs - self.num_envs % num_shards)
            raise ValueError(
                f"num_envs ({self.num_envs}) must be divisible by the number of devices "
                f"({num_shards}); e.g. num_envs={suggestion}"
            )

    def env_steps(self, state: State) -> int:
        """Environment steps taken so far over all rows (a Python int: no int32 overflow at
        accelerator rates)."""
        return int(state.iteration) * self.env_steps_per_iteration

    def train(self, state: State, num_steps: int) -> State:
        """`num_steps` calls of `step` in one `lax.scan`, keyed by `state.key` and the
        iteration number (so a resumed run continues exactly). Jit it."""
        return self.train_and_record(state, num_steps)[0]

    def train_and_record(self, state: State, num_steps: int) -> tuple[State, Any]:
        """`train`, also returning every step's `state.metrics`, stacked on a leading axis
        of length `num_steps` (for logs that summarise all the steps of a call)."""

        def body(state, _):
            state = self.step(state, jax.random.fold_in(state.key, state.iteration))
            return state, state.metrics

        return jax.lax.scan(body, state, None, length=num_steps)

    # --- helpers for implementations ---------------------------------------------------

    def sum_over_shards(self, x: PyTree[Array]) -> PyTree[Array]:
        """`x` added up over the mesh axis (itself when not sharded)."""
        if self.axis_name is None:
            return x
        return jax.tree.map(lambda leaf: jax.lax.psum(leaf, self.axis_name), x)

    def apply_gradients(
        self,
        optimiser: Any,
        params: PyTree[Array],
        opt_state: PyTree[Array],
        grads: PyTree[Array],
        count: Float[Array, ""],
    ) -> tuple[PyTree[Array], PyTree[Array]]:
        """One learner update from gradients summed over this shard's `count` examples:
        the sums added over shards and divided by the total count, then the optimiser's
        step; with no example anywhere (nothing to learn from yet), the parameters and the
        optimiser's state stay as they were. Returns `(params, opt_state)`."""
        total = self.sum_over_shards(count)
        grads = jax.tree.map(lambda g: self.sum_over_shards(g) / jnp.maximum(total, 1.0), grads)
        with third_party_numerics():
            updates, new_opt_state = optimiser.update(grads, opt_state, params)
        new_params = eqx.apply_updates(params, updates)
        has_data = total > 0
        return jax.tree.map(
            lambda new, old: jnp.where(has_data, new, old),
            (new_params, new_opt_state),
            (params, opt_state),
        )

    def first_row(self, rows: int) -> Int[Array, ""]:
        """Global index of this shard's first row, for a shard of `rows` rows."""
        if self.axis_name is None:
            return jnp.int32(0)
        return (jax.lax.axis_index(self.axis_name) * rows).astype(jnp.int32)


Metrics = TypeVar("Metrics", bound=eqx.Module)


def zero_metrics(metrics_type: type[Metrics]) -> Metrics:
    """`metrics_type` (a trainer's `Metrics`: scalar fields, each declared `Int` or
    `Float`) with every field zero, as before the first step: `int32` for the fields
    declared `Int` (counts), `float32` for the rest."""

    def zero(field: dataclasses.Field) -> Array:
        return jnp.int32(0) if field.type.dtype is Int else jnp.float32(0.0)

    return metrics_type(**{field.name: zero(field) for field in dataclasses.fields(metrics_type)})


def row_keys(key: PRNGKey, first_row: Int[Array, ""], rows: int) -> PRNGKeys:
    """One key per row, derived from the row's global index: a row's randomness is then
    the same whether it sits on one device or is sharded over many."""
    return jax.vmap(jax.random.fold_in, (None, 0))(key, first_row + jnp.arange(rows))


def default_optimiser(config: Any) -> optax.GradientTransformation:
    """AdamW with `config.learning_rate` (cosine-decayed to 3% of it over
    `config.decay_iterations` iterations of `config.train_steps` updates, if set) and
    `config.weight_decay`, after clipping gradients to `config.max_grad_norm` (0: no
    clipping): the default optimiser of AlphaZero and MuZero."""
    learning_rate = config.learning_rate
    if config.decay_iterations is not None:
        learning_rate = optax.cosine_decay_schedule(
            config.learning_rate,
            config.decay_iterations * config.train_steps,
            alpha=0.03,
        )
    return optax.chain(
        optax.clip_by_global_norm(config.max_grad_norm)
        if config.max_grad_norm > 0
        else optax.identity(),
        optax.adamw(learning_rate, weight_decay=config.weight_decay),
    )


def rows_of(state: AbstractTrainState) -> int:
    """Environment rows of `state` (on this shard)."""
    return jax.tree.leaves(getattr(state, state.row_fields[0]))[0].shape[0]


def mean_over_updates(total: Float[Array, " updates"], count: Float[Array, " updates"]):
    """The mean over the updates that had data (`count > 0`) of each update's mean
    `total / count`: what a learner reports over its `train_steps` updates. Returns the
    mean and the number of such updates."""
    applied = count > 0
    num_applied = jnp.sum(applied, dtype=jnp.int32)
    per_update = total / jnp.maximum(count, 1.0)
    denominator = jnp.maximum(num_applied, 1).astype(jnp.float32)
    return jnp.sum(jnp.where(applied, per_update, 0.0)) / denominator, num_applied


def select_rows(mask: Bool[Array, "*rows"], new: PyTree[Array], old: PyTree[Array]):
    """Per row, the leaves of `new` where `mask` holds and of `old` elsewhere (`mask` has
    the leaves' leading axes: one value per row, or a single value for one row)."""

    def pick(a, b):
        return jnp.where(jnp.reshape(mask, mask.shape + (1,) * (a.ndim - mask.ndim)), a, b)

    return jax.tree.map(pick, new, old)


class SymmetryDraw(eqx.Module):
    """A board symmetry of `env` ([`azx.envs.AbstractEnv.symmetries`][]) drawn uniformly
    for each of a learner batch's examples, per game row like the sample itself (so that
    sharding does not change the draw): the data augmentation of the trainers'
    `augment_symmetries`."""

    choice: Int[Array, " batch"]
    """The symmetry of each example."""
    observation_index: Int[Array, "symmetries observation_size"]
    action_index: Int[Array, "symmetries num_actions"]
    """`x'[i] = x[index[i]]` maps a flat observation or a per-action array."""

    @classmethod
    def make(cls, env: AbstractEnv, key: PRNGKey, first_row, batch: int, per_row: int):
        symmetries = env.symmetries()
        keys = row_keys(key, first_row, batch // per_row)
        choice = jax.vmap(lambda k: jax.random.randint(k, (per_row,), 0, len(symmetries)))(keys)
        return cls(
            choice=choice.reshape(-1),
            observation_index=jnp.asarray(np.stack([s.observation_index for s in symmetries])),
            action_index=jnp.asarray(np.stack([s.action_index for s in symmetries])),
        )

    def permute(self, x: Shaped[Array, "batch ..."], index) -> Shaped[Array, "batch ..."]:
        """Each example's `x` (flattened after the batch axis) gathered by its symmetry's
        row of `index`."""
        rows = x.shape[0]
        flat = x.reshape(rows, -1)
        return jnp.take_along_axis(flat, index[self.choice], axis=1).reshape(x.shape)

    def map_actions(self, action: Int[Array, "batch ..."]) -> Int[Array, "batch ..."]:
        """Each example's actions as its symmetry maps them (where a per-action array's
        entry for `action` goes under `permute`)."""
        inverse = jnp.argsort(self.action_index, axis=1)[self.choice]
        flat = action.reshape(action.shape[0], -1)
        return jnp.take_along_axis(inverse, flat, axis=1).reshape(action.shape).astype(action.dtype)
