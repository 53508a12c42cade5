"""Search throughput, native vs mctx, in one process on identical inputs.

    python -m benchmarks.search [--quick] [--json PATH] [--repeats N]

For every environment, network, batch size and simulation count, each search (both
algorithms, both backends) and the floor are compiled once (`compile_s`) and called once to
warm up; then they are timed in turns, one call of each per round, over `--repeats` rounds
(`ms_per_call` is the median), so that a machine whose load changes during the run slows
all of them alike. The floor (`floor_ms`) is the time of the same work without a tree: one
root evaluation plus `num_simulations` batched environment steps and network calls, both
of whose outputs (logits and value) are used, as a search uses them. A
markdown table goes to stdout; `--json` writes the records.
"""

import argparse
import itertools
import json
import statistics
import sys
import time

import equinox as eqx
import jax
import jax.numpy as jnp

import azx
from azx.search import PUCT, Gumbel, MctxGumbel, MctxPUCT, evaluate, transition


ENVS = ("connect_four", "go_9x9")
NETS = ("trivial", "mlp")
BATCH_SIZES = (16, 256)
SIMULATIONS = (32, 64)
ALGOS = ("puct", "gumbel")
BACKENDS = ("native", "mctx")


def make_net(name: str, env, key):
    if name == "trivial":
        return azx.nets.UniformPolicy(env.num_actions)
    return azx.nets.MLP(env.observation_shape, env.num_actions, width=128, depth=2, key=key)


def make_search(algo: str, backend: str, num_simulations: int):
    # Defaults of each algorithm; noise stays on, as in self-play.
    if algo == "puct":
        return (PUCT if backend == "native" else MctxPUCT)(num_simulations)
    return (Gumbel if backend == "native" else MctxGumbel)(num_simulations)


def root_states(env, batch_size: int, num_moves: int, key):
    """Positions after a few random legal moves (the same for every backend)."""

    def play(state, key):
        logits = jnp.where(env.legal_action_mask(state), 0.0, -jnp.inf)
        action_key, step_key = jax.random.split(key)
        action = jax.random.categorical(action_key, logits).astype(jnp.int32)
        after = env.step(state, action, step_key)
        ended = env.terminated(after) | env.truncated(after)
        return jax.tree.map(lambda old, new: jnp.where(ended, old, new), state, after)

    def one(key):
        init_key, play_key = jax.random.split(key)
        state = env.init(init_key)
        for move_key in jax.random.split(play_key, num_moves):
            state = play(state, move_key)
        return state

    return jax.jit(jax.vmap(one))(jax.random.split(key, batch_size))


def timed(fns: dict, args, repeats: int) -> dict[str, tuple[float, float]]:
    """Compile seconds and median milliseconds per call of each `jax.jit(fn)(*args)`, the
    functions called in turns (one call of each per round) after one warm-up call each."""
    compiled, compile_s = {}, {}
    for name, fn in fns.items():
        start = time.perf_counter()
        compiled[name] = jax.jit(fn).lower(*args).compile()
        compile_s[name] = time.perf_counter() - start
        jax.block_until_ready(compiled[name](*args))  # warm-up
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, call in compiled.items():
            start = time.perf_counter()
            jax.block_until_ready(call(*args))
            times[name].append(time.perf_counter() - start)
    return {name: (compile_s[name], 1000.0 * statistics.median(times[name])) for name in fns}


def floor_fn(static, env, num_simulations: int):
    """A root evaluation plus `num_simulations` steps and evaluations, with no tree."""

    def run(params, states, key):
        net = eqx.combine(params, static)
        root = evaluate(net, env, states)
        batch = root.value.shape[0]

        def body(index, carry):
            state, total, _ = carry
            # Step on from the previous states (back to the roots where an episode ended),
            # so that, as in a search, no step is loop-invariant and hoisted out of the loop.
            offset = jnp.arange(batch, dtype=jnp.int32) + index
            action = (offset % env.num_actions).astype(jnp.int32)
            step = transition(net, env, state, action, jax.random.fold_in(key, index), 1.0)
            ended = step.evaluation.terminal
            state = jax.tree.map(
                lambda root, child: jnp.where(
                    ended.reshape(ended.shape + (1,) * (root.ndim - 1)), root, child
                ),
                states,
                step.state,
            )
            # The logits are carried out of the loop: a search reads every network output,
            # and unused, XLA would drop the policy head (and the legal-action mask) from
            # the floor.
            total = total + step.evaluation.value + step.reward
            return state, total, step.evaluation.logits

        carry = (states, root.value, root.logits)
        return jax.lax.fori_loop(0, num_simulations, body, carry)[1:]

    return run


def search_fn(search, static, env):
    # The network's arrays are arguments, as in training, not constants baked into the code.
    def run(params, states, key):
        net = eqx.combine(params, static)
        tree = search.init(env, states.current_player.shape[0])
        output = search(net, env, tree, states, key=key)
        return output.action, output.policy_target, output.root_value

    return run


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="connect_four only")
    parser.add_argument("--json", metavar="PATH", help="write the records as JSON here")
    parser.add_argument("--repeats", type=int, default=7, help="timed rounds per case")
    args = parser.parse_args(argv)
    envs = ENVS[:1] if args.quick else ENVS

    records = []
    key = jax.random.key(0)
    print(f"# search benchmark on {jax.devices()[0].device_kind}", file=sys.stderr)
    for env_name, net_name, batch_size, num_simulations in itertools.product(
        envs, NETS, BATCH_SIZES, SIMULATIONS
    ):
        env = azx.envs.make(env_name)
        net = make_net(net_name, env, jax.random.key(1))
        states = root_states(env, batch_size, 6, jax.random.key(2))
        params, static = eqx.partition(net, eqx.is_array)
        fns = {"floor": floor_fn(static, env, num_simulations)}
        for algo, backend in itertools.product(ALGOS, BACKENDS):
            search = make_search(algo, backend, num_simulations)
            fns[algo, backend] = search_fn(search, static, env)
        results = timed(fns, (params, states, key), args.repeats)
        _, floor_ms = results.pop("floor")
        for (algo, backend), (compile_s, ms) in results.items():
            record = dict(
                env=env_name,
                net=net_name,
                algo=algo,
                backend=backend,
                batch_size=batch_size,
                num_simulations=num_simulations,
                sims_per_s=batch_size * num_simulations / (ms / 1000.0),
                ms_per_call=ms,
                compile_s=compile_s,
                floor_ms=floor_ms,
            )
            records.append(record)
            print(
                f"{env_name} {net_name} b={batch_size} n={num_simulations} {algo:6} "
                f"{backend:6} {ms:9.2f} ms  floor {floor_ms:7.2f} ms  compile {compile_s:5.1f} s",
                file=sys.stderr,
                flush=True,
            )

    print(markdown(records))
    if args.json:
        with open(args.json, "w") as file:
            json.dump(records, file, indent=1)
    return records


def markdown(records: list[dict]) -> str:
    """One row per case: both backends side by side, the speed-up and the floor ratio."""
    lines = [
        "| env | net | algo | batch | sims | native ms | mctx ms | speed-up | native / floor "
        "| floor ms | native sims/s | mctx sims/s | compile native s | compile mctx s |",
        "|" + "---|" * 14,
    ]
    by_case: dict[tuple, dict[str, dict]] = {}
    for record in records:
        case = tuple(record[k] for k in ("env", "net", "algo", "batch_size", "num_simulations"))
        by_case.setdefault(case, {})[record["backend"]] = record
    for (env, net, algo, batch, sims), pair in by_case.items():
        native, mctx = pair.get("native"), pair.get("mctx")
        if native is None or mctx is None:
            continue
        lines.append(
            f"| {env} | {net} | {algo} | {batch} | {sims} | {native['ms_per_call']:.2f} "
            f"| {mctx['ms_per_call']:.2f} | {mctx['ms_per_call'] / native['ms_per_call']:.2f}x "
            f"| {native['ms_per_call'] / native['floor_ms']:.2f} | {native['floor_ms']:.2f} "
            f"| {native['sims_per_s']:.0f} | {mctx['sims_per_s']:.0f} "
            f"| {native['compile_s']:.1f} | {mctx['compile_s']:.1f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
