"""Data parallelism: a 4-device CPU mesh (in a subprocess) trains like one device."""

import os
import pathlib
import subprocess
import sys


HERE = pathlib.Path(__file__).parent


def test_four_devices_train_like_one():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4")
    result = subprocess.run(
        [sys.executable, str(HERE / "_sharded_run.py")],
        cwd=HERE,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SHARDED OK" in result.stdout
