"""Recipes: what the application (`azx train`, `azx eval`, `azx play`, [`azx.run`][])
asks of an algorithm, so that it holds no branch per algorithm.

A recipe is the part of a [`azx.presets.Preset`][] that belongs to one algorithm: its
own settings (AlphaZero's search and evaluation opponents, PPO's evaluation episodes)
and the answers to every question that differs between algorithms: which trainer to
build, what a metrics record holds, how to evaluate, what to print and to draw, which
options apply. A new algorithm is one more recipe.

Private: `azx.presets` re-exports the recipes.
"""

import abc
import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

import equinox as eqx
import jax
import numpy as np

from . import arena, envs, nets, ppo, search
from ._errors import RunError
from ._report import (
    describe,
    describe_episodes,
    describe_return,
    evaluate,
    evaluate_episodes,
    evaluate_policy,
    play_episodes,
    plot_episodes_curve,
    plot_learning_curve,
    plot_return_curve,
)
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
    """One algorithm as the application sees it. Concrete recipes are frozen dataclasses
    whose fields are the algorithm's own preset settings."""

    name: ClassVar[str]
    """The algorithm's name in `config.json` (`"algorithm"`) and in messages."""
    config_class: ClassVar[type]
    """The trainer's configuration type (a preset's `config`)."""
    train_options: ClassVar[dict[str, str]]
    """[`azx.run.train`][] arguments that only this algorithm has, with the recipe field
    each one sets."""
    eval_options: ClassVar[tuple[str, ...]]
    """`azx eval` options (as `evaluate_run` takes them) that only this algorithm has."""
    networks: ClassVar[tuple[str, ...]]
    """The values a preset's `network` may take."""
    plays_games: ClassVar[bool]
    """Whether the trained network is an arena agent (`azx play`, `run:DIR` opponents)."""
    field_types: ClassVar[dict[str, tuple[str, ...]]]
    """The recipe's fields by JSON type (`str`, `dict`, `bool`, `strings`), checked when a
    preset is read back from a `config.json` that a person may have edited."""

    @abc.abstractmethod
    def make_network(self, network: str, options: dict[str, Any], env, *, key) -> Any:
        """The preset's network (`network`, `options`) for `env`."""

    @abc.abstractmethod
    def make_trainer(self, env: envs.AbstractEnv, config) -> Any:
        """The trainer ([`azx.AbstractTrainer`][]) for `env` and `config`."""

    @abc.abstractmethod
    def check_training(self, env: envs.AbstractEnv) -> None:
        """`ValueError` (or `ImportError`, for a missing optional package) for settings
        that cannot run on `env`, before anything is trained or written."""

    @abc.abstractmethod
    def record(self, trainer, state, history, rate: float) -> dict[str, Any]:
        """A metrics record's algorithm fields after one training call (`history`: every
        iteration's metrics; `rate`: environment steps per second)."""

    @abc.abstractmethod
    def evaluate(self, trainer, state, *, key, phase: Callable[[str], None]) -> dict[str, Any]:
        """The evaluation `azx train` records (a metrics record's `"eval"`); `phase(text)`
        says what it is doing."""

    @abc.abstractmethod
    def evaluation_lines(self, results: dict[str, Any]) -> list[str]:
        """`evaluate`'s results as lines of text."""

    @abc.abstractmethod
    def progress(self, record: dict[str, Any]) -> str:
        """The progress bar's summary of a metrics record."""

    @abc.abstractmethod
    def plot(self, records: list[dict[str, Any]], path, *, title: str) -> None:
        """Draw the run's learning curve from its metrics records."""

    @abc.abstractmethod
    def agent(
        self, net, kind: str, num_simulations: int | None, env: envs.AbstractEnv
    ) -> arena.AbstractAgent:
        """The arena agent of `kind` playing `net` in `env`; `RunError` without
        `plays_games`."""

    @abc.abstractmethod
    def play_episodes(self, trainer, state, num_episodes: int, *, key, greedy: bool | None):
        """Episodes of the trained policy; `RunError` for an algorithm without them."""

    @abc.abstractmethod
    def evaluate_run(
        self, run, options: dict[str, Any], *, seed: int
    ) -> tuple[dict[str, Any], str, list[str]]:
        """`azx eval` of `run` with the given `options` (the unset ones `None`): the
        result to save, the file's name (without iteration) and the lines to print."""

    def check_eval(self, options: dict[str, Any], env: envs.AbstractEnv) -> None:
        """`RunError` for `azx eval` options (as `evaluate_run` takes them) that cannot
        run on `env`, before any checkpoint is read (nothing to check by default)."""
        del options, env

    @abc.abstractmethod
    def headline(self, results: dict[str, Any]) -> dict[str, float]:
        """The numbers that sum up `evaluate`'s results (or those of `evaluate_run`, its
        first return value), by name: what a run of several seeds averages and draws."""

    def vmaps_seeds(self, platform: str) -> bool:
        """Whether several seeds train faster all at once under `vmap` than one after
        another in one program on `platform` (`"cpu"`, `"gpu"`, `"tpu"`)."""
        return True

    def for_seeds(self, trainer):
        """The trainer that trains several seeds at once under `vmap` (`trainer` itself
        unless the algorithm has a form that batches better and gives the same results)."""
        return trainer


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


def _make_search(kind: str, options: dict[str, Any]) -> search.AbstractSearch:
    options = dict(options)
    return search.make(kind, options.pop("num_simulations"), **options)


def _check_full_move(env: envs.AbstractEnv, what: str, error: type[Exception]) -> None:
    """`error` unless `env` is backgammon, the one game of the full-move agent."""
    game = getattr(env, "name", None)
    if game != "backgammon":
        raise error(
            f"{what} (the value over the roll's whole moves) plays backgammon; "
            f"this game is {game or env!r}"
        )


def _unknown_agent(what: str, kind: str, kinds: tuple[str, ...]) -> str:
    message = f"{what} must be one of {kinds}, got {kind!r}"
    if kind == "full-move":  # an AlphaZero kind that MuZero lacks
        message += " (full-move reads an AlphaZero network's value; MuZero's is its model's)"
    return message


def _simulations(player: arena.AbstractAgent) -> int | None:
    """The simulations of a search agent's search; None for an agent without one."""
    found = getattr(player, "search", None)
    return None if found is None else found.num_simulations


def _label(kind: str, player: arena.AbstractAgent) -> str:
    simulations = _simulations(player)
    return kind if simulations is None else f"{kind} ({simulations} sims)"


def _when(iteration: int) -> str:
    return f"iteration {iteration}" + (" (untrained)" if iteration == 0 else "")


# ----------------------------------------------------------------------------- AlphaZero


@dataclasses.dataclass(frozen=True)
class AlphaZeroRecipe(AbstractRecipe):
    """AlphaZero ([`azx.alphazero.AlphaZero`][]): its search and how `azx train`
    evaluates it."""

    name: ClassVar[str] = "alphazero"
    config_class: ClassVar[type] = Config
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
    plays_games: ClassVar[bool] = True
    agent_kinds: ClassVar[tuple[str, ...]] = ("search", "network", "full-move")
    """The arena agents a trained network plays as (`azx eval --agent`)."""
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
    """Games per evaluation match, half with each colour."""
    eval_search: dict[str, Any] = dataclasses.field(default_factory=dict)
    """How the search that plays in evaluations (and in `azx eval`, and
    [`azx.load_run`][]'s agent) differs from the training one: options of
    [`azx.search.make`][] that replace the training search's (e.g. `num_simulations`),
    and under `"search"` another kind, `"puct"` or `"gumbel"`, whose options are then
    these alone. Empty: the training search."""

    def __post_init__(self):
        check_types(vars(self), **self.field_types)
        check_positive_int("eval_games", self.eval_games)
        bad = set(self.eval_agents) - set(self.agent_kinds)
        if bad:
            raise ValueError(f"eval_agents must be among {self.agent_kinds}, got {sorted(bad)}")
        kind = self.eval_search.get("search", self.search)
        if kind not in ("puct", "gumbel"):
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
        greedy = (
            {"temperature": 0.0, "dirichlet_fraction": 0.0}
            if kind == "puct"
            else {"gumbel_scale": 0.0}
        )
        return _make_search(kind, options | greedy | overrides)

    def make_network(self, network, options, env, *, key):
        options = dict(options)
        if env.num_players == 1:
            options.setdefault("bounded_value", False)
        network_class = {"mlp": nets.MLP, "resnet": nets.AlphaZeroResNet}[network]
        return network_class(env.observation_shape, env.num_actions, key=key, **options)

    def make_trainer(self, env, config):
        return AlphaZero(env, self.make_search(), config)

    def check_training(self, env):
        for spec in self.eval_opponents:
            arena.opponent(spec, env)
        if "full-move" in self.eval_agents:
            _check_full_move(env, "eval_agents' 'full-move'", ValueError)
        if self.eval_games % 2:
            raise ValueError(
                "`eval_games` must be even (half the games with each colour), got "
                f"{self.eval_games}"
            )

    def record(self, trainer, state, history, rate):
        del trainer, history  # the loss of the call's last iteration, as logged before
        metrics = state.metrics
        return {
            "loss": float(metrics.loss),
            "policy_loss": float(metrics.policy_loss),
            "value_loss": float(metrics.value_loss),
            "selfplay_steps_per_s": rate,
        }

    def evaluate(self, trainer, state, *, key, phase):
        agents = {kind: self.agent(state.net, kind, None, trainer.env) for kind in self.eval_agents}
        if trainer.env.num_players == 1:  # episodes, not matches
            return evaluate_episodes(
                trainer.env,
                agents,
                num_episodes=self.eval_games,
                key=key,
                on_agent=lambda agent: phase(f"evaluating {agent} ({self.eval_games} episodes)"),
            )
        return evaluate(
            trainer.env,
            agents,
            self.eval_opponents,
            num_games=self.eval_games,
            key=key,
            on_match=lambda agent, spec: phase(f"evaluating {agent} vs {spec}"),
        )

    def evaluation_lines(self, results):
        if _single_player(results):
            return [f"{agent}: {describe_episodes(record)}" for agent, record in results.items()]
        return [
            f"{agent} vs {spec}: {describe(result)}"
            for agent, by_opponent in results.items()
            for spec, result in by_opponent.items()
        ]

    def progress(self, record):
        return f"loss {record['loss']:.3f} | {record['selfplay_steps_per_s']:.0f} moves/s"

    def plot(self, records, path, *, title):
        evaluated = [r["eval"] for r in records if "eval" in r]
        if evaluated and _single_player(evaluated[0]):
            plot_episodes_curve(records, path, title=title)
        else:
            plot_learning_curve(records, path, title=title)

    def agent(self, net, kind, num_simulations, env):
        if kind not in self.agent_kinds:
            raise RunError(_unknown_agent("agent", kind, self.agent_kinds))
        if kind == "network":
            return arena.NetworkAgent(net)
        if kind == "full-move":
            _check_full_move(env, "agent 'full-move'", RunError)
            return arena.ValueMoveAgent(net, env)
        overrides = {} if num_simulations is None else {"num_simulations": num_simulations}
        return arena.SearchAgent(net, self.make_eval_search(**overrides))

    def play_episodes(self, trainer, state, num_episodes, *, key, greedy):
        raise RunError("episodes need a PPO run; this is an AlphaZero run")

    def evaluate_run(self, run, options, *, seed):
        self.check_eval(options, run.env)
        return _evaluate_alphazero_run(run, options, seed=seed)

    def check_eval(self, options, env):
        games, agent = options["games"], options["agent"] or "search"
        if agent not in self.agent_kinds:
            raise RunError(_unknown_agent("--agent", agent, self.agent_kinds))
        if agent == "full-move":
            _check_full_move(env, "--agent full-move", RunError)
        if env.num_players == 1 and options["opening_plies"]:
            raise RunError("--opening-plies is for two-player games; this run's game has one")
        if env.num_players == 2 and games is not None and games % 2:
            raise RunError(f"--games must be even (half the games with each colour), got {games}")
        for spec in options["opponent"] or []:
            if spec.strip().startswith("run:"):
                if env.num_players == 1:
                    raise RunError(f"opponent {spec!r}: a single-player game has no opponents")
                continue  # another run: checked when it is opened
            try:
                arena.opponent(spec, env)
            except (ValueError, ImportError) as error:
                raise RunError(str(error)) from None

    def headline(self, results):
        if "results" in results:  # `azx eval`'s result: one agent
            by_name = results["results"]
            if _single_player(by_name):
                return {f"{name} return": r["return_mean"] for name, r in by_name.items()}
            return {f"vs {spec}": r["score"] for spec, r in by_name.items()}
        if _single_player(results):
            return {f"{agent} return": record["return_mean"] for agent, record in results.items()}
        return {
            f"{agent} vs {spec}": record["score"]
            for agent, by_opponent in results.items()
            for spec, record in by_opponent.items()
        }

    def vmaps_seeds(self, platform: str) -> bool:
        # On the CPU the search is loops over rows and tree nodes, which batched over
        # seeds cost more than the seeds one after another (`benchmarks.seeds`); mapped,
        # each seed is bit for bit its own run. Accelerators batch the seeds.
        return platform != "cpu"

    def for_seeds(self, trainer):
        # Under `vmap` the CPU's row loops (`PlatformBackend`) run every seed's rows in
        # every iteration of every seed's loop; the lockstep kernels batch as plain array
        # code. Every backend gives the same search, bit for bit.
        if isinstance(getattr(trainer.search, "backend", None), search.PlatformBackend):
            return eqx.tree_at(lambda t: t.search.backend, trainer, search.LockstepBackend())
        return trainer


def _evaluate_single_player_run(run, options, agent: str, episodes: int, *, seed: int):
    """`azx eval` of an AlphaZero run of a single-player game: the agent's episodes, and
    those of every `--opponent` spec, played as a baseline on the same key."""
    player = run.agent(agent, num_simulations=options["simulations"])
    label = _label(agent, player)
    agents = {label: player}
    for spec in options["opponent"] or []:
        try:
            agents[spec] = arena.opponent(spec, run.env)
        except (ValueError, ImportError) as error:
            raise RunError(str(error)) from None
    results = evaluate_episodes(run.env, agents, num_episodes=episodes, key=jax.random.key(seed))
    lines = [f"{run.directory} at iteration {run.iteration}:"]
    lines += [f"  {name}: {describe_episodes(record)}" for name, record in results.items()]
    if getattr(run.env, "name", None) == "2048":
        # The game's own score and its largest tiles, from the same keys.
        for name, one in agents.items():
            game = arena.evaluate_2048(run.env, one, num_games=episodes, key=jax.random.key(seed))
            low, high = game.interval()
            results[name]["score_mean"], results[name]["score_interval"] = (
                game.mean_score,
                [low, high],
            )
            results[name]["tile_shares"] = {str(k): v for k, v in game.tile_shares.items()}
            lines.append(f"  {name}: {game}")
    result = {
        "run": str(run.directory),
        "iteration": run.iteration,
        "agent": agent,
        "num_simulations": _simulations(player),
        "seed": seed,
        "results": results,
    }
    return result, agent, lines


def _single_player(results: dict[str, Any]) -> bool:
    """Whether AlphaZero's evaluation results are episodes (a single-player game: a
    record per agent) rather than matches (a record per agent and opponent)."""
    return "return_mean" in next(iter(results.values()), {})


def _evaluate_alphazero_run(run, options: dict[str, Any], *, seed: int):
    """`azx eval` of an AlphaZero run (its options checked by `check_eval`): its agent
    against every opponent."""
    games = 200 if options["games"] is None else options["games"]
    agent = options["agent"] or "search"
    if run.env.num_players == 1:
        return _evaluate_single_player_run(run, options, agent, games, seed=seed)
    opening_plies = options["opening_plies"] or 0

    def opening(player):  # without random plies, the agent itself: its games unchanged
        return arena.RandomOpening(player, opening_plies) if opening_plies else player

    opponents = {}
    for spec in options["opponent"] or ["random"]:
        if spec.strip().startswith("run:"):
            name, other = _run_opponent(spec, run, agent, opening_plies)
            opponents[name] = other
            continue
        try:
            opponents[spec] = opening(arena.opponent(spec, run.env))
        except (ValueError, ImportError) as error:  # ImportError: open_spiel is missing
            raise RunError(str(error)) from None
    player = run.agent(agent, num_simulations=options["simulations"])
    results = evaluate(
        run.env, {agent: opening(player)}, opponents, num_games=games, key=jax.random.key(seed)
    )[agent]
    label = _label(agent, player)
    if opening_plies:
        label += f", the first {opening_plies} plies of every game random"
    lines = [f"{run.directory} at iteration {run.iteration}, {label}:"]
    lines += [f"  vs {spec}: {describe(record)}" for spec, record in results.items()]
    if len(results) > 1:
        lines.append(_elo_line(results))
    points = _backgammon_points(run.env, opening(player), opponents, games, seed=seed)
    lines += [f"  vs {spec}: {text}" for spec, (_, text) in points.items()]
    result = {
        "run": str(run.directory),
        "iteration": run.iteration,
        "agent": agent,
        "num_simulations": _simulations(player),
        "opening_plies": opening_plies,
        "seed": seed,
        "results": results,
    }
    if points:
        result["points"] = {spec: record for spec, (record, _) in points.items()}
    return result, agent, lines


def _backgammon_points(env, player, opponents, games: int, *, seed: int):
    """Backgammon only (`{}` for other games): each opponent's match again, scored in
    points by the rules (single, gammon, backgammon; [`azx.arena.backgammon_match`][]),
    as `{spec: (record, line)}`."""
    if getattr(env, "name", None) != "backgammon":
        return {}
    key = jax.random.fold_in(jax.random.key(seed), 1)
    points = {}
    for index, (spec, opponent) in enumerate(opponents.items()):
        match = arena.backgammon_match(
            env, player, opponent, num_games=games, key=jax.random.fold_in(key, index)
        )
        low, high = match.interval()
        record = {
            "games": match.num_games,
            "points_per_game": match.points_per_game,
            "points_low": low,
            "points_high": high,
            "counts": {str(k): v for k, v in match.counts.items()},
            "unfinished": match.num_unfinished,
        }
        points[spec] = (record, str(match))
    return points


def _elo_line(results: dict[str, dict[str, Any]]) -> str:
    ratings = arena.elo_ratings(
        {("azx", spec): (r["wins"], r["draws"], r["losses"]) for spec, r in results.items()},
        anchor="azx",
        prior_draws=1.0,
    )
    return "  Elo relative to the agent (1 prior draw per pair): " + ", ".join(
        f"{name} {rating:+.0f} [{low:+.0f}, {high:+.0f}]"
        for name, (rating, low, high) in ratings.items()
        if name != "azx"
    )


def _run_opponent(spec: str, run, agent: str, opening_plies: int):
    """`run:DIR[@ITERATION]`: that checkpoint's agent of kind `agent`, as `(name, agent)`."""
    # Run directories are opened by azx._rundir, which imports the presets and so this
    # module: imported here, when an evaluation needs it.
    from ._rundir import load_run, split_checkpoint_spec

    directory, step = split_checkpoint_spec(spec.strip().removeprefix("run:"))
    if not directory:
        raise RunError(f"opponent {spec!r}: give a run directory, as in run:runs/othello-seed0@750")
    if not opening_plies:
        raise RunError(
            f"opponent {spec!r} and the agent both play deterministically, so every game "
            "would repeat one of two; give --opening-plies N (e.g. 4) for varied games"
        )
    try:
        other = load_run(directory, step=step)
    except RunError as error:
        raise RunError(f"opponent {spec!r}: {error}") from None
    if not other.preset.recipe.plays_games:
        raise RunError(f"opponent {spec!r} is a {other.algorithm} run; it has no board-game agent")
    game, own = getattr(other.env, "name", None), getattr(run.env, "name", None)
    if game != own:
        raise RunError(f"opponent {spec!r} plays {game!r}; {run.directory} plays {own!r}")
    # Its own environment: the same game, perhaps observed differently.
    player = arena.RandomOpening(other.agent(agent), opening_plies, env=other.env)
    return f"run:{directory}@{other.iteration}", player


# ----------------------------------------------------------------------------- PPO


_PPO_NETWORKS = {
    "actor_critic": nets.ActorCritic,
    "recurrent": nets.RecurrentActorCritic,
    "continuous_actor_critic": ppo.ContinuousActorCritic,
}


@dataclasses.dataclass(frozen=True)
class PPORecipe(AbstractRecipe):
    """PPO ([`azx.ppo.PPO`][]): how `azx train` evaluates its policy."""

    name: ClassVar[str] = "ppo"
    config_class: ClassVar[type] = ppo.Config
    train_options: ClassVar[dict[str, str]] = {"eval_episodes": "eval_episodes"}
    eval_options: ClassVar[tuple[str, ...]] = ("episodes", "greedy")
    networks: ClassVar[tuple[str, ...]] = tuple(_PPO_NETWORKS)
    plays_games: ClassVar[bool] = False
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

    def check_training(self, env):
        del env  # every environment PPO trains on can be evaluated

    def record(self, trainer, state, history, rate):
        episodes = np.asarray(history.episodes)
        finished = int(np.sum(episodes))

        def per_episode(values) -> float | None:
            """The mean over the episodes that ended during the call; None if none did."""
            return float(np.sum(episodes * np.asarray(values))) / finished if finished else None

        names = ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")
        names += ("explained_variance",)
        record = {name: float(np.mean(np.asarray(getattr(history, name)))) for name in names}
        return record | {
            "learning_rate": float(state.metrics.learning_rate),
            "episodes": finished,
            "episode_return": per_episode(history.episode_return),
            "episode_length": per_episode(history.episode_length),
            "steps_per_s": rate,
        }

    def evaluate(self, trainer, state, *, key, phase):
        phase(f"evaluating the policy ({self.eval_episodes} episodes)")
        return evaluate_policy(
            trainer, state, num_episodes=self.eval_episodes, key=key, greedy=self.eval_greedy
        )

    def evaluation_lines(self, results):
        return [describe_return(results)]

    def progress(self, record):
        episode_return = record["episode_return"]
        shown = "-" if episode_return is None else f"{episode_return:.3g}"
        return f"return {shown} | {record['steps_per_s']:.0f} steps/s"

    def plot(self, records, path, *, title):
        plot_return_curve(records, path, title=title)

    def agent(self, net, kind, num_simulations, env):
        raise RunError("an arena agent needs an AlphaZero run; this is a ppo run")

    def play_episodes(self, trainer, state, num_episodes, *, key, greedy):
        greedy = self.eval_greedy if greedy is None else greedy
        return play_episodes(trainer, state, num_episodes, key, greedy)

    def evaluate_run(self, run, options, *, seed):
        greedy = self.eval_greedy if options["greedy"] is None else options["greedy"]
        episodes = self.eval_episodes if options["episodes"] is None else options["episodes"]
        record = evaluate_policy(
            run.trainer, run.state, num_episodes=episodes, key=jax.random.key(seed), greedy=greedy
        )
        line = f"{run.directory} at iteration {run.iteration}: {describe_return(record)}"
        result = {"run": str(run.directory), "iteration": run.iteration, "seed": seed, **record}
        return result, "greedy" if greedy else "policy", [line]

    def headline(self, results):
        return {"return": results["return_mean"]}


RECIPES: dict[str, type[AbstractRecipe]] = {
    recipe.name: recipe for recipe in (AlphaZeroRecipe, PPORecipe)
}
"""Every recipe, by the name `config.json` gives it."""


# ----------------------------------------------------------------------------- MuZero


_MUZERO_NETWORKS = {"mlp": mlp_net, "resnet": resnet_net}


@dataclasses.dataclass(frozen=True)
class MuZeroRecipe(AlphaZeroRecipe):
    """MuZero ([`azx.muzero.MuZero`][]): its search, and how `azx train` evaluates it.

    A trained MuZero plays as AlphaZero's network does, through an arena agent: the
    search over its learned model ([`azx.muzero.MuZeroAgent`][], exploration off) or the
    prediction at the observation's embedding (`"network"`). So it is evaluated as an
    AlphaZero run is: the agents' episodes in a single-player environment, their matches
    against `eval_opponents` in a two-player game; `azx eval` takes the same options.
    """

    name: ClassVar[str] = "muzero"
    config_class: ClassVar[type] = MuZeroConfig
    networks: ClassVar[tuple[str, ...]] = tuple(_MUZERO_NETWORKS)
    # The full-move agent reads a value network's observations; MuZero's value is the
    # learned model's, on its embeddings.
    agent_kinds: ClassVar[tuple[str, ...]] = ("search", "network")

    search: str = "gumbel"
    """`"puct"` or `"gumbel"` (native search over the learned model)."""
    search_options: dict[str, Any] = dataclasses.field(
        default_factory=lambda: {"num_simulations": 16}
    )
    """Options of [`azx.search.make`][], `num_simulations` among them (and `gamma`, the
    discount of the search and of the targets)."""

    def __post_init__(self):
        super().__post_init__()
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
        episodes = np.asarray(history.episodes)
        finished = int(np.sum(episodes))

        def per_episode(values) -> float | None:
            return float(np.sum(episodes * np.asarray(values))) / finished if finished else None

        names = ("loss", "policy_loss", "value_loss", "reward_loss", "consistency_loss")
        record = {name: float(np.mean(np.asarray(getattr(history, name)))) for name in names}
        return record | {
            "entropy": float(np.mean(np.asarray(history.policy_entropy))),
            "episodes": finished,
            "episode_return": per_episode(history.episode_return),
            "episode_length": per_episode(history.episode_length),
            "root_value": float(np.mean(np.asarray(history.root_value))),
            "steps_per_s": rate,
        }

    # The self-play return and speed, as PPO's progress shows them.
    progress = PPORecipe.progress

    def agent(self, net, kind, num_simulations, env):
        if kind == "search":
            overrides = {} if num_simulations is None else {"num_simulations": num_simulations}
            return MuZeroAgent(net, self.make_eval_search(**overrides))
        return super().agent(net, kind, num_simulations, env)

    def play_episodes(self, trainer, state, num_episodes, *, key, greedy):
        # The search without its exploration unless sampling is asked for (greedy=False).
        if trainer.env.num_players != 1:
            raise RunError("episodes need a single-player environment; this run's has two")
        greedy = True if greedy is None else greedy
        return _muzero_evaluate(
            trainer, state.net, num_episodes=num_episodes, key=key, greedy=greedy
        )


_muzero_evaluate = eqx.filter_jit(muzero_evaluate)

RECIPES[MuZeroRecipe.name] = MuZeroRecipe
