import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from .._trainer import row_keys
from .._types import PRNGKey
from .._validate import check_positive_int
from ..envs import AbstractEnv
from ..nets import RecurrentInput
from ._distributions import action_distribution as make_distribution
from ._policy import ObservationStats, act, initial_carry, normalize


class EvaluationResult(eqx.Module):
    """Episodes played by [`azx.ppo.evaluate`][], one entry each."""

    returns: Float[Array, " episodes"]
    """Undiscounted return."""
    lengths: Int[Array, " episodes"]
    """Steps played."""
    finished: Bool[Array, " episodes"]
    """Whether the episode ended (terminated or truncated) within `max_steps`."""

    def mean_return(self) -> float:
        return float(np.mean(np.asarray(self.returns)))

    def return_interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """Student-t confidence interval of the expected return (from the host; the
        episodes are independent draws). A single episode gives an unbounded interval."""
        if not 0 < confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
        returns = np.asarray(self.returns, np.float64)
        n, mean = returns.size, float(np.mean(returns))
        if n < 2:
            return -math.inf, math.inf
        half = _t_quantile(0.5 + confidence / 2, n - 1) * float(np.std(returns, ddof=1))
        half /= math.sqrt(n)
        return mean - half, mean + half


def _t_quantile(p: float, dof: int) -> float:
    """The `p` quantile (`p > 0.5`) of Student's t distribution with `dof` degrees of
    freedom, by bisection on its distribution function (Simpson's rule on the density)."""
    log_scale = math.lgamma((dof + 1) / 2) - math.lgamma(dof / 2) - 0.5 * math.log(dof * math.pi)

    def density(x):
        return math.exp(log_scale - (dof + 1) / 2 * math.log1p(x * x / dof))

    def above_zero(x, intervals=400):  # P(0 < T < x)
        h = x / intervals
        inner = sum((4 if i % 2 else 2) * density(i * h) for i in range(1, intervals))
        return h / 3 * (density(0.0) + inner + density(x))

    low, high = 0.0, 1.0
    while above_zero(high) < p - 0.5:
        low, high = high, 2 * high
    for _ in range(50):
        middle = (low + high) / 2
        low, high = (middle, high) if above_zero(middle) < p - 0.5 else (low, middle)
    return (low + high) / 2


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
