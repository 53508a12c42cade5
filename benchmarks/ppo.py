"""PPO throughput: azx's feed-forward PPO against rejax's and against a one-program PPO on
the same configuration, continuous PPO against rejax's, and the recurrent system's rate
beside a feed-forward one.

    python -m benchmarks.ppo [--repeats 9] [--iterations 10] [--skip-continuous]
                             [--skip-recurrent] [--seed002-only] [--pendulum-only]
                             [--json PATH]

Feed-forward: CartPole-v1 with purejaxrl's configuration (4 environments x 128 steps, 4
epochs x 4 minibatches, 64x64 tanh, a constant learning rate since rejax does not anneal
it). The references run in their own virtual environment (`benchmarks/_reference.py`,
created on first use) as worker processes: rejax, and a PPO written the way purejaxrl
writes it, whose every call builds the network, the optimiser and the environments and
trains, all as one jitted program (`_rejax_worker.one_program_ppo`). All are timed in
turns, `--iterations` training iterations per call (rollout, advantages and every update:
whole `step`s), the order swapped every round, and compared as ratios of median
environment steps per second, then (in brackets) of the rates of each system's fastest
quarter of calls: on a shared machine a call runs either at full speed or about 1.7-1.9x
slower, whatever the system, and the fastest quarter is the full-speed rate. azx runs
twice: with truncation treated as termination, which is what both references do, and
with its default bootstrap from a truncated episode's final observation (one more network
call per step).

Continuous: the `ppo_pendulum` preset as it is (tanh-squashed Normal, state-independent
log-std, standardised observations, rewards x 0.1, the learning rate annealed over 488
iterations, 16 environments x 128 steps, 10 epochs x 16 minibatches, 64x64 tanh), and the
same with a clipped Normal, against a one-program PPO written the way purejaxrl writes its
continuous PPO (`one_program_continuous_ppo`, in this process: jax, flax, optax and
gymnax are all azx's own) on the same settings, timed in turns the same way. Then
Pendulum-v1 (`_reference.REJAX_PENDULUM`), azx's clipped Normal against rejax's Gaussian
policy, which is the same, timed in turns the same way (`--pendulum-only` skips it, and
everything else that needs the reference environment).

Recurrent: MiniGrid-Empty-6x6 with the `ppo_minigrid` preset's configuration, its GRU
network against a feed-forward `ActorCritic` on the same configuration, timed in turns the
same way. Then azx's recurrent PPO with the `ppo_minigrid_seed002` preset (seed 002's own
configuration: GRU 16, 64 environments x 16 steps, one epoch of 16 minibatches) against
`benchmarks.seed002`'s training iteration, the seed 002 system written again in plain JAX,
on the same configuration: `--iterations` of its iterations per call, jitted as one
program, each call from the same initial state (its learning rate, annealed over the 97
iterations of the seed's run, would turn negative past them), timed in turns with azx's.
"""

import argparse
import contextlib
import dataclasses
import json
import statistics
import time
from collections.abc import Iterable

import equinox as eqx
import jax

import azx

from ._reference import PUREJAXRL_CARTPOLE, REJAX_PENDULUM, RejaxPPO


ONE_PROGRAM = "purejaxrl-style one program"


def _azx_config(c: dict, **options) -> azx.ppo.Config:
    """azx's `Config` for a configuration in the reference worker's keys."""
    return azx.ppo.Config(
        num_envs=c["num_envs"],
        rollout_length=c["num_steps"],
        num_epochs=c["num_epochs"],
        num_minibatches=c["num_minibatches"],
        learning_rate=c["learning_rate"],
        max_grad_norm=c["max_grad_norm"],
        gamma=c["gamma"],
        gae_lambda=c["gae_lambda"],
        clip_eps=c["clip_eps"],
        value_clip_eps=c["clip_eps"],
        entropy_coef=c["ent_coef"],
        value_coef=c["vf_coef"],
        **options,
    )


def _azx_cartpole(truncation: str):
    c = PUREJAXRL_CARTPOLE
    env = azx.envs.make("gymnax:CartPole-v1")
    net = azx.nets.ActorCritic(
        env.observation_shape,
        env.num_actions,
        hidden_sizes=tuple(c["hidden_layer_sizes"]),
        activation=c["activation"],
        key=jax.random.key(0),
    )
    trainer = azx.ppo.PPO(env, _azx_config(c, truncation=truncation))
    return trainer, trainer.init(net, key=jax.random.key(1))


def _azx_pendulum():
    c = REJAX_PENDULUM
    env = azx.envs.make(f"gymnax:{c['env']}")
    # rejax's continuous policy: a Normal with a state-independent log standard deviation,
    # its sample clipped to the bounds; time-outs treated as terminal, as rejax does.
    net = azx.ppo.ContinuousActorCritic(
        env.observation_shape,
        env.num_actions,
        hidden_sizes=tuple(c["hidden_layer_sizes"]),
        activation=c["activation"],
        key=jax.random.key(0),
    )
    config = _azx_config(c, truncation="terminate", action_distribution="normal")
    trainer = azx.ppo.PPO(env, config)
    return trainer, trainer.init(net, key=jax.random.key(1))


class _AzxRunner:
    """Times `iterations` training iterations per call, compiled ahead of time: of
    `trainer.train`, or of `train` (`train(state, iterations)`, several seeds' training
    for instance) where given."""

    def __init__(self, trainer, state, iterations: int, *, train=None):
        self.trainer, self.state, self.iterations = trainer, state, iterations
        train = trainer.train if train is None else train
        start = time.perf_counter()
        self.compiled = eqx.filter_jit(train).lower(state, iterations).compile()
        self.compile_seconds = time.perf_counter() - start
        self.env_steps_per_call = iterations * trainer.env_steps_per_iteration

    def run(self) -> float:
        start = time.perf_counter()
        self.state = jax.block_until_ready(self.compiled(self.state, self.iterations))
        return time.perf_counter() - start


def _alternate(runners: dict, repeats: int) -> dict[str, list[float]]:
    """Seconds per call of every runner, calling them in turns (one warm-up call each)."""
    for runner in runners.values():
        runner.run()
    times: dict[str, list[float]] = {name: [] for name in runners}
    names = list(runners)
    for round_ in range(repeats):
        for name in names if round_ % 2 == 0 else reversed(names):
            times[name].append(runners[name].run())
    return times


def _rates(runners: dict, times: dict[str, list[float]]) -> tuple[dict, dict]:
    """Each system's environment steps per second over its median call, and over the mean
    of its fastest quarter of calls. On a shared machine a call runs either at full speed
    or much slower, whatever the system; the fastest quarter is the full-speed rate."""
    median, fastest = {}, {}
    for name, seconds in times.items():
        steps = runners[name].env_steps_per_call
        median[name] = steps / statistics.median(seconds)
        fastest[name] = steps / statistics.mean(sorted(seconds)[: max(1, len(seconds) // 4)])
    return median, fastest


def _ratios(name: str, rates: tuple[dict, dict], to: Iterable[str]) -> dict:
    median, fastest = rates
    return {
        "steps_per_s": median[name],
        "steps_per_s_fastest_quarter": fastest[name],
        "ratio_to": {other: median[name] / median[other] for other in to},
        "fastest_quarter_ratio_to": {other: fastest[name] / fastest[other] for other in to},
    }


def _against_references(
    env: str, runners: dict, references: dict, repeats: int, iterations: int
) -> list[dict]:
    """azx's `runners` and the reference systems (`{name: (config, system)}`, each a worker
    of `_reference.RejaxPPO`) timed in turns; every rate as a ratio to each reference's."""
    with contextlib.ExitStack() as stack:
        workers = {
            name: stack.enter_context(RejaxPPO(config, iterations=iterations, system=system))
            for name, (config, system) in references.items()
        }
        for worker in workers.values():
            worker.env_steps_per_call = iterations * worker.env_steps_per_iteration
        times = _alternate(runners | workers, repeats)
    everyone = runners | workers
    rates = _rates(everyone, times)
    return [
        {
            "system": name,
            "env": env,
            **_ratios(name, rates, workers),
            "compile_s": everyone[name].compile_seconds,
            "seconds_per_call": times[name],
            "jax": everyone[name].versions["jax"] if name in workers else jax.__version__,
        }
        for name in times
    ]


def feed_forward(repeats: int, iterations: int) -> list[dict]:
    runners = {
        "azx (truncation as termination)": _AzxRunner(*_azx_cartpole("terminate"), iterations),
        "azx (truncation bootstrapped)": _AzxRunner(*_azx_cartpole("bootstrap"), iterations),
    }
    references = {
        "rejax": (PUREJAXRL_CARTPOLE, "rejax"),
        ONE_PROGRAM: (PUREJAXRL_CARTPOLE, "purejaxrl"),
    }
    return _against_references("CartPole-v1", runners, references, repeats, iterations)


def one_program_continuous_ppo(config: azx.ppo.Config, iterations: int):
    """purejaxrl's continuous PPO (`ppo_continuous_action.py`) written for this benchmark
    on `config`'s settings: `train(key)` builds the network, the optimiser and the
    Pendulum-v1 environments and runs `iterations` training iterations, all inside one
    jitted program. Separate tanh actor and critic torsos with orthogonal initialisation;
    a Normal with a learned state-independent log-std, its sample clipped to the bounds
    on its way to the environment, and its entropy in the loss (weighted by
    `entropy_coef`); observations standardised by running statistics updated every step
    (purejaxrl's `NormalizeVecObservation`); rewards scaled by `reward_scale`; the
    learning rate annealed linearly over `anneal_iterations`; Adam after global-norm
    clipping; clipped values; the advantage standardised per minibatch; done treated as
    termination; one permutation of all samples per epoch."""
    import flax.linen as nn
    import gymnax
    import jax.numpy as jnp
    import numpy as np
    import optax
    from flax.linen.initializers import constant, orthogonal

    env, env_params = gymnax.make("Pendulum-v1")
    space = env.action_space(env_params)
    low, high = jnp.asarray(space.low, jnp.float32), jnp.asarray(space.high, jnp.float32)
    action_size = int(np.prod(space.shape))
    observation_shape = env.observation_space(env_params).shape
    envs, steps = config.num_envs, config.rollout_length
    epochs, minibatches = config.num_epochs, config.num_minibatches
    gamma, lam, clip_eps = config.gamma, config.gae_lambda, config.clip_eps
    samples = envs * steps
    log_sqrt_2pi = 0.5 * np.log(2 * np.pi)

    class Network(nn.Module):
        @nn.compact
        def __call__(self, x):
            def torso(h):
                for _ in range(2):
                    h = nn.Dense(64, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(h)
                    h = jnp.tanh(h)
                return h

            mean = nn.Dense(action_size, kernel_init=orthogonal(0.01), bias_init=constant(0.0))(
                torso(x)
            )
            log_std = self.param("log_std", constant(0.0), (action_size,))
            value = nn.Dense(1, kernel_init=orthogonal(1.0), bias_init=constant(0.0))(torso(x))
            return (mean, log_std), value[..., 0]

    def log_prob(policy, action):
        mean, log_std = policy
        z = (action - mean) * jnp.exp(-log_std)
        return jnp.sum(-0.5 * jnp.square(z) - log_std - log_sqrt_2pi, axis=-1)

    def entropy(policy):
        return jnp.sum(0.5 + log_sqrt_2pi + policy[1]) * jnp.ones(policy[0].shape[:-1])

    network = Network()
    updates_per_iteration = epochs * minibatches

    def learning_rate(count):
        frac = 1.0 - (count // updates_per_iteration) / config.anneal_iterations
        return config.learning_rate * frac

    optimiser = optax.chain(
        optax.clip_by_global_norm(config.max_grad_norm),
        optax.adam(learning_rate, eps=config.adam_eps),
    )

    def normalise(stats, observation):
        # purejaxrl's NormalizeVecObservation: running moments over every step's batch.
        mean, var, count = stats
        batch_mean, batch_var = observation.mean(0), observation.var(0)
        delta, total = batch_mean - mean, count + envs
        mean = mean + delta * envs / total
        m2 = var * count + batch_var * envs + jnp.square(delta) * count * envs / total
        stats = (mean, m2 / total, total)
        return stats, (observation - stats[0]) / jnp.sqrt(stats[1] + 1e-8)

    def loss(params, batch):
        observation, action, old_log_prob, old_value, advantage, target = batch
        policy, value = network.apply(params, observation)
        new_log_prob = log_prob(policy, action)
        clipped_value = old_value + jnp.clip(value - old_value, -clip_eps, clip_eps)
        value_loss = (
            0.5 * jnp.maximum(jnp.square(value - target), jnp.square(clipped_value - target)).mean()
        )
        advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
        ratio = jnp.exp(new_log_prob - old_log_prob)
        surrogate = jnp.minimum(
            ratio * advantage, jnp.clip(ratio, 1 - clip_eps, 1 + clip_eps) * advantage
        )
        return (
            -surrogate.mean()
            + config.value_coef * value_loss
            - config.entropy_coef * entropy(policy).mean()
        )

    def iteration(carry, _):
        params, opt_state, env_state, observation, stats, key = carry

        def env_step(carry, _):
            env_state, observation, stats, key = carry
            key, action_key, step_key = jax.random.split(key, 3)
            policy, value = network.apply(params, observation)
            action = policy[0] + jnp.exp(policy[1]) * jax.random.normal(action_key, policy[0].shape)
            # gymnax 1.x: terminated and truncated apart; purejaxrl ends on either.
            next_observation, env_state, reward, terminated, truncated, _ = jax.vmap(
                env.step, in_axes=(0, 0, 0, None)
            )(jax.random.split(step_key, envs), env_state, jnp.clip(action, low, high), env_params)
            done = terminated | truncated
            stats, next_observation = normalise(stats, next_observation)
            transition = (
                observation,
                action,
                log_prob(policy, action),
                value,
                reward * config.reward_scale,
                done.astype(jnp.float32),
            )
            return (env_state, next_observation, stats, key), transition

        (env_state, observation, stats, key), trajectory = jax.lax.scan(
            env_step, (env_state, observation, stats, key), None, steps
        )
        obs, action, old_log_prob, value, reward, done = trajectory
        last_value = network.apply(params, observation)[1]

        def gae_step(carry, transition):
            advantage, next_value = carry
            value, reward, done = transition
            keep = 1.0 - done
            delta = reward + gamma * next_value * keep - value
            advantage = delta + gamma * lam * keep * advantage
            return (advantage, value), advantage

        _, advantage = jax.lax.scan(
            gae_step, (jnp.zeros_like(last_value), last_value), (value, reward, done), reverse=True
        )
        batch = (obs, action, old_log_prob, value, advantage, advantage + value)
        batch = jax.tree.map(lambda x: x.reshape(samples, *x.shape[2:]), batch)

        def epoch(carry, _):
            params, opt_state, key = carry
            key, shuffle_key = jax.random.split(key)
            order = jax.random.permutation(shuffle_key, samples)
            shuffled = jax.tree.map(
                lambda x: x[order].reshape(minibatches, -1, *x.shape[1:]), batch
            )

            def update(carry, minibatch):
                params, opt_state = carry
                grads = jax.grad(loss)(params, minibatch)
                updates, opt_state = optimiser.update(grads, opt_state, params)
                return (optax.apply_updates(params, updates), opt_state), None

            (params, opt_state), _ = jax.lax.scan(update, (params, opt_state), shuffled)
            return (params, opt_state, key), None

        (params, opt_state, key), _ = jax.lax.scan(epoch, (params, opt_state, key), None, epochs)
        return (params, opt_state, env_state, observation, stats, key), None

    def train(key):
        init_key, reset_key, key = jax.random.split(key, 3)
        params = network.init(init_key, jnp.zeros(observation_shape))
        observation, env_state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(reset_key, envs), env_params
        )
        stats = (jnp.zeros(observation_shape), jnp.ones(observation_shape), jnp.float32(1e-4))
        stats, observation = normalise(stats, observation)
        carry = (params, optimiser.init(params), env_state, observation, stats, key)
        return jax.lax.scan(iteration, carry, None, iterations)[0]

    return train


class _OneProgramRunner:
    """Times `one_program_continuous_ppo`: each call a whole fresh run of `iterations`
    iterations, initialisation included, compiled ahead of time."""

    def __init__(self, config: azx.ppo.Config, iterations: int):
        self.key = jax.random.key(0)
        start = time.perf_counter()
        train = jax.jit(one_program_continuous_ppo(config, iterations))
        self.compiled = train.lower(self.key).compile()
        self.compile_seconds = time.perf_counter() - start
        self.env_steps_per_call = iterations * config.num_envs * config.rollout_length

    def run(self) -> float:
        self.key, key = jax.random.split(self.key)
        start = time.perf_counter()
        jax.block_until_ready(self.compiled(key))
        return time.perf_counter() - start


def _azx_preset(name: str, **options):
    preset = azx.presets.get(name)
    env = preset.make_env()
    trainer = azx.ppo.PPO(env, dataclasses.replace(preset.config, **options))
    net = preset.make_network(env, key=jax.random.key(0))
    return trainer, trainer.init(net, key=jax.random.key(1))


def pendulum_against_one_program(repeats: int, iterations: int) -> list[dict]:
    """`ppo_pendulum` as it is and with a clipped Normal, against
    `one_program_continuous_ppo` on the same settings, timed in turns."""
    config = azx.presets.get("ppo_pendulum").config
    runners = {
        "azx ppo_pendulum": _AzxRunner(*_azx_preset("ppo_pendulum"), iterations),
        "azx ppo_pendulum (clipped Normal)": _AzxRunner(
            *_azx_preset("ppo_pendulum", action_distribution="normal"), iterations
        ),
        ONE_PROGRAM: _OneProgramRunner(config, iterations),
    }
    times = _alternate(runners, repeats)
    rates = _rates(runners, times)
    return [
        {
            "system": name,
            "env": "Pendulum-v1",
            **_ratios(name, rates, [ONE_PROGRAM]),
            "compile_s": runners[name].compile_seconds,
            "seconds_per_call": times[name],
            "jax": jax.__version__,
        }
        for name in times
    ]


def continuous(repeats: int, iterations: int) -> list[dict]:
    runners = {"azx (clipped Normal)": _AzxRunner(*_azx_pendulum(), iterations)}
    references = {"rejax": (REJAX_PENDULUM, "rejax")}
    return _against_references(REJAX_PENDULUM["env"], runners, references, repeats, iterations)


def recurrent(repeats: int, iterations: int) -> list[dict]:
    preset = azx.presets.get("ppo_minigrid")
    config = dataclasses.replace(preset, iterations=iterations).config
    env = preset.make_env()
    trainer = azx.ppo.PPO(env, config)
    gru = preset.make_network(env, key=jax.random.key(0))
    mlp = azx.nets.ActorCritic(env.observation_shape, env.num_actions, key=jax.random.key(0))
    runners = {
        "azx recurrent (GRU 16)": _AzxRunner(
            trainer, trainer.init(gru, key=jax.random.key(1)), iterations
        ),
        "azx feed-forward (64x64)": _AzxRunner(
            trainer, trainer.init(mlp, key=jax.random.key(1)), iterations
        ),
    }
    times = _alternate(runners, repeats)
    rates, _ = _rates(runners, times)
    feed_forward_rate = rates["azx feed-forward (64x64)"]
    return [
        {
            "system": name,
            "env": "MiniGrid-Empty-6x6",
            "steps_per_s": rate,
            "cost_over_feed_forward": feed_forward_rate / rate,
            "compile_s": runners[name].compile_seconds,
            "seconds_per_call": times[name],
            "jax": jax.__version__,
        }
        for name, rate in rates.items()
    ]


class _Seed002Runner:
    """Times `iterations` of `benchmarks.seed002`'s training iterations per call, as one
    program compiled ahead of time, every call from the same initial state."""

    def __init__(self, iterations: int):
        from . import seed002

        _, env, env_params = seed002._environment()  # the auto-resetting one
        self.carry, self.key = jax.jit(
            lambda key: seed002.initial_carry(key, "fan_in_normal", env, env_params)
        )(jax.random.key(1))
        iteration = seed002.make_iteration(env, env_params)

        def run_iterations(carry, key):
            return jax.lax.scan(iteration, carry, jax.random.split(key, iterations))[0]

        start = time.perf_counter()
        self.compiled = jax.jit(run_iterations).lower(self.carry, self.key).compile()
        self.compile_seconds = time.perf_counter() - start
        self.env_steps_per_call = iterations * seed002.NUM_ENVS * seed002.NUM_STEPS

    def run(self) -> float:
        self.key, key = jax.random.split(self.key)
        start = time.perf_counter()
        jax.block_until_ready(self.compiled(self.carry, key))
        return time.perf_counter() - start


SEED002 = "seed 002 reimplementation"


def recurrent_against_seed002(repeats: int, iterations: int) -> list[dict]:
    preset = azx.presets.get("ppo_minigrid_seed002")
    env = preset.make_env()
    trainer = azx.ppo.PPO(env, preset.config)
    gru = preset.make_network(env, key=jax.random.key(0))
    runners = {
        "azx recurrent (ppo_minigrid_seed002)": _AzxRunner(
            trainer, trainer.init(gru, key=jax.random.key(1)), iterations
        ),
        SEED002: _Seed002Runner(iterations),
    }
    times = _alternate(runners, repeats)
    rates = _rates(runners, times)
    return [
        {
            "system": name,
            "env": "MiniGrid-Empty-6x6",
            **_ratios(name, rates, [SEED002]),
            "compile_s": runners[name].compile_seconds,
            "seconds_per_call": times[name],
            "jax": jax.__version__,
        }
        for name in times
    ]


def table(records: list[dict]) -> str:
    lines = [
        "| system | env | env steps/s | vs rejax | vs one program | vs seed 002 "
        "| time vs feed-forward | compile s |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def ratio(record, name):
        if name not in record.get("ratio_to", {}):
            return ""
        fastest = record["fastest_quarter_ratio_to"][name]
        return f"{record['ratio_to'][name]:.2f}x ({fastest:.2f}x)"

    for r in records:
        rejax, one, seed = (ratio(r, name) for name in ("rejax", ONE_PROGRAM, SEED002))
        cost = f"{r['cost_over_feed_forward']:.2f}x" if "cost_over_feed_forward" in r else ""
        lines.append(
            f"| {r['system']} | {r['env']} | {r['steps_per_s']:.0f} | {rejax} | {one} | {seed} "
            f"| {cost} | {r['compile_s']:.1f} |"
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9, help="timed calls per system")
    parser.add_argument("--iterations", type=int, default=10, help="iterations per call")
    parser.add_argument("--skip-continuous", action="store_true")
    parser.add_argument("--skip-recurrent", action="store_true")
    parser.add_argument(
        "--seed002-only",
        action="store_true",
        help="time only the recurrent PPO against the seed 002 reimplementation",
    )
    parser.add_argument(
        "--pendulum-only",
        action="store_true",
        help="time only ppo_pendulum against the one-program continuous PPO",
    )
    parser.add_argument("--json", help="write the records to this JSON file")
    args = parser.parse_args(argv)
    records = []
    if args.pendulum_only or not (args.skip_continuous or args.seed002_only):
        records += pendulum_against_one_program(args.repeats, args.iterations)
        print("measured ppo_pendulum against the one-program continuous PPO", flush=True)
    if not (args.seed002_only or args.pendulum_only):
        records += feed_forward(args.repeats, args.iterations)
        print("measured feed-forward PPO against rejax and the one-program PPO", flush=True)
    if not (args.skip_continuous or args.seed002_only or args.pendulum_only):
        records += continuous(args.repeats, args.iterations)
        print("measured continuous PPO against rejax", flush=True)
    if not (args.skip_recurrent or args.seed002_only or args.pendulum_only):
        records += recurrent(args.repeats, args.iterations)
        print("measured recurrent PPO", flush=True)
    if not args.pendulum_only and (args.seed002_only or not args.skip_recurrent):
        records += recurrent_against_seed002(args.repeats, args.iterations)
        print("measured recurrent PPO against the seed 002 reimplementation", flush=True)
    print(f"backend: {jax.default_backend()}; {args.repeats} calls of {args.iterations} iterations")
    print(table(records))
    if args.json:
        with open(args.json, "w") as file:
            json.dump(records, file, indent=2)


if __name__ == "__main__":
    main()
