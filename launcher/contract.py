"""What the launcher knows of a script: only what the script declares, in
a comment block of TOML (the inline metadata format of PEP 723, with a
type of its own, `launch`), anywhere in the script:

    # /// launch
    # prepare = ["-m", "guide.training.download"]
    # progress = "progress.jsonl"
    # result = "result.json"
    # chief_disk = ["evaluator"]
    # ///

- prepare: arguments for the launcher's Python, run once before any task
  starts, outside the job's network, followed by the script's path and
  flags: for instance to fetch the data set, which the tasks cannot do
  from a private network. Exit code 2 means bad input:
  the step has said why on stderr, and the launcher exits 2.
- progress: a file the chief appends one JSON object to as it trains, in
  its --logdir: {"global_step": N, "time": T}, T being time.monotonic()
  (the system's CLOCK_MONOTONIC, the same in every process). The launcher
  measures the bytes on the wire between the first and the last (traffic.py).
- result: a file the chief writes in its --logdir when it ends. A job
  whose tasks all exit 0 without it fails: its chief stopped on an error
  it did not report. The launcher reads its "global_step", "examples" and
  "start_step" (if any), and never writes it.
- chief_disk: with --network hosts, the task types that mount the chief's
  disk (the --logdir itself) besides the chief; every other task gets a
  disk of its own (disks.py).
- memory_mib: the most memory one task of the script takes, in MiB, for a
  script whose tasks take more than the launcher's figures (limits.py,
  measured on the examples of TensorFlow 1's graphs): the check before a
  launch counts it for every task, however the tasks start.

A script with no block gets none of these. Everything else is the same for
every script: TF_CONFIG in, a --logdir flag, exit code 2 for bad input
(docs/launcher.md). Standard library only.
"""

import dataclasses
import re
import subprocess
import sys
import tomllib

# PEP 723's reference expression, for one block type.
BLOCK = re.compile(r"(?m)^# /// launch$\s(?P<content>(^#(| .*)$\s)+)^# ///$")
FIELDS = {"prepare": list, "progress": str, "result": str, "chief_disk": list,
          "memory_mib": int}
TASK_TYPES = ("worker", "ps", "evaluator")


class ContractError(ValueError):
    """A script's launch block is malformed: one line, exit code 2."""


@dataclasses.dataclass(frozen=True)
class Contract:
    prepare: tuple = ()
    progress: str = None
    result: str = None
    chief_disk: tuple = ()
    memory_mib: int = None


def read(script):
    """The Contract `script` declares (an empty one if it has no block)."""
    try:
        with open(script, encoding="utf-8") as stream:
            text = stream.read()
    except UnicodeDecodeError:
        raise ContractError(f"{script} is not UTF-8 text; the launcher reads "
                            f"its launch block from it") from None
    blocks = list(BLOCK.finditer(text))
    if not blocks:
        if re.search(r"(?m)^# /// launch\b", text):
            raise ContractError(
                f"{script} opens a '# /// launch' block that does not parse: "
                f"each of its lines must start with '# ' (or be '#'), and it "
                f"must end with a line '# ///'; see docs/launcher.md")
        return Contract()
    if len(blocks) > 1:
        raise ContractError(f"{script} has {len(blocks)} '# /// launch' "
                            f"blocks; keep one")
    toml = "".join(line[2:] if line.startswith("# ") else line[1:]
                   for line in blocks[0]["content"].splitlines(keepends=True))
    try:
        fields = tomllib.loads(toml)
    except tomllib.TOMLDecodeError as error:
        raise ContractError(f"{script}'s launch block is not TOML ({error}); "
                            f"see docs/launcher.md") from None
    for name, value in fields.items():
        if name not in FIELDS:
            raise ContractError(f"{script}'s launch block has an unknown "
                                f"field {name!r}; it takes "
                                f"{', '.join(FIELDS)}")
        listed = FIELDS[name] is list
        if FIELDS[name] is int:
            if isinstance(value, bool) or not isinstance(value, int) or \
                    value <= 0:
                raise ContractError(f"{script}'s launch block: {name} must "
                                    f"be a positive integer")
        elif not isinstance(value, FIELDS[name]) or (
                listed and not all(isinstance(item, str) for item in value)):
            kind = "a list of strings" if listed else "a string"
            raise ContractError(f"{script}'s launch block: {name} must be "
                                f"{kind}")
    unknown = set(fields.get("chief_disk", ())) - set(TASK_TYPES)
    if unknown:
        raise ContractError(f"{script}'s launch block: chief_disk takes task "
                            f"types among {', '.join(TASK_TYPES)}, not "
                            f"{', '.join(sorted(unknown))}")
    return Contract(prepare=tuple(fields.get("prepare", ())),
                    progress=fields.get("progress"),
                    result=fields.get("result"),
                    chief_disk=tuple(fields.get("chief_disk", ())),
                    memory_mib=fields.get("memory_mib"))


def prepare(contract, script, script_args, timeout):
    """Runs the script's preparation step, if it declares one; returns its
    exit code (0 if there is none). Its output goes where ours goes."""
    if not contract.prepare:
        return 0
    try:
        return subprocess.run([sys.executable, *contract.prepare, script,
                               *script_args], stdin=subprocess.DEVNULL,
                              timeout=timeout, check=False).returncode
    except subprocess.TimeoutExpired:
        return None  # subprocess.run has killed it
    except OSError as error:
        raise ContractError(f"cannot run {script}'s preparation step with "
                            f"{sys.executable}: {error.strerror}") from None
