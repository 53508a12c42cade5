import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Shaped

from .._types import PRNGKey
from ._common import as_float, check_positive_int, check_shape, value_out


def _image_shape(observation_shape: tuple[int, ...]) -> tuple[int, int, int]:
    # pgx observations are channels-last (H, W, C); a plain 2-D board gets one channel,
    # and a feature vector (backgammon's points) becomes a one-channel 1 x n strip, so the
    # 3x3 convolutions act along it. (As a 1x1 image with n channels, the heads' group
    # normalisation would see one value per group and output zeros.)
    if len(observation_shape) == 3:
        height, width, channels = observation_shape
    elif len(observation_shape) == 2:
        (height, width), channels = observation_shape, 1
    elif len(observation_shape) == 1:
        height, width, channels = 1, observation_shape[0], 1
    else:
        raise ValueError(
            "AlphaZeroResNet takes observations of rank 1, 2 or 3 (H, W, C), "
            f"got shape {observation_shape}"
        )
    return height, width, channels


def check_tower(channels: int, num_blocks: int, norm_groups: int) -> None:
    """A residual tower's sizes: `channels` and `norm_groups` positive, the one dividing
    the other, and `num_blocks` at least 0."""
    check_positive_int("channels", channels)
    check_positive_int("norm_groups", norm_groups)
    if isinstance(num_blocks, bool) or not isinstance(num_blocks, int) or num_blocks < 0:
        raise ValueError(f"num_blocks must be a non-negative int, got {num_blocks!r}")
    if channels % norm_groups:
        raise ValueError(f"norm_groups ({norm_groups}) must divide channels ({channels})")


def as_image(
    observation: Shaped[Array, "..."], observation_shape: tuple[int, ...], network: str
) -> Float[Array, "channels height width"]:
    """One observation of `observation_shape` as a float image, channels first (what the
    convolutions take); `ValueError` naming `network` for any other shape."""
    if observation.shape != observation_shape:
        raise ValueError(
            f"{network} expects one observation of shape {observation_shape}, "
            f"got {observation.shape}; batch with jax.vmap"
        )
    height, width, channels = _image_shape(observation_shape)
    x = jnp.reshape(as_float(observation), (height, width, channels))
    return jnp.transpose(x, (2, 0, 1))


def _conv_as_matmul(weight: Float[Array, "d c k k"], x: Float[Array, "c h w"]):
    """A stride-1 "SAME" convolution with an odd square kernel, as one matrix product: the
    `k * k` shifted copies of the padded input stacked on the channel axis (im2col), then
    multiplied by the kernel flattened the same way. The same cross-correlation as
    `lax.conv`, up to the order of the sums."""
    out_channels, in_channels, size, _ = weight.shape
    _, height, width = x.shape
    half = size // 2
    padded = jnp.pad(x, ((0, 0), (half, half), (half, half)))
    shifted = [
        padded[:, dy : dy + height, dx : dx + width] for dy in range(size) for dx in range(size)
    ]
    columns = jnp.reshape(jnp.stack(shifted, axis=1), (in_channels * size * size, height, width))
    return jnp.einsum("dk,khw->dhw", jnp.reshape(weight, (out_channels, -1)), columns)


class _ConvNorm(eqx.Module):
    conv: eqx.nn.Conv2d
    norm: eqx.nn.GroupNorm
    as_matmul: bool | None = eqx.field(static=True)

    def __init__(self, in_channels, out_channels, kernel_size, groups, as_matmul, *, key):
        self.conv = eqx.nn.Conv2d(
            in_channels, out_channels, kernel_size, padding="SAME", use_bias=False, key=key
        )
        self.norm = eqx.nn.GroupNorm(groups, out_channels)
        self.as_matmul = as_matmul

    def __call__(self, x: Float[Array, "c h w"]) -> Float[Array, "d h w"]:
        as_matmul = self.as_matmul
        if as_matmul is None:
            as_matmul = jax.default_backend() == "cpu"
        return self.norm(_conv_as_matmul(self.conv.weight, x) if as_matmul else self.conv(x))


class _ResidualBlock(eqx.Module):
    first: _ConvNorm
    second: _ConvNorm

    def __init__(self, channels, groups, as_matmul, *, key):
        first_key, second_key = jax.random.split(key)
        self.first = _ConvNorm(channels, channels, 3, groups, as_matmul, key=first_key)
        self.second = _ConvNorm(channels, channels, 3, groups, as_matmul, key=second_key)

    def __call__(self, x: Float[Array, "c h w"]) -> Float[Array, "c h w"]:
        return jax.nn.relu(x + self.second(jax.nn.relu(self.first(x))))


class AlphaZeroResNet(eqx.Module):
    """The AlphaZero residual policy-value network (Silver et al., 2018).

    A 3x3 convolutional stem, a tower of residual blocks, a policy head (1x1 conv to two
    planes, then a linear layer to the logits) and a value head (1x1 conv to one plane,
    a hidden linear layer, then a scalar). Group normalisation replaces batch
    normalisation, so the network is a pure function with no running statistics to carry.
    """

    stem: _ConvNorm
    blocks: tuple[_ResidualBlock, ...]
    policy_conv: _ConvNorm
    policy_linear: eqx.nn.Linear
    value_conv: _ConvNorm
    value_hidden: eqx.nn.Linear
    value_linear: eqx.nn.Linear
    observation_shape: tuple[int, ...] = eqx.field(static=True)
    bounded_value: bool = eqx.field(static=True)

    def __init__(
        self,
        observation_shape: tuple[int, ...],
        num_actions: int,
        *,
        channels: int = 64,
        num_blocks: int = 6,
        value_hidden: int = 128,
        norm_groups: int = 8,
        bounded_value: bool = True,
        conv_as_matmul: bool | None = None,
        key: PRNGKey,
    ):
        """**Arguments:**

        - `observation_shape`: one observation, `(H, W, C)` channels-last as pgx gives it
          (rank 2 boards and rank 1 feature vectors are accepted too).
        - `num_actions`: number of policy logits.
        - `channels`: width of the residual tower.
        - `num_blocks`: number of residual blocks (0 allowed: stem and heads only).
        - `value_hidden`: units in the value head's hidden layer.
        - `norm_groups`: groups of the group normalisation; must divide `channels`.
        - `bounded_value`: squash the value with `tanh` (two-player zero-sum games).
        - `conv_as_matmul`: compute each convolution as one matrix product over the
          shifted copies of its input (im2col) instead of with `lax.conv`. XLA:CPU runs
          `lax.conv` many times slower inside loops (`lax.scan`, `while_loop`: the search's
          simulations and the learner's updates) than outside them, and matrix products
          fast in both. `None` (default): the matrix product on the CPU backend,
          `lax.conv` elsewhere. The parameters are the same either way.
        - `key`: random key for the initial weights (keyword-only).
        """
        self.observation_shape = check_shape(observation_shape)
        height, width, in_channels = _image_shape(self.observation_shape)
        check_positive_int("num_actions", num_actions)
        check_positive_int("value_hidden", value_hidden)
        check_tower(channels, num_blocks, norm_groups)
        keys = jax.random.split(key, num_blocks + 5)
        if conv_as_matmul not in (None, True, False):
            raise ValueError(f"conv_as_matmul must be None, True or False, got {conv_as_matmul!r}")
        matmul = conv_as_matmul  # every convolution of the network computed the same way
        self.stem = _ConvNorm(in_channels, channels, 3, norm_groups, matmul, key=keys[0])
        self.blocks = tuple(_ResidualBlock(channels, norm_groups, matmul, key=k) for k in keys[5:])
        self.policy_conv = _ConvNorm(channels, 2, 1, 1, matmul, key=keys[1])
        self.policy_linear = eqx.nn.Linear(2 * height * width, num_actions, key=keys[2])
        self.value_conv = _ConvNorm(channels, 1, 1, 1, matmul, key=keys[3])
        hidden_key, out_key = jax.random.split(keys[4])
        self.value_hidden = eqx.nn.Linear(height * width, value_hidden, key=hidden_key)
        self.value_linear = eqx.nn.Linear(value_hidden, "scalar", key=out_key)
        self.bounded_value = bounded_value

    def __call__(
        self, observation: Shaped[Array, "..."]
    ) -> tuple[Float[Array, " num_actions"], Float[Array, ""]]:
        """**Arguments:** one observation of shape `observation_shape`.

        **Returns:** `(logits, value)`.
        """
        x = jax.nn.relu(self.stem(as_image(observation, self.observation_shape, "AlphaZeroResNet")))
        for block in self.blocks:
            x = block(x)
        policy = jax.nn.relu(self.policy_conv(x))
        logits = self.policy_linear(jnp.ravel(policy))
        value = jax.nn.relu(self.value_conv(x))
        value = jax.nn.relu(self.value_hidden(jnp.ravel(value)))
        return logits, value_out(self.value_linear(value), self.bounded_value)
