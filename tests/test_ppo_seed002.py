"""The recurrent PPO as seed 002 configures it: the network's initial weights against the
initialisers of the seed's flax network (formulas and invariants), the grid encoder
against a 2x2 convolution in NumPy, the default initialisation unchanged bit for bit, and
the `ppo_minigrid_seed002` preset against the seed's configuration."""

import hashlib
import pathlib
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import azx


# `pytest` puts tests/ on the path, not the repository root with the benchmarks package.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from benchmarks import seed002  # noqa: E402


def _net(**options):
    defaults = dict(hidden_size=16, head_size=16, key=jax.random.key(3))
    return azx.nets.RecurrentActorCritic((7, 7, 2), 6, **(defaults | options))


def _digest(tree) -> str:
    digest = hashlib.sha256()
    for leaf in jax.tree.leaves(eqx.filter(tree, eqx.is_array)):
        array = np.asarray(leaf)
        digest.update(f"{array.dtype}{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()[:16]


def test_default_initialisation_is_unchanged_bit_for_bit():
    # Before `action_embedding_init` existed, the previous action's embedding was
    # Equinox's own `Embedding` on the constructor's second key; the default still is, bit
    # for bit, and naming the default changes nothing. (A recorded hash of the weights
    # would not do: XLA's CPU code for the random draws differs between processors.)
    default = _net()
    key = jax.random.split(jax.random.key(3), 4 + 1)[1]  # 4 + num_layers keys; the second
    reference = eqx.nn.Embedding(6, 16, key=key)
    np.testing.assert_array_equal(default.action_embedding.weight, reference.weight)
    assert _digest(_net(action_embedding_init="standard_normal")) == _digest(default)


@pytest.mark.parametrize(
    ("init", "std"), [("standard_normal", 1.0), ("fan_in_normal", 1 / np.sqrt(400))]
)
def test_action_embedding_starts_at_the_formula_scale(init, std):
    # 500 x 400 draws: the sample standard deviation is within 1% of the formula's with
    # overwhelming probability (its relative standard error is 1 / sqrt(2 * 200000)).
    net = azx.nets.RecurrentActorCritic(
        (3,),
        500,
        hidden_size=4,
        head_size=4,
        action_embedding_size=400,
        action_embedding_init=init,
        key=jax.random.key(0),
    )
    weight = np.asarray(net.action_embedding.weight, np.float64)
    assert weight.shape == (500, 400)
    assert abs(weight.std() / std - 1) < 0.01
    assert abs(weight.mean()) < 0.01 * std
    # Gaussian, not truncated: a fourth moment of 3 standard deviations^4 (a normal
    # truncated at two standard deviations, as lecun_normal draws, has about 2.4).
    assert abs(np.mean((weight / weight.std()) ** 4) - 3.0) < 0.1


def test_the_two_embedding_initialisations_differ_only_in_the_embedding():
    standard, fan_in = _net(), _net(action_embedding_init="fan_in_normal")
    # The same draw, scaled: flax's variance 1 / features is 1 / 16 here.
    np.testing.assert_allclose(
        fan_in.action_embedding.weight, standard.action_embedding.weight / 4.0, rtol=1e-6
    )
    rest = lambda net: eqx.tree_at(lambda n: n.action_embedding, net, None)  # noqa: E731
    assert _digest(rest(standard)) == _digest(rest(fan_in))


def test_unknown_action_embedding_init_is_refused_by_name():
    allowed = "'standard_normal', 'fan_in_normal'"
    with pytest.raises(
        ValueError, match=f"action_embedding_init must be one of {allowed}, got 'flax'"
    ):
        _net(action_embedding_init="flax")


def test_every_layer_starts_as_in_the_seed_flax_network():
    """Seed 002's initialisers, as invariants of the weights: orthogonal convolutions of
    gain sqrt(2), a Glorot-normal GRU input weight and an orthogonal recurrent one,
    orthogonal heads of gain 2 then 0.01 (policy) or 1 (value), every bias zero."""
    net = _net(action_embedding_init="fan_in_normal")

    def orthogonal(weight, gain):
        w = np.asarray(weight, np.float64)
        gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
        np.testing.assert_allclose(gram, gain**2 * np.eye(len(gram)), atol=1e-5 * max(gain, 1))

    for layer in net.encoder.layers:
        orthogonal(layer.weight, np.sqrt(2))
        assert not np.any(layer.bias)
    for head, gain in ((net.policy_head, 0.01), (net.value_head, 1.0)):
        orthogonal(head.hidden.weight, 2.0)
        orthogonal(head.out.weight, gain)
        assert not np.any(head.hidden.bias) and not np.any(head.out.bias)
    (cell,) = net.cells
    orthogonal(cell.weight_hh, 1.0)  # (48, 16): orthonormal columns
    assert cell.weight_ih.shape == (48, 64 * 4 * 4 + 16 + 1)  # 7x7 grid -> 4x4x64
    fan_in, fan_out = cell.weight_ih.shape[1], cell.weight_ih.shape[0]
    glorot = np.sqrt(2 / (fan_in + fan_out))
    assert abs(np.std(np.asarray(cell.weight_ih)) / glorot - 1) < 0.02  # 49,968 draws
    assert np.abs(np.asarray(cell.weight_ih)).max() <= 2 * glorot * 1.14  # truncated at 2σ
    assert not np.any(cell.bias) and not np.any(cell.bias_n)


def test_grid_encoder_is_three_2x2_convolutions_in_numpy():
    # Seed 002's encoder: nn.Conv(16 | 32 | 64, (2, 2), padding="VALID") with ReLUs, on
    # the (H, W, C) grid; azx writes each as a dense layer over 2x2 patches.
    net = _net()
    observation = jax.random.randint(jax.random.key(1), (7, 7, 2), 0, 12).astype(jnp.float32)
    x = np.asarray(observation, np.float64)
    for layer in net.encoder.layers:
        w = np.asarray(layer.weight, np.float64).T  # (4 * in, out), patches (0,0) (0,1) (1,0) (1,1)
        kernel = w.reshape(2, 2, x.shape[-1], -1)
        height, width = x.shape[0] - 1, x.shape[1] - 1
        out = np.zeros((height, width, kernel.shape[-1]))
        for i in range(height):
            for j in range(width):
                out[i, j] = np.einsum("abc,abco->o", x[i : i + 2, j : j + 2], kernel)
        x = np.maximum(out + np.asarray(layer.bias, np.float64), 0.0)
    features = eqx.filter_jit(net.encoder)(observation)
    assert features.shape == (4 * 4 * 64,)
    np.testing.assert_allclose(features, x.reshape(-1), rtol=1e-5, atol=1e-4)


def test_seed002_preset_is_the_seed_configuration():
    preset = azx.presets.get("ppo_minigrid_seed002")
    config = preset.config
    # TrainConfig of seed 002 at its small size: 64 envs x 16 steps, 1 epoch x 16
    # minibatches, lr 1e-3 annealed over 1e5 // 16 // 64 updates, Adam eps 1e-8.
    assert (config.num_envs, config.rollout_length) == (64, 16)
    assert (config.num_epochs, config.num_minibatches) == (1, 16)
    assert preset.iterations == config.anneal_iterations == 100_000 // 16 // 64
    assert (config.learning_rate, config.adam_eps, config.max_grad_norm) == (1e-3, 1e-8, 0.5)
    assert (config.gamma, config.gae_lambda, config.clip_eps, config.value_clip_eps) == (
        0.99,
        0.95,
        0.2,
        0.2,
    )
    assert (config.entropy_coef, config.value_coef) == (0.01, 0.5)
    assert config.normalize_advantages == "minibatch" and config.truncation == "terminate"
    trainer, state = preset.build(seed=0)
    net = state.net
    assert not net.reset_at_episode_start and len(net.cells) == 1
    assert net.hidden_size == 16 and net.policy_head.hidden.out_features == 16
    assert net.action_embedding.weight.shape == (trainer.env.num_actions, 16)
    assert net.action_embedding_init == "fan_in_normal"


def test_the_reimplementation_runs_the_preset_configuration():
    # benchmarks.ppo times azx's preset against seed002.py's iteration: the same sizes.
    config = azx.presets.get("ppo_minigrid_seed002").config
    assert (seed002.NUM_ENVS, seed002.NUM_STEPS) == (config.num_envs, config.rollout_length)
    assert seed002.NUM_MINIBATCHES == config.num_minibatches and config.num_epochs == 1
    assert seed002.ITERATIONS == config.anneal_iterations
    assert (seed002.LEARNING_RATE, seed002.ADAM_EPS) == (config.learning_rate, config.adam_eps)
    assert (seed002.HIDDEN, seed002.HEAD) == (16, 16)


def _reference_params(net):
    """azx's weights in the layout of benchmarks/seed002.py (flax's: kernels [in, out])."""
    conv = []
    for layer in net.encoder.layers:
        channels_in = layer.weight.shape[1] // 4
        kernel = layer.weight.T.reshape(2, 2, channels_in, -1)  # patches (0,0) (0,1) (1,0) (1,1)
        conv.append((kernel, layer.bias))
    (cell,) = net.cells

    def head(h):
        return ((h.hidden.weight.T, h.hidden.bias), (h.out.weight.T, h.out.bias))

    return {
        "conv": conv,
        "embedding": net.action_embedding.weight,
        "gru": {"wi": cell.weight_ih, "wh": cell.weight_hh, "bi": cell.bias, "bn": cell.bias_n},
        "actor": head(net.policy_head),
        "critic": head(net.value_head),
    }


def test_network_is_the_seed_network_written_independently():
    # benchmarks/seed002.py writes the seed's network from its description (convolutions
    # as XLA's, checked there); with the same weights it gives azx's logits and values
    # over a sequence that crosses an episode boundary without resetting the memory.
    net = _net(reset_at_episode_start=False, action_embedding_init="fan_in_normal")
    leaves, treedef = jax.tree.flatten(net)
    keys = jax.random.split(jax.random.key(1), len(leaves))
    # Non-zero biases too, so that every term is exercised.
    leaves = [
        leaf + 0.1 * jax.random.normal(k, leaf.shape) if eqx.is_inexact_array(leaf) else leaf
        for leaf, k in zip(leaves, keys)
    ]
    net = jax.tree.unflatten(treedef, leaves)
    keys = jax.random.split(jax.random.key(2), 4)
    steps = 6
    inputs = azx.nets.RecurrentInput(
        observation=jax.random.randint(keys[0], (steps, 7, 7, 2), 0, 11).astype(jnp.uint8),
        previous_action=jax.random.randint(keys[1], (steps,), 0, 6),
        previous_reward=jax.random.uniform(keys[2], (steps,)),
        episode_start=jnp.arange(steps) == 3,
    )
    carry = jax.random.normal(keys[3], (1, 16))
    _, (logits, values) = eqx.filter_jit(
        lambda net, c, x: jax.lax.scan(lambda c, x: net(c, x), c, x)
    )(net, carry, inputs)
    # The benchmark is written with NumPy's broadcasting, which the test suite refuses.
    with jax.numpy_rank_promotion("allow"), jax.numpy_dtype_promotion("standard"):
        expected_logits, expected_values, _ = seed002.unroll(
            _reference_params(net),
            carry[0],
            inputs.observation,
            inputs.previous_action,
            inputs.previous_reward,
        )
    np.testing.assert_allclose(logits, expected_logits, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(values, expected_values, rtol=1e-4, atol=1e-5)
