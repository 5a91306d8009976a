"""How the tasks of a TensorFlow 2 ParameterServerStrategy job stop: the
workers and parameter servers serve until the coordinator says it is done."""

import contextlib
import gc
import threading
import time

import tensorflow as tf

from guide.distributed.protocol import run_in_own_graph, shared_queue


def _done_queue(job, index):
    return shared_queue(f"coordinator_done_{job}_{index}", 1, job, index)


def serve_until_coordinator_done(server, job, index):
    """A worker or ps of a ParameterServerStrategy job: serve until the
    coordinator says the job is done (see `tell_servers_done`), instead of
    blocking forever in `server.join()`. Let it exit through `sys.exit`
    (Python's full teardown), not `os._exit`: the coordinator may still be
    closing its sessions on it."""
    run_in_own_graph(server, None, lambda: _done_queue(job, index).dequeue())


# The threads of TensorFlow's ClusterCoordinator: one per worker, and its
# failure handler's.
COORDINATOR_THREADS = ("WorkerClosureProcessingLoop-", "WorkerPreemptionHandler")


def release_coordinator(timeout=30):
    """Coordinator, once its ClusterCoordinator is out of scope: collects it,
    which stops its threads, and waits (up to `timeout` seconds) for them to
    end. A thread still running holds the last step it ran, and so remote
    values on a worker; released after the workers were told to exit, each
    would be a call to a worker that has gone, whose error handling in the
    exiting coordinator can crash it (SIGSEGV)."""
    gc.collect()
    deadline = time.monotonic() + timeout
    for thread in threading.enumerate():
        if thread.name.startswith(COORDINATOR_THREADS):
            thread.join(max(0.0, deadline - time.monotonic()))
    gc.collect()


def tell_servers_done(cluster):
    """Coordinator: let every worker and ps of `cluster` (a dict of host
    lists) return from `serve_until_coordinator_done`. Runs in a graph and
    session of its own, through the coordinator's own server, so it works
    from eager code, and closing the session needs no task that is exiting."""
    with tf.Graph().as_default():
        tokens = [_done_queue(job, index).enqueue(0)
                  for job in ("worker", "ps")
                  for index in range(len(cluster.get(job, [])))]
        with tf.compat.v1.Session("grpc://" + cluster["chief"][0]) as session, \
                contextlib.suppress(tf.errors.UnavailableError):
            session.run(tokens)  # a told task may exit before it replies
