"""What the benchmark ran on: the processor, memory, Python and
TensorFlow, for the results' header."""

import os
import platform
import subprocess
import sys

from runner import benchmark_env


def hardware():
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as stream:
            for line in stream:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as stream:
            memory_kb = int(stream.readline().split()[1])
        memory = f", {memory_kb / 2**20:.0f} GiB"
    except OSError:
        memory = ""
    cores = len(os.sched_getaffinity(0))
    return f"{cores} cores ({model}){memory}, {platform.system()}"


def software():
    version = subprocess.run(
        [sys.executable, "-c", "import tensorflow as tf; print(tf.__version__)"],
        capture_output=True, text=True, timeout=120, env=benchmark_env()).stdout
    return f"Python {platform.python_version()}, TensorFlow {version.strip()}"
