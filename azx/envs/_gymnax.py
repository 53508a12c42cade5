import dataclasses
import functools
import inspect
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PyTree

from .._numerics import third_party_numerics
from .._types import EnvState, PRNGKey
from .._validate import check_positive_int
from ._abstract import BoxActions, DiscreteActions
from ._recorded import RecordedStepEnv


# Registered gymnax environments that `make` does not offer: MNISTBandit downloads MNIST
# when it is constructed.
_EXCLUDED = frozenset({"MNISTBandit-bsuite"})


def _import_gymnax() -> Any:
    try:
        # gymnax builds arrays at import; its code expects JAX's default numerics.
        with third_party_numerics():
            import gymnax
    except ImportError as error:
        raise ImportError(
            "gymnax environments need gymnax, which cannot be imported "
            f'({error}): pip install "azx[envs]"'
        ) from error
    return gymnax


@functools.cache
def _gymnax_env(name: str, options: tuple[tuple[str, object], ...]) -> tuple[Any, Any]:
    # One gymnax object (and parameters) per configuration, so that equal configurations
    # give equal adapters and jitted functions do not recompile for a second `make`. Built
    # under compile-time evaluation: their arrays must not leak as tracers when `make` is
    # called while tracing.
    gymnax = _import_gymnax()
    with jax.ensure_compile_time_eval(), third_party_numerics():
        env, params = gymnax.make(name)
        fields = {field.name for field in dataclasses.fields(params)}
        constructor_options = {k: v for k, v in options if k not in fields}
        if constructor_options:
            env, params = gymnax.make(name, **constructor_options)
        params = params.replace(**{k: v for k, v in options if k in fields})
    return env, params


def gymnax_names(*, discrete: bool = True) -> tuple[str, ...]:
    """The gymnax environments (without the `gymnax:` prefix): those with discrete
    actions, or with `discrete=False` every one `make` tries (which costs no
    construction)."""
    gymnax = _import_gymnax()
    names = tuple(name for name in gymnax.registered_envs if name not in _EXCLUDED)
    if not discrete:
        return names
    return tuple(name for name in names if _is_discrete(gymnax, *_gymnax_env(name, ())))


def _is_discrete(gymnax: Any, env: Any, params: Any) -> bool:
    return isinstance(env.action_space(params), gymnax.environments.spaces.Discrete)


def _box_actions(gymnax: Any, env: Any, params: Any) -> BoxActions | None:
    """The bounds of a one-dimensional `Box` action space (`None` for any other)."""
    space = env.action_space(params)
    if not isinstance(space, gymnax.environments.spaces.Box) or len(space.shape) != 1:
        return None
    low = jnp.broadcast_to(jnp.asarray(space.low, jnp.float32), space.shape)
    high = jnp.broadcast_to(jnp.asarray(space.high, jnp.float32), space.shape)
    return BoxActions([float(x) for x in low], [float(x) for x in high])


def _accepted_options(env: Any, params: Any) -> list[str]:
    """Keywords for one gymnax environment: its `EnvParams` fields, then its constructor's."""
    fields = [field.name for field in dataclasses.fields(params)]
    signature = inspect.signature(type(env).__init__).parameters.values()
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    constructor = [p.name for p in signature if p.name != "self" and p.kind in named]
    return fields + [name for name in constructor if name not in fields]


def _with_dtypes(tree: PyTree, like: PyTree) -> PyTree:
    """`tree` as arrays of `like`'s dtypes (strongly typed), so that every state of an
    episode has the same leaves: gymnax leaves Python scalars in fresh states."""

    def cast(leaf, template):
        if jax.dtypes.issubdtype(template.dtype, jax.dtypes.prng_key):
            return leaf
        return jnp.asarray(leaf, template.dtype)

    return jax.tree.map(cast, tree, like)


class GymnaxState(eqx.Module):
    """State of a [`azx.envs.GymnaxEnv`][]: gymnax's state and what the last step gave."""

    env_state: PyTree
    observation: Float[Array, "..."]
    reward: Float[Array, ""]
    terminated: Bool[Array, ""]
    truncated: Bool[Array, ""]


class GymnaxEnv(RecordedStepEnv):
    """Adapter from a gymnax environment with discrete actions, or continuous actions in a
    one-dimensional box (`Pendulum-v1`, `MountainCarContinuous-v0`), to
    [`azx.envs.AbstractEnv`][].

    The environment is named (as in `gymnax.make`) rather than passed as an object:
    gymnax parameters may hold arrays, which cannot be static data, so the adapter keeps
    the name and keywords and builds the gymnax object once per configuration. `env` and
    `params` return it.

    Steps go through gymnax's `step_env`, which never resets: `terminated` is its
    termination, `truncated` its `is_truncated` (the time limit) where the episode did not
    terminate on the same step. Observations are float32. The state is a `GymnaxState`
    and keeps the final observation of a finished episode.
    """

    name: str = eqx.field(static=True)
    options: tuple[tuple[str, object], ...] = eqx.field(static=True)
    max_episode_steps: int = eqx.field(static=True)
    num_actions: int = eqx.field(static=True)
    num_players: int = eqx.field(static=True)
    observation_shape: tuple[int, ...] = eqx.field(static=True)
    observation_dtype: jnp.dtype = eqx.field(static=True)
    box_actions: BoxActions | None = eqx.field(static=True)
    """The bounds of continuous actions (`None`: discrete actions)."""

    def __init__(self, name: str, *, max_episode_steps: int | None = None, **kwargs: object):
        """**Arguments:**

        - `name`: a gymnax environment with discrete or box actions, e.g.
          `"CartPole-v1"`, `"Breakout-MinAtar"`, `"Pendulum-v1"` (see
          `gymnax.registered_envs`).
        - `max_episode_steps`: the time limit, in steps; sets gymnax's
          `max_steps_in_episode` (default: gymnax's own limit for the environment).
        - `**kwargs`: fields of the environment's `EnvParams` (e.g.
          `max_steps_in_episode`, `gravity`), or arguments of its constructor (e.g.
          `use_minimal_action_set` for the MinAtar games).
        """
        gymnax = _import_gymnax()
        if name not in gymnax.registered_envs or name in _EXCLUDED:
            raise ValueError(
                f"unknown gymnax environment {name!r}; available: {', '.join(gymnax_names())}"
            )
        default_env, default_params = _gymnax_env(name, ())
        accepted = _accepted_options(default_env, default_params)
        unknown = sorted(set(kwargs) - set(accepted))
        if unknown:
            raise ValueError(
                f"environment {name!r} takes no argument(s) {', '.join(unknown)}; "
                f"it accepts: max_episode_steps, {', '.join(accepted)}"
            )
        if max_episode_steps is not None:
            check_positive_int("max_episode_steps", max_episode_steps)
            if "max_steps_in_episode" in kwargs:
                raise ValueError(
                    "give max_episode_steps or max_steps_in_episode, not both (they are the "
                    "same time limit)"
                )
            kwargs["max_steps_in_episode"] = max_episode_steps
        options = tuple(sorted(kwargs.items()))
        try:
            env, params = _gymnax_env(name, options)
        except TypeError as error:  # unhashable keyword values
            raise ValueError(f"keyword arguments for {name!r} must be hashable: {error}") from None
        box_actions = (
            None if _is_discrete(gymnax, env, params) else _box_actions(gymnax, *(env, params))
        )
        if box_actions is None and not _is_discrete(gymnax, env, params):
            raise ValueError(
                f"gymnax environment {name!r} has {type(env.action_space(params)).__name__} "
                "actions; azx adapts discrete actions and one-dimensional Box actions"
            )
        limit = params.max_steps_in_episode
        if isinstance(limit, float) and limit.is_integer():  # BernoulliBandit's is 100.0
            limit = int(limit)
        check_positive_int("max_steps_in_episode", limit)
        with third_party_numerics():  # shapes only: nothing is computed
            reset = functools.partial(env.reset_env, params=params)
            observation, _ = jax.eval_shape(reset, jax.random.key(0))
        self.name = name
        self.options = options
        self.max_episode_steps = limit
        self.box_actions = box_actions
        self.num_actions = (
            int(env.action_space(params).n) if box_actions is None else box_actions.size
        )
        self.num_players = 1
        self.observation_shape = tuple(int(d) for d in observation.shape)
        self.observation_dtype = jnp.dtype(jnp.float32)

    @property
    def env(self) -> Any:
        """The gymnax environment object."""
        return _gymnax_env(self.name, self.options)[0]

    @property
    def params(self) -> Any:
        """The gymnax `EnvParams` the environment runs with."""
        return _gymnax_env(self.name, self.options)[1]

    def init(self, key: PRNGKey) -> EnvState:
        env, params = self.env, self.params
        with third_party_numerics():
            observation, env_state = env.reset_env(key, params)
            # The dtypes a step gives (the parameters stay Python values, as in `step`).
            step = functools.partial(env.step_env, params=params)
            action = self._action_shape_dtype()
            stepped = jax.eval_shape(step, key, env_state, action)[1]
        return GymnaxState(
            env_state=_with_dtypes(env_state, stepped),
            observation=jnp.asarray(observation, jnp.float32),
            reward=jnp.zeros((), jnp.float32),
            terminated=jnp.zeros((), jnp.bool_),
            truncated=jnp.zeros((), jnp.bool_),
        )

    def action_space(self) -> DiscreteActions | BoxActions:
        return DiscreteActions(self.num_actions) if self.box_actions is None else self.box_actions

    def _action_shape_dtype(self) -> jax.ShapeDtypeStruct:
        if self.box_actions is None:
            return jax.ShapeDtypeStruct((), jnp.int32)
        return jax.ShapeDtypeStruct((self.num_actions,), jnp.float32)

    def step(
        self, state: EnvState, action: Int[Array, ""] | Float[Array, " num_actions"], key: PRNGKey
    ) -> EnvState:
        env, params = self.env, self.params
        # `step_env`, not gymnax's `step`: that one resets finished episodes.
        with third_party_numerics():
            observation, env_state, reward, terminated, _ = env.step_env(
                key, state.env_state, action, params
            )
            out_of_time = env.is_truncated(env_state, params)
        terminated = jnp.reshape(jnp.asarray(terminated, jnp.bool_), ())
        out_of_time = jnp.reshape(jnp.asarray(out_of_time, jnp.bool_), ())
        stepped = GymnaxState(
            env_state=_with_dtypes(env_state, state.env_state),
            observation=jnp.asarray(observation, jnp.float32),
            reward=jnp.reshape(jnp.asarray(reward, jnp.float32), ()),
            terminated=terminated,
            truncated=out_of_time & ~terminated,  # termination wins a tie
        )
        return self.hold_finished(state, stepped)
