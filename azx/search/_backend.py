"""Backends: how the native search's descent, backup and node states run on a platform.

Every backend gives the same arrays bit for bit, at different speeds:

- [`azx.search.LockstepBackend`][]: all batch rows together, a level (descent) or a few
  path positions (backup) per loop iteration (`azx.search._lockstep`); right wherever a
  kernel launch is cheap next to the work it does for the whole batch (GPU, TPU), and on
  XLA:CPU in games with many actions;
- [`azx.search.RowBackend`][]: one batch row at a time, in scalars (`azx.search._rows`),
  which XLA:CPU compiles into one function whose cost follows each row's own path length;
- [`azx.search.UnrolledBackend`][]: the lockstep kernels with several levels (descent)
  and more path positions (backup) per loop iteration, fewer iterations for more
  arithmetic: for accelerators, where each iteration's condition is read back by the host;
- [`azx.search.PlatformBackend`][] (the default): the row kernels on XLA:CPU in games with
  at most `ROW_LOOPS_MAX_ACTIONS` actions, lockstep everywhere else, chosen when the search
  is compiled.

All of them keep the nodes' environment states in the same store (`azx.search._store`):
one row of packed words per node.
"""

import abc
from typing import Any

import equinox as eqx
import jax
from jaxtyping import Array, Bool, Float, Int

from .._types import EnvState
from . import _lockstep, _rows
from ._store import (
    batch_major,
    pack_state,
    parent_state,
    slot_major,
    slot_major_row,
    staging_buffers,
    store_state,
)
from ._tree import QRange, Tree


#: With row loops, the lockstep descent stops once at most `batch_size // ROW_FINISH` rows
#: are still descending, and the row loop finishes them.
ROW_FINISH = 4
#: [`azx.search.PlatformBackend`][] uses the row kernels on XLA:CPU in games with at most
#: this many actions. With more, an iteration of the row descent reads more than XLA:CPU
#: compiles into one function (1 KB), and as a loop of kernels it is far slower than
#: lockstep (a test pins that this many still compile into one); the row backup, though
#: faster alone, makes whole searches slower in games with many actions (go_9x9's 82).
ROW_LOOPS_MAX_ACTIONS = 12

#: The descent's root: each row's action there and whether the descent goes through it,
#: or None to select at the root like everywhere else.
RootEdge = tuple[Int[Array, " batch"], Bool[Array, " batch"]] | None


class AbstractBackend(eqx.Module):
    """How a native search runs the two steps of a simulation that depend on the platform
    (`descend`, `backup`), and where it keeps the nodes' states while it searches.

    Only `descend` and `backup` differ between backends; the state store is the same for
    all (a search's trees are then interchangeable between backends).
    """

    @abc.abstractmethod
    def descend(
        self,
        tree: Tree,
        rule: Any,
        q_range: QRange,
        max_depth: int,
        root: RootEdge,
        path: Int[Array, "batch columns"],
    ) -> tuple[Int[Array, "batch columns"], Int[Array, " batch"]]:
        """Each row's descent from the root to a leaf by `rule`: the edges taken, written
        into `path` (column `p + 1` for the `p`-th edge, as flat indices
        `(b * capacity + node) * num_actions + action`), and their number. A row stops at an
        edge without a node, a terminal node, a node with no legal action or after
        `max_depth` edges. `q_range`: the Q transform's range, or None."""

    @abc.abstractmethod
    def backup(
        self,
        tree: Tree,
        path: Int[Array, "batch columns"],
        end: Int[Array, " batch"],
        leaf: Int[Array, " batch"],
        leaf_value: Float[Array, " batch"],
    ) -> Tree:
        """Add one visit and one return to the node of every position `0..end` of `path`.

        The node at position `end` is in flat row `leaf` (of the tree's `[batch * capacity]`
        rows), whatever `path` holds there. The returns are computed from the leaf up,
        `G_p = reward_{p+1} + discount_{p+1} * G_{p+1}` (mctx's order of operations), and
        each node's mean value and visit count are updated, and the visits and Q of the edge
        into it in its parent's row.
        """

    def path_buffer(self, batch_size: int, max_depth: int) -> Int[Array, "batch columns"]:
        """The buffer `descend` writes each simulation's path into (one per search)."""
        return _lockstep.path_buffer(batch_size, max_depth)

    def open_states(self, tree: Tree, root_state: EnvState, reuse_tree: bool) -> Any:
        """The store of the nodes' states for one search: the tree's states with the roots'
        put in slot 0 (kept in `slot_major` order while searching: a simulation writes the
        same slot in most rows, and those rows are then adjacent), and the buffers that
        parents' states are read into."""
        layout = tree.state_layout
        if reuse_tree:
            words = slot_major(tree.state_words)
        else:  # nothing in the tree's words is kept: their array serves as it is
            words = tree.state_words.reshape(tree.capacity * tree.batch_size, -1)
        words = jax.lax.dynamic_update_slice(words, pack_state(layout, root_state), (0, 0))
        return words, staging_buffers(layout, tree.batch_size)

    def read_states(self, tree: Tree, store: Any, slot: Int[Array, " batch"]):
        """The state of each row's node `slot`, and the store."""
        words, staging = store
        staging, state = parent_state(tree.state_layout, words, slot_major_row(slot), staging)
        return (words, staging), state

    def write_states(self, tree: Tree, store: Any, slot: Int[Array, " batch"], state: EnvState):
        """The store with each row's `state` in its node `slot` (out of bounds: nothing)."""
        words, staging = store
        return store_state(words, slot, pack_state(tree.state_layout, state)), staging

    def close_states(self, tree: Tree, store: Any) -> Tree:
        """`tree` with the store's states."""
        words, _ = store
        return eqx.tree_at(lambda t: t.state_words, tree, batch_major(words, tree.batch_size))


def _descend(tree, rule, q_range, max_depth, root, path, finish_by_row: bool):
    batch_size = tree.children.shape[0]
    leave = batch_size // ROW_FINISH if finish_by_row else 0
    depth, cursor, new_path, edges = _lockstep.descend(
        tree, rule, q_range, max_depth, root, path, leave
    )
    if finish_by_row:
        return _rows.finish_descent(tree, rule, q_range, max_depth, depth, cursor, new_path, edges)
    return new_path, edges


class LockstepBackend(AbstractBackend):
    """All batch rows descend and back up together (`azx.search._lockstep`): the backend
    for GPUs and TPUs, and for XLA:CPU in games with many actions."""

    def descend(self, tree, rule, q_range, max_depth, root, path):
        return _descend(tree, rule, q_range, max_depth, root, path, finish_by_row=False)

    def backup(self, tree, path, end, leaf, leaf_value):
        return _lockstep.backup(tree, path, end, leaf, leaf_value)


class UnrolledBackend(AbstractBackend):
    """Lockstep kernels that spend arithmetic to save loop iterations, for accelerators:
    each iteration of the descent's loop descends `levels` levels (rows that have stopped
    pass through them without effect), and each of the backup's writes `backup_chunk`
    path positions. On a GPU every iteration of a data-dependent loop ends with its
    condition read back by the host; with fewer of them, larger kernels do the same work.
    The same arrays as [`azx.search.LockstepBackend`][], bit for bit."""

    levels: int = eqx.field(default=4, static=True)
    """Descent levels per loop iteration."""
    backup_chunk: int = eqx.field(default=16, static=True)
    """Path positions the backup writes per loop iteration."""

    def __check_init__(self):
        for name in ("levels", "backup_chunk"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")

    def path_buffer(self, batch_size, max_depth):
        return _lockstep.path_buffer(batch_size, max_depth, self.backup_chunk)

    def descend(self, tree, rule, q_range, max_depth, root, path):
        _, _, new_path, edges = _lockstep.descend(
            tree, rule, q_range, max_depth, root, path, levels=self.levels
        )
        return new_path, edges

    def backup(self, tree, path, end, leaf, leaf_value):
        return _lockstep.backup(tree, path, end, leaf, leaf_value, chunk=self.backup_chunk)


class RowBackend(AbstractBackend):
    """One batch row at a time, in scalars (`azx.search._rows`): XLA:CPU compiles the loops
    into one function whose cost follows each row's own path. The backup always runs by
    row; the descent runs in lockstep until few rows are left, which the row loop finishes
    when the rule allows it (`row_loop_descent`). On other platforms, or with more than
    `ROW_LOOPS_MAX_ACTIONS` actions, far slower than lockstep."""

    def descend(self, tree, rule, q_range, max_depth, root, path):
        by_row = rule.row_loop_descent
        return _descend(tree, rule, q_range, max_depth, root, path, finish_by_row=by_row)

    def backup(self, tree, path, end, leaf, leaf_value):
        return _rows.backup(tree, path, end, leaf, leaf_value)


def _cpu_rows(tree: Tree) -> bool:
    """Whether `PlatformBackend` uses the row kernels on XLA:CPU for `tree`'s game."""
    return tree.children.shape[2] <= ROW_LOOPS_MAX_ACTIONS


class PlatformBackend(AbstractBackend):
    """The default backend, chosen by platform with `jax.lax.platform_dependent` when the
    search is compiled: on XLA:CPU the row kernels in games with at most
    `ROW_LOOPS_MAX_ACTIONS` actions (unless `cpu_rows` is off) and lockstep otherwise; on
    every other platform [`azx.search.UnrolledBackend`][] at its default sizes, which on a
    GPU takes 0.5-0.75x lockstep's time for PUCT and about the same for Gumbel
    (`benchmarks.backends`). Every choice gives the same arrays, bit for bit."""

    cpu_rows: bool = eqx.field(default=True, static=True)
    """Whether XLA:CPU runs the row kernels in games with few actions. Off for searches
    batched under `vmap` (several seeds at once), where the row loops would run every
    mapped row in every iteration and the lockstep kernels batch as plain array code."""

    def path_buffer(self, batch_size, max_depth):
        return _ACCELERATOR.path_buffer(batch_size, max_depth)

    def descend(self, tree, rule, q_range, max_depth, root, path):
        args = (tree, rule, q_range, max_depth, root, path)
        cpu = RowBackend() if self._rows(tree) else LockstepBackend()
        return jax.lax.platform_dependent(
            cpu=lambda: cpu.descend(*args), default=lambda: _ACCELERATOR.descend(*args)
        )

    def backup(self, tree, path, end, leaf, leaf_value):
        args = (tree, path, end, leaf, leaf_value)
        cpu = _rows.backup if self._rows(tree) else _lockstep.backup
        return jax.lax.platform_dependent(*args, cpu=cpu, default=_ACCELERATOR.backup)

    def _rows(self, tree: Tree) -> bool:
        return self.cpu_rows and _cpu_rows(tree)


#: `PlatformBackend`'s backend off the CPU.
_ACCELERATOR = UnrolledBackend()
