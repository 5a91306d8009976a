"""Plumbing shared by the examples, in two packages named for what they do.

- `guide.training`: what any training script needs, distributed or not: the
  flags and the exit-code contract, the data, the model, the report, the
  logdir.
- `guide.distributed`: what a cluster adds: this task's place in it
  (TF_CONFIG or the cluster flags), the start and stop protocol between the
  tasks, recovery after a restart, the synchronous schemes' pieces, the
  counters kept on the ps, the evaluator task, ParameterServerStrategy's
  start and stop.

`guide.examples` is the table of every example, and `guide/board.py` starts
TensorBoard over their runs. Importing a module changes no global state, and
the modules that need no TensorFlow do not import it, so flag errors are
fast.
"""
