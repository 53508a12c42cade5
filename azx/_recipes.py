"""Recipes: how the application (`azx train`, `azx eval`, `azx play`, [`azx.run`][])
builds an algorithm, so that it holds no branch per algorithm.

A recipe is the part of a [`azx.presets.Preset`][] that belongs to one algorithm: its
own settings (AlphaZero's search, the evaluation's opponents or episodes) and how to
build its network and trainer and what a metrics record holds. How a run is judged is
not the recipe's: an evaluator (`azx._evaluators`) chosen by what the recipe's agent and
the environment are. A new algorithm is one more recipe.

Private: `azx.presets` re-exports the recipes.
"""

import abc
import dataclasses
from typing import Any, ClassVar

import equinox as eqx
import numpy as np

from . import arena, envs, nets, ppo, search
from ._errors import RunError
from ._report import play_episodes
from ._validate import check_positive_int
from .alphazero import AlphaZero, Config
from .muzero import (
    Config as MuZeroConfig,
    MuZero,
    MuZeroAgent,
    evaluate as muzero_evaluate,
    mlp_net,
    resnet_net,
)


class AbstractRecipe(abc.ABC):
    """One algorithm as the application builds it. Concrete recipes are frozen
    dataclasses whose fields are the algorithm's own preset settings."""

    name: ClassVar[str]
    """The algorithm's name in `config.json` (`"algorithm"`) and in messages."""
    config_class: ClassVar[type]
    """The trainer's configuration type (a preset's `config`)."""
    train_options: ClassVar[dict[str, str]]
    """[`azx.run.train`][] arguments that only this algorithm has, with the recipe field
    each one sets."""
    eval_options: ClassVar[tuple[str, ...]]
    """`azx eval` options (as an evaluator's `evaluate_run` takes them) that only this
    algorithm has."""
    networks: ClassVar[tuple[str, ...]]
    """The values a preset's `network` may take."""
    field_types: ClassVar[dict[str, tuple[str, ...]]]
    """The recipe's fields by JSON type (`str`, `dict`, `bool`, `strings`), checked when a
    preset is read back from a `config.json` that a person may have edited."""
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


class AbstractAgentRecipe(AbstractRecipe):
    """An algorithm whose trained network plays through a search as an arena agent
    (`azx play`, `run:DIR` opponents): it is judged by matches against opponents in a
    two-player game and by the agents' episodes in a single-player one."""

    agent_kinds: ClassVar[tuple[str, ...]]
    """The arena agents a trained network plays as (`azx eval --agent`)."""
    search: str
    search_options: dict[str, Any]
    eval_opponents: tuple[str, ...]
    eval_agents: tuple[str, ...]
    eval_games: int
    eval_search: dict[str, Any]

    @abc.abstractmethod
    def agent(
        self, net, kind: str, num_simulations: int | None, env: envs.AbstractEnv
    ) -> arena.AbstractAgent:
        """The arena agent of `kind` (one of `agent_kinds`) playing `net` in `env`."""

    def check(self) -> None:
        """`ValueError` for settings that do not fit together (at construction)."""
        check_types(vars(self), **self.field_types)
        check_positive_int("eval_games", self.eval_games)
        bad = set(self.eval_agents) - set(self.agent_kinds)
        if bad:
            raise ValueError(f"eval_agents must be among {self.agent_kinds}, got {sorted(bad)}")
        kind = self.eval_search.get("search", self.search)
        if kind not in _GREEDY:
            raise ValueError(f"eval_search's search must be 'puct' or 'gumbel', got {kind!r}")
        if kind != self.search and "num_simulations" not in self.eval_search:
            raise ValueError(
                f"eval_search with another kind of search ({kind!r}) must give "
                f"num_simulations, got {self.eval_search!r}"
            )

    def make_search(self, **overrides) -> search.AbstractSearch:
        return _make_search(self.search, self.search_options | overrides)

    def make_eval_search(self, **overrides) -> search.AbstractSearch:
        """The evaluation search (the training one, changed as `eval_search` says) with
        its exploration switched off: the most visited action (PUCT, no root noise) or
        noise-free sequential halving (Gumbel)."""
        changes = dict(self.eval_search)
        kind = changes.pop("search", self.search)
        options = self.search_options | changes if kind == self.search else changes
        return _make_search(kind, options | _GREEDY[kind] | overrides)

    def vmaps_seeds(self, platform: str) -> bool:
        # On the CPU the search is loops over rows and tree nodes, which batched over
        # seeds cost more than the seeds one after another (`benchmarks.seeds`); mapped,
        # each seed is bit for bit its own run. Accelerators batch the seeds.
        return platform != "cpu"

    def for_seeds(self, trainer):
        # Under `vmap` the CPU's row loops (`PlatformBackend`) run every seed's rows in
        # every iteration of every seed's loop; the lockstep kernels batch as plain array
        # code. Every backend gives the same search, bit for bit.
        native = isinstance(trainer.search, search.AbstractNativeSearch)
        if native and isinstance(trainer.search.backend, search.PlatformBackend):
            return eqx.tree_at(lambda t: t.search.backend, trainer, search.LockstepBackend())
        return trainer

    def network_agent(self, net, kind: str, env: envs.AbstractEnv) -> arena.AbstractAgent:
        """The agents without a search: `"network"` (argmax of the policy) and
        `"full-move"` (the value over the roll's whole moves, backgammon only)."""
        if kind not in self.agent_kinds:
            raise RunError(unknown_agent("agent", kind, self.agent_kinds))
        if kind == "full-move":
            check_full_move(env, "agent 'full-move'", RunError)
            return arena.ValueMoveAgent(net, env)
        return arena.NetworkAgent(net)


class AbstractPolicyRecipe(AbstractRecipe):
    """An algorithm whose trained policy is judged by the return of its own episodes
    (`play_episodes`), with no arena agent."""

    eval_episodes: int
    """Episodes per evaluation in `azx train` (and the default of `azx eval`)."""
    eval_greedy: bool
    """Evaluate the policy's most likely action instead of sampling it."""


def check_types(values: dict[str, Any], **fields: tuple[str, ...]) -> None:
    """Check each field's type (`str`, `dict`, `bool`, or `strings`: a tuple of str) so
    that a wrong one is named."""
    for kind, names in fields.items():
        for name in (name for name in names if name in values):
            value = values[name]
            if kind == "strings":
                ok = isinstance(value, tuple) and all(isinstance(v, str) for v in value)
            else:
                ok = isinstance(value, {"str": str, "dict": dict, "bool": bool}[kind])
            if not ok:
                wanted = "a list of strings" if kind == "strings" else f"a {kind}"
                raise ValueError(f"{name} must be {wanted}, got {value!r}")


# The options of `search.make` (by its names of the searches) that switch each search's
# exploration off: the most visited action without root noise, noise-free halving.
_GREEDY = {
    "puct": {"temperature": 0.0, "dirichlet_fraction": 0.0},
    "gumbel": {"gumbel_scale": 0.0},
}


def _make_search(kind: str, options: dict[str, Any]) -> search.AbstractSearch:
    options = dict(options)
    return search.make(kind, options.pop("num_simulations"), **options)


def base_env(env: envs.AbstractEnv) -> envs.AbstractEnv:
    """The game under `env`'s wrappers (which change only what is read from a state)."""
    while isinstance(env, envs.AbstractEnvWrapper):
        env = env.env
    return env


def check_full_move(env: envs.AbstractEnv, what: str, error: type[Exception]) -> None:
    """`error` unless `env` is backgammon, the one game of the full-move agent."""
    if not isinstance(base_env(env), envs.PgxBackgammon):
        raise error(
            f"{what} (the value over the roll's whole moves) plays backgammon; "
            f"this game is {env.name!r}"
        )


def unknown_agent(what: str, kind: str, kinds: tuple[str, ...]) -> str:
    """The message for an agent `kind` that is not among a recipe's `kinds`."""
    message = f"{what} must be one of {kinds}, got {kind!r}"
    if kind == "full-move":  # an AlphaZero kind that MuZero lacks
        # The full-move agent reads a value network's observations; MuZero's value is
        # the learned model's, on its embeddings.
        message += " (full-move reads an AlphaZero network's value; MuZero's is its model's)"
    return message


def _per_episode_record(history) -> dict[str, Any]:
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


def _mean(history, names: tuple[str, ...]) -> dict[str, float]:
    return {name: float(np.mean(np.asarray(getattr(history, name)))) for name in names}


def return_progress(record: dict[str, Any]) -> str:
    """The progress bar's summary of a record with self-play episodes: return and speed."""
    episode_return = record["episode_return"]
    shown = "-" if episode_return is None else f"{episode_return:.3g}"
    return f"return {shown} | {record['steps_per_s']:.0f} steps/s"


# ----------------------------------------------------------------------------- AlphaZero


@dataclasses.dataclass(frozen=True)
class AlphaZeroRecipe(AbstractAgentRecipe):
    """AlphaZero ([`azx.alphazero.AlphaZero`][]): its search and how `azx train`
    evaluates it."""

    name: ClassVar[str] = "alphazero"
    config_class: ClassVar[type] = Config
    schedule: ClassVar[str | None] = "decay_iterations"
    train_options: ClassVar[dict[str, str]] = {
        "eval_games": "eval_games",
        "opponents": "eval_opponents",
    }
    eval_options: ClassVar[tuple[str, ...]] = (
        "opponent",
        "games",
        "agent",
        "simulations",
        "opening_plies",
    )
    networks: ClassVar[tuple[str, ...]] = ("mlp", "resnet")
    agent_kinds: ClassVar[tuple[str, ...]] = ("search", "network", "full-move")
    field_types: ClassVar[dict[str, tuple[str, ...]]] = {
        "str": ("search",),
        "dict": ("search_options", "eval_search"),
        "strings": ("eval_opponents", "eval_agents"),
    }

    search: str
    """`"puct"` or `"gumbel"` (native search)."""
    search_options: dict[str, Any]
    eval_opponents: tuple[str, ...] = ("random", "greedy")
    """Opponents `azx train` evaluates against (specs for [`azx.arena.opponent`][])."""
    eval_agents: tuple[str, ...] = ("search",)
    """Which agents are evaluated: `"search"` (network + the evaluation search, played
    greedily: see `eval_search`), `"network"` (argmax of the policy) and, for backgammon,
    `"full-move"` (the value alone over the roll's whole moves,
    [`azx.arena.ValueMoveAgent`][])."""
    eval_games: int = 200
    """Games (or, in a single-player game, episodes) per evaluation match, half with each
    colour."""
    eval_search: dict[str, Any] = dataclasses.field(default_factory=dict)
    """How the search that plays in evaluations (and in `azx eval`, and
    [`azx.load_run`][]'s agent) differs from the training one: options of
    [`azx.search.make`][] that replace the training search's (e.g. `num_simulations`),
    and under `"search"` another kind, `"puct"` or `"gumbel"`, whose options are then
    these alone. Empty: the training search."""

    def __post_init__(self):
        self.check()

    def make_network(self, network, options, env, *, key):
        options = dict(options)
        if env.num_players == 1:
            options.setdefault("bounded_value", False)
        network_class = {"mlp": nets.MLP, "resnet": nets.AlphaZeroResNet}[network]
        return network_class(env.observation_shape, env.num_actions, key=key, **options)

    def make_trainer(self, env, config):
        return AlphaZero(env, self.make_search(), config)

    def record(self, trainer, state, history, rate):
        del trainer, history  # the loss of the call's last iteration, as logged before
        metrics = state.metrics
        return {
            "loss": float(metrics.loss),
            "policy_loss": float(metrics.policy_loss),
            "value_loss": float(metrics.value_loss),
            "selfplay_steps_per_s": rate,
        }

    def progress(self, record):
        return f"loss {record['loss']:.3f} | {record['selfplay_steps_per_s']:.0f} moves/s"

    def agent(self, net, kind, num_simulations, env):
        if kind != "search":
            return self.network_agent(net, kind, env)
        overrides = {} if num_simulations is None else {"num_simulations": num_simulations}
        return arena.SearchAgent(net, self.make_eval_search(**overrides))

    def play_episodes(self, trainer, state, num_episodes, *, key, greedy):
        raise RunError("episodes need a PPO run; this is an AlphaZero run")


# ----------------------------------------------------------------------------- PPO


_PPO_NETWORKS = {
    "actor_critic": nets.ActorCritic,
    "recurrent": nets.RecurrentActorCritic,
    "continuous_actor_critic": ppo.ContinuousActorCritic,
}


@dataclasses.dataclass(frozen=True)
class PPORecipe(AbstractPolicyRecipe):
    """PPO ([`azx.ppo.PPO`][]): its networks and how `azx train` evaluates its policy."""

    name: ClassVar[str] = "ppo"
    config_class: ClassVar[type] = ppo.Config
    schedule: ClassVar[str | None] = "anneal_iterations"
    train_options: ClassVar[dict[str, str]] = {"eval_episodes": "eval_episodes"}
    eval_options: ClassVar[tuple[str, ...]] = ("episodes", "greedy")
    networks: ClassVar[tuple[str, ...]] = tuple(_PPO_NETWORKS)
    field_types: ClassVar[dict[str, tuple[str, ...]]] = {"bool": ("eval_greedy",)}

    eval_episodes: int = 100
    """Episodes per evaluation in `azx train` (and the default of `azx eval`)."""
    eval_greedy: bool = False
    """Evaluate the policy's most likely action instead of sampling it."""

    def __post_init__(self):
        check_types(vars(self), **self.field_types)
        check_positive_int("eval_episodes", self.eval_episodes)

    def make_network(self, network, options, env, *, key):
        return _PPO_NETWORKS[network](env.observation_shape, env.num_actions, key=key, **options)

    def make_trainer(self, env, config):
        return ppo.PPO(env, config)

    def record(self, trainer, state, history, rate):
        names = ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")
        record = _mean(history, (*names, "explained_variance"))
        record["learning_rate"] = float(state.metrics.learning_rate)
        return record | _per_episode_record(history) | {"steps_per_s": rate}

    def progress(self, record):
        return return_progress(record)

    def play_episodes(self, trainer, state, num_episodes, *, key, greedy):
        greedy = self.eval_greedy if greedy is None else greedy
        return play_episodes(trainer, state, num_episodes, key, greedy)

    def vmaps_seeds(self, platform: str) -> bool:
        return True

    def for_seeds(self, trainer):
        return trainer


# ----------------------------------------------------------------------------- MuZero


_MUZERO_NETWORKS = {"mlp": mlp_net, "resnet": resnet_net}


@dataclasses.dataclass(frozen=True)
class MuZeroRecipe(AbstractAgentRecipe):
    """MuZero ([`azx.muzero.MuZero`][]): its search, and how `azx train` evaluates it.

    A trained MuZero plays as AlphaZero's network does, through an arena agent: the
    search over its learned model ([`azx.muzero.MuZeroAgent`][], exploration off) or the
    prediction at the observation's embedding (`"network"`). So it is evaluated as an
    AlphaZero run is: the agents' episodes in a single-player environment, their matches
    against `eval_opponents` in a two-player game; `azx eval` takes the same options.
    """

    name: ClassVar[str] = "muzero"
    config_class: ClassVar[type] = MuZeroConfig
    schedule: ClassVar[str | None] = "decay_iterations"
    train_options: ClassVar[dict[str, str]] = AlphaZeroRecipe.train_options
    eval_options: ClassVar[tuple[str, ...]] = AlphaZeroRecipe.eval_options
    networks: ClassVar[tuple[str, ...]] = tuple(_MUZERO_NETWORKS)
    agent_kinds: ClassVar[tuple[str, ...]] = ("search", "network")
    field_types: ClassVar[dict[str, tuple[str, ...]]] = AlphaZeroRecipe.field_types

    search: str = "gumbel"
    """`"puct"` or `"gumbel"` (native search over the learned model)."""
    search_options: dict[str, Any] = dataclasses.field(
        default_factory=lambda: {"num_simulations": 16}
    )
    """Options of [`azx.search.make`][], `num_simulations` among them (and `gamma`, the
    discount of the search and of the targets)."""
    eval_opponents: tuple[str, ...] = ("random", "greedy")
    """As AlphaZero's (`azx.presets.AlphaZeroRecipe`)."""
    eval_agents: tuple[str, ...] = ("search",)
    eval_games: int = 200
    eval_search: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        self.check()
        if "num_simulations" not in self.search_options:
            raise ValueError(
                f"search_options must give num_simulations, got {self.search_options!r}"
            )

    def make_network(self, network, options, env, *, key):
        make = _MUZERO_NETWORKS[network]
        return make(env.observation_shape, env.num_actions, key=key, **options)

    def make_trainer(self, env, config):
        return MuZero(env, self.make_search(), config)

    def record(self, trainer, state, history, rate):
        names = ("loss", "policy_loss", "value_loss", "reward_loss", "consistency_loss")
        return (
            _mean(history, names)
            | {"entropy": float(np.mean(np.asarray(history.policy_entropy)))}
            | _per_episode_record(history)
            | {"root_value": float(np.mean(np.asarray(history.root_value))), "steps_per_s": rate}
        )

    def progress(self, record):
        return return_progress(record)  # the self-play return and speed, as PPO's

    def agent(self, net, kind, num_simulations, env):
        if kind != "search":
            return self.network_agent(net, kind, env)
        overrides = {} if num_simulations is None else {"num_simulations": num_simulations}
        return MuZeroAgent(net, self.make_eval_search(**overrides))

    def play_episodes(self, trainer, state, num_episodes, *, key, greedy):
        # The search without its exploration unless sampling is asked for (greedy=False).
        if trainer.env.num_players != 1:
            raise RunError("episodes need a single-player environment; this run's has two")
        greedy = True if greedy is None else greedy
        return _muzero_evaluate(
            trainer, state.net, num_episodes=num_episodes, key=key, greedy=greedy
        )


_muzero_evaluate = eqx.filter_jit(muzero_evaluate)

RECIPES: dict[str, type[AbstractRecipe]] = {
    recipe.name: recipe for recipe in (AlphaZeroRecipe, PPORecipe, MuZeroRecipe)
}
"""Every recipe, by the name `config.json` gives it."""
