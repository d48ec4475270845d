"""The CLI's error boundary: every operator error ends in one line on stderr and an exit code.

Exit codes: 0 success, 1 an operational failure (AWS refused or could not be reached, the local
stack is not running, a run failed), 2 usage or configuration (unknown environment or table, a
bad option or config file). ``--debug`` or ``CDCLAKE_DEBUG=1`` lets the traceback through.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

DEBUG_VARIABLE = "CDCLAKE_DEBUG"
USAGE = 2
FAILURE = 1

CREDENTIALS_HELP = (
    "configure AWS credentials for the environment's account "
    "(aws sso login / AWS_PROFILE / AWS_ACCESS_KEY_ID), or run `cdclake doctor --env ENV`"
)
LOCAL_STACK_HELP = "the local stack is not running: start it with `cdclake local up`"
SPARK_GONE_HELP = (
    "the Spark driver (the JVM this command started) stopped: look above for its error "
    "(java.lang.OutOfMemoryError: raise CDCLAKE_DRIVER_MEMORY, default 4g)"
)

_EXPIRED = {"ExpiredToken", "ExpiredTokenException", "RequestExpired", "TokenRefreshRequired"}
_DENIED = {
    "AccessDenied",
    "AccessDeniedException",
    "UnauthorizedOperation",
    "UnrecognizedClientException",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "AuthFailure",
}
_THROTTLED = {
    "Throttling",
    "ThrottlingException",
    "TooManyRequestsException",
    "RequestLimitExceeded",
    "SlowDown",
    "ProvisionedThroughputExceededException",
}
_LOOPBACK = re.compile(r"\b(127\.\d+\.\d+\.\d+|localhost|\[?::1\]?)\b")


def debug_enabled() -> bool:
    return os.environ.get(DEBUG_VARIABLE, "").lower() in {"1", "true", "yes"}


def one_line(text: str, limit: int | None = 400) -> str:
    """``text`` on one line (whitespace runs made one space), at most ``limit`` characters
    (None: all of it)."""
    line = " ".join(str(text).split())
    return line if limit is None or len(line) <= limit else line[: limit - 1] + "…"


def error_line(exc: BaseException, limit: int | None = 400) -> str:
    """An exception as one line: its message, or its type's name when it has none."""
    return one_line(str(exc), limit) or type(exc).__name__


def fail(message: str, code: int = FAILURE) -> NoReturn:
    """End a command with ``error: message`` on stderr and exit code ``code``."""
    import typer
    from rich.console import Console

    Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {message}", highlight=False)
    raise typer.Exit(code)


def describe(exc: BaseException) -> tuple[str, int] | None:
    """What to tell the operator about ``exc`` and the exit code; None for a bug (traceback)."""
    from botocore import exceptions as boto

    from cdclake.local.processes import StackError
    from cdclake_merge.session import MissingJars  # imports no Spark
    from environment.config import ConfigError

    if isinstance(exc, ConfigError):
        return one_line(str(exc)), USAGE
    if isinstance(exc, StackError):
        return one_line(str(exc)), FAILURE
    if isinstance(exc, MissingJars):
        return one_line(str(exc)), USAGE
    if isinstance(
        exc,
        boto.NoCredentialsError
        | boto.PartialCredentialsError
        | boto.CredentialRetrievalError
        | boto.TokenRetrievalError
        | boto.SSOTokenLoadError
        | boto.UnauthorizedSSOTokenError,
    ):
        return f"no usable AWS credentials ({one_line(str(exc))}): {CREDENTIALS_HELP}", FAILURE
    if isinstance(exc, boto.NoRegionError):
        return "no AWS region: set AWS_REGION or the environment's region in config", USAGE
    if isinstance(exc, boto.ClientError):
        return _client_error(exc), FAILURE
    if isinstance(exc, FileNotFoundError) and exc.filename:
        # The lake's file systems raise it for a missing object (storage.missing), as S3's
        # NoSuchKey was described before: the path is what the operator needs.
        return f"{exc.strerror or 'not found'}: {exc.filename}", FAILURE
    if isinstance(exc, boto.EndpointConnectionError | boto.ConnectTimeoutError):
        endpoint = str(getattr(exc, "kwargs", {}).get("endpoint_url", "")) or str(exc)
        if _LOOPBACK.search(endpoint):
            hint = "a local stand-in (AWS_ENDPOINT_URL): is the local stack up? `cdclake local up`"
        else:
            hint = "check the network, a proxy or the region (AWS_REGION), then run it again"
        return f"cannot reach {endpoint}: {hint}", FAILURE
    if isinstance(exc, boto.ReadTimeoutError):
        return f"AWS did not answer in time ({one_line(str(exc))}): run it again", FAILURE
    if _spark_driver_gone(exc):  # before the loopback check: py4j talks to 127.0.0.1 too
        return SPARK_GONE_HELP, FAILURE
    if _refused_on_loopback(exc):
        return LOCAL_STACK_HELP, FAILURE
    return None


def _spark_driver_gone(exc: BaseException) -> bool:
    """py4j could not reach this process's JVM: it died (out of memory, killed)."""
    current: BaseException | None = exc
    seen: set[int] = set()
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if type(current).__name__ == "Py4JNetworkError":
            return True
        current = current.__cause__ or current.__context__
    return False


def _client_error(exc: Any) -> str:
    error = exc.response.get("Error", {})
    code = str(error.get("Code", ""))
    message = one_line(str(error.get("Message", "")) or str(exc))
    operation = getattr(exc, "operation_name", "") or "the call"
    if code in _EXPIRED:
        return f"AWS credentials have expired ({operation}): {CREDENTIALS_HELP}"
    if code in _DENIED:
        # AWS's own message names the principal, the action and the resource.
        return f"access denied by AWS ({operation}): {message}"
    if code in _THROTTLED:
        return f"AWS throttled {operation} ({code}): wait a minute and run it again"
    return f"AWS refused {operation} ({code}): {message}"


def _refused_on_loopback(exc: BaseException) -> bool:
    """A connection to 127.0.0.1 refused or reset: a local stack process that is not there."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        module = type(current).__module__
        text = str(current)
        if isinstance(current, ConnectionRefusedError | ConnectionResetError):
            return True
        if module.startswith(("pg8000", "requests", "urllib3")) and _LOOPBACK.search(text):
            return "connect" in text.lower() or "refused" in text.lower()
        current = current.__cause__ or current.__context__
    return False


def run(command: Callable[..., Any], args: Sequence[str]) -> int:
    """Run the typer ``command`` on ``args`` inside the boundary; the exit code.

    Typer's standalone mode still prints usage errors and ends every run in SystemExit; what
    escapes it is an exception of a command, turned here into one line.
    """
    if "--debug" in args:
        os.environ[DEBUG_VARIABLE] = "1"
        args = [a for a in args if a != "--debug"]
    try:
        command(args=list(args), prog_name="cdclake")
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return int(exc.code or 0)
        print(f"error: {one_line(str(exc.code))}", file=sys.stderr)
        return FAILURE
    except Exception as exc:
        if debug_enabled():
            raise
        described = describe(exc)
        if described is None:
            # A defect of ours, not an operator error: one line, and how to see the rest.
            described = (
                f"{type(exc).__name__}: {one_line(str(exc))} "
                "(rerun with --debug for the traceback, and report it if it is a bug)",
                FAILURE,
            )
        message, code = described
        print(f"error: {message}", file=sys.stderr)
        return code
    return 0
