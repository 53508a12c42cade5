"""Gumbel MuZero's search (Danihelka et al., 2022): completed Q, the deterministic rule
below the root, and the root's Gumbel-top-k draw with sequential halving.

With the loop in `azx.search._simulate`, this is all of Gumbel.
"""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, Real

from .._types import PRNGKeys
from .._validate import check_float, check_positive_int
from ._model import ILLEGAL_LOGIT, Evaluation
from ._puct import EPSILON, reduce_actions
from ._simulate import (
    AbstractNativeSearch,
    AbstractRootPolicy,
    AbstractSelectionRule,
    QBySiblings,
    RootPlan,
    masked_best,
    prior_probabilities,
)
from ._tree import ROOT_INDEX, Node, QRange, Tree


def completed_q(
    raw_value: Float[Array, " *nodes"],
    q: Float[Array, "*nodes num_actions"],
    visits: Real[Array, "*nodes num_actions"],
    prior: Float[Array, "*nodes num_actions"],
    **options,
) -> Float[Array, "*nodes num_actions"]:
    """sigma(completed Q) of Gumbel MuZero: Q of visited children and, for the others, the
    network value or the mixed value (Danihelka et al. 2022, appendix D: the network value
    mixed with the prior-weighted Q of the visited children), rescaled to [0, 1] and scaled
    by `(maxvisit_init + max visits) * value_scale`. `prior` holds the prior's
    probabilities (any value where unvisited).

    With `tree_low`/`tree_high`, the rescaling range also covers the whole tree's Q. The
    range is at least `min_q_range` (mctx's `epsilon`).

    The operations are mctx's, in its order, but the reductions that can share a pass do:
    the min and max of the completed Q come from those of the visited Q and the value
    (exact, as min and max are).

    `options`: the keyword arguments of `completed_q_parts`, which computes it.
    """
    return completed_q_parts(raw_value, q, visits, prior, **options)[0]


def completed_q_parts(
    raw_value: Float[Array, " *nodes"],
    q: Float[Array, "*nodes num_actions"],
    visits: Real[Array, "*nodes num_actions"],
    prior: Float[Array, "*nodes num_actions"],
    *,
    value_scale: float,
    maxvisit_init: float,
    rescale_values: bool,
    use_mixed_value: bool,
    min_q_range: float = EPSILON,
    tree_low: Float[Array, " *nodes"] | None = None,
    tree_high: Float[Array, " *nodes"] | None = None,
) -> tuple[Float[Array, "*nodes num_actions"], Float[Array, " *nodes"], Float[Array, " *nodes"]]:
    """`completed_q`, with two by-products that cost no pass of their own: its maximum
    over the actions, and the node's total visits.

    The maximum is the same function applied to the largest of the Q and values being
    completed, which rounds to the largest of the results: each operation on the way
    (subtracting, dividing by a positive scale, multiplying by a positive coefficient) is
    monotone in floating point too.
    """
    visits = visits.astype(q.dtype)
    visited = visits > 0
    # Guards the division below when every visited child has underflowed to probability 0.
    probs = jnp.maximum(jnp.finfo(prior.dtype).tiny, prior)
    total_visits, max_visits, min_visits, visited_mass, visited_low, visited_high = reduce_actions(
        (visits, jax.lax.add),
        (visits, jax.lax.max),
        (visits, jax.lax.min),
        (jnp.where(visited, probs, 0.0), jax.lax.add),
        (jnp.where(visited, q, jnp.inf), jax.lax.min),
        (jnp.where(visited, q, -jnp.inf), jax.lax.max),
    )
    if use_mixed_value:
        denominator = jnp.where(visited, visited_mass[..., None], 1.0)
        weighted_q = jnp.sum(jnp.where(visited, probs * q / denominator, 0.0), axis=-1)
        value = (raw_value + total_visits * weighted_q) / (total_visits + 1.0)
    else:
        value = raw_value
    completed = jnp.where(visited, q, value[..., None])
    some_unvisited = min_visits == 0
    low = jnp.where(some_unvisited, jnp.minimum(visited_low, value), visited_low)
    high = jnp.where(some_unvisited, jnp.maximum(visited_high, value), visited_high)
    top = high  # the largest entry of `completed`
    if rescale_values or tree_low is not None:
        if tree_low is not None and tree_high is not None:
            low = jnp.minimum(low, tree_low)
            high = jnp.maximum(high, tree_high)
        scale = jnp.maximum(high - low, min_q_range)
        completed = (completed - low[..., None]) / scale[..., None]
        top = (top - low) / scale
    coefficient = (maxvisit_init + max_visits) * value_scale
    return coefficient[..., None] * completed, coefficient * top, total_visits


class GumbelRule(AbstractSelectionRule):
    """Gumbel MuZero's rule below the root: the action whose visit share lags most behind
    the improved policy `softmax(logits + sigma(completed Q))` (the paper's section 5).

    **Arguments:** how Q is completed (`completed_q`): `value_scale`, `maxvisit_init`,
    `rescale_values` (to [0, 1] by the node's range) and `use_mixed_value` (complete with
    the mixed value rather than the network's), as in mctx; `min_q_range`, the least range
    the rescaling divides by (mctx's `epsilon`). With its default (1e-8) any spread of the
    Q values, however small, becomes the full `[0, 1]`, and so up to `(maxvisit_init + max
    visits) * value_scale` in the policy's logits; a floor in the returns' units (say one
    reward) keeps the Q differences of an untrained model, which are noise, from making a
    confident policy target, and leaves larger spreads as they are.
    """

    # Its rule reads more per level than XLA:CPU compiles into one function in a loop, and
    # its trees are shallow anyway.
    row_loop_descent = False

    value_scale: float = eqx.field(static=True, default=0.1)
    maxvisit_init: float = eqx.field(static=True, default=50.0)
    rescale_values: bool = eqx.field(static=True, default=True)
    use_mixed_value: bool = eqx.field(static=True, default=True)
    min_q_range: float = eqx.field(static=True, default=EPSILON)

    def __check_init__(self):
        check_float("value_scale", self.value_scale, low=0.0, low_open=True)
        check_float("maxvisit_init", self.maxvisit_init, low=0.0)
        check_float("min_q_range", self.min_q_range, low=0.0, low_open=True)

    def completed_q(self, node: Node) -> tuple[Array, Array, Array]:
        """`completed_q_parts` at `node`: sigma(completed Q), its maximum, total visits."""
        return completed_q_parts(
            node.raw_value,
            node.child_q,
            node.child_visits,
            node.prior,
            value_scale=self.value_scale,
            maxvisit_init=self.maxvisit_init,
            rescale_values=self.rescale_values,
            use_mixed_value=self.use_mixed_value,
            min_q_range=self.min_q_range,
            tree_low=node.tree_low,
            tree_high=node.tree_high,
        )

    def __call__(self, node: Node) -> tuple[Int[Array, " batch"], Float[Array, " batch"]]:
        # The improved policy from the stored prior probabilities, as `prior * exp(completed)`
        # normalised, which needs no logits.
        completed, top, total = self.completed_q(node)
        legal = node.legal_action_mask
        weights = jnp.where(legal, node.prior * jnp.exp(completed - top[:, None]), 0.0)
        improved = weights / jnp.sum(weights, axis=-1, keepdims=True)
        return masked_best(improved - node.child_visits / (1.0 + total[:, None]), legal)


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
    return masked_best(score, legal)[0]


class SequentialHalving(AbstractRootPolicy):
    """Gumbel MuZero's root: Gumbel-top-k candidates, sequential halving among them, and
    policy targets `softmax(logits + sigma(completed_q))` (or the visit counts).

    The action is the candidate that survives sequential halving (the best
    `gumbel + logits + sigma(completed_q)` among the most visited).

    **Arguments:**

    - `max_num_considered_actions`: actions sampled by Gumbel-top-k at the root and
      narrowed down by sequential halving.
    - `gumbel_scale`: scale of the Gumbel noise; 0 makes the search deterministic.
    - `reorder_rounds`: let the rounds of sequential halving that visit each of their
      candidates once run in whichever order is cheapest (see the search guide). They end
      with the same visits, Q, action and target as in mctx's order, and the root value to
      rounding; `False` keeps mctx's order in every round. Either way the order is kept
      with [`azx.search.QByTree`][] or when the tree may fill up.
    - `visit_count_target`: the policy target is the root's visit counts of this search
      normalised (AlphaZero's target; with few simulations, mostly the candidates of the
      Gumbel draw, in proportions set by the halving schedule) rather than the paper's
      improved policy, which rates every legal move by its searched (or estimated) value.
    """

    max_num_considered_actions: int = eqx.field(static=True, default=16)
    gumbel_scale: float = eqx.field(static=True, default=1.0)
    reorder_rounds: bool = eqx.field(static=True, default=True)
    visit_count_target: bool = eqx.field(static=True, default=False)

    def __check_init__(self):
        check_positive_int("max_num_considered_actions", self.max_num_considered_actions)
        check_float("gumbel_scale", self.gumbel_scale, low=0.0)

    def plan(
        self, search: AbstractNativeSearch, evaluation: Evaluation, tree: Tree, key: PRNGKeys
    ) -> RootPlan:
        keys = jax.vmap(lambda k: jax.random.split(k, 2))(key)
        gumbel_key, search_key = keys[:, 0], keys[:, 1]
        legal = evaluation.legal_action_mask
        logits = evaluation.logits
        logits = jnp.where(legal, logits - jnp.max(logits, axis=-1, keepdims=True), ILLEGAL_LOGIT)
        gumbel = self.gumbel_scale * jax.vmap(
            lambda k: jax.random.gumbel(k, logits.shape[1:], jnp.float32)
        )(gumbel_key)
        root_prior = prior_probabilities(logits, legal)

        table = considered_visits_table(self.max_num_considered_actions, search.num_simulations)
        num_legal = jnp.sum(legal.astype(jnp.int32), axis=-1)
        num_considered = jnp.minimum(self.max_num_considered_actions, num_legal)
        # Each row's schedule, indexed by simulation: a search adds one visit at the root
        # per simulation, unless the root is terminal, where the choice changes nothing.
        schedule = jnp.asarray(table, jnp.int32)[num_considered]
        ordered = None  # every simulation chooses by the halving score
        if self.reorder_rounds and isinstance(search.qtransform, QBySiblings):
            ordered = ordered_simulations(
                table, schedule, num_legal, num_considered, tree, search.num_simulations
            )

        def select(
            tree: Tree,
            index: Int[Array, ""],
            search_visits: Int[Array, "batch num_actions"],
            q_range: QRange,
        ) -> Int[Array, " batch"]:
            considered = jax.lax.dynamic_index_in_dim(schedule, index, axis=1, keepdims=False)

            def choose(completed):
                return halving_choice(considered, search_visits, gumbel, logits, completed, legal)

            def by_score():
                # The root's prior as a constant rather than read from the tree (it does not
                # change during the search), so that no simulation gathers it.
                root = eqx.tree_at(lambda n: n.prior, tree.node(ROOT_INDEX, q_range), root_prior)
                return choose(search.rule.completed_q(root)[0])

            def in_any_order():
                # Without completed Q the score is a loop constant, computed once.
                return choose(0.0)

            if ordered is None:
                return by_score()
            return jax.lax.cond(ordered[index], by_score, in_any_order)

        return RootPlan(root_prior, select, search_key, (gumbel, logits))

    def decide(
        self,
        search: AbstractNativeSearch,
        plan: RootPlan,
        evaluation: Evaluation,
        tree: Tree,
        search_visits: Int[Array, "batch num_actions"],
    ) -> tuple[Int[Array, " batch"], Float[Array, "batch num_actions"]]:
        gumbel, logits = plan.memo
        legal = evaluation.legal_action_mask
        root = tree.node(ROOT_INDEX, search.qtransform.range(tree))
        completed = search.rule.completed_q(root)[0]
        most_visits = jnp.max(search_visits, axis=-1)
        action = halving_choice(most_visits, search_visits, gumbel, logits, completed, legal)
        if self.visit_count_target:
            visits = search_visits.astype(jnp.float32)
            policy_target = visits / jnp.maximum(jnp.sum(visits, axis=-1, keepdims=True), 1.0)
        else:
            improved = jnp.where(legal, logits + completed, ILLEGAL_LOGIT)
            policy_target = jax.nn.softmax(improved, axis=-1)
        return action, policy_target

    def without_exploration(self) -> "SequentialHalving":
        """Sequential halving without Gumbel noise (`gumbel_scale` 0): deterministic."""
        return dataclasses.replace(self, gumbel_scale=0.0)


def considered_visits_table(max_num_considered_actions: int, num_simulations: int) -> list:
    """Sequential halving as a visit schedule: row `m` lists, for each simulation, the visit
    count an action must have to be considered when `m` actions take part.

    Each phase gives every remaining action `max(1, n / (ceil(log2 m) * remaining))` more
    visits and then keeps the better half (at least two), as in Karnin et al. (2013) with
    the budget split used by Gumbel MuZero; the row repeats visit counts phase by phase.
    """
    table = []
    for considered in range(max_num_considered_actions + 1):
        if considered <= 1:
            table.append(list(range(num_simulations)))
            continue
        phases = max(1, (considered - 1).bit_length())  # ceil(log2(considered))
        row: list[int] = []
        visits = 0
        remaining = considered
        while len(row) < num_simulations:
            per_action = max(1, int(num_simulations / (phases * remaining)))
            for _ in range(per_action):
                row.extend([visits] * remaining)
                visits += 1
            remaining = max(2, remaining // 2)
        table.append(row[:num_simulations])
    return table


def halving_choices_table(table: list) -> list:
    """For each row of a `considered_visits_table`, whether each simulation belongs to a
    round that visits fewer actions than hold the round's visit count: a round where
    sequential halving keeps only the best of them, so that which ones it visits depends
    on their scores at the time.

    In every other round after the first, each action holding the round's visit count is
    visited exactly once, whatever the order. The first round (visit count 0) chooses among
    every legal action, more than it visits only when more are legal than considered,
    which depends on the position, not on the table; it is left False here.
    """
    choices = []
    for row in table:
        length: dict[int, int] = {}
        for visits in row:
            length[visits] = length.get(visits, 0) + 1
        choices.append(
            [visits > 0 and length[visits] < length.get(visits - 1, 0) for visits in row]
        )
    return choices


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
