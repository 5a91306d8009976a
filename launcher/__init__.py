"""The launcher: runs one example as a whole cluster on this machine (its ps,
workers and any coordinator or evaluator, each a process with its own
TF_CONFIG), streams their output and stops every task when the job ends.
Every example's run.sh calls it through launch.sh, as `python -m launcher`.

- job.py: the job's supervision, and main();
- task.py: one task: its process, restarts, log and last lines;
- options.py: the command line, the memory check, the --logdir, free ports
  and GPUs: what is worked out before any task starts;
- network.py: the --network modes (a namespace per job or per task);
- forking.py: tasks forked from a Python that has imported TensorFlow once.

Standard library only; not needed on a real cluster, where each host starts
its own task.
"""

# The name the launcher's usage and its error lines give it: the command a
# user runs (run.sh runs it too).
PROG = "launch.sh"
