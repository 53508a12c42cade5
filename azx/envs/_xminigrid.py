import dataclasses
import functools
import os
from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, Shaped

from .._numerics import third_party_numerics
from .._types import EnvState, PRNGKey
from .._validate import check_positive_int
from ._abstract import AbstractEnv


# xminigrid.types.StepType.LAST: the step type of the last step of an episode.
_LAST = 2

# A ruleset as static data: goal, rules and init_tiles, each as (shape, flat values).
_FrozenRuleSet = tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]


def _import_xminigrid() -> Any:
    try:
        # xminigrid builds arrays at import; its code expects JAX's default numerics.
        with third_party_numerics():
            import xminigrid
            import xminigrid.benchmarks
            import xminigrid.types
    except ImportError as error:
        raise ImportError(
            "xminigrid environments need xminigrid, which cannot be imported "
            f'({error}): pip install "azx[envs]"'
        ) from error
    return xminigrid


def xminigrid_names() -> tuple[str, ...]:
    """The xminigrid environments (without the `xminigrid:` prefix)."""
    return tuple(_import_xminigrid().registered_environments())


def _encoding(name: str, array: Any, shape: tuple[int | None, ...]) -> np.ndarray:
    """`array` (anything numpy reads as an array) as uint8 of `shape` (None: any size), or
    a ValueError naming it."""
    values = np.asarray(array)
    fits = values.ndim == len(shape) and all(
        want is None or got == want for got, want in zip(values.shape, shape, strict=True)
    )
    if not fits or not np.issubdtype(values.dtype, np.integer):
        raise ValueError(
            f"{name} must be integers of shape {shape}, got {values.dtype}{values.shape}"
        )
    if values.size and (values.min() < 0 or values.max() > 255):
        raise ValueError(f"{name} must be in [0, 255], got [{values.min()}, {values.max()}]")
    return values.astype(np.uint8)


def xland_ruleset(goal: Any, rules: Sequence[Any] = (), init_tiles: Sequence[Any] = ()) -> Any:
    """A ruleset for the XLand environments, built in code from xminigrid's own goal, rule
    and tile objects, for `azx.envs.make("xminigrid:XLand-...", ruleset=...)`.

    **Arguments:**

    - `goal`: an xminigrid goal, e.g. `xminigrid.core.goals.AgentHoldGoal(tile=...)`.
    - `rules`: xminigrid rules (`xminigrid.core.rules`), applied after every action.
      None: the world changes only by the agent's actions.
    - `init_tiles`: the objects placed at random on the grid at the start, each a
      `(tile, colour)` pair, e.g. `(Tiles.BALL, Colors.RED)` from
      `xminigrid.core.constants`, or a row of `xminigrid.core.constants.TILES_REGISTRY`.

    **Returns:** an `xminigrid.types.RuleSet`, encoded and padded as xminigrid's
    benchmarks are (no rules: one `EmptyRule`; no tiles: one empty tile).
    """
    xminigrid = _import_xminigrid()
    from xminigrid.core.goals import BaseGoal
    from xminigrid.core.rules import BaseRule, EmptyRule

    if not isinstance(goal, BaseGoal):
        raise ValueError(f"goal must be an xminigrid goal (xminigrid.core.goals), got {goal!r}")
    rules = tuple(rules) or (EmptyRule(),)
    for rule in rules:
        if not isinstance(rule, BaseRule):
            raise ValueError(f"rules must be xminigrid rules (xminigrid.core.rules), got {rule!r}")
    tiles = [_encoding(f"init_tiles[{i}]", tile, (2,)) for i, tile in enumerate(init_tiles)]
    with jax.ensure_compile_time_eval(), third_party_numerics():
        return xminigrid.types.RuleSet(
            goal=jnp.asarray(goal.encode(), jnp.uint8),
            rules=jnp.stack([rule.encode() for rule in rules]).astype(jnp.uint8),
            init_tiles=jnp.asarray(np.stack(tiles or [np.zeros(2, np.uint8)])),
        )


def _freeze(ruleset: Any) -> _FrozenRuleSet:
    """`ruleset` as Python integers: hashable static data."""
    arrays = (
        _encoding("ruleset.goal", ruleset.goal, (None,)),
        _encoding("ruleset.rules", ruleset.rules, (None, None)),
        _encoding("ruleset.init_tiles", ruleset.init_tiles, (None, 2)),
    )
    return tuple((array.shape, tuple(array.reshape(-1).tolist())) for array in arrays)


@functools.cache
def _xminigrid_env(
    name: str, options: tuple[tuple[str, object], ...], ruleset: _FrozenRuleSet | None
) -> tuple[Any, Any]:
    # One xminigrid object (and parameters) per configuration, so that equal
    # configurations give equal adapters and jitted functions do not recompile. Built
    # under compile-time evaluation: arrays must not leak as tracers when `make` is called
    # while tracing.
    xminigrid = _import_xminigrid()
    with jax.ensure_compile_time_eval(), third_party_numerics():
        env, params = xminigrid.make(name, **dict(options))
        if ruleset is not None:
            goal, rules, init_tiles = (
                jnp.asarray(np.asarray(values, np.uint8).reshape(shape))
                for shape, values in ruleset
            )
            params = params.replace(
                ruleset=xminigrid.types.RuleSet(goal=goal, rules=rules, init_tiles=init_tiles)
            )
    return env, params


class XMinigridEnv(AbstractEnv):
    """Adapter from an xminigrid (XLand-MiniGrid) environment to
    [`azx.envs.AbstractEnv`][].

    The state is xminigrid's `TimeStep` itself; the observation is its symbolic view, a
    uint8 `[view_size, view_size, 2]` grid of (tile, colour). xminigrid marks the last
    step of an episode with step type `LAST` and discount 0 when the goal was reached
    (`terminated`) or 1 when time ran out (`truncated`), so reaching the goal on the last
    allowed step is termination. `step` never resets.

    The environment is named, as in `xminigrid.make`, and the ruleset of an XLand
    environment is kept as Python integers: the adapter is static data, and equal
    configurations compare equal (jitted functions do not recompile). `env` and `params`
    return the xminigrid objects.
    """

    name: str = eqx.field(static=True)
    options: tuple[tuple[str, object], ...] = eqx.field(static=True)
    ruleset: _FrozenRuleSet | None = eqx.field(static=True)
    max_episode_steps: int = eqx.field(static=True)
    num_actions: int = eqx.field(static=True)
    num_players: int = eqx.field(static=True)
    observation_shape: tuple[int, ...] = eqx.field(static=True)
    observation_dtype: jnp.dtype = eqx.field(static=True)

    def __init__(
        self,
        name: str,
        *,
        ruleset: Any = None,
        benchmark_path: str | os.PathLike | None = None,
        ruleset_id: int | None = None,
        max_episode_steps: int | None = None,
        **kwargs: object,
    ):
        """**Arguments:**

        - `name`: an xminigrid environment, e.g. `"MiniGrid-Empty-6x6"`,
          `"XLand-MiniGrid-R1-9x9"` (see `xminigrid.registered_environments()`).
        - `ruleset`: XLand only: an `xminigrid.types.RuleSet`, e.g. from
          [`azx.envs.xland_ruleset`][].
        - `benchmark_path`, `ruleset_id`: XLand only, instead of `ruleset`: ruleset number
          `ruleset_id` of the benchmark file at `benchmark_path`, as
          `xminigrid.benchmarks.load_benchmark_from_path` reads it (xminigrid's
          `load_benchmark` downloads these files).
        - `max_episode_steps`: the time limit, in steps; sets xminigrid's `max_steps`
          (default: xminigrid's own limit for the environment).
        - `**kwargs`: fields of the environment's parameters, e.g. `view_size`,
          `max_steps`.
        """
        xminigrid = _import_xminigrid()
        if name not in xminigrid.registered_environments():
            names = ", ".join(xminigrid_names())
            raise ValueError(f"unknown xminigrid environment {name!r}; available: {names}")
        _, default_params = _xminigrid_env(name, (), None)
        is_xland = hasattr(default_params, "ruleset")
        fields = [f.name for f in dataclasses.fields(default_params) if f.name != "ruleset"]
        own = ["max_episode_steps"]
        unknown = sorted(set(kwargs) - set(fields))
        if is_xland:
            own += ["ruleset", "benchmark_path", "ruleset_id"]
        else:
            given = {"ruleset": ruleset, "benchmark_path": benchmark_path, "ruleset_id": ruleset_id}
            unknown += [key for key, value in given.items() if value is not None]
        if unknown:
            raise ValueError(
                f"environment {name!r} takes no argument(s) {', '.join(unknown)}; "
                f"it accepts: {', '.join(own + fields)}"
            )
        if max_episode_steps is not None:
            check_positive_int("max_episode_steps", max_episode_steps)
            if "max_steps" in kwargs:
                raise ValueError(
                    "give max_episode_steps or max_steps, not both (they are the same time limit)"
                )
            kwargs["max_steps"] = max_episode_steps
        frozen = None
        if is_xland:
            frozen = _freeze(_xland_ruleset_argument(name, ruleset, benchmark_path, ruleset_id))
        options = tuple(sorted(kwargs.items()))
        try:
            env, params = _xminigrid_env(name, options, frozen)
        except TypeError as error:  # unhashable keyword values
            raise ValueError(f"keyword arguments for {name!r} must be hashable: {error}") from None
        check_positive_int("max_steps", params.max_steps)
        with third_party_numerics():  # shapes only: nothing is computed
            timestep = jax.eval_shape(functools.partial(env.reset, params), jax.random.key(0))
        self.name = name
        self.options = options
        self.ruleset = frozen
        self.max_episode_steps = params.max_steps
        self.num_actions = int(env.num_actions(params))
        self.num_players = 1
        self.observation_shape = tuple(int(d) for d in timestep.observation.shape)
        self.observation_dtype = jnp.dtype(timestep.observation.dtype)

    @property
    def env(self) -> Any:
        """The xminigrid environment object."""
        return _xminigrid_env(self.name, self.options, self.ruleset)[0]

    @property
    def params(self) -> Any:
        """The xminigrid parameters the environment runs with (for XLand, with its ruleset)."""
        return _xminigrid_env(self.name, self.options, self.ruleset)[1]

    def init(self, key: PRNGKey) -> EnvState:
        with third_party_numerics():
            return self.env.reset(self.params, key)

    def step(self, state: EnvState, action: Int[Array, ""], key: PRNGKey) -> EnvState:
        del key  # xminigrid keeps its random key in its state
        with third_party_numerics():
            stepped = self.env.step(self.params, state, action)
        # A finished episode stays as it ended, with zero reward.
        done = self.terminated(state) | self.truncated(state)
        finished = state.replace(reward=jnp.zeros_like(state.reward))
        return jax.tree.map(lambda old, new: jnp.where(done, old, new), finished, stepped)

    def observation(self, state: EnvState) -> Shaped[Array, "..."]:
        return state.observation

    def legal_action_mask(self, state: EnvState) -> Bool[Array, " num_actions"]:
        return jnp.ones(self.num_actions, jnp.bool_)

    def rewards(self, state: EnvState) -> Float[Array, " num_players"]:
        return jnp.reshape(jnp.asarray(state.reward, jnp.float32), (1,))

    def terminated(self, state: EnvState) -> Bool[Array, ""]:
        return (state.step_type == _LAST) & (state.discount == 0.0)

    def truncated(self, state: EnvState) -> Bool[Array, ""]:
        return (state.step_type == _LAST) & (state.discount != 0.0)

    def current_player(self, state: EnvState) -> Int[Array, ""]:
        return jnp.zeros((), jnp.int32)


def _xland_ruleset_argument(
    name: str, ruleset: Any, benchmark_path: str | os.PathLike | None, ruleset_id: int | None
) -> Any:
    """The ruleset an XLand environment runs: `ruleset`, or one read from a benchmark file."""
    xminigrid = _import_xminigrid()
    if ruleset is not None:
        if benchmark_path is not None or ruleset_id is not None:
            raise ValueError("give ruleset, or benchmark_path and ruleset_id, not both")
        if not isinstance(ruleset, xminigrid.types.RuleSet):
            raise ValueError(
                "ruleset must be an xminigrid.types.RuleSet (azx.envs.xland_ruleset builds "
                f"one), got {type(ruleset).__name__}"
            )
        return ruleset
    if benchmark_path is None or ruleset_id is None:
        raise ValueError(
            f"{name!r} needs a ruleset: ruleset=azx.envs.xland_ruleset(goal, rules, "
            "init_tiles), or benchmark_path=FILE and ruleset_id=N for a benchmark file "
            "(xminigrid.benchmarks.load_benchmark downloads them)"
        )
    with jax.ensure_compile_time_eval(), third_party_numerics():
        benchmark = xminigrid.benchmarks.load_benchmark_from_path(benchmark_path)
        count = benchmark.num_rulesets()
        if isinstance(ruleset_id, bool) or not isinstance(ruleset_id, int):
            raise ValueError(f"ruleset_id must be an int, got {ruleset_id!r}")
        if not 0 <= ruleset_id < count:
            raise ValueError(
                f"ruleset_id must be an int in [0, {count}) for the benchmark at "
                f"{benchmark_path!r}, got {ruleset_id}"
            )
        return benchmark.get_ruleset(ruleset_id)
