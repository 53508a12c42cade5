import abc

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PyTree, Shaped

from .._types import PRNGKey
from ._common import (
    as_float,
    check_positive_int,
    check_shape,
    flat_size,
    orthogonal_linear,
)


class RecurrentInput(eqx.Module):
    """What a recurrent policy reads at one step of one environment (or, with leading
    axes on every leaf, a sequence or batch of such steps)."""

    observation: Shaped[Array, "..."]
    previous_action: Int[Array, "*steps"]
    """The action taken on the step before (0 at the very first step)."""
    previous_reward: Float[Array, "*steps"]
    """The reward received on the step before (0 at the very first step)."""
    episode_start: Bool[Array, "*steps"]
    """Whether `observation` is the first of an episode."""


class AbstractRecurrentNet(eqx.Module):
    """Interface of a policy-value network with memory, for ONE environment.

    Scan-shaped: `net(carry, inputs) -> (carry, (logits, value))`, so that
    `jax.lax.scan(lambda c, x: net(c, x), carry, inputs)` runs it over a sequence of
    [`azx.nets.RecurrentInput`][]s. Batch with `jax.vmap`.
    """

    @abc.abstractmethod
    def initial_carry(self) -> PyTree[Array]:
        """The carry before the first step."""

    @abc.abstractmethod
    def __call__(
        self, carry: PyTree[Array], inputs: RecurrentInput
    ) -> tuple[PyTree[Array], tuple[Float[Array, " num_actions"], Float[Array, ""]]]:
        """One step: the new carry, and `(logits, value)` for `inputs.observation`."""


class _GridEncoder(eqx.Module):
    """Three 2x2 convolutions (16, 32, 64 channels, no padding) with ReLUs, for symbolic
    grid observations such as MiniGrid's (each cell a few small integers).

    Each convolution is written as a dense layer over every cell's 2x2 patch (the four
    shifted views of the grid side by side): the same function, and on XLA:CPU several
    times faster than a convolution kernel on grids this small, inside loops especially.
    """

    layers: tuple[eqx.nn.Linear, ...]

    def __init__(self, channels: int, *, key: PRNGKey):
        keys = jax.random.split(key, 3)
        sizes = (channels, 16, 32, 64)
        self.layers = tuple(
            orthogonal_linear(4 * a, b, 2**0.5, key=k) for a, b, k in zip(sizes, sizes[1:], keys)
        )

    def __call__(self, x: Float[Array, "height width channels"]) -> Float[Array, " features"]:
        for layer in self.layers:
            patches = jnp.concatenate([x[:-1, :-1], x[:-1, 1:], x[1:, :-1], x[1:, 1:]], axis=-1)
            x = jax.nn.relu(patches @ layer.weight.T + layer.bias[None, None])
        return jnp.ravel(x)


class _VectorEncoder(eqx.Module):
    layer: eqx.nn.Linear

    def __call__(self, x: Float[Array, "..."]) -> Float[Array, " features"]:
        return jax.nn.relu(self.layer(jnp.ravel(x)))


_ACTION_EMBEDDING_INITS = ("standard_normal", "fan_in_normal")


def _gru(input_size: int, hidden_size: int, *, key: PRNGKey) -> eqx.nn.GRUCell:
    """A GRU cell with Glorot-normal input weights, orthogonal recurrent weights and zero
    biases, so that the hidden units start decorrelated."""
    cell = eqx.nn.GRUCell(input_size, hidden_size, key=key)
    input_key, hidden_key = jax.random.split(key)
    weight_ih = jax.nn.initializers.glorot_normal(in_axis=1, out_axis=0)(
        input_key, (3 * hidden_size, input_size)
    )
    weight_hh = jax.nn.initializers.orthogonal(column_axis=0)(
        hidden_key, (3 * hidden_size, hidden_size)
    )
    return eqx.tree_at(
        lambda c: (c.weight_ih, c.weight_hh, c.bias, c.bias_n),
        cell,
        (weight_ih, weight_hh, jnp.zeros(3 * hidden_size), jnp.zeros(hidden_size)),
    )


class _Head(eqx.Module):
    hidden: eqx.nn.Linear
    out: eqx.nn.Linear

    def __init__(self, in_size: int, hidden_size: int, out_size: int, gain: float, *, key):
        hidden_key, out_key = jax.random.split(key)
        self.hidden = orthogonal_linear(in_size, hidden_size, 2.0, key=hidden_key)
        self.out = orthogonal_linear(hidden_size, out_size, gain, key=out_key)

    def __call__(self, x: Float[Array, " n"]) -> Float[Array, " m"]:
        return self.out(jnp.tanh(self.hidden(x)))


class RecurrentActorCritic(AbstractRecurrentNet):
    """A GRU actor-critic for partially observed environments (recurrent PPO).

    Each step encodes the observation (2x2 convolutions for `(H, W, C)` grids, a dense layer
    for anything else), embeds the previous action, appends the previous reward, and feeds
    that to a stack of GRU cells; the policy and value heads (a tanh hidden layer each) read
    the sum of the cells' outputs. With `reset_at_episode_start` the carry, previous action
    and previous reward are zeroed where an episode starts, so every episode is played as
    from a fresh start; without it the memory runs on across episodes.

    The convolutions and heads start orthogonal and the GRU Glorot-normal (input weights)
    and orthogonal (recurrent weights), all biases zero, as in seed 002's flax network. The
    previous action's embedding starts standard normal (Equinox's `Embedding`) unless
    `action_embedding_init="fan_in_normal"` scales it to flax's `nn.Embed` default.
    """

    encoder: _GridEncoder | _VectorEncoder
    action_embedding: eqx.nn.Embedding
    cells: tuple[eqx.nn.GRUCell, ...]
    policy_head: _Head
    value_head: _Head
    observation_shape: tuple[int, ...] = eqx.field(static=True)
    num_actions: int = eqx.field(static=True)
    hidden_size: int = eqx.field(static=True)
    reset_at_episode_start: bool = eqx.field(static=True)
    action_embedding_init: str = eqx.field(static=True)

    def __init__(
        self,
        observation_shape: tuple[int, ...],
        num_actions: int,
        *,
        hidden_size: int = 64,
        num_layers: int = 1,
        head_size: int = 64,
        action_embedding_size: int = 16,
        encoder_size: int = 64,
        reset_at_episode_start: bool = True,
        action_embedding_init: str = "standard_normal",
        key: PRNGKey,
    ):
        """**Arguments:**

        - `observation_shape`: one observation; rank 3 `(H, W, C)` with `H, W >= 4` takes
          the convolutional encoder, any other shape is flattened into a dense layer.
        - `num_actions`: number of policy logits (and of embedded previous actions).
        - `hidden_size`: units of every GRU cell.
        - `num_layers`: GRU cells stacked, each reading the one below.
        - `head_size`: units of the hidden layer of the policy and of the value head.
        - `action_embedding_size`: size of the previous action's embedding.
        - `encoder_size`: units of the dense encoder (vector observations only).
        - `reset_at_episode_start`: zero the memory where an episode starts.
        - `action_embedding_init`: how the previous action's embedding starts:
          `"standard_normal"` (Equinox's `Embedding`: every entry of standard deviation 1)
          or `"fan_in_normal"` (standard deviation `1 / sqrt(action_embedding_size)`,
          flax's `nn.Embed` default and so seed 002's: the embedding then enters the GRU
          at about the scale of its other inputs' weights).
        - `key`: random key for the initial weights (keyword-only).
        """
        self.observation_shape = check_shape(observation_shape)
        for name, value in (
            ("num_actions", num_actions),
            ("hidden_size", hidden_size),
            ("num_layers", num_layers),
            ("head_size", head_size),
            ("action_embedding_size", action_embedding_size),
            ("encoder_size", encoder_size),
        ):
            check_positive_int(name, value)
        if not isinstance(reset_at_episode_start, bool):
            raise ValueError(
                f"reset_at_episode_start must be True or False, got {reset_at_episode_start!r}"
            )
        if action_embedding_init not in _ACTION_EMBEDDING_INITS:
            raise ValueError(
                f"action_embedding_init must be one of "
                f"{', '.join(map(repr, _ACTION_EMBEDDING_INITS))}, got {action_embedding_init!r}"
            )
        keys = jax.random.split(key, 4 + num_layers)
        shape = self.observation_shape
        if len(shape) == 3 and min(shape[:2]) >= 4:
            self.encoder = _GridEncoder(shape[2], key=keys[0])
            features = 64 * (shape[0] - 3) * (shape[1] - 3)
        else:
            self.encoder = _VectorEncoder(
                orthogonal_linear(flat_size(shape), encoder_size, 2**0.5, key=keys[0])
            )
            features = encoder_size
        self.action_embedding = eqx.nn.Embedding(num_actions, action_embedding_size, key=keys[1])
        if action_embedding_init == "fan_in_normal":
            # flax's nn.Embed: variance 1 / features, the embedding axis counted as fan-in.
            weight = jax.nn.initializers.variance_scaling(1.0, "fan_in", "normal", out_axis=0)(
                keys[1], (num_actions, action_embedding_size)
            )
            self.action_embedding = eqx.nn.Embedding(weight=weight)
        sizes = [features + action_embedding_size + 1] + [hidden_size] * num_layers
        self.cells = tuple(_gru(a, hidden_size, key=k) for a, k in zip(sizes, keys[4:]))
        self.policy_head = _Head(hidden_size, head_size, num_actions, 0.01, key=keys[2])
        self.value_head = _Head(hidden_size, head_size, 1, 1.0, key=keys[3])
        self.num_actions = num_actions
        self.hidden_size = hidden_size
        self.reset_at_episode_start = reset_at_episode_start
        self.action_embedding_init = action_embedding_init

    def initial_carry(self) -> Float[Array, "num_layers hidden_size"]:
        """Zeros: one hidden state per GRU cell."""
        return jnp.zeros((len(self.cells), self.hidden_size), jnp.float32)

    def __call__(
        self, carry: Float[Array, "num_layers hidden_size"], inputs: RecurrentInput
    ) -> tuple[
        Float[Array, "num_layers hidden_size"],
        tuple[Float[Array, " num_actions"], Float[Array, ""]],
    ]:
        """**Arguments:** the carry and one step's [`azx.nets.RecurrentInput`][].

        **Returns:** `(carry, (logits, value))`.
        """
        if inputs.observation.shape != self.observation_shape:
            raise ValueError(
                f"RecurrentActorCritic expects one observation of shape "
                f"{self.observation_shape}, got {inputs.observation.shape}; batch with jax.vmap"
            )
        previous_action, previous_reward = inputs.previous_action, inputs.previous_reward
        if self.reset_at_episode_start:
            start = inputs.episode_start
            carry = jnp.where(start, jnp.zeros_like(carry), carry)
            previous_action = jnp.where(start, 0, previous_action)
            previous_reward = jnp.where(start, 0.0, previous_reward)
        x = jnp.concatenate(
            [
                self.encoder(as_float(inputs.observation)),
                self.action_embedding(previous_action),
                jnp.reshape(previous_reward.astype(jnp.float32), (1,)),
            ]
        )
        hidden = []
        for cell, h in zip(self.cells, carry):
            x = cell(x, h)
            hidden.append(x)
        new_carry = jnp.stack(hidden)
        features = jnp.sum(new_carry, axis=0)
        return new_carry, (self.policy_head(features), self.value_head(features)[0])
