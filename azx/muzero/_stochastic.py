"""Stochastic MuZero's learned model behind [`azx.search.AbstractModel`][], with chance
nodes over the model's chance codes, and the searches over it: azx's native searches and
`mctx.stochastic_muzero_policy`; and the search from a game's states over either kind of
learned model, chosen by its network's type."""

import equinox as eqx
import jax
import jax.numpy as jnp
import mctx
from jaxtyping import Array, Bool, Float, Int

from .._numerics import third_party_numerics
from .._types import EnvState, PRNGKey, PRNGKeys
from ..envs import AbstractEnv
from ..search import (
    ILLEGAL_LOGIT,
    AbstractModel,
    AbstractNativeSearch,
    AbstractSearch,
    Evaluation,
    MctxPUCT,
    SearchOutput,
    Transition,
)
from ..search._mctx import _by_rows, _read
from ..search._model import row_keys
from ..search._tree import tree_for
from ._model import Observation, search_states
from ._nets import MuZeroNet
from ._stochastic_nets import StochasticMuZeroNet


class StochasticState(eqx.Module):
    """A node's state in a search over a [`azx.muzero.StochasticLearnedModel`][]: an
    embedding (a decision node's state, or a chance node's afterstate) and which of the two
    it is."""

    embedding: Float[Array, "*batch embedding"]
    is_chance: Bool[Array, "*batch"]


def _pad(x: Array, width: int, value) -> Array:
    return jnp.pad(x, ((0, 0), (0, width - x.shape[1])), constant_values=value)


class StochasticLearnedModel(AbstractModel):
    """Stochastic MuZero's model of the world: `root` embeds the observations and evaluates
    them; from a decision node, `step` applies the afterstate dynamics and leads to a chance
    node (reward 0, discount `+1`), evaluated by the afterstate prediction: its value is
    `Q`, its prior `sigma` over the chance codes; from a chance node, `step` applies the
    dynamics with the code taken (its reward head is the edge's reward) and evaluates the
    next embedding, with discount `gamma` (or `-gamma` with `two_player`, as in
    [`azx.muzero.LearnedModel`][]).

    Decision and chance nodes share the tree's edge arrays, as wide as the larger of the
    numbers of actions and codes (`width`): a decision node's edges beyond the actions and
    a chance node's beyond the codes are illegal. Nothing is terminal inside the search,
    and every action is legal below the root. Each step runs both kinds of step on the
    whole batch and keeps each row's own.
    """

    has_chance = True

    net: StochasticMuZeroNet
    gamma: float = eqx.field(static=True)
    two_player: bool = eqx.field(static=True, default=False)

    @property
    def width(self) -> int:
        """Edges per node: `max(num_actions, num_codes)`."""
        return max(self.net.num_actions, self.net.num_codes)

    def _decision_evaluation(
        self, logits: Float[Array, "batch num_actions"], value: Float[Array, " batch"], legal
    ) -> Evaluation:
        return Evaluation(
            logits=_pad(jnp.where(legal, logits, ILLEGAL_LOGIT), self.width, ILLEGAL_LOGIT),
            value=value,
            legal_action_mask=_pad(legal, self.width, False),
            terminal=jnp.zeros(value.shape, bool),
        )

    def root(self, state: Observation) -> tuple[StochasticState, Evaluation]:
        embedding = jax.vmap(self.net.represent)(state.observation)
        logits, value = jax.vmap(self.net.predict)(embedding)
        evaluation = self._decision_evaluation(logits, value, state.legal_action_mask)
        return StochasticState(embedding, jnp.zeros(value.shape, bool)), evaluation

    def step(
        self, state: StochasticState, action: Int[Array, " batch"], key: PRNGKeys
    ) -> Transition:
        del key  # the learned model is deterministic; chance is the search's to follow
        net, at_chance = self.net, state.is_chance
        # From a decision node: the afterstate, its code distribution and Q.
        afterstate = jax.vmap(net.afterstate)(
            state.embedding, jnp.minimum(action, net.num_actions - 1)
        )
        chance_logits, q = jax.vmap(net.predict_afterstate)(afterstate)
        codes = jnp.ones(chance_logits.shape, bool)
        after_evaluation = Evaluation(
            logits=_pad(chance_logits, self.width, ILLEGAL_LOGIT),
            value=q,
            legal_action_mask=_pad(codes, self.width, False),
            terminal=jnp.zeros(q.shape, bool),
        )
        # From a chance node: the code's reward and next embedding, evaluated.
        reward, embedding = jax.vmap(net.step)(
            state.embedding, jnp.minimum(action, net.num_codes - 1)
        )
        logits, value = jax.vmap(net.predict)(embedding)
        decision_evaluation = self._decision_evaluation(logits, value, jnp.ones(logits.shape, bool))

        def pick(from_chance, from_decision):
            mask = at_chance.reshape(at_chance.shape + (1,) * (from_chance.ndim - 1))
            return jnp.where(mask, from_chance, from_decision)

        discount = -self.gamma if self.two_player else self.gamma
        return Transition(
            state=StochasticState(pick(embedding, afterstate), ~at_chance),
            reward=jnp.where(at_chance, reward, 0.0),
            discount=jnp.where(at_chance, discount, 1.0).astype(jnp.float32),
            evaluation=jax.tree.map(pick, decision_evaluation, after_evaluation),
            chance=~at_chance,
        )


def _mctx_recurrent_fns(model: StochasticLearnedModel):
    """mctx's decision and chance functions over `model`'s networks: mctx keeps the
    embeddings of states and afterstates apart, and calls both functions at every node
    (keeping the one that fits), so each clips its argument into range."""
    net = model.net
    discount = -model.gamma if model.two_player else model.gamma

    def decision_recurrent_fn(params, key, action, embedding):
        del params, key  # the network is closed over; the model is deterministic
        action = jnp.clip(action, 0, net.num_actions - 1)
        afterstate = jax.vmap(net.afterstate)(embedding, action)
        chance_logits, q = jax.vmap(net.predict_afterstate)(afterstate)
        output = mctx.DecisionRecurrentFnOutput(chance_logits=chance_logits, afterstate_value=q)
        return output, afterstate

    def chance_recurrent_fn(params, key, code, afterstate):
        del params, key
        code = jnp.clip(code, 0, net.num_codes - 1)
        reward, embedding = jax.vmap(net.step)(afterstate, code)
        logits, value = jax.vmap(net.predict)(embedding)
        output = mctx.ChanceRecurrentFnOutput(
            action_logits=logits,
            value=value,
            reward=reward,
            discount=jnp.full(reward.shape, discount, jnp.float32),
        )
        return output, embedding

    return decision_recurrent_fn, chance_recurrent_fn


def _mctx_policy_output(
    search: MctxPUCT, model: StochasticLearnedModel, roots: Observation, key: PRNGKey
) -> mctx.PolicyOutput:
    """`mctx.stochastic_muzero_policy` over `model` from `roots` under one key, with
    `search`'s settings."""
    state, evaluation = model.root(roots)
    num_actions = model.net.num_actions
    evaluation = eqx.tree_at(
        lambda e: (e.logits, e.legal_action_mask),
        evaluation,
        (evaluation.logits[:, :num_actions], evaluation.legal_action_mask[:, :num_actions]),
    )
    root = mctx.RootFnOutput(
        prior_logits=evaluation.logits, value=evaluation.value, embedding=state.embedding
    )
    decision_fn, chance_fn = _mctx_recurrent_fns(model)
    with third_party_numerics():
        return mctx.stochastic_muzero_policy(
            root=root,
            decision_recurrent_fn=decision_fn,
            chance_recurrent_fn=chance_fn,
            **search._common(evaluation, key),
        )


def stochastic_search_observations(
    search: AbstractSearch,
    net: StochasticMuZeroNet,
    roots: Observation,
    *,
    two_player: bool,
    key: PRNGKeys,
) -> SearchOutput:
    """One search per row of `roots` over `net`'s learned stochastic model
    ([`azx.muzero.StochasticLearnedModel`][]), planning through chance nodes over its
    codes, in a new tree: a native search ([`azx.search.PUCT`][], [`azx.search.Gumbel`][])
    or [`azx.search.MctxPUCT`][] (by `mctx.stochastic_muzero_policy`; mctx has no Gumbel
    variant of it). The policy target is cut to the actions. `key`: one per row.

    **Raises:** `ValueError` for another search.
    """
    model = StochasticLearnedModel(net=net, gamma=search.gamma, two_player=two_player)
    rows, num_actions = roots.legal_action_mask.shape
    if isinstance(search, AbstractNativeSearch):
        embedding = jax.eval_shape(net.represent, roots.observation[0])
        one = StochasticState(jnp.zeros(embedding.shape, embedding.dtype), jnp.bool_(False))
        tree = tree_for(one, None, model.width, rows, search.capacity, net.num_codes)
        output = search.search(model, tree, roots, key=key)
    elif isinstance(search, MctxPUCT):
        tree = search.init_for_states(jnp.zeros(1), num_actions, rows)
        output = _by_rows(
            lambda batch, one_key: _read(_mctx_policy_output(search, model, batch, one_key)),
            tree,
            roots,
            row_keys(key, rows),
        )
    else:
        raise ValueError(
            f"Stochastic MuZero plans with a native search (PUCT, Gumbel) or MctxPUCT "
            f"(mctx's stochastic policy is PUCT's only), got {type(search).__name__}"
        )
    return eqx.tree_at(lambda o: o.policy_target, output, output.policy_target[:, :num_actions])


def stochastic_search_states(
    search: AbstractSearch,
    net: StochasticMuZeroNet,
    env: AbstractEnv,
    env_state: EnvState,
    *,
    key: PRNGKeys,
) -> SearchOutput:
    """[`azx.muzero.stochastic_search_observations`][] from a batch of `env`'s states: their
    observations and legal actions (the game's chance is the model's to learn: the
    environment need not expose it)."""
    roots = Observation(
        observation=jax.vmap(env.observation)(env_state),
        legal_action_mask=jax.vmap(env.legal_action_mask)(env_state),
    )
    return stochastic_search_observations(
        search, net, roots, two_player=env.num_players == 2, key=key
    )


def learned_search_states(
    search: AbstractSearch,
    net: MuZeroNet | StochasticMuZeroNet,
    env: AbstractEnv,
    env_state: EnvState,
    *,
    key: PRNGKeys,
) -> SearchOutput:
    """One fresh search per row of `env_state` over `net`'s learned model, by the
    network's type: [`azx.muzero.search_states`][] for a [`azx.muzero.MuZeroNet`][],
    [`azx.muzero.stochastic_search_states`][] (through chance nodes) for a
    [`azx.muzero.StochasticMuZeroNet`][]. What self-play, evaluation and the arena's
    [`azx.muzero.MuZeroAgent`][] call, for both kinds of model.

    **Raises:** `ValueError` for another network.
    """
    if isinstance(net, StochasticMuZeroNet):
        return stochastic_search_states(search, net, env, env_state, key=key)
    if isinstance(net, MuZeroNet):
        return search_states(search, net, env, env_state, key=key)
    raise ValueError(
        f"net must be an azx.muzero.MuZeroNet or StochasticMuZeroNet, got {type(net).__name__}"
    )
