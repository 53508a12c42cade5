import functools
import inspect
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, Shaped

from .._numerics import third_party_numerics
from .._types import EnvState, PRNGKey
from ._abstract import AbstractEnv
from ._symmetry import Symmetry, dihedral, mirror


def pgx_names() -> tuple[str, ...]:
    """Every environment pgx offers."""
    return tuple(_pgx().available_envs())


def _pgx():
    # Imported on first use: pgx imports flax where it is installed (gymnax brings it),
    # which takes seconds and loads rich, and `import azx` should not pay for that.
    import pgx

    return pgx


# Constructor arguments that `pgx.make` itself passes; user keywords override them.
_PGX_MAKE_DEFAULTS: dict[str, dict[str, object]] = {
    "go_9x9": {"size": 9, "komi": 7.5},
    "go_19x19": {"size": 19, "komi": 7.5},
}


@functools.cache
def _pgx_env(name: str, kwargs: tuple[tuple[str, object], ...]) -> Any:
    # One pgx object per configuration, so that equal configurations give equal (static)
    # Module fields and jitted functions do not recompile for a second `make` call.
    # pgx builds default arrays when a game module is first imported; evaluate them
    # eagerly even if `make` is called while tracing, or they would leak as tracers.
    with jax.ensure_compile_time_eval():
        env = _pgx().make(name)
        if kwargs:
            env = type(env)(**(_PGX_MAKE_DEFAULTS.get(name, {}) | dict(kwargs)))
    return env


def mark_truncated(state: EnvState, max_episode_steps: int | None) -> EnvState:
    """The pgx `state`, marked `truncated` if it has not terminated after
    `max_episode_steps` steps (never, for `None`)."""
    if max_episode_steps is None:
        return state
    out_of_time = (state._step_count >= max_episode_steps) & ~state.terminated
    return state.replace(truncated=state.truncated | out_of_time)


class PgxEnv(AbstractEnv):
    """Adapter from a pgx environment to [`azx.envs.AbstractEnv`][].

    The state is the pgx state itself. Sizes are read once at construction (pgx
    recomputes them by running `init` on every access).
    """

    name: str = eqx.field(static=True)
    env: Any = eqx.field(static=True)  # a pgx.Env
    max_episode_steps: int | None = eqx.field(static=True)
    num_actions: int = eqx.field(static=True)
    num_players: int = eqx.field(static=True)
    observation_shape: tuple[int, ...] = eqx.field(static=True)
    observation_dtype: jnp.dtype = eqx.field(static=True)

    def __init__(self, env: Any, *, max_episode_steps: int | None = None):
        """**Arguments:**

        - `env`: a pgx environment, e.g. `pgx.make("connect_four")`.
        - `max_episode_steps`: if given, episodes that have not terminated after this many
          steps are marked `truncated` (pgx itself never truncates).
        """
        if max_episode_steps is not None and (
            isinstance(max_episode_steps, bool)
            or not isinstance(max_episode_steps, int)
            or max_episode_steps < 1
        ):
            raise ValueError(
                f"max_episode_steps must be a positive int or None, got {max_episode_steps!r}"
            )
        with third_party_numerics():  # shapes only: nothing is computed
            state = jax.eval_shape(env.init, jax.random.key(0))
        self.name = env.id
        self.env = env
        self.max_episode_steps = max_episode_steps
        self.num_actions = int(state.legal_action_mask.shape[0])
        self.num_players = int(env.num_players)
        self.observation_shape = tuple(int(d) for d in state.observation.shape)
        self.observation_dtype = jnp.dtype(state.observation.dtype)

    def init(self, key: PRNGKey) -> EnvState:
        with third_party_numerics():
            state = self.env.init(key)
        # Some pgx games leave a Python scalar in a fresh state (othello's `turn`); as an
        # array it has the dtype and shape that `step` gives it.
        return jax.tree.map(jnp.asarray, state)

    def step(self, state: EnvState, action: Int[Array, ""], key: PRNGKey) -> EnvState:
        # pgx passes `key` on to the game; games without chance ignore it.
        with third_party_numerics():
            state = self.env.step(state, action, key)
        return mark_truncated(state, self.max_episode_steps)

    def observation(self, state: EnvState) -> Shaped[Array, "..."]:
        return state.observation

    def legal_action_mask(self, state: EnvState) -> Bool[Array, " num_actions"]:
        return state.legal_action_mask

    def rewards(self, state: EnvState) -> Float[Array, " num_players"]:
        return state.rewards

    def terminated(self, state: EnvState) -> Bool[Array, ""]:
        return state.terminated

    def truncated(self, state: EnvState) -> Bool[Array, ""]:
        return state.truncated

    def current_player(self, state: EnvState) -> Int[Array, ""]:
        return state.current_player

    def symmetries(self) -> tuple[Symmetry, ...]:
        """Connect four: the left-right mirror. Tic-tac-toe, othello and go: the 8
        rotations and reflections of the board (pass maps to itself). Others: none."""
        shape = self.observation_shape
        if self.name == "connect_four":
            return mirror(*shape)
        if self.name in ("tic_tac_toe", "othello") or self.name.startswith("go_"):
            size, _, channels = shape
            return dihedral(size, channels, extra_actions=self.num_actions - size * size)
        return ()


def make_pgx(name: str, *, max_episode_steps: int | None = None, **kwargs) -> PgxEnv:
    """The pgx environment `name` (one of `pgx_names()`) as a [`azx.envs.PgxEnv`][];
    `**kwargs` go to the pgx environment's constructor."""
    if kwargs:
        cls = type(_pgx().make(name))
        params = inspect.signature(cls.__init__).parameters
        accepted = [p for p in params if p != "self"]
        unknown = sorted(set(kwargs) - set(accepted))
        if unknown:
            raise ValueError(
                f"environment {name!r} takes no argument(s) {', '.join(unknown)}; "
                f"it accepts: {', '.join(accepted) or 'none'}"
            )
    try:
        env = _pgx_env(name, tuple(sorted(kwargs.items())))
    except TypeError as error:  # unhashable keyword values
        raise ValueError(f"keyword arguments for {name!r} must be hashable: {error}") from None
    return PgxEnv(env, max_episode_steps=max_episode_steps)
