"""`python -m launcher [OPTIONS] -- SCRIPT [FLAGS...]` (what launch.sh
runs; job.py says what it does). In order: the command line, how the tasks
start and whether the machine can hold them, the script's declarations and
its preparation step, the --logdir, the job's network namespace (the
launcher runs itself again inside it), TensorFlow if the tasks are forked
from the launcher, the job's PID namespace, then the job itself, until it
ends or is interrupted.
"""

import importlib
import os
import signal
import subprocess
import sys
import tempfile

from . import PROG, LaunchError, contract, network, reaping
from .forking import LAUNCHER
from .job import EXIT_TIMEOUT, Launcher, Terminated, died, say
from .options import (
    check_tensorflow,
    logdir_of,
    make_logs,
    parse_command_line,
    task_count,
)

# `--help` shows the script's flags, from a Python given this long.
HELP_TIMEOUT_S = 120


def raise_terminated(signum, frame):
    raise Terminated()


def import_tensorflow():
    """Imports TensorFlow, for the tasks to be forked from. What its C++
    code writes as it loads, before TF_CPP_MIN_LOG_LEVEL is read (absl's
    "WARNING: All log messages before absl::InitializeLog()", oneDNN's
    "I0000 ..."), is kept off the terminal; LaunchError, in one line, if
    the import fails."""
    # Read as TensorFlow loads: set here as it is for every task.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:
        with tempfile.TemporaryFile() as said:
            os.dup2(said.fileno(), 1)
            os.dup2(said.fileno(), 2)
            try:
                importlib.import_module("tensorflow")
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
    except Exception as error:  # whatever the import raised, in one line
        what = (str(error).strip().splitlines() or [""])[0]
        raise LaunchError(f"cannot import TensorFlow with {sys.executable} "
                          f"({type(error).__name__}: {what}); run `make venv` "
                          f"in the repository, or start each task as a new "
                          f"Python (LAUNCH_PRELOAD_TENSORFLOW=0) to see its "
                          f"whole error") from None
    finally:
        for fd in saved:
            os.close(fd)


def main(argv):
    try:
        options, parser, script, script_args = parse_command_line(argv)
    except LaunchError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    if "-h" in script_args or "--help" in script_args:
        parser.print_help()
        print(f"\nThe flags of {script}:\n", flush=True)
        return subprocess.run([sys.executable, script, "--help"],
                              check=False, timeout=HELP_TIMEOUT_S).returncode
    logdir, full_args = logdir_of(script, script_args)
    try:
        declared = contract.read(script)
        check_tensorflow()
        make_logs(logdir)
        # Once, before the job's namespace exists: in a private network the
        # tasks have no route out, to fetch their data for instance.
        try:
            prepared = 0 if network.inside() else contract.prepare(
                declared, script, full_args, options.timeout)
        except KeyboardInterrupt:  # subprocess.run has stopped the step
            say("interrupted during the preparation step")
            return 130
        if prepared is None:
            say(f"the preparation step of {script} did not end within "
                f"--timeout {options.timeout:g} s")
            return EXIT_TIMEOUT
        if prepared != 0:
            if prepared != 2:  # 2: it rejected its input and said why
                say(f"the preparation step of {script} {died(prepared)}")
            return 2 if prepared == 2 else 1
        # The same --logdir inside a namespace, where our pid is another.
        job_network = network.choose(
            options.network, task_count(options),
            argv + full_args[len(script_args):], options.timeout,
            (options.bandwidth, options.latency))
    except (LaunchError, contract.ContractError, network.NetworkError) as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    if isinstance(job_network, int):
        return job_network
    fork = options.start.fork
    if fork == LAUNCHER:
        try:
            import_tensorflow()
        except LaunchError as error:
            print(f"{PROG}: error: {error}", file=sys.stderr)
            return 2
    # Before anything else starts a process: the first is the namespace's init.
    namespace = reaping.job_namespace()
    script_args = full_args
    launcher = Launcher(options, script, script_args, logdir, job_network, fork,
                        namespace, declared)
    signal.signal(signal.SIGTERM, raise_terminated)
    # Explicitly, since a shell starts background jobs with SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        launcher.start()
        return launcher.supervise()
    except (KeyboardInterrupt, Terminated) as stop:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        launcher.teardown()
        interrupted = isinstance(stop, KeyboardInterrupt)
        say(f"{'interrupted' if interrupted else 'terminated'}; stopped "
            f"every task")
        return 130 if interrupted else 143


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
