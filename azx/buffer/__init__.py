"""Episode replay buffer: pure `init` / `add` / `sample` over a `BufferState`."""

from ._replay import (
    Batch as Batch,
    BufferState as BufferState,
    Experience as Experience,
    ReplayBuffer as ReplayBuffer,
)
