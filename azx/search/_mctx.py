"""The mctx backend: `mctx.muzero_policy` and `mctx.gumbel_muzero_policy` behind AbstractSearch."""

import abc
import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import mctx
from jaxtyping import Array, Bool, Float, Int

from .._numerics import third_party_numerics
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
from ._model import PolicyValueNet, check_players, evaluate, row_keys, transition
from ._qtransforms import completed_q, puct_value_score


class MctxTree(eqx.Module):
    """The "tree" of the mctx backend: empty, because mctx rebuilds its tree every search.

    It has no leaves, so it threads through `jax.lax.scan` carries unchanged.
    """


def _recurrent_fn(net: PolicyValueNet, env: AbstractEnv, gamma: float):
    def recurrent_fn(params, key, action, state):
        del params  # the network is closed over, so that mctx never differentiates it
        step = transition(net, env, state, action, key, gamma)
        output = mctx.RecurrentFnOutput(
            reward=step.reward,
            discount=step.discount,
            prior_logits=step.evaluation.logits,
            value=step.evaluation.value,
        )
        return output, step.state

    return recurrent_fn


def _tree_q_range(tree: mctx.Tree) -> tuple[Float[Array, ""], Float[Array, ""]]:
    # One unbatched mctx tree: min and max Q over every visited edge.
    visited = tree.children_visits > 0
    q = tree.children_rewards + tree.children_discounts * tree.children_values
    low = jnp.min(jnp.where(visited, q, jnp.inf))
    high = jnp.max(jnp.where(visited, q, -jnp.inf))
    return low, high


def qtransform_by_tree(tree: mctx.Tree, node_index: Int[Array, ""]) -> Float[Array, " A"]:
    """mctx Q transform for PUCT with `q_normalisation="tree"`: Q scaled by the min/max Q
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
) -> Float[Array, " A"]:
    """mctx Q transform for Gumbel with `q_normalisation="tree"`: completed Q rescaled by
    the min/max over the tree's visited edges and the node's own completed Q."""
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
        tree_low=low,
        tree_high=high,
    )


def _root(net: PolicyValueNet, env: AbstractEnv, env_state: EnvState):
    evaluation = evaluate(net, env, env_state)
    root = mctx.RootFnOutput(
        prior_logits=evaluation.logits, value=evaluation.value, embedding=env_state
    )
    return root, evaluation


class AbstractMctxSearch(AbstractSearch):
    """A search by one of mctx's policies, which builds a fresh tree every search: what
    [`azx.search.MctxPUCT`][] and [`azx.search.MctxGumbel`][] share.

    Subclasses give their fields and `__init__`, and `_policy`, the mctx call for a batch
    under one key.
    """

    num_simulations: eqx.AbstractVar[int]
    max_depth: eqx.AbstractVar[int | None]
    gamma: eqx.AbstractVar[float]
    q_normalisation: eqx.AbstractVar[str]

    @abc.abstractmethod
    def _policy(
        self, net: PolicyValueNet, env: AbstractEnv, env_state: EnvState, key: PRNGKey
    ) -> tuple[Int[Array, " batch"], Float[Array, "batch num_actions"], Float[Array, " batch"]]:
        """Action, policy target and root value of each row, from one mctx call."""

    def init(self, env: AbstractEnv, batch_size: int) -> MctxTree:
        check_players(env)
        check_positive_int("batch_size", batch_size)
        return MctxTree()

    def __call__(
        self,
        net: PolicyValueNet,
        env: AbstractEnv,
        tree: MctxTree,
        env_state: EnvState,
        *,
        key: PRNGKey | PRNGKeys,
    ) -> SearchOutput:
        check_players(env)
        batch_size = jax.tree.leaves(env_state)[0].shape[0]
        keys = row_keys(key, batch_size)
        if keys is not key:  # one key for the batch: one mctx call, as mctx is meant to be used
            action, policy_target, root_value = self._policy(net, env, env_state, key)
        else:
            # One key per row: mctx draws its noise for the whole batch from one key, so run
            # it row by row (vmapped batch-1 searches) to make each row depend on its key
            # alone.
            def one_row(state, row_key):
                batched = jax.tree.map(lambda x: x[None], state)
                return jax.tree.map(lambda x: x[0], self._policy(net, env, batched, row_key))

            action, policy_target, root_value = jax.vmap(one_row)(env_state, keys)
        return SearchOutput(
            action=action, policy_target=policy_target, root_value=root_value, tree=tree
        )

    def advance(
        self, tree: MctxTree, action: Int[Array, " batch"], done: Bool[Array, " batch"]
    ) -> MctxTree:
        del action, done  # mctx keeps no tree between searches
        return tree


class MctxPUCT(AbstractMctxSearch):
    """AlphaZero/MuZero PUCT search by `mctx.muzero_policy` (no tree reuse)."""

    num_simulations: int = eqx.field(static=True)
    max_depth: int | None = eqx.field(static=True)
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
        gamma: float = 1.0,
        c_init: float = 1.25,
        c_base: float = 19652.0,
        dirichlet_alpha: float = 0.3,
        dirichlet_fraction: float = 0.25,
        temperature: float = 1.0,
        q_normalisation: str = "siblings",
    ):
        """**Arguments:** as [`azx.search.PUCT`][], without `capacity` and `reuse_tree`."""
        check_positive_int("num_simulations", num_simulations)
        check_optional_positive_int("max_depth", max_depth)
        check_float("gamma", gamma, low=0.0, high=1.0, low_open=True)
        check_float("c_init", c_init, low=0.0)
        check_float("c_base", c_base, low=0.0, low_open=True)
        check_float("dirichlet_alpha", dirichlet_alpha, low=0.0, low_open=True)
        check_float("dirichlet_fraction", dirichlet_fraction, low=0.0, high=1.0)
        check_float("temperature", temperature, low=0.0)
        check_choice("q_normalisation", q_normalisation, Q_NORMALISATIONS)
        self.num_simulations = num_simulations
        self.max_depth = max_depth
        self.gamma = float(gamma)
        self.c_init = float(c_init)
        self.c_base = float(c_base)
        self.dirichlet_alpha = float(dirichlet_alpha)
        self.dirichlet_fraction = float(dirichlet_fraction)
        self.temperature = float(temperature)
        self.q_normalisation = q_normalisation

    def _policy(self, net: PolicyValueNet, env: AbstractEnv, env_state: EnvState, key: PRNGKey):
        root, evaluation = _root(net, env, env_state)
        qtransform = (
            mctx.qtransform_by_parent_and_siblings
            if self.q_normalisation == "siblings"
            else qtransform_by_tree
        )
        with third_party_numerics():
            output = mctx.muzero_policy(
                params=(),
                rng_key=key,
                root=root,
                recurrent_fn=_recurrent_fn(net, env, self.gamma),
                num_simulations=self.num_simulations,
                invalid_actions=~evaluation.legal_action_mask,
                max_depth=self.max_depth,
                qtransform=qtransform,
                dirichlet_fraction=self.dirichlet_fraction,
                dirichlet_alpha=self.dirichlet_alpha,
                pb_c_init=self.c_init,
                pb_c_base=self.c_base,
                temperature=self.temperature,
            )
        value = output.search_tree.summary().value
        return output.action.astype(jnp.int32), output.action_weights, value


class MctxGumbel(AbstractMctxSearch):
    """Gumbel MuZero search by `mctx.gumbel_muzero_policy` (no tree reuse)."""

    num_simulations: int = eqx.field(static=True)
    max_depth: int | None = eqx.field(static=True)
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
        gamma: float = 1.0,
        max_num_considered_actions: int = 16,
        gumbel_scale: float = 1.0,
        value_scale: float = 0.1,
        maxvisit_init: float = 50.0,
        rescale_values: bool = True,
        use_mixed_value: bool = True,
        q_normalisation: str = "siblings",
    ):
        """**Arguments:** as [`azx.search.Gumbel`][], without `capacity` and `reuse_tree`."""
        check_positive_int("num_simulations", num_simulations)
        check_optional_positive_int("max_depth", max_depth)
        check_float("gamma", gamma, low=0.0, high=1.0, low_open=True)
        check_positive_int("max_num_considered_actions", max_num_considered_actions)
        check_float("gumbel_scale", gumbel_scale, low=0.0)
        check_float("value_scale", value_scale, low=0.0, low_open=True)
        check_float("maxvisit_init", maxvisit_init, low=0.0)
        check_choice("q_normalisation", q_normalisation, Q_NORMALISATIONS)
        self.num_simulations = num_simulations
        self.max_depth = max_depth
        self.gamma = float(gamma)
        self.max_num_considered_actions = max_num_considered_actions
        self.gumbel_scale = float(gumbel_scale)
        self.value_scale = float(value_scale)
        self.maxvisit_init = float(maxvisit_init)
        self.rescale_values = bool(rescale_values)
        self.use_mixed_value = bool(use_mixed_value)
        self.q_normalisation = q_normalisation

    def _policy(self, net: PolicyValueNet, env: AbstractEnv, env_state: EnvState, key: PRNGKey):
        root, evaluation = _root(net, env, env_state)
        if self.q_normalisation == "siblings":
            qtransform = functools.partial(
                mctx.qtransform_completed_by_mix_value,
                value_scale=self.value_scale,
                maxvisit_init=self.maxvisit_init,
                rescale_values=self.rescale_values,
                use_mixed_value=self.use_mixed_value,
            )
        else:
            qtransform = functools.partial(
                qtransform_completed_by_tree,
                value_scale=self.value_scale,
                maxvisit_init=self.maxvisit_init,
                use_mixed_value=self.use_mixed_value,
            )
        with third_party_numerics():
            output = mctx.gumbel_muzero_policy(
                params=(),
                rng_key=key,
                root=root,
                recurrent_fn=_recurrent_fn(net, env, self.gamma),
                num_simulations=self.num_simulations,
                invalid_actions=~evaluation.legal_action_mask,
                max_depth=self.max_depth,
                qtransform=qtransform,
                max_num_considered_actions=self.max_num_considered_actions,
                gumbel_scale=self.gumbel_scale,
            )
        value = output.search_tree.summary().value
        return output.action.astype(jnp.int32), output.action_weights, value
