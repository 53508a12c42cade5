"""The learned model that azx's searches plan with: MuZero's networks behind
[`azx.search.AbstractModel`][]."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, Shaped

from .._types import PRNGKeys
from ..search import ILLEGAL_LOGIT, AbstractModel, Evaluation, Transition
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
