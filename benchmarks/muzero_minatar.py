"""The `muzero_breakout` preset (MinAtar Breakout) trained seed by seed: the self-play
return against environment steps, and evaluations by the search over the learned model
with its noise off ([`azx.muzero.evaluate`][]), for comparison with `ppo_breakout` at the
same number of environment steps (`python -m benchmarks.ppo_learning ppo_breakout
--iterations N`, N x 8,192 steps).

    python -m benchmarks.muzero_minatar --seeds 0 1 2 --report-every 100 --eval-every 200
    python -m benchmarks.muzero_minatar --seeds 0 1 2 --vmap --report-every 80 \
        --eval-every 160 --set network='"resnet"' --set network_options='{"support_size": 10}' \
        --config '{"consistency_loss_weight": 2.0}'

The options and the printed lines are those of `benchmarks.muzero_cartpole`; the second
command is the residual model with the consistency loss, seeds at once (for a GPU).
"""

from benchmarks.muzero_cartpole import main as _main


def main(argv=None):
    _main(argv, preset_name="muzero_breakout", description=__doc__)


if __name__ == "__main__":
    main()
