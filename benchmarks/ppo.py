"""PPO throughput: azx's feed-forward PPO against rejax's and against a one-program PPO on
the same configuration, continuous PPO against rejax's, and the recurrent system's rate
beside a feed-forward one.

    python -m benchmarks.ppo [--repeats 9] [--iterations 10] [--skip-continuous]
                             [--skip-recurrent] [--seed002-only] [--json PATH]

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

Continuous: Pendulum-v1 (`_reference.REJAX_PENDULUM`), azx's clipped Normal with a
state-independent log standard deviation against rejax's Gaussian policy, which is the
same, timed in turns the same way.

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
    """Times `iterations` training iterations per call, compiled ahead of time."""

    def __init__(self, trainer, state, iterations: int):
        self.trainer, self.state, self.iterations = trainer, state, iterations
        start = time.perf_counter()
        self.compiled = eqx.filter_jit(trainer.train).lower(state, iterations).compile()
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
    parser.add_argument("--json", help="write the records to this JSON file")
    args = parser.parse_args(argv)
    records = []
    if not args.seed002_only:
        records += feed_forward(args.repeats, args.iterations)
        print("measured feed-forward PPO against rejax and the one-program PPO", flush=True)
    if not (args.skip_continuous or args.seed002_only):
        records += continuous(args.repeats, args.iterations)
        print("measured continuous PPO against rejax", flush=True)
    if not (args.skip_recurrent or args.seed002_only):
        records += recurrent(args.repeats, args.iterations)
        print("measured recurrent PPO", flush=True)
    if args.seed002_only or not args.skip_recurrent:
        records += recurrent_against_seed002(args.repeats, args.iterations)
        print("measured recurrent PPO against the seed 002 reimplementation", flush=True)
    print(f"backend: {jax.default_backend()}; {args.repeats} calls of {args.iterations} iterations")
    print(table(records))
    if args.json:
        with open(args.json, "w") as file:
            json.dump(records, file, indent=2)


if __name__ == "__main__":
    main()
