import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float


class LossParts(eqx.Module):
    """The PPO loss and its parts, each a weighted sum over samples (a mean when the
    weights are `1 / number of samples`)."""

    loss: Float[Array, ""]
    """`policy_loss + value_coef * value_loss - entropy_coef * entropy`."""
    policy_loss: Float[Array, ""]
    value_loss: Float[Array, ""]
    entropy: Float[Array, ""]
    approx_kl: Float[Array, ""]
    """Estimate of KL(old policy ‖ new policy): `(ratio - 1) - log(ratio)`, which is
    non-negative sample by sample."""
    clip_fraction: Float[Array, ""]
    """Share of samples whose ratio lies outside `[1 - clip_eps, 1 + clip_eps]`."""


def loss(
    log_prob: Float[Array, " n"],
    old_log_prob: Float[Array, " n"],
    advantage: Float[Array, " n"],
    value: Float[Array, " n"],
    old_value: Float[Array, " n"],
    target: Float[Array, " n"],
    entropy: Float[Array, " n"],
    weight: Float[Array, " n"],
    *,
    clip_eps: float,
    value_clip_eps: float | None,
    value_coef: float,
    entropy_coef: float,
    kl_coef: float | None = None,
) -> LossParts:
    """The clipped PPO objective (Schulman et al., 2017) as a loss to minimise.

    Policy: `-min(ratio * advantage, clip(ratio, 1 - clip_eps, 1 + clip_eps) * advantage)`
    with `ratio = exp(log_prob - old_log_prob)`, so the gradient vanishes once the ratio
    has moved past the clip range in the advantage's direction; with `kl_coef`, the
    KL-penalty objective `-ratio * advantage + kl_coef * ((ratio - 1) - log(ratio))`
    instead (`approx_kl`'s per-sample estimate as the penalty). Value:
    `0.5 * (value - target) ** 2`, or with `value_clip_eps` the larger of that and the
    same error of `old_value + clip(value - old_value, ±value_clip_eps)`.

    **Arguments:** per-sample arrays (the new and the rollout's log-probability of the
    action taken, the advantage, the new and the rollout's value, the value target, the
    new policy's entropy, and each sample's weight); the coefficients keyword-only.

    **Returns:** a [`azx.ppo.LossParts`][] of weighted sums.
    """
    log_ratio = log_prob - old_log_prob
    ratio = jnp.exp(log_ratio)
    clipped_ratio = jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps)
    kl = (ratio - 1.0) - log_ratio
    if kl_coef is None:
        policy_loss = -jnp.minimum(ratio * advantage, clipped_ratio * advantage)
    else:
        policy_loss = -ratio * advantage + kl_coef * kl
    value_loss = jnp.square(value - target)
    if value_clip_eps is not None:
        clipped_value = old_value + jnp.clip(value - old_value, -value_clip_eps, value_clip_eps)
        value_loss = jnp.maximum(value_loss, jnp.square(clipped_value - target))
    value_loss = 0.5 * value_loss

    def total(x):
        return jnp.sum(weight * x)

    parts = dict(
        policy_loss=total(policy_loss),
        value_loss=total(value_loss),
        entropy=total(entropy),
        approx_kl=total(kl),
        clip_fraction=total((jnp.abs(ratio - 1.0) > clip_eps).astype(jnp.float32)),
    )
    combined = (
        parts["policy_loss"] + value_coef * parts["value_loss"] - entropy_coef * parts["entropy"]
    )
    return LossParts(loss=combined, **parts)
