from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from .._episodes import EvaluationResult, play_episodes
from .._types import PRNGKey
from .._validate import check_positive_int
from ..envs import AbstractEnv
from ..nets import RecurrentInput
from ._distributions import action_distribution as make_distribution
from ._policy import ObservationStats, act, initial_carry, normalize


class PolicyEpisode(eqx.Module):
    """One episode's row of [`azx.ppo.evaluate`][]: the state and the policy's memory."""

    env_state: Any
    carry: Any
    previous_action: Int[Array, ""]
    previous_reward: Float[Array, ""]
    episode_start: Bool[Array, ""]


def start_episode(env: AbstractEnv, carry: Any, key: PRNGKey) -> PolicyEpisode:
    """An episode from `env.init(key)`, the policy's memory `carry` (`initial_carry`)."""
    return PolicyEpisode(
        env_state=env.init(key),
        carry=carry,
        previous_action=jnp.int32(0),
        previous_reward=jnp.float32(0.0),
        episode_start=jnp.bool_(True),
    )


def step_episode(
    env: AbstractEnv,
    net: Any,
    distribution: Any,
    observation_stats: ObservationStats | None,
    greedy: bool,
    episode: PolicyEpisode,
    running: Bool[Array, ""],
    key: PRNGKey,
) -> tuple[PolicyEpisode, Any, Float[Array, ""], Bool[Array, ""]]:
    """One step of the policy's episode (one row; `jax.vmap` for many): the next row, the
    action the environment received, its reward and whether the episode ended. The
    reward the policy sees next is 0 where the episode was no longer `running`."""
    action_key, step_key = jax.random.split(key)
    inputs = RecurrentInput(
        observation=normalize(observation_stats, env.observation(episode.env_state)),
        previous_action=episode.previous_action,
        previous_reward=episode.previous_reward,
        episode_start=episode.episode_start,
    )
    legal = env.legal_action_mask(episode.env_state)
    noise = None if greedy else distribution.noise(action_key)
    carry, action, _, _ = act(net, distribution, episode.carry, inputs, legal, noise)
    env_action = distribution.env_action(action)
    state = env.step(episode.env_state, env_action, step_key)
    reward = env.rewards(state)[0]
    next_episode = PolicyEpisode(
        env_state=state,
        carry=carry,
        previous_action=action if action.ndim == 0 else episode.previous_action,
        previous_reward=jnp.where(running, reward, 0.0),
        episode_start=jnp.bool_(False),
    )
    return next_episode, env_action, reward, env.terminated(state) | env.truncated(state)


def evaluate(
    env: AbstractEnv,
    net: Any,
    *,
    num_episodes: int,
    key: PRNGKey,
    greedy: bool = False,
    observation_stats: ObservationStats | None = None,
    max_steps: int = 100_000,
    action_distribution: str = "categorical",
) -> EvaluationResult:
    """Play `num_episodes` episodes of `env` with the policy of `net`, all at once.

    **Arguments:**

    - `env`, `net`: a single-player environment and a network for it (feed-forward or an
      [`azx.nets.AbstractRecurrentNet`][]), as [`azx.ppo.PPO`][] trains them.
    - `num_episodes`: episodes to play (each from its own start).
    - `key`: random key (keyword-only): starts, chance and sampled actions.
    - `greedy`: take the most likely action instead of sampling the policy.
    - `observation_stats`: the run's observation statistics, if it normalised
      observations (`state.observation_stats` with `Config.normalize_observations`).
    - `max_steps`: stop episodes that have not ended after this many steps (they are
      marked `finished=False`).
    - `action_distribution`: the policy's distribution, as the run's
      `Config.action_distribution`.

    **Returns:** an [`azx.ppo.EvaluationResult`][].
    """
    check_positive_int("num_episodes", num_episodes)
    check_positive_int("max_steps", max_steps)
    distribution = make_distribution(action_distribution, env)
    carry = initial_carry(net)

    def start(key):
        return start_episode(env, carry, key)

    def play(episode: PolicyEpisode, running, key: PRNGKey):
        next_episode, _, reward, ended = step_episode(
            env, net, distribution, observation_stats, greedy, episode, running, key
        )
        return next_episode, reward, ended

    return play_episodes(
        jax.vmap(start),
        jax.vmap(play),
        num_episodes=num_episodes,
        key=key,
        max_steps=max_steps,
    )
