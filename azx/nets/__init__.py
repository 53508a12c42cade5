"""Networks, each called on ONE observation (batch with `jax.vmap`).

Policy-value networks map an observation to `(logits, value)`: `MLP` and
`AlphaZeroResNet` for AlphaZero, `ActorCritic` for PPO. Recurrent networks
(`AbstractRecurrentNet`, e.g. `RecurrentActorCritic`) are scan-shaped:
`net(carry, inputs) -> (carry, (logits, value))`.
"""

from ._actor_critic import ActorCritic as ActorCritic
from ._mlp import MLP as MLP
from ._recurrent import (
    AbstractRecurrentNet as AbstractRecurrentNet,
    RecurrentActorCritic as RecurrentActorCritic,
    RecurrentInput as RecurrentInput,
)
from ._resnet import AlphaZeroResNet as AlphaZeroResNet
from ._uniform import UniformPolicy as UniformPolicy
