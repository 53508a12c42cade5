"""The mctx backend: `mctx.muzero_policy`, `mctx.gumbel_muzero_policy` and, in games that
expose their chance, `mctx.stochastic_muzero_policy`, behind AbstractSearch."""

import abc
import dataclasses
import functools
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import mctx
from jaxtyping import Array, Bool, Float, Int, PyTree

from .._numerics import third_party_numerics
from .._types import EnvState, PRNGKey, PRNGKeys
from .._validate import check_float, check_positive_int
from ..envs import AbstractEnv
from ._abstract import AbstractSearch, SearchOutput, check_part, part_field, static_field
from ._chance import ChanceModel, ChanceState
from ._gumbel import GumbelRule, SequentialHalving, completed_q
from ._model import (
    AbstractModel,
    Evaluation,
    check_players,
    row_keys,
)
from ._puct import PUCTRoot, PUCTRule, puct_value_score
from ._simulate import AbstractQTransform, QBySiblings


class MctxTree(eqx.Module):
    """The "tree" of the mctx backend: empty, because mctx rebuilds its tree every search.

    It has no leaves, so it threads through `jax.lax.scan` carries unchanged.
    """


def _model_recurrent_fn(model: AbstractModel):
    """mctx's recurrent function for any model without chance: its step, read as mctx's
    output and next embeddings."""

    def recurrent_fn(params, key, action, state):
        del params  # the network is closed over, so that mctx never differentiates it
        step = model.step(state, action, row_keys(key, action.shape[0]))
        output = mctx.RecurrentFnOutput(
            reward=step.reward,
            discount=step.discount,
            prior_logits=step.evaluation.logits,
            value=step.evaluation.value,
        )
        return output, step.state

    return recurrent_fn


def _stochastic_recurrent_fns(model: ChanceModel):
    """mctx's decision and chance functions for `model`'s game, both steps of the model,
    with embeddings its `ChanceState`s: a decision node's the state, a chance node's its
    parent's state and the action taken there."""
    env = model.env

    def at(state: ChanceState, is_chance: bool) -> ChanceState:
        return eqx.tree_at(lambda s: s.is_chance, state, jnp.full_like(state.is_chance, is_chance))

    def decision_recurrent_fn(params, key, action, state):
        del params  # the network is closed over, so that mctx never differentiates it
        # mctx calls both functions at every node and keeps the one that fits: at a chance
        # node `action` is an outcome offset by `num_actions`, and the result is dropped.
        action = jnp.minimum(action, env.num_actions - 1)
        step = model.step(at(state, False), action, row_keys(key, action.shape[0]))
        output = mctx.DecisionRecurrentFnOutput(
            chance_logits=step.evaluation.logits[:, : env.num_outcomes],
            afterstate_value=step.evaluation.value,
        )
        return output, step.state

    def chance_recurrent_fn(params, key, outcome, afterstate):
        del params
        # As above: at a decision node `outcome` is an action less `num_actions` (negative).
        outcome = jnp.maximum(outcome, 0)
        step = model.step(at(afterstate, True), outcome, row_keys(key, outcome.shape[0]))
        output = mctx.ChanceRecurrentFnOutput(
            action_logits=step.evaluation.logits[:, : env.num_actions],
            value=step.evaluation.value,
            reward=step.reward,
            discount=step.discount,
        )
        return output, step.state

    return decision_recurrent_fn, chance_recurrent_fn


def _tree_q_range(tree: mctx.Tree) -> tuple[Float[Array, ""], Float[Array, ""]]:
    # One unbatched mctx tree: min and max Q over every visited edge.
    visited = tree.children_visits > 0
    q = tree.children_rewards + tree.children_discounts * tree.children_values
    low = jnp.min(jnp.where(visited, q, jnp.inf))
    high = jnp.max(jnp.where(visited, q, -jnp.inf))
    return low, high


def qtransform_by_tree(tree: mctx.Tree, node_index: Int[Array, ""]) -> Float[Array, " A"]:
    """mctx Q transform for PUCT with [`azx.search.QByTree`][]: Q scaled by the min/max Q
    of all visited edges of the tree; unvisited actions score 0."""
    low, high = _tree_q_range(tree)
    return puct_value_score(
        tree.qvalues(node_index),
        tree.children_visits[node_index] > 0,
        tree.node_values[node_index],
        low,
        high,
    )


def qtransform_completed_by_tree(
    tree: mctx.Tree,
    node_index: Int[Array, ""],
    *,
    value_scale: float,
    maxvisit_init: float,
    use_mixed_value: bool,
    min_q_range: float,
) -> Float[Array, " A"]:
    """mctx Q transform for Gumbel with [`azx.search.QByTree`][]: completed Q rescaled by
    the min/max over the tree's visited edges and the node's own completed Q (a range of
    at least `min_q_range`)."""
    low, high = _tree_q_range(tree)
    return completed_q(
        tree.raw_values[node_index],
        tree.qvalues(node_index),
        tree.children_visits[node_index],
        jax.nn.softmax(tree.children_prior_logits[node_index]),
        value_scale=value_scale,
        maxvisit_init=maxvisit_init,
        rescale_values=True,
        use_mixed_value=use_mixed_value,
        min_q_range=min_q_range,
        tree_low=low,
        tree_high=high,
    )


def _model_root(model: AbstractModel, state: PyTree[Any]):
    """mctx's root for a batch of the world's states: the model's root states as the
    embeddings, and their evaluation."""
    embedding, evaluation = model.root(state)
    root = mctx.RootFnOutput(
        prior_logits=evaluation.logits, value=evaluation.value, embedding=embedding
    )
    return root, evaluation


class AbstractMctxSearch(AbstractSearch):
    """A search by one of mctx's policies, which builds a fresh tree every search: what
    [`azx.search.MctxPUCT`][] and [`azx.search.MctxGumbel`][] share.

    They take the same parts as the native searches ([`azx.search.PUCT`][],
    [`azx.search.Gumbel`][]), less the tree's (no capacity, reuse or backend), and hand
    them to mctx; each gives `policy_output`, the mctx call for a batch under one key.
    `chance_nodes` is the native searches' switch: in a game that exposes its chance
    ([`azx.envs.AbstractChanceEnv`][]), plan over the outcomes (where mctx can), or with
    `False` sample one outcome per expansion.

    **Arguments** (of both):

    - `num_simulations`: simulations per search.
    - `rule`, `root_policy`: the algorithm's parts, whose settings go to mctx.
    - `qtransform`: [`azx.search.QBySiblings`][] (mctx's own) or
      [`azx.search.QByTree`][].
    - `max_depth`: most edges from the root to a leaf (default: no limit).
    - `gamma`: discount per move, in (0, 1].
    - `chance_nodes`: as above.
    - `chance_expectation`: as the native searches'.
    """

    num_simulations: int = eqx.field(static=True)
    qtransform: AbstractQTransform = part_field(QBySiblings)
    max_depth: int | None = static_field(None)
    gamma: float = static_field(1.0)
    chance_nodes: bool = static_field(True)
    chance_expectation: bool = static_field(False)
    rule: eqx.AbstractVar[PUCTRule | GumbelRule]
    root_policy: eqx.AbstractVar[PUCTRoot | SequentialHalving]

    #: mctx rebuilds its tree every search, so no tree is reused.
    reuse_tree: ClassVar[bool] = False
    #: Why this search cannot plan over chance nodes, or None where mctx's stochastic
    #: policy (`mctx.stochastic_muzero_policy`) plans with a [`azx.search.ChanceModel`][].
    chance_refusal: eqx.AbstractClassVar[str | None]

    def __check_init__(self):
        check_positive_int("num_simulations", self.num_simulations)
        if self.max_depth is not None:
            check_positive_int("max_depth", self.max_depth)
        check_float("gamma", self.gamma, low=0.0, high=1.0, low_open=True)
        check_part("qtransform", self.qtransform, AbstractQTransform)

    @abc.abstractmethod
    def policy_output(
        self, model: AbstractModel, state: PyTree[Any], key: PRNGKey
    ) -> mctx.PolicyOutput:
        """mctx's output for the batch `state` of the world under one key, planning with
        `model` (a model this search plans with, which `search` checks): its root states
        are mctx's root embeddings and its steps mctx's recurrent functions. The output
        holds the action, the action weights and the search tree (whose statistics, such
        as the root's Q values, a caller may read)."""

    def init(self, env: AbstractEnv, batch_size: int) -> MctxTree:
        check_players(env)
        if self.plans_chance(env) and self.chance_refusal is not None:
            name = env.name
            raise ValueError(
                f"{type(self).__name__} cannot plan over the chance of environment {name!r} "
                f"(an AbstractChanceEnv): {self.chance_refusal}"
            )
        check_positive_int("batch_size", batch_size)
        return MctxTree()

    def init_for_states(
        self, example_state: PyTree[Array], num_actions: int, batch_size: int
    ) -> MctxTree:
        """The (empty) tree for `search` over a model whose states look like
        `example_state`: what the native searches' `init_for_states` is for them, so that
        one caller serves both."""
        del example_state
        check_positive_int("num_actions", num_actions)
        check_positive_int("batch_size", batch_size)
        return MctxTree()

    def search(
        self,
        model: AbstractModel,
        tree: MctxTree,
        state: PyTree[Any],
        *,
        key: PRNGKey | PRNGKeys,
    ) -> SearchOutput:
        """Search from the batched `state` with `model` by mctx; `tree` is what `init` or
        `init_for_states` returned. A model with chance nodes must be a
        [`azx.search.ChanceModel`][], which mctx's stochastic policy plans with, and only
        where this search has one (`chance_refusal`).

        **Raises:** `ValueError` for a model with chance nodes that this search cannot
        plan with.
        """
        if model.has_chance and self.chance_refusal is not None:
            raise ValueError(
                f"{type(self).__name__} cannot plan over the chance nodes of "
                f"{type(model).__name__}: {self.chance_refusal}"
            )
        if model.has_chance and not isinstance(model, ChanceModel):
            raise ValueError(
                f"{type(self).__name__} plans over chance only with an azx.search.ChanceModel "
                f"(mctx's stochastic policy needs the game's actions and outcomes); "
                f"{type(model).__name__} has chance nodes"
            )
        return _by_rows(
            lambda rows, one_key: _read(self.policy_output(model, rows, one_key)),
            tree,
            state,
            key,
        )

    def without_exploration(self) -> "AbstractMctxSearch":
        """The same search with its root policy's exploration switched off."""
        return dataclasses.replace(self, root_policy=self.root_policy.without_exploration())

    def advance(
        self,
        tree: MctxTree,
        action: Int[Array, " batch"],
        done: Bool[Array, " batch"],
        outcome: Int[Array, " batch"] | None = None,
    ) -> MctxTree:
        del action, done, outcome  # mctx keeps no tree between searches
        return tree


def _read(
    output: mctx.PolicyOutput,
) -> tuple[Int[Array, " batch"], Float[Array, "batch num_actions"], Float[Array, " batch"]]:
    """Action, policy target and root value of each row of an mctx search."""
    value = output.search_tree.summary().value
    return output.action.astype(jnp.int32), output.action_weights, value


def _by_rows(policy, tree: MctxTree, state: EnvState, key: PRNGKey | PRNGKeys) -> SearchOutput:
    """`policy(state, key)` (action, policy target and root value of a batch from one mctx
    call) as a search output, with one key for the batch or one per row."""
    batch_size = jax.tree.leaves(state)[0].shape[0]
    keys = row_keys(key, batch_size)
    if keys is not key:  # one key for the batch: one mctx call, as mctx is meant to be used
        action, policy_target, root_value = policy(state, key)
    else:
        # One key per row: mctx draws its noise for the whole batch from one key, so run
        # it row by row (vmapped batch-1 searches) to make each row depend on its key
        # alone.
        def one_row(row, row_key):
            batched = jax.tree.map(lambda x: x[None], row)
            return jax.tree.map(lambda x: x[0], policy(batched, row_key))

        action, policy_target, root_value = jax.vmap(one_row)(state, keys)
    return SearchOutput(
        action=action, policy_target=policy_target, root_value=root_value, tree=tree
    )


class MctxPUCT(AbstractMctxSearch):
    """AlphaZero/MuZero PUCT search by `mctx.muzero_policy` (no tree reuse); in a game that
    exposes its chance ([`azx.envs.AbstractChanceEnv`][]), Stochastic MuZero's search by
    `mctx.stochastic_muzero_policy` with the game as its model.

    With chance nodes, mctx's decision function is a decision step of
    [`azx.search.ChanceModel`][] (the afterstate, its outcomes' log-probabilities as the
    chance logits, and its value from one sampled outcome or the expectation over all of
    them) and its chance function the step that applies an outcome, so both backends plan
    over the same model. mctx calls both functions at every node, so a simulation costs
    twice the native search's network evaluations.
    With [`azx.search.QByTree`][] the range is over mctx's decision edges only.

    **Arguments:** as [`azx.search.PUCT`][], without `capacity`, `reuse_tree`, `backend` and
    `store_all_state_leaves`.
    """

    rule: PUCTRule = part_field(PUCTRule)
    root_policy: PUCTRoot = part_field(PUCTRoot)

    chance_refusal: ClassVar[str | None] = None

    def policy_output(
        self, model: AbstractModel, state: PyTree[Any], key: PRNGKey
    ) -> mctx.PolicyOutput:
        if model.has_chance:
            return self._stochastic_policy_output(model, state, key)
        root, evaluation = _model_root(model, state)
        with third_party_numerics():
            return mctx.muzero_policy(
                root=root, recurrent_fn=_model_recurrent_fn(model), **self._common(evaluation, key)
            )

    def _stochastic_policy_output(
        self, model: ChanceModel, state: EnvState, key: PRNGKey
    ) -> mctx.PolicyOutput:
        """`mctx.stochastic_muzero_policy` over `model`'s game, from decision nodes."""
        decision, evaluation = model.root(state)
        # The root is a decision node: its edges are the game's actions, without the
        # padding to the outcomes that the chance model's evaluations carry.
        num_actions = model.env.num_actions
        evaluation = eqx.tree_at(
            lambda e: (e.logits, e.legal_action_mask),
            evaluation,
            (
                evaluation.logits[:, :num_actions],
                evaluation.legal_action_mask[:, :num_actions],
            ),
        )
        root = mctx.RootFnOutput(
            prior_logits=evaluation.logits, value=evaluation.value, embedding=decision
        )
        decision_fn, chance_fn = _stochastic_recurrent_fns(model)
        with third_party_numerics():
            return mctx.stochastic_muzero_policy(
                root=root,
                decision_recurrent_fn=decision_fn,
                chance_recurrent_fn=chance_fn,
                **self._common(evaluation, key),
            )

    def _common(self, evaluation: Evaluation, key: PRNGKey) -> dict:
        """The arguments of mctx's PUCT policies besides the root and the model."""
        qtransform = (
            mctx.qtransform_by_parent_and_siblings
            if isinstance(self.qtransform, QBySiblings)
            else qtransform_by_tree
        )
        return dict(
            params=(),
            rng_key=key,
            num_simulations=self.num_simulations,
            invalid_actions=~evaluation.legal_action_mask,
            max_depth=self.max_depth,
            qtransform=qtransform,
            dirichlet_fraction=self.root_policy.dirichlet_fraction,
            dirichlet_alpha=self.root_policy.dirichlet_alpha,
            pb_c_init=self.rule.c_init,
            pb_c_base=self.rule.c_base,
            temperature=self.root_policy.temperature,
        )


class MctxGumbel(AbstractMctxSearch):
    """Gumbel MuZero search by `mctx.gumbel_muzero_policy` (no tree reuse).

    mctx has no Gumbel variant of its stochastic policy (`mctx.stochastic_muzero_policy`
    is PUCT's), so in a game that exposes its chance this search refuses to run with
    `chance_nodes=True` (the default) rather than plan otherwise than it says; pass
    `chance_nodes=False` to sample one outcome per expansion, or use the native
    [`azx.search.Gumbel`][], which has chance nodes.

    **Arguments:** as [`azx.search.Gumbel`][], without `capacity`, `reuse_tree`, `backend`
    and `store_all_state_leaves`; the root policy's `reorder_rounds` and
    `visit_count_target` are native only.
    """

    rule: GumbelRule = part_field(GumbelRule)
    root_policy: SequentialHalving = part_field(SequentialHalving)

    chance_refusal: ClassVar[str | None] = (
        "mctx has no Gumbel variant of its stochastic policy (mctx.stochastic_muzero_policy "
        "is PUCT only). Use the native Gumbel (backend='native'), which has chance nodes, "
        "MctxPUCT (algo 'puct'), or chance_nodes=False to sample one outcome per expansion"
    )

    def policy_output(
        self, model: AbstractModel, state: PyTree[Any], key: PRNGKey
    ) -> mctx.PolicyOutput:
        root, evaluation = _model_root(model, state)
        rule = self.rule
        if isinstance(self.qtransform, QBySiblings):
            qtransform = functools.partial(
                mctx.qtransform_completed_by_mix_value,
                value_scale=rule.value_scale,
                maxvisit_init=rule.maxvisit_init,
                rescale_values=rule.rescale_values,
                use_mixed_value=rule.use_mixed_value,
                epsilon=rule.min_q_range,
            )
        else:
            qtransform = functools.partial(
                qtransform_completed_by_tree,
                value_scale=rule.value_scale,
                maxvisit_init=rule.maxvisit_init,
                use_mixed_value=rule.use_mixed_value,
                min_q_range=rule.min_q_range,
            )
        with third_party_numerics():
            output = mctx.gumbel_muzero_policy(
                params=(),
                rng_key=key,
                root=root,
                recurrent_fn=_model_recurrent_fn(model),
                num_simulations=self.num_simulations,
                invalid_actions=~evaluation.legal_action_mask,
                max_depth=self.max_depth,
                qtransform=qtransform,
                max_num_considered_actions=self.root_policy.max_num_considered_actions,
                gumbel_scale=self.root_policy.gumbel_scale,
            )
        return output
