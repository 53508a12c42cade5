"""Acting with a feed-forward or recurrent network, and running observation statistics."""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, PyTree, Shaped

from ..envs import AbstractEnv
from ..nets import AbstractRecurrentNet, RecurrentInput
from ._distributions import AbstractActionDistribution, Categorical


#: Standardised observations are clipped to this magnitude.
OBSERVATION_CLIP = 10.0


class ObservationStats(eqx.Module):
    """Running mean and variance of every observation element seen so far."""

    count: Float[Array, ""]
    mean: Float[Array, "..."]
    var: Float[Array, "..."]


def initial_stats(observation_shape: tuple[int, ...]) -> ObservationStats:
    # A tiny prior count of a zero mean and unit variance keeps the first update finite.
    return ObservationStats(
        count=jnp.float32(1e-4),
        mean=jnp.zeros(observation_shape, jnp.float32),
        var=jnp.ones(observation_shape, jnp.float32),
    )


def normalize(
    stats: ObservationStats | None, observation: Shaped[Array, "..."]
) -> Shaped[Array, "..."]:
    """`observation` standardised by `stats` and clipped to ±10 (unchanged for `None`)."""
    if stats is None:
        return observation
    scaled = (observation.astype(jnp.float32) - stats.mean) / jnp.sqrt(stats.var + 1e-8)
    return jnp.clip(scaled, -OBSERVATION_CLIP, OBSERVATION_CLIP)


def merge_stats(
    stats: ObservationStats,
    count: Float[Array, ""],
    total: Float[Array, "..."],
    centred_squares,
) -> ObservationStats:
    """`stats` updated with a batch of `count` observations given as their sum `total` and
    `centred_squares(batch_mean)`, the sum of squared deviations from a given mean (Chan et
    al.'s parallel variance update, so that shards can add their parts first)."""
    batch_mean = total / count
    batch_squares = centred_squares(batch_mean)
    combined = stats.count + count
    delta = batch_mean - stats.mean
    mean = stats.mean + delta * (count / combined)
    squares = (
        stats.var * stats.count
        + batch_squares
        + jnp.square(delta) * (stats.count * count / combined)
    )
    return ObservationStats(count=combined, mean=mean, var=squares / combined)


def is_recurrent(net: Any) -> bool:
    return isinstance(net, AbstractRecurrentNet)


def initial_carry(net: Any) -> PyTree[Array]:
    """The network's carry before the first step: `()` for a feed-forward network."""
    return net.initial_carry() if is_recurrent(net) else ()


def apply(
    net: Any, carry: PyTree[Array], inputs: RecurrentInput
) -> tuple[PyTree[Array], Float[Array, " num_actions"], Float[Array, ""]]:
    """One step of `net` for one environment: `(carry, logits, value)`. A feed-forward
    network reads only the observation and passes the (empty) carry through."""
    if is_recurrent(net):
        carry, (logits, value) = net(carry, inputs)
    else:
        logits, value = net(inputs.observation)
    return carry, logits, value


def check_network(env: AbstractEnv, net: Any, distribution: AbstractActionDistribution) -> None:
    """Raise `ValueError` unless `net` maps one of `env`'s observations to the policy
    outputs `distribution` reads and a scalar value."""

    def first_step():
        inputs = RecurrentInput(
            observation=jnp.zeros(env.observation_shape, env.observation_dtype),
            previous_action=jnp.int32(0),
            previous_reward=jnp.float32(0.0),
            episode_start=jnp.bool_(True),
        )
        return apply(net, initial_carry(net), inputs)

    try:
        _, logits, value = jax.eval_shape(first_step)
    except (ValueError, TypeError) as error:
        raise ValueError(
            f"the network does not fit the environment (observations of shape "
            f"{env.observation_shape}, {env.observation_dtype}): {error}"
        ) from None
    outputs = distribution.num_outputs
    if isinstance(distribution, Categorical):
        if logits.shape != (outputs,) or value.shape != ():
            raise ValueError(
                f"the network gives logits of shape {logits.shape} and a value of shape "
                f"{value.shape}; the environment needs ({outputs},) logits (one per "
                "action) and a scalar value"
            )
        return
    if is_recurrent(net):
        raise ValueError(
            "recurrent networks read the previous action as a discrete choice; an "
            "environment with continuous actions needs a feed-forward network such as "
            "azx.ppo.ContinuousActorCritic"
        )
    if logits.shape != (outputs,) or value.shape != ():
        raise ValueError(
            f"the network gives policy outputs of shape {logits.shape} and a value of shape "
            f"{value.shape}; a {type(distribution).__name__} policy over the environment's "
            f"{env.num_actions} action components needs ({outputs},) outputs (two per "
            "component, as azx.ppo.ContinuousActorCritic gives) and a scalar value"
        )


def act(
    net: Any,
    distribution: AbstractActionDistribution,
    carry: PyTree[Array],
    inputs: RecurrentInput,
    legal_action_mask: Bool[Array, " num_actions"],
    noise: PyTree[Array] | None,
):
    """Choose an action for one environment: a sample of `distribution` drawn with
    `noise` (see [`azx.ppo.AbstractActionDistribution.noise`][]), or with `noise=None`
    its most likely action. Taking the noise as an argument lets a rollout draw all of it
    at once. Illegal actions get no probability.

    **Returns:** `(carry, action, log_prob, value)`.
    """
    carry, outputs, value = apply(net, carry, inputs)
    outputs = distribution.restrict(outputs, legal_action_mask)
    if noise is None:
        action = distribution.mode(outputs)
    else:
        action = distribution.sample(outputs, noise)
    log_prob, _ = distribution.log_prob_and_entropy(outputs, action)
    return carry, action, log_prob, value
