"""Selection rules of the native search: which edge a simulation takes at a node.

- inside the tree, PUCT's rule (`puct`) or Gumbel MuZero's deterministic rule, which makes
  visits track the improved policy (`gumbel_interior`);
- at Gumbel's root, sequential halving over Gumbel-top-k candidates (`halving_choice`,
  with its schedule from `azx.search._qtransforms`).

A rule sees the batch's nodes as a `Node` and returns each row's action and its score; a
score of `-inf` means the node has no legal action.
"""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from ._model import ILLEGAL_LOGIT
from ._qtransforms import completed_q_parts, halving_choices_table, puct_value_score
from ._tree import DISCOUNT, RAW_VALUE, REWARD, ROOT_INDEX, VALUE, VISITS, Tree


class Node(eqx.Module):
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


def root_node(tree: Tree, tree_range=None) -> Node:
    """The roots as selection sees them; `tree_range`: `tree_q_range`'s, or None."""
    return Node(
        stats=tree.node_stats[:, ROOT_INDEX],
        visits=tree.edge_visits[:, ROOT_INDEX],
        q=tree.edge_q[:, ROOT_INDEX],
        prior=tree.selection_prior[:, ROOT_INDEX],
        tree_low=None if tree_range is None else tree_range[0],
        tree_high=None if tree_range is None else tree_range[1],
    )


def tree_q_range(tree: Tree) -> tuple[Float[Array, " batch"], Float[Array, " batch"]]:
    """Min and max Q over every visited edge of each tree (MuZero's normalisation)."""
    slots = jnp.arange(tree.capacity)[None, :]
    stats = tree.node_stats
    edge = (slots != ROOT_INDEX) & (slots < tree.num_nodes[:, None]) & (stats[..., VISITS] > 0)
    q = stats[..., REWARD] + stats[..., DISCOUNT] * stats[..., VALUE]
    low = jnp.min(jnp.where(edge, q, jnp.inf), axis=1)
    high = jnp.max(jnp.where(edge, q, -jnp.inf), axis=1)
    return low, high


def masked_best(
    score: Float[Array, "batch num_actions"], legal_action_mask: Bool[Array, "batch num_actions"]
) -> tuple[Int[Array, " batch"], Float[Array, " batch"]]:
    """The legal action with the highest score and that score (`-inf`, with action 0, where
    no action is legal), in one reduction.

    Ties go to the lowest index, as with `jnp.argmax`, so a search without noise is
    deterministic. Unlike `jnp.argmax` it does not look for NaN, which no score is, and that
    check is a large part of the scalar code of the row loops (`azx.search._rows`).
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
#: (`masked_best`).
Select = Callable[[Node], tuple[Int[Array, " batch"], Float[Array, " batch"]]]


def masked_argmax(
    score: Float[Array, "batch num_actions"], legal_action_mask: Bool[Array, "batch num_actions"]
) -> Int[Array, " batch"]:
    return masked_best(score, legal_action_mask)[0]


def prior_probabilities(
    logits: Float[Array, "batch num_actions"], legal_action_mask: Bool[Array, "batch num_actions"]
) -> Float[Array, "batch num_actions"]:
    """The prior as selection reads it: probabilities, `-inf` where illegal. Computed once
    per node, when it is stored, rather than at every selection through it."""
    return jnp.where(legal_action_mask, jax.nn.softmax(logits, axis=-1), -jnp.inf)


def puct(
    node: Node, *, c_init: float, c_base: float
) -> tuple[Int[Array, " batch"], Float[Array, " batch"]]:
    """AlphaZero's rule: normalised Q plus `c * prior * sqrt(N) / (1 + n)`, with
    `c = c_init + log((N + c_base + 1) / c_base)`."""
    node_visits = node.stats[:, VISITS]
    exploration = c_init + jnp.log((node_visits + c_base + 1.0) / c_base)
    coefficient = jnp.sqrt(node_visits) * exploration
    policy_score = coefficient[:, None] * node.prior / (node.visits + 1.0)
    value_score = puct_value_score(
        node.q, node.visits > 0, node.stats[:, VALUE], node.tree_low, node.tree_high
    )
    return masked_best(value_score + policy_score, node.legal_action_mask)


def completed_q(node: Node, **options) -> tuple[Array, Array, Array]:
    """Gumbel MuZero's completed Q at `node`, with the parts `gumbel_interior` reuses;
    `options`: those of `azx.search._qtransforms.completed_q_parts`."""
    return completed_q_parts(
        node.stats[:, RAW_VALUE],
        node.q,
        node.visits,
        node.prior,
        tree_low=node.tree_low,
        tree_high=node.tree_high,
        **options,
    )


def gumbel_interior(node: Node, **options) -> tuple[Int[Array, " batch"], Float[Array, " batch"]]:
    """Gumbel MuZero's rule below the root: the action whose visit share lags most behind
    the improved policy `softmax(logits + completed Q)` (the paper's section 5)."""
    # The improved policy from the stored prior probabilities, as `prior * exp(completed)`
    # normalised, which needs no logits.
    completed, top, total = completed_q(node, **options)
    legal = node.legal_action_mask
    weights = jnp.where(legal, node.prior * jnp.exp(completed - top[:, None]), 0.0)
    improved = weights / jnp.sum(weights, axis=-1, keepdims=True)
    return masked_best(improved - node.visits / (1.0 + total[:, None]), legal)


def halving_choice(
    considered_visits: Int[Array, " batch"],
    search_visits: Int[Array, "batch num_actions"],
    gumbel: Float[Array, "batch num_actions"],
    logits: Float[Array, "batch num_actions"],
    completed: Float[Array, "batch num_actions"] | float,
    legal: Bool[Array, "batch num_actions"],
) -> Int[Array, " batch"]:
    """Sequential halving's choice at the root: the legal action with the best score
    `gumbel + logits + completed` among those with exactly the visit count the schedule
    asks for."""
    score = jnp.maximum(ILLEGAL_LOGIT, gumbel + logits + completed)
    score = jnp.where(search_visits == considered_visits[:, None], score, -jnp.inf)
    return masked_argmax(score, legal)


def ordered_simulations(
    table: list,
    schedule: Int[Array, "batch simulations"],
    num_legal: Int[Array, " batch"],
    num_considered: Int[Array, " batch"],
    tree: Tree,
    num_simulations: int,
) -> Bool[Array, " simulations"]:
    """Which simulations must choose the root action by the halving score; the others may
    visit their round's candidates in any order.

    A round of sequential halving that visits every action holding its visit count (each
    round of a phase after its first, and a first round that keeps all of its candidates)
    ends with the same visits whatever their order. Each visit goes into a different root
    child's subtree, and below the root a selection reads only its own subtree (siblings
    normalisation), so each subtree sees the same simulations in the same order, and the
    search ends with the same statistics and the same choices; only the numbering of the
    slots and the rounding of the root's running mean value can differ (and, in a
    stochastic environment, which of the independent keys, one per simulation, each step
    draws from). That needs room for every new node: when the tree fills up, the order
    decides which are stored, so every simulation is ordered then.
    """
    halving = jnp.asarray(halving_choices_table(table), bool)[num_considered]
    first_round_choice = (schedule == 0) & (num_legal > num_considered)[:, None]
    roomy = jnp.all(tree.num_nodes + num_simulations <= tree.capacity)
    return jnp.any(halving | first_round_choice, axis=0) | ~roomy


def sequential_halving(
    schedule: Int[Array, "batch simulations"],
    ordered: Bool[Array, " simulations"] | None,
    gumbel: Float[Array, "batch num_actions"],
    logits: Float[Array, "batch num_actions"],
    legal: Bool[Array, "batch num_actions"],
    root_prior: Float[Array, "batch num_actions"],
    **options,
) -> Callable:
    """Gumbel's rule at the root, as the simulation loop calls it: from the tree, the
    simulation's index, the root actions' visits in this search and the tree's Q range,
    each row's `halving_choice` among the actions with the visit count `schedule` gives
    for that simulation. Where `ordered` (`ordered_simulations`; None: everywhere) is
    false, the choice is by `gumbel + logits` alone; `options`: those of `completed_q`."""

    def root_select(tree, index, search_visits, tree_range):
        considered = jax.lax.dynamic_index_in_dim(schedule, index, axis=1, keepdims=False)

        def choose(completed):
            return halving_choice(considered, search_visits, gumbel, logits, completed, legal)

        def by_score():
            # The root's prior as a constant rather than read from the tree (it does not
            # change during the search), so that no simulation gathers it.
            root = eqx.tree_at(lambda n: n.prior, root_node(tree, tree_range), root_prior)
            return choose(completed_q(root, **options)[0])

        def in_any_order():
            # Without completed Q the score is a loop constant, computed once.
            return choose(0.0)

        if ordered is None:
            return by_score()
        return jax.lax.cond(ordered[index], by_score, in_any_order)

    return root_select
