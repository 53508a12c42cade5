"""MuZero's loss: the model unrolled through its dynamics along a stored segment, each
unroll step's policy, value and reward against the segment's targets."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Shaped

from ._nets import ConsistencyHead, MuZeroNet
from ._replay import Targets
from ._scaling import scale_value, two_hot
from ._stochastic_nets import StochasticMuZeroNet


class LossParts(eqx.Module):
    """The loss and its parts, each summed over the batch's real segments (divide by
    `count` for means)."""

    loss: Float[Array, ""]
    policy_loss: Float[Array, ""]
    value_loss: Float[Array, ""]
    reward_loss: Float[Array, ""]
    consistency_loss: Float[Array, ""]
    """The weighted consistency loss (0 with `consistency_loss_weight=0`)."""
    policy_entropy: Float[Array, ""]
    """Entropy of the prediction's policy at the segments' first observations."""
    count: Float[Array, ""]
    """Real segments in the batch."""


def scale_gradient(x: Float[Array, "*shape"], scale: float) -> Float[Array, "*shape"]:
    """`x` unchanged, its gradient multiplied by `scale`."""
    return scale * x + (1.0 - scale) * jax.lax.stop_gradient(x)


def head_loss(
    support_size: int | None, head: Float[Array, " bins"], target: Float[Array, ""]
) -> Float[Array, ""]:
    """Cross-entropy against the two-hot projection of `h(target)` for a categorical head
    (over `-support_size ... support_size`), half the squared error for a scalar one
    (`support_size=None`)."""
    if support_size is None:
        return 0.5 * jnp.square(head[0] - target)
    probabilities = two_hot(scale_value(target), support_size)
    return -jnp.sum(probabilities * jax.nn.log_softmax(head))


def _unit(x: Float[Array, " projection"]) -> Float[Array, " projection"]:
    return x / jnp.maximum(jnp.linalg.norm(x), 1e-8)


def consistency_targets(
    net: MuZeroNet | StochasticMuZeroNet, weight: float, next_observation: Shaped[Array, "k ..."]
) -> Float[Array, "k projection"]:
    """The consistency loss's targets: the projections of the representations of the
    observations the game reached, their gradient stopped; `ValueError` where `net` has no
    consistency head to give them."""
    if net.consistency is None:
        raise ValueError(
            f"consistency_loss_weight={weight} needs a network with a consistency head "
            f"({type(net).__name__}.consistency, an azx.muzero.ConsistencyHead)"
        )
    real = jax.vmap(net.represent)(next_observation)
    return jax.lax.stop_gradient(jax.vmap(net.consistency.project)(real))


def consistency_term(
    head: ConsistencyHead,
    embedding: Float[Array, "*embedding"],
    target: Float[Array, " projection"],
) -> Float[Array, ""]:
    """`1 - cos(p, z)`: `p` the predictor on the projection of a dynamics `embedding`, `z`
    its `target` (a row of `consistency_targets`)."""
    online = head.predict(head.project(embedding))
    return 1.0 - jnp.dot(_unit(online), _unit(target))


def segment_loss(
    net: MuZeroNet,
    observation: Shaped[Array, "..."],
    targets: Targets,
    *,
    value_loss_weight: float = 0.25,
    reward_loss_weight: float = 1.0,
    consistency_loss_weight: float = 0.0,
) -> tuple[
    Float[Array, ""], Float[Array, ""], Float[Array, ""], Float[Array, ""], Float[Array, ""]
]:
    """Policy, value, reward and consistency losses of ONE segment, and the entropy of the
    policy at its first observation: `(policy, value, reward, consistency, entropy)`, the
    losses each the sum over unroll steps `k = 0 ... K`, steps after the first weighted
    `1/K` (so the unroll counts as much as the root however long it is), masked past the
    episode's end (by `targets.mask`, `targets.value_mask` and `targets.reward_mask`).

    The gradient into each embedding the dynamics produces is halved (as in the paper), so
    the dynamics network's total gradient stays of the size of the others' however long
    the unroll.

    With `consistency_loss_weight > 0` (EfficientZero's self-supervised consistency), each
    unroll step `k = 1 ... K` whose observation lies in the episode (`targets.mask[k]`)
    adds `1 - cos(p, z)` weighted `1/K`: `p` the predictor on the projection of the
    dynamics' embedding, `z` the projection of the representation of the observation the
    game reached there (`targets.next_observation`), its gradient stopped (`net.consistency`
    holds the projection and the predictor). Past a termination there is no observation,
    so with `absorbing_end` too those steps train no consistency. With weight 0 nothing of
    it is computed: the other losses and their gradients are those without the option.
    """
    unroll_steps = targets.actions.shape[0]
    embedding = net.represent(observation)
    policy_loss = value_loss = reward_loss = consistency_loss = jnp.float32(0.0)
    if consistency_loss_weight:
        real_projection = consistency_targets(
            net, consistency_loss_weight, targets.next_observation
        )
    for k in range(unroll_steps + 1):
        weight = 1.0 if k == 0 else 1.0 / unroll_steps
        logits, value_head = net.prediction(embedding)
        if k == 0:
            entropy = -jnp.sum(jax.nn.softmax(logits) * jax.nn.log_softmax(logits))
        mask = targets.mask[k].astype(jnp.float32) * weight
        value_mask = targets.value_mask[k].astype(jnp.float32) * weight
        cross_entropy = -jnp.sum(targets.policy_target[k] * jax.nn.log_softmax(logits))
        policy_loss += mask * cross_entropy
        value_loss += value_mask * head_loss(net.support_size, value_head, targets.value_target[k])
        if k == unroll_steps:
            break
        reward_head, embedding = net.dynamics(embedding, targets.actions[k])
        embedding = scale_gradient(embedding, 0.5)
        if consistency_loss_weight:
            step_weight = targets.mask[k + 1].astype(jnp.float32) / unroll_steps
            consistency_loss += step_weight * consistency_term(
                net.consistency, embedding, real_projection[k]
            )
        # The k-th action's reward is the (k + 1)-th unroll step's prediction.
        reward_weight = targets.reward_mask[k].astype(jnp.float32) / unroll_steps
        reward_loss += reward_weight * head_loss(
            net.support_size, reward_head, targets.reward_target[k]
        )
    value_loss, reward_loss = value_loss_weight * value_loss, reward_loss_weight * reward_loss
    consistency_loss = consistency_loss_weight * consistency_loss
    entropy = jax.lax.stop_gradient(entropy)
    return policy_loss, value_loss, reward_loss, consistency_loss, entropy


def loss(
    net: MuZeroNet,
    observation: Shaped[Array, "batch ..."],
    targets: Targets,
    valid: Bool[Array, " batch"],
    *,
    value_loss_weight: float = 0.25,
    reward_loss_weight: float = 1.0,
    consistency_loss_weight: float = 0.0,
) -> LossParts:
    """[`azx.muzero.segment_loss`][] summed over a batch's real segments (`valid`)."""
    policy, value, reward, consistency, entropy = jax.vmap(
        lambda o, t: segment_loss(
            net,
            o,
            t,
            value_loss_weight=value_loss_weight,
            reward_loss_weight=reward_loss_weight,
            consistency_loss_weight=consistency_loss_weight,
        )
    )(observation, targets)
    weight = valid.astype(jnp.float32)
    parts = [jnp.sum(weight * x) for x in (policy, value, reward, consistency, entropy)]
    total = parts[0] + parts[1] + parts[2]
    if consistency_loss_weight:
        total = total + parts[3]
    return LossParts(
        loss=total,
        policy_loss=parts[0],
        value_loss=parts[1],
        reward_loss=parts[2],
        consistency_loss=parts[3],
        policy_entropy=parts[4],
        count=jnp.sum(weight),
    )
