"""MuZero's networks as small residual convolutional towers, for image observations: the
embedding is a stack of planes the size of the observation's image."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, Shaped

from .._types import PRNGKey
from .._validate import check_positive_int
from ..nets._common import check_shape
from ..nets._resnet import _ConvNorm, _image_shape, _ResidualBlock, as_image, check_tower
from ._nets import MuZeroNet, head_bins, normalise_embedding, zero_heads_if


def _tower(channels: int, num_blocks: int, groups: int, key: PRNGKey) -> tuple:
    keys = jax.random.split(key, max(num_blocks, 1))
    return tuple(_ResidualBlock(channels, groups, None, key=k) for k in keys[:num_blocks])


class ResNetRepresentation(eqx.Module):
    """Representation network: a 3x3 convolutional stem and residual blocks over one
    observation (`(H, W, C)` channels-last, as pgx gives it); the embedding is `channels`
    planes of `H x W`, normalised to `[0, 1]` ([`azx.muzero.normalise_embedding`][])."""

    stem: _ConvNorm
    blocks: tuple[_ResidualBlock, ...]
    observation_shape: tuple[int, ...] = eqx.field(static=True)

    def __init__(
        self,
        observation_shape: tuple[int, ...],
        *,
        channels: int = 32,
        num_blocks: int = 2,
        norm_groups: int = 4,
        key: PRNGKey,
    ):
        self.observation_shape = check_shape(observation_shape)
        check_tower(channels, num_blocks, norm_groups)
        _, _, in_channels = _image_shape(self.observation_shape)
        stem_key, tower_key = jax.random.split(key)
        self.stem = _ConvNorm(in_channels, channels, 3, norm_groups, None, key=stem_key)
        self.blocks = _tower(channels, num_blocks, norm_groups, tower_key)

    def __call__(self, observation: Shaped[Array, "..."]) -> Float[Array, "channels height width"]:
        image = as_image(observation, self.observation_shape, "ResNetRepresentation")
        x = jax.nn.relu(self.stem(image))
        for block in self.blocks:
            x = block(x)
        return normalise_embedding(x)


class ResNetDynamics(eqx.Module):
    """Dynamics network: the embedding's planes and one plane per action (the chosen
    action's all ones) through a convolution and residual blocks to the next embedding
    (normalised to `[0, 1]`); the reward head is a 1x1 convolution to one plane and a
    linear layer to `reward_bins` outputs."""

    stem: _ConvNorm
    blocks: tuple[_ResidualBlock, ...]
    reward_conv: _ConvNorm
    reward_linear: eqx.nn.Linear
    num_actions: int = eqx.field(static=True)

    def __init__(
        self,
        image_size: tuple[int, int],
        num_actions: int,
        reward_bins: int,
        *,
        channels: int = 32,
        num_blocks: int = 2,
        norm_groups: int = 4,
        key: PRNGKey,
    ):
        check_tower(channels, num_blocks, norm_groups)
        check_positive_int("num_actions", num_actions)
        check_positive_int("reward_bins", reward_bins)
        height, width = image_size
        stem_key, tower_key, conv_key, linear_key = jax.random.split(key, 4)
        self.stem = _ConvNorm(channels + num_actions, channels, 3, norm_groups, None, key=stem_key)
        self.blocks = _tower(channels, num_blocks, norm_groups, tower_key)
        self.reward_conv = _ConvNorm(channels, 1, 1, 1, None, key=conv_key)
        self.reward_linear = eqx.nn.Linear(height * width, reward_bins, key=linear_key)
        self.num_actions = num_actions

    def __call__(
        self, embedding: Float[Array, "channels height width"], action: Int[Array, ""]
    ) -> tuple[Float[Array, " reward_bins"], Float[Array, "channels height width"]]:
        one_hot = jax.nn.one_hot(action, self.num_actions, dtype=embedding.dtype)
        planes = jnp.broadcast_to(one_hot[:, None, None], (self.num_actions,) + embedding.shape[1:])
        x = jax.nn.relu(self.stem(jnp.concatenate([embedding, planes])))
        for block in self.blocks:
            x = block(x)
        reward = self.reward_linear(jnp.ravel(jax.nn.relu(self.reward_conv(x))))
        return reward, normalise_embedding(x)


class ResNetPrediction(eqx.Module):
    """Prediction network: AlphaZero's heads over the embedding's planes (a 1x1
    convolution to two planes and a linear layer for the policy; a 1x1 convolution to
    one plane, a hidden layer and `value_bins` outputs for the value)."""

    policy_conv: _ConvNorm
    policy_linear: eqx.nn.Linear
    value_conv: _ConvNorm
    value_hidden: eqx.nn.Linear
    value_linear: eqx.nn.Linear

    def __init__(
        self,
        image_size: tuple[int, int],
        num_actions: int,
        value_bins: int,
        *,
        channels: int = 32,
        value_hidden: int = 64,
        key: PRNGKey,
    ):
        check_positive_int("channels", channels)
        check_positive_int("value_hidden", value_hidden)
        height, width = image_size
        keys = jax.random.split(key, 5)
        self.policy_conv = _ConvNorm(channels, 2, 1, 1, None, key=keys[0])
        self.policy_linear = eqx.nn.Linear(2 * height * width, num_actions, key=keys[1])
        self.value_conv = _ConvNorm(channels, 1, 1, 1, None, key=keys[2])
        self.value_hidden = eqx.nn.Linear(height * width, value_hidden, key=keys[3])
        self.value_linear = eqx.nn.Linear(value_hidden, value_bins, key=keys[4])

    def __call__(
        self, embedding: Float[Array, "channels height width"]
    ) -> tuple[Float[Array, " num_actions"], Float[Array, " value_bins"]]:
        policy = jnp.ravel(jax.nn.relu(self.policy_conv(embedding)))
        value = jnp.ravel(jax.nn.relu(self.value_conv(embedding)))
        value = jax.nn.relu(self.value_hidden(value))
        return self.policy_linear(policy), self.value_linear(value)


def resnet_net(
    observation_shape: tuple[int, ...],
    num_actions: int,
    *,
    channels: int = 32,
    num_blocks: int = 2,
    norm_groups: int = 4,
    support_size: int | None = None,
    zero_heads: bool = False,
    key: PRNGKey,
) -> MuZeroNet:
    """A [`azx.muzero.MuZeroNet`][] of residual convolutional networks over image
    observations (`(H, W, C)`; rank 2 and 1 as [`azx.nets.AlphaZeroResNet`][] takes
    them): `num_blocks` blocks of `channels` each in the representation and the dynamics;
    `support_size` as in `MuZeroNet`, `zero_heads` as in [`azx.muzero.mlp_net`][]."""
    bins = head_bins(support_size)
    image_size = _image_shape(check_shape(observation_shape))[:2]
    keys = jax.random.split(key, 3)
    tower = dict(channels=channels, num_blocks=num_blocks, norm_groups=norm_groups)
    net = MuZeroNet(
        representation=ResNetRepresentation(observation_shape, **tower, key=keys[0]),
        dynamics=ResNetDynamics(image_size, num_actions, bins, **tower, key=keys[1]),
        prediction=ResNetPrediction(image_size, num_actions, bins, channels=channels, key=keys[2]),
        support_size=support_size,
    )
    return zero_heads_if(zero_heads, net, _HEADS)


_HEADS = (
    lambda net: net.prediction.policy_linear,
    lambda net: net.prediction.value_linear,
    lambda net: net.dynamics.reward_linear,
)
