"""The two platform-specific steps of a simulation, descend and back up, each in two
variants that give the same arrays bit for bit:

- lockstep (`azx.search._lockstep`): all batch rows together, a level or a few path
  positions per loop iteration; right wherever a kernel launch is cheap next to the work
  it does for the whole batch (GPU, TPU) and on XLA:CPU in games with many actions;
- row (`azx.search._rows`): one batch row at a time, in scalars, compiled by XLA:CPU into
  one function whose cost follows each row's own path length.

A native search picks them with its `kernels` option (`Kernels`), read here.
"""

from typing import Literal, TypeAlias

import jax
from jaxtyping import Array, Bool, Float, Int

from . import _lockstep, _rows
from ._select import Select
from ._tree import Tree


#: How a native search runs its descent and backup: `"auto"` (row loops on XLA:CPU in games
#: with at most `ROW_LOOPS_MAX_ACTIONS` actions, lockstep otherwise), `"row"` or `"lockstep"`.
Kernels: TypeAlias = Literal["auto", "row", "lockstep"]
KERNELS = ("auto", "row", "lockstep")

#: With row loops, the lockstep descent stops once at most `batch_size // ROW_FINISH` rows
#: are still descending, and the row loop finishes them.
ROW_FINISH = 4
#: `"auto"` uses the row loops in games with at most this many actions. With more, an
#: iteration of the row descent reads more than XLA:CPU compiles into one function (1 KB),
#: and as a loop of kernels it is far slower than lockstep (a test pins that this many
#: still compile into one); the row backup, though faster alone, was measured to make whole
#: searches slower in go_9x9 (82 actions).
ROW_LOOPS_MAX_ACTIONS = 12

path_buffer = _lockstep.path_buffer


def _auto_rows(num_actions: int) -> bool:
    """Whether `"auto"` uses the row loops on XLA:CPU in a game with `num_actions` actions."""
    return num_actions <= ROW_LOOPS_MAX_ACTIONS


def descend(
    kernels: Kernels,
    tree: Tree,
    select: Select,
    tree_range,
    max_depth: int,
    root: tuple[Int[Array, " batch"], Bool[Array, " batch"]] | None,
    path: Int[Array, "batch columns"],
    *,
    rows_finish: bool,
) -> tuple[Int[Array, "batch columns"], Int[Array, " batch"]]:
    """Each row's descent from the root to a leaf: the edges taken, written into `path`
    (column `p + 1` for the `p`-th edge), and their number; see
    `azx.search._lockstep.descend`.

    `rows_finish`: whether `select` is cheap enough to finish the last rows' descents in
    the row loop (PUCT's rule is; Gumbel's reads more than XLA:CPU compiles into one
    function, and its trees are shallow anyway). Without it the descent is lockstep
    whatever `kernels` says.
    """

    def run(finish_by_row: bool):
        batch_size = tree.children.shape[0]
        leave = batch_size // ROW_FINISH if finish_by_row else 0
        depth, cursor, new_path, edges = _lockstep.descend(
            tree, select, tree_range, max_depth, root, path, leave
        )
        if finish_by_row:
            return _rows.finish_descent(
                tree, select, tree_range, max_depth, depth, cursor, new_path, edges
            )
        return new_path, edges

    if kernels == "auto":
        cpu_rows = rows_finish and _auto_rows(tree.children.shape[2])
        return jax.lax.platform_dependent(cpu=lambda: run(cpu_rows), default=lambda: run(False))
    return run(rows_finish and kernels == "row")


def backup(
    kernels: Kernels,
    tree: Tree,
    path: Int[Array, "batch columns"],
    end: Int[Array, " batch"],
    leaf: Int[Array, " batch"],
    leaf_value: Float[Array, " batch"],
) -> Tree:
    """Add one visit and one return to the node of every position `0..end` of `path`.

    `path` is a `path_buffer`: column `p + 1` holds position `p`, the edge out of the
    `p`-th node, so that node's row is `path[:, p + 1] // num_actions` and the edge into it
    is `path[:, p]`; but the node at position `end` is in flat row `leaf` (of
    `flat(tree.node_stats)`), whatever column `end + 1` holds, and what columns past it
    hold does not matter. The returns are computed from the leaf up,
    `G_p = reward_{p+1} + discount_{p+1} * G_{p+1}` (the same order of operations as
    mctx), and each node's mean value and visit count are updated, and the visits and Q of
    the edge into it in its parent's row.
    """
    args = (tree, path, end, leaf, leaf_value)
    if kernels == "auto":
        cpu = _rows.backup if _auto_rows(tree.children.shape[2]) else _lockstep.backup
        return jax.lax.platform_dependent(*args, cpu=cpu, default=_lockstep.backup)
    return (_rows.backup if kernels == "row" else _lockstep.backup)(*args)
