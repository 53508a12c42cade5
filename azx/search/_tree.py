"""The native search tree: fixed-size per-node arrays, and subtree compaction for reuse."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from .._types import EnvState
from ..envs import AbstractEnv


#: Child index of an edge that has no node yet.
UNVISITED = -1
#: Parent index of the root.
NO_PARENT = -1
#: The root always lives in slot 0: nodes are allocated in order and compaction keeps order.
ROOT_INDEX = 0


class Tree(eqx.Module):
    """A batch of search trees stored as fixed-size arrays, one slot per node.

    Slots `[0, num_nodes)` hold the tree; the root is slot 0 and every node's parent has a
    smaller index than the node (allocation order, preserved by compaction). Slots from
    `num_nodes` on hold stale data that is never read. Statistics are per node; the
    statistics of edge `(n, a)` are those of node `children[n, a]`.

    All values are for the player to move at the node, in the sign convention of
    [`azx.search.Transition`][]: `Q(n, a) = reward[c] + discount[c] * value[c]` for the
    child `c = children[n, a]`.
    """

    visits: Int[Array, "batch capacity"]
    """Visit count of each node (its own evaluation counts as one)."""
    value: Float[Array, "batch capacity"]
    """Mean of the values backed up through each node."""
    raw_value: Float[Array, "batch capacity"]
    """The network's value of each node (zero at terminal states)."""
    prior_logits: Float[Array, "batch capacity num_actions"]
    """Prior logits at each node, `ILLEGAL_LOGIT` on illegal actions."""
    legal_action_mask: Bool[Array, "batch capacity num_actions"]
    reward: Float[Array, "batch capacity"]
    """Reward for the parent's mover on the edge into each node."""
    discount: Float[Array, "batch capacity"]
    """Discount on the edge into each node (negative when the turn passes)."""
    terminal: Bool[Array, "batch capacity"]
    parent: Int[Array, "batch capacity"]
    """Parent slot, `NO_PARENT` at the root."""
    action_from_parent: Int[Array, "batch capacity"]
    children: Int[Array, "batch capacity num_actions"]
    """Child slot of each edge, `UNVISITED` where the edge has no node."""
    edge_visits: Float[Array, "batch capacity num_actions"]
    """Visits of each edge, kept in its parent's row (0 where the edge has no node), so
    that selection reads one contiguous row instead of gathering every child."""
    edge_q: Float[Array, "batch capacity num_actions"]
    """Q of each edge, `reward + discount * value` of the child (0 where no node)."""
    selection_prior: Float[Array, "batch capacity num_actions"]
    """What selection uses as the prior, computed once when the node is stored:
    probabilities for PUCT, logits for Gumbel; `-inf` where illegal."""
    state: EnvState
    """Environment state of each node, leaves shaped `[batch, capacity, ...]`."""
    num_nodes: Int[Array, " batch"]
    """Slots in use; 0 means an empty tree (the next search starts afresh)."""

    @property
    def capacity(self) -> int:
        return self.visits.shape[1]

    @property
    def batch_size(self) -> int:
        return self.visits.shape[0]

    def child_visits(self, node: Int[Array, " batch"]) -> Int[Array, "batch num_actions"]:
        """Visit count of each edge out of `node` (0 where the edge has no node)."""
        batch = jnp.arange(self.batch_size)
        child = self.children[batch, node]
        return jnp.where(child != UNVISITED, self.visits[batch[:, None], jnp.maximum(child, 0)], 0)

    def root_child_visits(self) -> Int[Array, "batch num_actions"]:
        """Visit count of each action at the root: the PUCT policy target, unnormalised."""
        return self.child_visits(jnp.full(self.batch_size, ROOT_INDEX, jnp.int32))


def empty_tree(env: AbstractEnv, batch_size: int, capacity: int) -> Tree:
    """An empty batch of trees; its environment states are copies of a fresh episode."""
    shape = (batch_size, capacity)
    actions = (batch_size, capacity, env.num_actions)
    # The states only fix the pytree structure and shapes; they are overwritten before use.
    one_state = env.init(jax.random.key(0))
    state = jax.tree.map(lambda x: jnp.broadcast_to(x, shape + x.shape), one_state)
    return Tree(
        visits=jnp.zeros(shape, jnp.int32),
        value=jnp.zeros(shape, jnp.float32),
        raw_value=jnp.zeros(shape, jnp.float32),
        prior_logits=jnp.zeros(actions, jnp.float32),
        legal_action_mask=jnp.zeros(actions, jnp.bool_),
        reward=jnp.zeros(shape, jnp.float32),
        discount=jnp.zeros(shape, jnp.float32),
        terminal=jnp.zeros(shape, jnp.bool_),
        parent=jnp.full(shape, NO_PARENT, jnp.int32),
        action_from_parent=jnp.full(shape, NO_PARENT, jnp.int32),
        children=jnp.full(actions, UNVISITED, jnp.int32),
        edge_visits=jnp.zeros(actions, jnp.float32),
        edge_q=jnp.zeros(actions, jnp.float32),
        selection_prior=jnp.zeros(actions, jnp.float32),
        state=state,
        num_nodes=jnp.zeros(batch_size, jnp.int32),
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
    return Tree(
        visits=jnp.where(used, take(tree.visits), 0),
        value=take(tree.value),
        raw_value=take(tree.raw_value),
        prior_logits=take(tree.prior_logits),
        legal_action_mask=take(tree.legal_action_mask),
        reward=take(tree.reward),
        discount=take(tree.discount),
        terminal=take(tree.terminal),
        parent=jnp.where(used, parent, NO_PARENT),
        action_from_parent=jnp.where(slots == ROOT_INDEX, NO_PARENT, take(tree.action_from_parent)),
        children=jnp.where(used[:, :, None], children, UNVISITED),
        edge_visits=take(tree.edge_visits),
        edge_q=take(tree.edge_q),
        selection_prior=take(tree.selection_prior),
        state=jax.tree.map(take, tree.state),
        num_nodes=num_kept,
    )


def keep_subtree(tree: Tree, action: Int[Array, " batch"], done: Bool[Array, " batch"]) -> Tree:
    """The tree under `children[root, action]`, compacted; empty where `done` or unvisited."""
    batch = jnp.arange(tree.batch_size)
    new_root = tree.children[batch, ROOT_INDEX, action]
    new_root = jnp.where(done | (tree.num_nodes == 0), UNVISITED, new_root)
    return compact(tree, subtree_mask(tree, new_root))
