"""Policy-value networks: one observation in, `(logits, value)` out; batch with `jax.vmap`."""

from ._mlp import MLP as MLP
from ._resnet import AlphaZeroResNet as AlphaZeroResNet
from ._uniform import UniformPolicy as UniformPolicy
