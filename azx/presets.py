"""Ready-made training setups: the environment, network, algorithm and sizes that work
together.

    preset = azx.presets.get("tic_tac_toe")
    trainer, state = preset.build(seed=0)
    state = eqx.filter_jit(trainer.train)(state, preset.iterations)

Every preset is a [`azx.presets.Preset`][]; what belongs to its algorithm (AlphaZero's
search and evaluation opponents, PPO's evaluation episodes) is its `recipe`, an
[`azx.presets.AlphaZeroRecipe`][], an [`azx.presets.PPORecipe`][] or an
[`azx.presets.MuZeroRecipe`][].
"""

import dataclasses
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp

from . import envs, ppo
from ._recipes import (
    RECIPES,
    AbstractAgentRecipe as AbstractAgentRecipe,
    AbstractPolicyRecipe as AbstractPolicyRecipe,
    AbstractRecipe as AbstractRecipe,
    AlphaZeroRecipe as AlphaZeroRecipe,
    MuZeroRecipe as MuZeroRecipe,
    PPORecipe as PPORecipe,
    check_types,
)
from ._validate import check_positive_int
from .alphazero import Config
from .muzero import Config as MuZeroConfig


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
        check_types(vars(self), **_FIELD_TYPES)
        if not isinstance(self.recipe, AbstractRecipe):
            raise ValueError(f"recipe must be an azx.presets.AbstractRecipe, got {self.recipe!r}")
        config_class = self.recipe.config_class
        if not isinstance(self.config, config_class):
            raise ValueError(
                # (the public module: azx.alphazero.Config, not azx.alphazero._config.Config)
                f"config must be an {config_class.__module__.split('._')[0]}."
                f"{config_class.__name__} for "
                f"{self.recipe.name}, got {type(self.config).__name__}"
            )
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
        """The trainer and the initial states of several seeds, stacked along a leading
        axis of size `len(seeds)` ([`azx.presets.stack_seeds`][]): independent agents
        that train as one program, every seed at once under `vmap` or one after another
        ([`azx.parallel.over_seeds`][]).

            vmap = preset.vmaps_seeds()
            trainer, states = preset.build_seeds(range(8), vmap=vmap)
            train = azx.parallel.over_seeds(trainer.train, vmap=vmap)
            states = eqx.filter_jit(train)(states, 100)
            state_of_seed_3 = azx.presets.take_seed(states, 3)

        Each seed's state is its `build(seed=...)`. Trained one after another, a seed
        equals its own run bit for bit; under `vmap`, within float tolerance: batching
        changes the order in which XLA sums (on the CPU, about 1e-6 apart after a few
        iterations).

        With `vmap`, the trainer is the recipe's form for batched seeds (AlphaZero's
        search on its lockstep kernels, which batch under `vmap`; the same search bit for
        bit).

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


def stack_seeds(states: Sequence[Any]) -> Any:
    """Several seeds' states (trained or not) as one, each array stacked along a new
    leading seeds axis; what is not an array (a network's activation) they share.
    [`azx.presets.take_seed`][] takes one back out."""
    states = list(states)
    if not states:
        raise ValueError("stack_seeds needs at least one state, got none")

    def stack(*leaves):
        return jnp.stack(leaves) if eqx.is_array(leaves[0]) else leaves[0]

    return jax.tree.map(stack, *states)


def take_seed(states: Any, index: int) -> Any:
    """The state of the `index`-th seed of states stacked by
    [`azx.presets.Preset.build_seeds`][] (trained or not)."""
    return jax.tree.map(lambda leaf: leaf[index] if eqx.is_array(leaf) else leaf, states)


_FIELD_TYPES = {
    "str": ("name", "env", "network", "description"),
    "dict": ("env_options", "network_options"),
}


def _listed(value):
    """Tuples as JSON writes them (lists); `from_dict` reads them back as tuples."""
    return list(value) if isinstance(value, tuple) else value


def from_dict(data: dict[str, Any]) -> Preset:
    """The preset that `to_dict` described (with the recipe its `"algorithm"` names;
    AlphaZero where it has none, as in runs written before PPO).

    **Raises:** `ValueError` naming an unknown algorithm or field, or a field of the wrong
    type."""
    algorithm = data.get("algorithm", AlphaZeroRecipe.name)
    if algorithm not in RECIPES:
        raise ValueError(f"unknown algorithm {algorithm!r}; known: {', '.join(RECIPES)}")
    recipe_class = RECIPES[algorithm]
    data = {k: v for k, v in data.items() if k != "algorithm"}
    own = {field.name for field in dataclasses.fields(Preset)} - {"recipe"}
    recipe_fields = {field.name for field in dataclasses.fields(recipe_class)}
    unknown = set(data) - own - recipe_fields
    if unknown:
        known = sorted(own | recipe_fields)
        raise ValueError(f"unknown preset fields {sorted(unknown)}; known: {known}")
    strings = recipe_class.field_types.get("strings", ())
    check_types(data, **_FIELD_TYPES)
    check_types(data, **{k: v for k, v in recipe_class.field_types.items() if k != "strings"})
    if not isinstance(data.get("config"), dict):
        raise ValueError(f"config must be a JSON object, got {data.get('config')!r}")
    data["config"] = recipe_class.config_class(**data["config"])
    if "network_options" in data:
        data["network_options"] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in data["network_options"].items()
        }
    recipe = {k: data.pop(k) for k in recipe_fields & set(data)}
    recipe |= {k: tuple(v) for k, v in recipe.items() if k in strings and isinstance(v, list)}
    return Preset(recipe=recipe_class(**recipe), **data)


_PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in [
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
        Preset(
            name="ppo_cartpole",
            env="gymnax:CartPole-v1",
            env_options={},
            network="actor_critic",
            network_options={"hidden_sizes": (64, 64), "activation": "tanh"},
            recipe=PPORecipe(),
            # purejaxrl's CartPole setup: 4 environments x 128 steps, 4 epochs of 4
            # minibatches, the learning rate annealed to 0 over the run.
            config=ppo.Config(
                num_envs=4,
                rollout_length=128,
                num_epochs=4,
                num_minibatches=4,
                learning_rate=2.5e-4,
                anneal_iterations=1000,
            ),
            iterations=1000,
            description="CartPole-v1, feed-forward PPO, 4 envs x 128 steps",
        ),
        Preset(
            name="ppo_minigrid",
            env="xminigrid:MiniGrid-Empty-6x6",
            env_options={},
            network="recurrent",
            network_options={"hidden_size": 16, "head_size": 16, "action_embedding_size": 16},
            recipe=PPORecipe(),
            # Seed 002's small configuration (GRU 16, heads 16, 64 environments x 16 steps,
            # learning rate 1e-3, 10^5 steps), with 4 epochs of 8 minibatches where it has 1
            # of 16, which makes every seed tried reach the shortest path's return where one
            # epoch of 16 left most of them short of 0.8 (benchmarks/notes.md).
            config=ppo.Config(
                num_envs=64,
                rollout_length=16,
                num_epochs=4,
                num_minibatches=8,
                learning_rate=1e-3,
                anneal_iterations=98,
                adam_eps=1e-8,
            ),
            iterations=98,
            description="MiniGrid-Empty-6x6, recurrent PPO (GRU 16), 64 envs x 16 steps",
            eval_every=49,
            log_every=7,  # 98 iterations in calls of the same length: one compile
        ),
        Preset(
            name="ppo_breakout",
            env="gymnax:Breakout-MinAtar",
            env_options={},
            network="actor_critic",
            network_options={"hidden_sizes": (256, 256), "activation": "relu"},
            recipe=PPORecipe(),
            config=ppo.Config(
                num_envs=64,
                rollout_length=128,
                num_epochs=4,
                num_minibatches=8,
                learning_rate=5e-3,
                anneal_iterations=250,
            ),
            iterations=250,
            description="MinAtar Breakout, feed-forward PPO, 64 envs x 128 steps",
            eval_every=50,
        ),
        Preset(
            name="ppo_pendulum",
            env="gymnax:Pendulum-v1",
            env_options={},
            network="continuous_actor_critic",
            network_options={"hidden_sizes": (64, 64), "activation": "tanh"},
            recipe=PPORecipe(),
            # Continuous-control PPO settings: a tanh-squashed Normal with a learned
            # state-independent log-std, standardised observations, rewards scaled to about
            # [-1.6, 0], 10 epochs of 16 minibatches, no entropy bonus. gamma 0.95: a
            # swing-up pays off within tens of steps, and a shorter horizon lowers the
            # variance of the advantages. 488 iterations of 16 x 128 steps: 10^6 steps.
            config=ppo.Config(
                num_envs=16,
                rollout_length=128,
                num_epochs=10,
                num_minibatches=16,
                learning_rate=1e-3,
                anneal_iterations=488,
                gamma=0.95,
                gae_lambda=0.95,
                entropy_coef=0.0,
                normalize_observations=True,
                reward_scale=0.1,
                action_distribution="tanh_normal",
            ),
            iterations=488,
            description="Pendulum-v1, feed-forward PPO, tanh-squashed Normal, 16 envs x 128 steps",
            eval_every=122,
        ),
        Preset(
            name="ppo_inverted_pendulum",
            env="brax:inverted_pendulum",
            env_options={},
            network="continuous_actor_critic",
            network_options={"hidden_sizes": (64, 64), "activation": "tanh"},
            recipe=PPORecipe(),
            # brax's cart-pole in continuous force: a reward of 1 a step while the pole
            # stands, episodes of at most 1000 steps, so 1000 is the best return. brax comes
            # with `pip install "azx[brax]"`. The same heads as ppo_pendulum; 32 environments
            # x 64 steps, 4 epochs of 8 minibatches; gamma 0.99, since balancing pays every
            # step. 250 iterations of 2048 steps: 512,000 steps.
            config=ppo.Config(
                num_envs=32,
                rollout_length=64,
                num_epochs=4,
                num_minibatches=8,
                learning_rate=1e-3,
                anneal_iterations=250,
                gamma=0.99,
                gae_lambda=0.95,
                entropy_coef=0.0,
                normalize_observations=True,
                action_distribution="tanh_normal",
            ),
            iterations=250,
            description="brax inverted_pendulum, feed-forward PPO, tanh-squashed Normal, "
            "32 envs x 64 steps",
            eval_every=50,
        ),
    ]
}

# Seed 002's own recurrent PPO (XLand-MiniGrid's single-task baseline at its small size),
# as the seed configures it: 1 epoch of 16 minibatches, 10^5 // (64 x 16) = 97 iterations
# with the learning rate annealed over them, time-outs treated as terminal, the memory
# (and the previous action and reward) never reset, and the action embedding started at
# flax's nn.Embed scale. ppo_minigrid departs from it where that learns more reliably.
_PRESETS["ppo_minigrid_seed002"] = Preset(
    name="ppo_minigrid_seed002",
    env="xminigrid:MiniGrid-Empty-6x6",
    env_options={},
    network="recurrent",
    network_options={
        "hidden_size": 16,
        "head_size": 16,
        "action_embedding_size": 16,
        "reset_at_episode_start": False,
        "action_embedding_init": "fan_in_normal",
    },
    recipe=PPORecipe(),
    config=ppo.Config(
        num_envs=64,
        rollout_length=16,
        num_epochs=1,
        num_minibatches=16,
        learning_rate=1e-3,
        anneal_iterations=97,
        adam_eps=1e-8,
        truncation="terminate",
    ),
    iterations=97,
    description="MiniGrid-Empty-6x6, recurrent PPO as seed 002 configures it (GRU 16)",
    eval_every=97,
    log_every=97,  # 97 is prime: one call of the whole run, one compile
)


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


_BUILT_IN_RECIPES = frozenset(RECIPES)


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


def for_pgx_game(game: str) -> Preset[AlphaZeroRecipe]:
    """A generic AlphaZero setup for a two-player pgx game that has no preset of its own
    (`azx train --preset pgx:<game>`): an MLP (width 256, depth 3), Gumbel search with 32
    simulations, 256 games at a time, evaluated against random and greedy players. A
    starting point that runs on any such game, not one tuned for it.

    **Raises:** `ValueError` if `game` is not a two-player pgx game.
    """
    from .envs._pgx import pgx_names

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


# ----------------------------------------------------------------------------- MuZero

_PRESETS["muzero_tic_tac_toe"] = Preset(
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
    # move, where the model must know that nothing more happens. Two random opening moves,
    # a random move with probability 0.1 after them, and the board's symmetries widen the
    # positions the model learns from: the positions after a missed block or a walk into
    # a fork, which the model must judge for its search to avoid them. Without the
    # openings and symmetries self-play narrows to a few games, and the search loses a
    # fifth of its games to a random player; with them but without the random moves and
    # the exploratory PUCT above, the search still loses to the exact solver on most
    # seeds (benchmarks/notes.md has the runs).
    config=MuZeroConfig(
        num_envs=64,
        collect_steps=8,
        train_steps=32,
        batch_size=256,
        buffer_capacity=64 * 128,
        unroll_steps=5,
        td_steps=9,
        random_opening_moves=2,
        random_move_probability=0.1,
        augment_symmetries=True,
        absorbing_end=True,
        value_loss_weight=1.0,
        learning_rate=3e-3,
        decay_iterations=1200,
    ),
    iterations=1200,
    description="tic-tac-toe, MuZero (MLP model, PUCT 64 simulations), 64 games x 8 moves",
    eval_every=200,
)
_BUILT_IN = _BUILT_IN | {"muzero_tic_tac_toe"}

_PRESETS["muzero_cartpole"] = Preset(
    name="muzero_cartpole",
    env="gymnax:CartPole-v1",
    network="mlp",
    # Categorical value and reward heads over h(x) (support -20 .. 20, returns up to about
    # h^-1(20) = 460): one support for the rewards of 1 and the discounted returns near
    # 1 / (1 - gamma) that CartPole's value grows to, with a cross-entropy loss whose
    # scale does not grow with the return as a squared error's would.
    network_options={"embedding_size": 64, "width": 128, "depth": 2, "support_size": 20},
    recipe=MuZeroRecipe(
        search="gumbel",
        search_options={"num_simulations": 16, "gamma": 0.997},
        eval_games=32,
    ),
    # 16 updates of 256 segments per 256 environment steps; 50-step returns, which lean
    # little on the stored root values (an old network's); a replay of the last 8,192
    # steps; the learning rate decayed over the run, which keeps a policy that balances
    # from being trained away late (benchmarks/notes.md has the runs behind each choice).
    config=MuZeroConfig(
        num_envs=16,
        collect_steps=16,
        train_steps=16,
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
_BUILT_IN = _BUILT_IN | {"muzero_cartpole"}

_PRESETS["muzero_breakout"] = Preset(
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
    # 32 updates of 256 segments per 512 environment steps (one per 16, as
    # muzero_cartpole); 30-step returns, which lean less on the stored root values of
    # older networks; a replay of the last 16,384 steps (benchmarks/notes.md has the
    # configurations tried).
    config=MuZeroConfig(
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
_BUILT_IN = _BUILT_IN | {"muzero_breakout"}

# muzero_breakout's network, search and sizes over Freeway's 10 x 10 x 7 planes: a point for
# each crossing of the road, episodes of 2,500 steps. The policy, value and reward heads
# start at zero, so the untrained search plays at random as an untrained PPO policy does
# (with random heads it already crosses the road on two seeds of three). A learning rate of
# 1e-3 and a replay longer than the run: with Breakout's 3e-3 and 16,384 steps (from random
# heads, to 409,600 steps), two seeds of three stop crossing the road for good.
# 81,920 steps, where MuZero leads a PPO fitted to the same steps on every seed; PPO
# catches up with more steps (benchmarks/notes.md has the runs).
_PRESETS["muzero_freeway"] = dataclasses.replace(
    _PRESETS["muzero_breakout"],
    name="muzero_freeway",
    env="gymnax:Freeway-MinAtar",
    network_options=_PRESETS["muzero_breakout"].network_options | {"zero_heads": True},
    config=dataclasses.replace(
        _PRESETS["muzero_breakout"].config,
        learning_rate=1e-3,
        buffer_capacity=256 * 512,
        decay_iterations=160,
    ),
    iterations=160,  # 81,920 environment steps: 10 iterations of ppo_breakout's sizes
    description="MinAtar Freeway, MuZero (MLP model, Gumbel 16 simulations), 32 envs x 16 steps",
    eval_every=80,  # an evaluation plays 32 episodes of 2,500 steps
)
_BUILT_IN = _BUILT_IN | {"muzero_freeway"}
