"""The simulation loop of the native search: descend, expand, back up.

One simulation, for the whole batch at once:

1. descend: from the root, select an edge at each node until an edge without a node, a
   terminal node or the depth limit (`azx.search._kernels.descend`); the loop carries each
   row's current node and the path taken, never the tree;
2. expand: one batched environment step and network call from the leaf's parent, the new
   node written into the next free slot (`azx.search._tree.store_node`) and its state
   into the state store (`azx.search._store.store_state`);
3. back up: the returns along the path, from the leaf upwards, added to each node's mean
   value and visit count (`azx.search._kernels.backup`).

`simulate` runs `num_simulations` of them in one `fori_loop`.
"""

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from .._types import EnvState, PRNGKeys
from ..envs import AbstractEnv
from . import _kernels
from ._model import Evaluation, PolicyValueNet, Transition, transition
from ._select import Select, root_node, tree_q_range
from ._store import (
    batch_major,
    pack_state,
    parent_state,
    slot_major,
    slot_major_row,
    staging_buffers,
    store_state,
)
from ._tree import (
    DISCOUNT,
    RAW_VALUE,
    REWARD,
    ROOT_INDEX,
    UNVISITED,
    VALUE,
    VISITS,
    Tree,
    flat,
    node_stats_rows,
    store_node,
    take,
)


def start(
    tree: Tree,
    evaluation: Evaluation,
    root_prior: Float[Array, "batch num_actions"],
    reuse_tree: bool,
) -> Tree:
    """Put the roots' statistics and prior into slot 0, keeping reused statistics where
    present (the roots' states go in with the others in `simulate`)."""
    fresh = tree.num_nodes == 0
    if not reuse_tree:
        fresh = jnp.ones_like(fresh)
    old = tree.node_stats[:, ROOT_INDEX]
    stats = node_stats_rows(
        jnp.where(fresh, evaluation.value, old[:, VALUE]),
        jnp.where(fresh, 1.0, old[:, VISITS]),
        evaluation.value,
        old[:, REWARD],
        jnp.where(evaluation.terminal, 0.0, 1.0),  # the root's discount marks it terminal
    )

    def set_root(x, v):
        return x.at[:, ROOT_INDEX].set(v)

    # Every edge row but those of a reused tree's nodes is cleared here, once per search,
    # so that storing a node needs no scatter into these arrays.
    kept = (
        jnp.arange(tree.capacity)[None, :, None]
        < jnp.where(fresh, 0, tree.num_nodes)[:, None, None]
    )

    def keep_or(x, v):
        return jnp.where(kept, x, v)

    return eqx.tree_at(
        lambda t: (
            t.node_stats,
            t.children,
            t.edge_visits,
            t.edge_q,
            t.selection_prior,
            t.num_nodes,
        ),
        tree,
        (
            set_root(tree.node_stats, stats),
            keep_or(tree.children, UNVISITED),
            keep_or(tree.edge_visits, 0.0),
            keep_or(tree.edge_q, 0.0),
            set_root(tree.selection_prior, root_prior),
            jnp.where(fresh, 1, tree.num_nodes),
        ),
    )


#: A root selection rule (Gumbel's sequential halving): from the tree, the simulation's
#: index, each root action's visits in this search so far and the tree's Q range (or None),
#: each row's action at the root.
RootSelect = Callable[
    [Tree, Int[Array, ""], Int[Array, "batch num_actions"], Any], Int[Array, " batch"]
]


def simulate(
    net: PolicyValueNet,
    env: AbstractEnv,
    tree: Tree,
    env_state: EnvState,
    key: PRNGKeys,
    *,
    num_simulations: int,
    max_depth: int | None,
    gamma: float,
    reuse_tree: bool,
    q_normalisation: str,
    kernels: _kernels.Kernels,
    root_select: RootSelect | None,
    interior_select: Select,
    rows_finish: bool,
    selection_prior: Callable[[Evaluation], Float[Array, "batch num_actions"]],
) -> tuple[Tree, Int[Array, "batch num_actions"]]:
    """Run the simulations on a tree `start` prepared. Returns the tree and each root
    action's visits in this search.

    Without `root_select` the root is selected like every other node, by `interior_select`,
    inside the descent. `rows_finish`: see `azx.search._kernels.descend`.
    """
    batch_size, capacity, num_actions = tree.children.shape
    if batch_size * capacity * num_actions >= 2**31:
        raise ValueError(
            f"batch_size * capacity * num_actions must be below 2**31 (edges are int32 "
            f"indices), got {batch_size} * {capacity} * {num_actions}"
        )
    max_depth = min(max_depth or capacity - 1, capacity - 1)
    batch = jnp.arange(batch_size)
    roots = jnp.arange(batch_size, dtype=jnp.int32) * capacity
    actions = jnp.arange(num_actions, dtype=jnp.int32)[None, :]

    if root_select is not None:
        # What a given root action needs, constant through a search (no simulation writes
        # the root's prior or its discount): which actions are legal, whether the root moves.
        roots_before = root_node(tree)
        root_legal = roots_before.legal_action_mask
        root_moves = roots_before.stats[:, DISCOUNT] != 0

    def simulation(index, carry):
        tree, words, search_visits, path, staging = carry

        # 1. Descend.
        tree_range = tree_q_range(tree) if q_normalisation == "tree" else None
        root = None
        if root_select is not None:
            root_action = root_select(tree, index, search_visits, tree_range)
            legal = jnp.take_along_axis(root_legal, root_action[:, None], axis=1)[:, 0]
            root = (root_action, root_moves & legal)
        path, num_edges = _kernels.descend(
            kernels,
            tree,
            interior_select,
            tree_range,
            max_depth,
            root,
            path,
            rows_finish=rows_finish,
        )
        has_edge = num_edges > 0
        last_edge = jnp.maximum(path[batch, num_edges], 0)  # column num_edges: the last edge
        parent = jnp.where(has_edge, jax.lax.div(last_edge, num_actions) - roots, ROOT_INDEX)
        action = jax.lax.rem(last_edge, num_actions)
        child = jnp.where(has_edge, take(tree.children.reshape(-1), last_edge), UNVISITED)
        expand = has_edge & (child == UNVISITED)

        # 2. Expand: one step from every row's leaf parent (also where there is nothing to
        # expand, as a batch steps together), stored where it is new and there is room.
        staging, state = parent_state(tree.state_layout, words, slot_major_row(parent), staging)
        step_keys = jax.vmap(jax.random.fold_in, (0, None))(key, index)
        step = transition(net, env, state, action, step_keys, gamma)
        store = expand & (tree.num_nodes < capacity)
        slot = jnp.where(store, tree.num_nodes, capacity)
        tree = store_node(tree, slot, parent, action, step, selection_prior(step.evaluation))
        words = store_state(words, slot, pack_state(tree.state_layout, step.state))
        tree = eqx.tree_at(lambda t: t.num_nodes, tree, tree.num_nodes + store.astype(jnp.int32))

        # 3. Back up.
        leaf, leaf_value = _leaf(tree, step, has_edge, expand, store, slot, parent, child)
        end = jnp.where(expand & ~store, num_edges - 1, num_edges)
        tree = _kernels.backup(kernels, tree, path, end, roots + leaf, leaf_value)
        if root_select is not None:
            root_hot = actions == root_action[:, None]
            search_visits = search_visits + (root_hot & root_moves[:, None]).astype(jnp.int32)
        return tree, words, search_visits, path, staging

    # The nodes' states, in `slot_major` order for the search and in the tree's at the end
    # (`start` leaves them alone). Without reuse nothing in the tree's words is kept, and
    # their array serves as the buffer as it is.
    if reuse_tree:
        words = slot_major(tree.state_words)
    else:
        words = tree.state_words.reshape(capacity * batch_size, -1)
    words = jax.lax.dynamic_update_slice(words, pack_state(tree.state_layout, env_state), (0, 0))
    search_visits = jnp.zeros((batch_size, num_actions), jnp.int32)
    staging = staging_buffers(tree.state_layout, batch_size)
    path = _kernels.path_buffer(batch_size, max_depth)
    carry = (tree, words, search_visits, path, staging)
    tree, words, search_visits, *_ = jax.lax.fori_loop(0, num_simulations, simulation, carry)
    tree = eqx.tree_at(lambda t: t.state_words, tree, batch_major(words, batch_size))
    return tree, search_visits


def _leaf(
    tree: Tree,
    step: Transition,
    has_edge: Bool[Array, " batch"],
    expand: Bool[Array, " batch"],
    store: Bool[Array, " batch"],
    slot: Int[Array, " batch"],
    parent: Int[Array, " batch"],
    child: Int[Array, " batch"],
) -> tuple[Int[Array, " batch"], Float[Array, " batch"]]:
    """Where each row's backup starts (a slot) and the value it backs up from there.

    A new node is backed up with its network value; a new node that could not be stored
    (full tree) as the return through the edge to it, credited to its parent (one position
    up); and where the descent stopped at a stored node (terminal, depth limit), that node
    with its own network value (zero when terminal).
    """
    roots = jnp.arange(tree.batch_size, dtype=jnp.int32) * tree.capacity
    leaf = jnp.where(store, slot, jnp.where(expand, parent, jnp.maximum(child, 0)))
    leaf = jnp.where(has_edge, leaf, ROOT_INDEX)
    leaf_value = jnp.where(
        store,
        step.evaluation.value,
        jnp.where(
            expand,
            step.reward + step.discount * step.evaluation.value,
            take(flat(tree.node_stats), roots + leaf)[:, RAW_VALUE],
        ),
    )
    return leaf, leaf_value
