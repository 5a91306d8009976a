"""A stand-in for TensorFlow, for the launcher's tests (PYTHONPATH=
tests/stand_in): it loads in no time, writing to fd 2 the lines that the
real one's C++ code writes as it loads, and with STAND_IN_TENSORFLOW_FAILS
set, it then fails to load, as a broken installation does."""

import os

os.write(2, b"WARNING: All log messages before absl::InitializeLog() is "
            b"called are written to STDERR\n")
os.write(2, b"I0000 00:00:1795893127.461061     735 port.cc:153] oneDNN "
            b"custom operations are on.\n")
if os.environ.get("STAND_IN_TENSORFLOW_FAILS"):
    raise ImportError("libtensorflow_framework.so.2: cannot open shared "
                      "object file: No such file or directory")
