"""The line a worker prints when its session is recreated names the error,
whatever framing the error's message comes in."""

import logging

import pytest

from guide.distributed import recovery


class Aborted(Exception):
    def __init__(self, message):
        super().__init__(message)
        self.message = message


@pytest.mark.parametrize("message", [
    "Graph execution error:\n\nWorker 0 is restarting",
    "=====================\nWorker 0 is restarting\n=====================",
])
def test_a_recreated_session_is_said_with_the_errors_own_line(message, capsys):
    said = recovery._SayWhenSessionsAreRecreated()
    record = logging.LogRecord("tensorflow", logging.INFO, __file__, 1,
                               "An error was raised. This may be due to a "
                               "preemption in a connected worker or parameter "
                               "server. The current session will be closed and "
                               "a new session will be created. This error: %s",
                               (Aborted(message),), None)
    assert said.filter(record) is False
    assert capsys.readouterr().out == \
        "session recreated after Aborted: Worker 0 is restarting\n"
