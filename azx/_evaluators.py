"""Evaluators: how a run is judged, in `azx train` (each evaluation's record, lines,
learning curve and headline figures) and in `azx eval`.

What judges a run is what its agent and its environment are, not their names: a recipe
whose network plays as an arena agent ([`azx.presets.AbstractAgentRecipe`][]) plays
matches against opponents in a two-player game (scored in points as well where the game
is backgammon) and episodes in a single-player one (with the game's own score where it
is 2048); a policy that plays its own episodes ([`azx.presets.AbstractPolicyRecipe`][])
is judged by their return. `evaluator(recipe, env)` chooses. Where a greedy player's
episodes could not differ, the sampled player is judged instead ([`azx.run.evaluate_policy`][]).

Private: the application's own.
"""

import abc
import dataclasses
from collections.abc import Callable
from typing import Any

import jax

from . import arena, envs
from ._errors import RunError
from ._recipes import (
    AbstractAgentRecipe,
    AbstractPolicyRecipe,
    AbstractRecipe,
    check_full_move,
    unknown_agent,
)
from ._report import (
    describe,
    describe_episodes,
    describe_return,
    describe_sampled,
    evaluate,
    evaluate_episodes,
    evaluate_policy,
    plot_episodes_curve,
    plot_learning_curve,
    plot_return_curve,
)
from ._rundir import Run, load_run, split_checkpoint_spec


class AbstractEvaluator(abc.ABC):
    """How runs of one recipe on one environment are judged."""

    @abc.abstractmethod
    def check_training(self) -> None:
        """`ValueError` (or `ImportError`, for a missing optional package) for evaluation
        settings that cannot run, before anything is trained or written."""

    @abc.abstractmethod
    def evaluate(self, trainer, state, *, key, phase: Callable[[str], None]) -> dict[str, Any]:
        """The evaluation `azx train` records (a metrics record's `"eval"`); `phase(text)`
        says what it is doing."""

    @abc.abstractmethod
    def evaluation_lines(self, results: dict[str, Any]) -> list[str]:
        """`evaluate`'s results as lines of text."""

    @abc.abstractmethod
    def plot(self, records: list[dict[str, Any]], path, *, title: str) -> None:
        """Draw the run's learning curve from its metrics records."""

    @abc.abstractmethod
    def headline(self, results: dict[str, Any]) -> dict[str, float]:
        """The numbers that sum up `evaluate`'s results (or those of `evaluate_run`, its
        first return value), by name: what a run of several seeds averages and draws."""

    @abc.abstractmethod
    def check_eval(self, options: dict[str, Any]) -> None:
        """`RunError` for `azx eval` options (the recipe's `eval_options`, the unset ones
        `None`) that cannot run, before any checkpoint is read."""

    @abc.abstractmethod
    def evaluate_run(
        self,
        run: Run,
        options: dict[str, Any],
        *,
        seed: int,
        on_games: Callable[[str, arena.MatchResult | arena.Episodes], None] | None = None,
    ) -> tuple[dict[str, Any], str, list[str]]:
        """`azx eval` of `run` with the given `options`: the result to save, the file's
        name (without iteration) and the lines to print.

        `on_games(name, games)`, where given, receives the games the result counts for the
        run's agent, their actions and keys kept (`azx eval --record`): each match (`name`
        its opponent), or the agent's episodes of a single-player game; evaluators whose
        games are not the arena's never call it."""


def evaluator(recipe: AbstractRecipe, env: envs.AbstractEnv) -> AbstractEvaluator:
    """The evaluator of `recipe`'s runs on `env`: by what its agent and `env` are."""
    if isinstance(recipe, AbstractAgentRecipe):
        return (MatchEvaluator if env.num_players == 2 else EpisodeEvaluator)(recipe, env)
    if isinstance(recipe, AbstractPolicyRecipe):
        return ReturnEvaluator(recipe)
    raise TypeError(
        f"no evaluator for {type(recipe).__name__}: a recipe is an AbstractAgentRecipe "
        "or an AbstractPolicyRecipe"
    )


# ----------------------------------------------------------------------------- agents


def _opponent(spec: str, env: envs.AbstractEnv) -> arena.AbstractAgent:
    try:
        return arena.opponent(spec, env)
    except (ValueError, ImportError) as error:  # ImportError: open_spiel is missing
        raise RunError(str(error)) from None


def _label(kind: str, simulations: int | None) -> str:
    return kind if simulations is None else f"{kind} ({simulations} sims)"


def _run_result(run: Run, agent: str, simulations, seed: int, results, **more) -> dict[str, Any]:
    return {
        "run": str(run.directory),
        "iteration": run.iteration,
        "agent": agent,
        "num_simulations": simulations,
        **more,
        "seed": seed,
        "results": results,
    }


@dataclasses.dataclass(frozen=True)
class _AbstractAgentEvaluator(AbstractEvaluator):
    """Runs of an arena agent's recipe on `env`, whose opponents are checked before
    training."""

    recipe: AbstractAgentRecipe
    env: envs.AbstractEnv

    def check_training(self):
        recipe = self.recipe
        for spec in recipe.eval_opponents:
            arena.opponent(spec, self.env)
        if "full-move" in recipe.eval_agents:
            check_full_move(self.env, "eval_agents' 'full-move'", ValueError)
        if recipe.eval_games % 2:
            raise ValueError(
                "`eval_games` must be even (half the games with each colour), got "
                f"{recipe.eval_games}"
            )

    def check_agent(self, agent: str) -> None:
        """`RunError` for an `azx eval --agent` that the recipe or the game lacks."""
        if agent not in self.recipe.agent_kinds:
            raise RunError(unknown_agent("--agent", agent, self.recipe.agent_kinds))
        if agent == "full-move":
            check_full_move(self.env, "--agent full-move", RunError)

    def agents(self, net, env) -> dict[str, arena.AbstractAgent]:
        """The agents `azx train` evaluates, by kind."""
        return {kind: self.recipe.agent(net, kind, None, env) for kind in self.recipe.eval_agents}


def _matches(results: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """`evaluate`'s records as `("AGENT vs OPPONENT", record)`."""
    return [(f"{a} vs {spec}", r) for a, by_spec in results.items() for spec, r in by_spec.items()]


@dataclasses.dataclass(frozen=True)
class MatchEvaluator(_AbstractAgentEvaluator):
    """Matches of the recipe's agents against opponents, half the games with each colour
    (a two-player game); backgammon's matches also in points."""

    def evaluate(self, trainer, state, *, key, phase):
        return evaluate(
            trainer.env,
            self.agents(state.net, trainer.env),
            self.recipe.eval_opponents,
            num_games=self.recipe.eval_games,
            key=key,
            on_match=lambda agent, spec: phase(f"evaluating {agent} vs {spec}"),
        )

    def evaluation_lines(self, results):
        return [f"{name}: {describe(record)}" for name, record in _matches(results)]

    def plot(self, records, path, *, title):
        plot_learning_curve(records, path, title=title)

    def headline(self, results):
        if "results" in results:  # `azx eval`'s result: one agent
            return {f"vs {spec}": r["score"] for spec, r in results["results"].items()}
        return {name: record["score"] for name, record in _matches(results)}

    def check_eval(self, options):
        games = options["games"]
        self.check_agent(options["agent"] or "search")
        if games is not None and games % 2:
            raise RunError(f"--games must be even (half the games with each colour), got {games}")
        for spec in options["opponent"] or []:
            if not spec.strip().startswith("run:"):  # another run: checked when it is opened
                _opponent(spec, self.env)

    def evaluate_run(self, run, options, *, seed, on_games=None):
        """Its agent against every opponent."""
        self.check_eval(options)
        games = 200 if options["games"] is None else options["games"]
        agent = options["agent"] or "search"
        opening_plies = options["opening_plies"] or 0

        def opening(player):  # without random plies, the agent itself: its games unchanged
            return arena.RandomOpening(player, opening_plies) if opening_plies else player

        opponents = dict(
            _run_opponent(spec, run, agent, opening_plies)
            if spec.strip().startswith("run:")
            else (spec, opening(_opponent(spec, run.env)))
            for spec in options["opponent"] or ["random"]
        )
        player = run.agent(agent, num_simulations=options["simulations"])
        simulations = self.recipe.agent_simulations(agent, options["simulations"])
        results = evaluate(
            run.env, {agent: opening(player)}, opponents, num_games=games,
            key=jax.random.key(seed),
            on_games=None if on_games is None else lambda _, spec, match: on_games(spec, match),
        )[agent]  # fmt: skip
        label = _label(agent, simulations)
        if opening_plies:
            label += f", the first {opening_plies} plies of every game random"
        lines = [f"{run.directory} at iteration {run.iteration}, {label}:"]
        lines += [f"  vs {spec}: {describe(record)}" for spec, record in results.items()]
        if len(results) > 1:
            lines.append(_elo_line(results))
        points = _backgammon_points(run.env, opening(player), opponents, games, seed=seed)
        lines += [f"  vs {spec}: {text}" for spec, (_, text) in points.items()]
        result = _run_result(run, agent, simulations, seed, results, opening_plies=opening_plies)
        if points:
            result["points"] = {spec: record for spec, (record, _) in points.items()}
        return result, agent, lines


def _backgammon_points(env, player, opponents, games: int, *, seed: int):
    """Backgammon only (`{}` for other games): each opponent's match again, scored in
    points by the rules (single, gammon, backgammon; [`azx.arena.backgammon_match`][]),
    as `{spec: (record, line)}`."""
    if not isinstance(envs.unwrap(env), envs.PgxBackgammon):
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


def _run_opponent(spec: str, run: Run, agent: str, opening_plies: int):
    """`run:DIR[@ITERATION]`: that checkpoint's agent of kind `agent`, as `(name, agent)`."""
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
    if not isinstance(other.preset.recipe, AbstractAgentRecipe):
        raise RunError(f"opponent {spec!r} is a {other.algorithm} run; it has no board-game agent")
    game, own = other.env.name, run.env.name
    if game != own:
        raise RunError(f"opponent {spec!r} plays {game!r}; {run.directory} plays {own!r}")
    # Its own environment: the same game, perhaps observed differently.
    player = arena.RandomOpening(other.agent(agent), opening_plies, env=other.env)
    return f"run:{directory}@{other.iteration}", player


def _episodes_lines(results: dict[str, dict[str, Any]], indent: str = "") -> list[str]:
    return [
        f"{indent}{name}: {line}"
        for name, record in results.items()
        for line in [describe_episodes(record), *describe_sampled(record)]
    ]


@dataclasses.dataclass(frozen=True)
class EpisodeEvaluator(_AbstractAgentEvaluator):
    """Episodes of the recipe's agents (a single-player game); 2048's also in its own
    score and largest tiles. A greedy agent whose episodes could not differ is judged by
    its sampled counterpart."""

    def evaluate(self, trainer, state, *, key, phase):
        recipe = self.recipe
        agents = self.agents(state.net, trainer.env)
        return evaluate_episodes(
            trainer.env,
            agents,
            num_episodes=recipe.eval_games,
            key=key,
            on_agent=lambda agent: phase(f"evaluating {agent} ({recipe.eval_games} episodes)"),
            sampled={
                kind: recipe.agent(state.net, kind, None, trainer.env, explore=True)
                for kind in agents
            },
        )

    def evaluation_lines(self, results):
        return _episodes_lines(results)

    def plot(self, records, path, *, title):
        plot_episodes_curve(records, path, title=title)

    def headline(self, results):
        by_name = results["results"] if "results" in results else results  # `azx eval`'s
        return {f"{name} return": record["return_mean"] for name, record in by_name.items()}

    def check_eval(self, options):
        self.check_agent(options["agent"] or "search")
        if options["opening_plies"]:
            raise RunError("--opening-plies is for two-player games; this run's game has one")
        for spec in options["opponent"] or []:
            if spec.strip().startswith("run:"):
                raise RunError(f"opponent {spec!r}: a single-player game has no opponents")
            _opponent(spec, self.env)

    def evaluate_run(self, run, options, *, seed, on_games=None):
        """The agent's episodes, and those of every `--opponent` spec, played as a
        baseline on the same key."""
        self.check_eval(options)
        episodes = 200 if options["games"] is None else options["games"]
        agent = options["agent"] or "search"
        player = run.agent(agent, num_simulations=options["simulations"])
        simulations = self.recipe.agent_simulations(agent, options["simulations"])
        name, key = _label(agent, simulations), jax.random.key(seed)
        agents = {name: player} | {
            spec: _opponent(spec, run.env) for spec in options["opponent"] or []
        }
        explored = self.recipe.agent(run.net, agent, options["simulations"], run.env, explore=True)
        sampled = {name: explored}
        recorded = None
        if on_games is not None:  # the agent's episodes, not the baselines'

            def recorded(agent_name: str, played: arena.Episodes) -> None:
                if agent_name == name:
                    on_games(agent_name, played)

        results = evaluate_episodes(
            run.env, agents, num_episodes=episodes, key=key, sampled=sampled, on_episodes=recorded
        )
        lines = [f"{run.directory} at iteration {run.iteration}:", *_episodes_lines(results, "  ")]
        if isinstance(envs.unwrap(run.env), envs.Pgx2048):
            # The game's own score and its largest tiles, from the same keys.
            for name, one in agents.items():
                game = arena.evaluate_2048(run.env, one, num_games=episodes, key=key)
                low, high = game.interval()
                results[name] |= {
                    "score_mean": game.mean_score,
                    "score_interval": [low, high],
                    "tile_shares": {str(k): v for k, v in game.tile_shares.items()},
                }
                lines.append(f"  {name}: {game}")
        return _run_result(run, agent, simulations, seed, results), agent, lines


# ----------------------------------------------------------------------------- policies


@dataclasses.dataclass(frozen=True)
class ReturnEvaluator(AbstractEvaluator):
    """The return of the policy's own episodes, as its recipe's `play_episodes` plays
    them (PPO's: [`azx.ppo.evaluate`][]); a greedy policy whose episodes could not differ
    is judged sampled ([`azx.run.evaluate_policy`][])."""

    recipe: AbstractPolicyRecipe

    def check_training(self):
        pass  # every environment the policy trains on can be evaluated

    def evaluate(self, trainer, state, *, key, phase):
        recipe = self.recipe
        phase(f"evaluating the policy ({recipe.eval_episodes} episodes)")
        return evaluate_policy(
            recipe, trainer, state, num_episodes=recipe.eval_episodes, key=key,
            greedy=recipe.eval_greedy,
        )  # fmt: skip

    def evaluation_lines(self, results):
        return [describe_return(results), *describe_sampled(results)]

    def plot(self, records, path, *, title):
        plot_return_curve(records, path, title=title)

    def headline(self, results):
        return {"return": results["return_mean"]}

    def check_eval(self, options):
        del options  # any number of episodes, greedy or sampled

    def evaluate_run(self, run, options, *, seed, on_games=None):
        del on_games  # (the policy's episodes are its recipe's, not the arena's)
        recipe = self.recipe
        greedy = recipe.eval_greedy if options["greedy"] is None else options["greedy"]
        episodes = recipe.eval_episodes if options["episodes"] is None else options["episodes"]
        record = evaluate_policy(
            recipe, run.trainer, run.state, num_episodes=episodes, key=jax.random.key(seed),
            greedy=greedy,
        )  # fmt: skip
        lines = [f"{run.directory} at iteration {run.iteration}: {describe_return(record)}"]
        lines += [f"  {line}" for line in describe_sampled(record)]
        result = {"run": str(run.directory), "iteration": run.iteration, "seed": seed, **record}
        return result, "greedy" if greedy else "policy", lines
