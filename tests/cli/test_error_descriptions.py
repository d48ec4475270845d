"""The error boundary's words for each kind of error, in process: what the operator reads and
the exit code. tests/cli/test_error_boundary.py provokes them through each command in a
process of its own (which mutation testing cannot see into)."""

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


def test_describe_missing_lake_object_names_the_path() -> None:
    from cdclake_merge.storage import missing

    assert describe(missing("s3://lake/_cdclake/t/generations.json")) == (
        "No such file or directory: s3://lake/_cdclake/t/generations.json",
        1,
    )


def test_describe_file_not_found_without_a_path_is_a_bug() -> None:
    assert describe(FileNotFoundError("somewhere")) is None


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


def test_run_exit_without_a_code_is_success() -> None:
    def exits(*, args: list[str], prog_name: str) -> None:
        raise SystemExit(None)

    assert errors.run(exits, []) == 0


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


def test_error_boundary_access_denied_names_action_and_resource() -> None:
    message = (
        "User: arn:aws:iam::111111111111:user/ops is not authorized to perform: "
        "glue:GetJobRuns on resource: arn:aws:glue:eu-west-1:111111111111:job/cdclake-dev-merge"
    )
    described = describe(refused("AccessDeniedException", message))
    assert described is not None
    text, code = described
    assert code == 1
    assert "access denied" in text
    assert "glue:GetJobRuns" in text
    assert "job/cdclake-dev-merge" in text


def test_error_boundary_throttled_says_retry() -> None:
    described = describe(refused("ThrottlingException", "Rate exceeded"))
    assert described == (
        "AWS throttled GetJobRuns (ThrottlingException): wait a minute and run it again",
        1,
    )


def test_error_boundary_expired_credentials_say_what_to_do() -> None:
    described = describe(refused("ExpiredTokenException", "The security token has expired"))
    assert described is not None
    assert described[0].startswith("AWS credentials have expired (GetJobRuns)")
    assert "aws sso login" in described[0]


def test_error_boundary_connect_timeout_is_cannot_reach() -> None:
    from botocore.exceptions import ConnectTimeoutError

    endpoint = "https://glue.eu-west-1.amazonaws.com/"
    described = describe(ConnectTimeoutError(endpoint_url=endpoint))
    assert described is not None
    assert described == (
        f"cannot reach {endpoint}: check the network, a proxy or the region (AWS_REGION), "
        "then run it again",
        1,
    )


def test_error_boundary_unexpected_error_one_line_with_debug_hint(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cdclake.errors import run

    monkeypatch.delenv("CDCLAKE_DEBUG", raising=False)

    def broken(*, args: list[str], prog_name: str) -> None:
        raise KeyError("a defect")

    assert run(broken, []) == 1
    assert capsys.readouterr().err.splitlines() == [
        "error: KeyError: 'a defect' (rerun with --debug for the traceback, "
        "and report it if it is a bug)"
    ]


def test_error_boundary_missing_spark_jars_is_a_setup_error() -> None:
    from cdclake_merge.session import MissingJars

    assert describe(MissingJars("no Hudi bundle under jvm/lib/spark: run make setup")) == (
        "no Hudi bundle under jvm/lib/spark: run make setup",
        2,
    )


def test_error_boundary_spark_driver_gone_is_not_a_stopped_stack() -> None:
    from py4j.protocol import Py4JNetworkError

    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError as refused_connection:
            raise Py4JNetworkError(
                "An error occurred while trying to connect to the Java server (127.0.0.1:41234)"
            ) from refused_connection
    except Py4JNetworkError as exc:
        described = describe(exc)
    assert described is not None
    assert described[0].startswith("the Spark driver (the JVM this command started) stopped")


def test_describe_looping_exception_chain_ends() -> None:
    first, second = RuntimeError("first"), ValueError("second")
    first.__context__, second.__context__ = second, first  # raised while handling each other
    assert describe(first) is None


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("pg8000.exceptions", "InterfaceError"),
        ("requests.exceptions", "ConnectionError"),
        ("urllib3.exceptions", "NewConnectionError"),
    ],
)
def test_describe_client_library_refused_on_loopback_without_os_error_is_the_stopped_stack(
    module: str, name: str
) -> None:
    import importlib

    error_type = getattr(importlib.import_module(module), name)
    # As the library raises it, with no OS error chained beneath: its words alone decide.
    exc = error_type.__new__(error_type)
    Exception.__init__(exc, "Can't create a connection to host 127.0.0.1 and port 9")
    assert describe(exc) == (errors.LOCAL_STACK_HELP, 1)


def test_describe_client_library_error_elsewhere_is_left_to_the_traceback() -> None:
    from pg8000.exceptions import InterfaceError

    assert describe(InterfaceError("Can't create a connection to host db.example.com")) is None


def test_error_line_long_message_cut_at_four_hundred() -> None:
    # A Glue or Spark error can run to pages; the line the operator reads stays short.
    assert errors.error_line(RuntimeError("x" * 500)) == "x" * 399 + "…"


def test_describe_refusal_raised_while_handling_another_is_the_stopped_stack() -> None:
    # Chained implicitly (raised inside an except block, no `from`): only __context__ holds it.
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError:
            raise RuntimeError("the query failed")  # noqa: B904
    except RuntimeError as exc:
        assert exc.__cause__ is None
        assert describe(exc) == (errors.LOCAL_STACK_HELP, 1)


def test_describe_server_on_loopback_refusing_the_login_is_left_to_the_traceback() -> None:
    from pg8000.exceptions import DatabaseError

    # The server is up and answers: not a stopped stack, though it names 127.0.0.1.
    refusal = DatabaseError(
        {"S": "FATAL", "M": 'no pg_hba.conf entry for host "127.0.0.1", user "cdclake"'}
    )
    assert describe(refusal) is None


def test_describe_refusal_without_a_message_keeps_botocores_words() -> None:
    # Some services reply with a code and no message: the line still says what was called.
    assert describe(refused("InternalServiceException", "")) == (
        "AWS refused GetJobRuns (InternalServiceException): An error occurred "
        "(InternalServiceException) when calling the GetJobRuns operation:",
        1,
    )


def test_describe_spark_driver_gone_while_a_call_failed_is_the_driver() -> None:
    from py4j.protocol import Py4JError, Py4JNetworkError

    # As py4j raises it when the JVM dies mid-call: the call's error, raised while handling
    # the network error (implicitly chained), names neither the JVM nor 127.0.0.1.
    try:
        try:
            raise Py4JNetworkError("Answer from Java side is empty")
        except Py4JNetworkError:
            raise Py4JError("An error occurred while calling o56.save")  # noqa: B904
    except Py4JError as exc:
        assert describe(exc) == (errors.SPARK_GONE_HELP, 1)


def test_fail_long_message_stays_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    import typer

    message = "table public.orders: " + "a long reason " * 20  # past any terminal's width
    with pytest.raises(typer.Exit):
        errors.fail(message)
    assert capsys.readouterr().err == f"error: {message}\n"
