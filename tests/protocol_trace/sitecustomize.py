"""Records every enqueue and dequeue a task builds on a shared queue.

On PYTHONPATH with PROTOCOL_TRACE set to a folder, each task (a process with
TF_CONFIG) appends one JSON line per queue operation it builds, in the order
it builds them, to `<folder>/<job>-<index>.jsonl`: the operation, the
queue's shared name and the task it lives on. tests/test_protocol.py compares
two examples' records, so the start/stop protocol written out in one script
cannot drift from the shared helpers every other example uses.
"""

import json
import os

if os.environ.get("PROTOCOL_TRACE") and os.environ.get("TF_CONFIG"):
    from tensorflow.python.ops import data_flow_ops

    _task = json.loads(os.environ["TF_CONFIG"]).get("task", {})
    _path = os.path.join(os.environ["PROTOCOL_TRACE"],
                         f"{_task.get('type')}-{_task.get('index')}.jsonl")

    def _recording(operation, original):
        def recorded(queue, *args, **kwargs):
            reference = queue.queue_ref
            record = {"op": operation,
                      "queue": reference.op.get_attr("shared_name").decode(),
                      "capacity": reference.op.get_attr("capacity"),
                      # "/job:ps/task:0", without the device within it
                      "task": reference.device.split("/device:")[0]}
            with open(_path, "a") as stream:
                stream.write(json.dumps(record) + "\n")
            return original(queue, *args, **kwargs)
        return recorded

    for _name in ("enqueue", "dequeue", "enqueue_many", "dequeue_many"):
        setattr(data_flow_ops.QueueBase, _name,
                _recording(_name, getattr(data_flow_ops.QueueBase, _name)))
