"""MuZero's three networks (representation, dynamics, prediction), each called on ONE
example (batch with `jax.vmap`), and `MuZeroNet`, which holds them and reads their
value and reward heads as scalars."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, Shaped

from .._types import PRNGKey
from .._validate import check_positive_int
from ..nets._common import as_float, check_shape, flat_size
from ._scaling import expected_value, unscale_value


def normalise_embedding(embedding: Float[Array, "*embedding"]) -> Float[Array, "*embedding"]:
    """`embedding` (any shape: a vector, or a convolutional network's planes) rescaled to
    `[0, 1]` by its own minimum and maximum.

    As in the MuZero paper: the dynamics network is applied to its own output again and
    again during an unroll and inside the search, and this keeps every embedding it sees,
    the root's included, in one fixed range, so the recurrence cannot drift to values the
    networks were never trained on (and the prediction network reads the same range at
    every depth).
    """
    low, high = jnp.min(embedding), jnp.max(embedding)
    return (embedding - low) / jnp.maximum(high - low, 1e-8)


def check_sizes(**sizes: int) -> None:
    """Each size a positive int (named by its keyword in the error)."""
    for name, value in sizes.items():
        check_positive_int(name, value)


def mlp_trunk(in_size: int, width: int, depth: int, key: PRNGKey) -> eqx.nn.MLP:
    """`depth` hidden layers of `width` ReLU units: the trunk of every fully connected
    network of MuZero's and Stochastic MuZero's models, under their linear heads."""
    return eqx.nn.MLP(
        in_size,
        width,
        width,
        depth - 1,
        activation=jax.nn.relu,
        final_activation=jax.nn.relu,
        key=key,
    )


class MLPRepresentation(eqx.Module):
    """Representation network: a fully connected map from one observation (flattened) to
    an embedding, normalised to `[0, 1]` ([`azx.muzero.normalise_embedding`][])."""

    trunk: eqx.nn.MLP
    head: eqx.nn.Linear
    observation_shape: tuple[int, ...] = eqx.field(static=True)

    def __init__(
        self,
        observation_shape: tuple[int, ...],
        embedding_size: int,
        *,
        width: int = 128,
        depth: int = 2,
        key: PRNGKey,
    ):
        """**Arguments:** the observation's shape, the embedding's size, hidden `width` and
        `depth` (layers, at least 1), and the initial weights' `key` (keyword-only)."""
        self.observation_shape = check_shape(observation_shape)
        check_sizes(embedding_size=embedding_size, width=width, depth=depth)
        trunk_key, head_key = jax.random.split(key)
        self.trunk = mlp_trunk(flat_size(self.observation_shape), width, depth, trunk_key)
        self.head = eqx.nn.Linear(width, embedding_size, key=head_key)

    def __call__(self, observation: Shaped[Array, "..."]) -> Float[Array, " embedding"]:
        if observation.shape != self.observation_shape:
            raise ValueError(
                f"MLPRepresentation expects one observation of shape "
                f"{self.observation_shape}, got {observation.shape}; batch with jax.vmap"
            )
        hidden = self.trunk(jnp.ravel(as_float(observation)))
        return normalise_embedding(self.head(hidden))


class MLPDynamics(eqx.Module):
    """Dynamics network: `(embedding, action) -> (reward head, next embedding)`, the action
    given as a one-hot vector beside the embedding; the next embedding is normalised to
    `[0, 1]`. The reward head has `reward_bins` outputs: 1 for a scalar reward, or the
    logits of a categorical support."""

    trunk: eqx.nn.MLP
    embedding_head: eqx.nn.Linear
    reward_head: eqx.nn.Linear
    num_actions: int = eqx.field(static=True)

    def __init__(
        self,
        embedding_size: int,
        num_actions: int,
        reward_bins: int,
        *,
        width: int = 128,
        depth: int = 2,
        key: PRNGKey,
    ):
        check_sizes(
            embedding_size=embedding_size,
            num_actions=num_actions,
            reward_bins=reward_bins,
            width=width,
            depth=depth,
        )
        trunk_key, embedding_key, reward_key = jax.random.split(key, 3)
        self.trunk = mlp_trunk(embedding_size + num_actions, width, depth, trunk_key)
        self.embedding_head = eqx.nn.Linear(width, embedding_size, key=embedding_key)
        self.reward_head = eqx.nn.Linear(width, reward_bins, key=reward_key)
        self.num_actions = num_actions

    def __call__(
        self, embedding: Float[Array, " embedding"], action: Int[Array, ""]
    ) -> tuple[Float[Array, " reward_bins"], Float[Array, " embedding"]]:
        one_hot = jax.nn.one_hot(action, self.num_actions, dtype=embedding.dtype)
        hidden = self.trunk(jnp.concatenate([embedding, one_hot]))
        return self.reward_head(hidden), normalise_embedding(self.embedding_head(hidden))


class MLPPrediction(eqx.Module):
    """Prediction network: `embedding -> (policy logits, value head)`; the value head has
    `value_bins` outputs (1 for a scalar value, or a categorical support's logits)."""

    trunk: eqx.nn.MLP
    policy_head: eqx.nn.Linear
    value_head: eqx.nn.Linear

    def __init__(
        self,
        embedding_size: int,
        num_actions: int,
        value_bins: int,
        *,
        width: int = 128,
        depth: int = 2,
        key: PRNGKey,
    ):
        check_sizes(
            embedding_size=embedding_size,
            num_actions=num_actions,
            value_bins=value_bins,
            width=width,
            depth=depth,
        )
        trunk_key, policy_key, value_key = jax.random.split(key, 3)
        self.trunk = mlp_trunk(embedding_size, width, depth, trunk_key)
        self.policy_head = eqx.nn.Linear(width, num_actions, key=policy_key)
        self.value_head = eqx.nn.Linear(width, value_bins, key=value_key)

    def __call__(
        self, embedding: Float[Array, " embedding"]
    ) -> tuple[Float[Array, " num_actions"], Float[Array, " value_bins"]]:
        hidden = self.trunk(embedding)
        return self.policy_head(hidden), self.value_head(hidden)


class ConsistencyHead(eqx.Module):
    """EfficientZero's self-supervised consistency head: a projection of an embedding (any
    shape, flattened) and a predictor on that projection. The consistency loss
    ([`azx.muzero.segment_loss`][]) pulls the prediction from the projection of a dynamics
    embedding towards the projection of the representation of the observation the game
    actually reached, so that the model agrees with the representation off the lines the
    policy and value targets cover."""

    projection_hidden: eqx.nn.Linear
    projection_norm: eqx.nn.LayerNorm
    projection_out: eqx.nn.Linear
    predictor_hidden: eqx.nn.Linear
    predictor_norm: eqx.nn.LayerNorm
    predictor_out: eqx.nn.Linear
    embedding_shape: tuple[int, ...] = eqx.field(static=True)

    def __init__(
        self,
        embedding_shape: tuple[int, ...],
        *,
        hidden_size: int = 256,
        projection_size: int = 128,
        key: PRNGKey,
    ):
        """**Arguments:** the embedding's shape, the hidden layers' and the projection's
        sizes, and the initial weights' `key` (keyword-only)."""
        self.embedding_shape = check_shape(embedding_shape)
        check_sizes(hidden_size=hidden_size, projection_size=projection_size)
        keys = jax.random.split(key, 4)
        self.projection_hidden = eqx.nn.Linear(
            flat_size(self.embedding_shape), hidden_size, key=keys[0]
        )
        self.projection_norm = eqx.nn.LayerNorm(hidden_size)
        self.projection_out = eqx.nn.Linear(hidden_size, projection_size, key=keys[1])
        self.predictor_hidden = eqx.nn.Linear(projection_size, hidden_size, key=keys[2])
        self.predictor_norm = eqx.nn.LayerNorm(hidden_size)
        self.predictor_out = eqx.nn.Linear(hidden_size, projection_size, key=keys[3])

    def project(self, embedding: Float[Array, "*embedding"]) -> Float[Array, " projection"]:
        """The projection of one embedding (the consistency loss's target side)."""
        if embedding.shape != self.embedding_shape:
            raise ValueError(
                f"ConsistencyHead expects one embedding of shape {self.embedding_shape}, got "
                f"{embedding.shape}; batch with jax.vmap"
            )
        hidden = jax.nn.relu(self.projection_norm(self.projection_hidden(jnp.ravel(embedding))))
        return self.projection_out(hidden)

    def predict(self, projection: Float[Array, " projection"]) -> Float[Array, " projection"]:
        """The predictor on a projection (the consistency loss's online side)."""
        return self.predictor_out(
            jax.nn.relu(self.predictor_norm(self.predictor_hidden(projection)))
        )


class MuZeroNet(eqx.Module):
    """MuZero's three networks, and how their value and reward heads read as scalars.

    With `support_size=None` the heads are scalars (one output each). With an int, they
    are logits over the atoms `-support_size ... support_size` of the scaled quantity
    `h(x)` ([`azx.muzero.scale_value`][]): the scalar is `h^-1` of the distribution's
    mean, and training targets are two-hot projections of `h(target)`
    ([`azx.muzero.two_hot`][]).
    """

    representation: eqx.Module
    """`observation -> embedding`, e.g. [`azx.muzero.MLPRepresentation`][] (a vector) or
    [`azx.muzero.ResNetRepresentation`][] (planes)."""
    dynamics: eqx.Module
    """`(embedding, action) -> (reward head, next embedding)`, e.g.
    [`azx.muzero.MLPDynamics`][]."""
    prediction: eqx.Module
    """`embedding -> (policy logits, value head)`, e.g. [`azx.muzero.MLPPrediction`][]."""
    support_size: int | None = eqx.field(static=True)
    consistency: ConsistencyHead | None = None
    """The head of the self-supervised consistency loss
    ([`azx.muzero.ConsistencyHead`][]), or `None` (no such loss). Not used in play; the
    trainer adds one when its `consistency_loss_weight` asks for the loss."""

    def __check_init__(self):
        if self.support_size is not None:
            check_positive_int("support_size", self.support_size)

    @property
    def bins(self) -> int:
        """Outputs of the value and reward heads."""
        return head_bins(self.support_size)

    def head_to_scalar(self, head: Float[Array, " bins"]) -> Float[Array, ""]:
        """A value or reward head's output as the scalar it predicts."""
        return head_scalar(self.support_size, head)

    def represent(self, observation: Shaped[Array, "..."]) -> Float[Array, "*embedding"]:
        """The embedding of one observation."""
        return self.representation(observation)

    def step(
        self, embedding: Float[Array, "*embedding"], action: Int[Array, ""]
    ) -> tuple[Float[Array, ""], Float[Array, "*embedding"]]:
        """The predicted reward of `action` and the next embedding."""
        reward_head, next_embedding = self.dynamics(embedding, action)
        return self.head_to_scalar(reward_head), next_embedding

    def predict(
        self, embedding: Float[Array, "*embedding"]
    ) -> tuple[Float[Array, " num_actions"], Float[Array, ""]]:
        """Policy logits and value of an embedding."""
        logits, value_head = self.prediction(embedding)
        return logits, self.head_to_scalar(value_head)

    def __call__(
        self, observation: Shaped[Array, "..."]
    ) -> tuple[Float[Array, " num_actions"], Float[Array, ""]]:
        """Policy logits and value of one observation (the prediction at its embedding):
        the call of an AlphaZero network, so that a MuZeroNet plays wherever one does
        (e.g. [`azx.arena.NetworkAgent`][])."""
        return self.predict(self.represent(observation))


def mlp_net(
    observation_shape: tuple[int, ...],
    num_actions: int,
    *,
    embedding_size: int = 64,
    width: int = 128,
    depth: int = 2,
    support_size: int | None = None,
    zero_heads: bool = False,
    key: PRNGKey,
) -> MuZeroNet:
    """A [`azx.muzero.MuZeroNet`][] of three fully connected networks of `width` units and
    `depth` hidden layers each; `support_size` as in `MuZeroNet`.

    `zero_heads=True` starts the last layers of the policy, value and reward heads at
    zero: the untrained model predicts a uniform policy and a value and reward of 0 in
    every state, so every action's Q is equal and the untrained search plays at random, as
    an untrained policy network does. With random last layers, the heads' small
    differences are much the same in every state, and the search can prefer one action
    nearly everywhere before it has learned anything (on MinAtar Freeway the untrained
    search of two seeds of three crosses the road again and again).
    """
    bins = head_bins(support_size)
    keys = jax.random.split(key, 3)
    sizes = dict(width=width, depth=depth)
    net = MuZeroNet(
        representation=MLPRepresentation(observation_shape, embedding_size, **sizes, key=keys[0]),
        dynamics=MLPDynamics(embedding_size, num_actions, bins, **sizes, key=keys[1]),
        prediction=MLPPrediction(embedding_size, num_actions, bins, **sizes, key=keys[2]),
        support_size=support_size,
    )
    return zero_heads_if(zero_heads, net, _MLP_HEADS)


_MLP_HEADS = (
    lambda net: net.prediction.policy_head,
    lambda net: net.prediction.value_head,
    lambda net: net.dynamics.reward_head,
)


def zero_heads_if(zero: bool, net: MuZeroNet, heads) -> MuZeroNet:
    """`net` with the layers that `heads` (functions from the net to a layer) pick set to
    zero, weights and biases, when `zero` is true; `net` itself otherwise."""
    if not zero:
        return net

    def parameters(n: MuZeroNet) -> list:
        return [leaf for head in heads for leaf in (head(n).weight, head(n).bias)]

    return eqx.tree_at(parameters, net, replace_fn=jnp.zeros_like)


def head_bins(support_size: int | None) -> int:
    """Outputs of a value or reward head: 1 for a scalar (`support_size=None`), else the
    `2 * support_size + 1` atoms of the support."""
    if support_size is None:
        return 1
    check_positive_int("support_size", support_size)
    return 2 * support_size + 1


def head_scalar(support_size: int | None, head: Float[Array, " bins"]) -> Float[Array, ""]:
    """The scalar a value, `Q` or reward head predicts: its one output for a scalar head
    (`support_size=None`), else `h^-1` of the mean of its distribution over the support."""
    if support_size is None:
        return head[0]
    probabilities = jax.nn.softmax(head)
    return unscale_value(expected_value(probabilities, support_size))
