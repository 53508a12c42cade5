"""Native batched MCTS: AlphaZero PUCT and Gumbel MuZero over the arrays of `Tree`.

One simulation, for the whole batch at once:

1. descend: a `while_loop` over depth (all roots move in lockstep) whose carry is each
   row's current node and the path of edges taken so far, never the tree;
2. expand: one batched environment step and network call from the leaf's parent, written
   into the next free slot;
3. back up: the returns along the path are computed from the leaf upwards and written; on
   CPU (games with few actions) one row and one position at a time in a loop that XLA
   compiles into one kernel, elsewhere a few positions per iteration for all rows, with
   one scatter per array.
"""

import functools
from collections.abc import Callable
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, UInt32

from .. import _random
from .._types import EnvState, PRNGKey, PRNGKeys
from ..envs import AbstractEnv
from ._abstract import AbstractSearch, SearchOutput
from ._config import (
    Q_NORMALISATIONS,
    check_choice,
    check_float,
    check_optional_positive_int,
    check_positive_int,
)
from ._model import ILLEGAL_LOGIT, Evaluation, check_players, evaluate, row_keys, transition
from ._qtransforms import (
    completed_q_parts,
    considered_visits_table,
    halving_choices_table,
    puct_value_score,
)
from ._tree import (
    DISCOUNT,
    NUM_NODE_STATS,
    RAW_VALUE,
    REWARD,
    ROOT_INDEX,
    UNVISITED,
    VALUE,
    VISITS,
    StateLayout,
    Tree,
    empty_tree,
    keep_subtree,
    pack_state,
    unpack_rows,
    unpack_state,
)


class _Node(eqx.Module):
    """What selection reads at one node per batch row: the node's own statistics and one
    row per edge statistic."""

    stats: Float[Array, "batch 5"]
    """The node's row of `Tree.node_stats`."""
    visits: Float[Array, "batch num_actions"]
    q: Float[Array, "batch num_actions"]
    prior: Float[Array, "batch num_actions"]
    """The prior's probabilities; `-inf` where illegal."""
    tree_low: Float[Array, " batch"] | None
    tree_high: Float[Array, " batch"] | None

    @property
    def legal_action_mask(self) -> Bool[Array, "batch num_actions"]:
        return self.prior > -jnp.inf


def _node_stats(value, visits, raw_value, reward, discount) -> Float[Array, "batch 5"]:
    """One row of `Tree.node_stats` per batch row, columns in their declared order."""
    columns = {VALUE: value, VISITS: visits, RAW_VALUE: raw_value, REWARD: reward}
    columns[DISCOUNT] = discount
    return jnp.stack([columns[c] for c in range(NUM_NODE_STATS)], axis=-1)


def _flat(x: Array) -> Array:
    """`[batch, capacity, ...]` as `[batch * capacity, ...]`: a row index `b * capacity + n`
    is the cheapest gather on XLA:CPU (one index per row, contiguous slices)."""
    return x.reshape((x.shape[0] * x.shape[1],) + x.shape[2:])


def _take(x: Array, row: Int[Array, "*rows"]) -> Array:
    return x.at[row].get(mode="promise_in_bounds")


def _root_node(tree: Tree, tree_range=None) -> _Node:
    return _Node(
        stats=tree.node_stats[:, ROOT_INDEX],
        visits=tree.edge_visits[:, ROOT_INDEX],
        q=tree.edge_q[:, ROOT_INDEX],
        prior=tree.selection_prior[:, ROOT_INDEX],
        tree_low=None if tree_range is None else tree_range[0],
        tree_high=None if tree_range is None else tree_range[1],
    )


def _tree_q_range(tree: Tree) -> tuple[Float[Array, " batch"], Float[Array, " batch"]]:
    """Min and max Q over every visited edge of each tree (MuZero's normalisation)."""
    slots = jnp.arange(tree.capacity)[None, :]
    stats = tree.node_stats
    edge = (slots != ROOT_INDEX) & (slots < tree.num_nodes[:, None]) & (stats[..., VISITS] > 0)
    q = stats[..., REWARD] + stats[..., DISCOUNT] * stats[..., VALUE]
    low = jnp.min(jnp.where(edge, q, jnp.inf), axis=1)
    high = jnp.max(jnp.where(edge, q, -jnp.inf), axis=1)
    return low, high


def _masked_best(
    score: Float[Array, "batch num_actions"], legal_action_mask: Bool[Array, "batch num_actions"]
) -> tuple[Int[Array, " batch"], Float[Array, " batch"]]:
    """The legal action with the highest score and that score (`-inf`, with action 0, where
    no action is legal), in one reduction.

    Ties go to the lowest index, as with `jnp.argmax`, so a search without noise is
    deterministic. Unlike `jnp.argmax` it does not look for NaN, which no score is: that
    makes the scalar code of the row loops (`_finish_by_row`) about a fifth faster.
    """
    masked = jnp.where(legal_action_mask, score, -jnp.inf)
    index = jax.lax.broadcasted_iota(jnp.int32, masked.shape, masked.ndim - 1)

    def better(a, b):
        (a_score, a_index), (b_score, b_index) = a, b
        a_wins = (a_score > b_score) | ((a_score == b_score) & (a_index < b_index))
        return jnp.where(a_wins, a_score, b_score), jnp.where(a_wins, a_index, b_index)

    identity = (jnp.asarray(-jnp.inf, masked.dtype), jnp.int32(jnp.iinfo(jnp.int32).max))
    best, action = jax.lax.reduce((masked, index), identity, better, (masked.ndim - 1,))
    return action, best


#: A selection rule: each row's chosen action at its node and that action's score
#: (`_masked_best`).
_Select = Callable[[_Node], tuple[Int[Array, " batch"], Float[Array, " batch"]]]


def _masked_argmax(
    score: Float[Array, "batch num_actions"], legal_action_mask: Bool[Array, "batch num_actions"]
) -> Int[Array, " batch"]:
    return _masked_best(score, legal_action_mask)[0]


#: On CPU, PUCT's lockstep descent stops once at most `batch_size // _ROW_FINISH` rows are
#: still descending; they finish one at a time (`_finish_by_row`).
_ROW_FINISH = 4
#: The row loops (`_finish_by_row`, `_backup_rows`) are used on CPU in games with at most
#: this many actions. With more, an iteration of `_finish_by_row` reads more than XLA:CPU
#: compiles into one function (1 KB), and as a loop of kernels it would be far slower than
#: lockstep (a test pins that this many still compile into one); and `_backup_rows`,
#: though faster alone, made whole searches slower in go_9x9 (82 actions), by 2-5%.
_ROW_LOOPS_MAX_ACTIONS = 12


def _row_loops(num_actions: int) -> bool:
    """Whether the CPU code uses the row loops in a game with `num_actions` actions."""
    return num_actions <= _ROW_LOOPS_MAX_ACTIONS


def _descend(
    tree: Tree,
    select: _Select,
    tree_range,
    max_depth: int,
    root: tuple[Int[Array, " batch"], Bool[Array, " batch"]] | None,
    path: Int[Array, "batch columns"],
    finish_by_row: bool = False,
) -> tuple[Int[Array, "batch columns"], Int[Array, " batch"]]:
    """The edges each row's descent takes from the root, written into column `p + 1` of
    `path` for the `p`-th edge, and their number.

    An edge is written as its flat index `(b * capacity + node) * num_actions + action` into
    the per-action arrays, from which its node's row is `edge // num_actions`. A row stops
    at an edge without a node (to expand), at a terminal node, at an illegal choice (a node
    with no legal action) or after `max_depth` edges. With `root` the first edge is given
    rather than selected: its action, and whether the descent goes through it (a legal
    action out of a root that is not terminal). Only a row's first `edges` columns after
    column 0 mean anything; the others hold whatever was written there last (`path` is one
    buffer for the whole search, so that no simulation fills a new one).

    All rows descend in lockstep, one level per iteration of a `while_loop`, which costs
    the same per level however few rows are still descending. With `finish_by_row` the
    loop stops once at most a quarter of the rows are left, and those finish one at a time
    (`_finish_by_row`), which costs in proportion to their own remaining depth.
    """
    batch_size, capacity, num_actions = tree.children.shape
    arrays = _selection_arrays(tree)
    roots = jnp.arange(batch_size, dtype=jnp.int32) * capacity

    def take(depth, path, edges, edge, go, child):
        # Record the edge out of level `depth`; `cursor`: flat row of each row's next node,
        # -1 once it has stopped.
        path = jax.lax.dynamic_update_slice_in_dim(path, edge[:, None], depth + 1, axis=1)
        cursor = jnp.where(go & (child != UNVISITED), roots + child, -1)
        return cursor, path, edges + go.astype(jnp.int32)

    def level(depth, cursor, path, edges):
        # Every array read here is at most 512 KB at the benchmark's sizes, so XLA:CPU
        # gathers it on one thread instead of paying a second thread's wake-up at every
        # level.
        active = cursor >= 0
        rows = jnp.maximum(cursor, 0)
        edge, go, child = _step(arrays, rows, lambda x: _take(x, rows), select, tree_range)
        return take(depth, path, edges, edge, active & go, child)

    def cond(carry):
        depth, cursor = carry[:2]
        descending = _count(cursor >= 0)
        more = descending > (batch_size // _ROW_FINISH if finish_by_row else 0)
        return (depth < max_depth) & more

    def body(carry):
        depth, cursor, path, edges = carry
        return depth + 1, *level(depth, cursor, path, edges)

    depth, cursor, edges = 0, roots, jnp.zeros((batch_size,), jnp.int32)
    if root is not None:
        # Nothing of the root to read but the child: no gathers of its rows.
        action, go = root
        edge = roots * num_actions + action
        child = _take(tree.children.reshape(-1), edge)
        cursor, path, edges = take(0, path, edges, edge, go, child)
        depth = 1
    carry = (jnp.int32(depth), cursor, path, edges)
    depth, cursor, path, edges = jax.lax.while_loop(cond, body, carry)
    if finish_by_row:
        return _finish_by_row(tree, select, tree_range, max_depth, depth, cursor, path, edges)
    return path, edges


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


def _selection_arrays(tree: Tree) -> tuple[Array, ...]:
    """What selection reads, flattened to one row per node (`children`: one entry per
    edge)."""
    return (
        _flat(tree.node_stats),
        _flat(tree.edge_visits),
        _flat(tree.edge_q),
        _flat(tree.selection_prior),
        tree.children.reshape(-1),
    )


def _step(arrays, rows, read, select, tree_range):
    """One level of the descent from the nodes in flat rows `rows`, whose rows of each array
    `read` fetches: the edge taken (its flat index), whether the descent goes through it,
    and its child."""
    node_stats, edge_visits, edge_q, prior, children = arrays
    node = _Node(
        stats=read(node_stats),
        visits=read(edge_visits),
        q=read(edge_q),
        prior=read(prior),
        tree_low=None if tree_range is None else tree_range[0],
        tree_high=None if tree_range is None else tree_range[1],
    )
    action, best = select(node)
    # A legal action's score is finite: `-inf` means the node has none.
    go = (node.stats[:, DISCOUNT] != 0) & (best > -jnp.inf)  # discount 0: terminal
    edge = rows * prior.shape[1] + action
    return edge, go, _take(children, edge)


def _finish_by_row(
    tree: Tree,
    select: _Select,
    tree_range,
    max_depth: int,
    depth: Int[Array, ""],
    cursor: Int[Array, " batch"],
    path: Int[Array, "batch columns"],
    edges: Int[Array, " batch"],
) -> tuple[Int[Array, "batch columns"], Int[Array, " batch"]]:
    """Go on with the descent of every row still descending (`cursor >= 0`) from level
    `depth`, one row at a time, `select` seeing a batch of one.

    Every access is a slice of one row or one element, so, as for `_backup_rows`, XLA:CPU
    compiles the loops into one function, whose cost follows the rows' own depths."""
    batch_size, capacity, _ = tree.children.shape
    arrays = _selection_arrays(tree)

    def one_row(b, carry):
        path, edges = carry
        row_range = None
        if tree_range is not None:
            row_range = tuple(jax.lax.dynamic_slice_in_dim(x, b, 1) for x in tree_range)

        def level(carry):
            depth, cursor, path, count = carry

            def read(x):
                return jax.lax.dynamic_slice_in_dim(x, cursor, 1)

            edge, go, child = _step(arrays, cursor[None], read, select, row_range)
            path = jax.lax.dynamic_update_slice(path, edge[:, None], (b, depth + 1))
            cursor = jnp.where(go[0] & (child[0] != UNVISITED), b * capacity + child[0], -1)
            return depth + 1, cursor, path, count + go[0].astype(jnp.int32)

        carry = (depth, cursor[b], path, edges[b])
        _, _, path, count = jax.lax.while_loop(
            lambda c: (c[0] < max_depth) & (c[1] >= 0), level, carry
        )
        return path, jax.lax.dynamic_update_slice(edges, count[None], (b,))

    return jax.lax.fori_loop(0, batch_size, one_row, (path, edges))


def _put_rows(x: Array, slot: Int[Array, " batch"], value: Array) -> Array:
    """`x[b, slot[b]] = value[b]`; a slot out of bounds writes nothing."""
    batch_size, capacity = x.shape[:2]
    index = jnp.where(
        slot < capacity,
        jnp.arange(batch_size, dtype=jnp.int32) * capacity + slot,
        batch_size * capacity,
    )
    return _flat(x).at[index].set(value, mode="drop").reshape(x.shape)


def _store_node(
    tree: Tree,
    slot: Int[Array, " batch"],
    parent: Int[Array, " batch"],
    action: Int[Array, " batch"],
    step: Any,
    selection_prior: Float[Array, "batch num_actions"],
) -> Tree:
    """Write a new node into `slot` (out of bounds: nothing is written) and link it from
    its parent: one scatter per array. Its rows of `children`, `edge_visits` and `edge_q`
    were cleared when the search started (`_start`); its state goes into the search's
    own buffer (`_store_state`)."""
    batch_size, capacity, num_actions = tree.children.shape
    evaluation = step.evaluation

    def put(x, v):
        return _put_rows(x, slot, v)

    zero = jnp.zeros_like(step.reward)
    stats = _node_stats(
        zero,
        zero,
        evaluation.value,
        step.reward,
        step.discount,
    )
    link = (jnp.arange(batch_size, dtype=jnp.int32) * capacity + parent) * num_actions + action
    link = jnp.where(slot < capacity, link, tree.children.size)
    children = tree.children.reshape(-1).at[link].set(slot, mode="drop")
    return eqx.tree_at(
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


def _slot_major(words: UInt32[Array, "batch capacity words"]) -> UInt32[Array, "nodes words"]:
    """`Tree.state_words` as the search keeps them: one block of `batch` rows per slot, so
    that node `n` of batch row `b` is row `n * batch + b`.

    A simulation stores its new nodes in the same slot in most batch rows (each row's next
    free one), so in this order the rows it writes lie next to each other, which XLA:CPU
    scatters in half the time it takes over rows `capacity` apart (connect four, batch
    256: 0.7 ms of a 19 ms Gumbel search)."""
    return jnp.swapaxes(words, 0, 1).reshape(-1, words.shape[-1])


def _slot_major_row(slot: Int[Array, " batch"]) -> Int[Array, " batch"]:
    """The row of each batch row's node `slot` in `_slot_major` words."""
    batch_size = slot.shape[0]
    return slot * batch_size + jnp.arange(batch_size, dtype=slot.dtype)


def _batch_major(
    words: UInt32[Array, "nodes words"], batch_size: int
) -> UInt32[Array, "batch capacity words"]:
    """The inverse of `_slot_major`."""
    return jnp.swapaxes(words.reshape(-1, batch_size, words.shape[-1]), 0, 1)


def _store_state(
    words: UInt32[Array, "nodes words"], slot: Int[Array, " batch"], state_words: Array
) -> UInt32[Array, "nodes words"]:
    """Write each row's packed state into its `slot` of `_slot_major` words (out of bounds:
    nothing is written)."""
    capacity = words.shape[0] // state_words.shape[0]
    row = jnp.where(slot < capacity, _slot_major_row(slot), words.shape[0])
    return words.at[row].set(state_words, mode="drop")


#: Path positions the backup handles per iteration of its loop.
_BACKUP_CHUNK = 4


def _path_buffer(batch_size: int, max_depth: int) -> Int[Array, "batch columns"]:
    """The path of one simulation, one buffer for a whole search: column `p + 1` holds the
    edge out of the `p`-th node (positions `0..max_depth - 1`; the leaf, at most at
    position `max_depth`, is given to `_backup` on its own), column 0 the edge into the
    root (none), and enough columns after them for whole backup chunks plus the position
    under the last one."""
    chunks = -(-(max_depth + 1) // _BACKUP_CHUNK)
    return jnp.full((batch_size, chunks * _BACKUP_CHUNK + 2), -1, jnp.int32)


def _backup(
    tree: Tree,
    path: Int[Array, "batch columns"],
    end: Int[Array, " batch"],
    leaf: Int[Array, " batch"],
    leaf_value: Float[Array, " batch"],
) -> Tree:
    """Add one visit and one return to the node of every position `0..end` of `path`.

    `path` is a `_path_buffer`: column `p + 1` holds position `p`, the edge out of the
    `p`-th node, so that node's row is `path[:, p + 1] // num_actions` and the edge into it
    is `path[:, p]`; but the node at position `end` is in flat row `leaf` (of
    `_flat(tree.node_stats)`), whatever column `end + 1` holds, and what columns past it
    hold does not matter. The returns are
    computed from the leaf up, `G_p = reward_{p+1} + discount_{p+1} * G_{p+1}` (the same
    order of operations as mctx), and each node's mean value and visit count are updated,
    and the visits and Q of the edge into it in its parent's row.

    Two implementations give the same arrays bit for bit: on CPU `_backup_rows` (in games
    with at most `_ROW_LOOPS_MAX_ACTIONS` actions), elsewhere `_backup_lockstep`.
    """
    cpu = _backup_rows if _row_loops(tree.children.shape[2]) else _backup_lockstep
    return jax.lax.platform_dependent(
        tree, path, end, leaf, leaf_value, cpu=cpu, default=_backup_lockstep
    )


def _backup_rows(
    tree: Tree,
    path: Int[Array, "batch columns"],
    end: Int[Array, " batch"],
    leaf: Int[Array, " batch"],
    leaf_value: Float[Array, " batch"],
) -> Tree:
    """`_backup` one batch row at a time, one path position at a time, in scalars.

    Every access is a `dynamic_slice` or an in-place `dynamic_update_slice` of a few
    elements, so each iteration of these loops touches less than XLA:CPU's threshold for a
    small loop (1 KB), and XLA compiles the two nested loops into one function
    (`SmallWhileLoopHoistingPass`): a single kernel for the whole backup, whose cost follows
    each row's own path length rather than the deepest path in the batch. The arrays are
    written in place because every read of `node_stats` but the one that updates a row
    comes after that update.
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

    arrays = (_flat(tree.node_stats), tree.edge_visits.reshape(-1), tree.edge_q.reshape(-1))
    node_stats, edge_visits, edge_q = jax.lax.fori_loop(0, batch_size, one_row, arrays)
    return _with_statistics(tree, node_stats, edge_visits, edge_q)


def _with_statistics(tree: Tree, node_stats, edge_visits, edge_q) -> Tree:
    return eqx.tree_at(
        lambda t: (t.node_stats, t.edge_visits, t.edge_q),
        tree,
        (
            node_stats.reshape(tree.node_stats.shape),
            edge_visits.reshape(tree.edge_visits.shape),
            edge_q.reshape(tree.edge_q.shape),
        ),
    )


def _backup_lockstep(
    tree: Tree,
    path: Int[Array, "batch columns"],
    end: Int[Array, " batch"],
    leaf: Int[Array, " batch"],
    leaf_value: Float[Array, " batch"],
) -> Tree:
    """`_backup` for all rows in lockstep. A `while_loop` walks the path upwards `_BACKUP_CHUNK`
    positions at a time, starting at the chunk of the deepest leaf in the batch, so the work
    follows the real depth rather than `max_depth`; each iteration gathers its positions'
    rows of `node_stats` once and writes the new mean value and visit count, and the edge's
    visits and Q in the parent's row, with one scatter per array. The loop carries only the
    arrays it writes, so XLA updates them in place.
    """
    batch_size, capacity, num_actions = tree.children.shape
    chunk = _BACKUP_CHUNK
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
        stats = _take(node_stats, rows)
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
        _flat(tree.node_stats),
        tree.edge_visits.reshape(-1),
        tree.edge_q.reshape(-1),
    )
    _, _, node_stats, edge_visits, edge_q = jax.lax.while_loop(lambda c: c[0] >= 0, body, carry)
    return _with_statistics(tree, node_stats, edge_visits, edge_q)


def _start(
    tree: Tree,
    evaluation: Evaluation,
    root_prior: Float[Array, "batch num_actions"],
    reuse_tree: bool,
) -> Tree:
    """Put the roots' statistics and prior into slot 0, keeping reused statistics where
    present (the roots' states go in with the others in `_run`)."""
    fresh = tree.num_nodes == 0
    if not reuse_tree:
        fresh = jnp.ones_like(fresh)
    old = tree.node_stats[:, ROOT_INDEX]
    stats = _node_stats(
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


def _batch_size(env_state: EnvState) -> int:
    return jax.tree.leaves(env_state)[0].shape[0]


def _split_rows(keys: PRNGKeys, num: int) -> Array:
    return jax.vmap(lambda k: jax.random.split(k, num))(keys)


def _run(
    search: Any,
    net: Any,
    env: AbstractEnv,
    tree: Tree,
    env_state: EnvState,
    root_select: Callable[
        [Tree, Int[Array, ""], Int[Array, "batch num_actions"], Any], Int[Array, " batch"]
    ]
    | None,
    interior_select: _Select,
    selection_prior: Callable[[Evaluation], Float[Array, "batch num_actions"]],
    key: PRNGKeys,
) -> tuple[Tree, Int[Array, "batch num_actions"]]:
    """Run the simulations. Returns the tree and each root action's visits in this search.

    Without `root_select` the root is selected like every other node, inside the descent.
    """
    batch_size, capacity, num_actions = tree.children.shape
    if batch_size * capacity * num_actions >= 2**31:
        raise ValueError(
            f"batch_size * capacity * num_actions must be below 2**31 (edges are int32 "
            f"indices), got {batch_size} * {capacity} * {num_actions}"
        )
    max_depth = min(search.max_depth or capacity - 1, capacity - 1)
    batch = jnp.arange(batch_size)
    roots = jnp.arange(batch_size, dtype=jnp.int32) * capacity
    actions = jnp.arange(num_actions, dtype=jnp.int32)[None, :]

    finish_by_row = search._row_finish and _row_loops(num_actions)
    if root_select is not None:
        # What a given root action needs, constant through a search (no simulation writes
        # the root's prior or its discount): which actions are legal, whether the root moves.
        start = _root_node(tree)
        root_legal = start.legal_action_mask
        root_moves = start.stats[:, DISCOUNT] != 0

    def simulation(index, carry):
        tree, words, search_visits, path, staging = carry
        tree_range = _tree_q_range(tree) if search.q_normalisation == "tree" else None
        root = None
        if root_select is not None:
            root_action = root_select(tree, index, search_visits, tree_range)
            legal = jnp.take_along_axis(root_legal, root_action[:, None], axis=1)[:, 0]
            root = (root_action, root_moves & legal)
        descend = functools.partial(
            _descend, tree, interior_select, tree_range, max_depth, root, path
        )
        path, num_edges = jax.lax.platform_dependent(
            cpu=lambda: descend(finish_by_row), default=lambda: descend(False)
        )
        has_edge = num_edges > 0
        last_edge = jnp.maximum(path[batch, num_edges], 0)  # column num_edges: the last edge
        parent = jnp.where(has_edge, jax.lax.div(last_edge, num_actions) - roots, ROOT_INDEX)
        action = jax.lax.rem(last_edge, num_actions)
        child = jnp.where(has_edge, _take(tree.children.reshape(-1), last_edge), UNVISITED)
        expand = has_edge & (child == UNVISITED)
        staging, parent_state = _parent_state(
            tree.state_layout, words, _slot_major_row(parent), staging
        )
        step = transition(
            net,
            env,
            parent_state,
            action,
            jax.vmap(jax.random.fold_in, (0, None))(key, index),
            search.gamma,
        )
        store = expand & (tree.num_nodes < capacity)
        slot = jnp.where(store, tree.num_nodes, capacity)
        tree = _store_node(tree, slot, parent, action, step, selection_prior(step.evaluation))
        words = _store_state(words, slot, pack_state(tree.state_layout, step.state))
        tree = eqx.tree_at(lambda t: t.num_nodes, tree, tree.num_nodes + store.astype(jnp.int32))
        # The leaf: a new node, backed up with its network value; or, if it could not be
        # stored, the return through the edge to it, credited to its parent (one position
        # up); or the stored node where the descent stopped (terminal, depth limit), with
        # its own network value (zero when terminal).
        leaf = jnp.where(store, slot, jnp.where(expand, parent, jnp.maximum(child, 0)))
        leaf = jnp.where(has_edge, leaf, ROOT_INDEX)
        leaf_value = jnp.where(
            store,
            step.evaluation.value,
            jnp.where(
                expand,
                step.reward + step.discount * step.evaluation.value,
                _take(_flat(tree.node_stats), roots + leaf)[:, RAW_VALUE],
            ),
        )
        end = jnp.where(expand & ~store, num_edges - 1, num_edges)
        tree = _backup(tree, path, end, roots + leaf, leaf_value)
        if root_select is not None:
            root_hot = actions == root_action[:, None]
            search_visits = search_visits + (root_hot & root_moves[:, None]).astype(jnp.int32)
        return tree, words, search_visits, path, staging

    # The nodes' states, in `_slot_major` order for the search and in the tree's at the end
    # (`_start` leaves them alone). Without reuse nothing in the tree's words is kept, and
    # their array serves as the buffer as it is.
    if search.reuse_tree:
        words = _slot_major(tree.state_words)
    else:
        words = tree.state_words.reshape(capacity * batch_size, -1)
    words = jax.lax.dynamic_update_slice(words, pack_state(tree.state_layout, env_state), (0, 0))
    search_visits = jnp.zeros((batch_size, num_actions), jnp.int32)
    # One spare row, so that the updates in `_parent_state` never cover a whole buffer (XLA
    # would then drop the buffer and fuse the update into its readers).
    packed = jnp.zeros((batch_size + 1, tree.state_layout.words), jnp.uint32)
    leaf_staging = unpack_state(tree.state_layout, packed)
    if tree.state_layout.words <= _LEAF_GATHER_MAX_WORDS:
        packed = None
    path = _path_buffer(batch_size, max_depth)
    carry = (tree, words, search_visits, path, (packed, leaf_staging))
    tree, words, search_visits, *_ = jax.lax.fori_loop(0, search.num_simulations, simulation, carry)
    return eqx.tree_at(
        lambda t: t.state_words, tree, _batch_major(words, batch_size)
    ), search_visits


#: States of at most this many words are gathered leaf by leaf (`_parent_state`).
_LEAF_GATHER_MAX_WORDS = 256


def _parent_state(
    layout: StateLayout,
    words: UInt32[Array, "nodes words"],
    rows: Int[Array, " batch"],
    staging: tuple[Any, Any],
) -> tuple[tuple[Any, Any], EnvState]:
    """The states in rows `rows` of `_slot_major` words, written into `staging` (a buffer
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
    larger ones into the buffer of packed rows first, unpacked from there. (Connect four,
    50 words: PUCT 1.0 ms and Gumbel 0.7 ms faster leaf by leaf; go, 1086 words, batch 16:
    5-8% slower.)
    """
    packed, leaves = staging
    if packed is None:
        unpacked = unpack_rows(layout, words, rows)
    else:
        packed = jax.lax.dynamic_update_slice(packed, _take(words, rows), (0, 0))
        unpacked = unpack_state(layout, packed[: rows.shape[0]])
    leaves = jax.tree.map(
        lambda buffer, x: jax.lax.dynamic_update_slice_in_dim(buffer, x, 0, axis=0),
        leaves,
        unpacked,
    )
    return (packed, leaves), jax.tree.map(lambda buffer: buffer[: rows.shape[0]], leaves)


def _prior_probabilities(
    logits: Float[Array, "batch num_actions"], legal_action_mask: Bool[Array, "batch num_actions"]
) -> Float[Array, "batch num_actions"]:
    # Computed once per node when it is stored, not at every selection through it.
    return jnp.where(legal_action_mask, jax.nn.softmax(logits, axis=-1), -jnp.inf)


def _check_common(num_simulations, max_depth, capacity, gamma, q_normalisation):
    check_positive_int("num_simulations", num_simulations)
    check_optional_positive_int("max_depth", max_depth)
    check_optional_positive_int("capacity", capacity)
    if capacity is not None and capacity < 2:
        raise ValueError(f"capacity must be at least 2 (a root and one child), got {capacity}")
    check_float("gamma", gamma, low=0.0, high=1.0, low_open=True)
    check_choice("q_normalisation", q_normalisation, Q_NORMALISATIONS)


def _default_capacity(num_simulations: int, capacity: int | None, reuse_tree: bool) -> int:
    if capacity is not None:
        return capacity
    # A reused subtree can hold up to one search's worth of nodes before the next begins.
    return (2 if reuse_tree else 1) * num_simulations + 1


class PUCT(AbstractSearch):
    """AlphaZero search: PUCT selection, Dirichlet noise at the root, visit-count targets."""

    # On CPU the last rows of each descent go on one at a time (`_finish_by_row`).
    _row_finish: ClassVar[bool] = True

    num_simulations: int = eqx.field(static=True)
    max_depth: int | None = eqx.field(static=True)
    capacity: int = eqx.field(static=True)
    reuse_tree: bool = eqx.field(static=True)
    gamma: float = eqx.field(static=True)
    c_init: float = eqx.field(static=True)
    c_base: float = eqx.field(static=True)
    dirichlet_alpha: float = eqx.field(static=True)
    dirichlet_fraction: float = eqx.field(static=True)
    temperature: float = eqx.field(static=True)
    q_normalisation: str = eqx.field(static=True)

    def __init__(
        self,
        num_simulations: int,
        *,
        max_depth: int | None = None,
        capacity: int | None = None,
        reuse_tree: bool = False,
        gamma: float = 1.0,
        c_init: float = 1.25,
        c_base: float = 19652.0,
        dirichlet_alpha: float = 0.3,
        dirichlet_fraction: float = 0.25,
        temperature: float = 1.0,
        q_normalisation: str = "siblings",
    ):
        """**Arguments:**

        - `num_simulations`: simulations per search.
        - `max_depth`: most edges from the root to a leaf (default: no limit but capacity).
        - `capacity`: node slots per tree (default `num_simulations + 1`, or
          `2 * num_simulations + 1` with `reuse_tree`). A full tree keeps searching: new
          leaves are evaluated and backed up but not stored.
        - `reuse_tree`: keep the subtree under the played action for the next search.
        - `gamma`: discount per move, in (0, 1].
        - `c_init`, `c_base`: exploration constants of the PUCT rule,
          `c = c_init + log((N + c_base + 1) / c_base)` (as in the AlphaZero paper and mctx).
        - `dirichlet_alpha`, `dirichlet_fraction`: root noise over the legal actions;
          fraction 0 switches it off.
        - `temperature`: the action is sampled proportionally to `visits ** (1 /
          temperature)`; 0 takes the most visited action (lowest index on ties).
        - `q_normalisation`: `"siblings"` (mctx's default) or `"tree"` (MuZero's min/max
          over the whole tree, for single-player games with rewards).
        """
        _check_common(num_simulations, max_depth, capacity, gamma, q_normalisation)
        check_float("c_init", c_init, low=0.0)
        check_float("c_base", c_base, low=0.0, low_open=True)
        check_float("dirichlet_alpha", dirichlet_alpha, low=0.0, low_open=True)
        check_float("dirichlet_fraction", dirichlet_fraction, low=0.0, high=1.0)
        check_float("temperature", temperature, low=0.0)
        self.num_simulations = num_simulations
        self.max_depth = max_depth
        self.capacity = _default_capacity(num_simulations, capacity, reuse_tree)
        self.reuse_tree = bool(reuse_tree)
        self.gamma = float(gamma)
        self.c_init = float(c_init)
        self.c_base = float(c_base)
        self.dirichlet_alpha = float(dirichlet_alpha)
        self.dirichlet_fraction = float(dirichlet_fraction)
        self.temperature = float(temperature)
        self.q_normalisation = q_normalisation

    def init(self, env: AbstractEnv, batch_size: int) -> Tree:
        check_players(env)
        check_positive_int("batch_size", batch_size)
        return empty_tree(env, batch_size, self.capacity)

    def _selection_prior(self, evaluation: Evaluation) -> Float[Array, "batch num_actions"]:
        return _prior_probabilities(evaluation.logits, evaluation.legal_action_mask)

    def _select(self, node: _Node) -> tuple[Int[Array, " batch"], Float[Array, " batch"]]:
        node_visits = node.stats[:, VISITS]
        exploration = self.c_init + jnp.log((node_visits + self.c_base + 1.0) / self.c_base)
        coefficient = jnp.sqrt(node_visits) * exploration
        policy_score = coefficient[:, None] * node.prior / (node.visits + 1.0)
        value_score = puct_value_score(
            node.q, node.visits > 0, node.stats[:, VALUE], node.tree_low, node.tree_high
        )
        return _masked_best(value_score + policy_score, node.legal_action_mask)

    def __call__(
        self,
        net: Any,
        env: AbstractEnv,
        tree: Tree,
        env_state: EnvState,
        *,
        key: PRNGKey | PRNGKeys,
    ) -> SearchOutput:
        check_players(env)
        keys = _split_rows(row_keys(key, _batch_size(env_state)), 3)
        noise_key, search_key, action_key = keys[:, 0], keys[:, 1], keys[:, 2]
        evaluation = evaluate(net, env, env_state)
        legal = evaluation.legal_action_mask
        # Noise is mixed into the prior over the legal actions only; like mctx, the noisy
        # probabilities become logits again (also when the fraction is 0).
        gammas = jax.vmap(lambda k: _random.gamma(k, self.dirichlet_alpha, legal.shape[1:]))(
            noise_key
        )
        gammas = jnp.where(legal, gammas, 0.0)
        noise = gammas / jnp.maximum(jnp.sum(gammas, axis=-1, keepdims=True), 1e-30)
        prior = jax.nn.softmax(evaluation.logits, axis=-1)
        noisy = (1.0 - self.dirichlet_fraction) * prior + self.dirichlet_fraction * noise
        logits = jnp.log(jnp.maximum(noisy, jnp.finfo(jnp.float32).tiny))
        logits = jnp.where(legal, logits - jnp.max(logits, axis=-1, keepdims=True), ILLEGAL_LOGIT)
        root_prior = _prior_probabilities(logits, legal)
        tree = _start(tree, evaluation, root_prior, self.reuse_tree)

        # The root is selected like every other node, inside the descent.
        tree, _ = _run(
            self,
            net,
            env,
            tree,
            env_state,
            None,
            self._select,
            self._selection_prior,
            search_key,
        )
        visits = tree.root_child_visits()
        total = jnp.sum(visits, axis=-1, keepdims=True)
        uniform = legal.astype(jnp.float32) / jnp.sum(legal.astype(jnp.float32), -1, keepdims=True)
        policy_target = jnp.where(
            total > 0,
            visits.astype(jnp.float32) / jnp.maximum(total, 1).astype(jnp.float32),
            uniform,
        )
        if self.temperature == 0.0:
            action = _masked_argmax(policy_target, legal)
        else:
            action_logits = jnp.where(
                policy_target > 0,
                jnp.log(jnp.maximum(policy_target, jnp.finfo(jnp.float32).tiny)) / self.temperature,
                -jnp.inf,
            )
            action = jax.vmap(jax.random.categorical)(action_key, action_logits).astype(jnp.int32)
        return SearchOutput(
            action=action, policy_target=policy_target, root_value=tree.value[:, 0], tree=tree
        )

    def advance(
        self, tree: Tree, action: Int[Array, " batch"], done: Bool[Array, " batch"]
    ) -> Tree:
        if not self.reuse_tree:
            return tree  # every search starts afresh anyway
        return keep_subtree(tree, action, done)


class Gumbel(AbstractSearch):
    """Gumbel MuZero search (Danihelka et al., 2022): Gumbel-top-k and sequential halving at
    the root, deterministic improved-policy selection below it, and policy targets
    `softmax(logits + sigma(completed_q))`."""

    # Not `_finish_by_row`: its loop over this selection rule reads more than XLA:CPU's
    # limit for compiling a loop into one function, and its trees are shallow anyway.
    _row_finish: ClassVar[bool] = False

    num_simulations: int = eqx.field(static=True)
    max_depth: int | None = eqx.field(static=True)
    capacity: int = eqx.field(static=True)
    reuse_tree: bool = eqx.field(static=True)
    gamma: float = eqx.field(static=True)
    max_num_considered_actions: int = eqx.field(static=True)
    gumbel_scale: float = eqx.field(static=True)
    value_scale: float = eqx.field(static=True)
    maxvisit_init: float = eqx.field(static=True)
    rescale_values: bool = eqx.field(static=True)
    use_mixed_value: bool = eqx.field(static=True)
    q_normalisation: str = eqx.field(static=True)

    def __init__(
        self,
        num_simulations: int,
        *,
        max_depth: int | None = None,
        capacity: int | None = None,
        reuse_tree: bool = False,
        gamma: float = 1.0,
        max_num_considered_actions: int = 16,
        gumbel_scale: float = 1.0,
        value_scale: float = 0.1,
        maxvisit_init: float = 50.0,
        rescale_values: bool = True,
        use_mixed_value: bool = True,
        q_normalisation: str = "siblings",
    ):
        """**Arguments:**

        - `num_simulations`, `max_depth`, `capacity`, `reuse_tree`, `gamma`: as
          [`azx.search.PUCT`][].
        - `max_num_considered_actions`: actions sampled by Gumbel-top-k at the root and
          narrowed down by sequential halving.
        - `gumbel_scale`: scale of the Gumbel noise; 0 makes the search deterministic.
        - `value_scale`, `maxvisit_init`: sigma(q) = `(maxvisit_init + max visits) *
          value_scale * q`.
        - `rescale_values`: rescale completed Q to [0, 1] by its min and max.
        - `use_mixed_value`: complete unvisited Q with the mixed value (otherwise the
          network value).
        - `q_normalisation`: `"siblings"` (mctx) or `"tree"`, which widens the rescaling
          range to every Q in the tree.
        """
        _check_common(num_simulations, max_depth, capacity, gamma, q_normalisation)
        check_positive_int("max_num_considered_actions", max_num_considered_actions)
        check_float("gumbel_scale", gumbel_scale, low=0.0)
        check_float("value_scale", value_scale, low=0.0, low_open=True)
        check_float("maxvisit_init", maxvisit_init, low=0.0)
        self.num_simulations = num_simulations
        self.max_depth = max_depth
        self.capacity = _default_capacity(num_simulations, capacity, reuse_tree)
        self.reuse_tree = bool(reuse_tree)
        self.gamma = float(gamma)
        self.max_num_considered_actions = max_num_considered_actions
        self.gumbel_scale = float(gumbel_scale)
        self.value_scale = float(value_scale)
        self.maxvisit_init = float(maxvisit_init)
        self.rescale_values = bool(rescale_values)
        self.use_mixed_value = bool(use_mixed_value)
        self.q_normalisation = q_normalisation

    def init(self, env: AbstractEnv, batch_size: int) -> Tree:
        check_players(env)
        check_positive_int("batch_size", batch_size)
        return empty_tree(env, batch_size, self.capacity)

    def _selection_prior(self, evaluation: Evaluation) -> Float[Array, "batch num_actions"]:
        return _prior_probabilities(evaluation.logits, evaluation.legal_action_mask)

    def _completed_q(self, node: _Node) -> Float[Array, "batch num_actions"]:
        return self._completed_q_parts(node)[0]

    def _completed_q_parts(self, node: _Node) -> tuple[Array, Array, Array]:
        return completed_q_parts(
            node.stats[:, RAW_VALUE],
            node.q,
            node.visits,
            node.prior,
            value_scale=self.value_scale,
            maxvisit_init=self.maxvisit_init,
            rescale_values=self.rescale_values,
            use_mixed_value=self.use_mixed_value,
            tree_low=node.tree_low,
            tree_high=node.tree_high,
        )

    def _select(self, node: _Node) -> tuple[Int[Array, " batch"], Float[Array, " batch"]]:
        # Visit frequencies that track the improved policy (the paper's section 5),
        # softmax(logits + completed Q), computed from the stored prior probabilities as
        # `prior * exp(completed Q)`, normalised.
        completed, top, total = self._completed_q_parts(node)
        legal = node.legal_action_mask
        weights = jnp.where(legal, node.prior * jnp.exp(completed - top[:, None]), 0.0)
        improved = weights / jnp.sum(weights, axis=-1, keepdims=True)
        return _masked_best(improved - node.visits / (1.0 + total[:, None]), legal)

    def _ordered_simulations(
        self,
        table: list,
        schedule: Int[Array, "batch simulations"],
        num_legal: Int[Array, " batch"],
        num_considered: Int[Array, " batch"],
        tree: Tree,
    ) -> Bool[Array, " simulations"] | None:
        """Which simulations must choose the root action by the halving score; the others
        may visit their round's candidates in any order (None: every simulation must).

        A round of sequential halving that visits every action holding its visit count
        (each round of a phase after its first, and a first round that keeps all of its
        candidates) ends with the same visits whatever their order. Each visit goes into a
        different root child's subtree, and below the root a selection reads only its own
        subtree (siblings normalisation), so each subtree sees the same simulations in the
        same order, and the search ends with the same statistics and the same choices;
        only the numbering of the slots and the rounding of the root's running mean value
        can differ (and, in a stochastic environment, which of the independent keys, one
        per simulation, each step draws from). That needs room for every new node: when
        the tree fills up, the order decides which are stored. With the tree-wide
        normalisation every selection reads the whole tree, so the order always matters.
        """
        if self.q_normalisation == "tree":
            return None
        halving = jnp.asarray(halving_choices_table(table), bool)[num_considered]
        first_round_choice = (schedule == 0) & (num_legal > num_considered)[:, None]
        roomy = jnp.all(tree.num_nodes + self.num_simulations <= tree.capacity)
        return jnp.any(halving | first_round_choice, axis=0) | ~roomy

    def _halving_choice(
        self,
        considered_visits: Int[Array, " batch"],
        search_visits: Int[Array, "batch num_actions"],
        gumbel: Float[Array, "batch num_actions"],
        logits: Float[Array, "batch num_actions"],
        completed: Float[Array, "batch num_actions"] | float,
        legal: Bool[Array, "batch num_actions"],
    ) -> Int[Array, " batch"]:
        """The legal action with the best halving score `gumbel + logits + completed`
        among those with exactly the visit count the schedule asks for."""
        score = jnp.maximum(ILLEGAL_LOGIT, gumbel + logits + completed)
        score = jnp.where(search_visits == considered_visits[:, None], score, -jnp.inf)
        return _masked_argmax(score, legal)

    def __call__(
        self,
        net: Any,
        env: AbstractEnv,
        tree: Tree,
        env_state: EnvState,
        *,
        key: PRNGKey | PRNGKeys,
    ) -> SearchOutput:
        check_players(env)
        keys = _split_rows(row_keys(key, _batch_size(env_state)), 2)
        gumbel_key, search_key = keys[:, 0], keys[:, 1]
        evaluation = evaluate(net, env, env_state)
        legal = evaluation.legal_action_mask
        logits = evaluation.logits
        logits = jnp.where(legal, logits - jnp.max(logits, axis=-1, keepdims=True), ILLEGAL_LOGIT)
        gumbel = self.gumbel_scale * jax.vmap(
            lambda k: jax.random.gumbel(k, logits.shape[1:], jnp.float32)
        )(gumbel_key)
        root_prior = _prior_probabilities(logits, legal)
        tree = _start(tree, evaluation, root_prior, self.reuse_tree)

        table = considered_visits_table(self.max_num_considered_actions, self.num_simulations)
        num_legal = jnp.sum(legal.astype(jnp.int32), axis=-1)
        num_considered = jnp.minimum(self.max_num_considered_actions, num_legal)

        # Each row's schedule, indexed by simulation: a search adds one visit at the root
        # per simulation, unless the root is terminal, where the choice changes nothing.
        schedule = jnp.asarray(table, jnp.int32)[num_considered]
        ordered = self._ordered_simulations(table, schedule, num_legal, num_considered, tree)

        def root_select(tree, index, search_visits, tree_range):
            considered = jax.lax.dynamic_index_in_dim(schedule, index, axis=1, keepdims=False)

            def choose(completed):
                return self._halving_choice(
                    considered, search_visits, gumbel, logits, completed, legal
                )

            def by_score():
                # The root's prior as a constant rather than read from the tree (it does
                # not change during the search), so that no simulation gathers it.
                root = eqx.tree_at(lambda n: n.prior, _root_node(tree, tree_range), root_prior)
                return choose(self._completed_q(root))

            def in_any_order():
                # Without completed Q the score is a loop constant, computed once.
                return choose(0.0)

            if ordered is None:
                return by_score()
            return jax.lax.cond(ordered[index], by_score, in_any_order)

        tree, search_visits = _run(
            self,
            net,
            env,
            tree,
            env_state,
            root_select,
            self._select,
            self._selection_prior,
            search_key,
        )
        tree_range = _tree_q_range(tree) if self.q_normalisation == "tree" else None
        root = _root_node(tree, tree_range)
        completed = self._completed_q(root)
        most_visits = jnp.max(search_visits, axis=-1)
        action = self._halving_choice(most_visits, search_visits, gumbel, logits, completed, legal)
        policy_target = jax.nn.softmax(jnp.where(legal, logits + completed, ILLEGAL_LOGIT), axis=-1)
        return SearchOutput(
            action=action, policy_target=policy_target, root_value=tree.value[:, 0], tree=tree
        )

    def advance(
        self, tree: Tree, action: Int[Array, " batch"], done: Bool[Array, " batch"]
    ) -> Tree:
        if not self.reuse_tree:
            return tree  # every search starts afresh anyway
        return keep_subtree(tree, action, done)
