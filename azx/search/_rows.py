"""The row kernels, for XLA:CPU: one batch row at a time, in scalars.

Every access in these loops is a slice of one row or a few elements, so each iteration
touches less than XLA:CPU's threshold for a small loop (1 KB), and XLA compiles the nested
loops into one function (`SmallWhileLoopHoistingPass`): a single kernel whose cost follows
each row's own path length rather than the deepest path in the batch. On other platforms,
or with more actions than `azx.search._backend.ROW_LOOPS_MAX_ACTIONS`, they would be loops
of separate kernels and far slower than lockstep.
"""

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from ._lockstep import Select, level_step, selection_arrays
from ._tree import (
    DISCOUNT,
    NUM_NODE_STATS,
    REWARD,
    ROOT_INDEX,
    UNVISITED,
    VALUE,
    VISITS,
    QRange,
    Tree,
    flat,
    with_statistics,
)


def finish_descent(
    tree: Tree,
    select: Select,
    tree_range: QRange,
    max_depth: int,
    depth: Int[Array, ""],
    cursor: Int[Array, " batch"],
    path: Int[Array, "batch columns"],
    edges: Int[Array, " batch"],
) -> tuple[Int[Array, "batch columns"], Int[Array, " batch"]]:
    """Go on with the descent of every row still descending (`cursor >= 0`) from level
    `depth`, one row at a time, `select` seeing a batch of one; what
    `azx.search._lockstep.descend` left with `leave`. Its cost follows those rows' own
    remaining depths."""
    batch_size, capacity, _ = tree.children.shape
    arrays = selection_arrays(tree)

    def one_row(b, carry):
        path, edges = carry
        row_range = None
        if tree_range is not None:
            row_range = tuple(jax.lax.dynamic_slice_in_dim(x, b, 1) for x in tree_range)

        def level(carry):
            depth, cursor, path, count = carry

            def read(x):
                return jax.lax.dynamic_slice_in_dim(x, cursor, 1)

            edge, go, child = level_step(arrays, cursor[None], read, select, row_range)
            path = jax.lax.dynamic_update_slice(path, edge[:, None], (b, depth + 1))
            cursor = jnp.where(go[0] & (child[0] != UNVISITED), b * capacity + child[0], -1)
            return depth + 1, cursor, path, count + go[0].astype(jnp.int32)

        carry = (depth, cursor[b], path, edges[b])
        _, _, path, count = jax.lax.while_loop(
            lambda c: (c[0] < max_depth) & (c[1] >= 0), level, carry
        )
        return path, jax.lax.dynamic_update_slice(edges, count[None], (b,))

    return jax.lax.fori_loop(0, batch_size, one_row, (path, edges))


def backup(
    tree: Tree,
    path: Int[Array, "batch columns"],
    end: Int[Array, " batch"],
    leaf: Int[Array, " batch"],
    leaf_value: Float[Array, " batch"],
) -> Tree:
    """`AbstractBackend.backup` one batch row at a time, one path position at a time,
    in scalars: `dynamic_slice`s and in-place `dynamic_update_slice`s of a few elements.
    The arrays can be written in place because every read of `node_stats` but the one that
    updates a row comes after that update.
    """
    batch_size, capacity, num_actions = tree.children.shape

    def update(node_stats, row, future):
        # One visit and one return more for the node in `row`.
        old = jax.lax.dynamic_slice(node_stats, (row, 0), (1, 2))[0]
        count = old[VISITS]
        new_count = count + 1.0
        new_mean = (old[VALUE] * count + future) / new_count
        return jax.lax.dynamic_update_slice(
            node_stats, jnp.stack([new_mean, new_count])[None], (row, 0)
        )

    def one_row(b, arrays):
        def position(carry):
            p, future, node_stats, edge_visits, edge_q = carry
            into, out = jax.lax.dynamic_slice(path, (b, p), (1, 2))[0]
            row = jnp.where(p == end[b], leaf[b], jax.lax.div(out, num_actions))
            node_stats = update(node_stats, row, future)
            stats = jax.lax.dynamic_slice(node_stats, (row, 0), (1, NUM_NODE_STATS))[0]
            edge_visits = jax.lax.dynamic_update_slice(edge_visits, stats[VISITS, None], (into,))
            q = stats[REWARD] + stats[DISCOUNT] * stats[VALUE]
            edge_q = jax.lax.dynamic_update_slice(edge_q, q[None], (into,))
            future = stats[REWARD] + stats[DISCOUNT] * future
            return p - 1, future, node_stats, edge_visits, edge_q

        # Positions end .. 1 write their edge too; the root (position 0) has none.
        carry = (end[b], leaf_value[b], *arrays)
        _, future, node_stats, edge_visits, edge_q = jax.lax.while_loop(
            lambda c: c[0] >= 1, position, carry
        )
        return update(node_stats, b * capacity + ROOT_INDEX, future), edge_visits, edge_q

    arrays = (flat(tree.node_stats), tree.edge_visits.reshape(-1), tree.edge_q.reshape(-1))
    node_stats, edge_visits, edge_q = jax.lax.fori_loop(0, batch_size, one_row, arrays)
    return with_statistics(tree, node_stats, edge_visits, edge_q)
