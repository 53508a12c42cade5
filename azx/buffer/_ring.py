"""Rings of self-play steps, one per game row: how both replays (AlphaZero's
[`azx.buffer.ReplayBuffer`][] and MuZero's [`azx.muzero.SegmentReplay`][]) store steps
and draw from them."""

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Int, PyTree

from .._types import PRNGKey


def empty_rings(example: PyTree[Array], rows: int, slots: int) -> PyTree[Array]:
    """Zeroed rings for steps shaped like `example` (ONE step): every leaf
    `[rows, slots, ...]`, of the example's dtype."""
    return jax.tree.map(
        lambda leaf: jnp.zeros((rows, slots) + jnp.shape(leaf), jnp.result_type(leaf)), example
    )


def write_rings(
    rings: PyTree[Array], position: Int[Array, " rows"], step: PyTree[Array]
) -> PyTree[Array]:
    """`rings` with each row's slot `position` overwritten by that row's `step` (leading
    axis: the rows)."""
    rows = jnp.arange(position.shape[0])
    return jax.tree.map(lambda ring, leaf: ring.at[rows, position].set(leaf), rings, step)


def sample_valid(
    valid: Bool[Array, " size"], *, key: PRNGKey, batch_size: int
) -> Int[Array, " batch_size"]:
    """`batch_size` indices drawn uniformly, with replacement, among those where `valid`
    holds; with none valid, the last index (filler the caller masks out).

    Inverse-CDF sampling: the i-th valid index is the first whose running count of valid
    entries exceeds i. O(size + batch log size), where a categorical over `valid` would
    materialise a `[batch_size, size]` array of Gumbel noise.
    """
    valid_before = jnp.cumsum(valid.astype(jnp.int32))
    choice = jax.random.randint(key, (batch_size,), 0, jnp.maximum(valid_before[-1], 1))
    index = jnp.searchsorted(valid_before, choice, side="right")
    # With nothing valid the search runs off the end; clamp to a real (filler) index.
    return jnp.minimum(index, valid.shape[0] - 1).astype(jnp.int32)
