"""The recipe of an algorithm whose trained network plays as an arena agent through a
search (AlphaZero's and MuZero's), and what the application asks of such agents.

Private: `azx.presets` re-exports `AbstractAgentRecipe`.
"""

import abc
from typing import Any, ClassVar

import equinox as eqx

from . import arena, envs, search
from ._errors import RunError
from ._preset import (
    RECIPES as RECIPES,
    AbstractPolicyRecipe as AbstractPolicyRecipe,
    AbstractRecipe as AbstractRecipe,
    Option,
    check_types,
)
from ._validate import check_positive_int


class AbstractAgentRecipe(AbstractRecipe):
    """An algorithm whose trained network plays through a search as an arena agent
    (`azx play`, `run:DIR` opponents): it is judged by matches against opponents in a
    two-player game and by the agents' episodes in a single-player one."""

    agent_kinds: ClassVar[tuple[str, ...]]
    """The arena agents a trained network plays as (`azx eval --agent`)."""
    train_options: ClassVar[tuple[Option, ...]] = (
        Option(
            "eval_games",
            int,
            "Games per evaluation match, or episodes of a single-player game (even).",
            field="eval_games",
            minimum=2,
        ),
        Option(
            "opponents",
            list[str],
            "Evaluation opponent, repeatable: random, greedy, mcts:N, solver, "
            "openspiel-mcts:N, openspiel-alphabeta:DEPTH, pubeval, gnubg[:LEVEL] or "
            "expectimax[:DEPTH] (see azx eval --help).",
            field="eval_opponents",
            metavar="SPEC",
            flag="--opponent",
        ),
    )
    eval_options: ClassVar[tuple[Option, ...]] = (
        Option(
            "opponent",
            list[str],
            "random, greedy, mcts:N (rollout MCTS), solver, OpenSpiel's openspiel-mcts:N and "
            "openspiel-alphabeta:DEPTH; for backgammon pubeval and gnubg[:LEVEL] (GNU "
            "Backgammon at 0 ply, LEVEL beginner to expert, the default; pip install "
            "'azx[gnubg]'); for 2048 expectimax[:DEPTH]; or run:DIR[@ITERATION] (a checkpoint "
            "of this or another run of the same game, playing as --agent with its own "
            "simulations; needs --opening-plies); repeatable.",
            shown="random",
            metavar="SPEC",
        ),
        Option("games", int, "Games per opponent (even).", shown="200", minimum=2),
        Option(
            "agent",
            str,
            "search (network + search) or network (policy argmax); AlphaZero's backgammon "
            "also full-move (the value network rates the roll's whole moves, averaged over "
            "the opponent's rolls: fast, no search).",
            shown="search",
            metavar="KIND",
        ),
        Option(
            "simulations",
            int,
            "Search simulations.",
            shown="the run's evaluation search's",
            minimum=1,
        ),
        Option(
            "opening_plies",
            int,
            "The first N plies of every game are random legal moves, for varied games "
            "between agents that play deterministically.",
            shown="0",
            minimum=0,
        ),
    )
    search: str
    search_options: dict[str, Any]
    eval_opponents: tuple[str, ...]
    eval_agents: tuple[str, ...]
    eval_games: int
    eval_search: dict[str, Any]

    @abc.abstractmethod
    def agent(
        self,
        net,
        kind: str,
        num_simulations: int | None,
        env: envs.AbstractEnv,
        *,
        explore: bool = False,
    ) -> arena.AbstractAgent | None:
        """The arena agent of `kind` (one of `agent_kinds`) playing `net` in `env`: greedy,
        or with `explore` its sampled counterpart (None for a kind without one)."""

    def agent_simulations(self, kind: str, num_simulations: int | None) -> int | None:
        """The simulations an agent of `kind` searches with (`num_simulations`, or else
        the evaluation search's), None for the kinds without a search (`network_agent`'s)."""
        if kind in _WITHOUT_SEARCH:
            return None
        return self.agent_search(num_simulations, explore=False).num_simulations

    def agent_search(self, num_simulations: int | None, explore: bool) -> search.AbstractSearch:
        """A search agent's search: the evaluation search (with `num_simulations` if
        given), or with `explore` the training search with as many simulations."""
        overrides = {} if num_simulations is None else {"num_simulations": num_simulations}
        greedy = self.make_eval_search(**overrides)
        return self.make_search(num_simulations=greedy.num_simulations) if explore else greedy

    def check(self) -> None:
        """`ValueError` for settings that do not fit together (at construction)."""
        check_types(vars(self), type(self))
        if "num_simulations" not in self.search_options:
            raise ValueError(
                f"search_options must give num_simulations, got {self.search_options!r}"
            )
        check_positive_int("eval_games", self.eval_games)
        bad = set(self.eval_agents) - set(self.agent_kinds)
        if bad:
            raise ValueError(f"eval_agents must be among {self.agent_kinds}, got {sorted(bad)}")
        kind = self.eval_search.get("search", self.search)
        if kind != self.search and "num_simulations" not in self.eval_search:
            raise ValueError(
                f"eval_search with another kind of search ({kind!r}) must give "
                f"num_simulations, got {self.eval_search!r}"
            )
        try:  # a search that cannot play without exploring says so
            self.make_eval_search()
        except ValueError as error:
            raise ValueError(f"eval_search: {error}") from None

    def make_search(self, **overrides) -> search.AbstractSearch:
        return _make_search(self.search, self.search_options | overrides)

    def make_eval_search(self, **overrides) -> search.AbstractSearch:
        """The evaluation search (the training one, changed as `eval_search` says) with
        its exploration switched off: the most visited action (PUCT, no root noise) or
        noise-free sequential halving (Gumbel)."""
        changes = dict(self.eval_search)
        kind = changes.pop("search", self.search)
        options = self.search_options | changes if kind == self.search else changes
        return _make_search(kind, options | overrides).without_exploration()

    def vmaps_seeds(self, platform: str) -> bool:
        # On the CPU the search is loops over rows and tree nodes, which batched over
        # seeds cost more than the seeds one after another (`benchmarks.seeds`); mapped,
        # each seed is bit for bit its own run. Accelerators batch the seeds.
        return platform != "cpu"

    def for_seeds(self, trainer):
        # Under `vmap` the CPU's row loops run every seed's rows in every iteration of
        # every seed's loop; the lockstep kernels batch as plain array code. Every backend
        # gives the same search, bit for bit.
        native = isinstance(trainer.search, search.AbstractNativeSearch)
        if native and isinstance(trainer.search.backend, search.PlatformBackend):
            mapped = search.PlatformBackend(cpu_rows=False)
            return eqx.tree_at(lambda t: t.search.backend, trainer, mapped)
        return trainer

    def network_agent(
        self, net, kind: str, env: envs.AbstractEnv, explore: bool = False
    ) -> arena.AbstractAgent | None:
        """The agents without a search: `"network"` (argmax of the policy, or with
        `explore` the policy sampled) and `"full-move"` (the value over the roll's whole
        moves, backgammon only; no sampled counterpart)."""
        if kind not in self.agent_kinds:
            raise RunError(unknown_agent("agent", kind, self.agent_kinds))
        if kind == "full-move":
            check_full_move(env, "agent 'full-move'", RunError)
            return None if explore else arena.ValueMoveAgent(net, env)
        return arena.NetworkAgent(net, sample=explore)


_WITHOUT_SEARCH = ("network", "full-move")  # the kinds of `network_agent`


def _make_search(kind: str, options: dict[str, Any]) -> search.AbstractSearch:
    options = dict(options)
    return search.make(kind, options.pop("num_simulations"), **options)


def check_full_move(env: envs.AbstractEnv, what: str, error: type[Exception]) -> None:
    """`error` unless `env` is backgammon, the one game of the full-move agent."""
    if not isinstance(envs.unwrap(env), envs.PgxBackgammon):
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
