"""What a preset is, and what an algorithm gives azx's application to be trained by it.

A [`azx.presets.Preset`][] is a named training setup: an environment, a network, an
algorithm's recipe and its trainer's configuration, and the run's length. A recipe
([`azx.presets.AbstractRecipe`][]) is the part that belongs to one algorithm: how to
build its network and trainer, what a metrics record holds, and the options it adds to
`azx train` and `azx eval` ([`azx.presets.Option`][], declared once). Each algorithm
package holds its own recipe and presets, as a user's algorithm does in its own module
(`azx.presets.register_recipe`); the application knows none of them by name.

Private: `azx.presets` re-exports what is public.
"""

import abc
import dataclasses
import json
import typing
from collections.abc import Sequence
from typing import Any, ClassVar, Generic, TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import envs
from ._validate import check_positive_int


@dataclasses.dataclass(frozen=True)
class Option:
    """A command-line option, declared once: its `name` is the keyword (of
    [`azx.run.train`][], or of an evaluator's `azx eval` options) and, with dashes, the
    flag; its `type`, `default` and `help` make the flag, its help line and its row in
    the docs' table of options."""

    name: str
    type: Any
    help: str
    default: Any = None
    shown: str | bool = "the preset's"
    """The default as `--help` shows it (True: `default` itself)."""
    field: str | None = None
    """The preset's or the recipe's field that a training option sets."""
    minimum: int | None = None
    metavar: str = "N"
    flag: str | None = None
    """The flag where it is not `--` and the name with dashes (`--greedy/--sample`)."""

    @property
    def flags(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")


class AbstractRecipe(abc.ABC):
    """One algorithm as the application builds it. Concrete recipes are frozen
    dataclasses whose fields are the algorithm's own preset settings (those annotated
    `str`, `bool`, `dict[...]` or `tuple[str, ...]` are type-checked as a `config.json` is
    read back)."""

    name: ClassVar[str]
    """The algorithm's name in `config.json` (`"algorithm"`) and in messages."""
    config_class: ClassVar[type]
    """The trainer's configuration type (a preset's `config`)."""
    train_options: ClassVar[tuple[Option, ...]]
    """[`azx.run.train`][] options (`azx train` flags) that only this kind of algorithm
    has, each with the recipe field it sets."""
    eval_options: ClassVar[tuple[Option, ...]]
    """`azx eval` options (as an evaluator's `evaluate_run` takes them) that only this
    kind of algorithm has."""
    networks: ClassVar[tuple[str, ...]]
    """The values a preset's `network` may take."""
    schedule: ClassVar[str | None]
    """The field of `config_class` that gives the learning-rate schedule's length in
    iterations (None: the algorithm has none). Where it spans the preset's `iterations`,
    `azx train --iterations` stretches it to the run's length."""

    @abc.abstractmethod
    def make_network(self, network: str, options: dict[str, Any], env, *, key) -> Any:
        """The preset's network (`network`, `options`) for `env`."""

    @abc.abstractmethod
    def make_trainer(self, env: envs.AbstractEnv, config) -> Any:
        """The trainer ([`azx.AbstractTrainer`][]) for `env` and `config`."""

    @abc.abstractmethod
    def record(self, trainer, state, history, rate: float) -> dict[str, Any]:
        """A metrics record's algorithm fields after one training call (`history`: every
        iteration's metrics; `rate`: environment steps per second)."""

    @abc.abstractmethod
    def progress(self, record: dict[str, Any]) -> str:
        """The progress bar's summary of a metrics record."""

    @abc.abstractmethod
    def play_episodes(self, trainer, state, num_episodes: int, *, key, greedy: bool | None):
        """Episodes of the trained policy; `RunError` for an algorithm without them."""

    @abc.abstractmethod
    def vmaps_seeds(self, platform: str) -> bool:
        """Whether several seeds train faster all at once under `vmap` than one after
        another in one program on `platform` (`"cpu"`, `"gpu"`, `"tpu"`)."""

    @abc.abstractmethod
    def for_seeds(self, trainer):
        """The trainer that trains several seeds at once under `vmap` (`trainer` itself
        unless the algorithm has a form that batches better and gives the same results)."""


class AbstractPolicyRecipe(AbstractRecipe):
    """An algorithm whose trained policy is judged by the return of its own episodes
    (`play_episodes`), with no arena agent; its seeds train together under `vmap`."""

    train_options: ClassVar[tuple[Option, ...]] = (
        Option("eval_episodes", int, "Episodes per evaluation.", field="eval_episodes", minimum=1),
    )
    eval_options: ClassVar[tuple[Option, ...]] = (
        Option("episodes", int, "Episodes to play.", minimum=1),
        Option(
            "greedy",
            bool,
            "Play the policy's most likely action, or sample it.",
            flag="--greedy/--sample",
        ),
    )
    eval_episodes: int
    """Episodes per evaluation in `azx train` (and the default of `azx eval`)."""
    eval_greedy: bool
    """Evaluate the policy's most likely action instead of sampling it."""

    def vmaps_seeds(self, platform: str) -> bool:
        return True  # a policy's training is array code, which batches on every platform

    def for_seeds(self, trainer):
        return trainer


RECIPES: dict[str, type[AbstractRecipe]] = {}
"""Every algorithm's recipe, by the name `config.json` gives it (filled by
`azx.presets`: azx's own, then those registered)."""


def check_types(values: dict[str, Any], cls: type) -> None:
    """Check the values of `cls`'s dataclass fields annotated `str`, `dict[...]`, `bool`
    or `tuple[str, ...]`, so that a wrong type (in a `config.json` that a person may have
    edited, say) is named."""
    for field in dataclasses.fields(cls):
        if field.name not in values:
            continue
        value, kind = values[field.name], typing.get_origin(field.type) or field.type
        if field.type == tuple[str, ...]:
            if not (isinstance(value, tuple) and all(isinstance(v, str) for v in value)):
                raise ValueError(f"{field.name} must be a list of strings, got {value!r}")
        elif kind in (str, dict, bool) and not isinstance(value, kind):
            raise ValueError(f"{field.name} must be a {kind.__name__}, got {value!r}")


def per_episode_record(history) -> dict[str, Any]:
    """The episodes that ended during a training call, their mean return and length
    (None if none ended)."""
    episodes = np.asarray(history.episodes)
    finished = int(np.sum(episodes))

    def per_episode(values) -> float | None:
        return float(np.sum(episodes * np.asarray(values))) / finished if finished else None

    return {
        "episodes": finished,
        "episode_return": per_episode(history.episode_return),
        "episode_length": per_episode(history.episode_length),
    }


def mean_record(history, names: tuple[str, ...]) -> dict[str, float]:
    return {name: float(np.mean(np.asarray(getattr(history, name)))) for name in names}


def return_progress(record: dict[str, Any]) -> str:
    """The progress bar's summary of a record with self-play episodes: return and speed."""
    episode_return = record["episode_return"]
    shown = "-" if episode_return is None else f"{episode_return:.3g}"
    return f"return {shown} | {record['steps_per_s']:.0f} steps/s"


RecipeT = TypeVar("RecipeT", bound=AbstractRecipe)


@dataclasses.dataclass(frozen=True)
class Preset(Generic[RecipeT]):
    """A named training setup, for any algorithm: its `recipe` holds what belongs to the
    algorithm. Frozen; derive variants with [`azx.presets.Preset.replace`][]."""

    name: str
    env: str
    """Name for [`azx.envs.make`][]."""
    network: str
    """AlphaZero: `"mlp"` or `"resnet"`; PPO: `"actor_critic"`
    ([`azx.nets.ActorCritic`][]), `"recurrent"` ([`azx.nets.RecurrentActorCritic`][]) or,
    for continuous actions, `"continuous_actor_critic"`
    ([`azx.ppo.ContinuousActorCritic`][])."""
    network_options: dict[str, Any]
    recipe: RecipeT
    """The algorithm, with its own settings."""
    config: Any
    """The trainer's configuration, an [`azx.alphazero.Config`][] or [`azx.ppo.Config`][]
    (the recipe's `config_class`)."""
    iterations: int
    """Training iterations (`step` calls) of a full run."""
    description: str = ""
    env_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Keyword arguments for [`azx.envs.make`][] (e.g. `observe_legal_moves`)."""
    eval_every: int = 100
    """Iterations between evaluations (and checkpoints) in `azx train`."""
    log_every: int = 10
    """Iterations per jitted training call: the granularity of logging and Ctrl-C."""

    def __post_init__(self):
        check_types(vars(self), Preset)
        if not isinstance(self.recipe, AbstractRecipe):
            raise ValueError(f"recipe must be an azx.presets.AbstractRecipe, got {self.recipe!r}")
        config_class = self.recipe.config_class
        if not isinstance(self.config, config_class):
            # (the public module: azx.alphazero.Config, not azx.alphazero._config.Config)
            public = f"{config_class.__module__.split('._')[0]}.{config_class.__name__}"
            got = type(self.config).__name__
            raise ValueError(f"config must be an {public} for {self.recipe.name}, got {got}")
        for name in ("iterations", "eval_every", "log_every"):
            check_positive_int(name, getattr(self, name))
        if self.network not in self.recipe.networks:
            raise ValueError(
                f"unknown network {self.network!r} for {self.recipe.name}; expected one of "
                f"{', '.join(map(repr, self.recipe.networks))}"
            )

    @property
    def algorithm(self) -> str:
        """The recipe's name: `"alphazero"`, `"ppo"` or `"muzero"`."""
        return self.recipe.name

    def replace(self, **changes) -> "Preset[RecipeT]":
        """A copy with `changes`, each a field of the preset or of its recipe
        (`preset.replace(iterations=10, eval_games=20)`)."""
        own = {f.name for f in dataclasses.fields(self)}
        recipe_changes = {k: v for k, v in changes.items() if k not in own}
        recipe = dataclasses.replace(self.recipe, **recipe_changes) if recipe_changes else None
        changes = {k: v for k, v in changes.items() if k in own}
        return dataclasses.replace(self, **changes, **({"recipe": recipe} if recipe else {}))

    def changed(self, *, env: str | None = None, settings: Sequence[str] = ()) -> "Preset[RecipeT]":
        """A copy on `env` with `settings` made: what `azx train --env NAME --set
        KEY=VALUE` trains.

        `env` is another environment of the same kind: as many players, and discrete or
        continuous actions as this preset's. Each setting is `KEY=VALUE`: KEY a field of
        the preset or its recipe (`eval_games`), a field of its trainer's configuration
        (`learning_rate`, or `config.learning_rate`), or a dotted path into one of its
        options dicts (`network_options.width`, `search_options.num_simulations`;
        `network.width` and `search.num_simulations` for short); VALUE is JSON, or else a
        string (comma-separated where the field holds a list). On another `env`, the
        description becomes `"ENV, NAME's setup"` unless a setting gives one.

        **Raises:** `ValueError` naming an environment of another kind, a key that does
        not exist (outside an options dict, which takes any), a value whose type is not
        that of the one it replaces, or a setting the preset's own checks refuse.
        """
        settings = (settings,) if isinstance(settings, str) else tuple(settings)
        if (env is None or env == self.env) and not settings:
            return self
        data = self.to_dict()
        if env is not None and env != self.env:
            kind, wanted = _kind(env, self.env_options), _kind(self.env, self.env_options)
            if kind != wanted:
                raise ValueError(
                    f"`env` {env!r} is {kind}; preset {self.name!r} trains {wanted} "
                    f"environments ({self.env!r})"
                )
            data["env"] = env
            data["description"] = f"{env}, {self.name}'s setup"
        for setting in settings:
            _set(data, setting)
        try:
            return from_dict(data)
        except (ValueError, TypeError) as error:
            raise ValueError(f"`settings` {', '.join(settings)}: {error}") from None

    def make_env(self) -> envs.AbstractEnv:
        return envs.make(self.env, **self.env_options)

    def make_network(self, env: envs.AbstractEnv, *, key) -> Any:
        return self.recipe.make_network(self.network, self.network_options, env, key=key)

    def build(self, *, seed: int = 0) -> tuple[Any, Any]:
        """The trainer and its initial state for `seed`."""
        env = self.make_env()
        net_key, run_key = jax.random.split(jax.random.key(seed))
        trainer = self.recipe.make_trainer(env, self.config)
        return trainer, trainer.init(self.make_network(env, key=net_key), key=run_key)

    def build_seeds(self, seeds: Sequence[int], *, vmap: bool = True) -> tuple[Any, Any]:
        """The trainer and the initial states of several seeds (each its
        `build(seed=...)`), stacked along a leading axis of size `len(seeds)`
        ([`azx.presets.stack_seeds`][]): independent agents that train as one program,
        every seed at once under `vmap` (with the recipe's trainer for batched seeds) or
        one after another ([`azx.parallel.over_seeds`][]). One after another, a seed
        equals its own run bit for bit; under `vmap`, within float tolerance.

            vmap = preset.vmaps_seeds()
            trainer, states = preset.build_seeds(range(8), vmap=vmap)
            train = azx.parallel.over_seeds(trainer.train, vmap=vmap)
            states = eqx.filter_jit(train)(states, 100)
            state_of_seed_3 = azx.presets.take_seed(states, 3)

        **Raises:** `ValueError` if `seeds` is empty.
        """
        seeds = list(seeds)
        if not seeds:
            raise ValueError("seeds must name at least one seed, got none")
        built = [self.build(seed=seed) for seed in seeds]
        trainer = self.recipe.for_seeds(built[0][0]) if vmap else built[0][0]
        return trainer, stack_seeds([state for _, state in built])

    def vmaps_seeds(self, platform: str | None = None) -> bool:
        """Whether several seeds train fastest all at once under `vmap` (True) or one after
        another in the same program (False) on `platform` (default: JAX's default
        backend, `"cpu"`, `"gpu"` or `"tpu"`): the recipe's answer, what `azx train
        --seeds` uses."""
        return self.recipe.vmaps_seeds(jax.default_backend() if platform is None else platform)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable description, flat (the recipe's fields beside the preset's,
        and its name as `"algorithm"`); [`azx.presets.from_dict`][] inverts it."""
        out: dict[str, Any] = {"algorithm": self.recipe.name}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name == "recipe":
                out |= {f.name: _listed(getattr(value, f.name)) for f in dataclasses.fields(value)}
            elif field.name == "config":
                out["config"] = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
            elif isinstance(value, dict):
                out[field.name] = {k: _listed(v) for k, v in value.items()}
            else:
                out[field.name] = value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Preset":
        """The preset that [`to_dict`][azx.presets.Preset.to_dict] described."""
        return from_dict(data)


def _kind(env: str, options: dict[str, Any]) -> str:
    try:
        made = envs.make(env, **options)
    except (ValueError, TypeError, ImportError) as error:
        raise ValueError(f"`env` {env!r}: {error}") from None
    actions = "continuous" if isinstance(made.action_space(), envs.BoxActions) else "discrete"
    return f"{made.num_players}-player with {actions} actions"


_SHORT = {"network": "network_options", "search": "search_options"}


def _set(data: dict[str, Any], setting: str) -> None:
    """Make one `KEY=VALUE` setting (see `Preset.changed`) in a preset's `to_dict()`."""
    key, equals, text = setting.partition("=")
    if "." not in key and key not in data and key in data["config"]:
        key = f"config.{key}"
    group, dot, rest = key.partition(".")
    path = [_SHORT.get(group, group), *rest.split(".")] if dot else [key]
    *groups, name = path
    where = data
    for group in groups:
        where = where.get(group) if isinstance(where, dict) else None
    settable = sorted(k for k in data if k not in ("algorithm", "env"))
    if not equals or not isinstance(where, dict) or path[0] in ("algorithm", "env"):
        raise ValueError(
            f"`settings` {setting!r} must be KEY=VALUE, KEY one of {', '.join(settable)}, "
            "a field of config, or a dotted path into an options dict "
            "(network_options.NAME, ...); the environment is `env`"
        )
    if name not in where and not (groups and groups[0] != "config"):
        known = ", ".join(sorted(where)) if groups else ", ".join(settable)
        raise ValueError(f"`settings` {key!r}: unknown; known here: {known}")
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = text
    old = where.get(name)
    if isinstance(old, list | tuple) and isinstance(value, str | list):
        value = type(old)(value.split(",") if isinstance(value, str) else value)
    elif isinstance(old, float) and type(value) is int:
        value = float(value)
    if None not in (old, value) and type(value) is not type(old):
        raise ValueError(
            f"`settings` {key!r} must be a {type(old).__name__} (as {old!r}), got {value!r}"
        )
    where[name] = value


def stack_seeds(states: Sequence[Any]) -> Any:
    """Several seeds' states (trained or not) as one, each array stacked along a new
    leading seeds axis; what is not an array (a network's activation) they share.
    [`azx.presets.take_seed`][] takes one back out."""
    states = list(states)
    if not states:
        raise ValueError("stack_seeds needs at least one state, got none")
    return jax.tree.map(lambda *xs: jnp.stack(xs) if eqx.is_array(xs[0]) else xs[0], *states)


def take_seed(states: Any, index: int) -> Any:
    """The state of the `index`-th seed of states stacked by
    [`azx.presets.Preset.build_seeds`][] (trained or not)."""
    return jax.tree.map(lambda leaf: leaf[index] if eqx.is_array(leaf) else leaf, states)


def _listed(value):
    """Tuples as JSON writes them (lists); `from_dict` reads them back as tuples."""
    return list(value) if isinstance(value, tuple) else value


def from_dict(data: dict[str, Any]) -> Preset:
    """The preset that `to_dict` described (with the recipe its `"algorithm"` names;
    AlphaZero where it has none, as in runs written before PPO).

    **Raises:** `ValueError` naming an unknown algorithm or field, or a field of the wrong
    type."""
    algorithm = data.get("algorithm", "alphazero")
    if algorithm not in RECIPES:
        raise ValueError(f"unknown algorithm {algorithm!r}; known: {', '.join(RECIPES)}")
    recipe_class = RECIPES[algorithm]
    tuples = [f.name for f in dataclasses.fields(recipe_class) if f.type == tuple[str, ...]]
    data = {k: v for k, v in data.items() if k != "algorithm"}
    data |= {k: tuple(data[k]) for k in tuples if isinstance(data.get(k), list)}  # JSON's
    own = {field.name for field in dataclasses.fields(Preset)} - {"recipe"}
    recipe_fields = {field.name for field in dataclasses.fields(recipe_class)}
    unknown = set(data) - own - recipe_fields
    if unknown:
        known = sorted(own | recipe_fields)
        raise ValueError(f"unknown preset fields {sorted(unknown)}; known: {known}")
    check_types(data, Preset)
    check_types(data, recipe_class)
    if not isinstance(data.get("config"), dict):
        raise ValueError(f"config must be a JSON object, got {data.get('config')!r}")
    data["config"] = recipe_class.config_class(**data["config"])
    if "network_options" in data:
        data["network_options"] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in data["network_options"].items()
        }
    recipe = {k: data.pop(k) for k in recipe_fields & set(data)}
    return Preset(recipe=recipe_class(**recipe), **data)
