"""Chance nodes: a model that plans over a game's chance outcomes instead of sampling them."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Int

from .._types import EnvState, PRNGKeys
from ..envs import AbstractChanceEnv, AbstractEnv, require_chance, validate_outcome
from ..envs._mover import mover_reward_and_discount
from ._model import (
    ILLEGAL_LOGIT,
    AbstractModel,
    Evaluation,
    PolicyValueNet,
    Transition,
    evaluate,
)
from ._tree import ROOT_INDEX, UNVISITED, Tree, compact, subtree_mask, tree_for


class ChanceState(eqx.Module):
    """A node's state in a search with chance nodes: a decision node holds its state; a
    chance node (an afterstate) holds its parent's state and the action taken there, from
    which the game rebuilds the afterstate."""

    state: EnvState
    action: Int[Array, "*batch"]
    """The action into a chance node (0 at decision nodes)."""
    is_chance: Bool[Array, "*batch"]


def edge_width(env: AbstractChanceEnv) -> int:
    """Edges per node: actions at decision nodes and outcomes at chance nodes share the
    tree's arrays, each masked beyond its own number."""
    return max(env.num_actions, env.num_outcomes)


def _pad(x: Array, width: int, value) -> Array:
    return jnp.pad(x, ((0, 0), (0, width - x.shape[1])), constant_values=value)


class ChanceModel(AbstractModel):
    """An [`azx.envs.AbstractChanceEnv`][] plus a network, with the game's chance outcomes
    as chance nodes (Stochastic AlphaZero).

    A decision's child is a chance node: the afterstate, reached with reward 0 and discount
    `+1`, whose prior is the known distribution of outcomes. The step from a chance node
    applies an outcome, with the transition's reward and discount for the player who made
    the decision. A new chance node's value is the reward plus the discounted network
    value of one sampled outcome's state, so that each step costs one network evaluation;
    or, with `chance_expectation`, the expectation of those over all its outcomes
    (expectimax's step over the chance, with the network at the leaves): each step then
    evaluates the states of all `num_outcomes` outcomes in one batched call, and a step
    from a chance node takes its outcome's among them. One sample is as right on average,
    but its noise stays in the chance node's mean for the rest of the search and can
    misjudge close choices. Decision and chance nodes share the tree's edge arrays, as
    wide as the larger of the numbers of actions and outcomes
    ([`azx.search.SearchOutput`][]'s policy target is cut to the actions).
    """

    has_chance = True

    env: AbstractEnv
    """A game that exposes its chance (an [`azx.envs.AbstractChanceEnv`][], checked)."""
    net: PolicyValueNet
    gamma: float = eqx.field(static=True)
    chance_expectation: bool = eqx.field(static=True, default=False, kw_only=True)
    """Value a new chance node by the expectation over its outcomes (`num_outcomes`
    network evaluations a step) instead of one sampled outcome (one evaluation)."""

    def __check_init__(self):
        require_chance(self.env)

    def _evaluate(self, state: EnvState) -> Evaluation:
        evaluation = evaluate(self.net, self.env, state)
        width = edge_width(self.env)
        return eqx.tree_at(
            lambda e: (e.logits, e.legal_action_mask),
            evaluation,
            (
                _pad(evaluation.logits, width, ILLEGAL_LOGIT),
                _pad(evaluation.legal_action_mask, width, False),
            ),
        )

    def root(self, state: EnvState) -> tuple[ChanceState, Evaluation]:
        batch_size = jax.tree.leaves(state)[0].shape[0]
        decision = ChanceState(state, jnp.zeros(batch_size, jnp.int32), jnp.zeros(batch_size, bool))
        return decision, self._evaluate(state)

    def _one_outcome(self, state: ChanceState, action, after, key: PRNGKeys):
        """The step to one outcome's state: `action` at a chance node, a sample at a
        decision node (for the new chance node's value, `reward + discount * value`)."""
        env = self.env
        sampled = jax.vmap(env.sample_outcome)(after, key)
        outcome = jnp.where(state.is_chance, action, sampled)
        child = jax.vmap(env.apply_outcome)(after, outcome)
        reward, discount = mover_reward_and_discount(env, state.state, child, self.gamma)
        evaluation = self._evaluate(child)
        discount = jnp.where(evaluation.terminal, 0.0, discount)
        return child, reward, discount, evaluation, reward + discount * evaluation.value

    def _every_outcome(self, state: ChanceState, action, after, probabilities):
        """The steps to every outcome's state, `batch * num_outcomes` rows evaluated
        together: the one to `action`'s at a chance node (the first at a decision node),
        and the probability-weighted mean of `reward + discount * value` over them."""
        env = self.env
        batch_size, num_outcomes = action.shape[0], env.num_outcomes
        outcomes = jnp.arange(num_outcomes, dtype=jnp.int32)
        children = jax.vmap(lambda a: jax.vmap(env.apply_outcome, (None, 0))(a, outcomes))(after)
        children = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), children)
        parents = jax.tree.map(
            lambda x: x[jnp.repeat(jnp.arange(batch_size), num_outcomes)], state.state
        )
        reward, discount = mover_reward_and_discount(env, parents, children, self.gamma)
        evaluation = self._evaluate(children)
        discount = jnp.where(evaluation.terminal, 0.0, discount)
        returns = (reward + discount * evaluation.value).reshape(batch_size, num_outcomes)
        expected = jnp.sum(jnp.where(probabilities > 0, probabilities * returns, 0.0), axis=1)
        rows = jnp.arange(batch_size) * num_outcomes + jnp.where(state.is_chance, action, 0)
        child, reward, discount, evaluation = jax.tree.map(
            lambda x: x[rows], (children, reward, discount, evaluation)
        )
        return child, reward, discount, evaluation, expected

    def step(self, state: ChanceState, action: Int[Array, " batch"], key: PRNGKeys) -> Transition:
        env = self.env
        at_chance = state.is_chance
        # The afterstate: at a decision node the one `action` leads to, at a chance node its
        # own (rebuilt from its parent's state and action); then the outcomes there.
        taken = jnp.where(at_chance, state.action, action)
        after = jax.vmap(env.afterstate)(state.state, taken)
        probabilities = jax.vmap(env.chance_probabilities)(after)
        if self.chance_expectation:
            del key  # every outcome is evaluated: nothing is sampled
            child, reward, discount, evaluation, value = self._every_outcome(
                state, action, after, probabilities
            )
        else:
            child, reward, discount, evaluation, value = self._one_outcome(
                state, action, after, key
            )

        possible = probabilities > 0
        width = edge_width(env)
        log_probabilities = jnp.log(jnp.where(possible, probabilities, 1.0))
        afterstate = Evaluation(
            logits=_pad(
                jnp.where(possible, log_probabilities, ILLEGAL_LOGIT), width, ILLEGAL_LOGIT
            ),
            value=value,
            legal_action_mask=_pad(possible, width, False),
            terminal=jnp.zeros_like(evaluation.terminal),
        )

        def pick(chance_child, decision_child):
            # From a chance node: the outcome's state; from a decision node: the chance node.
            if jnp.issubdtype(chance_child.dtype, jax.dtypes.prng_key):
                impl = jax.random.key_impl(chance_child)
                data = pick(jax.random.key_data(chance_child), jax.random.key_data(decision_child))
                return jax.random.wrap_key_data(data, impl=impl)
            mask = at_chance.reshape(at_chance.shape + (1,) * (chance_child.ndim - 1))
            return jnp.where(mask, chance_child, decision_child)

        zeros = jnp.zeros_like(action)
        return Transition(
            state=jax.tree.map(
                pick,
                ChanceState(child, zeros, jnp.zeros_like(at_chance)),
                ChanceState(state.state, action, jnp.ones_like(at_chance)),
            ),
            reward=jnp.where(at_chance, reward, 0.0),
            discount=jnp.where(at_chance, discount, 1.0),
            evaluation=jax.tree.map(pick, evaluation, afterstate),
            chance=~at_chance,
        )


def empty_chance_tree(env: AbstractChanceEnv, batch_size: int, capacity: int) -> Tree:
    """Empty trees for a search with chance nodes in `env`, every state leaf stored."""
    one = ChanceState(env.init(jax.random.key(0)), jnp.int32(0), jnp.bool_(False))
    return tree_for(one, None, edge_width(env), batch_size, capacity, env.num_outcomes)


def keep_outcome_subtree(
    tree: Tree,
    action: Int[Array, " batch"],
    outcome: Int[Array, " batch"],
    done: Bool[Array, " batch"],
) -> Tree:
    """The tree under the node that `outcome` leads to from the chance node under the
    root's `action`, compacted: the subtree for the move and the chance that happened.
    Empty where `done`, where the search never reached that node, or where a traced
    `outcome` lies outside `[0, num_outcomes)`: no such node exists, and an error raised
    at run time would be a host callback, which keeps the compiled program out of JAX's
    persistent compilation cache (see [`azx.envs.validate_outcome`][]).

    **Raises:** `ValueError` for a known outcome outside `[0, num_outcomes)`.
    """
    outcome, valid = validate_outcome(outcome, tree.num_outcomes)
    batch = jnp.arange(tree.batch_size)
    chance_node = tree.children[batch, ROOT_INDEX, action]
    reached = (chance_node != UNVISITED) & ~done & (tree.num_nodes > 0) & valid
    new_root = tree.children[batch, jnp.maximum(chance_node, 0), outcome]
    new_root = jnp.where(reached, new_root, UNVISITED)
    return compact(tree, subtree_mask(tree, new_root))
