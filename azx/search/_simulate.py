"""The native search's loop, and the parts a search is made of.

One simulation, for the whole batch at once:

1. **descend**: from the root, the selection rule picks an edge at each node until an edge
   without a node, a terminal node or the depth limit;
2. **expand**: the model steps once from the leaf's parent and evaluates the child; the new
   node goes into the next free slot of the tree;
3. **back up**: the returns along the path, from the leaf upwards, are added to each node's
   mean value and visit count.

`simulate` runs `num_simulations` of them. What a search injects into this loop are small
modules, each abstract or final:

- the selection rule ([`azx.search.AbstractSelectionRule`][]: PUCT's, Gumbel's);
- the Q transform ([`azx.search.AbstractQTransform`][]): the range that Q values are
  normalised by, the node's own or the whole tree's;
- the root policy ([`azx.search.AbstractRootPolicy`][]): how the root's prior and its
  selection are set up (PUCT's Dirichlet noise, Gumbel's sequential halving) and how the
  action and the policy target are read from the statistics afterwards;
- the model ([`azx.search.AbstractModel`][]): how a batch of states is evaluated and
  stepped;
- the backend ([`azx.search.AbstractBackend`][]): how the descent, the backup and the
  nodes' states run on the platform, the same arrays bit for bit on every backend.

[`azx.search.ReferenceBackend`][], at the end of this file, writes the descent and the
backup plainly: with the loop, it is the specification the fast backends are tested
against.
"""

import abc
import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PyTree

from .._types import EnvState, PRNGKey, PRNGKeys
from .._validate import check_float, check_positive_int
from ..envs import AbstractEnv
from ._abstract import AbstractSearch, SearchOutput, check_part, part_field, static_field
from ._backend import AbstractBackend, PlatformBackend, RootEdge
from ._chance import empty_chance_tree, keep_outcome_subtree
from ._model import AbstractModel, Evaluation, Transition, check_players, row_keys
from ._tree import (
    ROOT_INDEX,
    UNVISITED,
    Node,
    QRange,
    Tree,
    empty_tree,
    keep_subtree,
    node_stats_rows,
    store_node,
    take,
    tree_for,
    tree_q_range,
)


class AbstractQTransform(eqx.Module):
    """How Q values are scaled to [0, 1] before they enter selection: by a range that the
    loop computes once per simulation (`range`), or by each node's own values (no range)."""

    @abc.abstractmethod
    def range(self, tree: Tree) -> QRange:
        """Each tree's low and high Q for this simulation, or None to scale by each node's
        own value and its children's Q."""


class QBySiblings(AbstractQTransform):
    """Q scaled by the min and max over the node's value and its children's Q (mctx's
    `qtransform_by_parent_and_siblings`; for Gumbel, mctx's rescaling of completed Q)."""

    def range(self, tree: Tree) -> None:
        del tree
        return None


class QByTree(AbstractQTransform):
    """Q scaled by the min and max Q over every visited edge of the whole tree (MuZero's
    normalisation; suits single-player games whose returns are on an unknown scale)."""

    def range(self, tree: Tree) -> tuple[Float[Array, " batch"], Float[Array, " batch"]]:
        return tree_q_range(tree)


class AbstractSelectionRule(eqx.Module):
    """Which edge a simulation takes at a node below the root (and at the root too, unless
    the root policy selects there)."""

    #: Whether the rule is cheap enough for the CPU row kernel to finish descents with it
    #: (see [`azx.search.RowBackend`][]); a rule that reads much per level is not.
    row_loop_descent: eqx.AbstractClassVar[bool]

    @abc.abstractmethod
    def __call__(self, node: Node) -> tuple[Int[Array, " batch"], Float[Array, " batch"]]:
        """Each row's action at `node` and its score (`masked_best`'s: `-inf` where the
        node has no legal action)."""


#: A root selection (Gumbel's sequential halving): from the tree, the simulation's index,
#: each root action's visits in this search so far and the Q range, each row's action at
#: the root.
RootSelect = Callable[
    [Tree, Int[Array, ""], Int[Array, "batch num_actions"], QRange], Int[Array, " batch"]
]


class RootPlan(NamedTuple):
    """What a root policy sets up before the simulations."""

    prior: Float[Array, "batch num_actions"]
    """The prior the root's selection reads (`prior_probabilities`: `-inf` where illegal)."""
    select: RootSelect | None
    """The root's own selection, or None to select there with the search's rule."""
    search_key: PRNGKeys
    """One key per row for the simulations."""
    memo: PyTree[Array]
    """Whatever `decide` needs of the set-up (noise, keys)."""


class AbstractRootPolicy(eqx.Module):
    """How a search treats its roots: the prior and selection the simulations start from,
    and the action and policy target read from the statistics they leave."""

    @abc.abstractmethod
    def plan(
        self, search: "AbstractNativeSearch", evaluation: Evaluation, tree: Tree, key: PRNGKeys
    ) -> RootPlan:
        """Set up the roots of a search (`search`: the native search running it)."""

    @abc.abstractmethod
    def decide(
        self,
        search: "AbstractNativeSearch",
        plan: RootPlan,
        evaluation: Evaluation,
        tree: Tree,
        search_visits: Int[Array, "batch num_actions"],
    ) -> tuple[Int[Array, " batch"], Float[Array, "batch num_actions"]]:
        """Each row's action and policy target, from the tree after the simulations and
        each root action's visits in this search (counted only with a root selection)."""

    @abc.abstractmethod
    def without_exploration(self) -> "AbstractRootPolicy":
        """This root policy with its exploration switched off (no noise, no sampled
        action): what [`azx.search.AbstractSearch.without_exploration`][] plays with.

        **Raises:** `ValueError` for a root policy that cannot play without exploring.
        """


class AbstractNativeSearch(AbstractSearch):
    """A search over a preallocated [`azx.search.Tree`][] that it can reuse between moves:
    what [`azx.search.PUCT`][] and [`azx.search.Gumbel`][] share. Each is its parts: a
    selection rule, a root policy, a Q transform and a backend, and the settings below,
    which are this class's fields (the rule's and the root policy's are each search's).

    **Arguments** (of both):

    - `num_simulations`: simulations per search.
    - `rule`, `root_policy`: the algorithm's parts (see each class).
    - `qtransform`: [`azx.search.QBySiblings`][] (mctx's default) or
      [`azx.search.QByTree`][] (MuZero's min/max over the whole tree, for single-player
      games with rewards).
    - `backend`: how the descent, the backup and the nodes' states run
      ([`azx.search.PlatformBackend`][], the default; [`azx.search.RowBackend`][];
      [`azx.search.LockstepBackend`][]), the same results bit for bit at different speeds.
    - `max_depth`: most edges from the root to a leaf (default: no limit but capacity).
    - `capacity`: node slots per tree (default `num_simulations + 1`, or
      `2 * num_simulations + 1` with `reuse_tree`). A full tree keeps searching: new leaves
      are evaluated and backed up but not stored.
    - `reuse_tree`: keep the subtree under the played action for the next search.
    - `gamma`: discount per move, in (0, 1].
    - `store_all_state_leaves`: keep every leaf of each node's environment state in the
      tree, for code that reads them from `Tree.state`; by default the tree keeps only the
      leaves a step from the node reads, found by tracing `env.step` once (for pgx games
      all but `observation` and `rewards`), and the others read as zeros.
    - `chance_nodes`: in a game that exposes its chance
      ([`azx.envs.AbstractChanceEnv`][]), plan over the outcomes with chance nodes
      ([`azx.search.ChanceModel`][]); `False` samples one outcome per expansion and keeps
      it as the move's consequence ([`azx.search.EnvironmentModel`][]). Chance nodes keep
      every state leaf; with `reuse_tree`, `advance` needs the outcome that happened
      after the move, since the subtree to keep lies under it.
    - `chance_expectation`: with chance nodes, value a new chance node by the expectation
      over all its outcomes, at `num_outcomes` network evaluations a step, instead of by
      one sampled outcome ([`azx.search.ChanceModel`][]).
    """

    num_simulations: int = eqx.field(static=True)
    qtransform: AbstractQTransform = part_field(QBySiblings)
    backend: AbstractBackend = part_field(PlatformBackend)
    max_depth: int | None = static_field(None)
    capacity: int | None = static_field(None)
    reuse_tree: bool = static_field(False)
    gamma: float = static_field(1.0)
    store_all_state_leaves: bool = static_field(False)
    chance_nodes: bool = static_field(True)
    chance_expectation: bool = static_field(False)
    rule: eqx.AbstractVar[AbstractSelectionRule]
    root_policy: eqx.AbstractVar[AbstractRootPolicy]

    def __post_init__(self):
        if self.capacity is None:
            # A reused subtree can hold up to one search's worth of nodes before the next.
            self.capacity = (2 if self.reuse_tree else 1) * self.num_simulations + 1

    def __check_init__(self):
        check_positive_int("num_simulations", self.num_simulations)
        if self.max_depth is not None:
            check_positive_int("max_depth", self.max_depth)
        check_positive_int("capacity", self.capacity)
        if self.capacity < 2:
            raise ValueError(
                f"capacity must be at least 2 (a root and one child), got {self.capacity}"
            )
        check_float("gamma", self.gamma, low=0.0, high=1.0, low_open=True)
        check_part("qtransform", self.qtransform, AbstractQTransform)
        check_part("backend", self.backend, AbstractBackend)

    def init(self, env: AbstractEnv, batch_size: int) -> Tree:
        check_players(env)
        check_positive_int("batch_size", batch_size)
        if self.plans_chance(env):
            return empty_chance_tree(env, batch_size, self.capacity)
        return empty_tree(env, batch_size, self.capacity, self.store_all_state_leaves)

    def init_for_states(
        self, example_state: PyTree[Array], num_actions: int, batch_size: int
    ) -> Tree:
        """Empty trees for `search` over a model whose states look like `example_state`
        (ONE state), with `num_actions` edges per node; every leaf of the states is kept."""
        check_positive_int("num_actions", num_actions)
        check_positive_int("batch_size", batch_size)
        return tree_for(example_state, None, num_actions, batch_size, self.capacity)

    def advance(
        self,
        tree: Tree,
        action: Int[Array, " batch"],
        done: Bool[Array, " batch"],
        outcome: Int[Array, " batch"] | None = None,
    ) -> Tree:
        """Tree for the next move: with `reuse_tree`, the subtree under `action`, or, in a
        tree with chance nodes, under the chance node's child for `outcome`; empty where
        `done` or where the search never reached that node.

        **Raises:** `ValueError` when a tree with chance nodes is to be reused without
        `outcome`, or for a known outcome outside `[0, num_outcomes)` (a traced one there
        empties its row's tree instead).
        """
        if not self.reuse_tree:
            return tree  # every search starts afresh anyway
        if tree.chance is None:
            return keep_subtree(tree, action, done)
        if outcome is None:
            raise ValueError(
                "advance needs the chance outcome that followed each action (outcome=...) "
                "to reuse a tree with chance nodes: step the game as "
                "env.apply_outcome(after, outcome), with after = env.afterstate(state, "
                "action) and outcome = env.sample_outcome(after, key); or pass "
                "reuse_tree=False, or chance_nodes=False to sample outcomes in the search"
            )
        return keep_outcome_subtree(tree, action, outcome, done)

    def search(
        self, model: AbstractModel, tree: Tree, state: PyTree[Any], *, key: PRNGKey | PRNGKeys
    ) -> SearchOutput:
        """The root policy sets up the roots, the loop runs the simulations, and the root
        policy reads the action and the policy target from the statistics."""
        batch_size = jax.tree.leaves(state)[0].shape[0]
        state, evaluation = model.root(state)
        plan = self.root_policy.plan(self, evaluation, tree, row_keys(key, batch_size))
        tree = start(tree, evaluation, plan.prior, self.reuse_tree)
        tree, search_visits = simulate(self, model, tree, state, plan.select, plan.search_key)
        action, policy_target = self.root_policy.decide(self, plan, evaluation, tree, search_visits)
        return SearchOutput(
            action=action,
            policy_target=policy_target,
            root_value=tree.value[:, ROOT_INDEX],
            tree=tree,
        )

    def without_exploration(self) -> "AbstractNativeSearch":
        """The same search with its root policy's exploration switched off."""
        return dataclasses.replace(self, root_policy=self.root_policy.without_exploration())


class FollowChance(AbstractSelectionRule):
    """The search's rule at decision nodes and, at chance nodes, the outcome whose visits lag
    most behind its probability, `argmax p / (n + 1)`: Stochastic MuZero's choice, which
    is deterministic and keeps each outcome's visits within about one of `p * N`, so that a
    chance node's mean backed-up value tends to the probability-weighted mean of its
    children's (the expectimax value) with less noise than sampling."""

    row_loop_descent = False

    rule: AbstractSelectionRule

    def __call__(self, node: Node) -> tuple[Int[Array, " batch"], Float[Array, " batch"]]:
        action, best = self.rule(node)
        outcome, score = masked_best(node.prior / (node.child_visits + 1.0), node.legal_action_mask)
        return jnp.where(node.chance, outcome, action), jnp.where(node.chance, score, best)


def masked_best(
    score: Float[Array, "batch num_actions"], legal_action_mask: Bool[Array, "batch num_actions"]
) -> tuple[Int[Array, " batch"], Float[Array, " batch"]]:
    """The legal action with the highest score and that score (`-inf`, with action 0, where
    no action is legal), in one reduction.

    Ties go to the lowest index, as with `jnp.argmax`, so a search without noise is
    deterministic. Unlike `jnp.argmax` it does not look for NaN, which no score is, and that
    check is a large part of the scalar code of the CPU row kernels.
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


def prior_probabilities(
    logits: Float[Array, "batch num_actions"], legal_action_mask: Bool[Array, "batch num_actions"]
) -> Float[Array, "batch num_actions"]:
    """The prior as selection reads it: probabilities, `-inf` where illegal. Computed once
    per node, when it is stored, rather than at every selection through it."""
    return jnp.where(legal_action_mask, jax.nn.softmax(logits, axis=-1), -jnp.inf)


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
    old = tree.stats_at(ROOT_INDEX)
    stats = node_stats_rows(
        value=jnp.where(fresh, evaluation.value, old.value),
        visits=jnp.where(fresh, 1.0, old.visits),
        raw_value=evaluation.value,
        reward=old.reward,
        discount=jnp.where(evaluation.terminal, 0.0, 1.0),  # the root's discount: terminal?
    )
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
            tree.node_stats.at[:, ROOT_INDEX].set(stats),
            keep_or(tree.children, UNVISITED),
            keep_or(tree.edge_visits, 0.0),
            keep_or(tree.edge_q, 0.0),
            tree.selection_prior.at[:, ROOT_INDEX].set(root_prior),
            jnp.where(fresh, 1, tree.num_nodes),
        ),
    )


def simulate(
    search: "AbstractNativeSearch",
    model: AbstractModel,
    tree: Tree,
    root_state: EnvState,
    root_select: RootSelect | None,
    key: PRNGKeys,
) -> tuple[Tree, Int[Array, "batch num_actions"]]:
    """Run `search.num_simulations` simulations on a tree `start` prepared. Returns the tree
    and each root action's visits in this search (counted only with `root_select`).

    `search`: the native search running it (its `rule`, `qtransform`, `backend`,
    `max_depth`, `reuse_tree`). Without `root_select` the root is selected like every other node, by
    the rule, inside the descent.
    """
    rule = search.rule
    if tree.chance is not None:
        rule = FollowChance(rule)
    qtransform = search.qtransform
    backend = search.backend
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

    if root_select is not None:
        # Constant through a search (no simulation writes the root's prior or discount):
        # which root actions are legal, and whether the root moves at all.
        root_legal = tree.node(ROOT_INDEX).legal_action_mask
        root_moves = tree.stats_at(ROOT_INDEX).discount != 0  # the root is not terminal

    def simulation(index, carry):
        tree, store, search_visits, path = carry

        # 1. Descend.
        q_range = qtransform.range(tree)
        root = None
        if root_select is not None:
            root_action = root_select(tree, index, search_visits, q_range)
            legal = jnp.take_along_axis(root_legal, root_action[:, None], axis=1)[:, 0]
            root = (root_action, root_moves & legal)
        path, num_edges = backend.descend(tree, rule, q_range, max_depth, root, path)
        has_edge = num_edges > 0
        last_edge = jnp.maximum(path[batch, num_edges], 0)  # column num_edges: the last edge
        parent = jnp.where(has_edge, jax.lax.div(last_edge, num_actions) - roots, ROOT_INDEX)
        action = jax.lax.rem(last_edge, num_actions)
        child = jnp.where(has_edge, take(tree.children.reshape(-1), last_edge), UNVISITED)
        expand = has_edge & (child == UNVISITED)

        # 2. Expand: one step from every row's leaf parent (also where there is nothing to
        # expand, as a batch steps together), stored where it is new and there is room.
        store, state = backend.read_states(tree, store, parent)
        step_keys = jax.vmap(jax.random.fold_in, (0, None))(key, index)
        step = model.step(state, action, step_keys)
        new = expand & (tree.num_nodes < capacity)
        slot = jnp.where(new, tree.num_nodes, capacity)
        prior = prior_probabilities(step.evaluation.logits, step.evaluation.legal_action_mask)
        tree = store_node(tree, slot, parent, action, step, prior)
        store = backend.write_states(tree, store, slot, step.state)
        tree = eqx.tree_at(lambda t: t.num_nodes, tree, tree.num_nodes + new.astype(jnp.int32))

        # 3. Back up.
        leaf, leaf_value = _leaf(tree, step, has_edge, expand, new, slot, parent, child)
        end = jnp.where(expand & ~new, num_edges - 1, num_edges)
        tree = backend.backup(tree, path, end, roots + leaf, leaf_value)
        if root_select is not None:
            root_hot = actions == root_action[:, None]
            search_visits = search_visits + (root_hot & root_moves[:, None]).astype(jnp.int32)
        return tree, store, search_visits, path

    store = backend.open_states(tree, root_state, search.reuse_tree)
    search_visits = jnp.zeros((batch_size, num_actions), jnp.int32)
    path = backend.path_buffer(batch_size, max_depth)
    carry = (tree, store, search_visits, path)
    tree, store, search_visits, _ = jax.lax.fori_loop(0, search.num_simulations, simulation, carry)
    return backend.close_states(tree, store), search_visits


def _leaf(
    tree: Tree,
    step: Transition,
    has_edge: Bool[Array, " batch"],
    expand: Bool[Array, " batch"],
    new: Bool[Array, " batch"],
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
    leaf = jnp.where(new, slot, jnp.where(expand, parent, jnp.maximum(child, 0)))
    leaf = jnp.where(has_edge, leaf, ROOT_INDEX)
    leaf_value = jnp.where(
        new,
        step.evaluation.value,
        jnp.where(
            expand,
            step.reward + step.discount * step.evaluation.value,
            tree.stats_of(roots + leaf).raw_value,
        ),
    )
    return leaf, leaf_value


class ReferenceBackend(AbstractBackend):
    """The descent and the backup written as plainly as they can be: all rows together, one
    level or one path position per loop iteration, reading the tree through its named
    statistics. Slower than the others, which must give the same arrays bit for bit (the
    tests compare them); it runs on every platform."""

    def descend(
        self,
        tree: Tree,
        rule: AbstractSelectionRule,
        q_range: QRange,
        max_depth: int,
        root: RootEdge,
        path: Int[Array, "batch columns"],
    ) -> tuple[Int[Array, "batch columns"], Int[Array, " batch"]]:
        batch_size, capacity, num_actions = tree.children.shape
        batch = jnp.arange(batch_size)

        def level(carry):
            depth, node, descending, path, num_edges = carry
            action, best = rule(
                Node.from_rows(
                    tree.node_stats[batch, node],
                    tree.edge_visits[batch, node],
                    tree.edge_q[batch, node],
                    tree.selection_prior[batch, node],
                    q_range,
                    None if tree.chance is None else tree.chance[batch, node],
                )
            )
            # A terminal node, or one without a legal action (its best score is -inf),
            # ends the descent there.
            go = ~tree.terminal[batch, node] & (best > -jnp.inf)
            if root is not None:  # the root's edge is given
                at_root = depth == 0
                action = jnp.where(at_root, root[0], action)
                go = jnp.where(at_root, root[1], go)
            go = descending & go
            edge = (batch * capacity + node) * num_actions + action
            path = path.at[:, depth + 1].set(jnp.where(go, edge, path[:, depth + 1]))
            child = tree.children[batch, node, action]
            descending = go & (child != UNVISITED)
            node = jnp.where(descending, child, node)
            return depth + 1, node, descending, path, num_edges + go.astype(jnp.int32)

        def more(carry):
            depth, _, descending, *_ = carry
            return (depth < max_depth) & jnp.any(descending)

        start = jnp.zeros(batch_size, jnp.int32)
        carry = (jnp.int32(0), start, jnp.ones(batch_size, bool), path, start)
        _, _, _, path, num_edges = jax.lax.while_loop(more, level, carry)
        return path, num_edges

    def backup(
        self,
        tree: Tree,
        path: Int[Array, "batch columns"],
        end: Int[Array, " batch"],
        leaf: Int[Array, " batch"],
        leaf_value: Float[Array, " batch"],
    ) -> Tree:
        batch_size, capacity, num_actions = tree.children.shape
        batch = jnp.arange(batch_size)
        stats = tree.stats
        leaf_node = leaf - batch * capacity

        def position(carry):
            # Position p of every path, from the deepest leaf up: the return G_p there is
            # the leaf's value at the leaf, and reward + discount * G_{p+1} above it.
            p, future, value, visits, edge_visits, edge_q = carry
            on_path = p <= end
            node = jnp.where(p == end, leaf_node, path[:, p + 1] // num_actions - batch * capacity)
            node = jnp.maximum(node, 0)
            returned = jnp.where(p == end, leaf_value, future)
            count = visits[batch, node]
            new_count = count + 1.0
            new_mean = (value[batch, node] * count + returned) / new_count
            value = value.at[batch, node].set(jnp.where(on_path, new_mean, value[batch, node]))
            visits = visits.at[batch, node].set(jnp.where(on_path, new_count, count))
            # The edge into the node (the root has none) gets the node's visits and Q.
            reward, discount = stats.reward[batch, node], stats.discount[batch, node]
            edge = jnp.where(on_path & (p > 0), path[:, p], edge_visits.size)
            edge_visits = edge_visits.at[edge].set(new_count, mode="drop")
            edge_q = edge_q.at[edge].set(reward + discount * new_mean, mode="drop")
            future = reward + discount * returned
            return p - 1, future, value, visits, edge_visits, edge_q

        carry = (
            jnp.max(end),
            leaf_value,
            stats.value,
            stats.visits,
            tree.edge_visits.reshape(-1),
            tree.edge_q.reshape(-1),
        )
        _, _, value, visits, edge_visits, edge_q = jax.lax.while_loop(
            lambda c: c[0] >= 0, position, carry
        )
        return tree.with_backed_up(
            value,
            visits,
            edge_visits.reshape(tree.edge_visits.shape),
            edge_q.reshape(tree.edge_q.shape),
        )
