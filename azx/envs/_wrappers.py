import functools
import math

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, Shaped

from .._types import EnvState, PRNGKey
from ._abstract import AbstractEnv, BoxActions, DiscreteActions
from ._chance import AbstractChanceEnv, Afterstate
from ._symmetry import Symmetry


class EnvWrapper(AbstractEnv):
    """An environment that is `env` in every respect; subclasses override what they change.
    The game, its state and its name stay the wrapped environment's, so code that needs
    the game itself (drawing a board, looking the game up) finds it under `env`.

    A wrapper of a game that exposes its chance ([`azx.envs.AbstractChanceEnv`][]) exposes
    it too: constructing any wrapper around one gives an instance of the wrapper's class
    that is also an `AbstractChanceEnv`, whose chance methods are `env`'s. Wrappers change
    only what is read from a state (rewards, observations), so the chance, which makes
    the states, passes through unchanged.
    """

    env: AbstractEnv

    def __new__(cls, *args, **kwargs):
        env = kwargs["env"] if "env" in kwargs else (args[0] if args else None)
        if isinstance(env, AbstractChanceEnv) and not issubclass(cls, AbstractChanceEnv):
            cls = _with_chance(cls)
        return super().__new__(cls)

    @property
    def name(self) -> str | None:
        """The wrapped environment's name, if it has one (opponents such as OpenSpiel's
        bots look the game up by it)."""
        return getattr(self.env, "name", None)

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

    def step(
        self, state: EnvState, action: Int[Array, ""] | Float[Array, " num_actions"], key: PRNGKey
    ) -> EnvState:
        return self.env.step(state, action, key)

    def observation(self, state: EnvState) -> Shaped[Array, "..."]:
        return self.env.observation(state)

    def legal_action_mask(self, state: EnvState) -> Bool[Array, " num_actions"]:
        return self.env.legal_action_mask(state)

    def rewards(self, state: EnvState) -> Float[Array, " num_players"]:
        return self.env.rewards(state)

    def terminated(self, state: EnvState) -> Bool[Array, ""]:
        return self.env.terminated(state)

    def truncated(self, state: EnvState) -> Bool[Array, ""]:
        return self.env.truncated(state)

    def current_player(self, state: EnvState) -> Int[Array, ""]:
        return self.env.current_player(state)

    def symmetries(self) -> tuple[Symmetry, ...]:
        return self.env.symmetries()

    def action_space(self) -> DiscreteActions | BoxActions:
        return self.env.action_space()


class ScaleRewards(EnvWrapper):
    """An environment whose rewards are multiplied by `scale`.

    For games with large rewards (2048's merged tiles sum to thousands per game): value
    targets of order one keep the value loss from swamping the policy loss. Everything
    else is the wrapped environment's, its chance included: wrapping a game with chance
    ([`azx.envs.AbstractChanceEnv`][]) gives one, with the game's chance methods.
    """

    scale: float = eqx.field(static=True)

    def __init__(self, env: AbstractEnv, scale: float):
        if isinstance(scale, bool) or not isinstance(scale, int | float) or not scale > 0:
            raise ValueError(f"scale must be a positive number, got {scale!r}")
        self.env = env
        self.scale = float(scale)

    def rewards(self, state: EnvState) -> Float[Array, " num_players"]:
        return self.scale * self.env.rewards(state)


class ObserveLegalMoves(EnvWrapper):
    """An environment whose observation also says which moves are legal: the wrapped
    observation, flattened, followed by the legal-action mask.

    For games where the number and place of one's legal moves carry much of a position's
    value (othello's mobility) but take many layers to compute from the board: a network
    reads them directly. The observation is one flat vector (for networks that flatten
    their input, such as [`azx.nets.MLP`][]), of the wrapped observation's dtype.
    Symmetries carry over: the board part moves as the wrapped board does, the mask as
    the actions do. Everything else is the wrapped environment's, its chance included (as
    for [`azx.envs.ScaleRewards`][]).
    """

    @property
    def observation_shape(self) -> tuple[int, ...]:
        return (math.prod(self.env.observation_shape) + self.env.num_actions,)

    def observation(self, state: EnvState) -> Shaped[Array, "..."]:
        board = jnp.ravel(self.env.observation(state))
        mask = self.env.legal_action_mask(state).astype(board.dtype)
        return jnp.concatenate([board, mask])

    def symmetries(self) -> tuple[Symmetry, ...]:
        size = math.prod(self.env.observation_shape)
        return tuple(
            Symmetry(np.concatenate([s.observation_index, size + s.action_index]), s.action_index)
            for s in self.env.symmetries()
        )


class _ChanceOfWrapped(AbstractChanceEnv):
    """The chance methods of a wrapper's `env`, for `EnvWrapper`'s classes that wrap a game
    with chance."""

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


@functools.cache
def _with_chance(wrapper: type) -> type:
    # A subclass per wrapper class, made once: it adds the chance methods and overrides
    # none of the wrapper's own, so which method runs stays plain. Named as the wrapper,
    # so that it prints as the wrapper does.
    return type(wrapper)(
        wrapper.__name__,
        (wrapper, _ChanceOfWrapped),
        {"__module__": wrapper.__module__, "__qualname__": wrapper.__qualname__},
    )
