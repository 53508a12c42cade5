"""The lockstep kernels: every batch row moves together, one level (descent) or a few
path positions (backup) per iteration of a `while_loop`, with one gather and one scatter
per array per iteration. [`azx.search.LockstepBackend`][]'s and
[`azx.search.UnrolledBackend`][]'s (several levels or positions per iteration), and
[`azx.search.PlatformBackend`][]'s on every platform.
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from ._tree import (
    DISCOUNT,
    REWARD,
    UNVISITED,
    VALUE,
    VISITS,
    Node,
    QRange,
    Tree,
    flat,
    take,
    with_statistics,
)


#: A selection rule as the kernels call it (`azx.search.AbstractSelectionRule`): each row's
#: action at the node and its score.
Select = Callable[[Node], tuple[Int[Array, " batch"], Float[Array, " batch"]]]


#: Path positions the backup handles per iteration of its loop.
BACKUP_CHUNK = 4


def path_buffer(
    batch_size: int, max_depth: int, chunk: int = BACKUP_CHUNK
) -> Int[Array, "batch columns"]:
    """The path of one simulation, one buffer for a whole search: column `p + 1` holds the
    edge out of the `p`-th node (positions `0..max_depth - 1`; the leaf, at most at
    position `max_depth`, is given to the backup on its own), column 0 the edge into the
    root (none), and enough columns after them for whole backup chunks plus the position
    under the last one (of `chunk` positions each)."""
    chunks = -(-(max_depth + 1) // chunk)
    return jnp.full((batch_size, chunks * chunk + 2), -1, jnp.int32)


def descend(
    tree: Tree,
    select: Select,
    tree_range: QRange,
    max_depth: int,
    root: tuple[Int[Array, " batch"], Bool[Array, " batch"]] | None,
    path: Int[Array, "batch columns"],
    leave: int = 0,
    levels: int = 1,
) -> tuple[Int[Array, ""], Int[Array, " batch"], Int[Array, "batch columns"], Int[Array, " batch"]]:
    """The edges each row's descent takes from the root, written into column `p + 1` of
    `path` for the `p`-th edge, and their number; before them, the level the loop stopped
    at and each row's cursor there (its node's flat row, -1 once it has stopped).

    An edge is written as its flat index `(b * capacity + node) * num_actions + action` into
    the per-action arrays, from which its node's row is `edge // num_actions`. A row stops
    at an edge without a node (to expand), at a terminal node, at an illegal choice (a node
    with no legal action) or after `max_depth` edges. With `root` the first edge is given
    rather than selected: its action, and whether the descent goes through it (a legal
    action out of a root that is not terminal). Only a row's first `edges` columns after
    column 0 mean anything; the others hold whatever was written there last (`path` is one
    buffer for the whole search, so that no simulation fills a new one).

    All rows descend in lockstep, one level per iteration of a `while_loop`, which costs
    the same per level however few rows are still descending. With `leave` the loop stops
    once at most that many rows are still descending, for the row loop to finish them one
    at a time (`azx.search._rows.finish_descent`). With `levels` > 1 (and no `leave`),
    each iteration descends that many levels, those past `max_depth` masked: fewer
    iterations, and so fewer loop conditions read back by the host, for levels that
    rows which have stopped pass through without effect.
    """
    if levels > 1 and leave:
        raise ValueError(f"levels > 1 descends without leaving rows, got leave={leave}")
    batch_size, capacity, num_actions = tree.children.shape
    arrays = selection_arrays(tree)
    roots = jnp.arange(batch_size, dtype=jnp.int32) * capacity

    def record(depth, path, edges, edge, go, child):
        # Record the edge out of level `depth`; `cursor`: flat row of each row's next node,
        # -1 once it has stopped.
        path = jax.lax.dynamic_update_slice_in_dim(path, edge[:, None], depth + 1, axis=1)
        cursor = jnp.where(go & (child != UNVISITED), roots + child, -1)
        return cursor, path, edges + go.astype(jnp.int32)

    def level(depth, cursor, path, edges):
        # Each array read here is a row per batch row, small enough that XLA:CPU gathers it
        # on one thread instead of paying a second thread's wake-up at every level.
        active = cursor >= 0
        if levels > 1:  # a level past `max_depth` inside an iteration does nothing
            active = active & (depth < max_depth)
        rows = jnp.maximum(cursor, 0)
        edge, go, child = level_step(arrays, rows, lambda x: take(x, rows), select, tree_range)
        return record(depth, path, edges, edge, active & go, child)

    def cond(carry):
        depth, cursor = carry[:2]
        descending = _count(cursor >= 0)
        more = descending > leave
        return (depth < max_depth) & more

    def body(carry):
        depth, cursor, path, edges = carry
        for _ in range(levels):
            cursor, path, edges = level(depth, cursor, path, edges)
            depth = depth + 1
        return depth, cursor, path, edges

    depth, cursor, edges = 0, roots, jnp.zeros((batch_size,), jnp.int32)
    if root is not None:
        # Nothing of the root to read but the child: no gathers of its rows.
        action, go = root
        edge = roots * num_actions + action
        child = take(tree.children.reshape(-1), edge)
        cursor, path, edges = record(0, path, edges, edge, go, child)
        depth = 1
    carry = (jnp.int32(depth), cursor, path, edges)
    return jax.lax.while_loop(cond, body, carry)


def _count(mask: Bool[Array, " rows"]) -> Int[Array, ""]:
    """The number of true entries, summed in two explicit stages (blocks of 32, then the
    blocks' sums). XLA:CPU turns one sum over more than 32 elements into a windowed
    reduction and a second reduction, two kernels apart from what feeds and reads them;
    two stages of its own it compiles into one kernel with both (a descent level's loop
    condition: one kernel instead of three)."""
    x = mask.astype(jnp.int32)
    if x.shape[0] <= 32:
        return jnp.sum(x)
    x = jnp.pad(x, (0, -x.shape[0] % 32)).reshape(-1, 32)
    # The barrier keeps XLA from merging the stages back into one sum before fusion.
    return jnp.sum(jax.lax.optimization_barrier(jnp.sum(x, axis=1)))


def selection_arrays(tree: Tree) -> tuple[Array, ...]:
    """What selection reads, flattened to one row per node (`children`: one entry per
    edge)."""
    arrays = (
        flat(tree.node_stats),
        flat(tree.edge_visits),
        flat(tree.edge_q),
        flat(tree.selection_prior),
        tree.children.reshape(-1),
    )
    return arrays if tree.chance is None else arrays + (flat(tree.chance),)


def level_step(arrays, rows, read, select, tree_range):
    """One level of the descent from the nodes in flat rows `rows`, whose rows of each array
    `read` fetches: the edge taken (its flat index), whether the descent goes through it,
    and its child."""
    node_stats, edge_visits, edge_q, prior, children, *chance = arrays
    stats = read(node_stats)
    chance = read(chance[0]) if chance else None
    node = Node.from_rows(stats, read(edge_visits), read(edge_q), read(prior), tree_range, chance)
    action, best = select(node)
    # A legal action's score is finite: `-inf` means the node has none.
    go = (stats[:, DISCOUNT] != 0) & (best > -jnp.inf)  # discount 0: terminal
    edge = rows * prior.shape[1] + action
    return edge, go, take(children, edge)


def backup(
    tree: Tree,
    path: Int[Array, "batch columns"],
    end: Int[Array, " batch"],
    leaf: Int[Array, " batch"],
    leaf_value: Float[Array, " batch"],
    chunk: int = BACKUP_CHUNK,
) -> Tree:
    """`AbstractBackend.backup` for all rows in lockstep. A `while_loop` walks the path
    upwards `chunk` positions at a time (`path` from `path_buffer` with the same `chunk`),
    starting at the chunk of the deepest leaf in the batch, so the work follows the real
    depth rather than `max_depth`; each iteration
    gathers its positions' rows of `node_stats` once and writes the new mean value and
    visit count, and the edge's visits and Q in the parent's row, with one scatter per
    array. The loop carries only the arrays it writes, so XLA updates them in place.
    """
    batch_size, capacity, num_actions = tree.children.shape
    offsets = jnp.arange(chunk + 1, dtype=jnp.int32)[None, :]
    no_row = batch_size * capacity
    no_edge = no_row * num_actions
    assert (VALUE, VISITS) == (0, 1)  # written together as one slice of each row

    def body(carry):
        j, future, node_stats, edge_visits, edge_q = carry
        start = j * chunk
        # Columns: the edge into position `start`, then positions start .. start + chunk.
        window = jax.lax.dynamic_slice_in_dim(path, start, chunk + 2, axis=1)
        positions = start + offsets  # of the window's columns after the first
        # Truncating division: cheaper than `//` and the same on non-negative numbers.
        rows = jax.lax.div(jnp.maximum(window[:, 1:], 0), num_actions)
        rows = jnp.where(positions == end[:, None], leaf[:, None], rows)
        stats = take(node_stats, rows)
        positions = positions[:, :chunk]
        returns = [None] * chunk
        for i in reversed(range(chunk)):
            future = jnp.where(
                positions[:, i] == end,
                leaf_value,
                stats[:, i + 1, REWARD] + stats[:, i + 1, DISCOUNT] * future,
            )
            returns[i] = future
        returns = jnp.stack(returns, axis=1)
        count = stats[:, :chunk, VISITS]
        new_count = count + 1.0
        new_mean = (stats[:, :chunk, VALUE] * count + returns) / new_count
        on_path = positions <= end[:, None]
        target = jnp.where(on_path, rows[:, :chunk], no_row)
        node_stats = node_stats.at[target, :2].set(
            jnp.stack([new_mean, new_count], axis=-1), mode="drop"
        )
        edge = jnp.where(on_path & (positions > 0), window[:, :chunk], no_edge)
        q = stats[:, :chunk, REWARD] + stats[:, :chunk, DISCOUNT] * new_mean
        edge_visits = edge_visits.at[edge].set(new_count, mode="drop")
        edge_q = edge_q.at[edge].set(q, mode="drop")
        return j - 1, future, node_stats, edge_visits, edge_q

    carry = (
        jnp.max(end) // chunk,
        leaf_value,
        flat(tree.node_stats),
        tree.edge_visits.reshape(-1),
        tree.edge_q.reshape(-1),
    )
    _, _, node_stats, edge_visits, edge_q = jax.lax.while_loop(lambda c: c[0] >= 0, body, carry)
    return with_statistics(tree, node_stats, edge_visits, edge_q)
