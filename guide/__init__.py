"""Plumbing shared by every example: flags, data, the model, results.

Nothing in here is about distribution except `guide.cluster`, which holds the
start-up and shut-down handshakes every distributed example repeats. Modules
that do not need TensorFlow do not import it, so flag errors stay fast.
"""
