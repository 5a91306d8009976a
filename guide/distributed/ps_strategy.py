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
    """A worker or ps: serve until `tell_servers_done`, not forever as in
    `server.join()`. Exit through `sys.exit`, not `os._exit`: the coordinator
    may still be closing its sessions on it."""
    run_in_own_graph(server, None, lambda: _done_queue(job, index).dequeue())


# The threads of TensorFlow's ClusterCoordinator: one per worker, and its
# failure handler's.
COORDINATOR_THREADS = ("WorkerClosureProcessingLoop-", "WorkerPreemptionHandler")


def release_coordinator(timeout=30):
    """Coordinator, once its ClusterCoordinator is out of scope: collects it
    and waits (up to `timeout` s) for its threads to end, since each holds
    remote values whose release, once the workers are gone, can crash the
    exiting coordinator (SIGSEGV)."""
    gc.collect()
    deadline = time.monotonic() + timeout
    for thread in threading.enumerate():
        if thread.name.startswith(COORDINATOR_THREADS):
            thread.join(max(0.0, deadline - time.monotonic()))
    gc.collect()


def tell_servers_done(cluster):
    """Coordinator: let every worker and ps of `cluster` return from
    `serve_until_coordinator_done`, from a graph and session of its own
    (through its own server), so that it works from eager code."""
    with tf.Graph().as_default():
        tokens = [_done_queue(job, index).enqueue(0)
                  for job in ("worker", "ps")
                  for index in range(len(cluster.get(job, [])))]
        with tf.compat.v1.Session("grpc://" + cluster["chief"][0]) as session, \
                contextlib.suppress(tf.errors.UnavailableError):
            session.run(tokens)  # a told task may exit before it replies
