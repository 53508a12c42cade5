"""Run in a subprocess: `azx ARGS`, as the command line runs it.

With `AZX_TEST_STALL_SAVING=N` in the environment, the process stops for good (until
killed) in the middle of saving checkpoint N, after printing `stalled`: it has written
its part of the checkpoint into orbax's temporary directory and waits at the barrier
before orbax commits it, where the other processes join it once they have written
theirs.
"""

import os
import sys
import time


stall = os.environ.get("AZX_TEST_STALL_SAVING")
if stall:
    from orbax.checkpoint._src.multihost import multihost

    import azx.checkpoint

    saving = []
    save, sync = azx.checkpoint.Checkpointer.save, multihost.sync_global_processes

    def save_noting_the_step(self, state, *, step, meta=None):
        saving[:] = [step]
        return save(self, state, step=step, meta=meta)

    def stalling_sync(name, **options):
        if saving == [int(stall)] and name.endswith("Checkpointer:save"):
            print("stalled", flush=True)
            time.sleep(600)
        return sync(name, **options)

    azx.checkpoint.Checkpointer.save = save_noting_the_step
    multihost.sync_global_processes = stalling_sync

from azx.cli import main  # noqa: E402


sys.argv[0] = "azx"
main()
