"""Stochastic MuZero's loss and trainer: MuZero's self-play, replay of segments and
learner, with the model unrolled through afterstates and the chance codes the encoder
gives the observations the game reached."""

from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Bool, Float, Int, PyTree, Shaped

from .. import _selfplay
from .._trainer import default_optimiser
from .._types import EnvState, PRNGKey
from .._validate import check_non_negative_number
from ..envs import AbstractEnv
from ..search import AbstractSearch
from ._config import Config
from ._loss import consistency_targets, consistency_term, head_loss, scale_gradient
from ._replay import ReplayState, SegmentReplay, Targets
from ._stochastic import StochasticLearnedModel
from ._stochastic_nets import StochasticMuZeroNet, straight_through_code
from ._trainer import (
    AbstractMuZeroTrainer,
    descend,
    initial_state,
    learn_in_updates,
    play_and_store,
    sample_segments,
    with_consistency_head,
)


class StochasticLossParts(eqx.Module):
    """The loss and its parts, each summed over the batch's real segments (divide by
    `count` for means)."""

    loss: Float[Array, ""]
    policy_loss: Float[Array, ""]
    value_loss: Float[Array, ""]
    reward_loss: Float[Array, ""]
    q_loss: Float[Array, ""]
    """The afterstates' `Q` against the value targets (weighted as the value loss)."""
    chance_loss: Float[Array, ""]
    """`sigma`'s cross-entropy against the encoder's code of the observation reached."""
    commitment_loss: Float[Array, ""]
    """The encoder's softmax pulled towards its own one-hot code (VQ-VAE's commitment)."""
    consistency_loss: Float[Array, ""]
    """The weighted consistency loss (0 with `consistency_loss_weight=0`)."""
    policy_entropy: Float[Array, ""]
    count: Float[Array, ""]


def stochastic_segment_loss(
    net: StochasticMuZeroNet,
    observation: Shaped[Array, "..."],
    targets: Targets,
    *,
    value_loss_weight: float = 0.25,
    reward_loss_weight: float = 1.0,
    chance_loss_weight: float = 1.0,
    commitment_loss_weight: float = 0.25,
    consistency_loss_weight: float = 0.0,
) -> tuple[Float[Array, ""], ...]:
    """Stochastic MuZero's losses of ONE segment, as the paper trains them: `(policy,
    value, reward, q, chance, commitment, consistency, entropy)`, each summed over unroll
    steps, those after the first weighted `1/K` (as [`azx.muzero.segment_loss`][]).

    At each unroll step `k < K` the afterstate of the `k`-th action gives `Q`, trained
    towards step `k`'s value target, and `sigma`, trained by cross-entropy towards the
    code the encoder gives the move from step `k`'s observation to step `k + 1`'s (its
    one-hot, gradient stopped); the dynamics then steps from the afterstate with that code,
    straight through ([`azx.muzero.straight_through_code`][]), so that the encoder learns
    from what the dynamics makes of its codes, and the commitment loss `|c - softmax|^2`
    keeps the encoder's softmax near its own one-hot code. The chance and commitment terms
    count where step `k + 1`'s observation lies in the episode (`targets.mask[k + 1]`).

    With `consistency_loss_weight > 0`, the embedding the dynamics reaches from the
    afterstate with the code is pulled towards the representation of the observation the
    game reached, as in [`azx.muzero.segment_loss`][] (`net.consistency` the head). The
    reward of a move whose chance follows it (2048's merge) is known at the afterstate,
    so without this term nothing but later values and policies asks the code to tell the
    outcomes apart; with it, the next embedding must.
    """
    unroll_steps = targets.actions.shape[0]
    support = net.support_size
    embedding = net.represent(observation)
    # The code of step k + 1: what chance did between the observations of steps k and k + 1.
    previous = jnp.concatenate([observation[None], targets.next_observation[:-1]])
    code_logits = jax.vmap(net.encode)(previous, targets.next_observation)
    if consistency_loss_weight:
        real_projection = consistency_targets(
            net, consistency_loss_weight, targets.next_observation
        )
    zero = jnp.float32(0.0)
    policy_loss = value_loss = reward_loss = q_loss = chance_loss = commitment_loss = zero
    consistency_loss = zero
    for k in range(unroll_steps + 1):
        weight = 1.0 if k == 0 else 1.0 / unroll_steps
        logits, value_head = net.prediction(embedding)
        if k == 0:
            entropy = -jnp.sum(jax.nn.softmax(logits) * jax.nn.log_softmax(logits))
        mask = targets.mask[k].astype(jnp.float32) * weight
        value_mask = targets.value_mask[k].astype(jnp.float32) * weight
        policy_loss += mask * -jnp.sum(targets.policy_target[k] * jax.nn.log_softmax(logits))
        value_loss += value_mask * head_loss(support, value_head, targets.value_target[k])
        if k == unroll_steps:
            break
        afterstate = net.afterstate(embedding, targets.actions[k])
        chance_logits, q_head = net.afterstate_prediction(afterstate)
        # Q(s_k, a_k) estimates the same return as step k's value target.
        q_loss += value_mask * head_loss(support, q_head, targets.value_target[k])
        code = straight_through_code(code_logits[k])
        one_hot = jax.lax.stop_gradient(code)
        step_weight = targets.mask[k + 1].astype(jnp.float32) / unroll_steps
        chance_loss += step_weight * -jnp.sum(one_hot * jax.nn.log_softmax(chance_logits))
        committed = jnp.sum(jnp.square(one_hot - jax.nn.softmax(code_logits[k])))
        commitment_loss += step_weight * committed
        reward_head, embedding = net.dynamics(afterstate, code)
        embedding = scale_gradient(embedding, 0.5)
        if consistency_loss_weight:
            consistency_loss += step_weight * consistency_term(
                net.consistency, embedding, real_projection[k]
            )
        reward_weight = targets.reward_mask[k].astype(jnp.float32) / unroll_steps
        reward_loss += reward_weight * head_loss(support, reward_head, targets.reward_target[k])
    return (
        policy_loss,
        value_loss_weight * value_loss,
        reward_loss_weight * reward_loss,
        value_loss_weight * q_loss,
        chance_loss_weight * chance_loss,
        commitment_loss_weight * commitment_loss,
        consistency_loss_weight * consistency_loss,
        jax.lax.stop_gradient(entropy),
    )


def stochastic_loss(
    net: StochasticMuZeroNet,
    observation: Shaped[Array, "batch ..."],
    targets: Targets,
    valid: Bool[Array, " batch"],
    **weights: float,
) -> StochasticLossParts:
    """[`azx.muzero.stochastic_segment_loss`][] summed over a batch's real segments
    (`valid`); `weights` as that function takes them."""
    parts = jax.vmap(lambda o, t: stochastic_segment_loss(net, o, t, **weights))(
        observation, targets
    )
    weight = valid.astype(jnp.float32)
    sums = [jnp.sum(weight * x) for x in parts]
    total = sum(sums[:6])
    if weights.get("consistency_loss_weight"):
        total = total + sums[6]
    return StochasticLossParts(
        loss=total,
        policy_loss=sums[0],
        value_loss=sums[1],
        reward_loss=sums[2],
        q_loss=sums[3],
        chance_loss=sums[4],
        commitment_loss=sums[5],
        consistency_loss=sums[6],
        policy_entropy=sums[7],
        count=jnp.sum(weight),
    )


class StochasticMetrics(_selfplay.AbstractSelfPlayMetrics):
    """What the last `step` measured (as [`azx.muzero.Metrics`][], with the stochastic
    model's own loss parts). Means are over all games / segments (all shards)."""

    loss: Float[Array, ""]
    policy_loss: Float[Array, ""]
    value_loss: Float[Array, ""]
    reward_loss: Float[Array, ""]
    q_loss: Float[Array, ""]
    chance_loss: Float[Array, ""]
    commitment_loss: Float[Array, ""]
    consistency_loss: Float[Array, ""]
    policy_entropy: Float[Array, ""]
    updates_applied: Int[Array, ""]
    episodes: Int[Array, ""]
    episode_return: Float[Array, ""]
    episode_length: Float[Array, ""]
    root_value: Float[Array, ""]
    replay_segments: Int[Array, ""]


class StochasticTrainState(_selfplay.AbstractSelfPlayState):
    """Everything that changes during Stochastic MuZero training (as
    [`azx.muzero.TrainState`][]); every leaf is an array, rows of the `row_fields` are the
    games."""

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
    metrics: StochasticMetrics
    key: PRNGKey
    net_static: Any = eqx.field(static=True)


class StochasticMuZero(AbstractMuZeroTrainer[StochasticTrainState]):
    """Stochastic MuZero training (Antonoglou et al., 2022): self-play with a search through
    chance nodes over the learned model's codes
    ([`azx.muzero.stochastic_search_states`][]), MuZero's replay of trajectory segments,
    and a learner on the model unrolled through afterstates
    ([`azx.muzero.stochastic_segment_loss`][]).

    The contract of [`azx.muzero.MuZero`][]: `init(net, key=...)` for a
    [`azx.muzero.StochasticMuZeroNet`][], `step(state, key) -> state`, sharded by
    [`azx.parallel`][], checkpointed by [`azx.checkpoint`][]. The environment need not
    expose its chance: the model learns it from the observations. The search is a native
    one or [`azx.search.MctxPUCT`][] (mctx's stochastic policy), without tree reuse.
    `config` is MuZero's; reanalyse and symmetry augmentation are MuZero's only (refused
    here). With `config.consistency_loss_weight > 0` the network gets a consistency head
    where it has none, as [`azx.muzero.MuZero.init`][] gives one.
    """

    env: AbstractEnv
    search: AbstractSearch
    config: Config
    replay: SegmentReplay
    chance_loss_weight: float = eqx.field(static=True)
    commitment_loss_weight: float = eqx.field(static=True)
    axis_name: str | None = eqx.field(static=True)

    def __init__(
        self,
        env: AbstractEnv,
        search: AbstractSearch,
        config: Config = Config(),
        *,
        chance_loss_weight: float = 1.0,
        commitment_loss_weight: float = 0.25,
        axis_name: str | None = None,
    ):
        """**Arguments:** `env`, `search`, `config` and `axis_name` as
        [`azx.muzero.MuZero`][]'s; `chance_loss_weight` and `commitment_loss_weight`, the
        weights of `sigma`'s cross-entropy and of the encoder's commitment loss."""
        if env.num_players not in (1, 2):
            raise ValueError(
                f"Stochastic MuZero trains 1-player environments and 2-player zero-sum games; "
                f"the environment has num_players={env.num_players}"
            )
        if not isinstance(search, AbstractSearch):
            raise ValueError(f"search must be an azx.search.AbstractSearch, got {search!r}")
        if search.reuse_tree:
            raise ValueError(
                "Stochastic MuZero's search starts afresh at every move: pass reuse_tree=False"
            )
        for name in ("reanalyse_steps", "augment_symmetries"):
            if getattr(config, name):
                raise ValueError(
                    f"Stochastic MuZero does not support {name} (MuZero's only), got "
                    f"{getattr(config, name)!r}"
                )
        check_non_negative_number("chance_loss_weight", chance_loss_weight)
        check_non_negative_number("commitment_loss_weight", commitment_loss_weight)
        self.env = env
        self.search = search
        self.config = config
        self.replay = SegmentReplay(
            config.buffer_capacity // config.num_envs,
            config.unroll_steps,
            config.td_steps,
            absorbing_end=config.absorbing_end,
        )
        self.chance_loss_weight = chance_loss_weight
        self.commitment_loss_weight = commitment_loss_weight
        self.axis_name = axis_name

    @property
    def optimiser(self) -> optax.GradientTransformation:
        """As [`azx.muzero.MuZero`][]'s."""
        return default_optimiser(self.config)

    @property
    def num_envs(self) -> int:
        return self.config.num_envs

    @property
    def env_steps_per_iteration(self) -> int:
        return self.config.num_envs * self.config.collect_steps

    def with_axis_name(self, axis_name: str | None) -> "StochasticMuZero":
        return StochasticMuZero(
            self.env,
            self.search,
            self.config,
            chance_loss_weight=self.chance_loss_weight,
            commitment_loss_weight=self.commitment_loss_weight,
            axis_name=axis_name,
        )

    def model(self, net: StochasticMuZeroNet) -> StochasticLearnedModel:
        """The model the search plans with."""
        return StochasticLearnedModel(
            net=net, gamma=self.search.gamma, two_player=self.env.num_players == 2
        )

    def init(self, net: StochasticMuZeroNet, *, key: PRNGKey) -> StochasticTrainState:
        """The state before training: `net` as given, fresh episodes, an empty replay."""
        if not isinstance(net, StochasticMuZeroNet):
            raise ValueError(
                f"net must be an azx.muzero.StochasticMuZeroNet, got {type(net).__name__}"
            )
        if net.num_actions != self.env.num_actions:
            raise ValueError(
                f"net has {net.num_actions} actions, the environment {self.env.num_actions}"
            )
        net = with_consistency_head(self, net, key)
        return initial_state(self, StochasticTrainState, StochasticMetrics, net, key)

    def self_play(self, state: StochasticTrainState, key: PRNGKey) -> StochasticTrainState:
        """`collect_steps` moves with search in every game, stored in the replay."""
        return play_and_store(self, state, key)

    def _learn(self, state: StochasticTrainState, key: PRNGKey, first_row):
        targets, observation, valid = sample_segments(self, state, key, first_row)
        weights = dict(
            value_loss_weight=self.config.value_loss_weight,
            reward_loss_weight=self.config.reward_loss_weight,
            chance_loss_weight=self.chance_loss_weight,
            commitment_loss_weight=self.commitment_loss_weight,
            consistency_loss_weight=self.config.consistency_loss_weight,
        )
        return descend(
            self, state, lambda net: stochastic_loss(net, observation, targets, valid, **weights)
        )

    def learn(self, state: StochasticTrainState, key: PRNGKey) -> StochasticTrainState:
        """`train_steps` updates on segments from the replay. Sets the loss metrics."""
        return learn_in_updates(self, self._learn, state, key)

    def step(self, state: StochasticTrainState, key: PRNGKey) -> StochasticTrainState:
        """One training iteration: `self_play`, then `learn`. Pure."""
        play_key, learn_key = jax.random.split(key)
        state = self.self_play(state, play_key)
        state = self.learn(state, learn_key)
        return eqx.tree_at(lambda s: s.iteration, state, state.iteration + 1)
