import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float


def gae(
    reward: Float[Array, " time *batch"],
    value: Float[Array, " time *batch"],
    next_value: Float[Array, " time *batch"],
    terminated: Bool[Array, " time *batch"],
    truncated: Bool[Array, " time *batch"],
    *,
    gamma: float,
    gae_lambda: float,
    truncation: str = "bootstrap",
) -> tuple[Float[Array, " time *batch"], Float[Array, " time *batch"]]:
    """Generalised advantage estimates (Schulman et al., 2016) of a time-major rollout.

    At step `t` the agent saw a state of value `value[t]`, received `reward[t]` and reached
    a state of value `next_value[t]` (the value of the observation the step led to, before
    any reset). The TD error is `reward[t] + gamma * next_value[t] - value[t]`, with the
    bootstrap dropped where the episode `terminated`; the advantage adds
    `gamma * gae_lambda` times the next step's advantage unless the episode ended there
    (terminated or truncated), since the next step belongs to a new episode.

    **Arguments:**

    - `reward`, `value`, `next_value`, `terminated`, `truncated`: `[time, ...]` arrays.
    - `gamma`, `gae_lambda`: the discount and the λ of the estimate.
    - `truncation`: `"bootstrap"` (a truncated episode keeps `next_value`, the value of
      its final observation) or `"terminate"` (a truncated episode is treated as
      terminated: no bootstrap).

    **Returns:** `(advantage, target)`, with `target = advantage + value` the value
    function's regression target.
    """
    if truncation not in ("bootstrap", "terminate"):
        raise ValueError(f"truncation must be 'bootstrap' or 'terminate', got {truncation!r}")
    ended = terminated | truncated
    no_future = ended if truncation == "terminate" else terminated
    delta = reward + gamma * jnp.where(no_future, 0.0, next_value) - value
    decay = gamma * gae_lambda * jnp.where(ended, 0.0, 1.0)

    def backward(later_advantage, step):
        delta_t, decay_t = step
        advantage = delta_t + decay_t * later_advantage
        return advantage, advantage

    _, advantage = jax.lax.scan(backward, jnp.zeros_like(delta[0]), (delta, decay), reverse=True)
    return advantage, advantage + value
