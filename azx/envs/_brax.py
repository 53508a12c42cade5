import contextlib
import functools
import warnings
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PyTree

from .._numerics import third_party_numerics
from .._types import EnvState, PRNGKey
from .._validate import check_positive_int
from ._abstract import BoxActions
from ._recorded import RecordedStepEnv


@contextlib.contextmanager
def _quiet():
    """brax's notices hidden: that it and jaxopt are no longer maintained (on import and on
    building every environment), and the deprecations of MuJoCo's API it still uses (on
    tracing a reset or a step). A user of the adapter cannot act on them; the
    documentation says once that brax is no longer maintained."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Brax System", UserWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


def _import_brax_envs() -> Any:
    try:
        with third_party_numerics(), _quiet():
            from brax import envs
    except ImportError as error:
        raise ImportError(
            f"brax environments need brax, which cannot be imported ({error}): pip install brax"
        ) from error
    return envs


def brax_names() -> tuple[str, ...]:
    """The brax environments (without the `brax:` prefix), as brax registers them."""
    # brax has no public listing: its registry is the dictionary `get_environment` reads.
    return tuple(sorted(_import_brax_envs()._envs))


@functools.cache
def _brax_env(name: str, backend: str) -> Any:
    # One brax object per configuration, built outside any trace (it holds the physics
    # system's arrays), so that equal adapters share it.
    envs = _import_brax_envs()
    with jax.ensure_compile_time_eval(), third_party_numerics(), _quiet():
        return envs.get_environment(name, backend=backend)


class BraxState(eqx.Module):
    """State of a [`azx.envs.BraxEnv`][]: brax's state, the steps taken, and what the last
    step gave."""

    brax_state: PyTree
    steps: Int[Array, ""]
    observation: Float[Array, " observation_size"]
    reward: Float[Array, ""]
    terminated: Bool[Array, ""]
    truncated: Bool[Array, ""]


class BraxEnv(RecordedStepEnv):
    """Adapter from a brax environment (`ant`, `hopper`, `inverted_pendulum`, ...) to
    [`azx.envs.AbstractEnv`][]: continuous actions in `[-1, 1]` per component.

    The environment is named rather than passed as an object: brax environments hold the
    physics system's arrays, which cannot be static data, so the adapter keeps the name and
    backend and builds the brax object once per configuration (`env` returns it). brax's
    own `step` neither resets nor truncates; the adapter counts steps and truncates at
    `max_episode_steps` where the episode did not terminate on the same step (brax's
    training wrappers do the same with their `episode_length`). A finished episode stays
    as it ended, with zero reward.
    """

    name: str = eqx.field(static=True)
    backend: str = eqx.field(static=True)
    max_episode_steps: int = eqx.field(static=True)
    num_actions: int = eqx.field(static=True)
    num_players: int = eqx.field(static=True)
    observation_shape: tuple[int, ...] = eqx.field(static=True)
    observation_dtype: jnp.dtype = eqx.field(static=True)

    def __init__(self, name: str, *, backend: str = "generalized", max_episode_steps: int = 1000):
        """**Arguments:**

        - `name`: a brax environment, e.g. `"inverted_pendulum"`, `"hopper"`, `"ant"`.
        - `backend`: brax's physics pipeline: `"generalized"`, `"positional"`, `"spring"`
          or `"mjx"`.
        - `max_episode_steps`: the time limit, in steps (brax's training default, 1000).
        """
        names = brax_names()
        if name not in names:
            raise ValueError(f"unknown brax environment {name!r}; available: {', '.join(names)}")
        backends = ("generalized", "positional", "spring", "mjx")
        if backend not in backends:
            raise ValueError(f"backend must be one of {', '.join(backends)}, got {backend!r}")
        check_positive_int("max_episode_steps", max_episode_steps)
        env = _brax_env(name, backend)
        self.name = name
        self.backend = backend
        self.max_episode_steps = max_episode_steps
        with third_party_numerics(), _quiet():  # brax resets an environment to tell its sizes
            num_actions, observation_size = int(env.action_size), int(env.observation_size)
        self.num_actions = num_actions
        self.num_players = 1
        self.observation_shape = (observation_size,)
        self.observation_dtype = jnp.dtype(jnp.float32)

    @property
    def env(self) -> Any:
        """The brax environment object."""
        return _brax_env(self.name, self.backend)

    def action_space(self) -> BoxActions:
        return BoxActions([-1.0] * self.num_actions, [1.0] * self.num_actions)

    def init(self, key: PRNGKey) -> EnvState:
        with third_party_numerics(), _quiet():
            state = self.env.reset(jax.random.key_data(key) if _is_typed(key) else key)
        return BraxState(
            brax_state=state,
            steps=jnp.zeros((), jnp.int32),
            observation=jnp.asarray(state.obs, jnp.float32),
            reward=jnp.zeros((), jnp.float32),
            terminated=jnp.zeros((), jnp.bool_),
            truncated=jnp.zeros((), jnp.bool_),
        )

    def step(self, state: EnvState, action: Float[Array, " num_actions"], key: PRNGKey) -> EnvState:
        del key  # brax's dynamics are deterministic
        with third_party_numerics(), _quiet():
            next_state = self.env.step(state.brax_state, action)
        steps = state.steps + 1
        terminated = jnp.reshape(next_state.done > 0, ())
        stepped = BraxState(
            brax_state=next_state,
            steps=steps,
            observation=jnp.asarray(next_state.obs, jnp.float32),
            reward=jnp.reshape(jnp.asarray(next_state.reward, jnp.float32), ()),
            terminated=terminated,
            truncated=(steps >= self.max_episode_steps) & ~terminated,
        )
        return self.hold_finished(state, stepped)


def _is_typed(key: PRNGKey) -> bool:
    return jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
