import abc
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float, Int, PyTree

from .. import _selfplay
from .._numerics import third_party_numerics
from .._trainer import (
    AbstractTrainer,
    SymmetryDraw,
    default_optimiser,
    row_keys,
    rows_of,
    zero_metrics,
)
from .._types import EnvState, PRNGKey
from ..envs import AbstractEnv
from ..envs._mover import mover_reward_and_discount
from ..search import AbstractSearch
from ._config import Config
from ._loss import loss
from ._model import LearnedModel, Observation, search_observations
from ._nets import ConsistencyHead, MuZeroNet
from ._replay import ReplayState, SegmentReplay, Step, Targets, blank_step
from ._stochastic import learned_search_states
from ._stochastic_nets import StochasticMuZeroNet


class Metrics(_selfplay.AbstractSelfPlayMetrics):
    """What the last `step` measured. Means are over all games / segments (all shards)."""

    loss: Float[Array, ""]
    policy_loss: Float[Array, ""]
    value_loss: Float[Array, ""]
    reward_loss: Float[Array, ""]
    consistency_loss: Float[Array, ""]
    """The weighted consistency loss (0 when `consistency_loss_weight` is 0)."""
    policy_entropy: Float[Array, ""]
    """Mean entropy of the prediction's policy at the segments' first observations."""
    updates_applied: Int[Array, ""]
    """Learner updates that had data (the first steps have none: no complete segment)."""
    episodes: Int[Array, ""]
    """Episodes that ended during this step's self-play."""
    episode_return: Float[Array, ""]
    """Mean return of player 0 over those episodes (0 when none ended)."""
    episode_length: Float[Array, ""]
    root_value: Float[Array, ""]
    """Mean search value at the root, for the player to move."""
    replay_segments: Int[Array, ""]
    """Steps in the replay that can start a segment."""


class TrainState(_selfplay.AbstractSelfPlayState):
    """Everything that changes during MuZero training; every leaf is an array. Rows of
    `env_state`, `replay`, `episode_return` and `episode_length` are the games (sharded
    over devices by [`azx.parallel`][]); the rest is replicated. No search tree is kept:
    a learned model's search starts afresh at every move."""

    row_fields: ClassVar[tuple[str, ...]] = (
        "env_state",
        "replay",
        "episode_return",
        "episode_length",
    )

    params: PyTree[Array]
    opt_state: PyTree[Array]
    env_state: EnvState
    replay: ReplayState
    episode_return: Float[Array, " num_envs"]
    episode_length: Int[Array, " num_envs"]
    iteration: Int[Array, ""]
    metrics: Metrics
    key: PRNGKey
    net_static: Any = eqx.field(static=True)


class AbstractMuZeroTrainer(AbstractTrainer[_selfplay.State]):
    """What MuZero's and Stochastic MuZero's trainers declare for the self-play, replay
    and learner steps they share (`initial_state`, `play_and_store`, `sample_segments`,
    `descend`, `learn_in_updates` below): the two differ in the model they learn and its
    loss, not in how they play, store and draw their games."""

    search: eqx.AbstractVar[AbstractSearch]
    config: eqx.AbstractVar[Config]
    replay: eqx.AbstractVar[SegmentReplay]

    @property
    @abc.abstractmethod
    def optimiser(self) -> optax.GradientTransformation:
        """The learner's optimiser."""


class MuZero(AbstractMuZeroTrainer[TrainState]):
    """MuZero training: self-play with a search over the learned model, a replay of
    trajectory segments, and a learner on the unrolled model.

    The same contract as [`azx.alphazero.AlphaZero`][]: configuration only; `init(net,
    key=...)` builds a [`azx.muzero.TrainState`][] for a [`azx.muzero.MuZeroNet`][], and
    `step(state, key) -> state` is one pure iteration, to be jitted, scanned or sharded
    ([`azx.parallel`][]); checkpoints through [`azx.checkpoint`][].

    The search is a native one ([`azx.search.PUCT`][], [`azx.search.Gumbel`][]) or mctx's
    ([`azx.search.MctxPUCT`][], [`azx.search.MctxGumbel`][]), planning over embeddings
    with [`azx.muzero.LearnedModel`][]; its `gamma` discounts the targets too. A learned
    model's tree is not reused between moves (the embeddings of the tree's nodes are the
    model's guesses, not the states the game reached), so a search with `reuse_tree` is
    refused.
    """

    env: AbstractEnv
    search: AbstractSearch
    config: Config
    replay: SegmentReplay
    axis_name: str | None = eqx.field(static=True)

    def __init__(
        self,
        env: AbstractEnv,
        search: AbstractSearch,
        config: Config = Config(),
        *,
        axis_name: str | None = None,
    ):
        """**Arguments:**

        - `env`: the environment ([`azx.envs.AbstractEnv`][]); 1 player, or 2 players
          whose turns alternate.
        - `search`: the search for every self-play move.
        - `config`: sizes and learning settings ([`azx.muzero.Config`][]).
        - `axis_name`: the mesh axis over which games are sharded (set by
          [`azx.parallel`][]).
        """
        if env.num_players not in (1, 2):
            raise ValueError(
                f"MuZero trains 1-player environments and 2-player zero-sum games; the "
                f"environment has num_players={env.num_players}"
            )
        if not isinstance(search, AbstractSearch):
            raise ValueError(f"search must be an azx.search.AbstractSearch, got {search!r}")
        if search.reuse_tree:
            raise ValueError(
                "MuZero's search starts afresh at every move (a learned model's tree holds "
                "predicted embeddings, not the states the game reached): pass "
                "reuse_tree=False"
            )
        if config.augment_symmetries and not env.symmetries():
            raise ValueError(
                "augment_symmetries=True, but the environment declares no symmetries "
                "(AbstractEnv.symmetries)"
            )
        self.env = env
        self.search = search
        self.config = config
        self.replay = SegmentReplay(
            config.buffer_capacity // config.num_envs,
            config.unroll_steps,
            config.td_steps,
            absorbing_end=config.absorbing_end,
        )
        self.axis_name = axis_name

    @property
    def optimiser(self) -> optax.GradientTransformation:
        """AdamW with `config.learning_rate` (cosine-decayed if `config.decay_iterations`
        is set) and `config.weight_decay`, after clipping to `config.max_grad_norm`; built
        when asked for, so that trainers of equal configurations compare equal."""
        return default_optimiser(self.config)

    @property
    def num_envs(self) -> int:
        return self.config.num_envs

    @property
    def env_steps_per_iteration(self) -> int:
        return self.config.num_envs * self.config.collect_steps

    def with_axis_name(self, axis_name: str | None) -> "MuZero":
        return MuZero(self.env, self.search, self.config, axis_name=axis_name)

    def init(self, net: MuZeroNet, *, key: PRNGKey) -> TrainState:
        """The state before training: `net` as given, fresh episodes, an empty replay.
        With `config.consistency_loss_weight > 0` and no `net.consistency`, the network
        is given a [`azx.muzero.ConsistencyHead`][] of the default sizes for its
        embedding (weights from `jax.random.split(key)[1]`, a key no iteration uses)."""
        if not isinstance(net, MuZeroNet):
            raise ValueError(f"net must be an azx.muzero.MuZeroNet, got {type(net).__name__}")
        net = with_consistency_head(self, net, key)
        return initial_state(self, TrainState, Metrics, net, key)

    def model(self, net: MuZeroNet) -> LearnedModel:
        """The model the search plans with."""
        return LearnedModel(net=net, gamma=self.search.gamma, two_player=self.env.num_players == 2)

    def self_play(self, state: TrainState, key: PRNGKey) -> TrainState:
        """`collect_steps` moves with search in every game, stored in the replay; games
        that end are restarted. Sets the self-play fields of `state.metrics`."""
        return play_and_store(self, state, key)

    def reanalyse(self, state: TrainState, key: PRNGKey) -> TrainState:
        """MuZero Reanalyse: `config.reanalyse_steps` stored steps of every game row, drawn
        uniformly, searched again with the current network; their policy targets and root
        values (what the value targets bootstrap from) are replaced by the new search's.
        The identity when `reanalyse_steps` is 0."""
        count = self.config.reanalyse_steps
        if not count:
            return state
        replay, rows = state.replay, rows_of(state)
        keys = jax.vmap(jax.random.split)(row_keys(key, self.first_row(rows), rows))
        slots = jax.vmap(lambda r, k: self.replay.choose_row(r, key=k, count=count))(
            replay, keys[:, 0]
        )
        row_index = jnp.arange(rows)[:, None]
        stored = jax.tree.map(lambda ring: ring[row_index, slots], replay.steps)

        def flat(x):
            return x.reshape((rows * count,) + x.shape[2:])

        roots = Observation(
            observation=flat(stored.observation),
            legal_action_mask=flat(stored.legal_action_mask),
        )
        search_keys = jax.vmap(lambda k: jax.random.split(k, count))(keys[:, 1])
        out = search_observations(
            self.search,
            state.net,
            roots,
            two_player=self.env.num_players == 2,
            key=flat(search_keys),
        )
        # Slots beyond a row's stored steps (a young replay) keep their contents.
        written = replay.written[row_index, slots]
        policy = jnp.where(
            written[..., None], out.policy_target.reshape(rows, count, -1), stored.policy_target
        )
        value = jnp.where(written, out.root_value.reshape(rows, count), stored.root_value)
        steps = eqx.tree_at(
            lambda s: (s.policy_target, s.root_value),
            replay.steps,
            (
                replay.steps.policy_target.at[row_index, slots].set(policy),
                replay.steps.root_value.at[row_index, slots].set(value),
            ),
        )
        return eqx.tree_at(lambda s: s.replay.steps, state, steps)

    def _learn(self, state: TrainState, key: PRNGKey, first_row):
        rows = rows_of(state)
        per_row = self.config.batch_size // self.config.num_envs
        targets, observation, valid = sample_segments(self, state, key, first_row)
        if self.config.augment_symmetries:
            # Its own key stream, so that runs without augmentation are unchanged.
            draw = SymmetryDraw.make(
                self.env, jax.random.fold_in(key, 1), first_row, rows * per_row, per_row
            )
            observation = draw.permute(observation, draw.observation_index)
            targets = eqx.tree_at(
                lambda t: (t.actions, t.policy_target, t.next_observation),
                targets,
                (
                    draw.map_actions(targets.actions),
                    jax.vmap(draw.permute, in_axes=(1, None), out_axes=1)(
                        targets.policy_target, draw.action_index
                    ),
                    jax.vmap(draw.permute, in_axes=(1, None), out_axes=1)(
                        targets.next_observation, draw.observation_index
                    ),
                ),
            )
        config = self.config

        def parts_of(net):
            return loss(
                net,
                observation,
                targets,
                valid,
                value_loss_weight=config.value_loss_weight,
                reward_loss_weight=config.reward_loss_weight,
                consistency_loss_weight=config.consistency_loss_weight,
            )

        return descend(self, state, parts_of)

    def learn(self, state: TrainState, key: PRNGKey) -> TrainState:
        """`train_steps` updates on segments from the replay (each skipped while no
        segment is complete). Sets the loss fields of `state.metrics`."""
        return learn_in_updates(self, self._learn, state, key)

    def step(self, state: TrainState, key: PRNGKey) -> TrainState:
        """One training iteration: `self_play`, `reanalyse` (when switched on), then
        `learn`. Pure."""
        play_key, learn_key = jax.random.split(key)
        state = self.self_play(state, play_key)
        state = self.reanalyse(state, jax.random.fold_in(key, 2))
        state = self.learn(state, learn_key)
        return eqx.tree_at(lambda s: s.iteration, state, state.iteration + 1)


Net = TypeVar("Net", MuZeroNet, StochasticMuZeroNet)


def with_consistency_head(trainer: AbstractMuZeroTrainer, net: Net, key: PRNGKey) -> Net:
    """`net` with a [`azx.muzero.ConsistencyHead`][] of the default sizes for its embedding
    (weights from `jax.random.split(key)[1]`, a key no iteration uses) where the trainer's
    `consistency_loss_weight` asks for the loss and `net` has no head; else `net`."""
    if not trainer.config.consistency_loss_weight or net.consistency is not None:
        return net
    env = trainer.env
    observation = jax.ShapeDtypeStruct(env.observation_shape, env.observation_dtype)
    embedding = jax.eval_shape(net.represent, observation)
    head = ConsistencyHead(embedding.shape, key=jax.random.split(key)[1])
    return eqx.tree_at(lambda n: n.consistency, net, head, is_leaf=lambda x: x is None)


def initial_state(
    trainer: AbstractMuZeroTrainer,
    state_type: type[_selfplay.State],
    metrics_type: type[_selfplay.AbstractSelfPlayMetrics],
    net: MuZeroNet | StochasticMuZeroNet,
    key: PRNGKey,
) -> _selfplay.State:
    """A `state_type` before training: `net` as given, fresh games (from `fold_in(key,
    0)`), an empty replay of `trainer`'s, zero metrics of `metrics_type`."""
    rows, env = trainer.config.num_envs, trainer.env
    env_state = jax.vmap(env.init)(row_keys(jax.random.fold_in(key, 0), jnp.int32(0), rows))
    params, net_static = eqx.partition(net, eqx.is_array)
    with third_party_numerics():
        opt_state = trainer.optimiser.init(params)
    return state_type(
        params=params,
        opt_state=opt_state,
        env_state=env_state,
        replay=trainer.replay.init(blank_step(env), rows),
        episode_return=jnp.zeros(rows, jnp.float32),
        episode_length=jnp.zeros(rows, jnp.int32),
        iteration=jnp.int32(0),
        metrics=zero_metrics(metrics_type),
        key=key,
        net_static=net_static,
    )


def play_and_store(
    trainer: AbstractMuZeroTrainer, state: _selfplay.State, key: PRNGKey
) -> _selfplay.State:
    """`trainer.config.collect_steps` self-play moves in every game, each chosen by a fresh
    search over the learned model of `state.net` (its kind by its type:
    `learned_search_states`) and stored in the replay; games that end restart. Sets the
    self-play fields of `state.metrics`, `replay_segments` with them."""
    env, config, search, replay = trainer.env, trainer.config, trainer.search, trainer.replay

    def move(state, key, first_row):
        search_keys, step_keys, reset_keys = _selfplay.move_keys(key, first_row, rows_of(state))
        observation = jax.vmap(env.observation)(state.env_state)
        out = learned_search_states(search, state.net, env, state.env_state, key=search_keys)
        action = _selfplay.random_moves(
            env,
            state.env_state,
            out.action,
            state.episode_length,
            reset_keys,
            opening_moves=config.random_opening_moves,
            probability=config.random_move_probability,
        )
        next_state = jax.vmap(env.step)(state.env_state, action, step_keys)
        reward, discount = mover_reward_and_discount(env, state.env_state, next_state, search.gamma)
        terminated = jax.vmap(env.terminated)(next_state)
        truncated = jax.vmap(env.truncated)(next_state) & ~terminated
        step = Step(
            observation=observation,
            legal_action_mask=jax.vmap(env.legal_action_mask)(state.env_state),
            action=action,
            policy_target=out.policy_target,
            reward=reward,
            discount=discount,
            root_value=out.root_value,
            terminated=terminated,
            truncated=truncated,
        )
        state = eqx.tree_at(lambda s: s.replay, state, replay.add(state.replay, step))
        done = terminated | truncated
        return _selfplay.end_move(env, state, next_state, done, reset_keys, out.root_value)

    state = _selfplay.play_moves(trainer, move, state, key, config.collect_steps)
    segments = jnp.sum(replay.sampleable(state.replay), dtype=jnp.int32)
    return eqx.tree_at(
        lambda s: s.metrics.replay_segments, state, trainer.sum_over_shards(segments)
    )


def sample_segments(
    trainer: AbstractMuZeroTrainer,
    state: _selfplay.State,
    key: PRNGKey,
    first_row: Int[Array, ""],
) -> tuple[Targets, Array, Array]:
    """One learner update's minibatch of `trainer.config.batch_size` segments, as many from
    every game row (`_selfplay.sample_by_row`): their targets, first observations, and
    which are real."""
    per_row = trainer.config.batch_size // trainer.config.num_envs

    def sample(row_replay, row_key):
        return trainer.replay.sample_row(row_replay, key=row_key, batch_size=per_row)

    return _selfplay.sample_by_row(sample, state.replay, key, first_row)


def learn_in_updates(
    trainer: AbstractMuZeroTrainer,
    update: Callable[[_selfplay.State, PRNGKey, Int[Array, ""]], tuple[_selfplay.State, Any]],
    state: _selfplay.State,
    key: PRNGKey,
) -> _selfplay.State:
    """`trainer.config.train_steps` learner updates in one `lax.scan`, `update(state, key,
    first_row) -> (state, loss parts)` each under `fold_in(key, index)`; the loss fields
    of `state.metrics` set from their parts (`_selfplay.record_learning`)."""
    first_row = trainer.first_row(rows_of(state))

    def one(state, index):
        return update(state, jax.random.fold_in(key, index), first_row)

    state, parts = jax.lax.scan(one, state, jnp.arange(trainer.config.train_steps))
    return eqx.tree_at(lambda s: s.metrics, state, _selfplay.record_learning(state.metrics, parts))


def descend(
    trainer: AbstractMuZeroTrainer, state: _selfplay.State, parts_of: Callable[[Any], Any]
) -> tuple[_selfplay.State, Any]:
    """One gradient step of `trainer`'s optimiser on `parts_of(net).loss` (`parts_of`: a
    network to its loss parts, sums over a minibatch with their `count`); returns the
    updated state and the parts summed over shards."""

    def objective(params):
        parts = parts_of(eqx.combine(params, state.net_static))
        return parts.loss, parts

    grads, parts = jax.grad(objective, has_aux=True)(state.params)
    params, opt_state = trainer.apply_gradients(
        trainer.optimiser, state.params, state.opt_state, grads, parts.count
    )
    state = eqx.tree_at(lambda s: (s.params, s.opt_state), state, (params, opt_state))
    return state, trainer.sum_over_shards(parts)
