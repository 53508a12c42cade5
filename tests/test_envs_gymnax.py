"""The gymnax adapter, checked against gymnax's own `step_env` and `is_truncated`."""

import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import azx.envs
from azx._numerics import third_party_numerics


pytest.importorskip("gymnax")  # the optional extra: pip install "azx[envs]"
BATCH = 16


def _random_play(env, key, num_steps):
    """`num_steps` random steps of one episode, with what a trainer relies on checked at
    every step: once an episode ends it stays as it ended, with zero reward."""

    def body(carry, key):
        state, length = carry
        action_key, step_key = jax.random.split(key)
        action = jax.random.randint(action_key, (), 0, env.num_actions)
        was_done = env.terminated(state) | env.truncated(state)
        next_state = env.step(state, action, step_key)
        kept = jnp.all(env.observation(next_state) == env.observation(state))
        frozen = ~was_done | (
            kept
            & jnp.all(env.rewards(next_state) == 0.0)
            & (env.terminated(next_state) == env.terminated(state))
            & (env.truncated(next_state) == env.truncated(state))
        )
        length = length + (~was_done).astype(jnp.int32)
        both = env.terminated(next_state) & env.truncated(next_state)
        return (next_state, length), (frozen, both, env.rewards(next_state))

    state = env.init(key)
    keys = jax.random.split(jax.random.fold_in(key, 1), num_steps)
    (state, length), (frozen, both, rewards) = jax.lax.scan(body, (state, jnp.int32(0)), keys)
    return state, length, frozen, both, rewards


def test_minatar_random_play_under_jit_and_vmap():
    limit = 12  # random play loses the ball after 6 or 16 steps: both endings occur
    env = azx.envs.make("gymnax:Breakout-MinAtar", max_episode_steps=limit)
    assert (env.num_actions, env.observation_shape) == (3, (10, 10, 4))
    play = jax.jit(jax.vmap(lambda key: _random_play(env, key, limit + 5)))
    state, length, frozen, both, rewards = play(jax.random.split(jax.random.key(0), BATCH))
    terminated, truncated = jax.vmap(env.terminated)(state), jax.vmap(env.truncated)(state)
    assert bool(jnp.all(terminated | truncated)), "every episode ends within the limit"
    assert bool(jnp.any(terminated)) and bool(jnp.any(truncated))
    assert bool(jnp.all(frozen)) and not bool(jnp.any(both))
    # Truncated exactly at the limit; terminated at most there.
    np.testing.assert_array_equal(np.asarray(length)[np.asarray(truncated)], limit)
    assert bool(jnp.all(length <= limit))
    assert rewards.shape == (BATCH, limit + 5, 1) and rewards.dtype == jnp.float32
    observation = jax.vmap(env.observation)(state)
    assert observation.shape == (BATCH, *env.observation_shape)
    assert observation.dtype == env.observation_dtype == jnp.float32
    # gymnax leaves Python scalars in a fresh state; the adapter's (unjitted, unbatched)
    # are arrays of the dtypes that steps give, so that a scan can carry them.
    fresh = env.init(jax.random.key(1))
    assert jax.tree.structure(fresh) == jax.tree.structure(state)
    for leaf, stepped in zip(jax.tree.leaves(fresh), jax.tree.leaves(state), strict=True):
        assert isinstance(leaf, jax.Array)
        assert (leaf.shape, leaf.dtype, leaf.weak_type) == (
            stepped.shape[1:],
            stepped.dtype,
            stepped.weak_type,
        )


@pytest.mark.parametrize(
    "name",
    [
        "CartPole-v1",
        "DiscountingChain-bsuite",  # parameters hold an array
        "FourRooms-misc",  # int32 observations; actions slip at random
    ],
)
def test_declared_sizes_match_states(name):
    env = azx.envs.make(f"gymnax:{name}")
    gym_env, params = env.env, env.params
    state = env.init(jax.random.key(2))
    # One state, one action, 16 keys for the step's chance events.
    step = jax.jit(jax.vmap(env.step, in_axes=(None, None, 0)))
    children = step(state, jnp.int32(1), jax.random.split(jax.random.key(3), 16))
    child = jax.tree.map(lambda leaf: leaf[0], children)
    assert jax.tree.structure(state) == jax.tree.structure(child)
    for fresh, stepped in zip(jax.tree.leaves(state), jax.tree.leaves(child), strict=True):
        assert isinstance(fresh, jax.Array)
        assert (fresh.shape, fresh.dtype, fresh.weak_type) == (
            stepped.shape,
            stepped.dtype,
            stepped.weak_type,
        )
    for state in (state, child):
        assert env.observation(state).shape == env.observation_shape
        assert env.observation(state).dtype == env.observation_dtype == jnp.float32
        assert env.legal_action_mask(state).shape == (env.num_actions,)
        assert env.legal_action_mask(state).dtype == jnp.bool_
        assert env.rewards(state).shape == (1,) and env.rewards(state).dtype == jnp.float32
        assert env.current_player(state).dtype == jnp.int32
    assert env.num_players == 1 and env.num_actions == gym_env.action_space(params).n
    assert env.max_episode_steps == params.max_steps_in_episode
    assert all(isinstance(d, int) for d in env.observation_shape)
    outcomes = len(np.unique(np.asarray(children.observation), axis=0))
    assert outcomes > 1 if name == "FourRooms-misc" else outcomes == 1, "the key drives chance"


def _reference_episode(env, key, actions):
    """gymnax's own transitions for `actions`: (observation, reward, terminated,
    time limit reached) per step, from `step_env` and `is_truncated` directly."""
    gym_env, params = env.env, env.params
    with third_party_numerics():
        reset = jax.jit(lambda key: gym_env.reset_env(key, params))
        step = jax.jit(lambda key, state, action: gym_env.step_env(key, state, action, params))
        out_of_time = jax.jit(lambda state: gym_env.is_truncated(state, params))
        _, state = reset(key)
        steps = []
        for t, action in enumerate(actions):
            observation, state, reward, terminated, _ = step(
                jax.random.fold_in(key, t), state, jnp.int32(action)
            )
            steps.append((observation, float(reward), bool(terminated), bool(out_of_time(state))))
    return steps


def _adapter_episode(env, key, actions):
    step = jax.jit(env.step)
    state = env.init(key)
    steps = []
    for t, action in enumerate(actions):
        state = step(state, jnp.int32(action), jax.random.fold_in(key, t))
        steps.append(
            (
                env.observation(state),
                float(env.rewards(state)[0]),
                bool(env.terminated(state)),
                bool(env.truncated(state)),
            )
        )
    return steps


def test_cartpole_time_limit_is_truncation_not_termination():
    # Alternating pushes keep the pole up; gymnax's own step_env says it never fell.
    limit = 12
    env = azx.envs.make("gymnax:CartPole-v1", max_episode_steps=limit)
    actions = [t % 2 for t in range(limit + 3)]
    key = jax.random.key(4)
    reference = _reference_episode(env, key, actions[:limit])
    adapter = _adapter_episode(env, key, actions)
    assert not any(terminated for _, _, terminated, _ in reference)
    assert [out_of_time for *_, out_of_time in reference] == [False] * (limit - 1) + [True]
    for (obs, reward, terminated, truncated), (ref_obs, ref_reward, _, ref_out) in zip(
        adapter, reference, strict=False
    ):
        np.testing.assert_allclose(obs, ref_obs, rtol=1e-6)
        assert (reward, terminated, truncated) == (ref_reward, False, ref_out)
    # After the limit: the final observation stays readable, with no further reward.
    for obs, reward, terminated, truncated in adapter[limit:]:
        np.testing.assert_array_equal(obs, reference[-1][0])
        assert (reward, terminated, truncated) == (0.0, False, True)


def test_cartpole_falling_pole_is_termination_and_wins_a_tie():
    # Pushing one way makes the pole fall; find the step from gymnax's own step_env.
    key = jax.random.key(5)
    env = azx.envs.make("gymnax:CartPole-v1")
    reference = _reference_episode(env, key, [1] * 30)
    fell = [terminated for _, _, terminated, _ in reference].index(True) + 1
    assert 3 < fell < 30
    adapter = _adapter_episode(env, key, [1] * (fell + 2))
    for t, (obs, reward, terminated, truncated) in enumerate(adapter[:fell]):
        np.testing.assert_allclose(obs, reference[t][0], rtol=1e-6)
        assert (reward, terminated, truncated) == (reference[t][1], t == fell - 1, False)
    assert [step[1:] for step in adapter[fell:]] == [(0.0, True, False)] * 2
    # With the time limit on the very step the pole falls, gymnax reports both; the
    # adapter reports termination only.
    tied = azx.envs.make("gymnax:CartPole-v1", max_steps_in_episode=fell)
    assert _reference_episode(tied, key, [1] * fell)[-1][2:] == (True, True)
    assert _adapter_episode(tied, key, [1] * fell)[-1][2:] == (True, False)


def test_keywords_set_env_params_or_constructor_arguments_and_are_checked():
    env = azx.envs.make("gymnax:CartPole-v1", gravity=3.0, max_steps_in_episode=7)
    assert env.params.gravity == 3.0 and env.max_episode_steps == 7
    full = azx.envs.make("gymnax:Breakout-MinAtar", use_minimal_action_set=False)
    assert full.num_actions == 6 and full.env.num_actions == 6
    with pytest.raises(ValueError, match="takes no argument.*colour.*accepts:.*max_steps_in"):
        azx.envs.make("gymnax:CartPole-v1", colour=1)
    with pytest.raises(ValueError, match="not both"):
        azx.envs.make("gymnax:CartPole-v1", max_episode_steps=5, max_steps_in_episode=5)
    with pytest.raises(ValueError, match="max_episode_steps must be a positive int"):
        azx.envs.make("gymnax:CartPole-v1", max_episode_steps=0)


def test_box_actions_step_as_gymnax_steps():
    env = azx.envs.GymnaxEnv("MountainCarContinuous-v0")
    assert env.action_space() == azx.envs.BoxActions([-1.0], [1.0]) and env.num_actions == 1
    assert azx.envs.make("gymnax:Pendulum-v1").action_space() == azx.envs.BoxActions([-2], [2])
    assert azx.envs.make("gymnax:CartPole-v1").action_space() == azx.envs.DiscreteActions(2)
    key = jax.random.key(0)
    state = env.init(key)
    with third_party_numerics():  # gymnax's own code, as the adapter runs it
        reference = env.env.reset_env(key, env.params)[1]
    for t, force in enumerate([0.5, -1.0, 0.25, 1.0]):
        action = jnp.array([force], jnp.float32)
        step_key = jax.random.fold_in(key, t)
        state = env.step(state, action, step_key)
        with third_party_numerics():
            observation, reference, reward, *_ = env.env.step_env(
                step_key, reference, action, env.params
            )
        np.testing.assert_array_equal(state.observation, observation)
        np.testing.assert_allclose(env.rewards(state), [-0.1 * force**2], rtol=1e-6)
        np.testing.assert_array_equal(reward, env.rewards(state)[0])


def test_names_and_unknown_names():
    pytest.importorskip("xminigrid")
    names = azx.envs.available()
    assert {"connect_four", "gymnax:CartPole-v1", "gymnax:Breakout-MinAtar"} <= set(names)
    assert "xminigrid:MiniGrid-Empty-6x6" in names
    assert "gymnax:Pendulum-v1" not in names  # continuous actions
    assert "gymnax:MNISTBandit-bsuite" not in names  # downloads MNIST
    pattern = "unknown environment 'gymnax:CartPole'.*connect_four.*gymnax:CartPole-v1.*xminigrid:"
    with pytest.raises(ValueError, match=pattern):
        azx.envs.make("gymnax:CartPole")
    assert azx.envs.make("pgx:connect_four") == azx.envs.make("connect_four")


def test_equal_configurations_are_equal_static_data():
    # Acrobot's parameters hold an array, which static data could not.
    first = azx.envs.make("gymnax:Acrobot-v1", max_episode_steps=50)
    second = azx.envs.make("gymnax:Acrobot-v1", max_episode_steps=50)
    assert first == second and hash(first) == hash(second)
    assert first != azx.envs.make("gymnax:Acrobot-v1")


def test_missing_gymnax_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "gymnax", None)  # `import gymnax` now fails
    with pytest.raises(ImportError, match=r'pip install "azx\[envs\]"'):
        azx.envs.make("gymnax:CartPole-v1")
    assert "connect_four" in azx.envs.available()
    assert not any(name.startswith("gymnax:") for name in azx.envs.available())


def test_import_azx_imports_neither_gymnax_nor_xminigrid():
    code = "import sys, azx; print(sorted({'gymnax', 'xminigrid'} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
