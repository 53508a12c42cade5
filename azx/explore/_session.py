"""What the explorer computes, without any web framework: the runs it was given, games of
a person against a run's agent, and the search's analysis of a position.

A game is its seed and its list of moves: the state after `n` moves is the same as in
`azx play` with that seed (`init` from the seed's first key, move `n` stepped and searched
with `fold_in(game_key, n)`), so that any position of the page can be set up again in
code. Every search starts from an empty tree: what the analysis shows is exactly what
decided the agent's move, and `run.agent()` called on the same position and key plays
the same move.
"""

import dataclasses
import itertools
import json
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import arena, presets
from .._errors import RunError, one_line
from .._rundir import CONFIG_FILE, Run, load_runs
from .._types import PRNGKey
from ..envs import AbstractChanceEnv, unwrap
from ..search import ROOT_INDEX, UNVISITED, Tree
from ._episode import record_episode, records_episodes


#: The most simulations the page may ask of one search (a search holds its whole tree).
MAX_SIMULATIONS = 2048
#: Games kept at once; the oldest is dropped beyond this (a page that was left open).
MAX_GAMES = 256
#: Moves of the principal variation shown.
PV_LENGTH = 12
#: Moves of a single-player episode played for the page (it stops there if still going).
MAX_EPISODE_MOVES = 1000


class ExploreError(Exception):
    """A request the explorer refuses, with the HTTP status and a message for the page."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


@dataclasses.dataclass
class ExploredRun:
    """One run the explorer serves: a seed's loaded run and its name on the page."""

    name: str
    run: Run
    group: int
    """Which directory of `azx explore --run` it came from (the seeds of one run share it)."""

    @property
    def directory(self) -> Path:
        return self.run.directory

    def check_present(self) -> None:
        """`ExploreError` (410) if the run's directory is gone from disk."""
        if not (self.run.directory / CONFIG_FILE).is_file():
            raise ExploreError(
                410,
                f"run {self.name} is no longer on disk ({self.run.directory}): it was "
                "deleted or moved while the explorer was open; start azx explore again",
            )

    def plays(self) -> str | None:
        """Why this run's agent cannot play on the page, or None if it can."""
        if records_episodes(self.run):
            return None
        if not isinstance(self.run.preset.recipe, presets.AbstractAgentRecipe):
            return (
                f"{self.name} is a {self.run.algorithm} run: the page plays the agents of "
                "AlphaZero and MuZero runs and the single-player episodes of PPO runs, and "
                "shows this one's learning curves"
            )
        if self.run.env.num_players > 2:
            return f"{self.name} plays a game of {self.run.env.num_players} players"
        return None

    def describe(self) -> dict[str, Any]:
        episodes = records_episodes(self.run)
        search = None
        if self.plays() is None and not episodes:
            search = self.run.search().num_simulations
        return {
            "name": self.name,
            "directory": str(self.run.directory),
            "game": self.run.env.name,
            "algorithm": self.run.algorithm,
            "iteration": self.run.iteration,
            "seed": self.run.seed,
            "players": self.run.env.num_players,
            "analysed": self.plays() is None and not episodes and self.run.algorithm != "muzero",
            "episodes": episodes,
            "simulations": search,
            "plays": self.plays(),
            "group": self.group,
        }


def load_explored(directories: list[Path]) -> list[ExploredRun]:
    """Every seed's run of each directory, named by the directory (and the seed, for a run
    of several seeds)."""
    explored = []
    for group, directory in enumerate(directories):
        runs = load_runs(directory)
        for run in runs:
            name = directory.name if len(runs) == 1 else f"{directory.name} seed {run.seed}"
            explored.append(ExploredRun(name=name, run=run, group=group))
    return explored


def curve_points(records: list[dict[str, Any]]) -> dict[str, list[list[int | float]]]:
    """Each number logged in `records` (nested ones named by their path, as
    `eval.search.random.score`) as `[iteration, value]` points."""
    points: dict[str, list[list[int | float]]] = {}

    def visit(iteration, prefix, value):
        if isinstance(value, dict):
            for key, inner in value.items():
                visit(iteration, f"{prefix}{key}.", inner)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            if np.isfinite(value):
                points.setdefault(prefix[:-1], []).append([iteration, float(value)])

    for record in records:
        iteration = record["iteration"]
        visit(iteration, "", {k: v for k, v in record.items() if k != "iteration"})
    return points


class Moves:
    """How one game's actions are named and laid out on the page: a grid of cells (board
    games whose actions are squares), a row of columns (connect four), or a list."""

    def __init__(self, env):
        from .._play import _Board

        try:
            board = _Board(unwrap(env))
        except ValueError:
            board = None
        self.board = board
        self.num_actions = env.num_actions
        # 2048's actions slide the tiles (pgx's order); its board is no grid of moves.
        self.directions = ("left", "up", "right", "down") if env.name == "2048" else None
        self.backgammon = env.name == "backgammon" and env.num_actions == 6 * 26

    def name(self, action: int) -> str:
        if self.directions is not None:
            return self.directions[action]
        if self.backgammon:
            return _backgammon_move(action)
        return self.board.name(action) if self.board is not None else str(action)

    def layout(self) -> dict[str, Any]:
        names = [self.name(a) for a in range(self.num_actions)]
        if self.board is None or self.directions is not None:
            return {"kind": "list", "rows": 1, "cols": self.num_actions, "names": names}
        kind = "grid" if self.board.kind in ("cell", "coordinate") else "column"
        return {"kind": kind, "rows": self.board.rows, "cols": self.board.cols, "names": names}


def _backgammon_move(action: int) -> str:
    """pgx's backgammon action `6 * source + die - 1` in the usual notation, points
    numbered from the mover's side (24 down to 1, then off): `13/8`, `bar/22`, `4/off`.

    pgx numbers the mover's points 0 to 23 in the direction of play (source 0 is no
    move, 1 the bar, `2 + i` point `i`), so its point `i` is the usual `24 - i`."""
    source, die = divmod(action, 6)
    die += 1
    if source == 0:
        return "no move"
    if source == 1:
        return f"bar/{25 - die}"
    point = 24 - (source - 2)
    return f"{point}/{point - die}" if point - die >= 1 else f"{point}/off"


@eqx.filter_jit
def _search(agent: arena.SearchAgent, env, state, key):
    # What `SearchAgent.__call__` does on a fresh tree (`agent.init`), keeping the output
    # whole; with the network's own prior and value of the position beside it.
    output = agent.search(agent.net, env, agent.init(env, 1), state, key=jax.random.split(key, 1))
    one = jax.tree.map(lambda x: x[0], state)
    logits, value = agent.net(env.observation(one))
    return output, logits, value, env.legal_action_mask(one)


def analyse(agent: arena.SearchAgent, env, state, key, moves: Moves) -> dict[str, Any]:
    """The network's prior and value and the search's visit share, Q, policy, chosen move
    and principal variation for the batched (batch of one) `state`, searched with `key`
    as `agent(env, agent.init(env, 1), state, key=key)` searches it."""
    output, logits, value, legal = _search(agent, env, state, key)
    legal = np.asarray(legal)
    num_actions = env.num_actions
    masked = jnp.where(jnp.asarray(legal), logits, -jnp.inf)
    prior = np.asarray(jax.nn.softmax(masked))
    action = int(output.action[0])
    analysis: dict[str, Any] = {
        "simulations": agent.search.num_simulations,
        "value": float(value),
        "root_value": float(output.root_value[0]),
        "action": action,
        "action_name": moves.name(action),
        "legal": [int(a) for a in np.flatnonzero(legal)],
        "prior": _floats(prior),
        "policy": _floats(np.asarray(output.policy_target[0])),
        "visits": None,
        "visit_share": None,
        "q": None,
        "pv": [action],
    }
    tree = output.tree
    if isinstance(tree, Tree):
        visits = np.asarray(tree.edge_visits[0, ROOT_INDEX, :num_actions])
        q = np.asarray(tree.edge_q[0, ROOT_INDEX, :num_actions])
        total = visits.sum()
        analysis["visits"] = [int(v) for v in visits]
        analysis["visit_share"] = _floats(visits / total if total > 0 else visits)
        # Q only where the move was searched; unvisited moves have no estimate.
        analysis["q"] = [float(q[a]) if visits[a] > 0 else None for a in range(num_actions)]
        analysis["pv"] = _principal_variation(tree, action, num_actions)
    analysis["chance"] = _chance(env, state, action, tree)
    analysis["pv_names"] = [moves.name(a) for a in analysis["pv"]]
    analysis["names"] = [moves.name(a) for a in range(num_actions)]
    return analysis


@eqx.filter_jit
def _afterstate_chance(env: AbstractChanceEnv, state, action):
    after = env.afterstate(jax.tree.map(lambda x: x[0], state), action)
    return env.has_chance(after), env.chance_probabilities(after)


def _chance(env, state, action: int, tree) -> list[dict[str, Any]] | None:
    """In a game that exposes its chance, the outcomes that can follow the chosen move:
    each one's probability and, where the search planned over them (chance nodes), its
    visits and Q. None where chance does not act after the move."""
    if not isinstance(env, AbstractChanceEnv):
        return None
    has_chance, probabilities = _afterstate_chance(env, state, jnp.int32(action))
    if not bool(has_chance):
        return None
    probabilities = np.asarray(probabilities)
    visits = q = None
    if isinstance(tree, Tree) and tree.chance is not None:
        node = int(tree.children[0, ROOT_INDEX, action])
        if node != UNVISITED and bool(tree.chance[0, node]):
            visits = np.asarray(tree.edge_visits[0, node, : len(probabilities)])
            q = np.asarray(tree.edge_q[0, node, : len(probabilities)])
    return [
        {
            "outcome": int(outcome),
            "probability": float(probabilities[outcome]),
            "visits": None if visits is None else int(visits[outcome]),
            "q": None if visits is None or visits[outcome] == 0 else float(q[outcome]),
        }
        for outcome in np.flatnonzero(probabilities > 0)
    ]


def _floats(values: np.ndarray) -> list[float]:
    return [float(v) for v in values]


def _principal_variation(tree: Tree, action: int, num_actions: int) -> list[int]:
    """The chosen move, then the most visited move below it at each decision node."""
    children = np.asarray(tree.children[0])
    edge_visits = np.asarray(tree.edge_visits[0])
    chance = None if tree.chance is None else np.asarray(tree.chance[0])
    line, node = [action], children[ROOT_INDEX, action]
    while node != UNVISITED and len(line) < PV_LENGTH:
        if chance is not None and chance[node]:
            break  # what follows depends on a chance outcome
        visits = edge_visits[node, :num_actions]
        if visits.max() <= 0:
            break
        move = int(np.argmax(visits))
        line.append(move)
        node = children[node, move]
    return line


def check_simulations(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ExploreError(400, f"simulations must be a whole number, got {value!r}")
    if not 1 <= value <= MAX_SIMULATIONS:
        raise ExploreError(400, f"simulations must be from 1 to {MAX_SIMULATIONS}, got {value}")
    return value


_step = eqx.filter_jit(lambda env, state, action, key: jax.vmap(env.step)(state, action, key))


_act = eqx.filter_jit(
    lambda agent, env, state, key: agent(env, agent.init(env, 1), state, key=key)[0]
)


class Game:
    """A person against one run's agent, or the agent's own episode of a single-player
    game: the seed, the moves so far and each position."""

    def __init__(
        self,
        explored: ExploredRun,
        *,
        human_first: bool,
        seed: int,
        simulations: int,
        init_key: PRNGKey | None = None,
    ):
        self.explored = explored
        self.env = explored.run.env
        self.moves = Moves(self.env)
        self.seed = seed
        self.simulations = simulations
        self.agent = explored.run.agent("search", num_simulations=simulations)
        seed_init_key, self.game_key = jax.random.split(jax.random.key(seed))
        # A recorded evaluation game's own keys: its start and each step (the dice of a
        # game of chance) are the game's; the searches shown use the seed's keys.
        self.init_key = init_key
        self.step_keys: list[PRNGKey] | None = None if init_key is None else []
        if init_key is None:
            init_key = seed_init_key
        self.states = [jax.vmap(self.env.init)(init_key[None])]
        self.actions: list[int] = []
        self.players: list[int] = []
        self.rewards: list[float] = []
        first = self.player()
        self.single = self.env.num_players == 1
        # Nobody is the person in a single-player episode: the agent plays every move.
        self.human = None if self.single else first if human_first else 1 - first
        self.human_first = human_first
        # Who plays the other side: the person, or in a recorded game the opponent.
        self.other = "you"
        # The analysis that decided each of the agent's moves, by move number.
        self.analyses: dict[int, dict[str, Any]] = {}

    def one(self):
        return jax.tree.map(lambda x: x[0], self.states[-1])

    def player(self) -> int:
        return int(self.env.current_player(self.one()))

    def over(self) -> bool:
        one = self.one()
        return bool(self.env.terminated(one)) or bool(self.env.truncated(one))

    def key(self, move: int):
        """The key of move `move`: the agent's search and the step both use it (`azx play`)."""
        return jax.random.fold_in(self.game_key, move)

    def _play(self, action: int, step_key: PRNGKey | None = None) -> None:
        move = len(self.actions)
        self.players.append(self.player())
        keys = jax.random.split(self.key(move), 1) if step_key is None else step_key[None]
        state = _step(self.env, self.states[-1], jnp.asarray([action], jnp.int32), keys)
        self.states.append(state)
        self.actions.append(action)
        # The mover's reward for the move (a single player's return adds these up).
        self.rewards.append(float(self.env.rewards(self.one())[self.players[-1]]))

    def analyse(self, simulations: int | None = None) -> dict[str, Any]:
        """The analysis of the position on the board, with the key its move would use."""
        if self.over():
            raise ExploreError(400, "the game is over: there is no move to analyse")
        if not isinstance(self.agent, arena.SearchAgent):
            raise ExploreError(
                400,
                f"the analysis reads an AlphaZero network's prior and value; "
                f"{self.explored.name} is a {self.explored.run.algorithm} run",
            )
        agent = self.agent
        if simulations is not None and simulations != self.simulations:
            agent = self.explored.run.agent("search", num_simulations=simulations)
        move = len(self.actions)
        analysis = analyse(agent, self.env, self.states[-1], self.key(move), self.moves)
        return analysis | {"move": move}

    def reply(self) -> None:
        """The agent's moves until it is the person's turn or the game is over (a
        single-player episode: over, or `MAX_EPISODE_MOVES` long)."""
        while not self.over() and self.player() != self.human:
            if self.single and len(self.actions) >= MAX_EPISODE_MOVES:
                break
            move = len(self.actions)
            if isinstance(self.agent, arena.SearchAgent):
                analysis = self.analyse()
                self.analyses[move] = analysis
                action = analysis["action"]
            else:  # (MuZero's agent: its search plans in its learned model)
                action = int(_act(self.agent, self.env, self.states[-1], self.key(move))[0])
            self._play(action)

    def play_out(self, opponent: arena.AbstractAgent, name: str) -> None:
        """The agent against `opponent` (on the person's side) to the end: a recorded
        game. `opponent` searches each position afresh with the move's key, as the agent
        does."""
        self.other = name
        while not self.over():
            if self.player() == self.human:
                move = len(self.actions)
                self._play(int(_act(opponent, self.env, self.states[-1], self.key(move))[0]))
            else:
                self.reply()

    def replay(
        self, actions: list[int], other: str, step_keys: list[PRNGKey] | None = None
    ) -> None:
        """Play `actions` from the start (a recorded game), each stepped with its key of
        `step_keys` where given (a game made with `init_key`); each analysis of the
        agent's moves is made when its frame is asked for."""
        if (step_keys is None) != (self.step_keys is None):
            raise ValueError("step_keys replay a game made with init_key, and only such")
        if step_keys is not None and len(step_keys) != len(actions):
            raise ValueError(f"{len(actions)} actions need as many step keys, got {len(step_keys)}")
        self.other = other
        for index, action in enumerate(actions):
            legal = np.asarray(self.env.legal_action_mask(self.one()))
            if self.over() or not 0 <= action < len(legal) or not legal[action]:
                raise ExploreError(
                    400, f"the record's move {len(self.actions) + 1} ({action}) is not legal"
                )
            if step_keys is None:
                self._play(action)
            else:
                self._play(action, step_keys[index])
                self.step_keys.append(step_keys[index])

    def record(self) -> dict[str, Any]:
        """The game as a small JSON record, which `replay` plays again."""
        return {
            "azx_replay": 1,
            "run": str(self.explored.directory.resolve()),
            "iteration": self.explored.run.iteration,
            "game": self.env.name,
            "seed": self.seed,
            "simulations": self.simulations,
            "human_first": self.human_first,
            "opponent": None if self.single else self.other,
            "actions": self.actions,
            "by": [self._by(player) for player in self.players],
            "result": self.result(),
            "return": float(sum(self.rewards)),
        } | self._keys()

    def _keys(self) -> dict[str, Any]:
        """A recorded evaluation game's keys, as `read_replay` reads them back."""
        if self.init_key is None:
            return {}
        data = [jax.random.key_data(key).tolist() for key in [self.init_key, *self.step_keys]]
        return {"init_key": data[0], "step_keys": data[1:]}

    def frame(self, index: Any) -> dict[str, Any]:
        """Position `index` of the game (0: the start), the move played from it and the
        analysis that chose it (an agent's move), and the return up to it."""
        if isinstance(index, bool) or not isinstance(index, int):
            raise ExploreError(400, f"frame must be a whole number, got {index!r}")
        if not 0 <= index < len(self.states):
            raise ExploreError(
                404, f"no frame {index}: this game has frames 0 to {len(self.states) - 1}"
            )
        one = jax.tree.map(lambda x: x[0], self.states[index])
        played = index < len(self.actions)
        searched = isinstance(self.agent, arena.SearchAgent)
        if played and self._by(self.players[index]) == "azx" and searched:
            if index not in self.analyses:  # a recorded game's: the search that chose it
                self.analyses[index] = analyse(
                    self.agent, self.env, self.states[index], self.key(index), self.moves
                ) | {"move": index}
        return {
            "frame": index,
            "frames": len(self.states),
            "svg": _svg(one) or _observation_svg(np.asarray(self.env.observation(one))),
            "action": self.actions[index] if played else None,
            "name": self.moves.name(self.actions[index]) if played else None,
            "by": self._by(self.players[index]) if played else None,
            "reward": self.rewards[index - 1] if index > 0 else 0.0,
            "return": float(sum(self.rewards[:index])),
            "analysis": self.analyses.get(index),
        }

    def _by(self, player: int) -> str:
        return self.other if player == self.human else "azx"

    def move(self, action: Any) -> None:
        """The person's `action`, then the agent's reply."""
        if self.other != "you":
            raise ExploreError(400, "a recorded game is stepped through, not played on")
        if self.over():
            raise ExploreError(400, "the game is over; start a new one")
        if self.player() != self.human:
            raise ExploreError(409, "the agent plays every move of this game, not you")
        if isinstance(action, bool) or not isinstance(action, int):
            raise ExploreError(400, f"action must be a whole number, got {action!r}")
        legal = np.asarray(self.env.legal_action_mask(self.one()))
        if not 0 <= action < len(legal) or not legal[action]:
            names = ", ".join(self.moves.name(int(a)) for a in np.flatnonzero(legal))
            raise ExploreError(400, f"{self._name(action)} is not a legal move; legal: {names}")
        self._play(action)
        self.reply()

    def _name(self, action: int) -> str:
        if 0 <= action < self.env.num_actions:
            return f"{self.moves.name(action)} (action {action})"
        return f"action {action}"

    def undo(self) -> None:
        """Back to the person's turn before their last move."""
        if self.other != "you":
            raise ExploreError(400, "a recorded game is stepped through, not played on")
        if self.human is None or self.human not in self.players:
            raise ExploreError(400, "there is no move of yours to undo")
        while True:
            self.states.pop()
            self.actions.pop()
            self.analyses.pop(len(self.actions), None)
            if self.players.pop() == self.human:
                break

    def result(self) -> str | None:
        if not self.over():
            return None
        if self.single:
            return f"Return {sum(self.rewards):g}"
        rewards = np.asarray(self.env.rewards(self.one()))
        outcome = int(np.sign(rewards[self.human] - rewards[1 - self.human]))
        if self.other != "you":
            return {1: f"{self.other} wins.", 0: "Draw.", -1: "azx wins."}[outcome]
        return {1: "You win!", 0: "Draw.", -1: "azx wins."}[outcome]

    def view(self) -> dict[str, Any]:
        one = self.one()
        over = self.over()
        legal = [] if over else [int(a) for a in np.flatnonzero(self.env.legal_action_mask(one))]
        last = max(self.analyses) if self.analyses else None
        to_move = None if over else self._by(self.player())
        return {
            "run": self.explored.name,
            "opponent": self.other,
            "game": self.env.name,
            "seed": self.seed,
            "simulations": self.simulations,
            "human_first": self.human_first,
            "move": len(self.actions),
            "svg": _svg(one),
            "layout": self.moves.layout(),
            "legal": legal,
            "history": [
                {"by": self._by(player), "action": action, "name": self.moves.name(action)}
                for player, action in zip(self.players, self.actions)
            ],
            "to_move": to_move,
            "single_player": self.single,
            "frames": len(self.states),
            "return": float(sum(self.rewards)),
            "over": over,
            "result": self.result(),
            "last_analysis": None if last is None else self.analyses[last],
        }


class Episode:
    """A single-player episode of a PPO or MuZero run, played as the run's evaluation
    plays it (`run.play_episodes(1, key=jax.random.key(seed))`: the policy greedy or
    sampled as the run evaluates, its memory and observation statistics, continuous
    actions) and recorded whole, then shown frame by frame with the return so far."""

    def __init__(self, explored: ExploredRun, *, seed: int):
        self.explored = explored
        self.env = explored.run.env
        self.moves = Moves(self.env)
        self.seed = seed
        recorded = record_episode(
            explored.run, key=jax.random.key(seed), max_steps=MAX_EPISODE_MOVES
        )
        self.states = recorded.states
        self.actions = recorded.actions
        self.rewards = recorded.rewards
        self.returns = recorded.returns()
        self.ended = recorded.over

    def _drawing(self, index: int) -> str:
        one = jax.tree.map(lambda x: x[0], self.states[index])
        return _svg(one) or _observation_svg(np.asarray(self.env.observation(one)))

    def _name(self, action: Any) -> str:
        if isinstance(action, list):  # a continuous action
            return "(" + ", ".join(f"{value:.3g}" for value in action) + ")"
        return self.moves.name(action)

    def frame(self, index: Any) -> dict[str, Any]:
        """Position `index` of the episode (0: the start), the action taken from it, the
        reward that action brought and the return up to the position."""
        if isinstance(index, bool) or not isinstance(index, int):
            raise ExploreError(400, f"frame must be a whole number, got {index!r}")
        if not 0 <= index < len(self.states):
            raise ExploreError(
                404, f"no frame {index}: this episode has frames 0 to {len(self.states) - 1}"
            )
        played = index < len(self.actions)
        return {
            "frame": index,
            "frames": len(self.states),
            "svg": self._drawing(index),
            "action": self.actions[index] if played else None,
            "name": self._name(self.actions[index]) if played else None,
            "by": "azx" if played else None,
            "reward": self.rewards[index - 1] if index > 0 else 0.0,
            "return": self.returns[index],
            "analysis": None,
        }

    def view(self) -> dict[str, Any]:
        total = self.returns[-1]
        return {
            "run": self.explored.name,
            "opponent": "you",
            "game": self.env.name,
            "seed": self.seed,
            "simulations": None,
            "human_first": False,
            "move": len(self.actions),
            "svg": self._drawing(len(self.states) - 1),
            "layout": {"kind": "list", "rows": 1, "cols": 0, "names": []},
            "legal": [],
            "history": [{"by": "azx", "action": a, "name": self._name(a)} for a in self.actions],
            "to_move": None,
            "single_player": True,
            "frames": len(self.states),
            "return": total,
            "over": self.ended,
            "result": f"Return {total:g}" if self.ended else None,
            "last_analysis": None,
        }

    def analyse(self, simulations: int | None = None) -> dict[str, Any]:
        del simulations
        raise ExploreError(
            400,
            f"{self.explored.name} is a {self.explored.run.algorithm} run: its "
            "episodes are shown without an analysis",
        )

    def move(self, action: Any) -> None:
        del action
        raise ExploreError(400, "the agent plays every move of an episode, not you")

    def undo(self) -> None:
        raise ExploreError(400, "there is no move of yours to undo")


def _observation_svg(observation: np.ndarray) -> str:
    """An observation drawn as grey cells: a vector as one row, an image (several planes
    summed, each weighted by its index) as its grid."""
    values = observation.astype(np.float64)
    if values.ndim == 3:
        values = (values * np.arange(1, values.shape[-1] + 1)).sum(axis=-1)
    values = values.reshape(1, -1) if values.ndim < 2 else values.reshape(values.shape[0], -1)
    low, high = float(values.min()), float(values.max())
    scaled = (values - low) / (high - low) if high > low else np.zeros_like(values)
    rows, cols = scaled.shape
    cell = max(4, min(40, 400 // max(rows, cols)))
    cells = "".join(
        f'<rect x="{c * cell}" y="{r * cell}" width="{cell}" height="{cell}" '
        f'fill="rgb({v},{v},{v})"/>'
        for r in range(rows)
        for c in range(cols)
        for v in [int(255 * (1 - scaled[r, c]))]
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{cols * cell}" height="{rows * cell}">'
        f"{cells}</svg>"
    )


def _svg(state) -> str | None:
    """pgx's drawing of the position, or None for a state that pgx does not draw."""
    to_svg = getattr(state, "to_svg", None)
    if to_svg is None:
        return None
    try:
        return to_svg()
    except Exception:  # a game pgx has no drawing for
        return None


def read_replay(path: Path, runs: list[ExploredRun]) -> dict[str, Any]:
    """The record `path` written by `azx eval --record`, with the index of the served run
    it belongs to (the one in its directory, or another of its game at its iteration).

    **Raises:** `RunError` for a file that is no such record, or whose run is not served.
    """
    try:
        record = json.loads(Path(path).read_text())
        if not isinstance(record, dict) or record.get("azx_replay") != 1:
            raise ValueError("it is not a record written by azx eval --record")
        actions = record["actions"]
        if not isinstance(actions, list) or not all(
            isinstance(a, int) and not isinstance(a, bool) for a in actions
        ):
            raise ValueError("its actions are not a list of whole numbers")
        for name, kind in (("seed", int), ("simulations", int), ("human_first", bool)):
            if not isinstance(record[name], kind):
                raise ValueError(f"its {name} is not a {kind.__name__}")
        check_simulations(record["simulations"])
        if ("init_key" in record) != ("step_keys" in record):
            raise ValueError("it has init_key without step_keys, or step_keys without init_key")
        if "init_key" in record:
            keys = [record["init_key"], *record["step_keys"]]
            if len(keys) != len(actions) + 1:
                raise ValueError(f"{len(actions)} actions need as many step_keys")
            record["init_key"], *record["step_keys"] = [_key(data) for data in keys]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, ValueError) as error:
        raise RunError(f"{path} cannot be replayed: {one_line(error)}") from None
    except ExploreError as error:
        raise RunError(f"{path} cannot be replayed: {error.message}") from None
    matching = [
        index
        for index, explored in enumerate(runs)
        if str(explored.directory.resolve()) == record["run"]
        and explored.run.iteration == record["iteration"]
    ]
    if not matching:
        raise RunError(
            f"{path} replays a game of {record['run']} at iteration {record['iteration']}: "
            "serve that run too (azx explore --run DIR)"
        )
    name = Path(path).stem
    return record | {"run_index": matching[0], "name": name, "path": str(path)}


def _key(data: Any) -> PRNGKey:
    """A key from a record's key data (`jax.random.key_data` of a key, as a list)."""
    shape = jax.random.key_data(jax.random.key(0)).shape
    if not (
        isinstance(data, list)
        and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 2**32 for x in data)
        and (len(data),) == shape
    ):
        raise ValueError(f"its key {data!r} is not {shape[0]} whole numbers from 0 to 2**32-1")
    return jax.random.wrap_key_data(np.asarray(data, np.uint32))


class Explorer:
    """The runs served and the games in play, behind one lock: the web page's requests
    arrive on several threads, and each game changes step by step."""

    def __init__(self, runs: list[ExploredRun], replays: list[Path] = ()):
        self.runs = runs
        self.replays = [read_replay(path, runs) for path in replays]
        self.games: OrderedDict[str, Game | Episode] = OrderedDict()
        self.lock = threading.Lock()
        self._ids = itertools.count(1)

    def run(self, index: Any) -> ExploredRun:
        if isinstance(index, bool) or not isinstance(index, int):
            raise ExploreError(400, f"run must be the number of a run, got {index!r}")
        if not 0 <= index < len(self.runs):
            raise ExploreError(
                404, f"no run {index}: the explorer serves runs 0 to {len(self) - 1}"
            )
        explored = self.runs[index]
        explored.check_present()
        return explored

    def __len__(self) -> int:
        return len(self.runs)

    def curves(self, index: Any) -> dict[str, Any]:
        """The learning curves of every seed of the run that `index` belongs to."""
        group = self.run(index).group
        seeds = []
        for explored in self.runs:
            if explored.group == group:
                explored.check_present()
                points = curve_points(explored.run.metrics())
                seeds.append({"name": explored.name, "seed": explored.run.seed, "points": points})
        names = sorted({name for seed in seeds for name in seed["points"]})
        return {"metrics": names, "seeds": seeds}

    def new_game(self, run: Any, *, human_first: Any, seed: Any, simulations: Any) -> str:
        explored = self.run(run)
        why = explored.plays()
        if why is not None:
            raise ExploreError(400, why)
        if not isinstance(human_first, bool):
            raise ExploreError(400, f"human_first must be true or false, got {human_first!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**31:
            raise ExploreError(400, f"seed must be a whole number from 0 to 2**31-1, got {seed!r}")
        if records_episodes(explored.run):
            return self._add(Episode(explored, seed=seed))
        if simulations is None:
            simulations = explored.run.search().num_simulations
        game = Game(
            explored,
            human_first=human_first,
            seed=seed,
            simulations=check_simulations(simulations),
        )
        game.reply()
        return self._add(game)

    def open_replay(self, index: Any) -> str:
        """A game made of recorded replay `index`'s moves."""
        if isinstance(index, bool) or not isinstance(index, int):
            raise ExploreError(400, f"replay must be the number of a replay, got {index!r}")
        if not 0 <= index < len(self.replays):
            raise ExploreError(404, f"no replay {index}: the explorer has {len(self.replays)}")
        replay = self.replays[index]
        explored = self.run(replay["run_index"])
        game = Game(
            explored,
            human_first=replay["human_first"],
            seed=replay["seed"],
            simulations=replay["simulations"],
            init_key=replay.get("init_key"),
        )
        game.replay(replay["actions"], replay["opponent"] or "you", replay.get("step_keys"))
        return self._add(game)

    def _add(self, game: Game | Episode) -> str:
        # An unguessable name is not needed on 127.0.0.1; a counter keeps the tabs apart.
        name = f"g{next(self._ids)}"
        self.games[name] = game
        while len(self.games) > MAX_GAMES:
            self.games.popitem(last=False)
        return name

    def game(self, name: str) -> Game | Episode:
        game = self.games.get(name)
        if game is None:
            raise ExploreError(
                404,
                f"no game {name!r}: the explorer was restarted, or dropped it as one of "
                f"more than {MAX_GAMES} games; start a new one",
            )
        game.explored.check_present()
        return game
