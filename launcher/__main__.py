"""`python -m launcher [OPTIONS] -- SCRIPT [FLAGS...]` (what launch.sh
runs; job.py says what it does). In order: the command line, the script's
declarations and its preparation step, the --logdir, the job's network
namespace (the launcher runs itself again inside it), the job's PID
namespace, then the job itself, until it ends or is interrupted.
"""

import importlib
import os
import signal
import subprocess
import sys

from . import PROG, contract, network, reaping
from .forking import LAUNCHER, PRELOAD, fork_mode
from .job import EXIT_TIMEOUT, Launcher, Terminated, died, say
from .options import (
    LaunchError,
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
        fork = fork_mode(os.environ.get(PRELOAD))
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
    # Before anything else starts a process: the first is the namespace's init.
    namespace = reaping.job_namespace()
    script_args = full_args
    if fork == LAUNCHER:
        # Read as TensorFlow loads: set here as it is for every task.
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        importlib.import_module("tensorflow")
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
