"""Action distributions: how a network's policy outputs become actions, log-probabilities
and entropies, for discrete and for continuous (box) actions."""

import abc
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PyTree

from .._numerics import ILLEGAL_LOGIT
from .._types import PRNGKey
from ..envs import AbstractEnv, BoxActions


#: Names of the action distributions [`azx.ppo.Config`][] offers, by kind of action space.
DISCRETE_DISTRIBUTIONS = ("categorical",)
CONTINUOUS_DISTRIBUTIONS = ("tanh_normal", "normal", "beta")

#: A Normal's log standard deviation is the policy's output within this range; beyond it,
#: `bound_log_std` bends the output towards at most one unit further (a policy output far
#: outside would give a degenerate or an exploding distribution).
LOG_STD_RANGE = (-5.0, 2.0)

# Gauss-Hermite nodes and weights for E[f(u)], u ~ Normal(mean, std). The integrand of a
# tanh-squashed Normal's entropy, log(1 - tanh(u)^2), bends within |u| < 1, so the
# quadrature is the more accurate the narrower the Normal: against SciPy's adaptive
# integration, within 1e-3 up to std = e (log_std <= 1), within about 1% of the entropy at
# the largest std, e^2.
_HERMITE_NODES, _HERMITE_WEIGHTS = (
    x.astype(np.float32) for x in np.polynomial.hermite.hermgauss(32)
)
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
# Beta samples are kept this far inside (0, 1), where float32 still resolves their
# log-density.
_BETA_MARGIN = 1e-6


class AbstractActionDistribution(eqx.Module):
    """The policy over one environment's actions, given the network's policy outputs.

    Methods act on one environment's outputs or on any batch of them (leading axes).
    `action` is what the trajectory stores; `env_action(action)` is what the environment
    receives (the same for discrete actions; squashed, clipped or scaled into the bounds
    for continuous ones).
    """

    @property
    @abc.abstractmethod
    def num_outputs(self) -> int:
        """Policy outputs the network gives per environment."""

    @abc.abstractmethod
    def restrict(
        self, outputs: Float[Array, "*batch outputs"], legal_action_mask: Bool[Array, "*batch n"]
    ) -> Float[Array, "*batch outputs"]:
        """The outputs with illegal actions excluded (discrete actions only)."""

    @abc.abstractmethod
    def noise(self, key: PRNGKey) -> PyTree[Array]:
        """The randomness that [`sample`][azx.ppo.AbstractActionDistribution.sample]
        turns into one action."""

    @abc.abstractmethod
    def sample(self, outputs: Float[Array, " outputs"], noise: PyTree[Array]) -> Array:
        """One action drawn with `noise`."""

    @abc.abstractmethod
    def mode(self, outputs: Float[Array, " outputs"]) -> Array:
        """The most likely action."""

    @abc.abstractmethod
    def log_prob_and_entropy(
        self, outputs: Float[Array, "*batch outputs"], action: Array
    ) -> tuple[Float[Array, "*batch"], Float[Array, "*batch"]]:
        """Log-probability (density, for continuous actions) of `action` and the policy's
        entropy."""

    @abc.abstractmethod
    def env_action(self, action: Array) -> Array:
        """What the environment receives for `action`."""


class Categorical(AbstractActionDistribution):
    """A categorical policy over `num_actions` discrete actions: the outputs are logits,
    and illegal actions get none of the probability."""

    num_actions: int = eqx.field(static=True)

    @property
    def num_outputs(self) -> int:
        return self.num_actions

    def restrict(
        self, outputs: Float[Array, "*batch outputs"], legal_action_mask: Bool[Array, "*batch n"]
    ) -> Float[Array, "*batch outputs"]:
        return jnp.where(legal_action_mask, outputs, ILLEGAL_LOGIT)

    def noise(self, key: PRNGKey) -> Float[Array, " n"]:
        return jax.random.gumbel(key, (self.num_actions,))

    def sample(self, outputs: Float[Array, " outputs"], noise: PyTree[Array]) -> Int[Array, ""]:
        # The Gumbel-max trick, as in `jax.random.categorical`.
        return jnp.argmax(outputs + noise).astype(jnp.int32)

    def mode(self, outputs: Float[Array, " outputs"]) -> Int[Array, ""]:
        return jnp.argmax(outputs).astype(jnp.int32)

    def log_prob_and_entropy(
        self, outputs: Float[Array, "*batch outputs"], action: Array
    ) -> tuple[Float[Array, "*batch"], Float[Array, "*batch"]]:
        log_policy = jax.nn.log_softmax(outputs, axis=-1)
        log_prob = jnp.take_along_axis(log_policy, action[..., None], axis=-1)[..., 0]
        entropy = -jnp.sum(jnp.exp(log_policy) * log_policy, axis=-1)
        return log_prob, entropy

    def env_action(self, action: Array) -> Array:
        return action


def _halves(outputs: Float[Array, "*batch outputs"]):
    size = outputs.shape[-1] // 2
    return outputs[..., :size], outputs[..., size:]


def bound_log_std(raw: Float[Array, "*shape"]) -> Float[Array, "*shape"]:
    """A Normal's log standard deviation from the policy's output `raw`: `raw` itself
    within `LOG_STD_RANGE = (low, high)`, `low + expm1(raw - low)` below it and
    `high - expm1(high - raw)` above it, so always within `(low - 1, high + 1)`.

    The bound is continuous with a continuous first derivative, and its derivative,
    `exp(-distance beyond the range)`, is never zero: a policy whose output has crossed
    the range still learns which way to move it and can widen (or narrow) again, where a
    clip's zero gradient would hold it there for good.
    """
    low, high = LOG_STD_RANGE
    # The `minimum`s keep the branch that `where` discards finite, and its gradient zero.
    below = low + jnp.expm1(jnp.minimum(raw - low, 0.0))
    above = high - jnp.expm1(jnp.minimum(high - raw, 0.0))
    return jnp.where(raw < low, below, jnp.where(raw > high, above, raw))


def _normal_parts(outputs):
    mean, log_std = _halves(outputs)
    return mean, bound_log_std(log_std)


def _normal_log_density(u, mean, log_std):
    return -0.5 * jnp.square((u - mean) * jnp.exp(-log_std)) - log_std - _LOG_SQRT_2PI


def tanh_log_derivative(u: Float[Array, "*shape"]) -> Float[Array, "*shape"]:
    """`log(d tanh(u) / du) = log(1 - tanh(u)^2)`, computed as
    `2 * (log 2 - u - softplus(-2u))`, which stays finite where `tanh(u)` rounds to ±1."""
    return 2.0 * (math.log(2.0) - u - jax.nn.softplus(-2.0 * u))


def _floats(values) -> tuple[float, ...]:
    return tuple(float(x) for x in values)


class _AbstractBox(AbstractActionDistribution):
    low: tuple[float, ...] = eqx.field(static=True, converter=_floats)
    high: tuple[float, ...] = eqx.field(static=True, converter=_floats)

    @property
    def num_outputs(self) -> int:
        return 2 * len(self.low)

    def _bounds(self, like: Array):
        """The bounds, broadcast to the shape of `like` (actions with any leading axes)."""
        low, high = (jnp.asarray(x, jnp.float32) for x in (self.low, self.high))
        return jnp.broadcast_to(low, like.shape), jnp.broadcast_to(high, like.shape)

    def restrict(
        self, outputs: Float[Array, "*batch outputs"], legal_action_mask: Bool[Array, "*batch n"]
    ) -> Float[Array, "*batch outputs"]:
        return outputs  # every action in the box is allowed


class _AbstractNormal(_AbstractBox):
    """A Normal per action component; the outputs are its means and log standard
    deviations."""

    def noise(self, key: PRNGKey) -> Float[Array, " n"]:
        return jax.random.normal(key, (len(self.low),))

    def sample(self, outputs: Float[Array, " outputs"], noise: PyTree[Array]) -> Array:
        mean, log_std = _normal_parts(outputs)
        return mean + jnp.exp(log_std) * noise

    def mode(self, outputs: Float[Array, " outputs"]) -> Array:
        return _normal_parts(outputs)[0]


class TanhNormal(_AbstractNormal):
    """A Normal squashed into the bounds by `tanh` and an affine map: the outputs are the
    Normal's mean and log standard deviation (bounded by `bound_log_std`), one each per
    action component.

    The trajectory stores the Normal's sample `u`; the environment receives
    `mid + half_width * tanh(u)`, strictly inside the bounds. The log-density is the
    Normal's less `log(half_width * (1 - tanh(u)^2))` (change of variables), evaluated
    from `u` itself, so actions that round to a bound keep a finite log-probability. The
    squashed distribution's entropy has no closed form; it is the Normal's entropy plus
    the expected log-derivative of the squashing, integrated by 32-node Gauss-Hermite
    quadrature (deterministic and differentiable).
    """

    def log_prob_and_entropy(
        self, outputs: Float[Array, "*batch outputs"], action: Array
    ) -> tuple[Float[Array, "*batch"], Float[Array, "*batch"]]:
        mean, log_std = _normal_parts(outputs)
        low, high = self._bounds(mean)
        log_half_width = jnp.log((high - low) / 2)
        log_density = (
            _normal_log_density(action, mean, log_std)
            - tanh_log_derivative(action)
            - log_half_width
        )
        quadrature = (*mean.shape, _HERMITE_NODES.size)
        nodes, weights = (
            jnp.broadcast_to(x, quadrature) for x in (_HERMITE_NODES, _HERMITE_WEIGHTS)
        )
        nodes = mean[..., None] + math.sqrt(2.0) * jnp.exp(log_std)[..., None] * nodes
        expected = jnp.sum(tanh_log_derivative(nodes) * weights, axis=-1)
        expected = expected / math.sqrt(math.pi)
        entropy = 0.5 + _LOG_SQRT_2PI + log_std + expected + log_half_width
        return jnp.sum(log_density, axis=-1), jnp.sum(entropy, axis=-1)

    def env_action(self, action: Array) -> Array:
        low, high = self._bounds(action)
        return (low + high) / 2 + (high - low) / 2 * jnp.tanh(action)


class ClippedNormal(_AbstractNormal):
    """A Normal whose sample is clipped to the bounds on its way to the environment: the
    outputs are its mean and log standard deviation (bounded by `bound_log_std`), one each
    per action component. The trajectory stores the unclipped sample, and its
    log-probability and entropy are the Normal's."""

    def log_prob_and_entropy(
        self, outputs: Float[Array, "*batch outputs"], action: Array
    ) -> tuple[Float[Array, "*batch"], Float[Array, "*batch"]]:
        mean, log_std = _normal_parts(outputs)
        log_density = _normal_log_density(action, mean, log_std)
        entropy = 0.5 + _LOG_SQRT_2PI + log_std
        return jnp.sum(log_density, axis=-1), jnp.sum(entropy, axis=-1)

    def env_action(self, action: Array) -> Array:
        low, high = self._bounds(action)
        return jnp.clip(action, low, high)


class Beta(_AbstractBox):
    """A Beta distribution scaled to the bounds: the outputs `a, b` give the shapes
    `alpha = 1 + softplus(a)` and `beta = 1 + softplus(b)` (at least 1, so the density is
    finite and unimodal), one pair per action component.

    The trajectory stores the Beta sample `x` in `(0, 1)` (kept `1e-6` from either end);
    the environment receives `low + (high - low) * x`."""

    def _shapes(self, outputs):
        a, b = _halves(outputs)
        return 1.0 + jax.nn.softplus(a), 1.0 + jax.nn.softplus(b)

    def noise(self, key: PRNGKey) -> PRNGKey:
        return key  # a Beta sample needs its key: it is drawn from two Gamma samples

    def sample(self, outputs: Float[Array, " outputs"], noise: PyTree[Array]) -> Array:
        alpha, beta = self._shapes(outputs)
        x = jax.random.beta(noise, alpha, beta)
        return jnp.clip(x, _BETA_MARGIN, 1.0 - _BETA_MARGIN)

    def mode(self, outputs: Float[Array, " outputs"]) -> Array:
        alpha, beta = self._shapes(outputs)
        x = (alpha - 1.0) / jnp.maximum(alpha + beta - 2.0, 1e-6)
        return jnp.clip(x, _BETA_MARGIN, 1.0 - _BETA_MARGIN)

    def log_prob_and_entropy(
        self, outputs: Float[Array, "*batch outputs"], action: Array
    ) -> tuple[Float[Array, "*batch"], Float[Array, "*batch"]]:
        alpha, beta = self._shapes(outputs)
        low, high = self._bounds(alpha)
        log_width = jnp.log(high - low)
        log_norm = jax.scipy.special.betaln(alpha, beta)
        log_density = (
            (alpha - 1.0) * jnp.log(action)
            + (beta - 1.0) * jnp.log1p(-action)
            - log_norm
            - log_width
        )
        digamma = jax.scipy.special.digamma
        entropy = (
            log_norm
            - (alpha - 1.0) * digamma(alpha)
            - (beta - 1.0) * digamma(beta)
            + (alpha + beta - 2.0) * digamma(alpha + beta)
            + log_width
        )
        return jnp.sum(log_density, axis=-1), jnp.sum(entropy, axis=-1)

    def env_action(self, action: Array) -> Array:
        low, high = self._bounds(action)
        return low + (high - low) * action


_CONTINUOUS = {"tanh_normal": TanhNormal, "normal": ClippedNormal, "beta": Beta}


def action_distribution(name: str, env: AbstractEnv) -> AbstractActionDistribution:
    """The distribution `name` over `env`'s actions.

    **Raises:** `ValueError` if `name` does not fit the environment's action space (a
    discrete distribution for continuous actions, or the reverse)."""
    space = env.action_space()
    if isinstance(space, BoxActions):
        if name not in _CONTINUOUS:
            raise ValueError(
                f"action_distribution {name!r} is for discrete actions, but the environment's "
                f"actions are continuous ({space}); use one of "
                f"{', '.join(map(repr, CONTINUOUS_DISTRIBUTIONS))}"
            )
        return _CONTINUOUS[name](low=space.low, high=space.high)
    if name not in DISCRETE_DISTRIBUTIONS:
        raise ValueError(
            f"action_distribution {name!r} is for continuous actions, but the environment has "
            f"{space.num_actions} discrete actions; use one of "
            f"{', '.join(map(repr, DISCRETE_DISTRIBUTIONS))}"
        )
    return Categorical(num_actions=space.num_actions)
