"""The search's model of the world: what a search asks of it (`AbstractModel`), and its
first implementation, an environment plus a network (`EnvironmentModel`)."""

import abc
from collections.abc import Callable
from typing import TypeAlias

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from .._numerics import ILLEGAL_LOGIT as ILLEGAL_LOGIT
from .._types import EnvState, PRNGKey, PRNGKeys
from ..envs import AbstractEnv
from ..envs._mover import mover_reward_and_discount


#: The network a search evaluates: ONE observation in, `(logits, value)` out, the value for
#: the player to move. Any callable of this shape serves (an `eqx.Module` such as
#: [`azx.nets.MLP`][], a closure over parameters); the search vmaps it over the batch.
PolicyValueNet: TypeAlias = Callable[[Array], tuple[Float[Array, " num_actions"], Float[Array, ""]]]


class Evaluation(eqx.Module):
    """The network's view of a batch of states."""

    logits: Float[Array, "batch num_actions"]
    """Prior logits, `ILLEGAL_LOGIT` on illegal actions."""
    value: Float[Array, " batch"]
    """Value for the player to move; zero at terminal states."""
    legal_action_mask: Bool[Array, "batch num_actions"]
    terminal: Bool[Array, " batch"]


class Transition(eqx.Module):
    """One batched move inside the search, in the mctx sign convention.

    The value of the parent for its mover is `reward + discount * value(child)`, where
    `value(child)` is for the child's mover: `discount` is `-gamma` when the turn passes to
    the other player, `+gamma` when the same player moves again, and `0` at terminal states.
    """

    state: EnvState
    reward: Float[Array, " batch"]
    discount: Float[Array, " batch"]
    evaluation: Evaluation
    chance: Bool[Array, " batch"] | None = None
    """Which children are chance nodes (their edges are chance outcomes and their
    evaluation's logits the outcomes' log-probabilities), or None for a model without
    chance."""


class AbstractModel(eqx.Module):
    """What a search asks of the world it plans in: evaluate a batch of states, and apply a
    batch of actions. A search never reads a state itself; it stores states in its tree and
    hands them back, so a state is any pytree (an environment state, an embedding).

    Whose turn it is, and what the reward and discount are, come with each step
    ([`azx.search.Transition`][]): the discount is `-gamma` when the turn passes to the
    other player, `+gamma` when the same player moves again, and 0 at terminal states, so
    the search backs values up without knowing the players.

    Models of three kinds fit this interface with the same loop:

    - **A perfect simulator** ([`azx.search.EnvironmentModel`][]): the environment steps
      and the network evaluates.
    - **A stochastic model** ([`azx.search.ChanceModel`][]; Stochastic MuZero's shape):
      a step alternates decision and chance. A decision's child is a chance node (the
      afterstate, `Transition.chance`), whose evaluation carries the known distribution
      of chance outcomes as its prior, and the step from a chance node applies an outcome.
      The tree marks chance nodes, where the descent follows the outcome distribution
      instead of the selection rule.
    - **A learned model** (MuZero): the state is an embedding; `root` maps the root's
      observations to embeddings by the representation network and evaluates them by the
      prediction network; `step` applies the dynamics network, whose reward head gives the
      reward, and predicts the child (the discount is `gamma`, or `-gamma` in a two-player
      game where the model keeps the turn; no state is terminal inside the search).
    """

    #: Whether the model's steps can lead to chance nodes (`Transition.chance`).
    has_chance: eqx.AbstractClassVar[bool]

    @abc.abstractmethod
    def root(self, state: EnvState) -> tuple[EnvState, Evaluation]:
        """The search's states for a batch of the world's states (the roots of a search;
        leading axis `batch`), and their evaluation."""

    @abc.abstractmethod
    def step(self, state: EnvState, action: Int[Array, " batch"], key: PRNGKeys) -> Transition:
        """Apply one action in each of a batch of states (one key per row): the children,
        the reward and discount of each edge, and the children's evaluations."""


class EnvironmentModel(AbstractModel):
    """A perfect simulator: the environment steps, the network evaluates (AlphaZero). In a
    game with chance, each step samples the outcome, and the tree keeps the sample as the
    move's consequence (an open-loop search); [`azx.search.ChanceModel`][] plans over the
    outcomes instead."""

    has_chance = False

    env: AbstractEnv
    net: PolicyValueNet
    gamma: float = eqx.field(static=True)
    """Discount per move."""

    def root(self, state: EnvState) -> tuple[EnvState, Evaluation]:
        return state, evaluate(self.net, self.env, state)

    def step(self, state: EnvState, action: Int[Array, " batch"], key: PRNGKeys) -> Transition:
        return transition(self.net, self.env, state, action, key, self.gamma)


def row_keys(key: PRNGKey | PRNGKeys, batch_size: int) -> PRNGKeys:
    """One key per batch row: `key` itself if it already is one per row, else split.

    Searches draw every random number per row from that row's key, so a row's result
    depends only on its own key and state, not on the batch it sits in (which is what
    makes sharded training give the same games as unsharded).
    """
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        single, batched = (), (batch_size,)
    else:  # legacy uint32 keys: one key is shape (2,)
        single, batched = (2,), (batch_size, 2)
    if key.shape == single:
        return jax.random.split(key, batch_size)
    if key.shape == batched:
        return key
    raise ValueError(
        f"key must be one key or one key per batch row (batch {batch_size}), got a key array "
        f"of shape {key.shape}"
    )


def check_players(env: AbstractEnv) -> None:
    if env.num_players not in (1, 2):
        raise ValueError(
            f"search supports 1-player games and 2-player zero-sum games; {env!r} has "
            f"num_players={env.num_players}"
        )


def evaluate(net: PolicyValueNet, env: AbstractEnv, state: EnvState) -> Evaluation:
    """Network logits (illegal masked) and value (zero where terminal) for a batch."""
    logits, value = jax.vmap(net)(jax.vmap(env.observation)(state))
    legal = jax.vmap(env.legal_action_mask)(state)
    terminal = jax.vmap(env.terminated)(state) | jax.vmap(env.truncated)(state)
    return Evaluation(
        logits=jnp.where(legal, logits, ILLEGAL_LOGIT),
        value=jnp.where(terminal, 0.0, value),
        legal_action_mask=legal,
        terminal=terminal,
    )


def transition(
    net: PolicyValueNet,
    env: AbstractEnv,
    state: EnvState,
    action: Int[Array, " batch"],
    key: PRNGKey | PRNGKeys,
    gamma: float,
) -> Transition:
    """Step a batch of states and evaluate the children. `key`: one key, or one per row."""
    keys = row_keys(key, action.shape[0])
    child = jax.vmap(env.step)(state, action, keys)
    reward, discount = mover_reward_and_discount(env, state, child, gamma)
    evaluation = evaluate(net, env, child)
    discount = jnp.where(evaluation.terminal, 0.0, discount)
    return Transition(state=child, reward=reward, discount=discount, evaluation=evaluation)
