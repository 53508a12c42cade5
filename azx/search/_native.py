"""The native searches, [`azx.search.PUCT`][] and [`azx.search.Gumbel`][]: a preallocated
[`azx.search.Tree`][] that they can reuse between moves, the loop of
`azx.search._simulate`, and the parts each injects into it.
"""

import equinox as eqx
import jax
from jaxtyping import Array, Bool, Int

from .._types import EnvState, PRNGKey, PRNGKeys
from .._validate import check_float, check_positive_int
from ..envs import AbstractChanceEnv, AbstractEnv
from ._abstract import AbstractSearch, SearchOutput, check_part, part_field, static_field
from ._backend import AbstractBackend, PlatformBackend
from ._chance import ChanceModel, empty_chance_tree, keep_outcome_subtree
from ._gumbel import GumbelRule, SequentialHalving
from ._model import AbstractModel, EnvironmentModel, PolicyValueNet, check_players, row_keys
from ._puct import PUCTRoot, PUCTRule
from ._simulate import (
    AbstractQTransform,
    AbstractRootPolicy,
    AbstractSelectionRule,
    QBySiblings,
    simulate,
    start,
)
from ._tree import ROOT_INDEX, Tree, empty_tree, keep_subtree, tree_for


class AbstractNativeSearch(AbstractSearch):
    """A search over a preallocated [`azx.search.Tree`][] that it can reuse between moves:
    what [`azx.search.PUCT`][] and [`azx.search.Gumbel`][] share. Each is its parts: a
    selection rule, a root policy, a Q transform and a backend, and the sizes below.

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
    """

    num_simulations: eqx.AbstractVar[int]
    rule: eqx.AbstractVar[AbstractSelectionRule]
    root_policy: eqx.AbstractVar[AbstractRootPolicy]
    qtransform: eqx.AbstractVar[AbstractQTransform]
    backend: eqx.AbstractVar[AbstractBackend]
    max_depth: eqx.AbstractVar[int | None]
    capacity: eqx.AbstractVar[int | None]
    reuse_tree: eqx.AbstractVar[bool]
    gamma: eqx.AbstractVar[float]
    store_all_state_leaves: eqx.AbstractVar[bool]
    chance_nodes: eqx.AbstractVar[bool]

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

    def _plans_chance(self, env: AbstractEnv) -> bool:
        return self.chance_nodes and isinstance(env, AbstractChanceEnv)

    def init(self, env: AbstractEnv, batch_size: int) -> Tree:
        check_players(env)
        check_positive_int("batch_size", batch_size)
        if self._plans_chance(env):
            return empty_chance_tree(env, batch_size, self.capacity)
        return empty_tree(env, batch_size, self.capacity, self.store_all_state_leaves)

    def init_for_states(self, example_state: EnvState, num_actions: int, batch_size: int) -> Tree:
        """Empty trees for `batch_size` searches over a model whose states look like
        `example_state` (ONE state, no batch axis; any pytree of arrays, such as a learned
        model's embedding) with `num_actions` edges per node, for
        [`azx.search.AbstractNativeSearch.search`][]. Every leaf of the states is kept.
        """
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
        `outcome`, or for an outcome outside `[0, num_outcomes)`.
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

    def __call__(
        self,
        net: PolicyValueNet,
        env: AbstractEnv,
        tree: Tree,
        env_state: EnvState,
        *,
        key: PRNGKey | PRNGKeys,
    ) -> SearchOutput:
        check_players(env)
        if not self._plans_chance(env):
            model = EnvironmentModel(env=env, net=net, gamma=self.gamma)
            return self.search(model, tree, env_state, key=key)
        model = ChanceModel(env=env, net=net, gamma=self.gamma)
        output = self.search(model, tree, env_state, key=key)
        # The tree's edges at the root are as wide as the actions or the outcomes.
        target = output.policy_target[:, : env.num_actions]
        return eqx.tree_at(lambda o: o.policy_target, output, target)

    def search(
        self, model: AbstractModel, tree: Tree, state: EnvState, *, key: PRNGKey | PRNGKeys
    ) -> SearchOutput:
        """Search from the batched `state` with any [`azx.search.AbstractModel`][]: the
        root policy sets up the roots, the loop runs the simulations, and the root policy
        reads the action and the policy target from the statistics."""
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


class PUCT(AbstractNativeSearch):
    """AlphaZero search: PUCT selection ([`azx.search.PUCTRule`][]), Dirichlet noise at the
    root, the action sampled from the root's visit counts and the policy target their
    distribution ([`azx.search.PUCTRoot`][]); the root value is the root's mean backed-up
    value. With `reuse_tree`, `advance` keeps the subtree under the played action (and, with
    chance nodes, the outcome that followed it), and the next search starts from its
    statistics.

    **Arguments:** those of [`azx.search.AbstractNativeSearch`][].
    """

    num_simulations: int = eqx.field(static=True)
    rule: PUCTRule = part_field(PUCTRule)
    root_policy: PUCTRoot = part_field(PUCTRoot)
    qtransform: AbstractQTransform = part_field(QBySiblings)
    backend: AbstractBackend = part_field(PlatformBackend)
    max_depth: int | None = static_field(None)
    capacity: int | None = static_field(None)
    reuse_tree: bool = static_field(False)
    gamma: float = static_field(1.0)
    store_all_state_leaves: bool = static_field(False)
    chance_nodes: bool = static_field(True)

    def __check_init__(self):
        check_part("rule", self.rule, PUCTRule)
        check_part("root_policy", self.root_policy, PUCTRoot)


class Gumbel(AbstractNativeSearch):
    """Gumbel MuZero search (Danihelka et al., 2022): Gumbel-top-k and sequential halving at
    the root ([`azx.search.SequentialHalving`][]), the deterministic improved-policy rule
    below it ([`azx.search.GumbelRule`][]), and policy targets
    `softmax(logits + sigma(completed_q))` (or the visit counts). The root value is the
    root's mean backed-up value. Tree reuse works as for [`azx.search.PUCT`][].

    **Arguments:** those of [`azx.search.AbstractNativeSearch`][].
    """

    num_simulations: int = eqx.field(static=True)
    rule: GumbelRule = part_field(GumbelRule)
    root_policy: SequentialHalving = part_field(SequentialHalving)
    qtransform: AbstractQTransform = part_field(QBySiblings)
    backend: AbstractBackend = part_field(PlatformBackend)
    max_depth: int | None = static_field(None)
    capacity: int | None = static_field(None)
    reuse_tree: bool = static_field(False)
    gamma: float = static_field(1.0)
    store_all_state_leaves: bool = static_field(False)
    chance_nodes: bool = static_field(True)

    def __check_init__(self):
        check_part("rule", self.rule, GumbelRule)
        check_part("root_policy", self.root_policy, SequentialHalving)
