"""The native searches: AlphaZero PUCT and Gumbel MuZero over the arrays of `Tree`.

What both share (configuration, the tree's life cycle, running the simulations) is in
`AbstractNativeSearch`; PUCT and Gumbel fill in their root (noise or Gumbel samples), their
selection rules (`azx.search._select`) and their targets.
"""

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from .. import _random
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
from ._kernels import KERNELS, Kernels
from ._model import ILLEGAL_LOGIT, Evaluation, PolicyValueNet, check_players, evaluate, row_keys
from ._qtransforms import considered_visits_table
from ._select import (
    Node,
    completed_q,
    gumbel_interior,
    halving_choice,
    masked_argmax,
    ordered_simulations,
    prior_probabilities,
    puct,
    root_node,
    sequential_halving,
    tree_q_range,
)
from ._simulate import RootSelect, simulate, start
from ._tree import Tree, empty_tree, keep_subtree


def _batch_size(env_state: EnvState) -> int:
    return jax.tree.leaves(env_state)[0].shape[0]


def _split_rows(keys: PRNGKeys, num: int) -> Array:
    return jax.vmap(lambda k: jax.random.split(k, num))(keys)


#: Which leaves of each node's environment state a tree keeps (`stored_leaves`).
STORED_LEAVES = ("read", "all")


def _check_common(
    num_simulations, max_depth, capacity, gamma, q_normalisation, kernels, stored_leaves
):
    check_positive_int("num_simulations", num_simulations)
    check_optional_positive_int("max_depth", max_depth)
    check_optional_positive_int("capacity", capacity)
    if capacity is not None and capacity < 2:
        raise ValueError(f"capacity must be at least 2 (a root and one child), got {capacity}")
    check_float("gamma", gamma, low=0.0, high=1.0, low_open=True)
    check_choice("q_normalisation", q_normalisation, Q_NORMALISATIONS)
    check_choice("kernels", kernels, KERNELS)
    check_choice("stored_leaves", stored_leaves, STORED_LEAVES)


def _default_capacity(num_simulations: int, capacity: int | None, reuse_tree: bool) -> int:
    if capacity is not None:
        return capacity
    # A reused subtree can hold up to one search's worth of nodes before the next begins.
    return (2 if reuse_tree else 1) * num_simulations + 1


class AbstractNativeSearch(AbstractSearch):
    """A search over a preallocated [`azx.search.Tree`][] that it can reuse between moves:
    what [`azx.search.PUCT`][] and [`azx.search.Gumbel`][] share.

    Subclasses give their fields and `__init__`, the rule that selects below the root
    (`_select`), and `__call__`, which prepares the root and turns the statistics into an
    action and a policy target around `_simulate`.
    """

    num_simulations: eqx.AbstractVar[int]
    max_depth: eqx.AbstractVar[int | None]
    capacity: eqx.AbstractVar[int]
    reuse_tree: eqx.AbstractVar[bool]
    gamma: eqx.AbstractVar[float]
    q_normalisation: eqx.AbstractVar[str]
    kernels: eqx.AbstractVar[Kernels]
    stored_leaves: eqx.AbstractVar[str]

    #: Whether `_select` is cheap enough for the row loop to finish descents in
    #: (`azx.search._kernels.descend`).
    _select_fits_row_loop: eqx.AbstractClassVar[bool]

    @abc.abstractmethod
    def _select(self, node: Node) -> tuple[Int[Array, " batch"], Float[Array, " batch"]]:
        """The selection rule below the root: each row's action at `node` and its score."""

    def init(self, env: AbstractEnv, batch_size: int) -> Tree:
        check_players(env)
        check_positive_int("batch_size", batch_size)
        return empty_tree(env, batch_size, self.capacity, self.stored_leaves)

    def advance(
        self, tree: Tree, action: Int[Array, " batch"], done: Bool[Array, " batch"]
    ) -> Tree:
        if not self.reuse_tree:
            return tree  # every search starts afresh anyway
        return keep_subtree(tree, action, done)

    def _simulate(
        self,
        net: PolicyValueNet,
        env: AbstractEnv,
        tree: Tree,
        env_state: EnvState,
        evaluation: Evaluation,
        root_prior: Float[Array, "batch num_actions"],
        root_select: RootSelect | None,
        key: PRNGKeys,
    ) -> tuple[Tree, Int[Array, "batch num_actions"]]:
        """Put the roots into `tree` and run the simulations: the tree, and each root
        action's visits in this search (counted only with `root_select`)."""
        tree = start(tree, evaluation, root_prior, self.reuse_tree)
        return simulate(
            net,
            env,
            tree,
            env_state,
            key,
            num_simulations=self.num_simulations,
            max_depth=self.max_depth,
            gamma=self.gamma,
            reuse_tree=self.reuse_tree,
            q_normalisation=self.q_normalisation,
            kernels=self.kernels,
            root_select=root_select,
            interior_select=self._select,
            rows_finish=self._select_fits_row_loop,
            selection_prior=_selection_prior,
        )


def _selection_prior(evaluation: Evaluation) -> Float[Array, "batch num_actions"]:
    return prior_probabilities(evaluation.logits, evaluation.legal_action_mask)


class PUCT(AbstractNativeSearch):
    """AlphaZero search: PUCT selection, Dirichlet noise at the root, visit-count targets.

    The action is sampled from the root's visit counts (see `temperature`) and the policy
    target is their distribution; the root value is the root's mean backed-up value. With
    `reuse_tree`, `advance` keeps the subtree under the played action, and the next
    search starts from its statistics.
    """

    _select_fits_row_loop = True

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
    kernels: Kernels = eqx.field(static=True)
    stored_leaves: str = eqx.field(static=True)

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
        kernels: Kernels = "auto",
        stored_leaves: str = "read",
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
        - `kernels`: how the descent and the backup run, with the same results bit for bit
          at different speeds: `"row"` one batch row at a time in scalar loops (fast on
          XLA:CPU in games with few actions), `"lockstep"` all rows together (fast on GPU
          and TPU, and on XLA:CPU in games with many actions), `"auto"` (the default)
          `"row"` on XLA:CPU in games with at most 12 actions and `"lockstep"` otherwise.
        - `stored_leaves`: which leaves of each node's environment state the tree keeps:
          `"read"` (the default) only those a step from the node reads, found by tracing
          `env.step` once (for pgx games all but `observation` and `rewards`); `"all"`
          every leaf, for code that reads the others from `Tree.state`, where leaves not
          kept read as zeros.
        """
        _check_common(
            num_simulations, max_depth, capacity, gamma, q_normalisation, kernels, stored_leaves
        )
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
        self.kernels = kernels
        self.stored_leaves = stored_leaves

    def _select(self, node: Node) -> tuple[Int[Array, " batch"], Float[Array, " batch"]]:
        return puct(node, c_init=self.c_init, c_base=self.c_base)

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
        keys = _split_rows(row_keys(key, _batch_size(env_state)), 3)
        noise_key, search_key, action_key = keys[:, 0], keys[:, 1], keys[:, 2]
        evaluation = evaluate(net, env, env_state)
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
        root_prior = prior_probabilities(logits, legal)

        # The root is selected like every other node, inside the descent.
        tree, _ = self._simulate(
            net, env, tree, env_state, evaluation, root_prior, None, search_key
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
            action = masked_argmax(policy_target, legal)
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


class Gumbel(AbstractNativeSearch):
    """Gumbel MuZero search (Danihelka et al., 2022): Gumbel-top-k and sequential halving at
    the root, deterministic improved-policy selection below it, and policy targets
    `softmax(logits + sigma(completed_q))` (or the normalised visit counts, with
    `policy_target="visits"`).

    The action is the candidate that survives sequential halving (the best
    `gumbel + logits + sigma(completed_q)` among the most visited); the root value is the
    root's mean backed-up value. Tree reuse works as for [`azx.search.PUCT`][].
    """

    # Its rule reads more per level than XLA:CPU compiles into one function in a loop, and
    # its trees are shallow anyway.
    _select_fits_row_loop = False

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
    kernels: Kernels = eqx.field(static=True)
    stored_leaves: str = eqx.field(static=True)
    reorder_rounds: bool = eqx.field(static=True)
    policy_target: str = eqx.field(static=True)

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
        kernels: Kernels = "auto",
        stored_leaves: str = "read",
        reorder_rounds: bool = True,
        policy_target: str = "improved",
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
        - `kernels`, `stored_leaves`: as [`azx.search.PUCT`][].
        - `reorder_rounds`: let the rounds of sequential halving that visit each of their
          candidates once run in whichever order is cheapest (see the search guide). They
          end with the same visits, Q, action and target as in mctx's order, and the root
          value to rounding; `False` keeps mctx's order in every round. Either way the
          order is kept with `q_normalisation="tree"` or when the tree may fill up.
        - `policy_target`: `"improved"`, the improved policy `softmax(logits +
          sigma(completed_q))` of the paper, which rates every legal move by its searched
          (or estimated) value; or `"visits"`, the root's visit counts of this search
          normalised, AlphaZero's target (with few simulations, mostly the candidates of
          the Gumbel draw, in proportions set by the halving schedule).
        """
        _check_common(
            num_simulations, max_depth, capacity, gamma, q_normalisation, kernels, stored_leaves
        )
        check_positive_int("max_num_considered_actions", max_num_considered_actions)
        check_float("gumbel_scale", gumbel_scale, low=0.0)
        check_float("value_scale", value_scale, low=0.0, low_open=True)
        check_float("maxvisit_init", maxvisit_init, low=0.0)
        check_choice("policy_target", policy_target, ("improved", "visits"))
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
        self.kernels = kernels
        self.stored_leaves = stored_leaves
        self.reorder_rounds = bool(reorder_rounds)
        self.policy_target = policy_target

    def _options(self) -> dict:
        return dict(
            value_scale=self.value_scale,
            maxvisit_init=self.maxvisit_init,
            rescale_values=self.rescale_values,
            use_mixed_value=self.use_mixed_value,
        )

    def _select(self, node: Node) -> tuple[Int[Array, " batch"], Float[Array, " batch"]]:
        return gumbel_interior(node, **self._options())

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
        keys = _split_rows(row_keys(key, _batch_size(env_state)), 2)
        gumbel_key, search_key = keys[:, 0], keys[:, 1]
        evaluation = evaluate(net, env, env_state)
        legal = evaluation.legal_action_mask
        logits = evaluation.logits
        logits = jnp.where(legal, logits - jnp.max(logits, axis=-1, keepdims=True), ILLEGAL_LOGIT)
        gumbel = self.gumbel_scale * jax.vmap(
            lambda k: jax.random.gumbel(k, logits.shape[1:], jnp.float32)
        )(gumbel_key)
        root_prior = prior_probabilities(logits, legal)

        table = considered_visits_table(self.max_num_considered_actions, self.num_simulations)
        num_legal = jnp.sum(legal.astype(jnp.int32), axis=-1)
        num_considered = jnp.minimum(self.max_num_considered_actions, num_legal)

        # Each row's schedule, indexed by simulation: a search adds one visit at the root
        # per simulation, unless the root is terminal, where the choice changes nothing.
        schedule = jnp.asarray(table, jnp.int32)[num_considered]
        ordered = None  # every simulation chooses by the halving score
        if self.reorder_rounds and self.q_normalisation == "siblings":
            ordered = ordered_simulations(
                table, schedule, num_legal, num_considered, tree, self.num_simulations
            )

        root_select = sequential_halving(
            schedule, ordered, gumbel, logits, legal, root_prior, **self._options()
        )

        tree, search_visits = self._simulate(
            net, env, tree, env_state, evaluation, root_prior, root_select, search_key
        )
        tree_range = tree_q_range(tree) if self.q_normalisation == "tree" else None
        completed = completed_q(root_node(tree, tree_range), **self._options())[0]
        most_visits = jnp.max(search_visits, axis=-1)
        action = halving_choice(most_visits, search_visits, gumbel, logits, completed, legal)
        if self.policy_target == "improved":
            improved = jnp.where(legal, logits + completed, ILLEGAL_LOGIT)
            policy_target = jax.nn.softmax(improved, axis=-1)
        else:
            visits = search_visits.astype(jnp.float32)
            policy_target = visits / jnp.maximum(jnp.sum(visits, axis=-1, keepdims=True), 1.0)
        return SearchOutput(
            action=action, policy_target=policy_target, root_value=tree.value[:, 0], tree=tree
        )
