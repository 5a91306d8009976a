"""A stand-in for an example script, for testing the launcher without the
cost of TensorFlow: it reads its role from TF_CONFIG, listens on its port
(so a port clash would fail it), says it is ready, then acts out --mode.
With --child it first starts a child of its own that waits for a signal,
holding its output open, with --logdir in its command line."""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

parser = argparse.ArgumentParser()
parser.add_argument("--mode", default="ok",
                    choices=("ok", "fail", "fail_once", "bad_input", "hang",
                             "ps_fails_last", "group_fails_once", "disks",
                             "links", "result"))
parser.add_argument("--logdir")
parser.add_argument("--child", action="store_true")
parser.add_argument("--dataset")  # taken, as the examples take them, and unused
parser.add_argument("--data_dir")
args = parser.parse_args()



def make_pipe(path):
    """The FIFO at `path`, made by whichever of its two ends comes first."""
    try:
        os.mkfifo(path)
    except FileExistsError:
        pass


def wait_for_ready(addresses, limit_s=30.0):
    """Returns once each task at `addresses` has said it is ready (it then
    answers a connection with a byte): a worker waits for every ps, as a
    real one does, so a job never ends before each ps has said so."""
    deadline = time.monotonic() + limit_s
    for address in addresses:
        task_host, task_port = address.rsplit(":", 1)
        while True:
            try:
                with socket.create_connection((task_host, int(task_port)),
                                              1.0) as connection:
                    if connection.recv(1):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                sys.exit(f"fake_task.py: no task said ready at {address}")
            time.sleep(0.05)  # polling a port: nothing to wait on


# The addresses that have connected, which --mode disks waits for.
callers, called = set(), threading.Condition()


def answer_ready(listener):
    """Sends a byte on every connection: "this task has said ready"."""
    while True:
        connection, (caller, _) = listener.accept()
        with connection:
            connection.sendall(b"r")
        with called:
            callers.add(caller)
            called.notify_all()


config = json.loads(os.environ["TF_CONFIG"])
job, index = config["task"]["type"], config["task"]["index"]
if args.mode == "disks":  # a file of its own, written before it says ready
    with open(os.path.join(args.logdir, f"{job}-{index}.txt"), "w") as mine:
        mine.write(job)
host, port = config["cluster"][job][index].rsplit(":", 1)
listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
# Its own address: in --network hosts it exists only in the task's namespace.
# As gRPC does: a restarted task rebinds its port despite closed connections
# of its last life (TIME_WAIT); a second listener still fails.
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind((host, int(port)))
listener.listen()
child = "none"
if args.child:
    subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()",
                      args.logdir])
    # Read from this machine's /proc, as the pid below.
    with open("/proc/thread-self/children") as stream:
        child = stream.read().strip()
# The pid this machine knows it by: the launcher's tasks run in a PID
# namespace of their own, where getpid() gives another.
print(f"ready pid={os.readlink('/proc/self')} port={port} child={child}",
      flush=True)
threading.Thread(target=answer_ready, args=(listener,), daemon=True).start()
if job != "ps":
    wait_for_ready(config["cluster"].get("ps", []))

if args.mode == "ps_fails_last":
    # Each worker opens its pipe to the ps and holds it until it exits; the
    # ps sees every worker's end and then fails, as in its own shutdown.
    pipe = os.path.join(args.logdir, f"worker-{index}.fifo")
    if job == "ps":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for worker in range(len(config["cluster"]["worker"])):
            pipe = os.path.join(args.logdir, f"worker-{worker}.fifo")
            make_pipe(pipe)
            with open(pipe, "rb") as stream:
                stream.read()
        print("ps fails after every worker finished", flush=True)
        sys.exit(3)
    make_pipe(pipe)
    held = open(pipe, "wb")  # closed as the worker exits
elif args.mode == "disks":
    # Once every task has written its file: what this one sees of them all.
    wait_for_ready([address for addresses in config["cluster"].values()
                    for address in addresses])
    seen = sorted(os.path.relpath(os.path.join(folder, name), args.logdir)
                  for folder, _, names in os.walk(args.logdir) for name in names)
    writable = []
    for folder in ("disks", "logs"):
        try:
            open(os.path.join(args.logdir, folder, "mine"), "w").close()
            writable.append(folder)
        except FileNotFoundError:
            pass  # not there: a disk of its own
        except OSError:
            pass  # hidden, read-only
    print(f"sees {','.join(seen)} can write {','.join(writable) or 'none'}",
          flush=True)
    if job == "ps":
        signal.pause()
    # Up until every other task has asked it (each has its own address).
    others = {address.rsplit(":", 1)[0] for addresses in config["cluster"].values()
              for address in addresses} - {host}
    with called:
        if not called.wait_for(lambda: others <= callers, timeout=30):
            sys.exit(f"fake_task.py: not asked by {sorted(others - callers)}")
elif args.mode == "links":
    # The queueing its own end of its link has (--bandwidth, --latency).
    shown = subprocess.run(["tc", "qdisc", "show", "dev", "eth0"],
                           capture_output=True, text=True, timeout=30, check=True)
    print(f"eth0 {' | '.join(shown.stdout.strip().splitlines())}", flush=True)
    if job == "ps":
        signal.pause()
elif job == "ps" or args.mode == "hang":
    signal.pause()  # like server.join(): only a signal ends it
elif args.mode == "fail_once" and job == "worker" and index == 1 \
        and not os.path.exists(os.path.join(args.logdir, "failed_once")):
    open(os.path.join(args.logdir, "failed_once"), "w").close()
    print("worker 1 fails this once", flush=True)
    sys.exit(3)
elif args.mode == "group_fails_once" and job == "worker":
    # A worker's first life, before the launcher wrote a restart into its
    # log: worker 1 fails, the others wait to be stopped. Then all finish.
    with open(os.path.join(args.logdir, "logs", f"worker-{index}.log")) as log:
        restarted = "[launch]" in log.read()
    if not restarted and index == 1:
        # Once every worker has said it is ready, so that each log has both lives.
        wait_for_ready(config["cluster"]["worker"])
        print("worker 1 fails this once", flush=True)
        sys.exit(3)
    if not restarted:
        signal.pause()
elif args.mode == "fail" and index == 1:
    print("worker 1 is about to fail", flush=True)
    sys.exit(3)
elif args.mode == "bad_input" and index == 0:
    print("fake_task.py: error: --mode bad_input was given", file=sys.stderr)
    sys.exit(2)
elif args.mode == "fail":
    signal.pause()  # the healthy workers wait, to be stopped by the launcher
if args.mode == "result" and index == 0:  # what a chief writes at its end
    with open(os.path.join(args.logdir, "result.json"), "w") as stream:
        json.dump({"global_step": 1, "examples": 1}, stream)
print(f"worker {index} done", flush=True)

# What the launcher reads of this script, as of an example's (contract.py).
# /// launch
# prepare = ["-m", "guide.training.download"]
# chief_disk = ["evaluator"]
# ///
