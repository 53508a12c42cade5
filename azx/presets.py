"""Ready-made training setups: the environment, network, algorithm and sizes that work
together.

    preset = azx.presets.get("tic_tac_toe")
    trainer, state = preset.build(seed=0)
    state = eqx.filter_jit(trainer.train)(state, preset.iterations)

Every preset is a [`azx.presets.Preset`][]; what belongs to its algorithm (AlphaZero's
search and evaluation opponents, PPO's evaluation episodes) is its `recipe`, an
[`azx.presets.AlphaZeroRecipe`][], an [`azx.presets.PPORecipe`][] or an
[`azx.presets.MuZeroRecipe`][]. Each algorithm package holds its recipe and presets; this
module gathers them, and registers a user's own ([`azx.presets.register`][],
[`azx.presets.register_recipe`][]).
"""

import dataclasses

from ._preset import (
    RECIPES,
    AbstractPolicyRecipe as AbstractPolicyRecipe,
    AbstractRecipe as AbstractRecipe,
    Option as Option,
    Preset as Preset,
    from_dict as from_dict,
    stack_seeds as stack_seeds,
    take_seed as take_seed,
)
from ._recipes import AbstractAgentRecipe as AbstractAgentRecipe
from .alphazero._recipe import (
    PRESETS as _ALPHAZERO,
    AlphaZeroRecipe as AlphaZeroRecipe,
    for_pgx_game as for_pgx_game,
)
from .muzero._recipe import (
    PRESETS as _MUZERO,
    MuZeroRecipe as MuZeroRecipe,
    StochasticMuZeroRecipe as StochasticMuZeroRecipe,
)
from .ppo._recipe import PRESETS as _PPO, PPORecipe as PPORecipe


for _recipe in (AlphaZeroRecipe, PPORecipe, MuZeroRecipe, StochasticMuZeroRecipe):
    RECIPES[_recipe.name] = _recipe
_BUILT_IN_RECIPES = frozenset(RECIPES)
_PRESETS: dict[str, Preset] = {preset.name: preset for preset in (*_ALPHAZERO, *_PPO, *_MUZERO)}
_BUILT_IN = frozenset(_PRESETS)


def register(preset: Preset) -> None:
    """Add `preset` under its name, for [`azx.presets.get`][], [`azx.run.train`][] and
    `azx train --preset NAME` (from a script that registers it and then calls
    `azx.cli.main()`). Registration lasts for the Python process; the environment that
    `preset.env` names must be known to [`azx.envs.make`][] (a user's own one through
    [`azx.envs.register`][]). Registering a name again replaces it.

    **Raises:** `ValueError` if `preset` is not an [`azx.presets.Preset`][], or its name
    is a built-in preset's or starts with `pgx:`.
    """
    if not isinstance(preset, Preset):
        raise ValueError(f"preset must be an azx.presets.Preset, got {type(preset).__name__}")
    if preset.name in _BUILT_IN or preset.name.startswith("pgx:"):
        raise ValueError(
            f"preset name {preset.name!r} is taken by azx's own presets "
            f"({', '.join(sorted(_BUILT_IN))}, pgx:GAME); choose another"
        )
    _PRESETS[preset.name] = preset


def register_recipe(recipe_class: type[AbstractRecipe]) -> None:
    """Add an algorithm: `recipe_class`, a concrete [`azx.presets.AbstractAgentRecipe`][]
    or [`azx.presets.AbstractPolicyRecipe`][] (a frozen dataclass), under its `name`, so
    that `azx train`, `azx eval` and [`azx.load_run`][] read back the `config.json` of a
    preset whose recipe it is (its `"algorithm"`). Registration lasts for the Python
    process; registering a class again under its name replaces it.

    **Raises:** `ValueError` if `recipe_class` is not such a class, or its name is one of
    azx's own algorithms'.
    """
    kinds = (AbstractAgentRecipe, AbstractPolicyRecipe)
    if not (
        isinstance(recipe_class, type)
        and issubclass(recipe_class, kinds)
        and dataclasses.is_dataclass(recipe_class)
    ):
        raise ValueError(
            "recipe_class must be a dataclass subclassing azx.presets.AbstractAgentRecipe "
            f"or azx.presets.AbstractPolicyRecipe, got {recipe_class!r}"
        )
    name = getattr(recipe_class, "name", None)
    if not isinstance(name, str) or not name:
        raise ValueError(f"recipe_class.name must be a non-empty string, got {name!r}")
    if name in _BUILT_IN_RECIPES:
        raise ValueError(
            f"algorithm name {name!r} is taken by azx's own algorithms "
            f"({', '.join(sorted(_BUILT_IN_RECIPES))}); choose another"
        )
    RECIPES[name] = recipe_class


def names() -> tuple[str, ...]:
    """Names of the presets (azx's own, then those registered)."""
    return tuple(_PRESETS)


def get(name: str) -> Preset:
    """The preset called `name`; `ValueError` listing the names if there is none."""
    if name not in _PRESETS:
        raise ValueError(f"unknown preset {name!r}; available: {', '.join(_PRESETS)}")
    return _PRESETS[name]
