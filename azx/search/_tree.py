"""The native search tree: fixed-size per-node arrays, and subtree compaction for reuse."""

import functools
import math
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, UInt32

from .._types import EnvState
from ..envs import AbstractEnv


#: Child index of an edge that has no node yet.
UNVISITED = -1
#: Parent index of the root.
NO_PARENT = -1
#: The root always lives in slot 0: nodes are allocated in order and compaction keeps order.
ROOT_INDEX = 0

# Columns of `Tree.node_stats`: the scalars of a node that the descent and the backup read,
# packed so that one gather fetches them all.
VALUE, VISITS, RAW_VALUE, REWARD, DISCOUNT = range(5)
NUM_NODE_STATS = 5


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


class Tree(eqx.Module):
    """A batch of search trees stored as fixed-size arrays, one slot per node.

    Slots `[0, num_nodes)` hold the tree; the root is slot 0 and every node's parent has a
    smaller index than the node (allocation order, preserved by compaction). Slots from
    `num_nodes` on hold stale data that is never read. Statistics are per node; the
    statistics of edge `(n, a)` are those of node `children[n, a]`, and are also kept in
    `n`'s row (`edge_visits`, `edge_q`) so that selection reads contiguous rows.

    All values are for the player to move at the node, in the sign convention of
    [`azx.search.Transition`][]: `Q(n, a) = reward[c] + discount[c] * value[c]` for the
    child `c = children[n, a]`.
    """

    node_stats: Float[Array, "batch capacity 5"]
    """Per node: mean backed-up value, visit count, the network's value (zero at terminal
    states), and the reward and discount of the edge into the node; read through the
    properties `value`, `visits`, `raw_value`, `reward`, `discount` and `terminal`."""
    parent: Int[Array, "batch capacity"]
    """Parent slot, `NO_PARENT` at the root."""
    action_from_parent: Int[Array, "batch capacity"]
    children: Int[Array, "batch capacity num_actions"]
    """Child slot of each edge, `UNVISITED` where the edge has no node."""
    edge_visits: Float[Array, "batch capacity num_actions"]
    """Visits of each edge, kept in its parent's row (0 where the edge has no node)."""
    edge_q: Float[Array, "batch capacity num_actions"]
    """Q of each edge, `reward + discount * value` of the child (0 where no node)."""
    selection_prior: Float[Array, "batch capacity num_actions"]
    """The prior's probabilities, computed once when the node is stored; `-inf` where
    illegal."""
    state_words: UInt32[Array, "batch capacity words"]
    """Environment state of each node, packed by `state_layout` (read through `state`).
    Only the leaves that a step from the node reads are stored (`leaves_read_by_step`)."""
    num_nodes: Int[Array, " batch"]
    """Slots in use; 0 means an empty tree (the next search starts afresh)."""
    state_layout: StateLayout = eqx.field(static=True)

    @property
    def state(self) -> EnvState:
        """Environment state of each node, leaves shaped `[batch, capacity, ...]`. Leaves
        that the environment's `step` never reads are not stored and read as zeros (for pgx
        games: `observation` and `rewards`)."""
        return unpack_state(self.state_layout, self.state_words)

    @property
    def capacity(self) -> int:
        return self.node_stats.shape[1]

    @property
    def batch_size(self) -> int:
        return self.node_stats.shape[0]

    @property
    def value(self) -> Float[Array, "batch capacity"]:
        """Mean of the values backed up through each node."""
        return self.node_stats[..., VALUE]

    @property
    def visits(self) -> Int[Array, "batch capacity"]:
        """Visit count of each node (its own evaluation counts as one)."""
        return self.node_stats[..., VISITS].astype(jnp.int32)

    @property
    def raw_value(self) -> Float[Array, "batch capacity"]:
        """The network's value of each node (zero at terminal states)."""
        return self.node_stats[..., RAW_VALUE]

    @property
    def reward(self) -> Float[Array, "batch capacity"]:
        """Reward for the parent's mover on the edge into each node."""
        return self.node_stats[..., REWARD]

    @property
    def discount(self) -> Float[Array, "batch capacity"]:
        """Discount on the edge into each node (negative when the turn passes, zero exactly
        at terminal states; at the root, 0 if terminal and 1 otherwise)."""
        return self.node_stats[..., DISCOUNT]

    @property
    def terminal(self) -> Bool[Array, "batch capacity"]:
        # The discount into a node is zero exactly when the node is terminal (gamma > 0).
        return self.node_stats[..., DISCOUNT] == 0

    @property
    def legal_action_mask(self) -> Bool[Array, "batch capacity num_actions"]:
        return self.selection_prior > -jnp.inf

    def child_visits(self, node: Int[Array, " batch"]) -> Int[Array, "batch num_actions"]:
        """Visit count of each edge out of `node` (0 where the edge has no node)."""
        return self.edge_visits[jnp.arange(self.batch_size), node].astype(jnp.int32)

    def root_child_visits(self) -> Int[Array, "batch num_actions"]:
        """Visit count of each action at the root: the PUCT policy target, unnormalised."""
        return self.edge_visits[:, ROOT_INDEX].astype(jnp.int32)


def empty_tree(env: AbstractEnv, batch_size: int, capacity: int) -> Tree:
    """An empty batch of trees (`num_nodes` 0; every slot is written before it is read)."""
    shape = (batch_size, capacity)
    actions = (batch_size, capacity, env.num_actions)
    # The states only fix the pytree structure and shapes: a slot's state is written when
    # the slot is stored, before anything reads it, so the words start as zeros.
    one_state = env.init(jax.random.key(0))
    layout = state_layout(one_state, leaves_read_by_step(env, one_state))
    state_words = jnp.zeros(shape + (layout.words,), jnp.uint32)
    return Tree(
        node_stats=jnp.zeros(shape + (NUM_NODE_STATS,), jnp.float32),
        parent=jnp.full(shape, NO_PARENT, jnp.int32),
        action_from_parent=jnp.full(shape, NO_PARENT, jnp.int32),
        children=jnp.full(actions, UNVISITED, jnp.int32),
        edge_visits=jnp.zeros(actions, jnp.float32),
        edge_q=jnp.zeros(actions, jnp.float32),
        selection_prior=jnp.zeros(actions, jnp.float32),
        state_words=state_words,
        num_nodes=jnp.zeros(batch_size, jnp.int32),
        state_layout=layout,
    )


def subtree_mask(tree: Tree, new_root: Int[Array, " batch"]) -> Bool[Array, "batch capacity"]:
    """Which live slots lie in the subtree under `new_root` (itself included).

    Pointer jumping: after round k every node knows its 2^k-th ancestor and whether
    `new_root` is among its first 2^k ancestors, so ceil(log2(capacity)) rounds of
    gathers cover any depth: O(capacity log capacity), no pairwise comparison.
    """
    capacity = tree.capacity
    slots = jnp.arange(capacity, dtype=jnp.int32)[None, :]
    # The root points at itself, so jumping past it stays put.
    ancestor = jnp.where(tree.parent == NO_PARENT, ROOT_INDEX, tree.parent)
    hit = slots == new_root[:, None]
    for _ in range(max(1, (capacity - 1).bit_length())):
        hit = hit | jnp.take_along_axis(hit, ancestor, axis=1)
        ancestor = jnp.take_along_axis(ancestor, ancestor, axis=1)
    live = slots < tree.num_nodes[:, None]
    return hit & live & (new_root[:, None] != UNVISITED)


def compact(tree: Tree, keep: Bool[Array, "batch capacity"]) -> Tree:
    """Move the kept slots to the front, in order, and renumber every index.

    `keep` must be a subtree (closed under taking children) whose lowest slot becomes the
    root. A cumulative sum gives each kept slot its new index; one scatter of slot numbers
    gives each new slot its source, and every array is then gathered once.
    """
    capacity = tree.capacity
    batch = jnp.arange(tree.batch_size)[:, None]
    slots = jnp.arange(capacity, dtype=jnp.int32)[None, :]
    new_index = jnp.cumsum(keep.astype(jnp.int32), axis=1) - 1
    new_index = jnp.where(keep, new_index, capacity)  # out of bounds: dropped below
    num_kept = jnp.sum(keep.astype(jnp.int32), axis=1)
    source = (
        jnp.zeros_like(new_index)
        .at[batch, new_index]
        .set(jnp.broadcast_to(slots, new_index.shape), mode="drop")
    )
    used = slots < num_kept[:, None]

    def take(x):
        return x[batch, source]

    def renumber(index):
        # Old slot -> new slot; sentinels (negative) stay sentinels.
        renumbered = jnp.take_along_axis(
            new_index, jnp.maximum(index, 0).reshape(index.shape[0], -1), axis=1
        ).reshape(index.shape)
        return jnp.where(index < 0, index, renumbered)

    parent = take(tree.parent)
    parent = jnp.where(slots == ROOT_INDEX, NO_PARENT, renumber(parent))
    children = renumber(take(tree.children))
    node_stats = take(tree.node_stats)
    node_stats = node_stats.at[..., VISITS].set(jnp.where(used, node_stats[..., VISITS], 0.0))
    return Tree(
        node_stats=node_stats,
        parent=jnp.where(used, parent, NO_PARENT),
        action_from_parent=jnp.where(slots == ROOT_INDEX, NO_PARENT, take(tree.action_from_parent)),
        children=jnp.where(used[:, :, None], children, UNVISITED),
        edge_visits=take(tree.edge_visits),
        edge_q=take(tree.edge_q),
        selection_prior=take(tree.selection_prior),
        state_words=take(tree.state_words),
        num_nodes=num_kept,
        state_layout=tree.state_layout,
    )


def keep_subtree(tree: Tree, action: Int[Array, " batch"], done: Bool[Array, " batch"]) -> Tree:
    """The tree under `children[root, action]`, compacted; empty where `done` or unvisited."""
    batch = jnp.arange(tree.batch_size)
    new_root = tree.children[batch, ROOT_INDEX, action]
    new_root = jnp.where(done | (tree.num_nodes == 0), UNVISITED, new_root)
    return compact(tree, subtree_mask(tree, new_root))
