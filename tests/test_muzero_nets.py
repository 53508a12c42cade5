"""MuZero's networks and value transform: `h` and its inverse, the two-hot projection
against a NumPy reference, and the networks' shapes and embedding range."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import azx.muzero as mz


def test_scaling_round_trips_and_matches_its_formula():
    x = jnp.concatenate([jnp.linspace(-1000.0, 1000.0, 2001), jnp.array([0.0, 1e-3, -0.5])])
    y = mz.scale_value(x)
    x64 = np.asarray(x, np.float64)
    expected = np.sign(x64) * (np.sqrt(np.abs(x64) + 1) - 1) + 1e-3 * x64
    np.testing.assert_allclose(np.asarray(y), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(mz.unscale_value(y)), x64, rtol=1e-4, atol=1e-3)
    # Near 0 the inverse keeps float32's relative precision (h^-1(y) ~ 2 y / (1 + 2 eps)).
    small = jnp.array([1e-7, -3e-6, 2e-4, -1e-2], jnp.float32)
    small64 = np.asarray(small, np.float64)
    eps = mz.SCALING_EPSILON
    root64 = (np.sqrt(1 + 4 * eps * (np.abs(small64) + 1 + eps)) - 1) / (2 * eps)
    np.testing.assert_allclose(
        np.asarray(mz.unscale_value(small)), np.sign(small64) * (root64**2 - 1), rtol=1e-5
    )
    np.testing.assert_allclose(
        np.asarray(mz.unscale_value(mz.scale_value(small))), small64, rtol=1e-5
    )
    # h is odd and increasing, and shrinks large values to about their square root.
    assert np.all(np.diff(np.asarray(y)[:2001]) > 0)
    assert abs(float(mz.scale_value(jnp.float32(100.0))) - (np.sqrt(101) - 1 + 0.1)) < 1e-5


def _two_hot_reference(x, support_size):
    """Two-hot by loops: mass on the atoms below and above in proportion to closeness."""
    x = np.clip(np.asarray(x, np.float64), -support_size, support_size)
    out = np.zeros(x.shape + (2 * support_size + 1,))
    for index, value in np.ndenumerate(x):
        low = int(np.floor(value))
        frac = value - low
        out[index + (low + support_size,)] += 1 - frac
        if frac > 0:
            out[index + (low + support_size + 1,)] += frac
    return out


@pytest.mark.parametrize("support_size", [1, 5, 20])
def test_two_hot_matches_numpy_reference_and_inverts(support_size):
    rng = np.random.default_rng(support_size)
    x = rng.uniform(-support_size - 3, support_size + 3, size=(7, 11)).astype(np.float32)
    x[0, :4] = [-support_size, support_size, 0.0, 1.0]  # atoms exactly, and the ends
    probabilities = mz.two_hot(jnp.asarray(x), support_size)
    assert probabilities.shape == (7, 11, 2 * support_size + 1)
    np.testing.assert_allclose(
        np.asarray(probabilities), _two_hot_reference(x, support_size), atol=1e-6
    )
    np.testing.assert_allclose(np.asarray(probabilities).sum(-1), 1.0, atol=1e-6)
    mean = mz.expected_value(probabilities, support_size)
    np.testing.assert_allclose(np.asarray(mean), np.clip(x, -support_size, support_size), atol=1e-5)
    # The mean is exactly odd: the mirrored distribution's is its negation, and a
    # symmetric distribution's (the softmax of equal logits) is exactly 0.
    logits = jax.random.normal(jax.random.key(support_size), (5, 2 * support_size + 1))
    probabilities = jax.nn.softmax(logits)
    np.testing.assert_array_equal(
        np.asarray(mz.expected_value(jnp.flip(probabilities, -1), support_size)),
        -np.asarray(mz.expected_value(probabilities, support_size)),
    )
    uniform = jax.nn.softmax(jnp.zeros(2 * support_size + 1))
    assert float(mz.expected_value(uniform, support_size)) == 0.0


def test_support_and_bad_sizes():
    np.testing.assert_array_equal(np.asarray(mz.support(2)), [-2, -1, 0, 1, 2])
    with pytest.raises(ValueError, match="support_size must be a positive int, got 0"):
        mz.two_hot(jnp.zeros(3), 0)
    with pytest.raises(ValueError, match="must have 7 bins"):
        mz.expected_value(jnp.ones((2, 5)) / 5, 3)


@pytest.mark.parametrize("support_size", [None, 10])
def test_networks_shapes_and_embedding_range(support_size):
    observation_shape, num_actions, embedding_size = (3, 4), 5, 16
    net = mz.mlp_net(
        observation_shape,
        num_actions,
        embedding_size=embedding_size,
        width=32,
        support_size=support_size,
        key=jax.random.key(0),
    )
    bins = 1 if support_size is None else 2 * support_size + 1
    assert net.bins == bins
    observations = jax.random.normal(jax.random.key(1), (6,) + observation_shape)
    embedding = jax.vmap(net.represent)(observations)
    assert embedding.shape == (6, embedding_size)
    actions = jnp.arange(6, dtype=jnp.int32) % num_actions
    reward_head, next_embedding = jax.vmap(net.dynamics)(embedding, actions)
    assert reward_head.shape == (6, bins) and next_embedding.shape == (6, embedding_size)
    logits, value_head = jax.vmap(net.prediction)(next_embedding)
    assert logits.shape == (6, num_actions) and value_head.shape == (6, bins)
    reward, stepped = jax.vmap(net.step)(embedding, actions)
    logits2, value = jax.vmap(net.predict)(stepped)
    assert reward.shape == (6,) and value.shape == (6,)
    np.testing.assert_array_equal(np.asarray(stepped), np.asarray(next_embedding))
    np.testing.assert_array_equal(np.asarray(logits2), np.asarray(logits))
    # Every embedding spans exactly [0, 1] (min-max normalisation per example).
    for e in (embedding, next_embedding):
        np.testing.assert_allclose(np.asarray(e.min(-1)), 0.0, atol=1e-6)
        np.testing.assert_allclose(np.asarray(e.max(-1)), 1.0, atol=1e-6)
    # The scalar read of a categorical head is h^-1 of its mean.
    if support_size is not None:
        expected = mz.unscale_value(mz.expected_value(jax.nn.softmax(value_head), support_size))
        np.testing.assert_allclose(np.asarray(value), np.asarray(expected), rtol=1e-6)
    else:
        np.testing.assert_array_equal(np.asarray(value), np.asarray(value_head[:, 0]))
    with pytest.raises(ValueError, match="batch with jax.vmap"):
        net.represent(observations)


@pytest.mark.parametrize("support_size", [None, 4])
def test_residual_networks_shapes_and_embedding_range(support_size):
    observation_shape, num_actions = (4, 5, 3), 6
    net = mz.resnet_net(
        observation_shape,
        num_actions,
        channels=8,
        num_blocks=1,
        support_size=support_size,
        key=jax.random.key(0),
    )
    bins = 1 if support_size is None else 2 * support_size + 1
    observations = jax.random.normal(jax.random.key(1), (3,) + observation_shape)
    embedding = jax.vmap(net.represent)(observations)
    assert embedding.shape == (3, 8, 4, 5)  # channels, then the image's height and width
    actions = jnp.array([0, 2, 5], jnp.int32)
    reward_head, next_embedding = jax.vmap(net.dynamics)(embedding, actions)
    assert reward_head.shape == (3, bins) and next_embedding.shape == embedding.shape
    logits, value_head = jax.vmap(net.prediction)(next_embedding)
    assert logits.shape == (3, num_actions) and value_head.shape == (3, bins)
    for e in (embedding, next_embedding):
        flat = np.asarray(e).reshape(3, -1)
        np.testing.assert_allclose(flat.min(-1), 0.0, atol=1e-6)
        np.testing.assert_allclose(flat.max(-1), 1.0, atol=1e-6)
    # The action matters to the dynamics: different actions, different next embeddings.
    other = jax.vmap(net.dynamics)(embedding, (actions + 1) % num_actions)[1]
    assert not np.allclose(np.asarray(other), np.asarray(next_embedding))
    with pytest.raises(ValueError, match="batch with jax.vmap"):
        net.represent(observations)


@pytest.mark.parametrize("network", ["mlp", "resnet"])
def test_zero_heads_start_uniform_and_change_nothing_else(network):
    observation_shape, num_actions, support_size = (4, 5, 3), 6, 4
    factory, sizes = {
        "mlp": (mz.mlp_net, {"width": 16}),
        "resnet": (mz.resnet_net, {"channels": 8}),
    }[network]

    def make(**kw):
        return factory(observation_shape, num_actions, **sizes, **kw)

    plain = make(support_size=support_size, key=jax.random.key(0))
    zeroed = make(support_size=support_size, zero_heads=True, key=jax.random.key(0))
    # The same weights as without the option, but for the three heads' last layers.
    plain_leaves, zeroed_leaves = jax.tree.leaves(plain), jax.tree.leaves(zeroed)
    changed = [not np.array_equal(a, b) for a, b in zip(plain_leaves, zeroed_leaves)]
    assert sum(changed) == 6  # weight and bias of the policy, value and reward heads
    assert all(not np.any(np.asarray(b)) for b, c in zip(zeroed_leaves, changed) if c)
    # In every state: a uniform policy, and a value and reward of exactly 0.
    observations = jax.random.normal(jax.random.key(1), (5,) + observation_shape)
    embedding = jax.vmap(zeroed.represent)(observations)
    np.testing.assert_array_equal(
        np.asarray(embedding), np.asarray(jax.vmap(plain.represent)(observations))
    )
    actions = jnp.arange(5, dtype=jnp.int32)
    reward, child = jax.vmap(zeroed.step)(embedding, actions)
    for state in (embedding, child):
        logits, value = jax.vmap(zeroed.predict)(state)
        np.testing.assert_array_equal(np.asarray(logits), 0.0)
        np.testing.assert_array_equal(np.asarray(value), 0.0)
    np.testing.assert_array_equal(np.asarray(reward), 0.0)
    with pytest.raises(TypeError, match="parameter 'zero_heads'"):
        make(zero_heads="yes", key=jax.random.key(0))
