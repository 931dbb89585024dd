"""The chaos suite's command line: the poison scenario's model call length."""

from __future__ import annotations

import pytest

from bench.chaos.__main__ import parse_args


def test_the_poison_model_call_defaults_to_a_second_and_takes_a_positive_length():
    assert parse_args([]).poison_model_seconds == 1.0
    assert parse_args(["--poison-model-seconds", "0.2"]).poison_model_seconds == 0.2


@pytest.mark.parametrize("value", ["0", "-1", "x", "601"])
def test_a_length_that_is_no_positive_number_of_seconds_is_refused(value, capsys):
    with pytest.raises(SystemExit) as exited:
        parse_args(["--poison-model-seconds", value])
    assert exited.value.code == 2
    assert "a number of seconds above 0" in capsys.readouterr().err
