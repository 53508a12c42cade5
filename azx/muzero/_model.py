"""The learned model that azx's searches plan with: MuZero's networks behind
[`azx.search.AbstractModel`][]."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, Shaped

from .._types import EnvState, PRNGKeys
from ..envs import AbstractEnv
from ..search import (
    ILLEGAL_LOGIT,
    AbstractModel,
    AbstractSearch,
    Evaluation,
    SearchOutput,
    Transition,
)
from ._nets import MuZeroNet


class Observation(eqx.Module):
    """What a learned model's search starts from: a batch of observations and which
    actions are legal there (the only legality the search knows: below the root every
    action is allowed, as the model has no rules)."""

    observation: Shaped[Array, "batch ..."]
    legal_action_mask: Bool[Array, "batch num_actions"]


class LearnedModel(AbstractModel):
    """MuZero's model of the world: `root` embeds the observations by the representation
    network and evaluates them by the prediction network; `step` applies the dynamics
    network (its reward head is the edge's reward) and evaluates the next embedding.

    Nothing is terminal inside the search, and every action is legal below the root. The
    discount of every edge is `gamma`, or `-gamma` with `two_player` (turns alternate, so
    the next embedding's value is for the other player, as in a
    [`azx.search.Transition`][]); whose turn it is is for the networks to learn from the
    observations.
    """

    has_chance = False

    net: MuZeroNet
    gamma: float = eqx.field(static=True)
    two_player: bool = eqx.field(static=True, default=False)

    def root(self, state: Observation) -> tuple[Float[Array, " batch *embedding"], Evaluation]:
        embedding = jax.vmap(self.net.represent)(state.observation)
        logits, value = jax.vmap(self.net.predict)(embedding)
        legal = state.legal_action_mask
        evaluation = Evaluation(
            logits=jnp.where(legal, logits, ILLEGAL_LOGIT),
            value=value,
            legal_action_mask=legal,
            terminal=jnp.zeros(value.shape, bool),
        )
        return embedding, evaluation

    def step(
        self,
        state: Float[Array, " batch *embedding"],
        action: Int[Array, " batch"],
        key: PRNGKeys,
    ) -> Transition:
        del key  # the learned dynamics is deterministic
        reward, embedding = jax.vmap(self.net.step)(state, action)
        logits, value = jax.vmap(self.net.predict)(embedding)
        discount = -self.gamma if self.two_player else self.gamma
        return Transition(
            state=embedding,
            reward=reward,
            discount=jnp.full(reward.shape, discount, jnp.float32),
            evaluation=Evaluation(
                logits=logits,
                value=value,
                legal_action_mask=jnp.ones(logits.shape, bool),
                terminal=jnp.zeros(value.shape, bool),
            ),
        )


def search_observations(
    search: AbstractSearch,
    net: MuZeroNet,
    roots: Observation,
    *,
    two_player: bool,
    key: PRNGKeys,
) -> SearchOutput:
    """One search per row of `roots` (observations and their legal actions) over `net`'s
    learned model, in a new tree (a learned model's tree is not reused between moves); the
    model's discount is the search's `gamma`, negated between the players of a
    two-player game. `key`: one per row."""
    rows = roots.legal_action_mask.shape[0]
    embedding = jax.eval_shape(net.represent, roots.observation[0])
    tree = search.init_for_states(
        jnp.zeros(embedding.shape, embedding.dtype), roots.legal_action_mask.shape[1], rows
    )
    model = LearnedModel(net=net, gamma=search.gamma, two_player=two_player)
    return search.search(model, tree, roots, key=key)


def search_states(
    search: AbstractSearch,
    net: MuZeroNet,
    env: AbstractEnv,
    env_state: EnvState,
    *,
    key: PRNGKeys,
) -> SearchOutput:
    """[`azx.muzero.search_observations`][] from a batch of `env`'s states: their
    observations and legal actions. What self-play, evaluation and the arena's
    [`azx.muzero.MuZeroAgent`][] call."""
    roots = Observation(
        observation=jax.vmap(env.observation)(env_state),
        legal_action_mask=jax.vmap(env.legal_action_mask)(env_state),
    )
    return search_observations(search, net, roots, two_player=env.num_players == 2, key=key)
