import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._numerics import ILLEGAL_LOGIT
from ..buffer import Batch


class LossMetrics(eqx.Module):
    """Sums over the valid positions of a minibatch (divide by `count` for means)."""

    loss: Float[Array, ""]
    policy_loss: Float[Array, ""]
    value_loss: Float[Array, ""]
    policy_entropy: Float[Array, ""]
    value_error: Float[Array, ""]
    """Sum of absolute value errors."""
    count: Float[Array, ""]
    """Number of valid positions."""


def loss(
    net,
    batch: Batch,
    *,
    value_loss_weight: float = 1.0,
    policy_loss_weight: float | Float[Array, ""] = 1.0,
) -> LossMetrics:
    """AlphaZero loss summed over the valid positions of `batch`.

    Policy: cross-entropy of the network's policy (restricted to legal actions) against
    the search's policy target. Value: squared error against the value target. Sums, not
    means, so that sums over shards or rows add up to the same total; the learner divides
    by the total count. Weight decay is the optimiser's job (AdamW).

    **Arguments:**

    - `net`: network mapping ONE observation to `(logits, value)`.
    - `batch`: a [`azx.buffer.Batch`][]; rows with `mask == False` contribute nothing.
    - `value_loss_weight`: weight of the value term in `loss`.
    - `policy_loss_weight`: weight of the policy term in `loss` and `policy_loss` (the
      learner sets it when only some positions have a policy target, so that the policy
      term is a mean over those).
    """
    logits, value = jax.vmap(net)(batch.observation)
    logits = jnp.where(batch.legal_action_mask, logits, ILLEGAL_LOGIT)
    log_policy = jax.nn.log_softmax(logits, axis=-1)
    weight = batch.mask.astype(jnp.float32)
    policy_loss = -jnp.sum(batch.policy_target * log_policy, axis=-1)
    if not (isinstance(policy_loss_weight, float) and policy_loss_weight == 1.0):
        policy_loss = policy_loss_weight * policy_loss
    entropy = -jnp.sum(jnp.exp(log_policy) * log_policy, axis=-1)
    error = value - batch.value_target
    value_loss = jnp.square(error)
    total = policy_loss + value_loss_weight * value_loss
    return LossMetrics(
        loss=jnp.sum(weight * total),
        policy_loss=jnp.sum(weight * policy_loss),
        value_loss=jnp.sum(weight * value_loss),
        policy_entropy=jnp.sum(weight * entropy),
        value_error=jnp.sum(weight * jnp.abs(error)),
        count=jnp.sum(weight),
    )
