"""Run in a subprocess: Stochastic MuZero on 1 device and on a 4-device CPU mesh must train
alike, by `_muzero_sharded_run.py stochastic`'s check."""

from _muzero_sharded_run import main


if __name__ == "__main__":
    main("stochastic")
