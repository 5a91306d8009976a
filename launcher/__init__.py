"""The launcher: runs one script as a whole cluster on this machine (its ps,
workers and any coordinator or evaluator, each a process with its own
TF_CONFIG), streams their output and stops every task when the job ends.
Every example's run.sh calls it through launch.sh, as `python -m launcher`.
It knows of a script only what the script declares (docs/launcher.md).

The core: start, prefix, watch, restart, tear down.
- __main__.py: main(), the steps of a launch in order;
- job.py: the job's supervision;
- task.py: one task: its process, restarts, log and last lines;
- options.py: the command line, how the tasks start, the --logdir, free
  ports and GPUs: what is worked out before any task starts;
- limits.py: whether the machine can hold the job (memory, open files,
  ports, threads), checked before anything starts;
- reaping.py: the job's PID namespace, so that no process outlives it.
The optional parts, one interface each:
- contract.py: what a script declares (its preparation step, its files);
- network.py: the --network modes (a namespace per job or per task), with
  disks.py (a disk per task) and shaping.py (--bandwidth, --latency);
- traffic.py: the bytes on the wire;
- forking.py: tasks forked from a Python that has imported TensorFlow once;
- summary.py: with many workers, one line now and then for all but the
  chief, whose lines go to their logs only;
- usage.py: the job's memory, sampled while it runs, and its first
  progress record, for launch.json.

Standard library only; not needed on a real cluster, where each host starts
its own task.
"""

# The name the launcher's usage and its error lines give it: the command a
# user runs (run.sh runs it too).
PROG = "launch.sh"


class LaunchError(Exception):
    """Bad launcher input: one line on stderr, exit code 2."""
