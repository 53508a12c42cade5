"""One single-player episode of a trained policy, recorded step by step for the page: a
PPO run's ([`azx.ppo.evaluate`][]) or a single-player MuZero run's
([`azx.muzero.evaluate`][]), played as `run.play_episodes(1, key=key)` plays it.

`azx._episodes.play_episodes` keeps only the returns; here each step of its one row is
played by its own call, with the same keys (the start's from `fold_in(key, 0)`, step
`t`'s from `fold_in(key, t + 1)`, row 0's of each) and the same step of the policy, so
that the states between the steps can be kept. The tests check that the recorded return
is the evaluation's (to float32 rounding where the rewards are not whole numbers: the two
compilations may round a continuous task's rewards differently in the last bit).
"""

import dataclasses
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import muzero, ppo, presets
from .._trainer import row_keys
from ..ppo._evaluate import PolicyEpisode, start_episode, step_episode
from ..ppo._policy import initial_carry


@dataclasses.dataclass
class RecordedEpisode:
    """The states of one episode (each a batch of one row), the actions between them and
    the reward of each."""

    states: list[Any]
    actions: list[Any]
    """What the environment received: whole numbers, or lists of floats for continuous
    actions."""
    rewards: list[float]
    over: bool
    """Whether the episode ended (rather than stopping at `max_steps`)."""

    def returns(self) -> list[float]:
        """The return up to each state (0 at the start), summed in float32 one reward
        after another as the evaluation sums it."""
        totals = np.cumsum(np.asarray([0.0, *self.rewards], np.float32), dtype=np.float32)
        return [float(total) for total in totals]


def records_episodes(run) -> bool:
    """Whether `record_episode` plays `run`'s episodes: a single-player PPO or MuZero run."""
    recipe = run.preset.recipe
    single = run.env.num_players == 1
    return single and isinstance(recipe, presets.PPORecipe | presets.MuZeroRecipe)


@eqx.filter_jit
def _ppo_start(env, net, keys):
    carry = initial_carry(net)
    return jax.vmap(lambda key: start_episode(env, carry, key))(keys)


@eqx.filter_jit
def _ppo_step(env, net, distribution, stats, greedy, rows, keys):
    def play(row: PolicyEpisode, key):
        # (A recorded episode stops where it ends: its row is always running.)
        return step_episode(env, net, distribution, stats, greedy, row, jnp.bool_(True), key)

    return jax.vmap(play)(rows, keys)


@eqx.filter_jit
def _muzero_step(env, search, net, env_state, keys):
    pairs = jax.vmap(jax.random.split)(keys)
    search_keys, step_keys = pairs[:, 0], pairs[:, 1]
    action = muzero.search_states(search, net, env, env_state, key=search_keys).action
    next_state = jax.vmap(env.step)(env_state, action, step_keys)
    reward = jax.vmap(env.rewards)(next_state)[:, 0]
    ended = jax.vmap(env.terminated)(next_state) | jax.vmap(env.truncated)(next_state)
    return next_state, action, reward, ended


def record_episode(run, *, key, max_steps: int, greedy: bool | None = None) -> RecordedEpisode:
    """`run`'s episode of `run.play_episodes(1, key=key, greedy=greedy)`, step by step,
    stopped after `max_steps` steps if it is still going.

    **Raises:** `ValueError` for a run that `records_episodes` does not take.
    """
    if not records_episodes(run):
        raise ValueError(f"{run.algorithm} runs of {run.env.num_players} players have no episodes")
    env, recipe, trainer = run.env, run.preset.recipe, run.trainer

    def keys(index):
        return row_keys(jax.random.fold_in(key, index), jnp.int32(0), 1)

    if isinstance(recipe, presets.PPORecipe):  # PPO, as `PPORecipe.play_episodes`
        config = trainer.config
        greedy = recipe.eval_greedy if greedy is None else greedy
        stats = run.state.observation_stats if config.normalize_observations else None
        distribution = ppo.action_distribution(config.action_distribution, env)
        rows = _ppo_start(env, run.net, keys(0))

        def step(rows, step_keys):
            return _ppo_step(env, run.net, distribution, stats, greedy, rows, step_keys)

        def state_of(rows):
            return rows.env_state
    else:  # MuZero, as `MuZeroRecipe.play_episodes`
        greedy = True if greedy is None else greedy
        search = muzero.greedy_search(trainer) if greedy else trainer.search
        rows = jax.vmap(env.init)(keys(0))

        def step(rows, step_keys):
            return _muzero_step(env, search, run.net, rows, step_keys)

        def state_of(rows):
            return rows

    episode = RecordedEpisode(states=[state_of(rows)], actions=[], rewards=[], over=False)
    for index in range(max_steps):
        rows, action, reward, ended = step(rows, keys(index + 1))
        action = np.asarray(action[0])
        episode.actions.append(int(action) if action.ndim == 0 else action.tolist())
        episode.rewards.append(float(reward[0]))
        episode.states.append(state_of(rows))
        if bool(ended[0]):
            episode.over = True
            break
    return episode
