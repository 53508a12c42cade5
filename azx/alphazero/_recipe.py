"""AlphaZero as azx's application trains it: its recipe and its presets."""

import dataclasses
from typing import Any, ClassVar

from .. import arena, envs, nets
from .._errors import RunError
from .._preset import Preset
from .._recipes import AbstractAgentRecipe
from ._config import Config
from ._trainer import AlphaZero


@dataclasses.dataclass(frozen=True)
class AlphaZeroRecipe(AbstractAgentRecipe):
    """AlphaZero ([`azx.alphazero.AlphaZero`][]): its search and how `azx train`
    evaluates it."""

    name: ClassVar[str] = "alphazero"
    config_class: ClassVar[type] = Config
    schedule: ClassVar[str | None] = "decay_iterations"
    networks: ClassVar[tuple[str, ...]] = ("mlp", "resnet")
    agent_kinds: ClassVar[tuple[str, ...]] = ("search", "network", "full-move")

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

    def agent(self, net, kind, num_simulations, env, *, explore=False):
        if kind != "search":
            return self.network_agent(net, kind, env, explore)
        return arena.SearchAgent(net, self.agent_search(num_simulations, explore))

    def play_episodes(self, trainer, state, num_episodes, *, key, greedy):
        raise RunError("episodes need a PPO run; this is an AlphaZero run")


PRESETS: tuple[Preset, ...] = (
    Preset(
        name="tic_tac_toe",
        env="tic_tac_toe",
        network="mlp",
        # Width 128, not 64: with the openings and mirrors below, the raw network plays
        # an optimal move in all 3,191 decisive positions on seeds 0-2 where width 64
        # missed 1, 2 and 0 (python -m benchmarks.tictactoe_exact; benchmarks/notes.md).
        network_options={"width": 128, "depth": 2},
        recipe=AlphaZeroRecipe(
            search="puct",
            # Exploratory move choice (the targets stay the visit counts): measured on
            # four seeds, it took the greedy network's exact loss rate as second player
            # against a random opponent from 0.4-1.9% to 0.0%.
            search_options={
                "num_simulations": 64,
                "temperature": 1.5,
                "dirichlet_fraction": 0.5,
            },
            eval_opponents=("random", "solver"),
            eval_agents=("search", "network"),
        ),
        config=Config(
            num_envs=64,
            collect_steps=8,
            train_steps=32,
            batch_size=256,
            buffer_capacity=16384,
            learning_rate=3e-3,
            decay_iterations=400,
            # Four random moves open every game, so that self-play reaches positions
            # after moves its own play avoids: decisive positions played optimally by
            # the raw network went from 3073, 3037, 3065 of 3191 (seeds 0-2) to 3184,
            # 3186, 3185; five random moves left the early positions short of data.
            random_opening_moves=4,
            # Every training position through one of the 8 board symmetries: with the
            # openings, 3190, 3189, 3191 instead of 3184, 3186, 3185.
            augment_symmetries=True,
        ),
        iterations=400,
        description="tic-tac-toe, MLP, PUCT 64 simulations: perfect play in minutes",
    ),
    Preset(
        name="connect_four",
        env="connect_four",
        network="mlp",
        network_options={"width": 256, "depth": 3},
        recipe=AlphaZeroRecipe(
            # Gumbel search considering all 7 columns at the root: its policy target
            # raises every root move by its searched value, so a confident prior cannot
            # hide a winning or losing column, and 32 simulations cost less than PUCT's
            # 64.
            search="gumbel",
            search_options={"num_simulations": 32, "max_num_considered_actions": 7},
            eval_opponents=("greedy", "mcts:200"),
            eval_games=100,
        ),
        config=Config(
            num_envs=256,
            collect_steps=8,
            train_steps=32,
            batch_size=512,
            buffer_capacity=131072,
            learning_rate=1e-3,
            decay_iterations=2800,
            # Six random moves open every self-play game. Without them the network
            # never saw positions its own play avoids (an opponent's open three on the
            # bottom row) and lost as second player to a greedy one-ply player 29 of
            # 50 games; score against rollout MCTS(1000) after 5000 iterations went
            # from 0.31 to 0.67 (200 games each).
            random_opening_moves=6,
            # Every training position through a random left-right mirror: after 2500
            # iterations the score against rollout MCTS(1000) was 0.745 with it and
            # 0.39 without (100 games each, same schedule).
            augment_symmetries=True,
            # Value targets half the game's outcome, half the search's root value:
            # after 1200 iterations (200 games against rollout MCTS(1000) each) the
            # search agent scored 0.877 with them and 0.755 without, the network alone
            # 0.713 and 0.398 (benchmarks/notes.md).
            root_value_weight=0.5,
        ),
        # 25 minutes on the 2-core development CPU, the five evaluations of `azx train`
        # included; then 198 wins in 200 against rollout MCTS(1000) with 1536
        # simulations a move (`azx eval --simulations 1536`), 173 with the training's
        # 32.
        iterations=2800,
        description="connect four, MLP, Gumbel 32 simulations",
        eval_every=700,
    ),
    Preset(
        name="othello",
        env="othello",
        # An MLP rather than a ResNet: on the 2-core development CPU a ResNet of 32
        # channels and 4 blocks takes 23 s an iteration of this setup (its convolutions
        # as matrix products), one of 16 channels and 1 block 3 s; the MLP under one.
        network="mlp",
        network_options={"width": 256, "depth": 3},
        recipe=AlphaZeroRecipe(
            search="gumbel",
            search_options={"num_simulations": 32},
            eval_opponents=("random", "mcts:200"),
            eval_agents=("search", "network"),
            eval_games=100,
        ),
        config=Config(
            num_envs=256,
            collect_steps=8,
            train_steps=32,
            batch_size=512,
            # The games of the last 256 iterations. With 64 (131072 positions) the
            # network follows its own latest games so closely that it gains against its
            # earlier selves and loses against rollout MCTS after iteration 250; with
            # 256 it gains against rollout MCTS too, on two seeds (benchmarks/notes.md).
            buffer_capacity=524288,
            learning_rate=1e-3,
            decay_iterations=1000,
            random_opening_moves=4,
            augment_symmetries=True,
            # No root-value targets: with `root_value_weight=0.5` a paired run scored
            # within the noise of this one at iteration 1000 (benchmarks/notes.md).
        ),
        iterations=1000,
        description="othello, MLP, Gumbel 32 simulations",
        eval_every=250,
    ),
    Preset(
        name="2048",
        env="2048",
        # Rewards are the merged tiles' values, thousands a game: scaled so that value
        # targets (discounted by the search's gamma of 0.99, about 100 moves ahead)
        # stay of order one.
        env_options={"reward_scale": 0.01},
        network="mlp",
        network_options={"width": 256, "depth": 3},
        recipe=AlphaZeroRecipe(
            # Gumbel with all four moves considered: sequential halving over four
            # actions spends few simulations well. Chance nodes (the default) average
            # over the new tile's positions and values.
            search="gumbel",
            search_options={
                "num_simulations": 16,
                "max_num_considered_actions": 4,
                "gamma": 0.99,
            },
            eval_opponents=(),
            eval_games=32,
        ),
        config=Config(
            # Games last hundreds of moves and a position's value target is known when
            # its game ends: few games, many moves each, so that games end every few
            # iterations, and rows of 4096 positions, longer than any game here.
            num_envs=32,
            collect_steps=64,
            train_steps=32,
            batch_size=256,
            buffer_capacity=131072,
            learning_rate=1e-3,
            # Half of each value target is the search's own root value.
            root_value_weight=0.5,
        ),
        iterations=600,
        description="2048, MLP, Gumbel 16 simulations with chance nodes",
        eval_every=100,
    ),
    Preset(
        name="backgammon",
        env="backgammon",
        # TD-Gammon's unary board encoding; rewards of 1, 2 and 3 points (single game,
        # gammon, backgammon) scaled by 1/3 into the tanh value's range, so that the
        # value tells a gammon from a single loss.
        env_options={"encoding": "unary", "reward_scale": 1 / 3},
        network="mlp",
        network_options={"width": 256, "depth": 3},
        recipe=AlphaZeroRecipe(
            # Gumbel search over the 156 checker moves (a turn is one to four of them,
            # each a decision of its own), with chance nodes over the 21 rolls after
            # the turn's last move.
            search="gumbel",
            search_options={"num_simulations": 16, "max_num_considered_actions": 8},
            # pubeval: Tesauro's public linear evaluator, the standard benchmark; the
            # search agent and the value network alone over whole moves (fast).
            eval_opponents=("pubeval",),
            eval_agents=("search", "full-move"),
            eval_games=100,
        ),
        config=Config(
            num_envs=128,
            collect_steps=16,
            train_steps=16,
            batch_size=512,
            buffer_capacity=131072,
            learning_rate=1e-3,
            decay_iterations=4000,
            # A game is over a hundred decisions: half of each value target is the
            # search's root value (0.8 learns faster at first, and plays worse after
            # the 4000 iterations: benchmarks/notes.md).
            root_value_weight=0.5,
        ),
        # 45-53 minutes on a 2-core CPU, its evaluations included.
        iterations=4000,
        description="backgammon, MLP, Gumbel 16 simulations with chance nodes",
        eval_every=500,
    ),
)
"""AlphaZero's presets."""


def for_pgx_game(game: str) -> Preset[AlphaZeroRecipe]:
    """A generic AlphaZero setup for a two-player pgx game that has no preset of its own
    (`azx train --preset pgx:<game>`): an MLP (width 256, depth 3), Gumbel search with 32
    simulations, 256 games at a time, evaluated against random and greedy players. A
    starting point that runs on any such game, not one tuned for it.

    **Raises:** `ValueError` if `game` is not a two-player pgx game.
    """
    from ..envs._pgx import pgx_names

    if game not in pgx_names():
        raise ValueError(f"unknown pgx game {game!r}; pgx has {', '.join(pgx_names())}")
    players = envs.make(game).num_players
    if players != 2:
        raise ValueError(f"pgx:{game} has {players} player(s); the generic setup needs two")
    return Preset(
        name=f"pgx:{game}",
        env=game,
        network="mlp",
        network_options={"width": 256, "depth": 3},
        recipe=AlphaZeroRecipe(
            search="gumbel",
            search_options={"num_simulations": 32},
            eval_opponents=("random", "greedy"),
            eval_games=100,
        ),
        config=Config(
            num_envs=256,
            collect_steps=8,
            train_steps=32,
            batch_size=512,
            buffer_capacity=65536,
            learning_rate=1e-3,
            decay_iterations=1000,
        ),
        iterations=1000,
        description=f"{game} (pgx), generic setup: MLP, Gumbel 32 simulations",
        eval_every=100,
    )
