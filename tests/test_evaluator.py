"""The evaluator task (guide/distributed/evaluator.py): what wakes it, which
checkpoints it tests, how it names those it skipped, and its fallback where
inotify is missing."""

import contextlib
import json
import os
import re
import select
import signal

import tensorflow as tf

from conftest import PYTHON, Running
from guide.distributed import evaluator
from guide.training import data, model

EVALUATOR = """
import sys
from guide.distributed import evaluator
from guide.training import data

evaluator.run(sys.argv[1], data.synthetic(0, 100, 100), int(sys.argv[2]))
print("evaluator returned", flush=True)
"""


def save(logdir, *steps):
    """The chief's checkpoints at `steps`, by a Saver that keeps them all."""
    with tf.Graph().as_default():
        model.MLP(seed=0)
        step = tf.compat.v1.train.get_or_create_global_step()
        saver = tf.compat.v1.train.Saver(max_to_keep=None)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            for value in steps:
                session.run(step.assign(value))
                saver.save(session, os.path.join(logdir, "model.ckpt"),
                           global_step=value)


def finish(logdir, step):
    """What the chief writes once it has saved its last checkpoint."""
    with open(os.path.join(logdir, "result.json"), "w") as stream:
        json.dump({"global_step": step}, stream)


def test_checkpoints_that_land_while_it_is_busy_are_named_not_tested(tmp_path):
    """Two checkpoints land while the evaluator cannot run (stopped, as a
    long test or a starved CPU would hold it): it tests the newer and names
    the other, then ends on the chief's result."""
    save(tmp_path, 10)
    run = Running([PYTHON, "-c", EVALUATOR, str(tmp_path), "30"])
    try:
        run.wait_for_line(r"^global_step 10 test_accuracy", timeout=120)
        os.kill(run.process.pid, signal.SIGSTOP)
        _, status = os.waitpid(run.process.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status)
        save(tmp_path, 20, 30)
        finish(tmp_path, 30)
        os.kill(run.process.pid, signal.SIGCONT)
        code, output = run.finish(timeout=60)
    finally:
        run.kill()
    assert code == 0, output
    assert re.findall(r"^global_step (\d+) test_accuracy", output,
                      re.MULTILINE) == ["10", "30"], output
    assert re.search(r"^not tested: model\.ckpt-20 \(", output, re.MULTILINE)
    assert output.rstrip().endswith("evaluator returned")


def land(folder, *names):
    """Index files written in place, as tf.train.CheckpointManager does."""
    for name in names:
        (folder / f"{name}.index").write_bytes(b"")


def test_each_skipped_checkpoint_is_named_once_in_the_order_it_landed(tmp_path):
    with contextlib.closing(evaluator._checkpoints(str(tmp_path))) as landings:
        assert isinstance(landings, evaluator._Landings)

        def untested_before(name):
            return landings.untested_before(str(tmp_path / name))

        land(tmp_path, "ckpt-1", "ckpt-2", "ckpt-3")
        assert untested_before("ckpt-3") == ["ckpt-1", "ckpt-2"]
        assert untested_before("ckpt-3") == []
        # One that landed after the one tested is not skipped (yet).
        land(tmp_path, "ckpt-4", "ckpt-5")
        assert untested_before("ckpt-4") == []
        land(tmp_path, "ckpt-6")
        assert untested_before("ckpt-6") == ["ckpt-5"]
        # Saved before the watch was set: in no known order.
        land(tmp_path, "ckpt-7")
        assert untested_before("ckpt-0") == []
        assert untested_before("ckpt-7") == []


def test_a_checkpoint_and_the_chiefs_result_each_wake_it(tmp_path):
    with contextlib.closing(evaluator._checkpoints(str(tmp_path))) as landings:
        wakeups = iter(landings)
        assert next(wakeups) is None
        for write, latest in ((lambda: save(tmp_path, 10), "model.ckpt-10"),
                              (lambda: finish(tmp_path, 10), "model.ckpt-10")):
            write()
            # Checked first, so that a write that woke nothing fails here
            # instead of blocking the next read for ever.
            assert select.select([landings._watch], [], [], 30)[0]
            assert os.path.basename(next(wakeups)) == latest


def test_without_inotify_simple_it_polls_and_ends_at_train_steps(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(evaluator, "inotify_simple", None)
    assert isinstance(evaluator._checkpoints(str(tmp_path)), evaluator._Polls)
    save(tmp_path, 30)
    evaluator.run(str(tmp_path), data.synthetic(0, 100, 100), train_steps=30)
    assert re.findall(r"^global_step (\d+) test_accuracy",
                      capsys.readouterr().out, re.MULTILINE) == ["30"]
