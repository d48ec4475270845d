"""The error boundary's words for each kind of error, in process (tests/cli/test_error_boundary.py
provokes them through the commands): what the operator reads and the exit code."""

from __future__ import annotations

import pytest
from botocore import exceptions as boto

from cdclake import errors
from cdclake.errors import describe
from tests.cli.cli_helpers import refused


def test_describe_config_error_is_usage() -> None:
    from environment.config import ConfigError

    assert describe(ConfigError("config/nope.yaml:\n  no such file")) == (
        "config/nope.yaml: no such file",
        2,
    )


def test_describe_stack_error_is_a_failure() -> None:
    from cdclake.local.processes import StackError

    assert describe(StackError("kafka did not start: see\nkafka.log")) == (
        "kafka did not start: see kafka.log",
        1,
    )


def test_describe_no_credentials_says_how_to_configure() -> None:
    assert describe(boto.NoCredentialsError()) == (
        f"no usable AWS credentials (Unable to locate credentials): {errors.CREDENTIALS_HELP}",
        1,
    )


def test_describe_sso_token_expired_is_no_credentials() -> None:
    described = describe(boto.TokenRetrievalError(provider="sso", error_msg="expired"))
    assert described is not None and described[0].startswith("no usable AWS credentials (")


def test_describe_no_region_is_usage() -> None:
    assert describe(boto.NoRegionError()) == (
        "no AWS region: set AWS_REGION or the environment's region in config",
        2,
    )


def test_describe_other_refusal_names_operation_code_and_message() -> None:
    assert describe(refused("EntityNotFoundException", "Job\n not found")) == (
        "AWS refused GetJobRuns (EntityNotFoundException): Job not found",
        1,
    )


def test_describe_loopback_endpoint_asks_for_the_local_stack() -> None:
    described = describe(boto.EndpointConnectionError(endpoint_url="http://127.0.0.1:9/"))
    assert described == (
        "cannot reach http://127.0.0.1:9/: a local stand-in (AWS_ENDPOINT_URL): is the local "
        "stack up? `cdclake local up`",
        1,
    )


def test_describe_read_timeout_says_run_again() -> None:
    described = describe(boto.ReadTimeoutError(endpoint_url="https://glue.eu-west-1.amazonaws.com"))
    assert described is not None
    assert described[0].startswith("AWS did not answer in time (Read timeout on endpoint URL")
    assert described[0].endswith("): run it again") and described[1] == 1


def test_describe_connection_refused_is_the_stopped_stack() -> None:
    assert describe(ConnectionRefusedError(111, "Connection refused")) == (
        errors.LOCAL_STACK_HELP,
        1,
    )


def test_describe_refusal_wrapped_in_another_error_is_the_stopped_stack() -> None:
    try:
        try:
            raise ConnectionResetError(104, "Connection reset by peer")
        except ConnectionResetError as reset:
            raise RuntimeError("the query failed") from reset
    except RuntimeError as exc:
        assert describe(exc) == (errors.LOCAL_STACK_HELP, 1)


def test_describe_http_client_refused_on_loopback_is_the_stopped_stack() -> None:
    import requests

    try:
        requests.get("http://127.0.0.1:9/", timeout=5)
    except requests.ConnectionError as exc:
        assert describe(exc) == (errors.LOCAL_STACK_HELP, 1)
    else:
        raise AssertionError("the discard port answered")


def test_describe_defect_is_left_to_the_traceback() -> None:
    assert describe(KeyError("a defect")) is None


def test_one_line_cut_marks_the_cut() -> None:
    assert errors.one_line("x" * 401) == "x" * 399 + "…"
    assert errors.one_line("x" * 400) == "x" * 400


def test_one_line_no_limit_keeps_everything() -> None:
    assert errors.one_line("a\n" * 300, limit=None) == " ".join(["a"] * 300)


def test_error_line_silent_exception_named() -> None:
    assert errors.error_line(TimeoutError()) == "TimeoutError"


@pytest.mark.parametrize(
    ("value", "enabled"), [("1", True), ("TRUE", True), ("yes", True), ("0", False), ("", False)]
)
def test_debug_enabled_from_the_variable(
    monkeypatch: pytest.MonkeyPatch, value: str, enabled: bool
) -> None:
    monkeypatch.setenv(errors.DEBUG_VARIABLE, value)
    assert errors.debug_enabled() is enabled


def test_fail_prints_one_error_line_and_exits_with_its_code(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import typer

    with pytest.raises(typer.Exit) as exited:
        errors.fail("the table is not configured", code=2)
    assert exited.value.exit_code == 2
    assert capsys.readouterr().err == "error: the table is not configured\n"


def test_run_exit_with_a_message_is_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    def exits(*, args: list[str], prog_name: str) -> None:
        raise SystemExit("stopped:\n  because")

    assert errors.run(exits, []) == 1
    assert capsys.readouterr().err == "error: stopped: because\n"


def test_run_exit_code_passed_on() -> None:
    def exits(*, args: list[str], prog_name: str) -> None:
        raise SystemExit(3)

    assert errors.run(exits, []) == 3


def test_run_command_that_returns_exits_zero() -> None:
    seen: list[tuple[list[str], str]] = []

    def command(*, args: list[str], prog_name: str) -> None:
        seen.append((args, prog_name))

    assert errors.run(command, ["status", "--env", "dev"]) == 0
    assert seen == [(["status", "--env", "dev"], "cdclake")]


def test_run_operator_error_one_line_and_its_code(capsys: pytest.CaptureFixture[str]) -> None:
    def no_region(*, args: list[str], prog_name: str) -> None:
        raise boto.NoRegionError()

    assert errors.run(no_region, []) == 2
    assert capsys.readouterr().err.startswith("error: no AWS region: ")


def test_run_debug_flag_lets_the_traceback_through(monkeypatch: pytest.MonkeyPatch) -> None:
    # Set, not deleted: the run sets the variable, and the test's end must take it away again.
    monkeypatch.setenv(errors.DEBUG_VARIABLE, "0")
    seen: list[list[str]] = []

    def broken(*, args: list[str], prog_name: str) -> None:
        seen.append(args)
        raise KeyError("a defect")

    with pytest.raises(KeyError):
        errors.run(broken, ["status", "--debug"])
    assert seen == [["status"]]
