"""Elastic training: a step loop that survives a lost host.

After pathwaysutils' elastic manager (`pathwaysutils/elastic`): when a host
dies, every array with a shard there fails with DataLossError, and the
runtime remaps the affected slices onto spare devices (same slice and
executable handles). The Manager runs the training loop, keeps a host
snapshot of the state every `snapshot_every` steps, and on DataLossError
waits for the state's slices to be granted again, uploads the snapshot onto
them with the shardings it had, rewinds to the snapshot's step and goes on,
without restarting the process or recompiling.

    manager = causeway.elastic.Manager(snapshot_every=10)
    state = manager.run(train_step, state, num_steps=100)

`train_step(state, step)` returns the next state; it must be a function of
(state, step) alone (take the batch by step number) for the replayed steps
to give what the first attempt would have.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Optional

import jax
import numpy as np

from ._array import Array, put_host_value
from .errors import DataLossError, InvalidArgumentError


@dataclasses.dataclass
class Snapshot:
    """The state at the start of `step`, on the host."""

    step: int
    treedef: Any
    # Per leaf: (numpy value, Sharding) for an Array, (leaf, None) otherwise.
    leaves: list


@dataclasses.dataclass
class ElasticEvent:
    """One recovery: the error, the step it surfaced at, and the step the
    loop went back to."""

    error: DataLossError
    failed_step: int
    restored_step: int
    seconds: float


class Manager:
    """Runs a step loop that recovers from lost hosts (see the module doc).

    `max_retries`: recoveries allowed in one run before the error is
    re-raised. `timeout`: seconds to wait for the slices to be granted again.
    `on_event(event)`: called after each recovery.
    """

    def __init__(self, *, snapshot_every: int, max_retries: int = 3,
                 timeout: float = 60.0,
                 on_event: Optional[Callable[[ElasticEvent], None]] = None):
        if snapshot_every < 1:
            raise InvalidArgumentError(f"snapshot_every must be at least 1, got {snapshot_every}")
        if max_retries < 0:
            raise InvalidArgumentError(f"max_retries must be non-negative, got {max_retries}")
        self.snapshot_every = snapshot_every
        self.max_retries = max_retries
        self.timeout = timeout
        self.on_event = on_event
        self.events: list[ElasticEvent] = []

    @staticmethod
    def snapshot(state: Any, step: int) -> Snapshot:
        """Copies `state` to the host (waits for it; raises its errors)."""
        leaves, treedef = jax.tree_util.tree_flatten(state)
        saved = []
        for leaf in leaves:
            if isinstance(leaf, Array):
                saved.append((np.array(leaf.to_numpy()), leaf.sharding))
            else:
                saved.append((leaf, None))
        return Snapshot(step, treedef, saved)

    def restore(self, snapshot: Snapshot) -> Any:
        """The snapshot's state uploaded again, each array onto its slice
        with its sharding, once those slices are granted."""
        slices = {id(s.slice): s.slice for _, s in snapshot.leaves if s is not None}
        for s in slices.values():
            s.info(self.timeout)  # Waits until the slice is granted (remapped).
        leaves = [value if sharding is None else put_host_value(value, sharding)
                  for value, sharding in snapshot.leaves]
        return jax.tree_util.tree_unflatten(snapshot.treedef, leaves)

    def run(self, step_fn: Callable[[Any, int], Any], state: Any, num_steps: int, *,
            start_step: int = 0) -> Any:
        """Runs `state = step_fn(state, step)` for step in [start_step,
        num_steps) and returns the final state, ready on the devices."""
        snapshot = self.snapshot(state, start_step)
        step = start_step
        retries = 0
        while True:
            try:
                while step < num_steps:
                    state = step_fn(state, step)
                    step += 1
                    if step % self.snapshot_every == 0 and step < num_steps:
                        snapshot = self.snapshot(state, step)
                for leaf in jax.tree_util.tree_leaves(state):
                    if isinstance(leaf, Array):
                        leaf.block_until_ready()
                return state
            except DataLossError as error:
                retries += 1
                if retries > self.max_retries:
                    raise
                began = time.monotonic()
                state = self.restore(snapshot)
                event = ElasticEvent(error, step, snapshot.step, time.monotonic() - began)
                step = snapshot.step
                self.events.append(event)
                if self.on_event is not None:
                    self.on_event(event)
