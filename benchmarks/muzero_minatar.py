"""A MinAtar MuZero preset (`muzero_breakout`, or `--preset muzero_freeway`) trained seed
by seed: the self-play return against environment steps, and evaluations by the search
over the learned model with its noise off ([`azx.muzero.evaluate`][]), for comparison
with PPO at the same number of environment steps (`python -m benchmarks.ppo_learning
ppo_breakout --set iterations=N --set anneal_iterations=N`, N x 8,192 steps: N = 50 for
Breakout, 10 with `--set env='"gymnax:Freeway-MinAtar"'` for Freeway).

    python -m benchmarks.muzero_minatar --seeds 0 1 2 --report-every 100 --eval-every 200
    python -m benchmarks.muzero_minatar --preset muzero_freeway --seeds 0 1 2 --vmap --sampled \
        --report-every 40 --eval-every 80
    python -m benchmarks.muzero_minatar --seeds 0 1 2 --vmap --report-every 80 \
        --eval-every 160 --set network='"resnet"' --set network_options='{"support_size": 10}' \
        --config '{"consistency_loss_weight": 2.0}'

The options and the printed lines are those of `benchmarks.muzero_cartpole`; the second
command trains Freeway's three seeds at once in one program; the third is Breakout's
residual model with the consistency loss, seeds at once (for a GPU).
"""

from benchmarks.muzero_cartpole import main as _main


def main(argv=None):
    _main(argv, preset_name="muzero_breakout", description=__doc__)


if __name__ == "__main__":
    main()
