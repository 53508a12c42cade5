"""The brax adapter, checked against brax's own `reset` and `step`."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import azx.envs
from azx._numerics import third_party_numerics


pytest.importorskip("brax")  # not a dependency of azx: pip install "azx[brax]"
# The notices the adapter hides, for the test's own calls to brax: brax is no longer
# maintained, and uses parts of MuJoCo's API that MuJoCo deprecates.
# brax's physics compiles slowly on the CPU (about a minute here): the slow tier.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Brax System:UserWarning"),
]

LIMIT = 12


@pytest.fixture(scope="module")
def env():
    return azx.envs.make("brax:inverted_pendulum", max_episode_steps=LIMIT)


def test_a_fresh_episode_has_brax_sizes_and_bounds(env):
    assert env.action_space() == azx.envs.BoxActions([-1.0], [1.0])
    assert (env.observation_shape, env.num_actions, env.num_players) == ((4,), 1, 1)
    state = jax.jit(env.init)(jax.random.key(0))
    observation = env.observation(state)
    assert observation.shape == (4,) and observation.dtype == jnp.float32
    np.testing.assert_array_equal(env.rewards(state), [0.0])
    assert not env.terminated(state) and not env.truncated(state)
    assert env.legal_action_mask(state).tolist() == [True]


def test_steps_are_brax_steps_until_the_episode_ends(env):
    from brax import envs

    with third_party_numerics():  # brax's code expects JAX's default numerics
        brax_env = envs.get_environment("inverted_pendulum", backend="generalized")
    key = jax.random.key(3)

    @jax.jit
    def play(actions):
        def step(state, action):
            state = env.step(state, action, key)
            return state, (state.observation, state.reward, state.terminated, state.truncated)

        return jax.lax.scan(step, env.init(key), actions)[1]

    @jax.jit
    def play_brax(actions):
        def step(state, action):
            state = brax_env.step(state, action)
            return state, (state.obs, state.reward, state.done)

        with third_party_numerics():
            return jax.lax.scan(step, brax_env.reset(jax.random.key_data(key)), actions)[1]

    steps = np.arange(1, LIMIT + 3)
    # Unpushed, the pole stays up: the time limit ends the episode.
    still = jnp.zeros((LIMIT + 2, 1))
    observation, reward, terminated, truncated = play(still)
    brax_observation, brax_reward, brax_done = play_brax(still)
    assert not brax_done.any() and not terminated.any()
    np.testing.assert_array_equal(truncated, steps >= LIMIT)
    np.testing.assert_array_equal(observation[:LIMIT], brax_observation[:LIMIT])
    np.testing.assert_array_equal(reward[:LIMIT], brax_reward[:LIMIT])
    # Pushed hard one way, it falls: brax's first `done` terminates the episode.
    pushed = jnp.ones((LIMIT + 2, 1))
    observation, reward, terminated, truncated = play(pushed)
    brax_observation, brax_reward, brax_done = play_brax(pushed)
    end = int(np.argmax(brax_done))
    assert brax_done[end] and 0 < end < LIMIT - 1
    np.testing.assert_array_equal(terminated, steps > end)
    assert not truncated.any()
    np.testing.assert_array_equal(observation[: end + 1], brax_observation[: end + 1])
    np.testing.assert_array_equal(reward[: end + 1], brax_reward[: end + 1])
    # The episode then stays as it ended, with zero reward.
    np.testing.assert_array_equal(
        observation[end:], np.broadcast_to(observation[end], (LIMIT + 2 - end, 4))
    )
    np.testing.assert_array_equal(reward[end + 1 :], 0.0)


def test_bad_names_and_settings_say_what_is_allowed():
    with pytest.raises(ValueError, match="unknown brax environment 'cartpole'.*inverted_pendulum"):
        azx.envs.make("brax:cartpole")
    with pytest.raises(ValueError, match="backend must be one of .*got 'fast'"):
        azx.envs.BraxEnv("hopper", backend="fast")
    with pytest.raises(ValueError, match="max_episode_steps"):
        azx.envs.BraxEnv("hopper", max_episode_steps=0)


def test_azx_train_and_eval_run_the_brax_preset(tmp_path):
    import json

    from test_cli import _azx

    preset = azx.presets.get("ppo_inverted_pendulum")
    assert preset.make_env() == azx.envs.BraxEnv("inverted_pendulum")
    out = tmp_path / "pendulum"
    options = ["--preset", "ppo_inverted_pendulum", "--log-every", "1", "--eval-every", "1"]
    result = _azx("train", "--out", out, *options, "--eval-episodes", 2, "--iterations", 1)
    assert result.exit_code == 0, result.output
    path = tmp_path / "eval.json"
    result = _azx("eval", "--run", out, "--episodes", 3, "--json", path)
    assert result.exit_code == 0, result.output
    saved = json.loads(path.read_text())
    # A reward of 1 for every step the pole stands, and at most 1000 steps: the return is
    # the episode's length.
    returns = np.asarray(azx.load_run(out).play_episodes(3, key=jax.random.key(0)).returns)
    assert saved["return_mean"] == pytest.approx(returns.mean(), rel=1e-5)
    assert np.all((returns >= 1) & (returns <= 1000))
    assert saved["length_mean"] == pytest.approx(saved["return_mean"], rel=1e-5)
