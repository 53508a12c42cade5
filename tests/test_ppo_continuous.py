"""PPO with continuous actions and PPO's optional settings, against independent
references: the action distributions' log-densities and entropies against SciPy (the
tanh-squashed Normal's by numerical integration, also near the bounds), a rollout's
log-probabilities recomputed by the learner, a four-device mesh against one device, a
resumed run against a straight one, and each optional setting against what it promises."""

import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
import scipy.stats
from _four_devices import run_script
from _games import Countdown
from _tiers import slow_repeats

import azx


@pytest.fixture(scope="module")
def pendulum():
    return azx.envs.make("gymnax:Pendulum-v1")


def _outputs(mean, log_std):
    return jnp.asarray(np.concatenate([mean, log_std]), jnp.float32)


# ----------------------------------------------------------------------------- distributions


def _tanh_normal_log_density(u, mean, std, low, high):
    """Float64 reference: the Normal's density at `u` over `|dy/du|` of
    `y = mid + half * tanh(u)`, with `log(1 - tanh(u)^2) = -2 log cosh(u)`."""
    half = (high - low) / 2
    return scipy.stats.norm.logpdf(u, mean, std) - np.log(half) + 2 * np.log(np.cosh(u))


@pytest.mark.parametrize(
    "mean, log_std",
    [(0.0, 0.0), (1.5, -1.0), (-3.0, 0.5), (6.0, -5.0), (0.3, 2.0), (-9.0, -3.0)],
)
def test_tanh_normal_log_density_and_entropy_match_scipy(mean, log_std):
    low, high = -2.0, 3.0
    distribution = azx.ppo.TanhNormal(low=(low,), high=(high,))
    std = float(np.exp(log_std))
    # Samples around the mean, and actions squashed to within float32 rounding of a bound.
    u = np.array([mean - 2 * std, mean, mean + 0.7 * std, mean + 3 * std, 8.5, -8.5, 11.0])
    outputs = jnp.broadcast_to(_outputs([mean], [log_std]), (u.size, 2))
    log_prob, entropy = distribution.log_prob_and_entropy(outputs, jnp.asarray(u[:, None]))
    expected = _tanh_normal_log_density(u, mean, std, low, high)
    assert np.all(np.isfinite(log_prob))
    np.testing.assert_allclose(log_prob, expected, rtol=1e-5, atol=1e-3)
    env_action = distribution.env_action(jnp.asarray(u[:, None], jnp.float32))
    assert np.all((low <= env_action) & (env_action <= high))

    def integrand(x):  # -log p(y) under the density of u (the entropy as an expectation)
        return -scipy.stats.norm.pdf(x, mean, std) * _tanh_normal_log_density(
            x, mean, std, low, high
        )

    reference = scipy.integrate.quad(integrand, mean - 12 * std, mean + 12 * std, limit=400)[0]
    # Gauss-Hermite quadrature: tight for narrow Normals, within 1.5% at the widest.
    if log_std <= 1.0:
        np.testing.assert_allclose(entropy[0], reference, atol=1e-3)
    else:
        np.testing.assert_allclose(entropy[0], reference, rtol=0.015)


def test_normal_and_beta_match_scipy():
    low, high = np.array([-1.0, 0.0]), np.array([2.0, 5.0])
    clipped = azx.ppo.ClippedNormal(low=tuple(low), high=tuple(high))
    mean, log_std = np.array([0.4, 7.0]), np.array([-0.5, 1.0])
    action = np.array([[0.1, 9.0], [3.0, -4.0]])
    outputs = jnp.broadcast_to(_outputs(mean, log_std), (2, 4))
    log_prob, entropy = clipped.log_prob_and_entropy(outputs, jnp.asarray(action, jnp.float32))
    norm = scipy.stats.norm(mean, np.exp(log_std))
    np.testing.assert_allclose(log_prob, norm.logpdf(action).sum(-1), rtol=1e-5)
    np.testing.assert_allclose(entropy, norm.entropy().sum(), rtol=1e-5)
    np.testing.assert_allclose(
        clipped.env_action(jnp.asarray(action)), np.clip(action, low, high), rtol=1e-6
    )

    beta = azx.ppo.Beta(low=tuple(low), high=tuple(high))
    raw = np.array([0.3, -2.0, 1.2, 0.0])  # alpha = 1 + softplus(raw[:2]), beta likewise
    shapes = 1 + np.log1p(np.exp(raw))
    # Within 1e-6 of the bounds too; the reference reads the float32 values the
    # distribution sees.
    x = np.array([[0.2, 0.9], [1e-6, 1 - 1e-6]], np.float32).astype(np.float64)
    outputs = jnp.broadcast_to(jnp.asarray(raw, jnp.float32), (2, 4))
    log_prob, entropy = beta.log_prob_and_entropy(outputs, jnp.asarray(x, jnp.float32))
    reference = scipy.stats.beta(shapes[:2], shapes[2:], loc=low, scale=high - low)
    np.testing.assert_allclose(
        log_prob, reference.logpdf(low + (high - low) * x).sum(-1), rtol=1e-4
    )
    np.testing.assert_allclose(entropy, reference.entropy().sum(), rtol=1e-5)
    np.testing.assert_allclose(beta.env_action(jnp.asarray(x)), low + (high - low) * x, rtol=1e-6)
    # Samples follow the Beta distribution (Kolmogorov-Smirnov, 4000 draws).
    keys = jax.random.split(jax.random.key(0), 4000)
    samples = jax.vmap(lambda k: beta.sample(outputs[0], beta.noise(k)))(keys)
    for i in range(2):
        dist = scipy.stats.beta(shapes[i], shapes[2 + i])
        assert scipy.stats.kstest(np.asarray(samples[:, i]), dist.cdf).pvalue > 1e-3


def test_log_std_bound_is_the_identity_within_its_range_and_bounded_beyond():
    bound = azx.ppo._distributions.bound_log_std
    low, high = azx.ppo._distributions.LOG_STD_RANGE
    inside = jnp.linspace(low, high, 1001)
    np.testing.assert_array_equal(bound(inside), inside)
    raw = jnp.linspace(-200.0, 200.0, 4001)
    bounded = np.asarray(bound(raw))
    assert np.all(bounded >= low - 1) and np.all(bounded <= high + 1)
    assert np.all(np.diff(bounded) >= 0)
    np.testing.assert_allclose(
        bound(jnp.array([low - 2, high + 2])),
        [low - 1 + np.exp(-2), high + 1 - np.exp(-2)],
        rtol=1e-6,
    )


@pytest.mark.parametrize("distribution", [azx.ppo.TanhNormal, azx.ppo.ClippedNormal])
@pytest.mark.parametrize("raw", [-4.0, -5.0, -5.5, -7.0, -12.0, 2.0, 2.5, 4.0])
def test_log_std_parameter_keeps_a_gradient_at_and_beyond_the_bound(distribution, raw):
    """The log-probability's derivative in the network's raw log-std parameter, by
    `jax.grad`, is nonzero at and beyond the bound and agrees with a central finite
    difference (a clip's derivative there is zero: such a policy could never widen
    again)."""
    dist = distribution(low=(-2.0,), high=(2.0,))
    net = azx.ppo.ContinuousActorCritic((3,), 1, hidden_sizes=(8,), key=jax.random.key(0))
    observation = jnp.array([0.3, -0.2, 0.5])
    mean = float(net.body(observation)[0][0])
    std = float(np.exp(azx.ppo._distributions.bound_log_std(jnp.float32(raw))))
    action = jnp.array([mean + 2.0 * std])  # (z^2 - 1) = 3: the density wants a wider std

    def log_prob(log_std):
        outputs, _ = eqx.tree_at(lambda n: n.log_std, net, log_std)(observation)
        return dist.log_prob_and_entropy(outputs, action)[0]

    gradient = float(jax.grad(log_prob)(jnp.array([raw]))[0])
    h = 0.05
    difference = (log_prob(jnp.array([raw + h])) - log_prob(jnp.array([raw - h]))) / (2 * h)
    assert gradient > 1e-4
    np.testing.assert_allclose(gradient, float(difference), rtol=2e-2)


def test_tanh_normal_samples_follow_the_normal_and_stay_in_bounds():
    distribution = azx.ppo.TanhNormal(low=(-2.0,), high=(2.0,))
    outputs = _outputs([0.5], [0.3])
    keys = jax.random.split(jax.random.key(1), 4000)
    u = jax.vmap(lambda k: distribution.sample(outputs, distribution.noise(k)))(keys)
    assert (
        scipy.stats.kstest(np.asarray(u[:, 0]), scipy.stats.norm(0.5, np.exp(0.3)).cdf).pvalue
        > 1e-3
    )
    y = distribution.env_action(u)
    assert np.all(np.abs(y) < 2.0)
    np.testing.assert_allclose(distribution.mode(outputs), [0.5])


# ----------------------------------------------------------------------------- training


def _continuous_trainer(env, distribution="tanh_normal", state_dependent_std=False, **config):
    defaults = dict(num_envs=8, rollout_length=12, num_epochs=2, num_minibatches=4)
    config = azx.ppo.Config(**(defaults | config), action_distribution=distribution)
    trainer = azx.ppo.PPO(env, config)
    net = azx.ppo.ContinuousActorCritic(
        env.observation_shape,
        env.num_actions,
        hidden_sizes=(16,),
        state_dependent_std=state_dependent_std,
        key=jax.random.key(0),
    )
    return trainer, trainer.init(net, key=jax.random.key(1))


@pytest.mark.parametrize(
    "distribution, state_dependent_std",
    # The slow tier repeats the check on the Beta.
    slow_repeats([("tanh_normal", False), ("beta", True), ("normal", True)], {("beta", True)}),
)
def test_first_minibatch_recomputes_the_rollout_log_probs(
    pendulum, distribution, state_dependent_std
):
    trainer, state = _continuous_trainer(
        pendulum, distribution, state_dependent_std, normalize_observations=True
    )

    @eqx.filter_jit
    def first_minibatch(state):
        state = trainer.train(state, 2)  # statistics and parameters that are not trivial
        state, rollout = trainer.rollout(state, jax.random.key(3))
        advantage, target = trainer.advantages(rollout)
        batches = trainer.minibatches(state, rollout, advantage, target, jax.random.key(4))
        first = jax.tree.map(lambda x: x[0], batches)
        outputs, value = trainer.policy_and_value(state.net, first, state.observation_stats)
        return (
            rollout,
            first,
            trainer.distribution.log_prob_and_entropy(outputs, first.action),
            value,
        )

    rollout, first, (log_prob, _), value = first_minibatch(state)
    np.testing.assert_allclose(log_prob, first.log_prob, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(value, first.value, rtol=1e-5, atol=1e-5)
    # The environment received actions within its bounds, and Pendulum's reward (at most 0,
    # at least -(pi^2 + 0.1 * 8^2 + 0.001 * 2^2)) says it ran.
    t = rollout.trajectory
    assert t.action.shape == (12, 8, 1) and t.action.dtype == jnp.float32
    assert np.all(np.asarray(t.reward) <= 0) and np.all(np.asarray(t.reward) >= -16.3)


# The slow tier: the default run resumes PPO exactly through `azx train --resume`
# (tests/test_cli_ppo.py) and restores a checkpoint in a fresh process
# (tests/test_checkpoint.py).
@pytest.mark.slow
def test_training_resumes_bit_for_bit_from_a_checkpoint(pendulum, tmp_path):
    trainer, state = _continuous_trainer(pendulum, normalize_observations=True)
    train = eqx.filter_jit(trainer.train)
    straight = train(state, 4)
    halfway = train(state, 2)
    checkpoints = azx.checkpoint.Checkpointer(tmp_path)
    checkpoints.save(halfway, step=2)
    resumed = train(checkpoints.restore(state, step=2), 2)
    leaves = [jax.tree.leaves(eqx.filter(s, eqx.is_array)) for s in (straight, resumed)]
    for a, b in zip(*leaves, strict=True):
        if jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
            a, b = jax.random.key_data(a), jax.random.key_data(b)
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(straight.params.log_std, state.params.log_std)


# The default run shards discrete PPO and AlphaZero over four devices (test_parallel); the
# slow tier repeats it with continuous actions, as with MuZero's.
@pytest.mark.slow
def test_four_devices_train_like_one():
    assert "SHARDED OK" in run_script("_sharded_continuous_run.py")


def test_equal_configurations_make_equal_trainers_that_compile_once(pendulum):
    first, first_state = _continuous_trainer(pendulum, critic_learning_rate=1e-3)
    second, second_state = _continuous_trainer(pendulum, critic_learning_rate=1e-3)
    assert first == second and hash(first) == hash(second)
    compilations = []

    def count(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compilations.append(event)

    jax.monitoring.register_event_duration_secs_listener(count)
    try:
        eqx.filter_jit(first.train)(first_state, 1)
        compiled = len(compilations)
        eqx.filter_jit(second.train)(second_state, 1)
    finally:
        jax.monitoring.unregister_event_duration_listener(count)
    assert compiled >= 1 and len(compilations) == compiled


# ----------------------------------------------------------------------------- settings


@pytest.mark.slow  # an option of the learner (a separate critic rate)
def test_critic_learning_rate_moves_only_the_critic_when_the_actor_rate_is_tiny(pendulum):
    for actor_rate, critic_rate, moving, still in [
        (1e-12, 1e-2, "value", "policy"),
        (1e-2, 1e-12, "policy", "value"),
    ]:
        trainer, state = _continuous_trainer(
            pendulum, learning_rate=actor_rate, critic_learning_rate=critic_rate
        )
        trained = eqx.filter_jit(trainer.train)(state, 1)

        def change(prefix, trained=trained, state=state):
            def part(params):
                body = params.body
                return (getattr(body, f"{prefix}_torso"), getattr(body, f"{prefix}_head"))

            moved = jax.tree.map(
                lambda a, b: float(jnp.max(jnp.abs(a - b))),
                part(trained.params),
                part(state.params),
            )
            return max(jax.tree.leaves(moved))

        assert change(moving) > 1e-3 and change(still) < 1e-8, (
            moving,
            change(moving),
            change(still),
        )
    with pytest.raises(ValueError, match="critic_learning_rate needs .* a shared torso"):
        trainer = azx.ppo.PPO(
            pendulum, azx.ppo.Config(critic_learning_rate=1e-3, action_distribution="tanh_normal")
        )
        trainer.init(
            azx.ppo.ContinuousActorCritic((3,), 1, shared_torso=True, key=jax.random.key(0)),
            key=jax.random.key(0),
        )


def test_without_an_entropy_bonus_the_entropy_is_measured_before_the_updates(pendulum):
    # A Normal with a state-independent log-std (initially 0) has entropy
    # 0.5 * log(2 pi e) whatever the observation; the updates then move the log-std.
    trainer, state = _continuous_trainer(pendulum, "normal", entropy_coef=0.0)
    state = eqx.filter_jit(trainer.step)(state, jax.random.key(2))
    np.testing.assert_allclose(state.metrics.entropy, 0.5 * np.log(2 * np.pi * np.e), rtol=1e-6)
    assert not np.array_equal(state.params.log_std, 0.0)


def test_reward_scale_scales_the_rewards_the_advantages_see():
    env = Countdown(max_length=6, limit=4)
    plain = azx.ppo.PPO(env, azx.ppo.Config(num_envs=4, rollout_length=8, num_minibatches=2))
    scaled = azx.ppo.PPO(env, eqx.tree_at(lambda c: c.reward_scale, plain.config, 0.25))
    net = azx.nets.ActorCritic((2,), 3, hidden_sizes=(8,), key=jax.random.key(0))
    state = plain.init(net, key=jax.random.key(1))
    _, rollout = eqx.filter_jit(plain.rollout)(state, jax.random.key(2))
    quartered = eqx.tree_at(
        lambda r: r.trajectory.reward, rollout, rollout.trajectory.reward * 0.25
    )
    for a, b in zip(scaled.advantages(rollout), plain.advantages(quartered)):
        np.testing.assert_array_equal(a, b)
    assert not np.allclose(scaled.advantages(rollout)[0], plain.advantages(rollout)[0])


def test_observation_warmup_gathers_statistics_of_the_initial_policy(pendulum):
    warmup = 5
    trainer, state = _continuous_trainer(
        pendulum, normalize_observations=True, observation_warmup_steps=warmup
    )
    _, cold = _continuous_trainer(pendulum, normalize_observations=True)
    # The same steps, played as a rollout of `warmup` steps from the cold start.
    short = azx.ppo.PPO(pendulum, eqx.tree_at(lambda c: c.rollout_length, trainer.config, warmup))
    played, rollout = short.rollout(cold, jax.random.fold_in(jax.random.key(1), 2**32 - 1))
    observations = np.asarray(rollout.trajectory.observation, np.float64).reshape(-1, 3)
    stats = state.observation_stats
    np.testing.assert_allclose(stats.count, 1e-4 + 8 * warmup, rtol=1e-6)
    # The prior (a zero mean, unit variance, weight 1e-4) shifts the moments by ~1e-5.
    np.testing.assert_allclose(stats.mean, observations.mean(0), atol=1e-4)
    np.testing.assert_allclose(stats.var, observations.var(0), rtol=1e-3, atol=1e-4)
    for a, b in zip(jax.tree.leaves(state.env_state), jax.tree.leaves(played.env_state)):
        np.testing.assert_array_equal(a, b)
    assert int(state.iteration) == 0


def test_kl_penalty_loss_matches_a_hand_computation():
    rng = np.random.default_rng(0)
    n = 6
    log_prob, old_log_prob = rng.normal(size=n) * 0.3, rng.normal(size=n) * 0.3
    advantage = rng.normal(size=n)
    arrays = [log_prob, old_log_prob, advantage, *(rng.normal(size=n) for _ in range(4))]
    weight = np.full(n, 1 / n)
    parts = azx.ppo.loss(
        *(jnp.asarray(x, jnp.float32) for x in (*arrays, weight)),
        clip_eps=0.2,
        value_clip_eps=None,
        value_coef=0.5,
        entropy_coef=0.01,
        kl_coef=3.0,
    )
    ratio = np.exp(log_prob - old_log_prob)
    kl = ratio - 1 - np.log(ratio)
    np.testing.assert_allclose(parts.policy_loss, np.mean(-ratio * advantage + 3.0 * kl), rtol=1e-5)
    np.testing.assert_allclose(parts.approx_kl, np.mean(kl), rtol=1e-5)


def test_ppo_pendulum_preset_builds_and_evaluates():
    preset = azx.presets.get("ppo_pendulum")
    assert preset.config.num_envs * preset.config.rollout_length * preset.iterations <= 1_000_000
    trainer, state = preset.build(seed=0)
    result = azx.ppo.evaluate(
        trainer.env,
        state.net,
        num_episodes=3,
        key=jax.random.key(0),
        greedy=True,
        observation_stats=state.observation_stats,
        action_distribution=preset.config.action_distribution,
    )
    # Pendulum-v1 runs 200 steps; every step's reward lies in [-16.3, 0].
    assert np.all(np.asarray(result.lengths) == 200) and bool(result.finished.all())
    assert np.all((-16.3 * 200 <= result.returns) & (result.returns <= 0))
    assert azx.presets.from_dict(preset.to_dict()) == preset


# Slow tier: the default run builds and evaluates the preset (above) and runs
# `azx train` and `azx eval` on PPO's discrete preset (test_cli_ppo.py).
@pytest.mark.slow
def test_azx_train_and_eval_run_the_pendulum_preset(tmp_path):
    from test_cli import _azx

    out = tmp_path / "pendulum"
    options = ["--preset", "ppo_pendulum", "--log-every", "1", "--eval-every", "1"]
    options += ["--eval-episodes", "4", "--quiet", "--iterations", 1]
    result = _azx("train", "--out", out, *options)
    assert result.exit_code == 0, result.output
    path = tmp_path / "eval.json"
    result = _azx("eval", "--run", out, "--episodes", 5, "--json", path)
    assert result.exit_code == 0, result.output
    assert "over 5 episodes" in result.output
    saved = json.loads(path.read_text())
    # The same episodes, played here: the mean and its Student-t interval (t(0.975, 4)).
    run = azx.load_run(out)
    returns = np.asarray(run.play_episodes(5, key=jax.random.key(0)).returns, np.float64)
    assert saved["return_mean"] == pytest.approx(returns.mean(), rel=1e-5)
    half = 2.7764 * returns.std(ddof=1) / np.sqrt(5)
    assert saved["return_high"] - saved["return_mean"] == pytest.approx(half, rel=1e-3)
    assert np.all((returns >= -16.3 * 200) & (returns <= 0))


def test_wrappers_keep_the_box_actions(pendulum):
    wrapped = azx.envs.ScaleRewards(pendulum, 0.5)
    assert wrapped.action_space() == pendulum.action_space() == azx.envs.BoxActions([-2], [2])
    key = jax.random.key(0)
    action = jnp.array([1.5], jnp.float32)
    stepped = wrapped.step(wrapped.init(key), action, key)
    reference = pendulum.step(pendulum.init(key), action, key)
    np.testing.assert_allclose(wrapped.rewards(stepped), 0.5 * pendulum.rewards(reference))


# ----------------------------------------------------------------------------- bad input


def test_bad_input_gets_one_clear_error(pendulum):
    with pytest.raises(ValueError, match=r"action bounds must be finite, got \[-inf, 1.0\]"):
        azx.envs.BoxActions([-np.inf], [1.0])
    with pytest.raises(ValueError, match=r"low < high, got \[1.0, 1.0\]"):
        azx.envs.BoxActions([1.0], [1.0])
    with pytest.raises(ValueError, match="'categorical' is for discrete actions.*'tanh_normal'"):
        azx.ppo.PPO(pendulum, azx.ppo.Config())
    with pytest.raises(ValueError, match="'beta' is for continuous actions.*2 discrete actions"):
        azx.ppo.PPO(azx.envs.make("gymnax:CartPole-v1"), azx.ppo.Config(action_distribution="beta"))
    with pytest.raises(ValueError, match="action_distribution must be one of .*got 'gaussian'"):
        azx.ppo.Config(action_distribution="gaussian")
    trainer = azx.ppo.PPO(pendulum, azx.ppo.Config(action_distribution="tanh_normal"))
    with pytest.raises(ValueError, match=r"policy outputs of shape \(1,\).*needs \(2,\) outputs"):
        trainer.init(azx.nets.ActorCritic((3,), 1, key=jax.random.key(0)), key=jax.random.key(0))
    with pytest.raises(ValueError, match="continuous actions needs a feed-forward network"):
        trainer.init(
            azx.nets.RecurrentActorCritic((3,), 2, hidden_size=4, key=jax.random.key(0)),
            key=jax.random.key(0),
        )
    with pytest.raises(ValueError, match="observation_warmup_steps=8 .* normalize_observations"):
        azx.ppo.Config(observation_warmup_steps=8)
    for name in ("reward_scale", "kl_coef", "critic_learning_rate"):
        with pytest.raises(ValueError, match=f"{name} must be > 0.0, got -1.0"):
            azx.ppo.Config(**{name: -1.0})
