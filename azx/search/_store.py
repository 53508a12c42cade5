"""The state store: environment states packed into rows of `uint32` words.

A node's state is one row of words, so storing a node is one scatter and fetching a
parent's state one gather, whatever the state's pytree. During a search the rows are kept
slot-major (`slot_major`), and parents' states are read through staging buffers
(`parent_state`); both are choices for XLA:CPU that cost nothing elsewhere.
"""

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Int, UInt32

from .._types import EnvState
from ..envs import AbstractEnv


class _Leaf(NamedTuple):
    shape: tuple[int, ...]
    dtype: Any
    key_impl: Any  # the PRNG implementation of a typed key leaf, else None
    words: int  # 0 for a leaf that is not stored


class StateLayout(NamedTuple):
    """How an environment state packs into one row of `uint32` words: every stored leaf
    flattened and bit-cast, one- and two-byte types (booleans included) four or two to a
    word, and the leaves concatenated. A node's state is then one row, so storing a node
    and fetching a parent's state are one scatter and one gather, not one per leaf.

    Leaves that are not stored take no words and unpack as zeros."""

    treedef: Any
    leaves: tuple[_Leaf, ...]

    @property
    def words(self) -> int:
        return sum(leaf.words for leaf in self.leaves)


def state_layout(state: EnvState, stored: tuple[bool, ...] | None = None) -> StateLayout:
    """The layout of one (unbatched) environment state; `stored` says which leaves to keep
    (default: all)."""
    leaves, treedef = jax.tree.flatten(state)
    if stored is None:
        stored = (True,) * len(leaves)
    described = []
    for x, keep in zip(leaves, stored, strict=True):
        size = math.prod(x.shape)
        if not keep:
            described.append(_Leaf(x.shape, x.dtype, None, 0))
        elif jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
            impl = jax.random.key_impl(x)
            described.append(_Leaf(x.shape, x.dtype, impl, jax.random.key_data(x).size))
        else:
            itemsize = np.dtype(x.dtype).itemsize
            described.append(_Leaf(x.shape, x.dtype, None, -(-size * itemsize // 4)))
    return StateLayout(treedef, tuple(described))


def pack_state(layout: StateLayout, state: EnvState) -> UInt32[Array, "*rows words"]:
    """States whose leaves have leading dimensions `rows` as rows of words."""
    leaves = jax.tree.leaves(state)
    rows = leaves[0].shape[: leaves[0].ndim - len(layout.leaves[0].shape)]
    parts = [jnp.zeros(rows + (0,), jnp.uint32)]
    for leaf, x in zip(layout.leaves, leaves, strict=True):
        if leaf.words == 0:
            continue
        if leaf.key_impl is not None:
            x = jax.random.key_data(x)
        x = x.reshape(rows + (-1,))
        if x.dtype == jnp.bool_:
            x = x.astype(jnp.uint8)
        if x.dtype.itemsize < 4:
            # Bit casts that change the shape are plain copies for XLA:CPU; building the
            # words with shifts instead is arithmetic enough for XLA to split it across
            # threads, which costs more than it saves.
            per_word = 4 // x.dtype.itemsize
            x = jnp.pad(x, [(0, 0)] * len(rows) + [(0, -x.shape[-1] % per_word)])
            x = x.reshape(rows + (-1, per_word))
        x = jax.lax.bitcast_convert_type(x, jnp.uint32)
        parts.append(x.reshape(rows + (leaf.words,)))
    return jnp.concatenate(parts, axis=-1)


def unpack_state(layout: StateLayout, words: UInt32[Array, "*rows words"]) -> EnvState:
    """The inverse of `pack_state`."""
    return _unpack(layout, words.shape[:-1], lambda columns: words[..., columns])


def unpack_rows(
    layout: StateLayout, words: UInt32[Array, "nodes words"], rows: Int[Array, "*rows"]
) -> EnvState:
    """`unpack_state(layout, words[rows])`, each leaf gathered from its own words. A leaf's
    gather can then be fused into whatever reads the leaf, where one gather of whole rows
    shared by every leaf would be a kernel of its own."""

    def read(columns):
        if isinstance(columns, slice):
            return words[:, columns].at[rows].get(mode="promise_in_bounds")
        # One word per element read: a gather whose every element is used once fuses
        # into what reads it.
        columns = jnp.asarray(columns, rows.dtype).reshape((1,) * rows.ndim + (-1,))
        index = rows[..., None] * words.shape[1] + columns
        return words.reshape(-1).at[index].get(mode="promise_in_bounds")

    return _unpack(layout, rows.shape, read)


def _unpack(layout: StateLayout, rows: tuple[int, ...], read) -> EnvState:
    # `read(columns)`: the given words (a slice, or one word per element) of every row.
    leaves, start = [], 0
    for leaf in layout.leaves:
        if leaf.words == 0:
            leaves.append(jnp.zeros(rows + leaf.shape, leaf.dtype))
            continue
        size = math.prod(leaf.shape)
        first, start = start, start + leaf.words
        if leaf.dtype == jnp.bool_:
            # Each flag from its own byte with a shift, rather than a bit cast of the words
            # to bytes, which XLA:CPU runs as a copy of its own. `pack_state`'s bit cast
            # puts a word's first byte in its lowest bits (little-endian, as on every XLA
            # platform).
            element = np.arange(size)
            word = read(first + element // 4)
            shift = jnp.asarray(8 * (element % 4), jnp.uint32)
            flags = (word >> shift.reshape((1,) * len(rows) + (-1,))) & 0xFF
            leaves.append((flags != 0).reshape(rows + leaf.shape))
            continue
        x = read(slice(first, start))
        if leaf.key_impl is not None:
            data = x.reshape(rows + leaf.shape + (-1,))
            leaves.append(jax.random.wrap_key_data(data, impl=leaf.key_impl))
            continue
        if leaf.dtype.itemsize > 4:
            x = x.reshape(rows + (-1, leaf.dtype.itemsize // 4))
        x = jax.lax.bitcast_convert_type(x, leaf.dtype)
        leaves.append(x.reshape(rows + (-1,))[..., :size].reshape(rows + leaf.shape))
    return jax.tree.unflatten(layout.treedef, leaves)


def leaves_read_by_step(env: AbstractEnv, state: EnvState) -> tuple[bool, ...]:
    """Which leaves of `state` a search step from it can read: `env.step` and
    `env.current_player`. The others (for pgx games: the observation and the rewards, which
    `step` recomputes) need not be stored in the tree.

    Found by dead-code elimination on the traced step, once per environment and state
    shape; if that is not possible, every leaf counts as read.
    """
    leaves, treedef = jax.tree.flatten(state)
    specs = tuple(jax.ShapeDtypeStruct(x.shape, x.dtype) for x in leaves)
    try:
        return _leaves_read_by_step(env, treedef, specs)
    except TypeError:  # an environment that cannot be hashed (array fields): no cache
        return _leaves_read_by_step.__wrapped__(env, treedef, specs)


@functools.lru_cache(maxsize=32)
def _leaves_read_by_step(env: AbstractEnv, treedef: Any, specs: tuple) -> tuple[bool, ...]:
    def move(state, action, key):
        return env.step(state, action, key), env.current_player(state)

    try:
        # JAX's own dead-code elimination: it looks inside `cond` branches, which pgx games
        # use, where a plain walk over the equations would have to keep every operand.
        from jax._src.interpreters.partial_eval import dce_jaxpr

        state = jax.tree.unflatten(treedef, specs)
        closed = jax.make_jaxpr(move)(state, jnp.zeros((), jnp.int32), jax.random.key(0))
        _, used = dce_jaxpr(closed.jaxpr, [True] * len(closed.jaxpr.outvars))
    except Exception:  # a JAX without this internal: keep everything, which is always right
        return (True,) * len(specs)
    if len(used) != len(specs) + 2:  # state leaves, action, key
        return (True,) * len(specs)
    return tuple(bool(u) for u in used[: len(specs)])


def slot_major(words: UInt32[Array, "batch capacity words"]) -> UInt32[Array, "nodes words"]:
    """`Tree.state_words` as the search keeps them: one block of `batch` rows per slot, so
    that node `n` of batch row `b` is row `n * batch + b`.

    A simulation stores its new nodes in the same slot in most batch rows (each row's next
    free one), so in this order the rows it writes lie next to each other, which XLA:CPU
    scatters in about half the time it takes over rows `capacity` apart."""
    return jnp.swapaxes(words, 0, 1).reshape(-1, words.shape[-1])


def slot_major_row(slot: Int[Array, " batch"]) -> Int[Array, " batch"]:
    """The row of each batch row's node `slot` in `slot_major` words."""
    batch_size = slot.shape[0]
    return slot * batch_size + jnp.arange(batch_size, dtype=slot.dtype)


def batch_major(
    words: UInt32[Array, "nodes words"], batch_size: int
) -> UInt32[Array, "batch capacity words"]:
    """The inverse of `slot_major`."""
    return jnp.swapaxes(words.reshape(-1, batch_size, words.shape[-1]), 0, 1)


def store_state(
    words: UInt32[Array, "nodes words"], slot: Int[Array, " batch"], state_words: Array
) -> UInt32[Array, "nodes words"]:
    """Write each row's packed state into its `slot` of `slot_major` words (out of bounds:
    nothing is written)."""
    capacity = words.shape[0] // state_words.shape[0]
    row = jnp.where(slot < capacity, slot_major_row(slot), words.shape[0])
    return words.at[row].set(state_words, mode="drop")


#: States of at most this many words are gathered leaf by leaf (`parent_state`).
LEAF_GATHER_MAX_WORDS = 256


def staging_buffers(layout: StateLayout, batch_size: int) -> tuple[Any, Any]:
    """The buffers `parent_state` writes parents' states into: packed rows (None for states
    small enough to gather leaf by leaf) and one buffer per leaf. Each has one spare row, so
    that an update never covers a whole buffer (XLA would then drop the buffer and fuse the
    update into its readers)."""
    packed = jnp.zeros((batch_size + 1, layout.words), jnp.uint32)
    leaves = unpack_state(layout, packed)
    if layout.words <= LEAF_GATHER_MAX_WORDS:
        packed = None
    return packed, leaves


def parent_state(
    layout: StateLayout,
    words: UInt32[Array, "nodes words"],
    rows: Int[Array, " batch"],
    staging: tuple[Any, Any],
) -> tuple[tuple[Any, Any], EnvState]:
    """The states in rows `rows` of `slot_major` words, written into `staging` (a buffer
    of packed rows, or None, and one buffer per leaf, each a row longer than the batch),
    and read back from there.

    The state array is far larger than 512 KB, so XLA:CPU would run a plain gather from it
    on two threads, and waking the second one costs more than the gather (much more when
    another process holds the other core); fused into an in-place `dynamic_update_slice`,
    a gather runs on one thread. Read straight from one gather of whole rows, each use of a
    leaf (the environment step, the legal mask under the new node's prior, ...) would be a
    kernel that reads all of those rows, which XLA counts as heavy enough to split across
    threads; so the leaves are written into buffers of their own, from which their uses
    are cheap. Small states are gathered leaf by leaf straight into those (`unpack_rows`);
    larger ones (go's, for one) into the buffer of packed rows first, unpacked from there,
    where gathering leaf by leaf was measured slower.
    """
    packed, leaves = staging
    if packed is None:
        unpacked = unpack_rows(layout, words, rows)
    else:
        packed = jax.lax.dynamic_update_slice(
            packed, words.at[rows].get(mode="promise_in_bounds"), (0, 0)
        )
        unpacked = unpack_state(layout, packed[: rows.shape[0]])
    leaves = jax.tree.map(
        lambda buffer, x: jax.lax.dynamic_update_slice_in_dim(buffer, x, 0, axis=0),
        leaves,
        unpacked,
    )
    return (packed, leaves), jax.tree.map(lambda buffer: buffer[: rows.shape[0]], leaves)
