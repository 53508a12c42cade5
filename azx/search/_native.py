"""Native batched MCTS: AlphaZero PUCT and Gumbel MuZero over the arrays of `Tree`.

One simulation, for the whole batch at once:

1. descend: a `while_loop` over depth (all roots move in lockstep) whose carry is the
   current node, the recorded path and a few flags, never the tree;
2. expand: one batched environment step and network call from the leaf's parent;
3. back up: the returns along the recorded path are computed from the leaf upwards with
   `[batch]`-sized arithmetic, then every path node's statistics are updated by a single
   scatter.
"""

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

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
    EPSILON,
    UNROLL_ACTIONS,
    argmax_over_actions,
    completed_q,
    considered_visits_table,
    puct_value_score,
)
from ._tree import ROOT_INDEX, UNVISITED, Tree, empty_tree, keep_subtree


class _Children(eqx.Module):
    """Statistics of the children of one node per batch element, read for selection."""

    visits: Float[Array, "batch num_actions"]
    q: Float[Array, "batch num_actions"]
    prior: Float[Array, "batch num_actions"]
    """Selection prior: probabilities (PUCT) or logits (Gumbel); `-inf` where illegal."""
    legal_action_mask: Bool[Array, "batch num_actions"]
    node_visits: Float[Array, " batch"]
    node_value: Float[Array, " batch"]
    raw_value: Float[Array, " batch"]
    tree_low: Float[Array, " batch"] | None
    tree_high: Float[Array, " batch"] | None


def _take_rows(x: Array, node: Int[Array, " batch"]) -> Array:
    """`x[b, node[b]]` for every row `b` of a `[batch, capacity, ...]` array.

    Indexing the flattened `[batch * capacity, ...]` array with one index per row lowers
    to a gather of contiguous slices, about twice as fast on XLA:CPU as a two-index gather.
    """
    batch_size, capacity = x.shape[:2]
    flat = x.reshape((batch_size * capacity,) + x.shape[2:])
    index = jnp.arange(batch_size, dtype=jnp.int32) * capacity + node
    return flat.at[index].get(mode="promise_in_bounds")


def _gather_children(
    tree: Tree,
    node: Int[Array, " batch"],
    tree_range: tuple[Float[Array, " batch"], Float[Array, " batch"]] | None,
) -> _Children:
    # Every array read here is small enough (per batch row and node) that XLA:CPU runs the
    # gather on one thread: a gather split across threads pays a wake-up each level.
    prior = _take_rows(tree.selection_prior, node)
    return _Children(
        visits=_take_rows(tree.edge_visits, node),
        q=_take_rows(tree.edge_q, node),
        prior=prior,
        legal_action_mask=prior > -jnp.inf,
        node_visits=_take_rows(tree.visits, node).astype(jnp.float32),
        node_value=_take_rows(tree.value, node),
        raw_value=_take_rows(tree.raw_value, node),
        tree_low=None if tree_range is None else tree_range[0],
        tree_high=None if tree_range is None else tree_range[1],
    )


def _root_children(tree: Tree, tree_range=None) -> _Children:
    prior = tree.selection_prior[:, ROOT_INDEX]
    return _Children(
        visits=tree.edge_visits[:, ROOT_INDEX],
        q=tree.edge_q[:, ROOT_INDEX],
        prior=prior,
        legal_action_mask=prior > -jnp.inf,
        node_visits=tree.visits[:, ROOT_INDEX].astype(jnp.float32),
        node_value=tree.value[:, ROOT_INDEX],
        raw_value=tree.raw_value[:, ROOT_INDEX],
        tree_low=None if tree_range is None else tree_range[0],
        tree_high=None if tree_range is None else tree_range[1],
    )


def _tree_q_range(tree: Tree) -> tuple[Float[Array, " batch"], Float[Array, " batch"]]:
    """Min and max Q over every visited edge of each tree (MuZero's normalisation)."""
    slots = jnp.arange(tree.capacity)[None, :]
    edge = (slots != ROOT_INDEX) & (slots < tree.num_nodes[:, None]) & (tree.visits > 0)
    q = tree.reward + tree.discount * tree.value
    low = jnp.min(jnp.where(edge, q, jnp.inf), axis=1)
    high = jnp.max(jnp.where(edge, q, -jnp.inf), axis=1)
    return low, high


def _masked_argmax(
    score: Float[Array, "batch num_actions"], legal_action_mask: Bool[Array, "batch num_actions"]
) -> Int[Array, " batch"]:
    # Ties go to the lowest index, so a search without noise is deterministic.
    return argmax_over_actions(jnp.where(legal_action_mask, score, -jnp.inf))


class _Path(eqx.Module):
    """What one descent found, per batch element."""

    path: Int[Array, "batch path_length"]
    """Slots from the root down; `capacity` (out of bounds) past the end."""
    last: Int[Array, " batch"]
    """Position in `path` of the last stored node reached."""
    node: Int[Array, " batch"]
    """That node's slot."""
    action: Int[Array, " batch"]
    """The unvisited action chosen there, when `expand`."""
    expand: Bool[Array, " batch"]
    """Whether the descent stopped at an unvisited legal edge that needs a new node."""


def _descend(
    tree: Tree,
    root_action: Int[Array, " batch"],
    root_legal: Bool[Array, " batch"],
    select: Callable[[_Children], Int[Array, " batch"]],
    tree_range,
    max_depth: int,
    path_length: int,
) -> _Path:
    capacity = tree.capacity
    batch_size = tree.batch_size
    # Flat views: one index per row is the cheapest gather on XLA:CPU.
    flat_rows = jnp.arange(batch_size, dtype=jnp.int32) * capacity
    children = tree.children.reshape(-1)
    terminal = tree.terminal.reshape(-1)
    num_actions = tree.children.shape[2]

    def step(node, active, action, legal, depth, path, last, expand):
        child = children.at[(flat_rows + node) * num_actions + action].get(mode="promise_in_bounds")
        has_child = child != UNVISITED
        expand = expand | (active & ~has_child & legal)
        moved = active & has_child
        node = jnp.where(moved, child, node)
        column = jnp.where(moved, child, capacity)
        path = jax.lax.dynamic_update_slice_in_dim(path, column[:, None], depth + 1, axis=1)
        last = jnp.where(moved, depth + 1, last)
        active = moved & ~terminal.at[flat_rows + node].get(mode="promise_in_bounds")
        return node, active, path, last, expand

    root = jnp.full(batch_size, ROOT_INDEX, jnp.int32)
    path = jnp.full((batch_size, path_length), capacity, jnp.int32)
    path = path.at[:, 0].set(ROOT_INDEX)
    active = ~tree.terminal[:, ROOT_INDEX]
    zero = jnp.zeros(batch_size, jnp.int32)
    node, still, path, last, expand = step(
        root, active, root_action, root_legal, 0, path, zero, jnp.zeros(batch_size, jnp.bool_)
    )
    action = root_action

    def cond(carry):
        _, active, _, depth, _, _, _ = carry
        return jnp.any(active) & (depth < max_depth)

    def body(carry):
        node, active, action, depth, path, last, expand = carry
        children_stats = _gather_children(tree, node, tree_range)
        chosen = select(children_stats)
        legal = jnp.any(
            children_stats.legal_action_mask
            & (jnp.arange(num_actions, dtype=jnp.int32)[None, :] == chosen[:, None]),
            axis=1,
        )
        action = jnp.where(active, chosen, action)
        node, active, path, last, expand = step(
            node, active, action, legal, depth, path, last, expand
        )
        return node, active, action, depth + 1, path, last, expand

    carry = (node, still, action, jnp.int32(1), path, last, expand)
    node, _, action, _, path, last, expand = jax.lax.while_loop(cond, body, carry)
    return _Path(path=path, last=last, node=node, action=action, expand=expand)


def _put_rows(x: Array, slot: Int[Array, " batch"], value: Array) -> Array:
    """`x[b, slot[b]] = value[b]`; a slot out of bounds writes nothing."""
    batch_size, capacity = x.shape[:2]
    flat = x.reshape((batch_size * capacity,) + x.shape[2:])
    index = jnp.where(
        slot < capacity, jnp.arange(batch_size, dtype=jnp.int32) * capacity + slot, flat.shape[0]
    )
    return flat.at[index].set(value, mode="drop").reshape(x.shape)


def _store_node(
    tree: Tree,
    slot: Int[Array, " batch"],
    parent: Int[Array, " batch"],
    action: Int[Array, " batch"],
    evaluation: Evaluation,
    selection_prior: Float[Array, "batch num_actions"],
    reward: Float[Array, " batch"],
    discount: Float[Array, " batch"],
    state: EnvState,
) -> Tree:
    """Write a new node into `slot` (out of bounds: nothing is written)."""
    batch = jnp.arange(tree.batch_size)

    def put(x, v):
        return _put_rows(x, slot, v)

    return eqx.tree_at(
        lambda t: (
            t.visits,
            t.value,
            t.raw_value,
            t.prior_logits,
            t.legal_action_mask,
            t.reward,
            t.discount,
            t.terminal,
            t.parent,
            t.action_from_parent,
            t.children,
            t.edge_visits,
            t.edge_q,
            t.selection_prior,
            t.state,
        ),
        tree,
        (
            put(tree.visits, jnp.zeros_like(slot)),
            put(tree.value, jnp.zeros_like(reward)),
            put(tree.raw_value, evaluation.value),
            put(tree.prior_logits, evaluation.logits),
            put(tree.legal_action_mask, evaluation.legal_action_mask),
            put(tree.reward, reward),
            put(tree.discount, discount),
            put(tree.terminal, evaluation.terminal),
            put(tree.parent, parent),
            put(tree.action_from_parent, action),
            put(tree.children, jnp.full_like(evaluation.logits, UNVISITED, dtype=jnp.int32))
            .at[batch, jnp.where(slot < tree.capacity, parent, tree.capacity), action]
            .set(slot, mode="drop"),
            put(tree.edge_visits, jnp.zeros_like(evaluation.logits)),
            put(tree.edge_q, jnp.zeros_like(evaluation.logits)),
            put(tree.selection_prior, selection_prior),
            jax.tree.map(put, tree.state, state),
        ),
    )


#: Path positions the backup handles per iteration of its loop.
_BACKUP_CHUNK = 4


def _backup(tree: Tree, path: Int[Array, "batch path_length"], end, leaf_value) -> Tree:
    """Add one visit and one return to every node on `path[:, :end + 1]`.

    The returns are computed from the leaf up, `G_k = reward_{k+1} + discount_{k+1} *
    G_{k+1}` (the same order of operations as mctx). A `while_loop` walks the path upwards
    a few positions at a time, starting at the deepest path in the batch, so the work
    follows the real depth rather than `max_depth`; each iteration gathers the statistics of
    its positions, computes their returns and writes them back with one scatter per array
    (the loop carries the arrays it writes, so XLA updates them in place). A node's visits
    and Q are also written into its parent's row of `edge_visits` and `edge_q`.
    """
    batch_size, capacity = tree.visits.shape
    num_actions = tree.children.shape[2]
    chunk = min(_BACKUP_CHUNK, path.shape[1])
    num_chunks = -(-path.shape[1] // chunk)
    # One column above the path (the root's parent) and enough below for whole chunks
    # plus the position under the last one.
    padded = jnp.concatenate(
        [
            jnp.full((batch_size, 1), capacity, jnp.int32),
            path,
            jnp.full((batch_size, num_chunks * chunk + 1 - path.shape[1]), capacity, jnp.int32),
        ],
        axis=1,
    )
    rows = jnp.arange(batch_size, dtype=jnp.int32)[:, None] * capacity
    offsets = jnp.arange(chunk, dtype=jnp.int32)[None, :]
    reward = tree.reward.reshape(-1)
    discount = tree.discount.reshape(-1)
    action_from_parent = tree.action_from_parent.reshape(-1)
    out = batch_size * capacity

    def body(carry):
        j, future, visits, value, edge_visits, edge_q = carry
        start = j * chunk
        # Columns: the parent of the chunk's first position, its positions, the one below.
        window = jax.lax.dynamic_slice_in_dim(padded, start, chunk + 2, axis=1)
        positions = start + offsets
        on_path = positions <= end[:, None]
        flat = rows + jnp.minimum(window, capacity - 1)
        nodes = flat[:, 1 : chunk + 1]
        below = flat[:, 2:]
        below_reward = reward.at[below].get(mode="promise_in_bounds")
        below_discount = discount.at[below].get(mode="promise_in_bounds")
        returns = [None] * chunk
        for i in reversed(range(chunk)):
            future = jnp.where(
                positions[:, i] == end,
                leaf_value,
                below_reward[:, i] + below_discount[:, i] * future,
            )
            returns[i] = future
        returns = jnp.stack(returns, axis=1)
        count = visits.at[nodes].get(mode="promise_in_bounds")
        mean = value.at[nodes].get(mode="promise_in_bounds")
        new_count = count + 1
        new_mean = (mean * count.astype(jnp.float32) + returns) / new_count.astype(jnp.float32)
        target = jnp.where(on_path, nodes, out)
        visits = visits.at[target].set(new_count, mode="drop")
        value = value.at[target].set(new_mean, mode="drop")
        # The edge into each node lives in its parent's row (the previous position).
        action = action_from_parent.at[nodes].get(mode="promise_in_bounds")
        has_parent = on_path & (positions > 0)
        edge = jnp.where(has_parent, flat[:, :chunk] * num_actions + action, out * num_actions)
        node_reward = reward.at[nodes].get(mode="promise_in_bounds")
        node_discount = discount.at[nodes].get(mode="promise_in_bounds")
        edge_visits = edge_visits.at[edge].set(new_count.astype(jnp.float32), mode="drop")
        edge_q = edge_q.at[edge].set(node_reward + node_discount * new_mean, mode="drop")
        return j - 1, future, visits, value, edge_visits, edge_q

    carry = (
        jnp.max(end) // chunk,
        leaf_value,
        tree.visits.reshape(-1),
        tree.value.reshape(-1),
        tree.edge_visits.reshape(-1),
        tree.edge_q.reshape(-1),
    )
    _, _, visits, value, edge_visits, edge_q = jax.lax.while_loop(lambda c: c[0] >= 0, body, carry)
    return eqx.tree_at(
        lambda t: (t.visits, t.value, t.edge_visits, t.edge_q),
        tree,
        (
            visits.reshape(tree.visits.shape),
            value.reshape(tree.value.shape),
            edge_visits.reshape(tree.edge_visits.shape),
            edge_q.reshape(tree.edge_q.shape),
        ),
    )


def _start(
    tree: Tree,
    env_state: EnvState,
    evaluation: Evaluation,
    root_logits: Float[Array, "batch num_actions"],
    root_prior: Float[Array, "batch num_actions"],
    reuse_tree: bool,
) -> Tree:
    """Put the given root states into slot 0, keeping reused statistics where present."""
    num_actions = root_logits.shape[1]
    fresh = tree.num_nodes == 0
    if not reuse_tree:
        fresh = jnp.ones_like(fresh)

    def set_root(x, v):
        return x.at[:, ROOT_INDEX].set(v)

    children = jnp.where(
        fresh[:, None], jnp.full((tree.batch_size, num_actions), UNVISITED), tree.children[:, 0]
    )
    visits = jnp.where(fresh, 1, tree.visits[:, 0])
    value = jnp.where(fresh, evaluation.value, tree.value[:, 0])
    return eqx.tree_at(
        lambda t: (
            t.visits,
            t.value,
            t.raw_value,
            t.prior_logits,
            t.legal_action_mask,
            t.terminal,
            t.children,
            t.edge_visits,
            t.edge_q,
            t.selection_prior,
            t.state,
            t.num_nodes,
        ),
        tree,
        (
            set_root(tree.visits, visits),
            set_root(tree.value, value),
            set_root(tree.raw_value, evaluation.value),
            set_root(tree.prior_logits, root_logits),
            set_root(tree.legal_action_mask, evaluation.legal_action_mask),
            set_root(tree.terminal, evaluation.terminal),
            set_root(tree.children, children),
            set_root(tree.edge_visits, jnp.where(fresh[:, None], 0.0, tree.edge_visits[:, 0])),
            set_root(tree.edge_q, jnp.where(fresh[:, None], 0.0, tree.edge_q[:, 0])),
            set_root(tree.selection_prior, root_prior),
            jax.tree.map(set_root, tree.state, env_state),
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
    root_select: Callable[[Tree, Int[Array, "batch num_actions"], Any], Int[Array, " batch"]],
    interior_select: Callable[[_Children], Int[Array, " batch"]],
    selection_prior: Callable[[Evaluation], Float[Array, "batch num_actions"]],
    key: PRNGKeys,
) -> tuple[Tree, Int[Array, "batch num_actions"]]:
    """Run the simulations. Returns the tree and each root action's visits in this search."""
    capacity = tree.capacity
    max_depth = min(search.max_depth or capacity - 1, capacity - 1)
    path_length = max_depth + 1
    batch = jnp.arange(tree.batch_size)
    actions = jnp.arange(env.num_actions, dtype=jnp.int32)[None, :]

    def simulation(index, carry):
        tree, search_visits = carry
        tree_range = _tree_q_range(tree) if search.q_normalisation == "tree" else None
        root_action = root_select(tree, search_visits, tree_range)
        root_hot = actions == root_action[:, None]
        root_legal = jnp.any(tree.legal_action_mask[:, ROOT_INDEX] & root_hot, axis=1)
        found = _descend(
            tree, root_action, root_legal, interior_select, tree_range, max_depth, path_length
        )
        parent_state = jax.tree.map(lambda x: _take_rows(x, found.node), tree.state)
        step = transition(
            net,
            env,
            parent_state,
            found.action,
            jax.vmap(jax.random.fold_in, (0, None))(key, index),
            search.gamma,
        )
        store = found.expand & (tree.num_nodes < capacity)
        slot = jnp.where(store, tree.num_nodes, capacity)
        tree = _store_node(
            tree,
            slot,
            found.node,
            found.action,
            step.evaluation,
            selection_prior(step.evaluation),
            step.reward,
            step.discount,
            step.state,
        )
        tree = eqx.tree_at(lambda t: t.num_nodes, tree, tree.num_nodes + store.astype(jnp.int32))
        end = found.last + store.astype(jnp.int32)
        path = found.path.at[batch, end].set(jnp.where(store, slot, found.path[batch, end]))
        # The leaf's value: a new node's network value; or, if it could not be stored, the
        # return through the edge to it, credited to its parent; or, at a terminal or
        # depth-limited node, that node's own network value (zero when terminal).
        leaf_value = jnp.where(
            store,
            step.evaluation.value,
            jnp.where(
                found.expand,
                step.reward + step.discount * step.evaluation.value,
                _take_rows(tree.raw_value, found.node),
            ),
        )
        tree = _backup(tree, path, end, leaf_value)
        moved = ~tree.terminal[:, ROOT_INDEX]
        search_visits = search_visits + (root_hot & moved[:, None]).astype(jnp.int32)
        return tree, search_visits

    search_visits = jnp.zeros((tree.batch_size, env.num_actions), jnp.int32)
    return jax.lax.fori_loop(0, search.num_simulations, simulation, (tree, search_visits))


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

    def _select(self, children: _Children) -> Int[Array, " batch"]:
        node_visits = children.node_visits
        exploration = self.c_init + jnp.log((node_visits + self.c_base + 1.0) / self.c_base)
        coefficient = jnp.sqrt(node_visits) * exploration
        num_actions = children.q.shape[1]
        if num_actions > UNROLL_ACTIONS:
            policy_score = coefficient[:, None] * children.prior / (children.visits + 1.0)
            value_score = puct_value_score(
                children.q,
                children.visits > 0,
                children.node_value,
                children.tree_low,
                children.tree_high,
            )
            return _masked_argmax(value_score + policy_score, children.legal_action_mask)
        # The same arithmetic as above, written per action on `[batch]` columns: XLA:CPU
        # then fuses a whole descent level's selection into one vectorised loop instead of
        # a handful of kernels (each costs microseconds however small).
        q = [children.q[:, a] for a in range(num_actions)]
        visited = [children.visits[:, a] > 0 for a in range(num_actions)]
        if children.tree_low is None or children.tree_high is None:
            node_value = children.node_value
            safe_q = [jnp.where(v, x, node_value) for v, x in zip(visited, q)]
            low, high = node_value, node_value
            for x in safe_q:
                low, high = jnp.minimum(low, x), jnp.maximum(high, x)
            scale = jnp.maximum(high - low, EPSILON)
            value_score = [(jnp.where(v, x, low) - low) / scale for v, x in zip(visited, q)]
        else:
            low = children.tree_low
            scale = jnp.maximum(children.tree_high - low, EPSILON)
            value_score = [jnp.where(v, (x - low) / scale, 0.0) for v, x in zip(visited, q)]
        best = jnp.full_like(node_visits, -jnp.inf)
        action = jnp.zeros(node_visits.shape, jnp.int32)
        for a in range(num_actions):
            policy_score = coefficient * children.prior[:, a] / (children.visits[:, a] + 1.0)
            score = jnp.where(
                children.legal_action_mask[:, a], value_score[a] + policy_score, -jnp.inf
            )
            better = score > best
            best = jnp.where(better, score, best)
            action = jnp.where(better, a, action)
        return action

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
        gammas = jax.vmap(lambda k: jax.random.gamma(k, self.dirichlet_alpha, legal.shape[1:]))(
            noise_key
        )
        gammas = jnp.where(legal, gammas, 0.0)
        noise = gammas / jnp.maximum(jnp.sum(gammas, axis=-1, keepdims=True), 1e-30)
        prior = jax.nn.softmax(evaluation.logits, axis=-1)
        noisy = (1.0 - self.dirichlet_fraction) * prior + self.dirichlet_fraction * noise
        logits = jnp.log(jnp.maximum(noisy, jnp.finfo(jnp.float32).tiny))
        logits = jnp.where(legal, logits - jnp.max(logits, axis=-1, keepdims=True), ILLEGAL_LOGIT)
        root_prior = _prior_probabilities(logits, legal)
        tree = _start(tree, env_state, evaluation, logits, root_prior, self.reuse_tree)

        def root_select(tree, search_visits, tree_range):
            del search_visits
            return self._select(_root_children(tree, tree_range))

        tree, _ = _run(
            self, net, env, tree, root_select, self._select, self._selection_prior, search_key
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
        return jnp.where(evaluation.legal_action_mask, evaluation.logits, -jnp.inf)

    def _completed_q(self, children: _Children) -> Float[Array, "batch num_actions"]:
        return completed_q(
            children.raw_value,
            children.q,
            children.visits,
            children.prior,
            value_scale=self.value_scale,
            maxvisit_init=self.maxvisit_init,
            rescale_values=self.rescale_values,
            use_mixed_value=self.use_mixed_value,
            tree_low=children.tree_low,
            tree_high=children.tree_high,
        )

    def _select(self, children: _Children) -> Int[Array, " batch"]:
        # Visit frequencies that track the improved policy (the paper's section 5).
        improved = jax.nn.softmax(children.prior + self._completed_q(children), axis=-1)
        visits = children.visits
        total = jnp.sum(visits, axis=-1, keepdims=True)
        return _masked_argmax(improved - visits / (1.0 + total), children.legal_action_mask)

    def _halving_score(
        self,
        considered_visits: Int[Array, " batch"],
        search_visits: Int[Array, "batch num_actions"],
        gumbel: Float[Array, "batch num_actions"],
        logits: Float[Array, "batch num_actions"],
        completed: Float[Array, "batch num_actions"],
    ) -> Float[Array, "batch num_actions"]:
        # Only actions with exactly the visit count the schedule asks for are candidates.
        score = jnp.maximum(ILLEGAL_LOGIT, gumbel + logits + completed)
        return jnp.where(search_visits == considered_visits[:, None], score, -jnp.inf)

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
        tree = _start(
            tree, env_state, evaluation, logits, jnp.where(legal, logits, -jnp.inf), self.reuse_tree
        )

        table = jnp.asarray(
            considered_visits_table(self.max_num_considered_actions, self.num_simulations),
            jnp.int32,
        )
        num_legal = jnp.sum(legal.astype(jnp.int32), axis=-1)
        num_considered = jnp.minimum(self.max_num_considered_actions, num_legal)

        def root_select(tree, search_visits, tree_range):
            children = _root_children(tree, tree_range)
            simulation = jnp.minimum(jnp.sum(search_visits, axis=-1), self.num_simulations - 1)
            considered = table[num_considered, simulation]
            score = self._halving_score(
                considered, search_visits, gumbel, logits, self._completed_q(children)
            )
            return _masked_argmax(score, legal)

        tree, search_visits = _run(
            self, net, env, tree, root_select, self._select, self._selection_prior, search_key
        )
        tree_range = _tree_q_range(tree) if self.q_normalisation == "tree" else None
        root = _root_children(tree, tree_range)
        completed = self._completed_q(root)
        most_visits = jnp.max(search_visits, axis=-1)
        action = _masked_argmax(
            self._halving_score(most_visits, search_visits, gumbel, logits, completed), legal
        )
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
