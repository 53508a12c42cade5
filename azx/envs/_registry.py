import inspect
from collections.abc import Callable

from ._abstract import AbstractEnv
from ._brax import BraxEnv
from ._dice import DiceRace
from ._gymnax import GymnaxEnv, gymnax_names
from ._pgx import make_pgx, pgx_names
from ._pgx_chance import ADAPTER_OPTIONS, expose_chance
from ._wrappers import ObserveLegalMoves, ScaleRewards
from ._xminigrid import XMinigridEnv, xminigrid_names


# Environments made by name that no library provides: azx's own (a game with an exact
# solution, for Stochastic MuZero's preset) and those registered by user code
# (`register`): name -> the function that makes one.
_REGISTERED: dict[str, Callable[..., AbstractEnv]] = {"dice_race": DiceRace}


def register(name: str, make_env: Callable[..., AbstractEnv]) -> None:
    """Make your own environment known to [`azx.envs.make`][] as `name`, so that a
    [`azx.presets.Preset`][] (whose `env` is a name) can train it, `azx.load_run` can
    rebuild it from a run directory, and `azx train` can run it.

        azx.envs.register("nim", Nim)  # azx.envs.make("nim", heaps=(1, 3, 5)) is Nim(heaps=...)

    Registration lasts for the Python process: the process that loads a run of your
    environment registers it too (import the module that does it).

    **Arguments:**

    - `name`: the environment's name; not one of the pgx games, and without a `:` (the
      prefix of gymnax and xminigrid names). Registering a name again replaces it.
    - `make_env`: a callable (a class, a function) that `make(name, **options)` calls with
      `options`, returning an [`azx.envs.AbstractEnv`][].

    **Raises:** `ValueError` for a name that is empty, holds a `:` or is a pgx game's, or
    a `make_env` that is not callable.
    """
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(f"name must be a non-empty string without ':', got {name!r}")
    if name in pgx_names():
        raise ValueError(f"name {name!r} is a pgx game's; choose another")
    if not callable(make_env):
        raise ValueError(f"make_env must be callable (a class or a function), got {make_env!r}")
    _REGISTERED[name] = make_env


def _make_registered(name: str, max_episode_steps: int | None, options: dict) -> AbstractEnv:
    make_env = _REGISTERED[name]
    if max_episode_steps is not None:
        options = dict(options, max_episode_steps=max_episode_steps)
    try:
        inspect.signature(make_env).bind(**options)
    except TypeError as error:
        raise ValueError(f"environment {name!r} does not take {sorted(options)}: {error}") from None
    except ValueError:  # a callable without a signature: let the call decide
        pass
    env = make_env(**options)
    if not isinstance(env, AbstractEnv):
        raise ValueError(
            f"the function registered as {name!r} must return an azx.envs.AbstractEnv, "
            f"got {type(env).__name__}"
        )
    return env


def available() -> tuple[str, ...]:
    """Names accepted by [`azx.envs.make`][]: every pgx game (unprefixed), then every
    gymnax environment with discrete actions (`"gymnax:..."`) and every xminigrid
    environment (`"xminigrid:..."`), where those libraries are installed, then those
    registered with [`azx.envs.register`][]."""
    names = pgx_names()
    for library, library_names in (("gymnax", gymnax_names), ("xminigrid", xminigrid_names)):
        try:
            names += tuple(f"{library}:{name}" for name in library_names())
        except ImportError:  # not installed: nothing to offer
            pass
    return names + tuple(_REGISTERED)


def make(
    name: str,
    *,
    max_episode_steps: int | None = None,
    observe_legal_moves: bool = False,
    reward_scale: float | None = None,
    **kwargs,
) -> AbstractEnv:
    """Make the environment `name` as an [`azx.envs.AbstractEnv`][].

    **Arguments:**

    - `name`: one of [`azx.envs.available()`][azx.envs.available]: a pgx game, e.g.
      `"tic_tac_toe"`, `"connect_four"`, `"2048"` (or `"pgx:connect_four"`); a gymnax
      environment, e.g. `"gymnax:CartPole-v1"`, `"gymnax:Breakout-MinAtar"`; or an
      xminigrid environment, e.g. `"xminigrid:MiniGrid-Empty-6x6"`,
      `"xminigrid:XLand-MiniGrid-R1-9x9"` (XLand needs a ruleset: see
      [`azx.envs.XMinigridEnv`][]); a brax environment, e.g. `"brax:inverted_pendulum"`
      (brax is not a dependency of azx, and `available` does not list its
      environments); or a name given to [`azx.envs.register`][].
    - `max_episode_steps`: truncate episodes after this many steps (default: pgx games
      are never truncated; gymnax and xminigrid keep their environment's own time limit;
      brax's is 1000).
    - `observe_legal_moves`: wrap the environment in [`azx.envs.ObserveLegalMoves`][], so
      that its observation ends with the legal-action mask.
    - `reward_scale`: wrap the environment in [`azx.envs.ScaleRewards`][], so that its
      rewards are multiplied by this (2048's merged tiles sum to thousands a game).
    - `**kwargs`: for pgx, the game's constructor arguments (e.g. `komi` for go), and
      for backgammon [`azx.envs.PgxBackgammon`][]'s `encoding`; for
      gymnax, xminigrid and brax, see [`azx.envs.GymnaxEnv`][], [`azx.envs.XMinigridEnv`][]
      and [`azx.envs.BraxEnv`][].

    **Returns:** a [`azx.envs.PgxEnv`][] (for pgx's games with chance, `"2048"` and
    `"backgammon"`, the [`azx.envs.AbstractChanceEnv`][] adapters [`azx.envs.Pgx2048`][]
    and [`azx.envs.PgxBackgammon`][], which step as the `PgxEnv` does),
    [`azx.envs.GymnaxEnv`][], [`azx.envs.XMinigridEnv`][] or [`azx.envs.BraxEnv`][].
    gymnax, xminigrid and brax are imported only when one of their environments is made
    (or listed).

    **Raises:** `ValueError` for an unknown name or a keyword the environment does not
    take; `ImportError` that says to `pip install "azx[envs]"` for a gymnax or xminigrid
    name when that library cannot be imported, and one that says to `pip install brax`
    for a brax name without brax.
    """
    if not isinstance(observe_legal_moves, bool):
        raise ValueError(f"observe_legal_moves must be True or False, got {observe_legal_moves!r}")
    if reward_scale is not None:
        options = dict(max_episode_steps=max_episode_steps, observe_legal_moves=observe_legal_moves)
        return ScaleRewards(make(name, **options, **kwargs), reward_scale)
    if observe_legal_moves:
        env = make(name, max_episode_steps=max_episode_steps, **kwargs)
        return ObserveLegalMoves(env)
    if name in _REGISTERED:
        return _make_registered(name, max_episode_steps, kwargs)
    library, _, library_name = name.rpartition(":")
    if library == "gymnax" and library_name in gymnax_names(discrete=False):
        return GymnaxEnv(library_name, max_episode_steps=max_episode_steps, **kwargs)
    if library == "brax":
        limit = {} if max_episode_steps is None else {"max_episode_steps": max_episode_steps}
        return BraxEnv(library_name, **limit, **kwargs)
    if library == "xminigrid" and library_name in xminigrid_names():
        return XMinigridEnv(library_name, max_episode_steps=max_episode_steps, **kwargs)
    if library in ("", "pgx") and library_name in pgx_names():
        options = {k: kwargs.pop(k) for k in ADAPTER_OPTIONS.get(library_name, ()) if k in kwargs}
        plain = make_pgx(library_name, max_episode_steps=max_episode_steps, **kwargs)
        return expose_chance(plain, **options)
    raise ValueError(f"unknown environment {name!r}; available: {', '.join(available())}")
