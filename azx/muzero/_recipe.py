"""MuZero as azx's application trains it: its recipe and its presets."""

import dataclasses
from typing import Any, ClassVar

import equinox as eqx
import numpy as np

from .._errors import RunError
from .._preset import Preset, mean_record, per_episode_record, return_progress
from .._recipes import AbstractAgentRecipe
from ._agent import MuZeroAgent
from ._config import Config
from ._evaluate import evaluate
from ._nets import mlp_net
from ._resnet import resnet_net
from ._stochastic_nets import stochastic_mlp_net
from ._stochastic_trainer import StochasticMuZero
from ._trainer import MuZero


_MUZERO_NETWORKS = {"mlp": mlp_net, "resnet": resnet_net}


class _AbstractMuZeroRecipe(AbstractAgentRecipe):
    """What MuZero's and Stochastic MuZero's recipes share: their agents (the search over
    the learned model, or the prediction at the observation's embedding), episodes and
    records."""

    losses: ClassVar[tuple[str, ...]]
    """The trainer's losses, as a metrics record holds them."""

    def __post_init__(self):
        self.check()

    def record(self, trainer, state, history, rate):
        return (
            mean_record(history, self.losses)
            | {"entropy": float(np.mean(np.asarray(history.policy_entropy)))}
            | per_episode_record(history)
            | {"root_value": float(np.mean(np.asarray(history.root_value))), "steps_per_s": rate}
        )

    def progress(self, record):
        return return_progress(record)  # the self-play return and speed, as PPO's

    def agent(self, net, kind, num_simulations, env, *, explore=False):
        if kind != "search":
            return self.network_agent(net, kind, env, explore)
        return MuZeroAgent(net, self.agent_search(num_simulations, explore))

    def play_episodes(self, trainer, state, num_episodes, *, key, greedy):
        # The search without its exploration unless sampling is asked for (greedy=False).
        if trainer.env.num_players != 1:
            raise RunError("episodes need a single-player environment; this run's has two")
        greedy = True if greedy is None else greedy
        return _evaluate(trainer, state.net, num_episodes=num_episodes, key=key, greedy=greedy)


@dataclasses.dataclass(frozen=True)
class MuZeroRecipe(_AbstractMuZeroRecipe):
    """MuZero ([`azx.muzero.MuZero`][]): its search, and how `azx train` evaluates it.

    A trained MuZero plays as AlphaZero's network does, through an arena agent: the
    search over its learned model ([`azx.muzero.MuZeroAgent`][], exploration off) or the
    prediction at the observation's embedding (`"network"`). So it is evaluated as an
    AlphaZero run is: the agents' episodes in a single-player environment, their matches
    against `eval_opponents` in a two-player game; `azx eval` takes the same options.
    """

    name: ClassVar[str] = "muzero"
    config_class: ClassVar[type] = Config
    schedule: ClassVar[str | None] = "decay_iterations"
    networks: ClassVar[tuple[str, ...]] = tuple(_MUZERO_NETWORKS)
    agent_kinds: ClassVar[tuple[str, ...]] = ("search", "network")
    losses: ClassVar[tuple[str, ...]] = (
        "loss",
        "policy_loss",
        "value_loss",
        "reward_loss",
        "consistency_loss",
    )

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

    def make_network(self, network, options, env, *, key):
        make = _MUZERO_NETWORKS[network]
        return make(env.observation_shape, env.num_actions, key=key, **options)

    def make_trainer(self, env, config):
        return MuZero(env, self.make_search(), config)


_evaluate = eqx.filter_jit(evaluate)

_TIC_TAC_TOE = Preset(
    name="muzero_tic_tac_toe",
    env="tic_tac_toe",
    network="mlp",
    # Scalar value and reward heads: both lie in [-1, 1].
    network_options={"embedding_size": 64, "width": 128, "depth": 2},
    recipe=MuZeroRecipe(
        # PUCT, its move chosen in proportion to the visit counts to the power 1/1.5 over
        # a root prior half Dirichlet noise (the targets stay the visit counts), as the
        # AlphaZero tic_tac_toe preset: self-play keeps visiting lines its own best play
        # avoids, which the learned model must know for its search to defend them.
        # Evaluated (and played by `azx eval`) greedily: the most visited move.
        search="puct",
        search_options={"num_simulations": 64, "temperature": 1.5, "dirichlet_fraction": 0.5},
        eval_opponents=("random", "solver"),
        eval_agents=("search", "network"),
        eval_games=200,
    ),
    # Returns to the end of the game (no game has more than 9 moves), and the end of the
    # game an absorbing state: the search over the learned model looks past the final
    # move, where the model must know that nothing more happens. Four random opening
    # moves, a random move with probability 0.1 after them, and the board's symmetries
    # widen the positions the model learns from: the positions after a missed block or a
    # walk into a fork, which the model must judge for its search to avoid them. Without
    # the openings and symmetries self-play narrows to a few games, and the search loses a
    # fifth of its games to a random player; with them but without the random moves and
    # the exploratory PUCT above, the search still loses to the exact solver on most
    # seeds (benchmarks/notes.md has the runs). A completed line is the one reward, and
    # self-play between good players completes few: the reward loss weighs four times the
    # value's, so that the model knows the win in positions with threats on both sides,
    # where a search over it otherwise blocks instead of winning. Together they give an
    # exact-optimal move in every decisive position, with the search and the network
    # alone; four openings with equal weights lose games to the solver.
    config=Config(
        num_envs=64,
        collect_steps=8,
        train_steps=32,
        batch_size=256,
        buffer_capacity=64 * 128,
        unroll_steps=5,
        td_steps=9,
        random_opening_moves=4,
        random_move_probability=0.1,
        augment_symmetries=True,
        absorbing_end=True,
        value_loss_weight=1.0,
        reward_loss_weight=4.0,
        learning_rate=3e-3,
        decay_iterations=1200,
    ),
    iterations=1200,
    description="tic-tac-toe, MuZero (MLP model, PUCT 64 simulations), 64 games x 8 moves",
    eval_every=200,
)

_CARTPOLE = Preset(
    name="muzero_cartpole",
    env="gymnax:CartPole-v1",
    network="mlp",
    # Categorical value and reward heads over h(x) (support -20 .. 20, returns up to about
    # h^-1(20) = 460): one support for the rewards of 1 and the discounted returns near
    # 1 / (1 - gamma) that CartPole's value grows to, with a cross-entropy loss whose
    # scale does not grow with the return as a squared error's would.
    network_options={"embedding_size": 64, "width": 128, "depth": 2, "support_size": 20},
    # Gumbel's improved policy at a fifth of mctx's value scale (0.02): Q moves the
    # policy target and self-play's moves less far from the prior, so self-play keeps
    # trying other moves until rewards far away (FourRooms' goal, hundreds of steps off)
    # have reached the model's values.
    recipe=MuZeroRecipe(
        search="gumbel",
        search_options={"num_simulations": 16, "gamma": 0.997, "value_scale": 0.02},
        eval_games=32,
    ),
    # 32 updates of 256 segments per 256 environment steps: with the softer target, 16
    # leave one seed of five part-way through learning Catch at 100,000 steps; 50-step
    # returns, which lean little on the stored root values (an old network's); a replay
    # of the last 8,192 steps; the learning rate decayed over the run, which keeps a
    # policy that balances from being trained away late. This configuration serves every
    # vector task of `benchmarks.muzero_suite` unchanged (benchmarks/notes.md has the
    # runs behind each choice).
    config=Config(
        num_envs=16,
        collect_steps=16,
        train_steps=32,
        batch_size=256,
        buffer_capacity=16 * 512,
        unroll_steps=5,
        td_steps=50,
        learning_rate=3e-3,
        decay_iterations=391,
    ),
    iterations=391,  # 100,000 environment steps
    description="CartPole-v1, MuZero (MLP model, Gumbel 16 simulations), 16 envs x 16 steps",
    eval_every=100,
)

_BREAKOUT = Preset(
    name="muzero_breakout",
    env="gymnax:Breakout-MinAtar",
    network="mlp",
    # The 10 x 10 x 4 observation flattened into an MLP, as ppo_breakout's network takes
    # it. Categorical heads over h(x) (support -10 .. 10, up to about h^-1(10) = 120):
    # rewards of 1 per brick and discounted returns of a few tens.
    network_options={"embedding_size": 64, "width": 256, "depth": 2, "support_size": 10},
    recipe=MuZeroRecipe(
        search="gumbel",
        search_options={"num_simulations": 16, "gamma": 0.99},
        eval_games=32,
    ),
    # 32 updates of 256 segments per 512 environment steps (one per 16); 30-step
    # returns, which lean less on the stored root values of older networks; a replay of
    # the last 16,384 steps (benchmarks/notes.md has the configurations tried).
    config=Config(
        num_envs=32,
        collect_steps=16,
        train_steps=32,
        batch_size=256,
        buffer_capacity=32 * 512,
        unroll_steps=5,
        td_steps=30,
        learning_rate=3e-3,
        decay_iterations=800,
    ),
    iterations=800,  # 409,600 environment steps: 50 iterations of ppo_breakout
    description="MinAtar Breakout, MuZero (MLP model, Gumbel 16 simulations), 32 envs x 16 steps",
    eval_every=100,
)

# muzero_breakout's network, search and sizes over Freeway's 10 x 10 x 7 planes: a point for
# each crossing of the road, episodes of 2,500 steps. The policy, value and reward heads
# start at zero, so the untrained search plays at random as an untrained PPO policy does
# (with random heads it already crosses the road on two seeds of three). A learning rate of
# 1e-3 and a replay longer than the run: with Breakout's 3e-3 and 16,384 steps (from random
# heads, to 409,600 steps), two seeds of three stop crossing the road for good.
# 81,920 steps, where MuZero leads a PPO fitted to the same steps on every seed; PPO
# catches up with more steps (benchmarks/notes.md has the runs).
_FREEWAY = dataclasses.replace(
    _BREAKOUT,
    name="muzero_freeway",
    env="gymnax:Freeway-MinAtar",
    network_options=_BREAKOUT.network_options | {"zero_heads": True},
    config=dataclasses.replace(
        _BREAKOUT.config,
        learning_rate=1e-3,
        buffer_capacity=256 * 512,
        decay_iterations=160,
    ),
    iterations=160,  # 81,920 environment steps: 10 iterations of ppo_breakout's sizes
    description="MinAtar Freeway, MuZero (MLP model, Gumbel 16 simulations), 32 envs x 16 steps",
    eval_every=80,  # an evaluation plays 32 episodes of 2,500 steps
)


@dataclasses.dataclass(frozen=True)
class StochasticMuZeroRecipe(_AbstractMuZeroRecipe):
    """Stochastic MuZero ([`azx.muzero.StochasticMuZero`][]): its search, its loss weights,
    and how `azx train` evaluates it, as MuZero's recipe does
    ([`azx.presets.MuZeroRecipe`][]): the search over its learned model
    ([`azx.muzero.MuZeroAgent`][], exploration off) or the prediction at the
    observation's embedding (`"network"`)."""

    name: ClassVar[str] = "stochastic_muzero"
    config_class: ClassVar[type] = Config
    schedule: ClassVar[str | None] = "decay_iterations"
    networks: ClassVar[tuple[str, ...]] = ("mlp",)
    agent_kinds: ClassVar[tuple[str, ...]] = ("search", "network")
    losses: ClassVar[tuple[str, ...]] = (
        "loss",
        "policy_loss",
        "value_loss",
        "reward_loss",
        "q_loss",
        "chance_loss",
        "commitment_loss",
        "consistency_loss",
    )

    search: str = "gumbel"
    """`"puct"` or `"gumbel"` (native), or `("puct", "mctx")` through `search_options`'s
    `backend`: mctx's stochastic policy."""
    search_options: dict[str, Any] = dataclasses.field(
        default_factory=lambda: {"num_simulations": 16}
    )
    eval_opponents: tuple[str, ...] = ("random", "greedy")
    eval_agents: tuple[str, ...] = ("search",)
    eval_games: int = 200
    eval_search: dict[str, Any] = dataclasses.field(default_factory=dict)
    chance_loss_weight: float = 1.0
    """Weight of `sigma`'s cross-entropy against the encoder's codes."""
    commitment_loss_weight: float = 0.25
    """Weight of the encoder's commitment loss."""

    def make_network(self, network, options, env, *, key):
        return stochastic_mlp_net(env.observation_shape, env.num_actions, key=key, **options)

    def make_trainer(self, env, config):
        return StochasticMuZero(
            env,
            self.make_search(),
            config,
            chance_loss_weight=self.chance_loss_weight,
            commitment_loss_weight=self.commitment_loss_weight,
        )


_STOCHASTIC_DICE = Preset(
    name="stochastic_muzero_dice",
    env="dice_race",
    network="mlp",
    # Four codes for the die's three outcomes (and the walk's one); scalar heads, as the
    # values and rewards lie in [0, 1].
    network_options={"num_codes": 4, "embedding_size": 32, "width": 64, "depth": 2},
    recipe=StochasticMuZeroRecipe(
        search="gumbel",
        search_options={"num_simulations": 16},
        eval_opponents=(),
        eval_games=256,
    ),
    # Races last at most 6 moves: the value targets are the races' outcomes (td_steps
    # past the end), and the end of the race an absorbing state, as the search over the
    # learned model looks past it. A random move a quarter of the time: the search's own
    # games roll nearly always, and without them the model never learns what walking
    # home is worth (its search then rolls everywhere: a best move in 27 of the 31
    # positions where the choice matters, as always rolling).
    config=Config(
        num_envs=32,
        collect_steps=8,
        train_steps=8,
        batch_size=256,
        buffer_capacity=32 * 64,
        unroll_steps=3,
        td_steps=6,
        random_move_probability=0.25,
        absorbing_end=True,
        value_loss_weight=1.0,
        learning_rate=3e-3,
        decay_iterations=300,
    ),
    iterations=300,
    description="dice race, Stochastic MuZero (MLP model, Gumbel 16 simulations)",
    eval_every=100,
)

_STOCHASTIC_2048 = Preset(
    name="stochastic_muzero_2048",
    env="2048",
    # As the AlphaZero 2048 preset: rewards scaled by 0.01, so that the value targets
    # (discounted by gamma 0.99) stay of order one.
    env_options={"reward_scale": 0.01},
    network="mlp",
    # 32 codes, as many as 2048's chance outcomes (a 2 or a 4 on one of 16 cells);
    # categorical heads over h(x) (support -20 .. 20).
    network_options={
        "num_codes": 32,
        "embedding_size": 128,
        "width": 256,
        "depth": 2,
        "support_size": 20,
    },
    recipe=StochasticMuZeroRecipe(
        search="gumbel",
        search_options={"num_simulations": 16, "max_num_considered_actions": 4, "gamma": 0.99},
        eval_opponents=(),
        eval_games=32,
    ),
    config=Config(
        num_envs=32,
        collect_steps=64,
        train_steps=32,
        batch_size=256,
        buffer_capacity=32 * 1024,
        unroll_steps=5,
        td_steps=10,
        learning_rate=1e-3,
        decay_iterations=600,
    ),
    iterations=600,
    description="2048, Stochastic MuZero (MLP model, Gumbel 16 simulations)",
    eval_every=100,
)

PRESETS: tuple[Preset, ...] = (
    _TIC_TAC_TOE,
    _CARTPOLE,
    _BREAKOUT,
    _FREEWAY,
    _STOCHASTIC_DICE,
    _STOCHASTIC_2048,
)
"""MuZero's presets, and Stochastic MuZero's."""
