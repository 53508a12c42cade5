"""Episodes played by a trained MuZero or Stochastic MuZero: the search over the learned
model, noise off."""

import jax

from .._episodes import EvaluationResult, play_episodes
from .._types import PRNGKey
from .._validate import check_positive_int
from ..search import AbstractSearch
from ._stochastic import learned_search_states
from ._stochastic_trainer import StochasticMuZero
from ._trainer import MuZero


def greedy_search(trainer: MuZero | StochasticMuZero) -> AbstractSearch:
    """The trainer's search with its exploration switched off
    ([`azx.search.AbstractSearch.without_exploration`][]): the most visited action (PUCT,
    no root noise) or noise-free sequential halving (Gumbel)."""
    return trainer.search.without_exploration()


def evaluate(
    trainer: MuZero | StochasticMuZero,
    net,
    *,
    num_episodes: int,
    key: PRNGKey,
    max_steps: int = 100_000,
    greedy: bool = True,
) -> EvaluationResult:
    """Play `num_episodes` episodes of a single-player `trainer.env`, all at once, each
    move chosen by the trainer's search over `net`'s learned model (a
    [`azx.muzero.MuZeroNet`][]'s, or a [`azx.muzero.StochasticMuZeroNet`][]'s through its
    chance nodes): with its exploration
    off ([`azx.muzero.greedy_search`][]), or with `greedy=False` the search as self-play
    runs it (Gumbel noise at the root, or PUCT's move drawn from its visit counts), as
    [`azx.ppo.evaluate`][] samples its policy. A greedy player can loop forever in a
    state it never leaves (a chicken that waits at the roadside in MinAtar Freeway); the
    sampled one does not.

    **Returns:** an [`azx.ppo.EvaluationResult`][] (returns, lengths, whether each episode
    ended within `max_steps`).
    """
    check_positive_int("num_episodes", num_episodes)
    check_positive_int("max_steps", max_steps)
    env = trainer.env
    if env.num_players != 1:
        raise ValueError(
            f"evaluate plays single-player episodes; the environment has "
            f"num_players={env.num_players}"
        )
    search = greedy_search(trainer) if greedy else trainer.search

    def move(env_state, running, keys):
        del running  # an ended episode's row plays on; play_episodes ignores its moves
        pairs = jax.vmap(jax.random.split)(keys)
        search_keys, step_keys = pairs[:, 0], pairs[:, 1]
        action = learned_search_states(search, net, env, env_state, key=search_keys).action
        next_state = jax.vmap(env.step)(env_state, action, step_keys)
        reward = jax.vmap(env.rewards)(next_state)[:, 0]
        ended = jax.vmap(env.terminated)(next_state) | jax.vmap(env.truncated)(next_state)
        return next_state, reward, ended

    return play_episodes(
        jax.vmap(env.init), move, num_episodes=num_episodes, key=key, max_steps=max_steps
    )


stochastic_evaluate = evaluate
"""Stochastic MuZero's episodes: [`azx.muzero.evaluate`][] itself, which plays a
[`azx.muzero.StochasticMuZeroNet`][] by a search through its chance nodes."""
