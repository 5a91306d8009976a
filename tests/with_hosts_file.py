"""Runs a Python script with HOSTS as its /etc/hosts: this process moves to
a mount namespace of its own, binds the file over /etc/hosts there, and
runs the script itself, so that a task the fork server forked keeps the
TensorFlow it has loaded. It must be root in its user namespace, as the
pods of jobset_job.py are.

    python with_hosts_file.py HOSTS SCRIPT [ARG...]
"""

import ctypes
import os
import runpy
import sys

CLONE_NEWNS = 0x00020000
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 0x40000

libc = ctypes.CDLL("libc.so.6", use_errno=True)


def bind_hosts_file(path):
    steps = [
        ("unshare", lambda: libc.unshare(CLONE_NEWNS)),
        # So that nothing mounted here shows in the namespace it came from.
        ("make / private", lambda: libc.mount(None, b"/", None,
                                              MS_REC | MS_PRIVATE, None)),
        ("bind", lambda: libc.mount(os.fsencode(path), b"/etc/hosts", None,
                                    MS_BIND, None)),
    ]
    for what, step in steps:
        if step() != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"{what}: {os.strerror(error)}")


def main():
    hosts, script, *args = sys.argv[1:]
    bind_hosts_file(hosts)
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
