"""PPO as azx's application trains it: its recipe and its presets."""

import dataclasses
from typing import ClassVar

import equinox as eqx

from .. import nets
from .._preset import (
    AbstractPolicyRecipe,
    Preset,
    check_types,
    mean_record,
    per_episode_record,
    return_progress,
)
from .._validate import check_positive_int
from . import _config
from ._continuous_net import ContinuousActorCritic
from ._evaluate import evaluate
from ._trainer import PPO


_PPO_NETWORKS = {
    "actor_critic": nets.ActorCritic,
    "recurrent": nets.RecurrentActorCritic,
    "continuous_actor_critic": ContinuousActorCritic,
}


@dataclasses.dataclass(frozen=True)
class PPORecipe(AbstractPolicyRecipe):
    """PPO ([`azx.ppo.PPO`][]): its networks and how `azx train` evaluates its policy."""

    name: ClassVar[str] = "ppo"
    config_class: ClassVar[type] = _config.Config
    schedule: ClassVar[str | None] = "anneal_iterations"
    networks: ClassVar[tuple[str, ...]] = tuple(_PPO_NETWORKS)

    eval_episodes: int = 100
    """Episodes per evaluation in `azx train` (and the default of `azx eval`)."""
    eval_greedy: bool = False
    """Evaluate the policy's most likely action instead of sampling it."""

    def __post_init__(self):
        check_types(vars(self), type(self))
        check_positive_int("eval_episodes", self.eval_episodes)

    def make_network(self, network, options, env, *, key):
        return _PPO_NETWORKS[network](env.observation_shape, env.num_actions, key=key, **options)

    def make_trainer(self, env, config):
        return PPO(env, config)

    def record(self, trainer, state, history, rate):
        names = ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")
        record = mean_record(history, (*names, "explained_variance"))
        record["learning_rate"] = float(state.metrics.learning_rate)
        return record | per_episode_record(history) | {"steps_per_s": rate}

    def progress(self, record):
        return return_progress(record)

    def play_episodes(self, trainer, state, num_episodes, *, key, greedy):
        greedy = self.eval_greedy if greedy is None else greedy
        stats = state.observation_stats if trainer.config.normalize_observations else None
        return _evaluate(
            trainer.env,
            state.net,
            num_episodes=num_episodes,
            key=key,
            greedy=greedy,
            observation_stats=stats,
            action_distribution=trainer.config.action_distribution,
        )


_evaluate = eqx.filter_jit(evaluate)

PRESETS: tuple[Preset, ...] = (
    Preset(
        name="ppo_cartpole",
        env="gymnax:CartPole-v1",
        env_options={},
        network="actor_critic",
        network_options={"hidden_sizes": (64, 64), "activation": "tanh"},
        recipe=PPORecipe(),
        # purejaxrl's CartPole setup: 4 environments x 128 steps, 4 epochs of 4
        # minibatches, the learning rate annealed to 0 over the run.
        config=_config.Config(
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
        config=_config.Config(
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
        config=_config.Config(
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
        config=_config.Config(
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
        config=_config.Config(
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
    # Seed 002's own recurrent PPO (XLand-MiniGrid's single-task baseline at its small size),
    # as the seed configures it: 1 epoch of 16 minibatches, 10^5 // (64 x 16) = 97 iterations
    # with the learning rate annealed over them, time-outs treated as terminal, the memory
    # (and the previous action and reward) never reset, and the action embedding started at
    # flax's nn.Embed scale. ppo_minigrid departs from it where that learns more reliably.
    Preset(
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
        config=_config.Config(
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
    ),
)
"""PPO's presets."""
