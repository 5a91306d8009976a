"""TensorBoard over every example's runs/, on 127.0.0.1 and a free port.

`make tensorboard` (or `.venv/bin/python guide/board.py`). Each example's
folder becomes one name in TensorBoard's --logdir_spec, so a run shows as
`<Example>/<run>` and the runs of different schemes overlay in one chart;
an evaluator's summaries, in `<run>/eval/`, show as `<Example>/<run>/eval`.
TensorBoard prints the URL to open. Any other flag goes to TensorBoard.
"""

import argparse
import importlib.util
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def logdir_spec(root):
    """`name:path` pairs, comma-joined: every folder of `root` whose runs/
    holds a run; the baseline (Non-Distributed_Setup.py) writes to the
    top-level runs/."""
    folders = [(name, os.path.join(root, name, "runs"))
               for name in sorted(os.listdir(root))]
    folders.append(("Non-Distributed_Setup", os.path.join(root, "runs")))
    return ",".join(f"{name}:{runs}" for name, runs in folders
                    if os.path.isdir(runs) and os.listdir(runs))


def main(argv):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=REPO,
                        help="the folder holding the example folders "
                             "(default: this repository)")
    args, tensorboard_flags = parser.parse_known_args(argv)
    if importlib.util.find_spec("tensorboard") is None:
        print("board.py: TensorBoard is not installed in this Python; run "
              "`make venv` (requirements.txt pins it)", file=sys.stderr)
        return 2
    spec = logdir_spec(args.root)
    if not spec:
        print(f"board.py: no example under {args.root} has a run in its runs/ "
              "yet; train one first, e.g. `make demo`", file=sys.stderr)
        return 2
    print("TensorBoard over " + ", ".join(pair.split(":", 1)[0]
                                           for pair in spec.split(",")),
          flush=True)
    # Port 0: the system picks a free port; TensorBoard prints the URL.
    os.execv(sys.executable, [
        sys.executable, "-m", "tensorboard.main", "--logdir_spec", spec,
        "--host", "127.0.0.1", "--port", "0", *tensorboard_flags])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
