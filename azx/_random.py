"""Sampling that `jax.random` does slowly where azx needs it fast."""

import math

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._types import PRNGKey


#: Proposals that `gamma` draws at once for every sample. With fewer, more samples need a
#: second round: at `alpha = 0.3` (AlphaZero's Dirichlet noise) a proposal is rejected with
#: probability 0.033, so four all fail for about one sample in a million.
GAMMA_PROPOSALS = 4


def gamma(
    key: PRNGKey, alpha: float, shape: tuple[int, ...], proposals: int = GAMMA_PROPOSALS
) -> Float[Array, "..."]:
    """Samples of the Gamma(`alpha`, 1) distribution, for a fixed `alpha > 0`.

    Marsaglia and Tsang's method (2000): a proposal `d * (1 + c * x) ** 3` with `x` standard
    normal is accepted with a test on one uniform number; for `alpha < 1` a Gamma(`alpha +
    1`) sample is multiplied by `u ** (1 / alpha)`. Every sample draws `proposals` proposals
    at once and keeps the first accepted one; further rounds of proposals, drawn only while
    some sample has none accepted, keep the distribution exact.

    The distribution is that of `jax.random.gamma`, which runs this rejection loop one
    proposal per iteration until every sample in the batch has accepted, each iteration a
    handful of small kernels; this draws every sample in a few rounds of batched proposals
    (for AlphaZero's root noise, 256 rows of 7, about a third of `jax.random.gamma`'s time
    on a 2-core CPU; `benchmarks/notes.md` has the measurement).
    """
    if not alpha > 0:
        raise ValueError(f"alpha must be positive, got {alpha}")
    if proposals < 1:
        raise ValueError(f"proposals must be at least 1, got {proposals}")
    boosted = alpha < 1.0
    d = (alpha + 1.0 if boosted else alpha) - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    proposal_key, boost_key = jax.random.split(key)

    def propose(key):
        normal_key, uniform_key = jax.random.split(key)
        x = jax.random.normal(normal_key, (proposals, *shape))
        u = jax.random.uniform(uniform_key, (proposals, *shape))
        v = (1.0 + c * x) ** 3
        log_v = jnp.log(jnp.where(v > 0, v, 1.0))
        accept = (v > 0) & (jnp.log(u) < 0.5 * x * x + d - d * v + d * log_v)
        first = jnp.argmax(accept, axis=0)
        sample = jnp.take_along_axis(d * v, first[None], axis=0)[0]
        return sample, jnp.any(accept, axis=0)

    def another_round(carry):
        sample, done, round_ = carry
        new, accepted = propose(jax.random.fold_in(proposal_key, round_))
        return jnp.where(done, sample, new), done | accepted, round_ + 1

    sample, done = propose(jax.random.fold_in(proposal_key, 0))
    sample, _, _ = jax.lax.while_loop(
        lambda carry: ~jnp.all(carry[1]), another_round, (sample, done, jnp.int32(1))
    )
    if boosted:
        u = jax.random.uniform(boost_key, shape)
        sample = sample * jnp.exp(jnp.log(u) / alpha)
    return sample
