"""Q-value transforms shared by the native search and the mctx backend.

Every function works on the children of a batch of nodes: arrays `[..., num_actions]`
with per-node scalars `[...]`, so the native search calls them once for a whole batch.
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Real


EPSILON = 1e-8
"""Smallest denominator when Q is rescaled by a min/max range."""


def puct_value_score(
    q: Float[Array, "*nodes num_actions"],
    visited: Bool[Array, "*nodes num_actions"],
    node_value: Float[Array, " *nodes"],
    tree_low: Float[Array, " *nodes"] | None,
    tree_high: Float[Array, " *nodes"] | None,
) -> Float[Array, "*nodes num_actions"]:
    """Q of visited children scaled to [0, 1]; unvisited children score 0.

    With `tree_low`/`tree_high` the range is the whole tree's; otherwise it is the range of
    the node's own value and its visited children's Q (mctx's default for MuZero).
    """
    if tree_low is None or tree_high is None:
        safe_q = jnp.where(visited, q, node_value[..., None])
        low, high = reduce_actions((safe_q, jax.lax.min), (safe_q, jax.lax.max))
        low = jnp.minimum(node_value, low)
        high = jnp.maximum(node_value, high)
        completed = jnp.where(visited, q, low[..., None])
        return (completed - low[..., None]) / jnp.maximum(high - low, EPSILON)[..., None]
    scaled = (q - tree_low[..., None]) / jnp.maximum(tree_high - tree_low, EPSILON)[..., None]
    return jnp.where(visited, scaled, 0.0)


_IDENTITIES = {jax.lax.add: 0.0, jax.lax.min: jnp.inf, jax.lax.max: -jnp.inf}


def reduce_actions(*terms: tuple[Array, Callable]) -> tuple[Array, ...]:
    """Several reductions over the last (action) axis in one pass: each term is an array
    and `jax.lax.add`, `jax.lax.min` or `jax.lax.max`. XLA runs them as one kernel rather
    than one each, which matters where every selection runs a handful of them over a few
    actions; each result is the same as the reduction on its own."""
    operands = tuple(x for x, _ in terms)
    identities = tuple(jnp.asarray(_IDENTITIES[op], x.dtype) for x, op in terms)

    def combine(left, right):
        return tuple(op(a, b) for (_, op), a, b in zip(terms, left, right))

    return tuple(jax.lax.reduce(operands, identities, combine, (operands[0].ndim - 1,)))


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

    With `tree_low`/`tree_high`, the rescaling range also covers the whole tree's Q.

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
        scale = jnp.maximum(high - low, EPSILON)
        completed = (completed - low[..., None]) / scale[..., None]
        top = (top - low) / scale
    coefficient = (maxvisit_init + max_visits) * value_scale
    return coefficient[..., None] * completed, coefficient * top, total_visits


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
