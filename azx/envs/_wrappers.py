import abc
import math

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, Shaped

from .._types import EnvState, PRNGKey
from ._abstract import AbstractEnv, BoxActions, DiscreteActions
from ._chance import AbstractChanceEnv, Afterstate
from ._symmetry import Symmetry


class AbstractEnvWrapper(AbstractEnv):
    """An environment made from `env` by changing what is read from its states: its
    observations (with their shape and symmetries) and its rewards, which every wrapper
    defines. The game, its state, its name, its moves and its chance stay `env`'s, so code
    that needs the game itself (drawing a board, looking the game up) finds it under `env`.
    """

    env: eqx.AbstractVar[AbstractEnv]
    observation_shape: eqx.AbstractVar[tuple[int, ...]]

    @abc.abstractmethod
    def observation(self, state: EnvState) -> Shaped[Array, "..."]:
        """Observation of `state` from the point of view of the player to move."""

    @abc.abstractmethod
    def rewards(self, state: EnvState) -> Float[Array, " num_players"]:
        """Reward each player received on the transition into `state`."""

    @abc.abstractmethod
    def symmetries(self) -> tuple[Symmetry, ...]:
        """`env`'s symmetries, as they act on this wrapper's observations."""

    @property
    def name(self) -> str:
        """The wrapped environment's name (opponents such as OpenSpiel's bots look the game
        up by it)."""
        return self.env.name

    @property
    def num_actions(self) -> int:
        return self.env.num_actions

    @property
    def num_players(self) -> int:
        return self.env.num_players

    @property
    def observation_dtype(self) -> jnp.dtype:
        return self.env.observation_dtype

    def init(self, key: PRNGKey) -> EnvState:
        return self.env.init(key)

    def step(
        self, state: EnvState, action: Int[Array, ""] | Float[Array, " num_actions"], key: PRNGKey
    ) -> EnvState:
        return self.env.step(state, action, key)

    def legal_action_mask(self, state: EnvState) -> Bool[Array, " num_actions"]:
        return self.env.legal_action_mask(state)

    def terminated(self, state: EnvState) -> Bool[Array, ""]:
        return self.env.terminated(state)

    def truncated(self, state: EnvState) -> Bool[Array, ""]:
        return self.env.truncated(state)

    def current_player(self, state: EnvState) -> Int[Array, ""]:
        return self.env.current_player(state)

    def action_space(self) -> DiscreteActions | BoxActions:
        return self.env.action_space()


def unwrap(env: AbstractEnv) -> AbstractEnv:
    """The game under `env`'s wrappers ([`azx.envs.AbstractEnvWrapper`][]; `env` itself
    if it has none): for code that needs the game, not what a wrapper makes of it."""
    while isinstance(env, AbstractEnvWrapper):
        env = env.env
    return env


class _AbstractChanceWrapper(AbstractEnvWrapper, AbstractChanceEnv):
    """A wrapper of a game with chance, itself an [`azx.envs.AbstractChanceEnv`][] whose
    chance methods are `env`'s: wrappers change only what is read from a state, so the
    chance, which makes the states, passes through unchanged."""

    env: eqx.AbstractVar[AbstractChanceEnv]

    @property
    def num_outcomes(self) -> int:
        return self.env.num_outcomes

    def afterstate(self, state: EnvState, action: Int[Array, ""]) -> Afterstate:
        return self.env.afterstate(state, action)

    def has_chance(self, afterstate: Afterstate) -> Bool[Array, ""]:
        return self.env.has_chance(afterstate)

    def chance_probabilities(self, afterstate: Afterstate) -> Float[Array, " num_outcomes"]:
        return self.env.chance_probabilities(afterstate)

    def apply_outcome(self, afterstate: Afterstate, outcome: Int[Array, ""]) -> EnvState:
        return self.env.apply_outcome(afterstate, outcome)

    def chance_outcome_mask(self, afterstate: Afterstate) -> Bool[Array, " num_outcomes"]:
        return self.env.chance_outcome_mask(afterstate)

    def sample_outcome(self, afterstate: Afterstate, key: PRNGKey) -> Int[Array, ""]:
        return self.env.sample_outcome(afterstate, key)


class AbstractScaleRewards(AbstractEnvWrapper):
    """What [`azx.envs.ScaleRewards`][] makes: `env` with its rewards multiplied by
    `scale`, everything else `env`'s."""

    scale: eqx.AbstractVar[float]

    @property
    def observation_shape(self) -> tuple[int, ...]:
        return self.env.observation_shape

    def observation(self, state: EnvState) -> Shaped[Array, "..."]:
        return self.env.observation(state)

    def rewards(self, state: EnvState) -> Float[Array, " num_players"]:
        return self.scale * self.env.rewards(state)

    def symmetries(self) -> tuple[Symmetry, ...]:
        return self.env.symmetries()


def _check_scale(scale: float) -> float:
    if isinstance(scale, bool) or not isinstance(scale, int | float) or not scale > 0:
        raise ValueError(f"scale must be a positive number, got {scale!r}")
    return float(scale)


class _ScaleRewards(AbstractScaleRewards):
    env: AbstractEnv
    scale: float = eqx.field(static=True)

    def __init__(self, env: AbstractEnv, scale: float):
        self.env, self.scale = env, _check_scale(scale)


class _ScaleRewardsWithChance(AbstractScaleRewards, _AbstractChanceWrapper):
    env: AbstractChanceEnv
    scale: float = eqx.field(static=True)

    def __init__(self, env: AbstractChanceEnv, scale: float):
        self.env, self.scale = env, _check_scale(scale)


def ScaleRewards(env: AbstractEnv, scale: float) -> AbstractScaleRewards:
    """An environment whose rewards are `env`'s multiplied by `scale`.

    For games with large rewards (2048's merged tiles sum to thousands per game): value
    targets of order one keep the value loss from swamping the policy loss. Everything
    else is the wrapped environment's, its chance included: wrapping a game with chance
    ([`azx.envs.AbstractChanceEnv`][]) gives one, with the game's chance methods.

    **Returns:** an [`azx.envs.AbstractScaleRewards`][] with fields `env` and `scale`.

    **Raises:** `ValueError` for a `scale` that is not a positive number.
    """
    if isinstance(env, AbstractChanceEnv):
        return _ScaleRewardsWithChance(env, scale)
    return _ScaleRewards(env, scale)


class AbstractObserveLegalMoves(AbstractEnvWrapper):
    """What [`azx.envs.ObserveLegalMoves`][] makes: `env` with the legal-action mask
    appended to its flattened observation, everything else `env`'s."""

    @property
    def observation_shape(self) -> tuple[int, ...]:
        return (math.prod(self.env.observation_shape) + self.env.num_actions,)

    def observation(self, state: EnvState) -> Shaped[Array, "..."]:
        board = jnp.ravel(self.env.observation(state))
        mask = self.env.legal_action_mask(state).astype(board.dtype)
        return jnp.concatenate([board, mask])

    def rewards(self, state: EnvState) -> Float[Array, " num_players"]:
        return self.env.rewards(state)

    def symmetries(self) -> tuple[Symmetry, ...]:
        size = math.prod(self.env.observation_shape)
        return tuple(
            Symmetry(np.concatenate([s.observation_index, size + s.action_index]), s.action_index)
            for s in self.env.symmetries()
        )


class _ObserveLegalMoves(AbstractObserveLegalMoves):
    env: AbstractEnv


class _ObserveLegalMovesWithChance(AbstractObserveLegalMoves, _AbstractChanceWrapper):
    env: AbstractChanceEnv


def ObserveLegalMoves(env: AbstractEnv) -> AbstractObserveLegalMoves:
    """An environment whose observation also says which moves are legal: `env`'s
    observation, flattened, followed by the legal-action mask.

    For games where the number and place of one's legal moves carry much of a position's
    value (othello's mobility) but take many layers to compute from the board: a network
    reads them directly. The observation is one flat vector (for networks that flatten
    their input, such as [`azx.nets.MLP`][]), of the wrapped observation's dtype.
    Symmetries carry over: the board part moves as the wrapped board does, the mask as
    the actions do. Everything else is the wrapped environment's, its chance included (as
    for [`azx.envs.ScaleRewards`][]).

    **Returns:** an [`azx.envs.AbstractObserveLegalMoves`][] with field `env`.
    """
    if isinstance(env, AbstractChanceEnv):
        return _ObserveLegalMovesWithChance(env)
    return _ObserveLegalMoves(env)
