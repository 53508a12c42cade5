"""Ready-made training setups: the environment, network, algorithm and sizes that work
together.

    preset = azx.presets.get("tic_tac_toe")
    trainer, state = preset.build(seed=0)
    state = eqx.filter_jit(trainer.train)(state, preset.iterations)

AlphaZero presets are [`azx.presets.Preset`][]s; PPO presets (`ppo_*`) are
[`azx.presets.PPOPreset`][]s. Both build a trainer and its initial state the same way.
"""

import dataclasses
from typing import Any, ClassVar

import jax

from . import envs, nets, ppo, search
from ._validate import check_positive_int
from .alphazero import AlphaZero, Config, TrainState


@dataclasses.dataclass(frozen=True)
class Preset:
    """A named AlphaZero training setup. Frozen; derive variants with
    `dataclasses.replace`."""

    algorithm: ClassVar[str] = "alphazero"
    name: str
    env: str
    """Name for [`azx.envs.make`][]."""
    network: str
    """`"mlp"` or `"resnet"`."""
    network_options: dict[str, Any]
    search: str
    """`"puct"` or `"gumbel"` (native search)."""
    search_options: dict[str, Any]
    config: Config
    iterations: int
    """Training iterations (`step` calls) of a full run."""
    description: str = ""
    env_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Keyword arguments for [`azx.envs.make`][] (e.g. `observe_legal_moves`)."""
    eval_opponents: tuple[str, ...] = ("random", "greedy")
    """Opponents `azx train` evaluates against (specs for [`azx.arena.opponent`][])."""
    eval_agents: tuple[str, ...] = ("search",)
    """Which agents are evaluated: `"search"` (network + search at the training number
    of simulations, played greedily) and/or `"network"` (argmax of the policy)."""
    eval_every: int = 100
    """Iterations between evaluations (and checkpoints) in `azx train`."""
    eval_games: int = 200
    """Games per evaluation match, half with each colour."""
    log_every: int = 10
    """Iterations per jitted training call: the granularity of logging and Ctrl-C."""

    def __post_init__(self):
        _check_types(vars(self), **_TYPES["alphazero"])
        for name in ("iterations", "eval_every", "eval_games", "log_every"):
            check_positive_int(name, getattr(self, name))
        bad = set(self.eval_agents) - {"search", "network"}
        if bad:
            raise ValueError(f"eval_agents must be 'search' and/or 'network', got {sorted(bad)}")

    def make_env(self) -> envs.AbstractEnv:
        return envs.make(self.env, **self.env_options)

    def make_network(self, env: envs.AbstractEnv, *, key) -> Any:
        options = dict(self.network_options)
        if env.num_players == 1:
            options.setdefault("bounded_value", False)
        if self.network == "mlp":
            return nets.MLP(env.observation_shape, env.num_actions, key=key, **options)
        if self.network == "resnet":
            return nets.AlphaZeroResNet(env.observation_shape, env.num_actions, key=key, **options)
        raise ValueError(f"unknown network {self.network!r}; expected 'mlp' or 'resnet'")

    def make_search(self, **overrides) -> search.AbstractSearch:
        options = self.search_options | overrides
        return search.make(self.search, options.pop("num_simulations"), **options)

    def make_eval_search(self, **overrides) -> search.AbstractSearch:
        """The training search with its exploration switched off: the most visited action
        (PUCT, no root noise) or noise-free sequential halving (Gumbel)."""
        greedy = (
            {"temperature": 0.0, "dirichlet_fraction": 0.0}
            if self.search == "puct"
            else {"gumbel_scale": 0.0}
        )
        return self.make_search(**(greedy | overrides))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable description; [`azx.presets.from_dict`][] inverts it."""
        out = _to_dict(self)
        for name in ("eval_opponents", "eval_agents"):
            out[name] = list(out[name])
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Preset":
        data = _fields_from_dict(cls, data, Config)
        for name in ("eval_opponents", "eval_agents"):
            if isinstance(data.get(name), list):
                data[name] = tuple(data[name])
        return cls(**data)

    def build(self, *, seed: int = 0) -> tuple[AlphaZero, TrainState]:
        """The trainer and its initial state for `seed`."""
        env = self.make_env()
        net_key, run_key = jax.random.split(jax.random.key(seed))
        trainer = AlphaZero(env, self.make_search(), self.config)
        return trainer, trainer.init(self.make_network(env, key=net_key), key=run_key)


@dataclasses.dataclass(frozen=True)
class PPOPreset:
    """A named PPO training setup. Frozen; derive variants with `dataclasses.replace`."""

    algorithm: ClassVar[str] = "ppo"
    name: str
    env: str
    """Name for [`azx.envs.make`][], e.g. `"gymnax:CartPole-v1"`."""
    env_options: dict[str, Any]
    """Keyword arguments for [`azx.envs.make`][]."""
    network: str
    """`"actor_critic"` ([`azx.nets.ActorCritic`][]) or `"recurrent"`
    ([`azx.nets.RecurrentActorCritic`][])."""
    network_options: dict[str, Any]
    config: ppo.Config
    iterations: int
    """Training iterations (`step` calls) of a full run."""
    description: str = ""
    eval_episodes: int = 100
    """Episodes per evaluation in `azx train` (and the default of `azx eval`)."""
    eval_greedy: bool = False
    """Evaluate the policy's most likely action instead of sampling it."""
    eval_every: int = 100
    """Iterations between evaluations (and checkpoints) in `azx train`."""
    log_every: int = 10
    """Iterations per jitted training call: the granularity of logging and Ctrl-C."""

    def __post_init__(self):
        _check_types(vars(self), **_TYPES["ppo"])
        for name in ("iterations", "eval_episodes", "eval_every", "log_every"):
            check_positive_int(name, getattr(self, name))
        if self.network not in _PPO_NETWORKS:
            raise ValueError(
                f"unknown network {self.network!r}; expected one of "
                f"{', '.join(map(repr, _PPO_NETWORKS))}"
            )

    def make_env(self) -> envs.AbstractEnv:
        return envs.make(self.env, **self.env_options)

    def make_network(self, env: envs.AbstractEnv, *, key) -> Any:
        return _PPO_NETWORKS[self.network](
            env.observation_shape, env.num_actions, key=key, **self.network_options
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable description; [`azx.presets.from_dict`][] inverts it."""
        out = _to_dict(self)
        for name in ("env_options", "network_options"):
            out[name] = {k: list(v) if isinstance(v, tuple) else v for k, v in out[name].items()}
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PPOPreset":
        data = _fields_from_dict(cls, data, ppo.Config)
        if "network_options" in data:
            data["network_options"] = {
                k: tuple(v) if isinstance(v, list) else v
                for k, v in data["network_options"].items()
            }
        return cls(**data)

    def build(self, *, seed: int = 0) -> tuple[ppo.PPO, ppo.TrainState]:
        """The trainer and its initial state for `seed`."""
        env = self.make_env()
        net_key, run_key = jax.random.split(jax.random.key(seed))
        trainer = ppo.PPO(env, self.config)
        return trainer, trainer.init(self.make_network(env, key=net_key), key=run_key)


_TYPES = {
    "alphazero": {
        "str": ("name", "env", "network", "search", "description"),
        "dict": ("env_options", "network_options", "search_options"),
        "strings": ("eval_opponents", "eval_agents"),
    },
    "ppo": {
        "str": ("name", "env", "network", "description"),
        "dict": ("env_options", "network_options"),
        "bool": ("eval_greedy",),
    },
}


def _check_types(values: dict[str, Any], **fields: tuple[str, ...]) -> None:
    """Presets come back from JSON that a person may have edited: check each field's type
    (`str`, `dict`, `bool`, or `strings`: a tuple of str) so that a wrong one is named."""
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


_PPO_NETWORKS = {"actor_critic": nets.ActorCritic, "recurrent": nets.RecurrentActorCritic}


def _to_dict(preset) -> dict[str, Any]:
    out = {"algorithm": preset.algorithm}
    out |= {field.name: getattr(preset, field.name) for field in dataclasses.fields(preset)}
    config = preset.config
    out["config"] = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    return out


def _fields_from_dict(cls, data: dict[str, Any], config_class) -> dict[str, Any]:
    data = {k: v for k, v in data.items() if k != "algorithm"}
    known = {field.name for field in dataclasses.fields(cls)}
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"unknown preset fields {sorted(unknown)}; known: {sorted(known)}")
    types = _TYPES[cls.algorithm]
    _check_types(data, **{k: v for k, v in types.items() if k != "strings"})
    if not isinstance(data.get("config"), dict):
        raise ValueError(f"config must be a JSON object, got {data.get('config')!r}")
    data["config"] = config_class(**data["config"])
    return data


AnyPreset = Preset | PPOPreset


def from_dict(data: dict[str, Any]) -> AnyPreset:
    """The preset that `to_dict` described (a `Preset` or a `PPOPreset`, by its
    `"algorithm"`; AlphaZero where it has none)."""
    algorithm = data.get("algorithm", "alphazero")
    classes = {cls.algorithm: cls for cls in (Preset, PPOPreset)}
    if algorithm not in classes:
        raise ValueError(f"unknown algorithm {algorithm!r}; known: {', '.join(classes)}")
    return classes[algorithm].from_dict(data)


_PRESETS: dict[str, AnyPreset] = {
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
            search="puct",
            # Exploratory move choice (the targets stay the visit counts): measured on
            # four seeds, it took the greedy network's exact loss rate as second player
            # against a random opponent from 0.4-1.9% to 0.0%.
            search_options={"num_simulations": 64, "temperature": 1.5, "dirichlet_fraction": 0.5},
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
            eval_opponents=("random", "solver"),
            eval_agents=("search", "network"),
        ),
        Preset(
            name="connect_four",
            env="connect_four",
            network="mlp",
            network_options={"width": 256, "depth": 3},
            # Gumbel search considering all 7 columns at the root: its policy target
            # raises every root move by its searched value, so a confident prior cannot
            # hide a winning or losing column, and 32 simulations cost less than PUCT's 64.
            search="gumbel",
            search_options={"num_simulations": 32, "max_num_considered_actions": 7},
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
            eval_opponents=("greedy", "mcts:200"),
            eval_every=700,
            eval_games=100,
        ),
        Preset(
            name="othello",
            env="othello",
            # An MLP rather than a ResNet: on the 2-core development CPU a ResNet of 32
            # channels and 4 blocks takes 23 s an iteration of this setup (its convolutions
            # as matrix products), one of 16 channels and 1 block 3 s; the MLP under one.
            network="mlp",
            network_options={"width": 256, "depth": 3},
            search="gumbel",
            search_options={"num_simulations": 32},
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
            eval_opponents=("random", "mcts:200"),
            eval_agents=("search", "network"),
            eval_every=250,
            eval_games=100,
        ),
        PPOPreset(
            name="ppo_cartpole",
            env="gymnax:CartPole-v1",
            env_options={},
            network="actor_critic",
            network_options={"hidden_sizes": (64, 64), "activation": "tanh"},
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
        PPOPreset(
            name="ppo_minigrid",
            env="xminigrid:MiniGrid-Empty-6x6",
            env_options={},
            network="recurrent",
            network_options={"hidden_size": 16, "head_size": 16, "action_embedding_size": 16},
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
        PPOPreset(
            name="ppo_breakout",
            env="gymnax:Breakout-MinAtar",
            env_options={},
            network="actor_critic",
            network_options={"hidden_sizes": (256, 256), "activation": "relu"},
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
    ]
}


def names() -> tuple[str, ...]:
    """Names of the presets."""
    return tuple(_PRESETS)


def get(name: str) -> AnyPreset:
    """The preset called `name`; `ValueError` listing the names if there is none."""
    if name not in _PRESETS:
        raise ValueError(f"unknown preset {name!r}; available: {', '.join(_PRESETS)}")
    return _PRESETS[name]


def for_pgx_game(game: str) -> Preset:
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
        search="gumbel",
        search_options={"num_simulations": 32},
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
        eval_opponents=("random", "greedy"),
        eval_every=100,
        eval_games=100,
    )
