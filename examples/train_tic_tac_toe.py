"""Train AlphaZero on tic-tac-toe on a CPU and watch it learn.

    python examples/train_tic_tac_toe.py

Uses the `tic_tac_toe` preset (MLP, PUCT with 64 simulations, 64 games in parallel).
Before training and every 50 iterations it prints the losses and the raw network's
results (argmax of its policy, no search) against a uniformly random player, 500 games
as each colour.
"""

import time

import equinox as eqx
import jax

import azx


EVAL_EVERY = 50


def main():
    preset = azx.presets.get("tic_tac_toe")
    trainer, state = preset.build(seed=0)
    train = eqx.filter_jit(trainer.train)
    match = eqx.filter_jit(azx.arena.play_match)
    print(f"{preset.description}\ntraining {preset.iterations} iterations...", flush=True)

    start = time.perf_counter()
    for done in range(0, preset.iterations + 1, EVAL_EVERY):
        if done:
            state = train(state, EVAL_EVERY)
        result = match(
            trainer.env,
            azx.arena.NetworkAgent(state.net),
            azx.arena.RandomAgent(),
            num_games=1000,
            key=jax.random.key(done),
        )
        metrics = state.metrics
        print(
            f"iteration {done:4d} {time.perf_counter() - start:6.1f}s | loss "
            f"{float(metrics.loss):.3f} (policy {float(metrics.policy_loss):.3f}, value "
            f"{float(metrics.value_loss):.3f}) | network vs random W/D/L as first "
            f"{'/'.join(map(str, result.as_first))}, as second "
            f"{'/'.join(map(str, result.as_second))}",
            flush=True,
        )


if __name__ == "__main__":
    main()
