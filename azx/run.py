"""Training runs on disk: what `azx train` writes, `azx eval` reads and `load_run` opens.

A run directory holds

- `config.json`: the seed and the full preset the run was trained with
  ([`azx.presets.Preset`][]'s `to_dict`, its recipe's name as `"algorithm"`);
- `metrics.jsonl`: one JSON object per logged iteration (losses, throughput and, where an
  evaluation ran, its results), the first one the untrained agent's evaluation at
  iteration 0;
- `checkpoints/`: orbax checkpoints of the whole training state (the newest three, and
  those at multiples of the evaluation interval);
- `learning_curve.png`: losses and evaluation scores (AlphaZero) or returns (PPO) over
  training;
- `evals/`: results written by `azx eval`.

    run = azx.load_run("runs/tic_tac_toe-seed0")
    logits, value = run.net(observation)          # one observation
    result = azx.arena.play_match(run.env, run.agent(), azx.arena.RandomAgent(),
                                  num_games=100, key=jax.random.key(0))

    run = azx.load_run("runs/ppo_cartpole-seed0")
    result = run.play_episodes(100, key=jax.random.key(0))   # an azx.ppo.EvaluationResult

The code lives in private modules: `azx._rundir` (files, configuration, `load_run`),
`azx._loop` (the training loop) and `azx._report` (evaluation records and pictures).
"""

from ._loop import (
    CHECKPOINT_SECONDS as CHECKPOINT_SECONDS,
    TrainingInterrupted as TrainingInterrupted,
    train as train,
)
from ._report import (
    describe as describe,
    describe_return as describe_return,
    evaluate as evaluate,
    evaluate_policy as evaluate_policy,
    match_record as match_record,
    plot_learning_curve as plot_learning_curve,
    plot_return_curve as plot_return_curve,
    return_record as return_record,
)
from ._rundir import (
    CHECKPOINT_DIR as CHECKPOINT_DIR,
    CONFIG_FILE as CONFIG_FILE,
    CURVE_FILE as CURVE_FILE,
    EVAL_DIR as EVAL_DIR,
    METRICS_FILE as METRICS_FILE,
    Run as Run,
    RunError as RunError,
    load_run as load_run,
    load_runs as load_runs,
    read_metrics as read_metrics,
    write_json as write_json,
)


__all__ = [
    "Run",
    "RunError",
    "TrainingInterrupted",
    "evaluate",
    "evaluate_policy",
    "load_run",
    "load_runs",
    "match_record",
    "read_metrics",
    "return_record",
    "train",
]
