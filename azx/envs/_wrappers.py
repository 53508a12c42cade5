import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, Shaped

from .._types import EnvState, PRNGKey
from ._abstract import AbstractEnv
from ._symmetry import Symmetry


class ScaleRewards(AbstractEnv):
    """An environment whose rewards are multiplied by `scale`.

    For games with large rewards (2048's merged tiles sum to thousands per game): value
    targets of order one keep the value loss from swamping the policy loss. Everything
    else is the wrapped environment's.
    """

    env: AbstractEnv
    scale: float = eqx.field(static=True)

    def __init__(self, env: AbstractEnv, scale: float):
        if isinstance(scale, bool) or not isinstance(scale, int | float) or not scale > 0:
            raise ValueError(f"scale must be a positive number, got {scale!r}")
        self.env = env
        self.scale = float(scale)

    @property
    def num_actions(self) -> int:
        return self.env.num_actions

    @property
    def num_players(self) -> int:
        return self.env.num_players

    @property
    def observation_shape(self) -> tuple[int, ...]:
        return self.env.observation_shape

    @property
    def observation_dtype(self) -> jnp.dtype:
        return self.env.observation_dtype

    def init(self, key: PRNGKey) -> EnvState:
        return self.env.init(key)

    def step(self, state: EnvState, action: Int[Array, ""], key: PRNGKey) -> EnvState:
        return self.env.step(state, action, key)

    def observation(self, state: EnvState) -> Shaped[Array, "..."]:
        return self.env.observation(state)

    def legal_action_mask(self, state: EnvState) -> Bool[Array, " num_actions"]:
        return self.env.legal_action_mask(state)

    def rewards(self, state: EnvState) -> Float[Array, " num_players"]:
        return self.scale * self.env.rewards(state)

    def terminated(self, state: EnvState) -> Bool[Array, ""]:
        return self.env.terminated(state)

    def truncated(self, state: EnvState) -> Bool[Array, ""]:
        return self.env.truncated(state)

    def current_player(self, state: EnvState) -> Int[Array, ""]:
        return self.env.current_player(state)

    def symmetries(self) -> tuple[Symmetry, ...]:
        return self.env.symmetries()
