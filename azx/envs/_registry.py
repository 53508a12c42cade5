from ._abstract import AbstractEnv
from ._gymnax import GymnaxEnv, gymnax_names
from ._pgx import make_pgx, pgx_names
from ._pgx_chance import expose_chance
from ._wrappers import ObserveLegalMoves, ScaleRewards
from ._xminigrid import XMinigridEnv, xminigrid_names


def available() -> tuple[str, ...]:
    """Names accepted by [`azx.envs.make`][]: every pgx game (unprefixed), then every
    gymnax environment with discrete actions (`"gymnax:..."`) and every xminigrid
    environment (`"xminigrid:..."`), where those libraries are installed."""
    names = pgx_names()
    for library, library_names in (("gymnax", gymnax_names), ("xminigrid", xminigrid_names)):
        try:
            names += tuple(f"{library}:{name}" for name in library_names())
        except ImportError:  # not installed: nothing to offer
            pass
    return names


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
      [`azx.envs.XMinigridEnv`][]).
    - `max_episode_steps`: truncate episodes after this many steps (default: pgx games
      are never truncated; gymnax and xminigrid keep their environment's own time limit).
    - `observe_legal_moves`: wrap the environment in [`azx.envs.ObserveLegalMoves`][], so
      that its observation ends with the legal-action mask.
    - `reward_scale`: wrap the environment in [`azx.envs.ScaleRewards`][], so that its
      rewards are multiplied by this (2048's merged tiles sum to thousands a game).
    - `**kwargs`: for pgx, the game's constructor arguments (e.g. `komi` for go); for
      gymnax and xminigrid, see [`azx.envs.GymnaxEnv`][] and [`azx.envs.XMinigridEnv`][].

    **Returns:** a [`azx.envs.PgxEnv`][] (for pgx's games with chance, `"2048"` and
    `"backgammon"`, the [`azx.envs.AbstractChanceEnv`][] adapters [`azx.envs.Pgx2048`][]
    and [`azx.envs.PgxBackgammon`][], which step as the `PgxEnv` does),
    [`azx.envs.GymnaxEnv`][] or [`azx.envs.XMinigridEnv`][]. gymnax and xminigrid are
    imported only when one of their environments is made (or listed).

    **Raises:** `ValueError` for an unknown name or a keyword the environment does not
    take; `ImportError` that says to `pip install "azx[envs]"` for a gymnax or xminigrid
    name when that library cannot be imported.
    """
    if not isinstance(observe_legal_moves, bool):
        raise ValueError(f"observe_legal_moves must be True or False, got {observe_legal_moves!r}")
    if reward_scale is not None:
        options = dict(max_episode_steps=max_episode_steps, observe_legal_moves=observe_legal_moves)
        return ScaleRewards(make(name, **options, **kwargs), reward_scale)
    if observe_legal_moves:
        env = make(name, max_episode_steps=max_episode_steps, **kwargs)
        return ObserveLegalMoves(env)
    library, _, library_name = name.rpartition(":")
    if library == "gymnax" and library_name in gymnax_names(discrete=False):
        return GymnaxEnv(library_name, max_episode_steps=max_episode_steps, **kwargs)
    if library == "xminigrid" and library_name in xminigrid_names():
        return XMinigridEnv(library_name, max_episode_steps=max_episode_steps, **kwargs)
    if library in ("", "pgx") and library_name in pgx_names():
        return expose_chance(make_pgx(library_name, max_episode_steps=max_episode_steps, **kwargs))
    raise ValueError(f"unknown environment {name!r}; available: {', '.join(available())}")
