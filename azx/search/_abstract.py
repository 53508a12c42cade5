import abc
import dataclasses
from typing import Any

import equinox as eqx
from jaxtyping import Array, Bool, Float, Int, PyTree

from .._types import EnvState, PRNGKey, PRNGKeys
from .._validate import check_positive_int
from ..envs import AbstractEnv
from ._model import PolicyValueNet


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
    callers thread through `__call__` and `advance`. The network is any callable that maps
    ONE observation to `(logits, value)` ([`azx.search.PolicyValueNet`][]); the search
    vmaps it.
    """

    num_simulations: eqx.AbstractVar[int]
    gamma: eqx.AbstractVar[float]
    """Discount per move; the trainer gives its replay buffer the same."""

    @abc.abstractmethod
    def init(self, env: AbstractEnv, batch_size: int) -> PyTree[Any]:
        """Empty trees for `batch_size` environments of `env`."""

    @abc.abstractmethod
    def __call__(
        self,
        net: PolicyValueNet,
        env: AbstractEnv,
        tree: PyTree[Any],
        env_state: EnvState,
        *,
        key: PRNGKey | PRNGKeys,
    ) -> SearchOutput:
        """Search from the batched `env_state` (leading axis `batch`) and pick actions.

        `tree` is what `init` or `advance` returned; a search that reuses trees continues
        from the statistics it holds. `key` is one key, or one key per row (shape
        `[batch]`): with one key per row, each row's result depends only on its own key
        and state, whatever batch (or device shard) it sits in.
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
