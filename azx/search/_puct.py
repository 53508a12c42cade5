"""AlphaZero's search: the PUCT selection rule, and its root (Dirichlet noise in the prior,
the action and policy target from the root's visit counts).

With the loop in `azx.search._simulate`, this is all of PUCT.
"""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from .. import _random
from .._types import PRNGKeys
from .._validate import check_float
from ._model import ILLEGAL_LOGIT, Evaluation
from ._simulate import (
    AbstractNativeSearch,
    AbstractRootPolicy,
    AbstractSelectionRule,
    RootPlan,
    masked_best,
    prior_probabilities,
)
from ._tree import Node, Tree


#: Smallest denominator when Q is rescaled by a min/max range.
EPSILON = 1e-8


def puct_value_score(
    q: Float[Array, "*nodes num_actions"],
    visited: Bool[Array, "*nodes num_actions"],
    node_value: Float[Array, " *nodes"],
    tree_low: Float[Array, " *nodes"] | None,
    tree_high: Float[Array, " *nodes"] | None,
) -> Float[Array, "*nodes num_actions"]:
    """Q of visited children scaled to [0, 1]; unvisited children score 0.

    With `tree_low`/`tree_high` the range is the whole tree's; otherwise it is the range of
    the node's own value and its visited children's Q (mctx's
    `qtransform_by_parent_and_siblings`).
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


def reduce_actions(*terms: tuple[Array, object]) -> tuple[Array, ...]:
    """Several reductions over the last (action) axis in one pass: each term is an array
    and `jax.lax.add`, `jax.lax.min` or `jax.lax.max`. XLA runs them as one kernel rather
    than one each, which matters where every selection runs a handful of them over a few
    actions; each result is the same as the reduction on its own."""
    operands = tuple(x for x, _ in terms)
    identities = tuple(jnp.asarray(_IDENTITIES[op], x.dtype) for x, op in terms)

    def combine(left, right):
        return tuple(op(a, b) for (_, op), a, b in zip(terms, left, right))

    return tuple(jax.lax.reduce(operands, identities, combine, (operands[0].ndim - 1,)))


class PUCTRule(AbstractSelectionRule):
    """AlphaZero's rule: normalised Q plus `c * prior * sqrt(N) / (1 + n)`, with
    `c = c_init + log((N + c_base + 1) / c_base)` (as in the AlphaZero paper and mctx)."""

    row_loop_descent = True

    c_init: float = eqx.field(static=True, default=1.25)
    c_base: float = eqx.field(static=True, default=19652.0)

    def __check_init__(self):
        check_float("c_init", self.c_init, low=0.0)
        check_float("c_base", self.c_base, low=0.0, low_open=True)

    def __call__(self, node: Node) -> tuple[Int[Array, " batch"], Float[Array, " batch"]]:
        exploration = self.c_init + jnp.log((node.visits + self.c_base + 1.0) / self.c_base)
        coefficient = jnp.sqrt(node.visits) * exploration
        policy_score = coefficient[:, None] * node.prior / (node.child_visits + 1.0)
        value_score = puct_value_score(
            node.child_q, node.child_visits > 0, node.value, node.tree_low, node.tree_high
        )
        return masked_best(value_score + policy_score, node.legal_action_mask)


def _split_rows(keys, num: int) -> Array:
    return jax.vmap(lambda k: jax.random.split(k, num))(keys)


class PUCTRoot(AbstractRootPolicy):
    """AlphaZero's root: Dirichlet noise mixed into the prior; the action sampled from the
    root's visit counts and the policy target their distribution.

    **Arguments:**

    - `dirichlet_alpha`, `dirichlet_fraction`: root noise over the legal actions; fraction
      0 switches it off.
    - `temperature`: the action is sampled proportionally to `visits ** (1 / temperature)`;
      0 takes the most visited action (lowest index on ties).
    """

    dirichlet_alpha: float = eqx.field(static=True, default=0.3)
    dirichlet_fraction: float = eqx.field(static=True, default=0.25)
    temperature: float = eqx.field(static=True, default=1.0)

    def __check_init__(self):
        check_float("dirichlet_alpha", self.dirichlet_alpha, low=0.0, low_open=True)
        check_float("dirichlet_fraction", self.dirichlet_fraction, low=0.0, high=1.0)
        check_float("temperature", self.temperature, low=0.0)

    def plan(
        self, search: AbstractNativeSearch, evaluation: Evaluation, tree: Tree, key: PRNGKeys
    ) -> RootPlan:
        del search, tree
        keys = _split_rows(key, 3)
        noise_key, search_key, action_key = keys[:, 0], keys[:, 1], keys[:, 2]
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
        # The root is selected like every other node, inside the descent.
        return RootPlan(prior_probabilities(logits, legal), None, search_key, action_key)

    def decide(
        self,
        search: AbstractNativeSearch,
        plan: RootPlan,
        evaluation: Evaluation,
        tree: Tree,
        search_visits: Int[Array, "batch num_actions"],
    ) -> tuple[Int[Array, " batch"], Float[Array, "batch num_actions"]]:
        del search, search_visits
        legal = evaluation.legal_action_mask
        visits = tree.root_child_visits()
        total = jnp.sum(visits, axis=-1, keepdims=True)
        uniform = legal.astype(jnp.float32) / jnp.sum(legal.astype(jnp.float32), -1, keepdims=True)
        policy_target = jnp.where(
            total > 0,
            visits.astype(jnp.float32) / jnp.maximum(total, 1).astype(jnp.float32),
            uniform,
        )
        if self.temperature == 0.0:
            return masked_best(policy_target, legal)[0], policy_target
        action_logits = jnp.where(
            policy_target > 0,
            jnp.log(jnp.maximum(policy_target, jnp.finfo(jnp.float32).tiny)) / self.temperature,
            -jnp.inf,
        )
        action = jax.vmap(jax.random.categorical)(plan.memo, action_logits)
        return action.astype(jnp.int32), policy_target

    def without_exploration(self) -> "PUCTRoot":
        """No Dirichlet noise (`dirichlet_fraction` 0), and the most visited action
        (`temperature` 0)."""
        return dataclasses.replace(self, temperature=0.0, dirichlet_fraction=0.0)
