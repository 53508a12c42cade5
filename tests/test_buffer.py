"""Episode replay buffer: value targets checked against hand-computed returns and against a
pure-Python backward recursion; sampling checked never to pass off a step without a target."""

import collections

import equinox as eqx
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings

from azx.buffer import Batch, BufferState, Experience, ReplayBuffer
from azx.buffer._ring import sample_valid


NUM_ACTIONS = 3


def example() -> Experience:
    return Experience(
        observation=jnp.zeros(2, jnp.int32),
        legal_action_mask=jnp.ones(NUM_ACTIONS, jnp.bool_),
        policy_target=jnp.full(NUM_ACTIONS, 1 / NUM_ACTIONS, jnp.float32),
        reward=jnp.zeros((), jnp.float32),
        discount=jnp.ones((), jnp.float32),
        root_value=jnp.zeros((), jnp.float32),
    )


def experience(time, reward, discount, root_value=None) -> Experience:
    """One step in every row; the observation `[row, time]` names the step."""
    rows = len(reward)
    if root_value is None:
        root_value = [0.0] * rows
    return Experience(
        observation=jnp.array([[row, time] for row in range(rows)], jnp.int32),
        legal_action_mask=jnp.ones((rows, NUM_ACTIONS), jnp.bool_),
        policy_target=jnp.full((rows, NUM_ACTIONS), 1 / NUM_ACTIONS, jnp.float32),
        reward=jnp.array(reward, jnp.float32),
        discount=jnp.array(discount, jnp.float32),
        root_value=jnp.array(root_value, jnp.float32),
    )


def add(buffer, state, time, reward, discount, *, terminated, truncated=None, root_value=None):
    if truncated is None:
        truncated = [False] * len(reward)
    return buffer.add(
        state,
        experience(time, reward, discount, root_value),
        terminated=jnp.array(terminated, jnp.bool_),
        truncated=jnp.array(truncated, jnp.bool_),
    )


def check_targets(state: BufferState, expected):
    """`expected[row][slot]` is the hand-computed target, or None for "not sampleable"."""
    has_target = np.array([[value is not None for value in row] for row in expected])
    np.testing.assert_array_equal(np.asarray(state.has_target), has_target)
    target = np.array([[0.0 if value is None else value for value in row] for row in expected])
    np.testing.assert_allclose(
        np.where(has_target, np.asarray(state.value_target), 0.0), target, rtol=1e-6, atol=1e-6
    )


_ = None  # a slot without a target, in the tables below


def test_two_player_interleaved_episodes():
    # Turn passes every ply (discount -1) except row 1 at t=1, where the mover plays again.
    # Rewards are the mover's, on the ply that ends the game.
    buffer = ReplayBuffer(18, 3)
    state = buffer.init(example())
    flip = [-1.0, -1.0, -1.0]
    state = add(buffer, state, 0, [0, 0, 1], flip, terminated=[False, False, True])
    state = add(buffer, state, 1, [0, 0, 0], [-1.0, 1.0, -1.0], terminated=[False] * 3)
    state = add(buffer, state, 2, [1, 0, 1], flip, terminated=[True, False, True])
    # Row 0: won on the 3rd ply, movers alternate. Row 2: one-ply win, then a 2-ply win.
    check_targets(
        state,
        [
            [1, -1, 1, _, _, _],
            [_, _, _, _, _, _],
            [1, -1, 1, _, _, _],
        ],
    )
    assert int(buffer.num_pending(state)) == 3
    state = add(buffer, state, 3, [0, 0, 0], flip, terminated=[False] * 3)
    state = add(buffer, state, 4, [0, 1, 0], flip, terminated=[False, True, False])
    state = add(buffer, state, 5, [-1, 0, 0], flip, terminated=[True, False, False])
    # Row 0: second episode lost by its last mover. Row 1: movers P0 P1 P1 P0 P1 and P1
    # wins, so P1's steps get +1 and P0's -1; t=5 starts a new, running episode.
    check_targets(
        state,
        [
            [1, -1, 1, -1, 1, -1],
            [-1, 1, 1, -1, 1, _],
            [1, -1, 1, _, _, _],
        ],
    )
    np.testing.assert_array_equal(
        np.asarray(state.pending),
        [[0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 1], [0, 0, 0, 1, 1, 1]],
    )
    assert int(buffer.num_valid(state)) == 14


def test_single_player_discounted_return_and_truncation_drop():
    gamma = 0.5
    buffer = ReplayBuffer(8, 2, truncation="drop")
    state = buffer.init(example())
    state = add(buffer, state, 0, [1, 3], [gamma] * 2, terminated=[False, False])
    state = add(buffer, state, 1, [0, 1], [gamma] * 2, terminated=[False, True])
    state = add(buffer, state, 2, [2, 2], [gamma] * 2, terminated=[False, False])
    state = add(
        buffer, state, 3, [4, 2], [gamma] * 2, terminated=[True, False], truncated=[False, True]
    )
    # Row 0: 4 + 0 = 4 at t=3; 2 + 0.5*4 = 4; 0 + 0.5*4 = 2; 1 + 0.5*2 = 2.
    # Row 1: 1 at t=1; 3 + 0.5*1 = 3.5; then t=2..3 truncated and dropped.
    check_targets(state, [[2, 2, 4, 4], [3.5, 1, _, _]])
    assert int(buffer.num_pending(state)) == 0


@pytest.mark.parametrize("truncation", ["bootstrap", "drop"])
def test_truncation_bootstrap_from_root_value(truncation):
    buffer = ReplayBuffer(9, 3, truncation=truncation)
    state = buffer.init(example())
    # Row 0: two-player, all rewards 0. Row 1: single-player, gamma 0.5. Row 2: both
    # terminated and truncated on its last step: terminated wins, the outcome is known.
    discount = [-1.0, 0.5, 0.5]
    state = add(
        buffer, state, 0, [0, 1, 0], discount, terminated=[False] * 3, root_value=[0.1, 0, 9]
    )
    state = add(
        buffer,
        state,
        1,
        [0, 1, 5],
        discount,
        terminated=[False, False, True],
        truncated=[False, False, True],
        root_value=[0.2, 0, 9],
    )
    state = add(
        buffer,
        state,
        2,
        [0, 1, 0],
        discount,
        terminated=[False] * 3,
        truncated=[True, True, False],
        root_value=[0.4, 6, 0],
    )
    if truncation == "bootstrap":
        # Last step's target is its own root value, whatever its reward: row 0: 0.4 at
        # t=2, sign flipped each ply before it; row 1: 6, then 1 + 0.5*6 = 4, then
        # 1 + 0.5*4 = 3.
        expected = [[0.4, -0.4, 0.4], [3, 4, 6], [2.5, 5, _]]
    else:
        expected = [[_, _, _], [_, _, _], [2.5, 5, _]]
    check_targets(state, expected)
    np.testing.assert_array_equal(np.asarray(state.pending), [[0, 0, 0], [0, 0, 0], [0, 0, 1]])


def test_ring_wrap_around():
    # Three slots per row; step t lands in slot t % 3.
    buffer = ReplayBuffer(6, 2)
    state = buffer.init(example())
    discount = [0.5, -1.0]  # row 0 single-player, row 1 two-player
    state = add(buffer, state, 0, [8, 0], discount, terminated=[False, False])
    state = add(buffer, state, 1, [4, 1], discount, terminated=[False, True])
    state = add(buffer, state, 2, [2, 0], discount, terminated=[False, False])
    check_targets(state, [[_, _, _], [-1, 1, _]])
    state = add(buffer, state, 3, [1, 0], discount, terminated=[False, False])
    # Row 1's finished t=0 was overwritten by the running episode's t=3: no longer sampled.
    check_targets(state, [[_, _, _], [_, 1, _]])
    state = add(buffer, state, 4, [4, 0], discount, terminated=[True, False])
    # Row 0's episode outgrew the ring: t=0 and t=1 are gone; held t=2..4 in slots 2, 0, 1:
    # t=4: 4; t=3: 1 + 0.5*4 = 3; t=2: 2 + 0.5*3 = 3.5.
    check_targets(state, [[3, 4, 3.5], [_, _, _]])
    np.testing.assert_array_equal(np.asarray(state.pending), [[0, 0, 0], [1, 1, 1]])
    state = add(buffer, state, 5, [0, -1], discount, terminated=[False, True])
    # Row 0: t=5 starts a new episode over t=2's slot. Row 1: the episode t=2..5 ends with
    # the last mover losing; t=2 was overwritten, t=3..5 sit in slots 0, 1, 2.
    check_targets(state, [[3, 4, _], [-1, 1, -1]])
    np.testing.assert_array_equal(np.asarray(state.position), [0, 0])


def test_sample_before_any_target_is_all_invalid():
    buffer = ReplayBuffer(4, 2)
    state = buffer.init(example())
    batch = buffer.sample(state, key=jax.random.key(0), batch_size=5)
    assert not np.asarray(batch.mask).any()
    # Running and dropped steps do not count either.
    state = add(buffer, state, 0, [1, 1], [1.0, 1.0], terminated=[False, False])
    state = add(
        buffer, state, 1, [1, 1], [1.0, 1.0], terminated=[False, False], truncated=[True, False]
    )
    batch = buffer.sample(state, key=jax.random.key(1), batch_size=5)
    assert isinstance(batch, Batch)
    assert batch.observation.shape == (5, 2)
    assert not np.asarray(batch.mask).any()
    for leaf in jax.tree.leaves(batch):
        assert np.isfinite(np.asarray(leaf, np.float64)).all()
    assert int(buffer.num_valid(state)) == 0


def test_sample_is_uniform_over_steps_with_targets_only():
    buffer = ReplayBuffer(12, 3, truncation="drop")
    state = buffer.init(example())
    discount = [-1.0] * 3
    # Row 0: finished 2-ply game (targets -1, 1) then a running step. Row 1: truncated and
    # dropped. Row 2: a finished 1-ply game (target 1), then a finished 2-ply game (1, -1).
    state = add(buffer, state, 0, [0, 0, 1], discount, terminated=[False, False, True])
    state = add(buffer, state, 1, [1, 0, 0], discount, terminated=[True, False, False])
    state = add(
        buffer,
        state,
        2,
        [0, 0, -1],
        discount,
        terminated=[False, False, True],
        truncated=[False, True, False],
    )
    expected = {(0, 0): -1.0, (0, 1): 1.0, (2, 0): 1.0, (2, 1): 1.0, (2, 2): -1.0}
    num_samples = 5000
    batch = eqx.filter_jit(buffer.sample)(state, key=jax.random.key(0), batch_size=num_samples)
    assert np.asarray(batch.mask).all()
    counts = collections.Counter()
    observation = np.asarray(batch.observation)
    for (row, time), target in zip(observation, np.asarray(batch.value_target)):
        assert (int(row), int(time)) in expected
        assert target == expected[int(row), int(time)]
        counts[int(row), int(time)] += 1
    # Uniform: 1000 each; the binomial standard deviation is about 28.
    assert set(counts) == set(expected)
    for count in counts.values():
        assert abs(count - num_samples / len(expected)) < 150


@pytest.mark.parametrize("valid", [[0, 1, 1, 0, 1, 0], [1, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0]])
def test_sample_valid_draws_the_nth_valid_index(valid):
    """The shared sampling of both replays: the i-th valid index for a uniform draw i among
    the valid ones (the same draw `randint` gives), and the last index when none is."""
    valid = np.asarray(valid, bool)
    key = jax.random.key(3)
    index = sample_valid(jnp.asarray(valid), key=key, batch_size=64)
    choice = np.asarray(jax.random.randint(key, (64,), 0, max(valid.sum(), 1)))
    expected = np.flatnonzero(valid)[choice] if valid.any() else np.full(64, valid.size - 1)
    np.testing.assert_array_equal(np.asarray(index), expected)
    assert index.dtype == jnp.int32


def test_add_and_sample_compile_once():
    buffer = ReplayBuffer(8, 2, truncation="bootstrap")

    @eqx.filter_jit
    @eqx.debug.assert_max_traces(max_traces=1)
    def add_jit(state, experience, terminated, truncated):
        return buffer.add(state, experience, terminated=terminated, truncated=truncated)

    @eqx.filter_jit
    @eqx.debug.assert_max_traces(max_traces=1)
    def sample_jit(state, key):
        return buffer.sample(state, key=key, batch_size=4)

    state = buffer.init(example())
    assert not np.asarray(sample_jit(state, jax.random.key(0)).mask).any()
    for time in range(7):
        state = add_jit(
            state,
            experience(time, [1.0, float(time)], [-1.0, 0.5]),
            jnp.array([time % 2 == 1, time == 4], jnp.bool_),
            jnp.array([False, time == 6], jnp.bool_),
        )
        sample_jit(state, jax.random.key(time))
    assert np.asarray(sample_jit(state, jax.random.key(9)).mask).all()


def test_add_inside_scan():
    # The trainer adds inside a scanned collection loop: the state must be a valid carry.
    buffer = ReplayBuffer(8, 2)
    state = buffer.init(example())
    steps = jax.tree.map(
        lambda *leaves: jnp.stack(leaves),
        *[experience(time, [float(time % 2), float(time)], [-1.0, -1.0]) for time in range(5)],
    )
    terminated = jnp.array([[False, False], [True, False]] * 2 + [[False, True]], jnp.bool_)

    def body(state, inputs):
        step, done = inputs
        return buffer.add(state, step, terminated=done, truncated=jnp.zeros_like(done)), None

    state, _ = jax.lax.scan(body, state, (steps, terminated))
    # Four slots per row, so t=4 overwrote t=0. Row 0: two won 2-ply games, then t=4 runs.
    # Row 1: rewards 0..4, one episode: 4, 3 - 4 = -1, 2 + 1 = 3, 1 - 3 = -2 (t=1..3).
    check_targets(state, [[_, 1, -1, 1], [4, -2, 3, -1]])


def test_configuration_is_validated():
    with pytest.raises(ValueError, match="capacity must be a positive int, got 0"):
        ReplayBuffer(0, 1)
    with pytest.raises(ValueError, match="num_envs must be a positive int, got True"):
        ReplayBuffer(4, True)
    with pytest.raises(ValueError, match="multiple of num_envs=4.*got 10; e.g. 8 or 12"):
        ReplayBuffer(10, 4)
    with pytest.raises(ValueError, match="truncation must be one of .*got 'ignore'"):
        ReplayBuffer(4, 2, truncation="ignore")
    buffer = ReplayBuffer(4, 2)
    state = buffer.init(example())
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        buffer.sample(state, key=jax.random.key(0), batch_size=0)
    with pytest.raises(ValueError, match=r"Experience.reward must have shape \(2,\)"):
        buffer.add(
            state,
            experience(0, [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]),
            terminated=jnp.zeros(3, jnp.bool_),
            truncated=jnp.zeros(3, jnp.bool_),
        )


# --- Property test against a pure-Python reference -----------------------------------------


def reference(num_envs, slots, truncation, history):
    """Backward recursion over whole episodes, then keep the last `slots` steps per row.

    `history[t][row] = (reward, discount, root_value, terminated, truncated)`. Returns
    `(target, has_target, pending)` as nested lists indexed `[row][slot]`.
    """
    target = [[0.0] * slots for _ in range(num_envs)]
    has_target = [[False] * slots for _ in range(num_envs)]
    pending = [[False] * slots for _ in range(num_envs)]
    for row in range(num_envs):
        steps = [history[time][row] for time in range(len(history))]
        targets = [None] * len(steps)
        start = 0
        for time, (reward, _, root_value, terminated, truncated) in enumerate(steps):
            if not (terminated or truncated):
                continue
            if terminated:
                value = reward
            elif truncation == "bootstrap":
                value = root_value
            else:
                value = None
            if value is not None:
                targets[time] = value
                for earlier in reversed(range(start, time)):
                    value = steps[earlier][0] + steps[earlier][1] * value
                    targets[earlier] = value
            start = time + 1
        for time in range(max(0, len(steps) - slots), len(steps)):
            slot = time % slots
            if targets[time] is not None:
                target[row][slot] = targets[time]
                has_target[row][slot] = True
            pending[row][slot] = time >= start
    return target, has_target, pending


_add_jit = eqx.filter_jit(
    lambda buffer, state, step, terminated, truncated: buffer.add(
        state, step, terminated=terminated, truncated=truncated
    )
)
_sample_jit = eqx.filter_jit(
    lambda buffer, state, key: buffer.sample(state, key=key, batch_size=16)
)


def _histories(num_envs):
    step = st.tuples(
        st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.0]),
        st.sampled_from([-1.0, 1.0, -0.9, 0.9, 0.5, 0.0]),
        st.sampled_from([-0.5, 0.0, 0.25, 1.0]),
        # Episode ends are rarer than steps: none, none, none, terminated, truncated, both.
        st.sampled_from([0, 0, 0, 1, 2, 3]),
    ).map(lambda s: (s[0], s[1], s[2], s[3] in (1, 3), s[3] in (2, 3)))
    return st.lists(st.lists(step, min_size=num_envs, max_size=num_envs), max_size=14)


@pytest.mark.parametrize(
    "num_envs, slots, truncation", [(3, 4, "drop"), (3, 4, "bootstrap"), (2, 1, "bootstrap")]
)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_matches_reference(num_envs, slots, truncation, data):
    history = data.draw(_histories(num_envs))
    buffer = ReplayBuffer(num_envs * slots, num_envs, truncation=truncation)
    state = buffer.init(example())
    for time, steps in enumerate(history):
        reward, discount, root_value, terminated, truncated = zip(*steps)
        state = _add_jit(
            buffer,
            state,
            experience(time, reward, discount, root_value),
            jnp.array(terminated, jnp.bool_),
            jnp.array(truncated, jnp.bool_),
        )
    target, has_target, pending = reference(num_envs, slots, truncation, history)
    np.testing.assert_array_equal(np.asarray(state.has_target), has_target)
    np.testing.assert_array_equal(np.asarray(state.pending), pending)
    np.testing.assert_allclose(
        np.where(has_target, np.asarray(state.value_target), 0.0), target, rtol=1e-5, atol=1e-5
    )
    # Every sample marked valid is a step with a target, and carries that target.
    batch = _sample_jit(buffer, state, jax.random.key(len(history)))
    mask = np.asarray(batch.mask)
    assert mask.all() == any(map(any, has_target))
    assert mask.any() == mask.all()
    for valid, (row, time), value in zip(
        mask, np.asarray(batch.observation), np.asarray(batch.value_target)
    ):
        if valid:
            slot = int(time) % slots
            assert has_target[row][slot]
            np.testing.assert_allclose(value, target[row][slot], rtol=1e-5, atol=1e-5)
