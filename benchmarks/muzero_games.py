"""A MuZero preset for a two-player game (`muzero_tic_tac_toe`) trained seed by seed, and
evaluated as `azx train` evaluates it: its agents (the search over the learned model,
noise off, and the network alone) in matches of the preset's `eval_games` against its
opponents (the random player and the exact solver for tic-tac-toe).

    python -m benchmarks.muzero_games --seeds 0 1 2 --every 400
    python -m benchmarks.muzero_games --seeds 0 --config '{"unroll_steps": 9}'
    python -m benchmarks.muzero_games --seeds 0 --eval-simulations 16 32 64
    python -m benchmarks.muzero_games --seeds 0 --set 'search="puct"' \
        --set 'search_options={"num_simulations": 64, "temperature": 1.5}'

Prints, per seed and every `--every` iterations, the training time so far, the last
iteration's loss and value loss (and consistency loss, when on), and each agent's won /
drawn / lost against each opponent (evaluation key `10_000 + seed`), and for tic-tac-toe
each agent's losing moves on every line of perfect play by its opponent
(`benchmarks.tictactoe_exact.against_perfect_play`: none means that no perfect player can
beat it, in any number of games) and its moves in every decisive position
(`benchmarks.tictactoe_exact.check`: optimal in N of the 3,191 positions whose moves differ
in exact value, where AlphaZero's `tic_tac_toe` preset misses at most a few); with
`--eval-simulations`, after the last iteration the search agent again with each number
of simulations (of the preset's evaluation search); with `--save DIR`, each seed's
trained network is written to `DIR/seed<S>.eqx` (`equinox.tree_deserialise_leaves` into
the preset's built network).
"""

import argparse
import dataclasses
import json
import pathlib

import equinox as eqx
import jax
import numpy as np

from azx._evaluators import evaluator

from . import _settings, tictactoe_exact
from .muzero_cartpole import train_in_chunks


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="muzero_tic_tac_toe")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--iterations", type=int, default=None, help="default: the preset's")
    parser.add_argument("--every", type=int, default=400)
    parser.add_argument(
        "--config", type=json.loads, default={}, help="JSON: changes to the preset's config"
    )
    _settings.add_set_option(parser)
    parser.add_argument(
        "--eval-simulations",
        type=int,
        nargs="*",
        default=[],
        help="after the last iteration, also the search agent with each of these numbers of "
        "simulations (the same key)",
    )
    parser.add_argument(
        "--save", default=None, help="a folder: each seed's trained network saved there"
    )
    args = parser.parse_args(argv)
    preset = _settings.preset_with(args.preset, args.set)
    preset = preset.replace(config=dataclasses.replace(preset.config, **args.config))
    iterations = args.iterations or preset.iterations
    for seed in args.seeds:
        trainer, state = preset.build(seed=seed)
        done = 0
        for state, metrics, done, seconds in train_in_chunks(
            trainer.train_and_record, state, iterations, args.every
        ):
            scores = _scores(preset.recipe, trainer, state, seed)
            loss, value, consistency = (
                float(np.asarray(x)[-1])
                for x in (metrics.loss, metrics.value_loss, metrics.consistency_loss)
            )
            parts = f"value {value:.3f}"
            if preset.config.consistency_loss_weight:
                parts += f", consistency {consistency:.3f}"
            print(
                f"seed {seed} iteration {done}: {seconds:.0f} s, loss {loss:.3f} ({parts}); "
                f"{scores}",
                flush=True,
            )
        if args.save:
            pathlib.Path(args.save).mkdir(parents=True, exist_ok=True)
            eqx.tree_serialise_leaves(pathlib.Path(args.save) / f"seed{seed}.eqx", state.net)
        for simulations in args.eval_simulations:
            recipe = dataclasses.replace(
                preset.recipe,
                eval_search=preset.recipe.eval_search | {"num_simulations": simulations},
                eval_agents=("search",),
            )
            scores = _scores(recipe, trainer, state, seed)
            print(f"seed {seed} iteration {done}, {simulations} simulations: {scores}", flush=True)


def _scores(recipe, trainer, state, seed: int) -> str:
    results = evaluator(recipe, trainer.env).evaluate(
        trainer, state, key=jax.random.key(10_000 + seed), phase=lambda _: None
    )
    scores = ", ".join(
        f"{agent} vs {spec} {r['wins']}/{r['draws']}/{r['losses']}"
        for agent, by_opponent in results.items()
        for spec, r in by_opponent.items()
    )
    if getattr(trainer.env, "name", None) != "tic_tac_toe":
        return scores
    agents = {kind: recipe.agent(state.net, kind, None, trainer.env) for kind in recipe.eval_agents}
    lines = "; ".join(
        f"{kind} {_perfect_play(agent, trainer.env)}" for kind, agent in agents.items()
    )
    decisive = "; ".join(
        f"{kind} {_decisive(agent, trainer.env)}" for kind, agent in agents.items()
    )
    return f"{scores}; against perfect play: {lines}; decisive positions: {decisive}"


def _perfect_play(agent, env) -> str:
    result = tictactoe_exact.against_perfect_play(tictactoe_exact.agent_moves(agent), env)
    return f"{len(result.mistakes)} losing moves in {result.num_positions} positions"


def _decisive(agent, env) -> str:
    result = tictactoe_exact.check(tictactoe_exact.agent_moves(agent), env)
    return f"{result.num_optimal} of {result.num_positions} optimal"


if __name__ == "__main__":
    main()
