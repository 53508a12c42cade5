"""The native search tree: fixed-size per-node arrays, how a node is written, the view of a
node that selection reads, and subtree compaction for reuse."""

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, UInt32

from .._types import EnvState
from ..envs import AbstractEnv
from ._model import Transition
from ._store import StateLayout, leaves_read_by_step, state_layout, unpack_state


#: Child index of an edge that has no node yet.
UNVISITED = -1
#: Parent index of the root.
NO_PARENT = -1
#: The root always lives in slot 0: nodes are allocated in order and compaction keeps order.
ROOT_INDEX = 0

# Columns of `Tree.node_stats`: the scalars of a node that the descent and the backup read,
# packed so that one gather fetches them all. Only the tree's own code and the kernels
# (`azx.search._lockstep`, `azx.search._rows`) read columns; everything else reads the named
# properties and fields below.
VALUE, VISITS, RAW_VALUE, REWARD, DISCOUNT = range(5)
NUM_NODE_STATS = 5

#: The range a simulation scales Q by ([`azx.search.AbstractQTransform`][]`.range`): each
#: tree's low and high Q, or None to scale by each node's own value and its children's Q.
QRange = tuple[Float[Array, " batch"], Float[Array, " batch"]] | None


class NodeStats(NamedTuple):
    """The statistics of nodes, by name (one node per batch row, or every slot)."""

    value: Float[Array, " batch *slots"]
    """Mean of the values backed up through the node."""
    visits: Float[Array, " batch *slots"]
    """Visit count (its own evaluation counts as one)."""
    raw_value: Float[Array, " batch *slots"]
    """The network's value (zero at terminal states)."""
    reward: Float[Array, " batch *slots"]
    """Reward for the parent's mover on the edge into the node."""
    discount: Float[Array, " batch *slots"]
    """Discount on the edge into the node (zero exactly at terminal states)."""


class Node(eqx.Module):
    """What a selection rule reads at one node per batch row: the node's own statistics
    and its edges' (one row per batch row), and the Q range of the simulation."""

    value: Float[Array, " batch"]
    """The node's mean backed-up value."""
    visits: Float[Array, " batch"]
    """The node's visit count."""
    raw_value: Float[Array, " batch"]
    """The network's value of the node."""
    child_visits: Float[Array, "batch num_actions"]
    """Visits of each edge (0 where the edge has no node)."""
    child_q: Float[Array, "batch num_actions"]
    """Q of each edge, `reward + discount * value` of the child (0 where no node)."""
    prior: Float[Array, "batch num_actions"]
    """The prior's probabilities; `-inf` where illegal."""
    tree_low: Float[Array, " batch"] | None
    """Low end of the Q range (`AbstractQTransform.range`), or None."""
    tree_high: Float[Array, " batch"] | None
    chance: Bool[Array, " batch"] | None = None
    """Which nodes are chance nodes (in a tree with chance nodes), or None."""

    @property
    def legal_action_mask(self) -> Bool[Array, "batch num_actions"]:
        return self.prior > -jnp.inf

    @classmethod
    def from_rows(cls, stats, child_visits, child_q, prior, q_range: QRange, chance=None) -> "Node":
        """A node from its row of `Tree.node_stats` and its edge rows."""
        return cls(
            value=stats[:, VALUE],
            visits=stats[:, VISITS],
            raw_value=stats[:, RAW_VALUE],
            child_visits=child_visits,
            child_q=child_q,
            prior=prior,
            tree_low=None if q_range is None else q_range[0],
            tree_high=None if q_range is None else q_range[1],
            chance=chance,
        )


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
    chance: Bool[Array, "batch capacity"] | None = None
    """Which nodes are chance nodes, in a tree for a model with chance
    ([`azx.search.ChanceModel`][]); None otherwise."""
    num_outcomes: int | None = eqx.field(static=True, default=None)
    """Chance outcomes per chance node (the first edges of its rows), in a tree with
    chance nodes; None otherwise."""

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

    def stats_at(self, node: int) -> NodeStats:
        """The statistics of slot `node` of every batch row."""
        stats = self.node_stats[:, node]
        return NodeStats(*(stats[:, column] for column in range(NUM_NODE_STATS)))

    def stats_of(self, rows: Int[Array, " batch"]) -> NodeStats:
        """The statistics of the nodes in flat rows `rows` (`b * capacity + slot`), with
        one gather of their rows."""
        stats = take(flat(self.node_stats), rows)
        return NodeStats(*(stats[:, column] for column in range(NUM_NODE_STATS)))

    @property
    def stats(self) -> NodeStats:
        """The statistics of every node, `[batch, capacity]` each."""
        return NodeStats(*(self.node_stats[..., column] for column in range(NUM_NODE_STATS)))

    def with_backed_up(self, value, visits, edge_visits, edge_q) -> "Tree":
        """The tree with new mean values and visit counts (`[batch, capacity]`) and edge
        statistics (`[batch, capacity, num_actions]`): what a backup writes."""
        node_stats = self.node_stats.at[..., VALUE].set(value).at[..., VISITS].set(visits)
        return eqx.tree_at(
            lambda t: (t.node_stats, t.edge_visits, t.edge_q),
            self,
            (node_stats, edge_visits, edge_q),
        )

    def node(self, slot: int, q_range: QRange = None) -> Node:
        """Slot `slot` of every batch row as selection sees it; `q_range`: the Q
        transform's range, or None."""
        return Node.from_rows(
            self.node_stats[:, slot],
            self.edge_visits[:, slot],
            self.edge_q[:, slot],
            self.selection_prior[:, slot],
            q_range,
        )

    def child_visits(self, node: Int[Array, " batch"]) -> Int[Array, "batch num_actions"]:
        """Visit count of each edge out of `node` (0 where the edge has no node)."""
        return self.edge_visits[jnp.arange(self.batch_size), node].astype(jnp.int32)

    def root_child_visits(self) -> Int[Array, "batch num_actions"]:
        """Visit count of each action at the root: the PUCT policy target, unnormalised."""
        return self.edge_visits[:, ROOT_INDEX].astype(jnp.int32)


def empty_tree(
    env: AbstractEnv, batch_size: int, capacity: int, store_all_state_leaves: bool = False
) -> Tree:
    """An empty batch of trees (`num_nodes` 0; every slot is written before it is read).
    The nodes' states keep only the leaves a step reads, or every leaf with
    `store_all_state_leaves`."""
    # The states only fix the pytree structure and shapes: a slot's state is written when
    # the slot is stored, before anything reads it, so the words start as zeros.
    one_state = env.init(jax.random.key(0))
    stored = None if store_all_state_leaves else leaves_read_by_step(env, one_state)
    return tree_for(one_state, stored, env.num_actions, batch_size, capacity)


def tree_for(
    one_state: EnvState,
    stored: tuple[bool, ...] | None,
    width: int,
    batch_size: int,
    capacity: int,
    num_outcomes: int | None = None,
) -> Tree:
    """An empty batch of trees whose nodes hold states like `one_state` (the leaves
    `stored` says, all with None) and `width` edges each; with `num_outcomes`, with chance
    nodes of that many outcomes."""
    shape = (batch_size, capacity)
    actions = (batch_size, capacity, width)
    layout = state_layout(one_state, stored)
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
        chance=None if num_outcomes is None else jnp.zeros(shape, bool),
        num_outcomes=num_outcomes,
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
        chance=None if tree.chance is None else take(tree.chance),
        num_outcomes=tree.num_outcomes,
    )


def keep_subtree(tree: Tree, action: Int[Array, " batch"], done: Bool[Array, " batch"]) -> Tree:
    """The tree under `children[root, action]`, compacted; empty where `done` or unvisited."""
    batch = jnp.arange(tree.batch_size)
    new_root = tree.children[batch, ROOT_INDEX, action]
    new_root = jnp.where(done | (tree.num_nodes == 0), UNVISITED, new_root)
    return compact(tree, subtree_mask(tree, new_root))


def tree_q_range(tree: Tree) -> tuple[Float[Array, " batch"], Float[Array, " batch"]]:
    """Min and max Q over every visited edge of each tree (MuZero's normalisation)."""
    slots = jnp.arange(tree.capacity)[None, :]
    stats = tree.node_stats
    edge = (slots != ROOT_INDEX) & (slots < tree.num_nodes[:, None]) & (stats[..., VISITS] > 0)
    q = stats[..., REWARD] + stats[..., DISCOUNT] * stats[..., VALUE]
    low = jnp.min(jnp.where(edge, q, jnp.inf), axis=1)
    high = jnp.max(jnp.where(edge, q, -jnp.inf), axis=1)
    return low, high


def node_stats_rows(*, value, visits, raw_value, reward, discount) -> Float[Array, "batch 5"]:
    """One row of `Tree.node_stats` per batch row, columns in their declared order."""
    columns = {VALUE: value, VISITS: visits, RAW_VALUE: raw_value, REWARD: reward}
    columns[DISCOUNT] = discount
    return jnp.stack([columns[c] for c in range(NUM_NODE_STATS)], axis=-1)


def flat(x: Array) -> Array:
    """`[batch, capacity, ...]` as `[batch * capacity, ...]`: a row index `b * capacity + n`
    is the cheapest gather on XLA:CPU (one index per row, contiguous slices)."""
    return x.reshape((x.shape[0] * x.shape[1],) + x.shape[2:])


def take(x: Array, row: Int[Array, "*rows"]) -> Array:
    """`x[row]` for rows known to be in bounds, so XLA adds no clamping."""
    return x.at[row].get(mode="promise_in_bounds")


def _put_rows(x: Array, slot: Int[Array, " batch"], value: Array) -> Array:
    """`x[b, slot[b]] = value[b]`; a slot out of bounds writes nothing."""
    batch_size, capacity = x.shape[:2]
    index = jnp.where(
        slot < capacity,
        jnp.arange(batch_size, dtype=jnp.int32) * capacity + slot,
        batch_size * capacity,
    )
    return flat(x).at[index].set(value, mode="drop").reshape(x.shape)


def store_node(
    tree: Tree,
    slot: Int[Array, " batch"],
    parent: Int[Array, " batch"],
    action: Int[Array, " batch"],
    step: Transition,
    selection_prior: Float[Array, "batch num_actions"],
) -> Tree:
    """Write a new node into `slot` (out of bounds: nothing is written) and link it from
    its parent: one scatter per array. Its rows of `children`, `edge_visits` and `edge_q`
    were cleared when the search started (`azx.search._simulate.start`); its state goes
    into the search's own buffer (`azx.search._store.store_state`)."""
    batch_size, capacity, num_actions = tree.children.shape
    evaluation = step.evaluation

    def put(x, v):
        return _put_rows(x, slot, v)

    zero = jnp.zeros_like(step.reward)
    stats = node_stats_rows(
        value=zero,
        visits=zero,
        raw_value=evaluation.value,
        reward=step.reward,
        discount=step.discount,
    )
    link = (jnp.arange(batch_size, dtype=jnp.int32) * capacity + parent) * num_actions + action
    link = jnp.where(slot < capacity, link, tree.children.size)
    children = tree.children.reshape(-1).at[link].set(slot, mode="drop")
    tree = eqx.tree_at(
        lambda t: (
            t.node_stats,
            t.parent,
            t.action_from_parent,
            t.children,
            t.selection_prior,
        ),
        tree,
        (
            put(tree.node_stats, stats),
            put(tree.parent, parent),
            put(tree.action_from_parent, action),
            children.reshape(tree.children.shape),
            put(tree.selection_prior, selection_prior),
        ),
    )
    if tree.chance is None:
        return tree
    return eqx.tree_at(lambda t: t.chance, tree, put(tree.chance, step.chance))


def with_statistics(tree: Tree, node_stats, edge_visits, edge_q) -> Tree:
    """`tree` with new statistics, given flat (as the kernels work on them)."""
    return eqx.tree_at(
        lambda t: (t.node_stats, t.edge_visits, t.edge_q),
        tree,
        (
            node_stats.reshape(tree.node_stats.shape),
            edge_visits.reshape(tree.edge_visits.shape),
            edge_q.reshape(tree.edge_q.shape),
        ),
    )
