from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Bool, Float, Int, PyTree, Shaped

from .._numerics import third_party_numerics
from .._trainer import AbstractTrainer, AbstractTrainState, row_keys, select_rows, zero_metrics
from .._types import EnvState, PRNGKey, PRNGKeys
from ..envs import AbstractEnv
from ..nets import ActorCritic, RecurrentInput
from ._config import Config
from ._distributions import AbstractActionDistribution, action_distribution
from ._gae import gae
from ._loss import LossParts, loss
from ._policy import (
    ObservationStats,
    act,
    apply,
    check_network,
    initial_carry,
    initial_stats,
    is_recurrent,
    merge_stats,
    normalize,
)


class Metrics(eqx.Module):
    """What the last `step` measured, over all environments (all shards)."""

    loss: Float[Array, ""]
    """Mean over the step's updates of the minibatch loss; likewise the next five."""
    policy_loss: Float[Array, ""]
    value_loss: Float[Array, ""]
    entropy: Float[Array, ""]
    """The policy's mean entropy; with `entropy_coef` 0, where the loss does not read it,
    measured once, on the first minibatch before the step's updates."""
    approx_kl: Float[Array, ""]
    clip_fraction: Float[Array, ""]
    explained_variance: Float[Array, ""]
    """`1 - Var(target - value) / Var(target)` over the rollout: how much of the value
    targets' variance the rollout's values explain (1 is perfect, 0 no better than a
    constant)."""
    learning_rate: Float[Array, ""]
    """The learning rate of this step's updates."""
    episodes: Int[Array, ""]
    """Episodes that ended during this step's rollout."""
    episode_return: Float[Array, ""]
    """Mean undiscounted return of those episodes (0 when none ended)."""
    episode_length: Float[Array, ""]
    """Mean length of those episodes, in steps (0 when none ended)."""


class TrainState(AbstractTrainState):
    """Everything that changes during PPO training; every leaf is an array.

    Rows of `env_state`, `carry`, `previous_action`, `previous_reward`, `episode_start`,
    `episode_return` and `episode_length` are the environments (sharded over devices by
    [`azx.parallel`][]); the rest is replicated.
    """

    row_fields: ClassVar[tuple[str, ...]] = (
        "env_state",
        "carry",
        "previous_action",
        "previous_reward",
        "episode_start",
        "episode_return",
        "episode_length",
    )
    params: PyTree[Array]
    """The network's arrays; `net` puts them back into the network."""
    opt_state: PyTree[Array]
    env_state: EnvState
    carry: PyTree[Array]
    """Each environment's network memory (`()` for a feed-forward network)."""
    previous_action: Int[Array, " num_envs"]
    """The action a recurrent network reads (zeros with continuous actions, which need a
    feed-forward network)."""
    previous_reward: Float[Array, " num_envs"]
    episode_start: Bool[Array, " num_envs"]
    """Whether each environment's current observation starts an episode."""
    episode_return: Float[Array, " num_envs"]
    """Return so far of each running episode."""
    episode_length: Int[Array, " num_envs"]
    observation_stats: ObservationStats
    """Running observation statistics (used only with `Config.normalize_observations`)."""
    iteration: Int[Array, ""]
    """Number of `step` calls so far."""
    metrics: Metrics
    key: PRNGKey
    """The run's key; `train` derives each step's key from it and `iteration`."""
    net_static: Any = eqx.field(static=True)
    """The network's non-array parts; `net` puts `params` back into them."""


class Trajectory(eqx.Module):
    """The steps of a rollout: every leaf is `[rollout_length, num_envs, ...]` (time-major)
    as [`azx.ppo.PPO.rollout`][] returns it, `[envs, steps, ...]` in a minibatch."""

    observation: Shaped[Array, "..."]
    """As the environment gave it (not normalised)."""
    legal_action_mask: Bool[Array, "*batch num_actions"]
    action: Int[Array, "*batch"] | Float[Array, "*batch action_size"]
    """A discrete action, or the sample of a continuous action distribution as it drew it
    (before [`azx.ppo.AbstractActionDistribution.env_action`][] maps it into the
    bounds)."""
    log_prob: Float[Array, "*batch"]
    value: Float[Array, "*batch"]
    reward: Float[Array, "*batch"]
    terminated: Bool[Array, "*batch"]
    truncated: Bool[Array, "*batch"]
    final_value: Float[Array, "*batch"]
    """Value of the observation each step led to, where the episode was truncated there
    (0 elsewhere, and everywhere when truncation counts as termination)."""
    previous_action: Int[Array, "*batch"]
    previous_reward: Float[Array, "*batch"]
    episode_start: Bool[Array, "*batch"]


class Rollout(eqx.Module):
    """What `PPO.rollout` collected: the trajectory and what the learner needs beside it."""

    trajectory: Trajectory
    start_carry: PyTree[Array]
    """Each environment's network memory before the rollout's first step."""
    last_value: Float[Array, " envs"]
    """Value of each environment's observation after the last step (for the bootstrap)."""
    episodes: Int[Array, ""]
    """Episodes that ended during the rollout (on this shard)."""
    return_sum: Float[Array, ""]
    length_sum: Int[Array, ""]


class Minibatch(eqx.Module):
    """What one gradient update reads, row-major: `[envs, steps]` leading axes (and a
    `[num_minibatches]` axis before them where [`azx.ppo.PPO.minibatches`][] stacks an
    epoch's). The inputs of a recurrent network are there only for one."""

    observation: Shaped[Array, "..."]
    """As the environment gave it (not normalised)."""
    legal_action_mask: Bool[Array, "*batch num_actions"]
    action: Int[Array, "*batch"] | Float[Array, "*batch action_size"]
    log_prob: Float[Array, "*batch"]
    """Of `action` under the rollout's policy."""
    value: Float[Array, "*batch"]
    """The rollout's value."""
    advantage: Float[Array, "*batch"]
    target: Float[Array, "*batch"]
    """The value target."""
    previous_action: Int[Array, "*batch"] | None
    previous_reward: Float[Array, "*batch"] | None
    episode_start: Bool[Array, "*batch"] | None
    start_carry: PyTree[Array]
    """Each sequence's memory at its first step (`()` for a feed-forward network, whose
    samples are single steps)."""


class _Row(eqx.Module):
    """One environment's part of the state, as a rollout step sees it."""

    env_state: EnvState
    carry: PyTree[Array]
    previous_action: Int[Array, "*envs"]
    previous_reward: Float[Array, "*envs"]
    episode_start: Bool[Array, "*envs"]
    episode_return: Float[Array, "*envs"]
    episode_length: Int[Array, "*envs"]


_ROW_FIELDS = TrainState.row_fields


def _rows(state: TrainState) -> _Row:
    return _Row(**{name: getattr(state, name) for name in _ROW_FIELDS})


class PPO(AbstractTrainer[TrainState]):
    """Proximal policy optimisation (Schulman et al., 2017), Anakin-style: the rollout,
    the advantages and every update in one pure `step(state, key) -> state`.

    Configuration only (a frozen Module), with the same contract as
    [`azx.alphazero.AlphaZero`][]: `init` builds a [`azx.ppo.TrainState`][], `step` is one
    pure training iteration, `train` scans it, and [`azx.parallel`][] shards it.

        trainer = azx.ppo.PPO(env, azx.ppo.Config())
        state = trainer.init(azx.nets.ActorCritic(env.observation_shape, env.num_actions,
                                                  key=key), key=key)
        state = eqx.filter_jit(trainer.train)(state, 100)

    The network is feed-forward (`net(observation) -> (logits, value)`) or recurrent (an
    [`azx.nets.AbstractRecurrentNet`][], replayed over whole sequences from the rollout's
    starting memory). Illegal actions (the environment's legal-action mask) get no
    probability. With continuous actions the network gives the parameters of
    `config.action_distribution` instead of logits (see
    [`azx.ppo.ContinuousActorCritic`][]).

    Trainers built from equal arguments compare equal, so a jitted `train` compiled for
    one serves the other.
    """

    env: AbstractEnv
    config: Config
    distribution: AbstractActionDistribution
    """The policy over the environment's actions (`config.action_distribution`)."""
    custom_optimiser: optax.GradientTransformation | None = eqx.field(static=True)
    """The optimiser given to the constructor (`None`: the default, built from `config`)."""
    axis_name: str | None = eqx.field(static=True)

    def __init__(
        self,
        env: AbstractEnv,
        config: Config = Config(),
        *,
        optimiser: optax.GradientTransformation | None = None,
        axis_name: str | None = None,
    ):
        """**Arguments:**

        - `env`: a single-player environment ([`azx.envs.AbstractEnv`][]).
        - `config`: sizes and learning settings ([`azx.ppo.Config`][]).
        - `optimiser`: an optax transformation; default Adam (`config.learning_rate`,
          linearly annealed over `config.anneal_iterations` if set, `config.adam_eps`;
          one for the actor and one for the critic with `config.critic_learning_rate`)
          after clipping to `config.max_grad_norm`.
        - `axis_name`: the mesh axis over which environments are sharded, when `step`
          runs inside `shard_map` (set by [`azx.parallel`][]; leave `None` otherwise).

        **Raises:** `ValueError` for an environment with more than one player, or one
        whose action space `config.action_distribution` does not fit.
        """
        if env.num_players != 1:
            raise ValueError(
                f"PPO trains single-player environments; this one has num_players={env.num_players}"
            )
        self.env = env
        self.config = config
        self.distribution = action_distribution(config.action_distribution, env)
        self.custom_optimiser = optimiser
        self.axis_name = axis_name

    @property
    def optimiser(self) -> optax.GradientTransformation:
        """The optimiser: the one given, or the default built from `config`. Built on
        demand rather than stored, so that equal configurations give equal trainers (a
        fresh `optax.chain` never compares equal to another)."""
        if self.custom_optimiser is not None:
            return self.custom_optimiser
        return _default_optimiser(self.config)

    @property
    def num_envs(self) -> int:
        return self.config.num_envs

    @property
    def env_steps_per_iteration(self) -> int:
        return self.config.num_envs * self.config.rollout_length

    def with_axis_name(self, axis_name: str | None) -> "PPO":
        return PPO(self.env, self.config, optimiser=self.custom_optimiser, axis_name=axis_name)

    # --- construction ----------------------------------------------------------------

    def check_network(self, net: Any) -> None:
        """Raise `ValueError` unless `net` fits the environment and the configuration's
        minibatches (see [`azx.ppo.Config`][])."""
        check_network(self.env, net, self.distribution)
        config = self.config
        if config.critic_learning_rate is not None:
            _check_separate_critic(net)
        if is_recurrent(net):
            if config.num_envs % config.num_minibatches:
                raise ValueError(
                    f"a recurrent network learns from whole sequences, so num_minibatches "
                    f"({config.num_minibatches}) must divide num_envs ({config.num_envs}); "
                    f"allowed: {_divisors(config.num_envs)}"
                )
        elif config.rollout_length % config.num_minibatches:
            raise ValueError(
                f"every minibatch takes the same number of steps from each environment, so "
                f"num_minibatches ({config.num_minibatches}) must divide rollout_length "
                f"({config.rollout_length}); allowed: {_divisors(config.rollout_length)}"
            )

    def init(self, net: Any, *, key: PRNGKey) -> TrainState:
        """The state before training: `net` as given, fresh episodes, no statistics yet.

        **Arguments:**

        - `net`: the network to train: `net(observation) -> (logits, value)` on ONE
          observation, or an [`azx.nets.AbstractRecurrentNet`][].
        - `key`: the run's random key (keyword-only).

        **Raises:** `ValueError` if the network does not fit the environment or the
        configuration's minibatches.
        """
        self.check_network(net)
        rows = self.config.num_envs
        env_keys = row_keys(jax.random.fold_in(key, 0), jnp.int32(0), rows)
        params, net_static = eqx.partition(net, eqx.is_array)
        carry = jax.tree.map(lambda x: jnp.broadcast_to(x, (rows, *x.shape)), initial_carry(net))
        with third_party_numerics():
            opt_state = self.optimiser.init(params)
        state = TrainState(
            params=params,
            opt_state=opt_state,
            env_state=jax.vmap(self.env.init)(env_keys),
            carry=carry,
            previous_action=jnp.zeros(rows, jnp.int32),
            previous_reward=jnp.zeros(rows, jnp.float32),
            episode_start=jnp.ones(rows, jnp.bool_),
            episode_return=jnp.zeros(rows, jnp.float32),
            episode_length=jnp.zeros(rows, jnp.int32),
            observation_stats=initial_stats(self.env.observation_shape),
            iteration=jnp.int32(0),
            metrics=zero_metrics(Metrics),
            key=key,
            net_static=net_static,
        )
        warmup = self.config.observation_warmup_steps
        if warmup:
            # A key no training step uses: those are folded in by iteration from 0 up.
            state, collected = self._play(state, jax.random.fold_in(key, 2**32 - 1), warmup)
            state = self._update_stats(state, collected.trajectory.observation)
        return state

    # --- rollout ---------------------------------------------------------------------

    def _stats(self, state: TrainState) -> ObservationStats | None:
        return state.observation_stats if self.config.normalize_observations else None

    def _env_step(self, net, stats, row: _Row, noise, keys: PRNGKeys):
        """One step of one environment: act, step, note the transition, reset if ended.
        `noise`: the action's Gumbel noise; `keys`: two keys, for the step and the reset."""
        env = self.env
        step_key, reset_key = keys
        observation = env.observation(row.env_state)
        legal_action_mask = env.legal_action_mask(row.env_state)
        inputs = RecurrentInput(
            observation=normalize(stats, observation),
            previous_action=row.previous_action,
            previous_reward=row.previous_reward,
            episode_start=row.episode_start,
        )
        distribution = self.distribution
        carry, action, log_prob, value = act(
            net, distribution, row.carry, inputs, legal_action_mask, noise
        )
        next_state = env.step(row.env_state, distribution.env_action(action), step_key)
        # A recurrent network reads the previous action; only discrete ones are kept.
        previous_action = action if action.ndim == 0 else row.previous_action
        reward = env.rewards(next_state)[0]
        terminated = env.terminated(next_state)
        truncated = env.truncated(next_state) & ~terminated
        ended = terminated | truncated
        # The final observation of an episode cut short still has a future worth counting;
        # it is read here, before the reset replaces it. A recurrent network values it now,
        # from this step's memory; a feed-forward one after the rollout, all at once.
        final_observation = normalize(stats, env.observation(next_state))
        final_value = jnp.float32(0.0)
        if self.config.truncation == "bootstrap" and is_recurrent(net):
            final_inputs = RecurrentInput(
                observation=final_observation,
                previous_action=previous_action,
                previous_reward=reward,
                episode_start=jnp.bool_(False),
            )
            _, _, final_value = apply(net, carry, final_inputs)
            final_value = jnp.where(truncated, final_value, 0.0)
        episode_return = row.episode_return + reward
        episode_length = row.episode_length + 1
        transition = Trajectory(
            observation=observation,
            legal_action_mask=legal_action_mask,
            action=action,
            log_prob=log_prob,
            value=value,
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            final_value=final_value,
            previous_action=row.previous_action,
            previous_reward=row.previous_reward,
            episode_start=row.episode_start,
        )
        finished = (
            ended.astype(jnp.int32),
            jnp.where(ended, episode_return, 0.0),
            jnp.where(ended, episode_length, 0),
        )
        row = _Row(
            env_state=select_rows(ended, env.init(reset_key), next_state),
            carry=carry,
            previous_action=previous_action,
            previous_reward=reward,
            episode_start=ended,
            episode_return=jnp.where(ended, 0.0, episode_return),
            episode_length=jnp.where(ended, 0, episode_length),
        )
        return row, transition, finished, final_observation

    def rollout(self, state: TrainState, key: PRNGKey) -> tuple[TrainState, Rollout]:
        """`rollout_length` steps in every environment with the current policy, episodes
        that end restarted. Returns the advanced state and what was collected."""
        return self._play(state, key, self.config.rollout_length)

    def _play(self, state: TrainState, key: PRNGKey, num_steps: int) -> tuple[TrainState, Rollout]:
        net, stats = state.net, self._stats(state)
        rows = state.episode_return.shape[0]
        first_row = self.first_row(rows)
        later_values = self.config.truncation == "bootstrap" and not is_recurrent(net)
        transposed_net = _transpose_linear_weights(net, barrier=True)

        def scan_step(row, inputs):
            step_net = _transpose_linear_weights(transposed_net, barrier=False)
            step_row = jax.vmap(lambda *args: self._env_step(step_net, stats, *args))
            row, transition, finished, final_observation = step_row(row, *inputs)
            return row, (transition, finished, final_observation if later_values else ())

        # Every step's keys and action noise at once ([steps, rows, ...]): a few vectorised
        # draws rather than small ones inside every step of the loop. The draws run over
        # the flattened [steps * rows] keys: over two axes XLA:CPU hashes the [steps, rows,
        # 3] split keys about twice as slowly, for the same bits.
        steps = jnp.arange(num_steps)
        keys = jax.vmap(lambda t: row_keys(jax.random.fold_in(key, t), first_row, rows))(steps)
        keys = jax.vmap(lambda k: jax.random.split(k, 3))(keys.reshape(num_steps * rows))
        noise = jax.vmap(self.distribution.noise)(keys[:, 0])
        noise = jax.tree.map(lambda x: x.reshape(num_steps, rows, *x.shape[1:]), noise)
        start = _rows(state)
        end, (trajectory, finished, final_observation) = jax.lax.scan(
            scan_step, start, (noise, keys[:, 1:].reshape(num_steps, rows, 2))
        )
        if later_values:
            final_value = _over_samples(lambda o: net(o)[1], final_observation)
            final_value = jnp.where(trajectory.truncated, final_value, 0.0)
            trajectory = eqx.tree_at(lambda t: t.final_value, trajectory, final_value)

        def last_value(row: _Row):
            inputs = RecurrentInput(
                observation=normalize(stats, self.env.observation(row.env_state)),
                previous_action=row.previous_action,
                previous_reward=row.previous_reward,
                episode_start=row.episode_start,
            )
            return apply(net, row.carry, inputs)[2]

        episodes, return_sum, length_sum = (jnp.sum(x) for x in finished)
        collected = Rollout(
            trajectory=trajectory,
            start_carry=state.carry,
            last_value=jax.vmap(last_value)(end),
            episodes=episodes,
            return_sum=return_sum,
            length_sum=length_sum,
        )
        state = eqx.tree_at(
            lambda s: [getattr(s, name) for name in _ROW_FIELDS],
            state,
            [getattr(end, name) for name in _ROW_FIELDS],
        )
        return state, collected

    # --- learning --------------------------------------------------------------------

    def advantages(
        self, rollout: Rollout
    ) -> tuple[Float[Array, "time envs"], Float[Array, "time envs"]]:
        """The rollout's advantages and value targets ([`azx.ppo.gae`][]), time-major."""
        trajectory = rollout.trajectory
        next_value = jnp.concatenate([trajectory.value[1:], rollout.last_value[None]])
        ended = trajectory.terminated | trajectory.truncated
        reward = trajectory.reward
        if self.config.reward_scale != 1.0:
            reward = reward * self.config.reward_scale
        return gae(
            reward,
            trajectory.value,
            jnp.where(ended, trajectory.final_value, next_value),
            trajectory.terminated,
            trajectory.truncated,
            gamma=self.config.gamma,
            gae_lambda=self.config.gae_lambda,
            truncation=self.config.truncation,
        )

    def _moments(self, x: Float[Array, "..."]) -> tuple[Float[Array, ""], Float[Array, ""]]:
        """Mean and variance of all of `x`'s elements over all shards."""
        count = self.sum_over_shards(jnp.float32(x.size))
        mean = self.sum_over_shards(jnp.sum(x)) / count
        return mean, self.sum_over_shards(jnp.sum(jnp.square(x - mean))) / count

    def _standardize(self, x: Float[Array, "..."]) -> Float[Array, "..."]:
        """`x` standardised by its mean and standard deviation over all shards."""
        mean, var = self._moments(x)
        return (x - mean) / (jnp.sqrt(var) + 1e-8)

    def minibatches(
        self,
        state: TrainState,
        rollout: Rollout,
        advantage: Float[Array, "time envs"],
        target: Float[Array, "time envs"],
        key: PRNGKey,
    ) -> Minibatch:
        """One epoch's minibatches, stacked on a leading `[num_minibatches]` axis.

        A feed-forward network's minibatch takes `rollout_length // num_minibatches` steps
        of every environment: each environment's steps are shuffled by a key of its own
        (global) index and dealt out. A recurrent network's minibatch takes whole
        sequences: each group of `num_minibatches` consecutive environments is shuffled
        and dealt out one environment to every minibatch. Either way every sample is used
        once per epoch, and a minibatch holds the same samples however the environments
        are sharded over devices.
        """
        minibatches = self.config.num_minibatches
        trajectory = rollout.trajectory
        samples = {
            "observation": trajectory.observation,
            "legal_action_mask": trajectory.legal_action_mask,
            "action": trajectory.action,
            "log_prob": trajectory.log_prob,
            "value": trajectory.value,
            "advantage": advantage,
            "target": target,
        }
        steps, rows = advantage.shape
        first_row = self.first_row(rows)
        if not is_recurrent(state.net):
            keys = row_keys(key, first_row, rows)
            order = jax.vmap(lambda k: jax.random.permutation(k, steps))(keys)
            # [minibatches, rows, steps // minibatches]: each minibatch's samples, as
            # indices into the rollout's [steps * rows] flattened (time-major) samples.
            flat = order * rows + jnp.arange(rows)[:, None]
            index = jnp.transpose(flat.reshape(rows, minibatches, -1), (1, 0, 2))
            samples = jax.tree.map(lambda x: x.reshape(steps * rows, *x.shape[2:])[index], samples)
            return Minibatch(
                **samples,
                previous_action=None,
                previous_reward=None,
                episode_start=None,
                start_carry=(),
            )
        if rows % minibatches:
            raise ValueError(
                f"a recurrent network learns from whole sequences, so num_minibatches "
                f"({minibatches}) must divide the environments on each device ({rows})"
            )
        groups = rows // minibatches
        keys = row_keys(key, first_row // minibatches, groups)
        order = jax.vmap(lambda k: jax.random.permutation(k, minibatches))(keys)
        # [minibatches, groups]: the rows each minibatch takes.
        index = (jnp.arange(groups)[:, None] * minibatches + order).T
        samples |= {
            "previous_action": trajectory.previous_action,
            "previous_reward": trajectory.previous_reward,
            "episode_start": trajectory.episode_start,
        }
        samples = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1)[index], samples)
        start_carry = jax.tree.map(lambda x: x[index], rollout.start_carry)
        return Minibatch(**samples, start_carry=start_carry)

    def policy_and_value(
        self, net: Any, minibatch: Minibatch, observation_stats: ObservationStats | None
    ) -> tuple[Float[Array, "envs steps outputs"], Float[Array, "envs steps"]]:
        """The network's policy outputs (logits with illegal actions masked) and values on
        a minibatch's steps, as the learner recomputes them: a recurrent network is
        replayed over each sequence from its starting memory."""
        observation = jax.vmap(jax.vmap(lambda o: normalize(observation_stats, o)))(
            minibatch.observation
        )
        if is_recurrent(net):

            def replay(carry, inputs):
                # A lambda: scan hashes its function, and a module holding tracers cannot be.
                return jax.lax.scan(lambda c, x: net(c, x), carry, inputs)[1]

            inputs = RecurrentInput(
                observation=observation,
                previous_action=minibatch.previous_action,
                previous_reward=minibatch.previous_reward,
                episode_start=minibatch.episode_start,
            )
            logits, value = jax.vmap(replay)(minibatch.start_carry, inputs)
        else:
            logits, value = _over_samples(net, observation)
        return self.distribution.restrict(logits, minibatch.legal_action_mask), value

    def update(self, state: TrainState, minibatch: Minibatch) -> tuple[TrainState, LossParts]:
        """One gradient step on one minibatch; the loss parts are means over the
        minibatch of every shard (the entropy 0 when `entropy_coef` is 0: the loss leaves
        it out, and `learn` measures it once)."""
        config = self.config
        advantage = minibatch.advantage
        count = self.sum_over_shards(jnp.float32(advantage.size))
        if config.normalize_advantages == "minibatch":
            advantage = self._standardize(advantage)
        weight = jnp.full(advantage.shape, 1.0 / count)
        stats = self._stats(state)

        def objective(params):
            net = eqx.combine(params, state.net_static)
            logits, value = self.policy_and_value(net, minibatch, stats)
            log_prob, entropy = self.distribution.log_prob_and_entropy(logits, minibatch.action)
            if config.entropy_coef == 0:
                # Nothing reads the entropy here, and it can cost more than the rest of the
                # loss (a tanh-squashed Normal integrates it numerically); with this constant
                # in its place the compiler drops it, and `learn` measures it once.
                entropy = jnp.zeros_like(log_prob)
            per_sample = (
                log_prob,
                minibatch.log_prob,
                advantage,
                value,
                minibatch.value,
                minibatch.target,
                entropy,
                weight,
            )
            parts = loss(
                *(x.reshape(-1) for x in per_sample),
                clip_eps=config.clip_eps,
                value_clip_eps=config.value_clip_eps,
                value_coef=config.value_coef,
                entropy_coef=config.entropy_coef,
                kl_coef=config.kl_coef,
            )
            return parts.loss, parts

        grads, parts = jax.grad(objective, has_aux=True)(state.params)
        grads, parts = self.sum_over_shards((grads, parts))
        with third_party_numerics():
            updates, opt_state = self.optimiser.update(grads, state.opt_state, state.params)
        params = eqx.apply_updates(state.params, updates)
        return eqx.tree_at(lambda s: (s.params, s.opt_state), state, (params, opt_state)), parts

    def learn(self, state: TrainState, rollout: Rollout, key: PRNGKey) -> TrainState:
        """`num_epochs` passes of `num_minibatches` updates over `rollout`; then the
        observation statistics take in the rollout's observations. Sets `state.metrics`."""
        config = self.config
        advantage, target = self.advantages(rollout)
        if config.normalize_advantages == "batch":
            advantage = self._standardize(advantage)

        def epoch(state, index):
            batches = self.minibatches(
                state, rollout, advantage, target, jax.random.fold_in(key, index)
            )
            return jax.lax.scan(self.update, state, batches)

        if config.entropy_coef == 0:
            first = self.minibatches(state, rollout, advantage, target, jax.random.fold_in(key, 0))
            entropy = self._entropy(state, jax.tree.map(lambda x: x[0], first))
        state, parts = jax.lax.scan(epoch, state, jnp.arange(config.num_epochs))
        parts = jax.tree.map(jnp.mean, parts)
        if config.entropy_coef == 0:
            parts = eqx.tree_at(lambda p: p.entropy, parts, entropy)
        trajectory = rollout.trajectory
        state = self._update_stats(state, trajectory.observation)
        episodes = self.sum_over_shards(rollout.episodes)
        finished = jnp.maximum(episodes, 1).astype(jnp.float32)
        learning_rate = _learning_rate_schedule(config, config.learning_rate)
        if callable(learning_rate):
            learning_rate = learning_rate(state.iteration * config.updates_per_iteration)
        metrics = Metrics(
            loss=parts.loss,
            policy_loss=parts.policy_loss,
            value_loss=parts.value_loss,
            entropy=parts.entropy,
            approx_kl=parts.approx_kl,
            clip_fraction=parts.clip_fraction,
            explained_variance=self._explained_variance(target, trajectory.value),
            learning_rate=jnp.asarray(learning_rate, jnp.float32),
            episodes=episodes,
            episode_return=self.sum_over_shards(rollout.return_sum) / finished,
            episode_length=self.sum_over_shards(rollout.length_sum).astype(jnp.float32) / finished,
        )
        return eqx.tree_at(lambda s: s.metrics, state, metrics)

    def _entropy(self, state: TrainState, minibatch: Minibatch) -> Float[Array, ""]:
        """The policy's mean entropy on `minibatch`, over every shard's samples."""
        net = eqx.combine(state.params, state.net_static)
        logits, _ = self.policy_and_value(net, minibatch, self._stats(state))
        _, entropy = self.distribution.log_prob_and_entropy(logits, minibatch.action)
        count = self.sum_over_shards(jnp.float32(entropy.size))
        return self.sum_over_shards(jnp.sum(entropy)) / count

    def _explained_variance(self, target, value) -> Float[Array, ""]:
        target_variance = self._moments(target)[1]
        residual_variance = self._moments(target - value)[1]
        return jnp.where(target_variance > 0, 1.0 - residual_variance / target_variance, 0.0)

    def _update_stats(self, state: TrainState, observation) -> TrainState:
        if not self.config.normalize_observations:
            return state
        x = observation.astype(jnp.float32).reshape(-1, *self.env.observation_shape)
        count = self.sum_over_shards(jnp.float32(x.shape[0]))
        total = self.sum_over_shards(jnp.sum(x, axis=0))

        def centred_squares(mean):
            return self.sum_over_shards(jnp.sum(jnp.square(x - mean[None]), axis=0))

        stats = merge_stats(state.observation_stats, count, total, centred_squares)
        return eqx.tree_at(lambda s: s.observation_stats, state, stats)

    def step(self, state: TrainState, key: PRNGKey) -> TrainState:
        """One training iteration: `rollout`, then `learn` on what it collected. Pure: the
        same state and key give the same result."""
        rollout_key, learn_key = jax.random.split(key)
        state, collected = self.rollout(state, rollout_key)
        state = self.learn(state, collected, learn_key)
        return eqx.tree_at(lambda s: s.iteration, state, state.iteration + 1)


def _linear_weights(net: Any) -> list[Any]:
    """The weights of the `eqx.nn.Linear` layers in `net` (arrays, or what `eqx.tree_at`
    puts in their place when it calls this to find them)."""
    is_linear = lambda x: isinstance(x, eqx.nn.Linear)  # noqa: E731
    return [layer.weight for layer in jax.tree.leaves(net, is_leaf=is_linear) if is_linear(layer)]


def _transpose_linear_weights(net: Any, *, barrier: bool) -> Any:
    """`net` with the weight of every `eqx.nn.Linear` in it transposed (`barrier`: behind
    an optimisation barrier, so that XLA keeps the transposed copy).

    The rollout makes the transposed copies once, outside its loop, and transposes them
    back inside it. An `eqx.nn.Linear` stores its weight `[out, in]`, so a batch of inputs
    `[batch, in]` meets it as the right operand of a product that contracts its second
    axis, which XLA:CPU transposes again at every step; read through the copy, the same
    product contracts the copy's first axis, the layout the matrix kernels take as it is.
    The bits are the same either way.
    """
    weights = _linear_weights(net)
    if not weights:
        return net
    transposed = [jnp.transpose(weight) for weight in weights]
    if barrier:
        transposed = jax.lax.optimization_barrier(transposed)
    return eqx.tree_at(_linear_weights, net, transposed)


def _over_samples(fn, x: Shaped[Array, "envs steps ..."]) -> PyTree[Array]:
    """`fn` on every `[envs, steps]` sample of `x`, as one vmap over the flattened samples.

    A vmap over the two axes makes XLA:CPU compute each layer's product feature-major and
    transpose it back, forward and backward; over one axis the product is a plain matrix
    product of the batch. On CartPole's 4 x 32 minibatches a 64x64 network's forward and
    backward passes take two thirds of the time they take over two axes.
    """
    envs, steps = x.shape[:2]
    out = jax.vmap(fn)(x.reshape(envs * steps, *x.shape[2:]))
    return jax.tree.map(lambda y: y.reshape(envs, steps, *y.shape[1:]), out)


def _learning_rate_schedule(config: Config, learning_rate: float):
    """The learning rate of each optimiser update: constant, or falling linearly by
    iteration to 0 at `anneal_iterations`."""
    if config.anneal_iterations is None:
        return learning_rate

    def schedule(count):
        iteration = (count // config.updates_per_iteration).astype(jnp.float32)
        remaining = jnp.maximum(0.0, 1.0 - iteration / config.anneal_iterations)
        return learning_rate * remaining

    return schedule


def _default_optimiser(config: Config) -> optax.GradientTransformation:
    """Adam after global-norm clipping; with a critic learning rate, one Adam for the
    actor's parameters and one for the critic's (clipped together)."""

    def adam(learning_rate):
        return optax.adam(_learning_rate_schedule(config, learning_rate), eps=config.adam_eps)

    clip = (
        optax.clip_by_global_norm(config.max_grad_norm)
        if config.max_grad_norm > 0
        else optax.identity()
    )
    if config.critic_learning_rate is None:
        return optax.chain(clip, adam(config.learning_rate))
    by_part = optax.multi_transform(
        {"actor": adam(config.learning_rate), "critic": adam(config.critic_learning_rate)},
        _actor_critic_labels,
    )
    return optax.chain(clip, by_part)


def _is_critic(path) -> bool:
    return any(
        isinstance(key, jax.tree_util.GetAttrKey) and key.name.startswith("value") for key in path
    )


def _actor_critic_labels(params: PyTree) -> PyTree[str]:
    """`"critic"` for the parameters under a field named `value...`, `"actor"` for the
    rest."""
    return jax.tree_util.tree_map_with_path(
        lambda path, _: "critic" if _is_critic(path) else "actor", params
    )


def _check_separate_critic(net: Any) -> None:
    """Raise `ValueError` unless `net` has critic and actor parameters and no torso that
    both share (separate learning rates need separate torsos)."""
    params = eqx.filter(net, eqx.is_array)
    labels = jax.tree.leaves(_actor_critic_labels(params))
    shared = any(
        isinstance(part, ActorCritic) and not part.value_torso
        for part in jax.tree.leaves(net, is_leaf=lambda x: isinstance(x, ActorCritic))
    )
    if shared or "critic" not in labels or "actor" not in labels:
        raise ValueError(
            "critic_learning_rate needs a network with separate actor and critic parts (the "
            "critic's under fields named value..., as in azx.nets.ActorCritic with "
            "shared_torso=False); this one has "
            + ("a shared torso" if shared else f"only {set(labels) or 'no'} parameters")
        )


def _divisors(n: int) -> str:
    return ", ".join(str(d) for d in range(1, n + 1) if n % d == 0)


__all__ = ["PPO", "Metrics", "Minibatch", "Rollout", "TrainState", "Trajectory"]
