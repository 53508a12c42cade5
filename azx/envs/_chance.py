import abc
from typing import Any, TypeAlias

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float, Int, PyTree

from .._types import EnvState, PRNGKey
from ._abstract import AbstractEnv


#: The state after the player's action and before chance: opaque, read only by the
#: environment's chance methods.
Afterstate: TypeAlias = PyTree[Any]


class AbstractChanceEnv(AbstractEnv):
    """Interface for games whose step is "decision, then chance", exposing the chance so
    that a search can plan over it (chance nodes) instead of sampling it.

    `step(state, action, key)` stays the plain [`azx.envs.AbstractEnv`][] step, distributed
    as `apply_outcome(after, outcome)` with `after = afterstate(state, action)` and
    `outcome` drawn from `chance_probabilities(after)` (`sample_outcome`).

    How a search uses it: a decision node's action leads to a chance node, the afterstate.
    Its children are the outcomes in `chance_outcome_mask`, each built by `apply_outcome`
    and weighted by `chance_probabilities`, so its value is their probability-weighted
    mean (an expectimax back-up); which child a simulation descends into is the search's
    rule. Where `has_chance` is false the action leads to one state: all mass is
    on outcome 0 and every outcome gives that state, so the chance node can be skipped.
    The afterstate is opaque and has no player to move: the rewards of the transition and
    the next player are read, as after `step`, from the state `apply_outcome` gives.

    Probabilities, not the logits azx's policies use, cross this interface: the game
    knows them exactly (1/36; 0.9 / number of empty cells), and a chance node's value is
    their weighted mean. All methods take ONE state or afterstate; batch with `jax.vmap`.
    """

    num_outcomes: eqx.AbstractVar[int]

    @abc.abstractmethod
    def afterstate(self, state: EnvState, action: Int[Array, ""]) -> Afterstate:
        """The state after the player to move plays `action`, before chance."""

    @abc.abstractmethod
    def has_chance(self, afterstate: Afterstate) -> Bool[Array, ""]:
        """Whether chance acts at `afterstate`; false where the action leads to one state
        (a move that ends the game, or one that leaves the turn to the same player)."""

    @abc.abstractmethod
    def chance_probabilities(self, afterstate: Afterstate) -> Float[Array, " num_outcomes"]:
        """Probability of each outcome at `afterstate`: non-negative, summing to 1, zero
        exactly where `chance_outcome_mask` is false; all on outcome 0 where `has_chance`
        is false."""

    @abc.abstractmethod
    def apply_outcome(self, afterstate: Afterstate, outcome: Int[Array, ""]) -> EnvState:
        """The state after chance picks `outcome` at `afterstate`.

        An `outcome` outside `[0, num_outcomes)` is the caller's mistake: a `ValueError`
        when it is known at trace time; when it is computed inside a jitted function, a
        state of the right shape with NaN rewards. [`azx.envs.validate_outcome`][] does
        both without a host callback, which would keep every compiled search over the game
        out of JAX's persistent compilation cache. An outcome in range that has
        probability zero gives a state of the right shape that the game cannot reach, so a
        search may build every outcome's child with `jax.vmap` and ignore the masked
        ones."""

    def chance_outcome_mask(self, afterstate: Afterstate) -> Bool[Array, " num_outcomes"]:
        """Which outcomes can happen at `afterstate` (those of positive probability)."""
        return self.chance_probabilities(afterstate) > 0

    def sample_outcome(self, afterstate: Afterstate, key: PRNGKey) -> Int[Array, ""]:
        """An outcome drawn from `chance_probabilities(afterstate)` (never a masked one)."""
        probabilities = self.chance_probabilities(afterstate)
        logits = jnp.where(probabilities > 0, jnp.log(probabilities), -jnp.inf)
        return jax.random.categorical(key, logits).astype(jnp.int32)


def _check_known(outcome: Any, num_outcomes: int) -> None:
    """A `ValueError` for a known (not traced) outcome outside `[0, num_outcomes)`."""
    if isinstance(outcome, jax.core.Tracer):
        return
    values = np.asarray(outcome)
    bad = values[(values < 0) | (values >= num_outcomes)]
    if bad.size:
        raise ValueError(
            f"a chance outcome must lie in [0, {num_outcomes}), got {int(bad.flat[0])}"
        )


def validate_outcome(
    outcome: Int[ArrayLike, "*batch"], num_outcomes: int
) -> tuple[Int[Array, "*batch"], Bool[Array, "*batch"]]:
    """Check a chance outcome in `apply_outcome`: an index into the game's outcomes that is
    always in bounds, and whether `outcome` was one.

    A known outcome (not traced) outside `[0, num_outcomes)` is a `ValueError` at once. A
    traced one cannot raise without a host callback (`equinox.error_if` makes one), and
    JAX's persistent compilation cache does not store a program with a host callback:
    every compiled search over the game would then compile again in each new process.
    Instead the outcome is clipped into the range and `valid` is false, and the game marks
    the state it returns as invalid there. azx's games give it NaN rewards
    (`jnp.where(valid, rewards, jnp.nan)`), which a search backs up as NaN values and
    [`azx.envs.check_env`][] reports as non-finite.

    **Arguments:**

    - `outcome`: one outcome, or a batch.
    - `num_outcomes`: the game's `num_outcomes`.

    **Returns:** `(index, valid)`: `outcome` clipped into `[0, num_outcomes)` (int32), and
    where it lay in that range already.

    **Raises:** `ValueError` naming the first known outcome outside the range.
    """
    _check_known(outcome, num_outcomes)
    outcome = jnp.asarray(outcome)
    valid = (outcome >= 0) & (outcome < num_outcomes)
    return jnp.clip(outcome, 0, num_outcomes - 1).astype(jnp.int32), valid


def check_outcome(outcome: Int[Array, "*batch"], num_outcomes: int) -> Int[Array, "*batch"]:
    """`outcome` (one, or a batch), checked to lie in `[0, num_outcomes)`: a `ValueError`
    now when it is known, an error at run time when it is traced. The run-time error is a
    host callback (`equinox.error_if`), which keeps the compiled program out of JAX's
    persistent compilation cache; games check with [`azx.envs.validate_outcome`][]."""
    _check_known(outcome, num_outcomes)
    if not isinstance(outcome, jax.core.Tracer):
        return outcome
    message = f"a chance outcome must lie in [0, {num_outcomes})"
    return eqx.error_if(outcome, (outcome < 0) | (outcome >= num_outcomes), message)


def require_chance(env: AbstractEnv) -> AbstractChanceEnv:
    """`env` itself, if it exposes its chance events as an [`azx.envs.AbstractChanceEnv`][].

    **Raises:** `ValueError` naming the environment otherwise (a game without chance, or
    one whose adapter does not expose it).
    """
    if isinstance(env, AbstractChanceEnv):
        return env
    raise ValueError(
        f"environment {env.name!r} does not expose chance events (it is not an "
        "azx.envs.AbstractChanceEnv); those that do: azx.envs.make('2048'), "
        "azx.envs.make('backgammon'), or any environment implementing AbstractChanceEnv"
    )
