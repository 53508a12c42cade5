import abc

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, Shaped

from .._types import EnvState, PRNGKey
from ._symmetry import Symmetry


class AbstractEnv(eqx.Module):
    """Interface every environment implements, for ONE (unbatched) state.

    Batch with `jax.vmap`. Sizes are plain Python values so that they can size arrays
    at trace time. Implementations must be pure: `init` and `step` return new states
    and never mutate. Once `terminated` or `truncated` is true, `step` must return a
    state that stays terminated (or truncated) with zero rewards.

    Implement this interface to plug any JAX environment into azx; the pgx adapter
    [`azx.envs.PgxEnv`][] is one implementation.
    """

    num_actions: eqx.AbstractVar[int]
    num_players: eqx.AbstractVar[int]
    observation_shape: eqx.AbstractVar[tuple[int, ...]]
    observation_dtype: eqx.AbstractVar[jnp.dtype]

    @abc.abstractmethod
    def init(self, key: PRNGKey) -> EnvState:
        """Return the state at the start of a new episode."""

    @abc.abstractmethod
    def step(self, state: EnvState, action: Int[Array, ""], key: PRNGKey) -> EnvState:
        """Play `action` for the current player. `key` drives chance events, if any."""

    @abc.abstractmethod
    def observation(self, state: EnvState) -> Shaped[Array, "..."]:
        """Observation of `state` from the point of view of the player to move."""

    @abc.abstractmethod
    def legal_action_mask(self, state: EnvState) -> Bool[Array, " num_actions"]:
        """Which actions the player to move may take."""

    @abc.abstractmethod
    def rewards(self, state: EnvState) -> Float[Array, " num_players"]:
        """Reward each player received on the transition into `state`."""

    @abc.abstractmethod
    def terminated(self, state: EnvState) -> Bool[Array, ""]:
        """Whether the episode has ended by the rules of the game."""

    @abc.abstractmethod
    def truncated(self, state: EnvState) -> Bool[Array, ""]:
        """Whether the episode was cut short (time limit), so its true value is unknown."""

    @abc.abstractmethod
    def current_player(self, state: EnvState) -> Int[Array, ""]:
        """Index of the player to move, in `[0, num_players)`."""

    def symmetries(self) -> tuple[Symmetry, ...]:
        """Board symmetries that map every position to one of equal value, identity first,
        for training-data augmentation (`Config.augment_symmetries`). Default: none known
        (an empty tuple). Every [`azx.envs.Symmetry`][] must also map the legal actions
        and the value of a position to those of the transformed one."""
        return ()
