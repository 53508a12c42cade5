"""MuZero's value transform: the invertible scaling `h` of returns and rewards, and the
two-hot projection of a scalar onto a categorical support."""

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._validate import check_positive_int


#: The `eps` of `h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x` (Pohlen et al., 2018): the
#: linear term keeps `h` invertible with a Lipschitz-continuous inverse.
SCALING_EPSILON = 1e-3


def scale_value(x: Float[Array, "*shape"]) -> Float[Array, "*shape"]:
    """`h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x`: squashes large returns roughly to
    their square root, so that one categorical support covers returns of very different
    magnitudes.

    `sqrt(|x| + 1) - 1` is computed as `|x| / (sqrt(|x| + 1) + 1)`, which keeps float32's
    relative precision for small `|x|`.
    """
    magnitude = jnp.abs(x)
    return jnp.sign(x) * magnitude / (jnp.sqrt(magnitude + 1.0) + 1.0) + SCALING_EPSILON * x


def unscale_value(y: Float[Array, "*shape"]) -> Float[Array, "*shape"]:
    """The closed-form inverse of [`azx.muzero.scale_value`][],
    `sign(y) (r^2 - 1)` with `r = (sqrt(1 + 4 eps (|y| + 1 + eps)) - 1) / (2 eps)`.

    Computed as `sign(y) d (d + 2)` with `d = r - 1 = 2 |y| / (sqrt(1 + 4 eps (|y| + 1 +
    eps)) + 1 + 2 eps)`, the same value without the cancellation of `r^2 - 1`. In float32
    that subtraction is off by about `3e-5` near `y = 0`: a reward and a value that should
    both be 0 then give a `Q = r + gamma v` that differs from the value beside it, and
    the search's rescaling of Q to `[0, 1]` magnifies the difference into a preference.
    """
    eps = SCALING_EPSILON
    magnitude = jnp.abs(y)
    d = 2.0 * magnitude / (jnp.sqrt(1.0 + 4.0 * eps * (magnitude + 1.0 + eps)) + 1.0 + 2.0 * eps)
    return jnp.sign(y) * d * (d + 2.0)


def _check_support(support_size: object) -> None:
    check_positive_int("support_size", support_size)


def support(support_size: int) -> Float[Array, " bins"]:
    """The atoms of a categorical support: the integers `-support_size ... support_size`."""
    _check_support(support_size)
    return jnp.arange(-support_size, support_size + 1, dtype=jnp.float32)


def two_hot(x: Float[Array, "*shape"], support_size: int) -> Float[Array, "*shape bins"]:
    """`x` as probabilities on the integer atoms `-support_size ... support_size`: its mass
    split between the two atoms around it in proportion to closeness, so that the
    distribution's mean is `x` (after clipping `x` to the support's range)."""
    _check_support(support_size)
    x = jnp.clip(x, -support_size, support_size)
    low = jnp.floor(x)
    high_weight = x - low
    low_index = (low + support_size).astype(jnp.int32)
    # At the top atom `high_weight` is 0, so the clipped index receives nothing.
    high_index = jnp.minimum(low_index + 1, 2 * support_size)
    bins = 2 * support_size + 1
    low_part = jax.nn.one_hot(low_index, bins) * (1.0 - high_weight)[..., None]
    high_part = jax.nn.one_hot(high_index, bins) * high_weight[..., None]
    return low_part + high_part


def expected_value(
    probabilities: Float[Array, "*shape bins"], support_size: int
) -> Float[Array, "*shape"]:
    """The mean of a distribution on the integer atoms `-support_size ... support_size`:
    the inverse of [`azx.muzero.two_hot`][] inside the support's range.

    Each atom `i > 0` is paired with `-i` before the sum, so the mean is exactly odd: a
    distribution and its mirror image have means of opposite sign, and a symmetric one
    (a head of equal logits, say) has a mean of exactly 0, as it must for the search to
    see equal values as equal.
    """
    bins = 2 * support_size + 1
    if probabilities.shape[-1] != bins:
        raise ValueError(
            f"probabilities must have {bins} bins (support_size {support_size}), got "
            f"{probabilities.shape[-1]}"
        )
    above = probabilities[..., support_size + 1 :]
    below = jnp.flip(probabilities[..., :support_size], axis=-1)
    return (above - below) @ support(support_size)[support_size + 1 :]
