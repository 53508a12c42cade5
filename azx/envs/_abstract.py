import abc
import math

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, Shaped

from .._types import EnvState, PRNGKey
from ._symmetry import Symmetry


class DiscreteActions(eqx.Module):
    """An action space of `num_actions` choices, actions `0 .. num_actions - 1` (an int32
    scalar each)."""

    num_actions: int = eqx.field(static=True)


class BoxActions(eqx.Module):
    """An action space of real vectors within per-component bounds: an action is a float32
    vector of shape `(len(low),)` with `low[i] <= action[i] <= high[i]`.

    **Raises:** `ValueError` for bounds that are empty, of different lengths, not finite,
    or not increasing (`low[i] < high[i]`).
    """

    low: tuple[float, ...] = eqx.field(static=True)
    high: tuple[float, ...] = eqx.field(static=True)

    def __init__(self, low, high):
        low, high = tuple(float(x) for x in low), tuple(float(x) for x in high)
        if not low or len(low) != len(high):
            raise ValueError(
                f"action bounds need one low and one high per component, got low={low} and "
                f"high={high}"
            )
        for i, (a, b) in enumerate(zip(low, high)):
            if not (math.isfinite(a) and math.isfinite(b)):
                raise ValueError(
                    f"action bounds must be finite, got [{a}, {b}] for component {i}; "
                    "give a continuous action space finite low and high bounds"
                )
            if not a < b:
                raise ValueError(f"action bounds need low < high, got [{a}, {b}] for component {i}")
        self.low, self.high = low, high

    @property
    def size(self) -> int:
        """Number of components of an action."""
        return len(self.low)


class AbstractEnv(eqx.Module):
    """Interface every environment implements, for ONE (unbatched) state.

    Batch with `jax.vmap`. Sizes are plain Python values so that they can size arrays
    at trace time. Implementations must be pure: `init` and `step` return new states
    and never mutate. Once `terminated` or `truncated` is true, `step` must return a
    state that stays terminated (or truncated) with zero rewards.

    Implement this interface to plug any JAX environment into azx; the pgx adapter
    [`azx.envs.PgxEnv`][] is one implementation.
    """

    name: eqx.AbstractVar[str]
    """What the environment is called: pgx's game id (`"tic_tac_toe"`), the adapted
    library's environment name (`"CartPole-v1"`), or what a user's environment calls
    itself. Agents that know one game (a solver, OpenSpiel's bots, gnubg) look it up by it.
    A class attribute (`name = "nim"`) or a static field declares it."""
    num_actions: eqx.AbstractVar[int]
    num_players: eqx.AbstractVar[int]
    observation_shape: eqx.AbstractVar[tuple[int, ...]]
    observation_dtype: eqx.AbstractVar[jnp.dtype]

    @abc.abstractmethod
    def init(self, key: PRNGKey) -> EnvState:
        """Return the state at the start of a new episode."""

    @abc.abstractmethod
    def step(
        self, state: EnvState, action: Int[Array, ""] | Float[Array, " num_actions"], key: PRNGKey
    ) -> EnvState:
        """Play `action` for the current player (an int32 scalar; with box actions, a
        float32 vector). `key` drives chance events, if any."""

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

    def action_space(self) -> DiscreteActions | BoxActions:
        """What an action is. Default: [`azx.envs.DiscreteActions`][] of `num_actions`.

        An environment with continuous actions returns [`azx.envs.BoxActions`][]; its
        `num_actions` is then the number of components of an action, its
        `legal_action_mask` all true, and `step` takes a float32 vector within the
        bounds."""
        return DiscreteActions(self.num_actions)

    def symmetries(self) -> tuple[Symmetry, ...]:
        """Board symmetries that map every position to one of equal value, identity first,
        for training-data augmentation (`Config.augment_symmetries`). Default: none known
        (an empty tuple). Every [`azx.envs.Symmetry`][] must also map the legal actions
        and the value of a position to those of the transformed one."""
        return ()
