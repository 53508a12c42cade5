import abc
import dataclasses
from typing import Any

import equinox as eqx
from jaxtyping import Array, Bool, Float, Int, PyTree

from .._types import EnvState, PRNGKey, PRNGKeys
from .._validate import check_positive_int
from ..envs import AbstractChanceEnv, AbstractEnv
from ._chance import ChanceModel
from ._model import AbstractModel, EnvironmentModel, PolicyValueNet, check_players


def part_field(default: type) -> Any:
    """A search's field holding one of its parts (a rule, a root policy, ...), keyword-only,
    by default a fresh `default()`."""
    return eqx.field(default_factory=default, kw_only=True)


def static_field(default: Any) -> Any:
    """A search's static, keyword-only setting."""
    return eqx.field(static=True, default=default, kw_only=True)


def check_part(name: str, value: object, kind: type) -> None:
    """`value`, a search's part, must be a `kind`."""
    if not isinstance(value, kind):
        raise ValueError(f"{name} must be an {kind.__name__}, got {value!r}")


class SearchOutput(eqx.Module):
    """What one batched search returns."""

    action: Int[Array, " batch"]
    """Action to play in each environment."""
    policy_target: Float[Array, "batch num_actions"]
    """Training target for the policy (zero on illegal actions, sums to one)."""
    root_value: Float[Array, " batch"]
    """Search value of each root, for the player to move there."""
    tree: PyTree[Any]
    """The search tree after the search, to pass to `advance`."""


class AbstractSearch(eqx.Module):
    """Interface of a batched search (native MCTS, mctx, ...).

    A search is configuration only (a frozen Module); the changing part is the tree, which
    callers thread through `search` (or `__call__`) and `advance`. A search plans with any
    [`azx.search.AbstractModel`][] (`search`); planning in a game with a network
    (`__call__`) is that, with the model the game and the search's `chance_nodes` call for
    (`environment_model`). The network is any callable that maps ONE observation to
    `(logits, value)` ([`azx.search.PolicyValueNet`][]); the model vmaps it.
    """

    num_simulations: eqx.AbstractVar[int]
    gamma: eqx.AbstractVar[float]
    """Discount per move; the trainer gives its replay buffer the same."""
    reuse_tree: eqx.AbstractVar[bool]
    """Whether `advance` keeps the subtree under the played action for the next search."""
    chance_nodes: eqx.AbstractVar[bool]
    """In a game that exposes its chance ([`azx.envs.AbstractChanceEnv`][]), plan over its
    outcomes with chance nodes ([`azx.search.ChanceModel`][]); otherwise sample one
    outcome per expansion ([`azx.search.EnvironmentModel`][])."""
    chance_expectation: eqx.AbstractVar[bool]
    """With chance nodes, value a new chance node by the expectation over its outcomes
    instead of one sampled outcome ([`azx.search.ChanceModel`][]'s `chance_expectation`)."""

    @abc.abstractmethod
    def init(self, env: AbstractEnv, batch_size: int) -> PyTree[Any]:
        """Empty trees for `batch_size` environments of `env`, for `__call__`.

        **Raises:** `ValueError` for a game this search cannot plan in.
        """

    @abc.abstractmethod
    def init_for_states(
        self, example_state: PyTree[Array], num_actions: int, batch_size: int
    ) -> PyTree[Any]:
        """Empty trees for `batch_size` searches (`search`) over a model whose states look
        like `example_state` (ONE state, no batch axis; any pytree of arrays, such as a
        learned model's embedding) with `num_actions` edges per node."""

    @abc.abstractmethod
    def search(
        self,
        model: AbstractModel,
        tree: PyTree[Any],
        state: PyTree[Any],
        *,
        key: PRNGKey | PRNGKeys,
    ) -> SearchOutput:
        """Search from the batched `state` of the world (leading axis `batch`, as
        `model.root` takes it) with `model`, and pick actions.

        `tree` is what `init`, `init_for_states` or `advance` returned; a search that
        reuses trees continues from the statistics it holds. `key` is one key, or one key
        per row (shape `[batch]`): with one key per row, each row's result depends only on
        its own key and state, whatever batch (or device shard) it sits in.

        **Raises:** `ValueError` for a model this search cannot plan with.
        """

    @abc.abstractmethod
    def advance(
        self,
        tree: PyTree[Any],
        action: Int[Array, " batch"],
        done: Bool[Array, " batch"],
        outcome: Int[Array, " batch"] | None = None,
    ) -> PyTree[Any]:
        """Tree for the next move: keep the subtree under `action`, or reset where `done`.

        `outcome`: in a game with chance, the chance outcome that followed `action` in each
        row ([`azx.envs.AbstractChanceEnv`][]), which a search with chance nodes needs to
        keep the subtree for what happened; searches without chance nodes ignore it.
        """

    @abc.abstractmethod
    def without_exploration(self) -> "AbstractSearch":
        """The same search with its exploration switched off, for evaluation: every
        setting and part as it is, except that the root adds no noise and plays its best
        move (PUCT: `temperature` and `dirichlet_fraction` 0; Gumbel: `gumbel_scale` 0).
        A search that does not explore returns itself.

        **Raises:** `ValueError` for a search that cannot play without exploring, naming
        it (what an evaluation that asks for a greedy player reports).
        """

    def plans_chance(self, env: AbstractEnv) -> bool:
        """Whether this search plans over `env`'s chance outcomes with chance nodes."""
        return self.chance_nodes and isinstance(env, AbstractChanceEnv)

    def environment_model(self, net: PolicyValueNet, env: AbstractEnv) -> AbstractModel:
        """The model this search plans with in `env` with `net`: a
        [`azx.search.ChanceModel`][] where it plans over chance (`plans_chance`), else an
        [`azx.search.EnvironmentModel`][]; both discount by `gamma`.

        **Raises:** `ValueError` for a game of more than two players.
        """
        check_players(env)
        if self.plans_chance(env):
            return ChanceModel(
                env=env, net=net, gamma=self.gamma, chance_expectation=self.chance_expectation
            )
        return EnvironmentModel(env=env, net=net, gamma=self.gamma)

    def __call__(
        self,
        net: PolicyValueNet,
        env: AbstractEnv,
        tree: PyTree[Any],
        env_state: EnvState,
        *,
        key: PRNGKey | PRNGKeys,
    ) -> SearchOutput:
        """Search from the batched `env_state` (leading axis `batch`) of `env` with `net`,
        and pick actions: `search` with `environment_model(net, env)`, the policy target
        cut to the game's actions (a tree with chance nodes has edges as wide as the larger
        of the numbers of actions and outcomes). `tree` and `key` are as for `search`.
        """
        output = self.search(self.environment_model(net, env), tree, env_state, key=key)
        target = output.policy_target[:, : env.num_actions]
        return eqx.tree_at(lambda o: o.policy_target, output, target)

    def with_num_simulations(self, num_simulations: int) -> "AbstractSearch":
        """The same search with fewer simulations, working on the same trees (what
        playout-cap randomisation's fast searches use; see
        [`azx.alphazero.Config.fast_search_simulations`][]).

        **Raises:** `ValueError` unless `1 <= num_simulations <= self.num_simulations`:
        the trees are sized for this search's simulations.
        """
        check_positive_int("num_simulations", num_simulations)
        if num_simulations > self.num_simulations:
            raise ValueError(
                f"num_simulations ({num_simulations}) must be at most this search's "
                f"num_simulations ({self.num_simulations}): its trees are sized for those"
            )
        # Every other field (a native tree's capacity included) stays, so both searches
        # take the same trees.
        return dataclasses.replace(self, num_simulations=num_simulations)
