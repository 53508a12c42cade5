"""Stochastic MuZero's networks (Antonoglou et al., 2022), each called on ONE example
(batch with `jax.vmap`), and `StochasticMuZeroNet`, which holds them.

A move is split in two, as the game's own chance splits it: the afterstate dynamics maps
an embedding and an action to an afterstate (the state after the move, before chance);
the afterstate prediction gives the afterstate's value `Q` and `sigma`, the distribution
of the chance code that follows; the dynamics maps an afterstate and a code (a one-hot
vector over `num_codes`) to the reward and the next embedding. The chance encoder maps an
observation, with the one before it, to the code that led there, which trains `sigma` and
feeds the dynamics in the unroll."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, Shaped

from .._types import PRNGKey
from .._validate import check_positive_int
from ..nets._common import as_float, check_shape, flat_size
from ._nets import (
    ConsistencyHead,
    MLPPrediction,
    MLPRepresentation,
    check_sizes,
    head_bins,
    head_scalar,
    mlp_trunk,
    normalise_embedding,
)


class MLPAfterstateDynamics(eqx.Module):
    """Afterstate dynamics: `(embedding, action) -> afterstate embedding`, the action given
    as a one-hot vector beside the embedding; the afterstate is normalised to `[0, 1]` as
    every embedding is ([`azx.muzero.normalise_embedding`][])."""

    trunk: eqx.nn.MLP
    head: eqx.nn.Linear
    num_actions: int = eqx.field(static=True)

    def __init__(
        self,
        embedding_size: int,
        num_actions: int,
        *,
        width: int = 128,
        depth: int = 2,
        key: PRNGKey,
    ):
        check_sizes(
            embedding_size=embedding_size, num_actions=num_actions, width=width, depth=depth
        )
        trunk_key, head_key = jax.random.split(key)
        self.trunk = mlp_trunk(embedding_size + num_actions, width, depth, trunk_key)
        self.head = eqx.nn.Linear(width, embedding_size, key=head_key)
        self.num_actions = num_actions

    def __call__(
        self, embedding: Float[Array, " embedding"], action: Int[Array, ""]
    ) -> Float[Array, " embedding"]:
        one_hot = jax.nn.one_hot(action, self.num_actions, dtype=embedding.dtype)
        hidden = self.trunk(jnp.concatenate([embedding, one_hot]))
        return normalise_embedding(self.head(hidden))


class MLPChanceDynamics(eqx.Module):
    """Dynamics from an afterstate: `(afterstate, code) -> (reward head, next embedding)`,
    the code a vector over the `num_codes` chance codes (one-hot in the search; in the
    loss, the encoder's straight-through one-hot, through which its gradient flows)."""

    trunk: eqx.nn.MLP
    embedding_head: eqx.nn.Linear
    reward_head: eqx.nn.Linear

    def __init__(
        self,
        embedding_size: int,
        num_codes: int,
        reward_bins: int,
        *,
        width: int = 128,
        depth: int = 2,
        key: PRNGKey,
    ):
        check_sizes(
            embedding_size=embedding_size,
            num_codes=num_codes,
            reward_bins=reward_bins,
            width=width,
            depth=depth,
        )
        trunk_key, embedding_key, reward_key = jax.random.split(key, 3)
        self.trunk = mlp_trunk(embedding_size + num_codes, width, depth, trunk_key)
        self.embedding_head = eqx.nn.Linear(width, embedding_size, key=embedding_key)
        self.reward_head = eqx.nn.Linear(width, reward_bins, key=reward_key)

    def __call__(
        self, afterstate: Float[Array, " embedding"], code: Float[Array, " num_codes"]
    ) -> tuple[Float[Array, " reward_bins"], Float[Array, " embedding"]]:
        hidden = self.trunk(jnp.concatenate([afterstate, code.astype(afterstate.dtype)]))
        return self.reward_head(hidden), normalise_embedding(self.embedding_head(hidden))


class MLPChanceEncoder(eqx.Module):
    """Chance encoder: the logits of the chance code that led from one observation to the
    next (both flattened, side by side). The paper's encoder reads the observations up to
    the one chance led to; the one before it is what the code is relative to (the same
    roll of a die leads to different positions from different ones)."""

    mlp: eqx.nn.MLP
    observation_shape: tuple[int, ...] = eqx.field(static=True)

    def __init__(
        self,
        observation_shape: tuple[int, ...],
        num_codes: int,
        *,
        width: int = 128,
        depth: int = 2,
        key: PRNGKey,
    ):
        self.observation_shape = check_shape(observation_shape)
        check_sizes(num_codes=num_codes, width=width, depth=depth)
        self.mlp = eqx.nn.MLP(
            2 * flat_size(self.observation_shape),
            num_codes,
            width,
            depth,
            activation=jax.nn.relu,
            key=key,
        )

    def __call__(
        self, previous: Shaped[Array, "..."], observation: Shaped[Array, "..."]
    ) -> Float[Array, " num_codes"]:
        for x in (previous, observation):
            if x.shape != self.observation_shape:
                raise ValueError(
                    f"MLPChanceEncoder expects observations of shape "
                    f"{self.observation_shape}, got {x.shape}; batch with jax.vmap"
                )
        pair = jnp.concatenate([jnp.ravel(as_float(previous)), jnp.ravel(as_float(observation))])
        return self.mlp(pair)


def straight_through_code(logits: Float[Array, " num_codes"]) -> Float[Array, " num_codes"]:
    """The one-hot code of the encoder's most likely code, with the gradient of its softmax
    (the straight-through estimator, as the paper trains the encoder): the dynamics sees an
    exact one-hot vector, as in the search, and the encoder learns from what the dynamics
    makes of it."""
    probabilities = jax.nn.softmax(logits)
    one_hot = jax.nn.one_hot(jnp.argmax(logits), logits.shape[-1], dtype=probabilities.dtype)
    return probabilities + jax.lax.stop_gradient(one_hot - probabilities)


class StochasticMuZeroNet(eqx.Module):
    """Stochastic MuZero's six networks, and how their value, `Q` and reward heads read as
    scalars (`support_size` as in [`azx.muzero.MuZeroNet`][]).

    The afterstates are embeddings of the same shape as the states' (one pytree serves
    both kinds of node in a search tree).
    """

    representation: eqx.Module
    """`observation -> embedding`, e.g. [`azx.muzero.MLPRepresentation`][]."""
    prediction: eqx.Module
    """`embedding -> (policy logits, value head)`, e.g. [`azx.muzero.MLPPrediction`][]."""
    afterstate_dynamics: eqx.Module
    """`(embedding, action) -> afterstate`, e.g. [`azx.muzero.MLPAfterstateDynamics`][]."""
    afterstate_prediction: eqx.Module
    """`afterstate -> (chance code logits sigma, Q head)`, e.g. an
    [`azx.muzero.MLPPrediction`][] with `num_codes` outputs for its policy."""
    dynamics: eqx.Module
    """`(afterstate, code vector) -> (reward head, next embedding)`, e.g.
    [`azx.muzero.MLPChanceDynamics`][]."""
    encoder: eqx.Module
    """`(previous observation, observation) -> chance code logits`, e.g.
    [`azx.muzero.MLPChanceEncoder`][]."""
    num_actions: int = eqx.field(static=True)
    num_codes: int = eqx.field(static=True)
    support_size: int | None = eqx.field(static=True)
    consistency: ConsistencyHead | None = None
    """The head of the self-supervised consistency loss ([`azx.muzero.ConsistencyHead`][])
    on the embeddings the dynamics reaches through the encoder's codes, or `None` (no
    such loss), as [`azx.muzero.MuZeroNet`][]'s."""

    def __check_init__(self):
        check_positive_int("num_actions", self.num_actions)
        check_positive_int("num_codes", self.num_codes)
        if self.support_size is not None:
            check_positive_int("support_size", self.support_size)

    def head_to_scalar(self, head: Float[Array, " bins"]) -> Float[Array, ""]:
        """A value, `Q` or reward head's output as the scalar it predicts."""
        return head_scalar(self.support_size, head)

    def represent(self, observation: Shaped[Array, "..."]) -> Float[Array, "*embedding"]:
        """The embedding of one observation."""
        return self.representation(observation)

    def predict(
        self, embedding: Float[Array, "*embedding"]
    ) -> tuple[Float[Array, " num_actions"], Float[Array, ""]]:
        """Policy logits and value of an embedding."""
        logits, value_head = self.prediction(embedding)
        return logits, self.head_to_scalar(value_head)

    def afterstate(
        self, embedding: Float[Array, "*embedding"], action: Int[Array, ""]
    ) -> Float[Array, "*embedding"]:
        """The afterstate of `action` at `embedding`."""
        return self.afterstate_dynamics(embedding, action)

    def predict_afterstate(
        self, afterstate: Float[Array, "*embedding"]
    ) -> tuple[Float[Array, " num_codes"], Float[Array, ""]]:
        """The chance code logits (`sigma`) and the value `Q` of an afterstate, for the
        player who made the move."""
        chance_logits, q_head = self.afterstate_prediction(afterstate)
        return chance_logits, self.head_to_scalar(q_head)

    def step(
        self, afterstate: Float[Array, "*embedding"], code: Int[Array, ""]
    ) -> tuple[Float[Array, ""], Float[Array, "*embedding"]]:
        """The predicted reward and next embedding when chance picks `code` (an index)."""
        one_hot = jax.nn.one_hot(code, self.num_codes, dtype=jnp.float32)
        reward_head, embedding = self.dynamics(afterstate, one_hot)
        return self.head_to_scalar(reward_head), embedding

    def encode(
        self, previous: Shaped[Array, "..."], observation: Shaped[Array, "..."]
    ) -> Float[Array, " num_codes"]:
        """The logits of the chance code that led from `previous` to `observation` (the
        encoder's)."""
        return self.encoder(previous, observation)

    def __call__(
        self, observation: Shaped[Array, "..."]
    ) -> tuple[Float[Array, " num_actions"], Float[Array, ""]]:
        """Policy logits and value of one observation: the call of an AlphaZero network,
        so that the net plays wherever one does (e.g. [`azx.arena.NetworkAgent`][])."""
        return self.predict(self.represent(observation))


def stochastic_mlp_net(
    observation_shape: tuple[int, ...],
    num_actions: int,
    *,
    num_codes: int = 32,
    embedding_size: int = 64,
    width: int = 128,
    depth: int = 2,
    support_size: int | None = None,
    key: PRNGKey,
) -> StochasticMuZeroNet:
    """A [`azx.muzero.StochasticMuZeroNet`][] of fully connected networks of `width` units
    and `depth` hidden layers each, with `num_codes` chance codes (at least the number of
    chance outcomes the game has, for the codes to tell them apart)."""
    bins = head_bins(support_size)
    keys = jax.random.split(key, 6)
    sizes = dict(width=width, depth=depth)
    return StochasticMuZeroNet(
        representation=MLPRepresentation(observation_shape, embedding_size, **sizes, key=keys[0]),
        prediction=MLPPrediction(embedding_size, num_actions, bins, **sizes, key=keys[1]),
        afterstate_dynamics=MLPAfterstateDynamics(
            embedding_size, num_actions, **sizes, key=keys[2]
        ),
        afterstate_prediction=MLPPrediction(embedding_size, num_codes, bins, **sizes, key=keys[3]),
        dynamics=MLPChanceDynamics(embedding_size, num_codes, bins, **sizes, key=keys[4]),
        encoder=MLPChanceEncoder(observation_shape, num_codes, **sizes, key=keys[5]),
        num_actions=num_actions,
        num_codes=num_codes,
        support_size=support_size,
    )
