"""Policy-value networks on every game of the foundation issue."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _tiers import slow_repeats

import azx.envs
import azx.nets


GAMES = ["tic_tac_toe", "connect_four", "othello", "go_9x9", "2048", "backgammon"]


@eqx.filter_jit
def _networks(env, key):
    mlp_key, resnet_key = jax.random.split(key)
    return [
        azx.nets.MLP(env.observation_shape, env.num_actions, width=32, depth=2, key=mlp_key),
        azx.nets.AlphaZeroResNet(
            env.observation_shape,
            env.num_actions,
            channels=8,
            num_blocks=1,
            value_hidden=16,
            norm_groups=4,
            key=resnet_key,
        ),
    ]


@eqx.filter_jit
def _batched_call(net, observation):
    return jax.vmap(net)(observation)


@eqx.filter_jit
def _gradients(net, observation, target_policy, target_value):
    def loss(net):
        logits, value = jax.vmap(net)(observation)
        policy_loss = -jnp.sum(target_policy * jax.nn.log_softmax(logits), axis=-1)
        return jnp.mean(policy_loss + (value - target_value) ** 2)

    return eqx.filter_grad(loss)(net)


@eqx.filter_jit
def _observations(env, key):
    """Observations a few moves into four games (empty boards give zero inputs)."""
    states = jax.vmap(env.init)(jax.random.split(key, 4))
    for step_key in jax.random.split(key, 2):
        action = jax.vmap(jnp.argmax)(jax.vmap(env.legal_action_mask)(states))
        states = jax.vmap(env.step)(states, action, jax.random.split(step_key, 4))
    return jax.vmap(env.observation)(states)


# The default run checks a board of planes (tic-tac-toe) and a flat vector (backgammon);
# the slow tier adds the other games.
@pytest.mark.parametrize("name", slow_repeats(GAMES, {"connect_four", "othello", "go_9x9", "2048"}))
def test_shapes_dtypes_and_gradients(name):
    env = azx.envs.make(name)
    observation = _observations(env, jax.random.key(0))
    for net in _networks(env, jax.random.key(1)):
        logits, value = _batched_call(net, observation)
        assert logits.shape == (4, env.num_actions) and logits.dtype == jnp.float32
        assert value.shape == (4,) and value.dtype == jnp.float32
        assert bool(jnp.all(jnp.abs(value) <= 1.0))
        # One observation in, one output out, exactly as the batched call computes it.
        single_logits, single_value = eqx.filter_jit(net)(observation[0])
        np.testing.assert_allclose(single_logits, logits[0], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(single_value, value[0], rtol=1e-5, atol=1e-5)

        target_policy = jax.nn.one_hot(jnp.zeros(4, jnp.int32), env.num_actions)
        grads = _gradients(net, observation, target_policy, jnp.ones(4, jnp.float32))
        leaves = jax.tree.leaves(eqx.filter(grads, eqx.is_array))
        assert leaves and all(bool(jnp.all(jnp.isfinite(g))) for g in leaves)
        # Every parameter array of the network receives some gradient.
        assert all(float(jnp.max(jnp.abs(g))) > 0.0 for g in leaves), type(net).__name__


@pytest.mark.parametrize("cls", [azx.nets.MLP, azx.nets.AlphaZeroResNet])
def test_unbounded_value_is_the_same_network_before_tanh(cls):
    env = azx.envs.make("2048")
    kwargs = {"channels": 8, "num_blocks": 1, "norm_groups": 4} if cls is not azx.nets.MLP else {}
    bounded = cls(env.observation_shape, env.num_actions, key=jax.random.key(3), **kwargs)
    unbounded = cls(
        env.observation_shape,
        env.num_actions,
        bounded_value=False,
        key=jax.random.key(3),
        **kwargs,
    )
    observation = env.observation(env.init(jax.random.key(0)))
    # Scale the value layer up so that tanh visibly saturates.
    big = eqx.tree_at(
        lambda n: n.value_head.weight if cls is azx.nets.MLP else n.value_linear.weight,
        unbounded,
        replace_fn=lambda w: 100.0 * w,
    )
    raw = big(observation)[1]
    assert float(jnp.abs(raw)) > 1.0
    np.testing.assert_allclose(
        jnp.tanh(unbounded(observation)[1]), bounded(observation)[1], rtol=1e-6
    )


def test_resnet_depth_and_width_are_configurable():
    env = azx.envs.make("connect_four")
    net = azx.nets.AlphaZeroResNet(
        env.observation_shape, env.num_actions, channels=16, num_blocks=3, key=jax.random.key(0)
    )
    assert len(net.blocks) == 3 and net.stem.conv.out_channels == 16
    mlp = azx.nets.MLP(
        env.observation_shape, env.num_actions, width=64, depth=3, key=jax.random.key(0)
    )
    assert len(mlp.trunk.layers) == 3 and mlp.policy_head.in_features == 64


# The default run checks a board; the slow tier adds the largest board and a vector.
@pytest.mark.parametrize(
    "shape",
    [
        pytest.param((8, 8, 2), marks=pytest.mark.slow),
        (6, 7, 2),
        pytest.param((9,), marks=pytest.mark.slow),
    ],
)
def test_resnet_convolutions_as_matrix_products_match_lax_conv(shape):
    # The same parameters through both ways of convolving: the same logits and value, on
    # square and non-square boards and on a feature strip, and the same gradients.
    def build(as_matmul):
        return azx.nets.AlphaZeroResNet(
            shape, 5, channels=8, num_blocks=2, conv_as_matmul=as_matmul, key=jax.random.key(0)
        )

    observations = jax.random.normal(jax.random.key(1), (4, *shape))
    lax_net, matmul_net = build(False), build(True)
    for a, b in zip(jax.tree.leaves(lax_net), jax.tree.leaves(matmul_net), strict=True):
        np.testing.assert_array_equal(a, b)
    lax_out, matmul_out = jax.vmap(lax_net)(observations), jax.vmap(matmul_net)(observations)
    for a, b in zip(lax_out, matmul_out, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)

    def loss(net):
        logits, value = jax.vmap(net)(observations)
        return jnp.sum(jax.nn.log_softmax(logits)[:, 0]) + jnp.sum(value)

    lax_grads = eqx.filter_grad(loss)(lax_net)
    matmul_grads = eqx.filter_grad(loss)(matmul_net)
    for a, b in zip(jax.tree.leaves(lax_grads), jax.tree.leaves(matmul_grads), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)


def test_uniform_policy():
    net = azx.nets.UniformPolicy(7)
    logits, value = net(jnp.zeros((6, 7, 2), jnp.bool_))
    np.testing.assert_array_equal(logits, np.zeros(7))
    assert float(value) == 0.0


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda k: azx.nets.MLP((3, 3, 2), 0, key=k), "num_actions must be a positive int, got 0"),
        (lambda k: azx.nets.MLP((3, 3, 2), 9, width=-1, key=k), "width must be .* got -1"),
        (lambda k: azx.nets.MLP((3, 3, 2), 9, depth=0, key=k), "depth must be .* got 0"),
        (lambda k: azx.nets.MLP((), 9, key=k), "observation_shape must be a non-empty tuple"),
        (lambda k: azx.nets.MLP((3, 0), 9, key=k), r"observation_shape .* got \(3, 0\)"),
        (
            lambda k: azx.nets.AlphaZeroResNet((6, 7, 2), 7, channels=12, norm_groups=8, key=k),
            r"norm_groups \(8\) must divide channels \(12\)",
        ),
        (
            lambda k: azx.nets.AlphaZeroResNet((6, 7, 2), 7, num_blocks=-1, key=k),
            "num_blocks must be a non-negative int, got -1",
        ),
        (
            lambda k: azx.nets.AlphaZeroResNet((2, 2, 2, 2), 7, key=k),
            r"rank 1, 2 or 3 .* got shape \(2, 2, 2, 2\)",
        ),
        (lambda k: azx.nets.UniformPolicy(0), "num_actions must be a positive int, got 0"),
    ],
)
def test_bad_constructor_arguments(build, message):
    with pytest.raises(ValueError, match=message):
        build(jax.random.key(0))


def test_key_is_keyword_only():
    with pytest.raises(TypeError):
        azx.nets.MLP((3, 3, 2), 9, 32, 2, True, jax.random.key(0))


def test_batched_input_to_a_single_example_network_is_rejected():
    net = azx.nets.MLP((3, 3, 2), 9, key=jax.random.key(0))
    with pytest.raises(ValueError, match=r"one observation of shape \(3, 3, 2\).*jax.vmap"):
        net(jnp.zeros((8, 3, 3, 2), jnp.float32))
