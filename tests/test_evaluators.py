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
from azx._report import describe_episodes


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


def _alphazero(env):
    recipe = azx.presets.AlphaZeroRecipe(
        search="puct", search_options={"num_simulations": 4}, eval_agents=("search", "network")
    )
    recipe = dataclasses.replace(recipe, eval_games=16)
    net = recipe.make_network("mlp", {"width": 16, "depth": 1}, env, key=jax.random.key(0))
    trainer = recipe.make_trainer(env, azx.alphazero.Config(num_envs=2, batch_size=4))
    return recipe, trainer, trainer.init(net, key=jax.random.key(1))


def _ppo(env, greedy: bool):
    recipe = azx.presets.PPORecipe(eval_episodes=16, eval_greedy=greedy)
    net = recipe.make_network("actor_critic", {}, env, key=jax.random.key(0))
    trainer = recipe.make_trainer(
        env, azx.ppo.Config(num_envs=2, rollout_length=4, num_minibatches=1)
    )
    return recipe, trainer, trainer.init(net, key=jax.random.key(1))


def _evaluate(recipe, trainer, state, key=jax.random.key(2)):
    judge = evaluator(recipe, trainer.env)
    results = judge.evaluate(trainer, state, key=key, phase=lambda text: None)
    return judge, results


def test_greedy_agents_of_a_fixed_start_are_judged_sampled():
    recipe, trainer, state = _alphazero(Walk(random_length=False))
    judge, results = _evaluate(recipe, trainer, state)
    lines = judge.evaluation_lines(results)
    for kind in ("search", "network"):
        record = results[kind]
        # The greedy agent walks one way every time: a return of 0 to 6, the same for all.
        assert record["player"] == "sampled" and record["greedy_return"] in range(7)
        # The sampled player's returns differ: a real interval around a mean inside it.
        assert record["return_min"] < record["return_max"]
        assert record["return_low"] < record["return_mean"] < record["return_high"]
        assert f"{kind}: {describe_episodes(record)}" in lines
        (why,) = [line for line in lines if line.startswith(f"{kind}: the greedy player")]
        assert "start alike" in why and "above is the sampled player's" in why
    # The greedy agents' own episodes: one return, as the record says.
    for kind in ("search", "network"):
        agent = recipe.agent(state.net, kind, None, trainer.env)
        returns, _ = jax.jit(
            lambda agent=agent: azx.arena.episode_returns(
                trainer.env, agent, num_games=16, key=jax.random.key(2)
            )
        )()
        assert np.all(np.asarray(returns) == results[kind]["greedy_return"])


def test_greedy_agents_of_random_starts_are_judged_as_they_are():
    recipe, trainer, state = _alphazero(Walk(random_length=True))
    judge, results = _evaluate(recipe, trainer, state)
    for kind in ("search", "network"):
        record = results[kind]
        assert "player" not in record and "greedy_return" not in record
        agent = recipe.agent(state.net, kind, None, trainer.env)
        returns, _ = jax.jit(
            lambda agent=agent: azx.arena.episode_returns(
                trainer.env, agent, num_games=16, key=jax.random.key(2)
            )
        )()
        assert record["return_mean"] == pytest.approx(float(np.mean(returns)))
    assert len(judge.evaluation_lines(results)) == 2


@pytest.mark.parametrize("random_length", [False, True])
def test_a_greedy_policy_is_judged_sampled_only_where_its_episodes_cannot_differ(random_length):
    env = Walk(random_length=random_length)
    recipe, trainer, state = _ppo(env, greedy=True)
    judge, record = _evaluate(recipe, trainer, state)
    key = jax.random.key(2)
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
