from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float, Int, PyTree

from .. import _selfplay
from .._numerics import third_party_numerics
from .._trainer import AbstractTrainer, SymmetryDraw, default_optimiser, row_keys, zero_metrics
from .._types import EnvState, PRNGKey
from ..buffer import Batch, BufferState, Experience, ReplayBuffer
from ..envs import AbstractEnv
from ..envs._mover import mover_reward_and_discount
from ..search import AbstractSearch
from ._config import Config
from ._loss import loss


# `fold_in` index for draws shared by all rows of a move: row keys use 0 .. num_envs - 1.
_MOVE_STREAM = 2**31 - 1
_PAST_STREAM = 2**31 - 2


class Metrics(_selfplay.AbstractSelfPlayMetrics):
    """What the last `step` measured. Means are over all games / positions (all shards)."""

    loss: Float[Array, ""]
    policy_loss: Float[Array, ""]
    value_loss: Float[Array, ""]
    policy_entropy: Float[Array, ""]
    """Mean entropy of the network's policy over legal actions, on training positions."""
    value_error: Float[Array, ""]
    """Mean absolute error of the network's value against the value targets."""
    updates_applied: Int[Array, ""]
    """Learner updates that had data (the first steps may have none: no game finished)."""
    episodes: Int[Array, ""]
    """Games that ended during this step's self-play."""
    episode_return: Float[Array, ""]
    """Mean return of player 0 over those games (0 when none ended)."""
    episode_length: Float[Array, ""]
    """Mean length of those games, in moves (0 when none ended)."""
    root_value: Float[Array, ""]
    """Mean search value at the root, for the player to move."""
    buffer_positions: Int[Array, ""]
    """Positions in the buffer with a known value target."""


class TrainState(_selfplay.AbstractSelfPlayState):
    """Everything that changes during training; every leaf is an array.

    Being arrays only, it is a valid `jax.lax.scan` carry and checkpoints as it is. Rows of
    `env_state`, `tree`, `buffer`, `episode_return` and `episode_length` are the games
    (sharded over devices by [`azx.parallel`][]); the rest is replicated.
    """

    row_fields: ClassVar[tuple[str, ...]] = (
        "env_state",
        "tree",
        "buffer",
        "episode_return",
        "episode_length",
    )

    params: PyTree[Array]
    """The network's arrays; `net` puts them back into the network."""
    opt_state: PyTree[Array]
    env_state: EnvState
    tree: PyTree[Array]
    buffer: BufferState
    episode_return: Float[Array, " num_envs"]
    """Return of player 0 so far in each running game."""
    episode_length: Int[Array, " num_envs"]
    iteration: Int[Array, ""]
    """Number of `step` calls so far."""
    metrics: Metrics
    key: PRNGKey
    """The run's key; `AlphaZero.train` derives each step's key from it and `iteration`."""
    past_params: PyTree[Array] | None
    """Kept past versions of `params`, stacked on a leading axis of
    `config.past_opponents` (see [`azx.alphazero.Config.past_opponent_fraction`][]);
    `None` without past opponents."""
    net_static: Any = eqx.field(static=True)
    """The network's non-array parts (structure, activation functions, sizes); `net` puts
    `params` back into them."""


def _optimiser_init(optimiser, params):
    with third_party_numerics():
        return optimiser.init(params)


class AlphaZero(AbstractTrainer[TrainState]):
    """AlphaZero training: self-play with search, a replay buffer, and a learner.

    Configuration only (a frozen Module). `init` builds a [`azx.alphazero.TrainState`][];
    `step(state, key) -> state` is one pure training iteration, to be jitted, scanned or
    sharded by the caller:

        trainer = azx.alphazero.AlphaZero(env, search, config)
        state = trainer.init(net, key=key)
        step = eqx.filter_jit(trainer.step)
        state = step(state, key)
    """

    env: AbstractEnv
    search: AbstractSearch
    config: Config
    buffer: ReplayBuffer
    custom_optimiser: optax.GradientTransformation | None = eqx.field(static=True)
    """The optimiser given to the constructor (`None`: the default, built from `config`)."""
    axis_name: str | None = eqx.field(static=True)

    def __init__(
        self,
        env: AbstractEnv,
        search: AbstractSearch,
        config: Config = Config(),
        *,
        optimiser: optax.GradientTransformation | None = None,
        axis_name: str | None = None,
    ):
        """**Arguments:**

        - `env`: the game ([`azx.envs.AbstractEnv`][]); 1 or 2 players.
        - `search`: the search used for every self-play move ([`azx.search`][]).
        - `config`: sizes and learning settings ([`azx.alphazero.Config`][]).
        - `optimiser`: an optax transformation; default AdamW with `config.learning_rate`
          (cosine-decayed if `config.decay_iterations` is set) and `config.weight_decay`,
          after clipping to `config.max_grad_norm`.
        - `axis_name`: the mesh axis over which games are sharded, when `step` runs inside
          `shard_map` (set by [`azx.parallel`][]; leave `None` otherwise).
        """
        if env.num_players not in (1, 2):
            raise ValueError(
                f"AlphaZero trains 1-player games and 2-player zero-sum games; the "
                f"environment has num_players={env.num_players}"
            )
        if config.past_opponent_fraction and env.num_players != 2:
            raise ValueError(
                f"past_opponent_fraction={config.past_opponent_fraction} needs a two-player "
                f"game; the environment has num_players={env.num_players}"
            )
        if config.augment_symmetries and not env.symmetries():
            raise ValueError(
                "augment_symmetries=True, but the environment declares no symmetries "
                "(AbstractEnv.symmetries() is empty)"
            )
        fast = config.fast_search_simulations
        if fast is not None and fast >= search.num_simulations:
            raise ValueError(
                f"fast_search_simulations ({fast}) must be fewer than the search's "
                f"num_simulations ({search.num_simulations})"
            )
        self.env = env
        self.search = search
        self.config = config
        self.buffer = ReplayBuffer(
            config.buffer_capacity, config.num_envs, truncation=config.truncation
        )
        self.custom_optimiser = optimiser
        self.axis_name = axis_name

    @property
    def optimiser(self) -> optax.GradientTransformation:
        """The optimiser: the one given, or the default built from `config` when asked
        for, so that trainers of equal configurations compare equal (a fresh
        `optax.chain` never equals another) and `eqx.filter_jit` compiles their step
        once."""
        if self.custom_optimiser is not None:
            return self.custom_optimiser
        return default_optimiser(self.config)

    @property
    def num_envs(self) -> int:
        return self.config.num_envs

    @property
    def env_steps_per_iteration(self) -> int:
        """Moves played per `step` over all games."""
        return self.config.num_envs * self.config.collect_steps

    def with_axis_name(self, axis_name: str | None) -> "AlphaZero":
        return AlphaZero(
            self.env,
            self.search,
            self.config,
            optimiser=self.custom_optimiser,
            axis_name=axis_name,
        )

    # --- construction ----------------------------------------------------------------

    def init(self, net: Any, *, key: PRNGKey) -> TrainState:
        """The state before training: `net` as given, fresh games, an empty buffer.

        **Arguments:**

        - `net`: the network to train (maps ONE observation to `(logits, value)`).
        - `key`: the run's random key (keyword-only).
        """
        rows = self.config.num_envs
        env_keys = row_keys(jax.random.fold_in(key, 0), jnp.int32(0), rows)
        env_state = jax.vmap(self.env.init)(env_keys)
        num_actions = self.env.num_actions
        example = Experience(
            observation=jnp.zeros(self.env.observation_shape, self.env.observation_dtype),
            legal_action_mask=jnp.zeros(num_actions, jnp.bool_),
            policy_target=jnp.zeros(num_actions, jnp.float32),
            reward=jnp.float32(0.0),
            discount=jnp.float32(0.0),
            root_value=jnp.float32(0.0),
        )
        params, net_static = eqx.partition(net, eqx.is_array)
        return TrainState(
            params=params,
            opt_state=_optimiser_init(self.optimiser, params),
            env_state=env_state,
            tree=self.search.init(self.env, rows),
            buffer=self.buffer.init(example),
            episode_return=jnp.zeros(rows, jnp.float32),
            episode_length=jnp.zeros(rows, jnp.int32),
            iteration=jnp.int32(0),
            metrics=zero_metrics(Metrics),
            key=key,
            past_params=(
                jax.tree.map(lambda p: jnp.stack([p] * self.config.past_opponents), params)
                if self.config.past_opponent_fraction
                else None
            ),
            net_static=net_static,
        )

    # --- the training step -----------------------------------------------------------

    def _self_play_move(self, state: TrainState, key: PRNGKey, first_row):
        env, rows = self.env, state.episode_return.shape[0]
        search_keys, step_keys, reset_keys = _selfplay.move_keys(key, first_row, rows)
        out, full_search = self._search(state, key, search_keys)
        action = out.action
        best = jnp.argmax(out.policy_target, axis=-1).astype(action.dtype)
        if self.config.exploration_moves is not None:
            action = jnp.where(state.episode_length < self.config.exploration_moves, action, best)
        policy_target = out.policy_target
        if full_search is not None:
            # A fast search plays its best move and gives no policy target (an all-zero
            # target adds nothing to the policy loss); its position still trains the value.
            action = jnp.where(full_search, action, best)
            policy_target = jnp.where(full_search, policy_target, 0.0)
        root_value = out.root_value
        if self.config.past_opponent_fraction:
            past_action, past_root_value, past_moves = self._past_search(
                state, key, search_keys, first_row
            )
            action = jnp.where(past_moves, past_action, action)
            policy_target = jnp.where(past_moves[:, None], 0.0, policy_target)
            root_value = jnp.where(past_moves, past_root_value, root_value)
        action = _selfplay.random_moves(
            env,
            state.env_state,
            action,
            state.episode_length,
            reset_keys,
            opening_moves=self.config.random_opening_moves,
            probability=self.config.random_move_probability,
        )

        outcome = None
        if self.search.reuse_tree and self.search.plans_chance(env):
            # The search keeps the subtree of the chance outcome that happens: the game
            # steps through its afterstate and an outcome drawn from its distribution
            # (distributed as `env.step`).
            after = jax.vmap(env.afterstate)(state.env_state, action)
            outcome = jax.vmap(env.sample_outcome)(after, step_keys)
            next_state = jax.vmap(env.apply_outcome)(after, outcome)
        else:
            next_state = jax.vmap(env.step)(state.env_state, action, step_keys)
        reward, discount = mover_reward_and_discount(
            env, state.env_state, next_state, self.search.gamma
        )
        experience = Experience(
            observation=jax.vmap(env.observation)(state.env_state),
            legal_action_mask=jax.vmap(env.legal_action_mask)(state.env_state),
            policy_target=policy_target,
            reward=reward,
            discount=discount,
            root_value=root_value,
        )
        terminated = jax.vmap(env.terminated)(next_state)
        truncated = jax.vmap(env.truncated)(next_state)
        done = terminated | truncated
        state = eqx.tree_at(
            lambda s: (s.tree, s.buffer),
            state,
            (
                self.search.advance(out.tree, action, done, outcome),
                self.buffer.add(
                    state.buffer, experience, terminated=terminated, truncated=truncated
                ),
            ),
        )
        return _selfplay.end_move(env, state, next_state, done, reset_keys, root_value)

    def _search(self, state: TrainState, key: PRNGKey, search_keys):
        """The move's search over all rows, and with playout-cap randomisation whether it
        was the full one (`None` without)."""
        env, config = self.env, self.config

        def search_with(search):
            return lambda: search(state.net, env, state.tree, state.env_state, key=search_keys)

        if config.fast_search_simulations is None:
            return search_with(self.search)(), None
        # One draw per move from the move's key, the same on every shard (an index that no
        # row's key uses); a `cond` then runs only the chosen search.
        coin_key = jax.random.fold_in(key, _MOVE_STREAM)
        full_search = jax.random.uniform(coin_key) < config.full_search_probability
        fast = self.search.with_num_simulations(config.fast_search_simulations)
        out = jax.lax.cond(full_search, search_with(self.search), search_with(fast))
        return out, full_search

    def _past_search(self, state: TrainState, key: PRNGKey, search_keys, first_row):
        """In every `n`-th game row, the search of a past network (one of
        `state.past_params`, drawn for this move): its actions and root values, widened to
        all rows, and where its moves replace the current network's."""
        n = round(1 / self.config.past_opponent_fraction)
        rows = search_keys.shape[0]
        if rows % n:
            raise ValueError(
                f"past_opponent_fraction=1/{n} needs the game rows on each device ({rows}) "
                f"to be a multiple of {n}"
            )
        kept = jnp.minimum(
            state.iteration // self.config.past_opponent_interval + 1, self.config.past_opponents
        )
        index = jax.random.randint(jax.random.fold_in(key, _PAST_STREAM), (), 0, kept)
        past_net = eqx.combine(
            jax.tree.map(lambda leaf: leaf[index], state.past_params), state.net_static
        )

        # The rows whose global index is n - 1 modulo n; shards start at multiples of n.
        def pick(x):
            return x[n - 1 :: n]

        out = self.search(
            past_net,
            self.env,
            jax.tree.map(pick, state.tree),
            jax.tree.map(pick, state.env_state),
            key=pick(search_keys),
        )
        # Alternate games give the past network player 1 and player 0.
        global_row = first_row + jnp.arange(rows)
        past_player = (global_row // n) % 2
        mover = jax.vmap(self.env.current_player)(state.env_state)
        past_moves = (global_row % n == n - 1) & (mover == past_player)

        def widen(past):
            return jnp.zeros(rows, past.dtype).at[n - 1 :: n].set(past)

        return widen(out.action), widen(out.root_value), past_moves

    def _keep_past_params(self, state: TrainState) -> TrainState:
        """Every `past_opponent_interval` iterations, the current parameters replace the
        oldest kept version."""
        interval, kept = self.config.past_opponent_interval, self.config.past_opponents
        take = state.iteration % interval == 0
        slot = (state.iteration // interval) % kept
        past_params = jax.tree.map(
            lambda past, now: jnp.where(take, past.at[slot].set(now), past),
            state.past_params,
            state.params,
        )
        return eqx.tree_at(lambda s: s.past_params, state, past_params)

    def _sample(self, buffer: BufferState, key: PRNGKey, first_row) -> Batch:
        """`batch_size // num_envs` positions of every game row, drawn uniformly from its
        steps with known targets."""
        per_row = self.config.batch_size // self.config.num_envs

        def sample_row(row_buffer, row_key):
            # The row as a buffer of one row.
            one_row = jax.tree.map(lambda x: x[None], row_buffer)
            return self.buffer.sample(one_row, key=row_key, batch_size=per_row)

        return _selfplay.sample_by_row(sample_row, buffer, key, first_row)

    def _augment(self, batch: Batch, key: PRNGKey, first_row) -> Batch:
        """Each position transformed by a board symmetry drawn uniformly (per game row,
        like the sample itself, so that sharding does not change the draw)."""
        per_row = self.config.batch_size // self.config.num_envs
        draw = SymmetryDraw.make(self.env, key, first_row, batch.mask.shape[0], per_row)
        return eqx.tree_at(
            lambda b: (b.observation, b.legal_action_mask, b.policy_target),
            batch,
            (
                draw.permute(batch.observation, draw.observation_index),
                draw.permute(batch.legal_action_mask, draw.action_index),
                draw.permute(batch.policy_target, draw.action_index),
            ),
        )

    def _learn(self, state: TrainState, key: PRNGKey, first_row):
        batch = self._sample(state.buffer, key, first_row)
        if self.config.augment_symmetries:
            # Its own key stream, so that runs without augmentation are unchanged.
            batch = self._augment(batch, jax.random.fold_in(key, 1), first_row)
        config = self.config
        if config.root_value_weight:
            mix = config.root_value_weight
            value_target = (1 - mix) * batch.value_target + mix * batch.root_value
            batch = eqx.tree_at(lambda b: b.value_target, batch, value_target)
        options = dict(value_loss_weight=config.value_loss_weight)
        if config.fast_search_simulations is not None:
            # Only full searches gave policy targets: the policy term is a mean over those
            # positions, the value term over all of them.
            has_target = batch.mask & (jnp.sum(batch.policy_target, axis=-1) > 0)
            with_target = self.sum_over_shards(jnp.sum(has_target, dtype=jnp.float32))
            everything = self.sum_over_shards(jnp.sum(batch.mask, dtype=jnp.float32))
            options["policy_loss_weight"] = everything / jnp.maximum(with_target, 1.0)

        def objective(params):
            parts = loss(eqx.combine(params, state.net_static), batch, **options)
            return parts.loss, parts

        grads, parts = jax.grad(objective, has_aux=True)(state.params)
        # Sums over this shard's positions; with no position with a known target yet, the
        # update is skipped rather than learnt from filler.
        params, opt_state = self.apply_gradients(
            self.optimiser, state.params, state.opt_state, grads, parts.count
        )
        parts = self.sum_over_shards(parts)
        return eqx.tree_at(lambda s: (s.params, s.opt_state), state, (params, opt_state)), parts

    def self_play(self, state: TrainState, key: PRNGKey) -> TrainState:
        """`collect_steps` moves with search in every game, stored in the buffer; games
        that end are restarted. Sets the self-play fields of `state.metrics`."""
        state = _selfplay.play_moves(
            self, self._self_play_move, state, key, self.config.collect_steps
        )
        positions = self.sum_over_shards(self.buffer.num_valid(state.buffer))
        return eqx.tree_at(lambda s: s.metrics.buffer_positions, state, positions)

    def learn(self, state: TrainState, key: PRNGKey) -> TrainState:
        """`train_steps` gradient updates on minibatches from the buffer (each skipped if
        no position has a known target yet). Sets the loss fields of `state.metrics`."""
        first_row = self.first_row(state.episode_return.shape[0])

        def update(state, index):
            return self._learn(state, jax.random.fold_in(key, index), first_row)

        state, parts = jax.lax.scan(update, state, jnp.arange(self.config.train_steps))
        return eqx.tree_at(
            lambda s: s.metrics, state, _selfplay.record_learning(state.metrics, parts)
        )

    def step(self, state: TrainState, key: PRNGKey) -> TrainState:
        """One training iteration: `self_play` (`collect_steps` moves in every game), then
        `learn` (`train_steps` updates). Pure: the same state and key give the same result.
        """
        play_key, learn_key = jax.random.split(key)
        if self.config.past_opponent_fraction:
            state = self._keep_past_params(state)
        state = self.learn(self.self_play(state, play_key), learn_key)
        return eqx.tree_at(lambda s: s.iteration, state, state.iteration + 1)
