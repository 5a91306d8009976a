"""Plumbing shared by the examples. `guide.training` holds what any training
script needs (flags, data, model, report, logdir); `guide.distributed` what a
cluster adds (the task's place in it, the start and stop protocol, recovery,
the schemes' shared pieces). `guide.examples` is the table of the examples,
`guide/board.py` TensorBoard over their runs. Importing a module changes no
global state; those that need no TensorFlow do not import it.
"""
