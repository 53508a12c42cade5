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


class _Episode(eqx.Module):
    env_state: Any
    carry: Any
    previous_action: Int[Array, ""]
    previous_reward: Float[Array, ""]
    episode_start: Bool[Array, ""]


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
        return _Episode(
            env_state=env.init(key),
            carry=carry,
            previous_action=jnp.int32(0),
            previous_reward=jnp.float32(0.0),
            episode_start=jnp.bool_(True),
        )

    def play(episode: _Episode, running, key: PRNGKey):
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
        state = env.step(episode.env_state, distribution.env_action(action), step_key)
        reward = env.rewards(state)[0]
        next_episode = _Episode(
            env_state=state,
            carry=carry,
            previous_action=action if action.ndim == 0 else episode.previous_action,
            previous_reward=jnp.where(running, reward, 0.0),
            episode_start=jnp.bool_(False),
        )
        return next_episode, reward, env.terminated(state) | env.truncated(state)

    return play_episodes(
        jax.vmap(start),
        jax.vmap(play),
        num_episodes=num_episodes,
        key=key,
        max_steps=max_steps,
    )
