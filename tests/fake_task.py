"""A stand-in for an example script, for testing the launcher without the
cost of TensorFlow: it reads its role from TF_CONFIG, listens on its port
(so a port clash would fail it), says it is ready, then acts out --mode."""

import argparse
import json
import os
import signal
import socket
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--mode", default="ok",
                    choices=("ok", "fail", "fail_once", "bad_input", "hang"))
parser.add_argument("--logdir")
args = parser.parse_args()

config = json.loads(os.environ["TF_CONFIG"])
job, index = config["task"]["type"], config["task"]["index"]
host, port = config["cluster"][job][index].rsplit(":", 1)
listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.bind(("", int(port)))
listener.listen()
print(f"ready pid={os.getpid()} port={port}", flush=True)

if job == "ps" or args.mode == "hang":
    signal.pause()  # like server.join(): only a signal ends it
elif args.mode == "fail_once" and job == "worker" and index == 1 \
        and not os.path.exists(os.path.join(args.logdir, "failed_once")):
    open(os.path.join(args.logdir, "failed_once"), "w").close()
    print("worker 1 fails this once", flush=True)
    sys.exit(3)
elif args.mode == "fail" and index == 1:
    print("worker 1 is about to fail", flush=True)
    sys.exit(3)
elif args.mode == "bad_input" and index == 0:
    print("fake_task.py: error: --mode bad_input was given", file=sys.stderr)
    sys.exit(2)
elif args.mode == "fail":
    signal.pause()  # the healthy workers wait, to be stopped by the launcher
print(f"worker {index} done", flush=True)
