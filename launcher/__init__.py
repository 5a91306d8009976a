"""The launcher: runs one script as a whole cluster on this machine (its ps,
workers and any coordinator or evaluator, each a process with its own
TF_CONFIG), streams their output and stops every task when the job ends.
Every example's run.sh calls it through launch.sh, as `python -m launcher`.
It knows of a script only what the script declares (docs/launcher.md).

The core: start, prefix, watch, restart, tear down.
- __main__.py: main(), the steps of a launch in order;
- job.py: the job's supervision;
- task.py: one task: its process, restarts, log and last lines;
- options.py: the command line, the memory check, the --logdir, free ports
  and GPUs: what is worked out before any task starts;
- reaping.py: the job's PID namespace, so that no process outlives it.
The optional parts, one interface each:
- contract.py: what a script declares (its preparation step, its files);
- network.py: the --network modes (a namespace per job or per task), with
  disks.py (a disk per task) and shaping.py (--bandwidth, --latency);
- traffic.py: the bytes on the wire;
- forking.py: tasks forked from a Python that has imported TensorFlow once.

Standard library only; not needed on a real cluster, where each host starts
its own task.
"""

# The name the launcher's usage and its error lines give it: the command a
# user runs (run.sh runs it too).
PROG = "launch.sh"
