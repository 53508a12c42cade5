"""Single-player episodes played to judge a policy, whichever algorithm trained it."""

import math
from collections.abc import Callable
from typing import TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from ._trainer import row_keys
from ._types import PRNGKey, PRNGKeys


_Rows = TypeVar("_Rows")


class EvaluationResult(eqx.Module):
    """Single-player episodes played by a trained policy, one entry each: what
    [`azx.ppo.evaluate`][] and [`azx.muzero.evaluate`][] return."""

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


def play_episodes(
    start: Callable[[PRNGKeys], _Rows],
    move: Callable[
        [_Rows, Bool[Array, " episodes"], PRNGKeys],
        tuple[_Rows, Float[Array, " episodes"], Bool[Array, " episodes"]],
    ],
    *,
    num_episodes: int,
    key: PRNGKey,
    max_steps: int,
) -> EvaluationResult:
    """Play `num_episodes` single-player episodes at once, one per row, until all have
    ended or `max_steps` moves are played, and count their returns and lengths.

    **Arguments:**

    - `start`: the rows' first states (a batch, any PyTree) from one key per row.
    - `move`: one move of every row: `(rows, running, keys) -> (rows, rewards, ended)`,
      with `running` false for the rows whose episode has ended (they play on until all
      have ended, and those moves count for nothing).
    - `key`: random key (keyword-only): the starts' keys come from `fold_in(key, 0)`,
      move `t`'s from `fold_in(key, t + 1)`, one per row each
      (`azx._trainer.row_keys`), so that a row's randomness does not depend on how many
      rows are played.

    **Returns:** an [`azx.ppo.EvaluationResult`][].
    """
    rows = start(row_keys(jax.random.fold_in(key, 0), jnp.int32(0), num_episodes))
    tally = (
        jnp.zeros(num_episodes, jnp.float32),
        jnp.zeros(num_episodes, jnp.int32),
        jnp.ones(num_episodes, bool),
    )

    def playing(carry):
        _, (_, _, running), step = carry
        return jnp.any(running) & (step < max_steps)

    def play(carry):
        rows, (total, length, running), step = carry
        keys = row_keys(jax.random.fold_in(key, step + 1), jnp.int32(0), num_episodes)
        rows, reward, ended = move(rows, running, keys)
        total = total + jnp.where(running, reward, 0.0)
        length = length + running.astype(jnp.int32)
        return rows, (total, length, running & ~ended), step + 1

    _, (total, length, running), _ = jax.lax.while_loop(playing, play, (rows, tally, jnp.int32(0)))
    return EvaluationResult(returns=total, lengths=length, finished=~running)
