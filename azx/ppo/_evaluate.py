from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from .._episodes import EvaluationResult
from .._trainer import row_keys
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
    running: Bool[Array, ""]
    total: Float[Array, ""]
    length: Int[Array, ""]


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
    start_keys = row_keys(jax.random.fold_in(key, 0), jnp.int32(0), num_episodes)
    carry = initial_carry(net)
    episodes = jax.vmap(
        lambda k: _Episode(
            env_state=env.init(k),
            carry=carry,
            previous_action=jnp.int32(0),
            previous_reward=jnp.float32(0.0),
            episode_start=jnp.bool_(True),
            running=jnp.bool_(True),
            total=jnp.float32(0.0),
            length=jnp.int32(0),
        )
    )(start_keys)

    def play(episode: _Episode, key: PRNGKey) -> _Episode:
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
        reward = jnp.where(episode.running, env.rewards(state)[0], 0.0)
        ended = env.terminated(state) | env.truncated(state)
        return _Episode(
            env_state=state,
            carry=carry,
            previous_action=action if action.ndim == 0 else episode.previous_action,
            previous_reward=reward,
            episode_start=jnp.bool_(False),
            running=episode.running & ~ended,
            total=episode.total + reward,
            length=episode.length + episode.running.astype(jnp.int32),
        )

    def condition(carry):
        episodes, step = carry
        return jnp.any(episodes.running) & (step < max_steps)

    def body(carry):
        episodes, step = carry
        keys = row_keys(jax.random.fold_in(key, step + 1), jnp.int32(0), num_episodes)
        return jax.vmap(play)(episodes, keys), step + 1

    episodes, _ = jax.lax.while_loop(condition, body, (episodes, jnp.int32(0)))
    return EvaluationResult(
        returns=episodes.total, lengths=episodes.length, finished=~episodes.running
    )
