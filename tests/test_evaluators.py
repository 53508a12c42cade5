"""Episodes that cannot differ (one start, a greedy player, one return) give an interval
of nothing: the episode evaluators judge the sampled player instead and say so; where
the starts vary, nothing changes."""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array, Bool, Float, Int

import azx
from azx._evaluators import evaluator
from azx._report import describe_episodes, describe_sampled


KEY = jax.random.key(2)


class WalkState(eqx.Module):
    time: Int[Array, ""]
    length: Int[Array, ""]
    reward: Float[Array, ""]
    terminated: Bool[Array, ""]


class Walk(azx.envs.AbstractEnv):
    """Steps right (action 1, reward 1) or left (action 0, reward 0) until the episode's
    length: 6 steps from a fixed start, or with `random_length` 3 to 6 drawn at `init`.
    The observation is the time and the length, so a greedy player repeats itself."""

    name = "walk"

    random_length: bool = eqx.field(static=True)
    num_actions: int = eqx.field(static=True, default=2)
    num_players: int = eqx.field(static=True, default=1)
    observation_shape: tuple[int, ...] = eqx.field(static=True, default=(2,))
    observation_dtype: jnp.dtype = eqx.field(static=True, default=jnp.dtype(jnp.float32))

    def init(self, key):
        length = jax.random.randint(key, (), 3, 7) if self.random_length else jnp.int32(6)
        return WalkState(jnp.int32(0), length, jnp.float32(0.0), jnp.bool_(False))

    def step(self, state, action, key):
        del key
        time = jnp.where(state.terminated, state.time, state.time + 1)
        reward = jnp.where(state.terminated, 0.0, action.astype(jnp.float32))
        return WalkState(time, state.length, reward, state.terminated | (time == state.length))

    def observation(self, state):
        return jnp.stack([state.time, state.length]).astype(jnp.float32)

    def legal_action_mask(self, state):
        return jnp.ones(2, bool)

    def rewards(self, state):
        return state.reward[None]

    def terminated(self, state):
        return state.terminated

    def truncated(self, state):
        return jnp.bool_(False)

    def current_player(self, state):
        return jnp.int32(0)


def _agent_recipe(algorithm: str, env):
    """An untrained AlphaZero (PUCT) or MuZero (Gumbel) evaluated by its search and its
    network, with its trainer and state."""
    if algorithm == "alphazero":
        recipe = azx.presets.AlphaZeroRecipe(search="puct", search_options={"num_simulations": 4})
        options = {"width": 16, "depth": 1}
    else:
        recipe = azx.presets.MuZeroRecipe(search_options={"num_simulations": 4})
        options = {"embedding_size": 8, "width": 16, "depth": 1}
    recipe = dataclasses.replace(recipe, eval_agents=("search", "network"), eval_games=16)
    net = recipe.make_network("mlp", options, env, key=jax.random.key(0))
    trainer = recipe.make_trainer(env, recipe.config_class(num_envs=2, batch_size=4))
    return recipe, trainer, trainer.init(net, key=jax.random.key(1))


def _ppo(env, greedy: bool):
    recipe = azx.presets.PPORecipe(eval_episodes=16, eval_greedy=greedy)
    net = recipe.make_network("actor_critic", {}, env, key=jax.random.key(0))
    trainer = recipe.make_trainer(
        env, azx.ppo.Config(num_envs=2, rollout_length=4, num_minibatches=1)
    )
    return recipe, trainer, trainer.init(net, key=jax.random.key(1))


def _evaluate(recipe, trainer, state, key=KEY):
    judge = evaluator(recipe, trainer.env)
    results = judge.evaluate(trainer, state, key=key, phase=lambda text: None)
    return judge, results


def _returns(env, agent):
    """The returns of `agent`'s episodes from the evaluators' key."""
    play = jax.jit(lambda: azx.arena.episode_returns(env, agent, num_games=16, key=KEY)[0])
    return np.asarray(play())


# The default run checks the sampled counterpart's record through a policy and through
# `azx eval` (below); the slow tier through both agent recipes' training evaluations.
@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["alphazero", "muzero"])
def test_greedy_agents_of_a_fixed_start_are_judged_sampled(algorithm):
    recipe, trainer, state = _agent_recipe(algorithm, Walk(random_length=False))
    judge, results = _evaluate(recipe, trainer, state)
    lines = judge.evaluation_lines(results)
    for kind in ("search", "network"):
        record = results[kind]
        greedy = recipe.agent(state.net, kind, None, trainer.env)
        # The greedy agent walks one way every time: one return for all.
        assert np.all(_returns(trainer.env, greedy) == record["greedy_return"])
        # The record is its sampled counterpart's episodes (the policy sampled; the search
        # with its training exploration), on the same key.
        explored = recipe.agent(state.net, kind, None, trainer.env, explore=True)
        sampled = _returns(trainer.env, explored)
        assert record["player"] == "sampled"
        assert record["return_mean"] == pytest.approx(sampled.mean())
        assert (record["return_min"], record["return_max"]) == (sampled.min(), sampled.max())
        if kind == "network" or algorithm == "alphazero":
            # Their returns differ: a real interval around a mean inside it. (The
            # untrained MuZero's Gumbel search walks one way even with its noise on.)
            assert record["return_low"] < record["return_mean"] < record["return_high"]
        assert f"{kind}: {describe_episodes(record)}" in lines
        (why,) = [line for line in lines if line.startswith(f"{kind}: the greedy player")]
        assert "start alike" in why and "above is the sampled player's" in why


def test_greedy_agents_of_random_starts_are_judged_as_they_are():
    recipe, trainer, state = _agent_recipe("alphazero", Walk(random_length=True))
    judge, results = _evaluate(recipe, trainer, state)
    for kind in ("search", "network"):
        record = results[kind]
        assert "player" not in record and "greedy_return" not in record
        agent = recipe.agent(state.net, kind, None, trainer.env)
        assert record["return_mean"] == pytest.approx(_returns(trainer.env, agent).mean())
    assert len(judge.evaluation_lines(results)) == 2


@pytest.mark.parametrize("random_length", [False, True])
def test_a_greedy_policy_is_judged_sampled_only_where_its_episodes_cannot_differ(random_length):
    env = Walk(random_length=random_length)
    recipe, trainer, state = _ppo(env, greedy=True)
    judge, record = _evaluate(recipe, trainer, state)
    key = KEY
    greedy = azx.run.return_record(
        recipe.play_episodes(trainer, state, 16, key=key, greedy=True), greedy=True
    )
    if random_length:
        assert record == greedy
        assert judge.evaluation_lines(record) == [azx.run.describe_return(record)]
        return
    sampled = recipe.play_episodes(trainer, state, 16, key=key, greedy=False)
    assert greedy["return_min"] == greedy["return_max"]
    assert record == azx.run.return_record(sampled, greedy=False) | {
        "player": "sampled",
        "greedy_return": greedy["return_mean"],
    }
    assert record["return_low"] < record["return_high"]
    line, why = judge.evaluation_lines(record)
    assert "(sampled)" in line and "the greedy player's episodes all start alike" in why
    # A sampled policy is judged as it is, whatever its starts.
    recipe, trainer, state = _ppo(env, greedy=False)
    assert "player" not in _evaluate(recipe, trainer, state)[1]


def _run(recipe, trainer, state, directory):
    """A run of `recipe` at iteration 3, as `azx eval` opens it."""
    network = recipe.networks[0]
    preset = azx.presets.Preset("walk", "walk", network, {}, recipe, trainer.config, iterations=3)
    return azx.run.Run(directory, preset, 0, 3, trainer.env, trainer, state)


def test_azx_eval_of_a_fixed_start_judges_the_sampled_player_and_says_so(tmp_path):
    env = Walk(random_length=False)
    recipe, trainer, state = _agent_recipe("alphazero", env)
    options = {"agent": "network", "games": 16, "simulations": None}
    options |= {"opponent": ["random"], "opening_plies": None}
    run = _run(recipe, trainer, state, tmp_path)
    result, name, lines = evaluator(recipe, env).evaluate_run(run, options, seed=2)
    network, baseline = result["results"]["network"], result["results"]["random"]
    assert name == "network" and network["player"] == "sampled" and "player" not in baseline
    assert lines[1:] == [
        f"  network: {describe_episodes(network)}",
        f"  network: {describe_sampled(network)[0]}",
        f"  random: {describe_episodes(baseline)}",
    ]
    recipe, trainer, state = _ppo(env, greedy=False)
    run = _run(recipe, trainer, state, tmp_path)
    result, name, lines = evaluator(recipe, env).evaluate_run(
        run, {"greedy": True, "episodes": 16}, seed=2
    )
    assert name == "greedy" and result["player"] == "sampled" and not result["greedy"]
    assert lines[1] == "  " + describe_sampled(result)[0]
