"""Multi-Worker-Mirrored-Strategy's training under Ray Train.

Ray Train's TensorflowTrainer starts the workers on a Ray cluster, gives each
its TF_CONFIG, and runs multi_worker_mirrored_strategy.py's main() in each
with the same flags. The chief's RESULT line and result.json come back to
this process, as `bash run.sh` prints and writes them.

Run:  bash run_ray.sh                        # a local Ray cluster of its own
      bash run_ray.sh --address HEAD:6379    # a cluster started by `ray start`
Every flag but this file's own goes to multi_worker_mirrored_strategy.py.
"""

import argparse
import importlib.util
import json
import os
import socket
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SCRIPT = "multi_worker_mirrored_strategy.py"
# Where `make ray` installs Ray (Multi-Worker-Mirrored-Strategy/requirements-
# ray.txt), apart from the examples' packages.
RAY_PACKAGES = os.path.join(sys.prefix, "ray-packages")
INSTALL_HINT = ("install it with `make ray` (or pip install -r "
                "Multi-Worker-Mirrored-Strategy/requirements-ray.txt)")
CONNECT_TIMEOUT_S = 5.0
# Every worker has put its report before fit() returns; this is a safety net.
REPORT_TIMEOUT_S = 60.0
# Ray uploads the repository to every node as each worker's working folder;
# the virtual environment and the runs stay behind.
UPLOAD_EXCLUDES = [".git", ".venv", "runs", "*/runs", "benchmarks/results"]

sys.path.insert(0, REPO)

from guide.training import flags, logdirs


def ray_on_the_path():
    """Puts `make ray`'s folder after the environment's own packages, here
    and in the environment of the Ray processes this one starts."""
    if os.path.isdir(RAY_PACKAGES) and RAY_PACKAGES not in sys.path:
        sys.path.append(RAY_PACKAGES)
    paths = [REPO, os.environ.get("PYTHONPATH", ""), RAY_PACKAGES]
    os.environ["PYTHONPATH"] = os.pathsep.join(path for path in paths if path)


def parse(argv):
    """This file's own flags, and the rest, for the training script."""
    parser = flags.Parser(
        prog="run_ray.sh", description=__doc__.strip().splitlines()[0],
        epilog=f"Every other flag goes to {SCRIPT} (see its --help).",
        allow_abbrev=False)
    parser.add_argument("--address", default=None,
                        help="the Ray cluster's address (HEAD:6379, or auto "
                             "for the one `ray start` runs here); default: "
                             "start a local cluster for this run")
    parser.add_argument("--workers", type=flags.positive_int, default=2,
                        help="training workers, one Ray Train worker each")
    own, script_args = parser.parse_known_args(argv)
    return own, script_args


def logdir_of(script_args):
    """The run's --logdir as an absolute path (the workers' folder is not
    this one), and the flags with it; a new folder under runs/ by default."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--logdir")
    known, rest = parser.parse_known_args(script_args)
    logdir = os.path.abspath(known.logdir or logdirs.new_run_folder(
        os.path.join(HERE, SCRIPT)))
    return logdirs.check(logdir), rest + ["--logdir", logdir]


def check_reachable(address):
    """UsageError unless something listens at a host:port `address`, which
    ray.init would otherwise retry for a minute before failing."""
    if address in ("auto", "local") or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise flags.UsageError(f"--address {address!r} is not HOST:PORT (the "
                               f"head's GCS port, 6379 unless `ray start "
                               f"--head --port` said otherwise)")
    try:
        socket.create_connection((host, int(port)), CONNECT_TIMEOUT_S).close()
    except OSError as error:
        raise flags.UsageError(
            f"no Ray cluster answers at --address {address} ({error}); start "
            f"one with `ray start --head`, or leave --address out for a local "
            f"one") from None


def train_worker(config):
    """One Ray Train worker: the script's main() with the user's flags, under
    the TF_CONFIG that Ray Train set; the chief reports its result."""
    import ray.train
    import ray.util

    # The repository as Ray uploaded it is on the module path (Ray Train moves
    # the working folder elsewhere).
    path = next(path for path in (
        os.path.join(folder, os.path.basename(HERE), SCRIPT) for folder in
        sys.path) if os.path.isfile(path))
    spec = importlib.util.spec_from_file_location("multi_worker_mirrored", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    sys.argv = [path, *config["script_args"]]
    script.main()
    context = ray.train.get_context()
    report = {"rank": context.get_world_rank(),
              "node_ip": ray.util.get_node_ip_address(),
              "tf_config": os.environ.get("TF_CONFIG", "")}
    if report["rank"] == 0:
        with open(os.path.join(config["logdir"], "result.json")) as stream:
            report["result"] = json.load(stream)
    # A queue, not ray.train.report: Ray Train keeps reported metrics only
    # with a checkpoint, and a queue needs no storage shared by the nodes.
    config["reports"].put(report)


def usage_error_in(error):
    """The UsageError a worker raised, if that is what failed the run."""
    seen = set()
    pending = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, flags.UsageError) or \
                type(current).__name__ == "UsageError":
            return current
        pending += [current.__cause__, current.__context__,
                    *getattr(current, "worker_failures", {}).values()]
    return None


def main():
    own, script_args = parse(sys.argv[1:])
    if "-h" in script_args or "--help" in script_args:
        return os.execv(sys.executable, [sys.executable, os.path.join(
            HERE, SCRIPT), "--help"])
    # The script has the common flags only: refuse a bad one here, before a
    # Ray cluster starts.
    flags.parse(flags.make_parser(__doc__, SCRIPT), script_args)
    logdir, script_args = logdir_of(script_args)
    ray_on_the_path()
    try:
        import ray
        from ray.train import RunConfig, ScalingConfig
        from ray.train.tensorflow import TensorflowTrainer
        from ray.util.queue import Queue
    except ImportError as error:
        raise flags.UsageError(f"Ray Train cannot be imported ({error}); "
                               f"{INSTALL_HINT}") from None
    if own.address:
        check_reachable(own.address)
    # Distributed: TF_CONFIG is Ray Train's to set, for each worker.
    os.environ.pop("TF_CONFIG", None)
    ray.init(address=own.address, runtime_env={
        "working_dir": REPO, "excludes": UPLOAD_EXCLUDES,
        "env_vars": {"PYTHONPATH": os.environ["PYTHONPATH"],
                     "TF_CPP_MIN_LOG_LEVEL": os.environ.get(
                         "TF_CPP_MIN_LOG_LEVEL", "2")}})
    try:
        reports = Queue()
        trainer = TensorflowTrainer(
            train_worker,
            train_loop_config={"script_args": script_args, "logdir": logdir,
                               "reports": reports},
            scaling_config=ScalingConfig(num_workers=own.workers),
            run_config=RunConfig(name=os.path.basename(logdir),
                                 storage_path=os.path.join(logdir, "ray")))
        try:
            trainer.fit()
        except Exception as error:
            usage_error = usage_error_in(error)
            if usage_error:
                raise flags.UsageError(str(usage_error)) from None
            raise
        by_rank = sorted((reports.get(timeout=REPORT_TIMEOUT_S)
                          for _ in range(own.workers)),
                         key=lambda report: report["rank"])
    finally:
        ray.shutdown()
    for worker in by_rank:
        address = json.loads(worker["tf_config"])["cluster"]["worker"][
            worker["rank"]]
        print(f"[ray] worker {worker['rank']} ran on node {worker['node_ip']}"
              f", listening at {address}", flush=True)
    # The chief wrote result.json on its own node; this writes it here too.
    from guide.training import report

    report.publish_result(logdir, by_rank[0]["result"])

if __name__ == "__main__":
    sys.exit(flags.run_main(main))
