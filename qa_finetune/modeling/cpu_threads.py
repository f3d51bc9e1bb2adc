"""How a process shares its CPU cores among forward passes that run at once.

A server can keep more than one forward pass in flight. On a CPU, each pass then gets its
share of the cores as its own threads: on two cores, two passes of one thread each ran 34%
more windows per second than one pass of two threads (bench/reports/09-serve.md), since a
pass's threads wait at every operator for the slowest of them, and the Python work between
passes (gathering, padding) no longer leaves the cores idle. The price: a pass alone runs
on its share only (one window alone took 39% longer on one thread than on two).

TensorFlow fixes its thread pools when it first runs an operation, so the share is set
once, at start-up, before any model is loaded; ONNX Runtime sessions read it when opened.
The passes it was shared among are remembered too: ``modeling.predict`` runs a call's
batches in that many passes at once unless told otherwise, so a command that shares the
cores (``evaluate``, ``ask --batch``) keeps them busy, and one that does not (``train``)
runs one pass on all of them as before.
"""

from __future__ import annotations

import logging
import os
import sys

log = logging.getLogger(__name__)

# The most passes a command takes: beyond this each pass's share is a sliver of a core.
MAX_PASSES = 64
# Threads each forward pass may use; None: all usable cores (one pass at a time).
_threads_per_pass: int | None = None
# Passes the cores were shared among; None: not shared (one pass at a time).
_passes: int | None = None


def usable_cores() -> int:
    """The cores this process may run on (its affinity: a container or ``taskset`` may allow
    fewer than the machine has)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_passes(cores: int | None = None) -> int:
    """Passes in flight when none is asked for: two wherever there are cores to share."""
    return 2 if (cores or usable_cores()) >= 2 else 1


def threads_per_pass() -> int:
    """The threads one forward pass may use (all usable cores unless shared out)."""
    return _threads_per_pass or usable_cores()


def shared_passes() -> int:
    """The passes the cores were shared among (``share_cores``); 1 when they were not."""
    return _passes or 1


def share_cores(passes: int) -> int:
    """Give each of ``passes`` forward passes an equal share of the usable cores (at least
    one thread each); returns the threads per pass. TensorFlow takes the share only when it
    has not run yet in this process: otherwise it keeps its pools, and that is logged."""
    global _threads_per_pass, _passes
    threads = max(1, usable_cores() // passes)
    _threads_per_pass, _passes = threads, passes
    if "tensorflow" not in sys.modules:
        # Read when TensorFlow starts, should the model turn out to need it.
        os.environ["TF_NUM_INTRAOP_THREADS"] = str(threads)
        return threads
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
    except RuntimeError:  # started already (a test process, a model loaded before)
        log.warning(
            "the %d passes each use the threads the model started with, not %d each: the "
            "model was running before they were set up (the answers are the same)",
            passes,
            threads,
        )
    return threads
