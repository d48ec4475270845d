"""The moto servers the least-privilege tests run against, in their own processes.

One enforces IAM (:func:`moto_server`): every request after the admin's setup is authenticated
and authorized. The other (:func:`recording_moto_server`) enforces nothing and records every
request, for clients that moto's enforcement refuses whatever the policy (Spark's S3A; see
:mod:`tests.iam.iam_helpers.recorded`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from cdclake.local import processes

REGION = "eu-west-1"


PARTITION = "aws"


ADMIN = "iam-tests-admin"


@dataclass(frozen=True)
class Keys:
    access_key_id: str
    secret_access_key: str


@dataclass(frozen=True)
class MotoIam:
    endpoint: str
    account: str
    admin: Keys

    def client(self, service: str, keys: Keys | None = None) -> Any:
        keys = keys or self.admin
        return boto3.client(
            service,
            region_name=REGION,
            endpoint_url=self.endpoint,
            aws_access_key_id=keys.access_key_id,
            aws_secret_access_key=keys.secret_access_key,
        )


#: The setup calls moto answers before it starts enforcing: create the admin, its policy, its key.
SETUP_CALLS = 3


@contextmanager
def moto_server(log: Path, account: str) -> Iterator[MotoIam]:
    """``python -m moto.server`` with IAM enforcement after :data:`SETUP_CALLS` calls.

    Those first calls create an admin user (``*`` on ``*``) whose keys set up the resources;
    every later request, the admin's included, is authenticated and authorized. The account
    is the templates' (``MOTO_ACCOUNT_ID``), so their literal ARNs name moto's resources.
    """
    port = processes.free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
        "INITIAL_NO_AUTH_ACTION_COUNT": str(SETUP_CALLS),
        "MOTO_ACCOUNT_ID": account,
    }
    proc = processes.spawn(
        "moto",
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        log=log,
        env=env,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        processes.wait_for("moto", lambda: processes.port_open(port), timeout=60, proc=proc)
        iam = boto3.client(
            "iam",
            region_name=REGION,
            endpoint_url=endpoint,
            aws_access_key_id="setup",
            aws_secret_access_key="setup",
        )
        iam.create_user(UserName=ADMIN)
        iam.put_user_policy(
            UserName=ADMIN,
            PolicyName="admin",
            PolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
                }
            ),
        )
        key = iam.create_access_key(UserName=ADMIN)["AccessKey"]
        yield MotoIam(endpoint, account, Keys(key["AccessKeyId"], key["SecretAccessKey"]))
    finally:
        processes.stop(proc)


@contextmanager
def recording_moto_server(log: Path, recording: Path, account: str) -> Iterator[str]:
    """``python -m moto.server`` without IAM enforcement, recording every request to
    ``recording`` (``MOTO_ENABLE_RECORDING``); the endpoint."""
    port = processes.free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
        "MOTO_ACCOUNT_ID": account,
        "MOTO_ENABLE_RECORDING": "true",
        "MOTO_RECORDER_FILEPATH": str(recording),
    }
    proc = processes.spawn(
        "moto-recording",
        [sys.executable, "-c", _LOCKED_RECORDER, "-H", "127.0.0.1", "-p", str(port)],
        log=log,
        env=env,
    )
    try:
        processes.wait_for("moto", lambda: processes.port_open(port), timeout=60, proc=proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        processes.stop(proc)


#: ``moto.server`` whose recorder appends one request at a time: moto's appends from every
#: server thread unlocked, and S3A's concurrent uploads interleaved two entries in one line.
_LOCKED_RECORDER = """
import sys, threading
from moto.moto_api._internal.recorder.models import Recorder
from moto.server import main
lock, record = threading.Lock(), Recorder._record_request
def locked(self, request, body=None):
    with lock:
        record(self, request, body)
Recorder._record_request = locked
main(sys.argv[1:])
"""


def recorder(endpoint: str, command: str) -> str:
    """moto's recorder API: ``reset-recording``, ``download-recording``, ..."""
    import requests

    method = "GET" if command == "download-recording" else "POST"
    response = requests.request(method, f"{endpoint}/moto-api/recorder/{command}", timeout=60)
    response.raise_for_status()
    return response.text


def use_recording_moto(patch: pytest.MonkeyPatch, endpoint: str, user: str) -> None:
    """boto3 (and S3A, through the same variables) on ``endpoint`` with ``user``'s dummy keys,
    nothing of this machine's AWS configuration."""
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        patch.delenv(name)
    patch.setenv("AWS_ENDPOINT_URL", endpoint)
    patch.setenv("AWS_ACCESS_KEY_ID", user)
    patch.setenv("AWS_SECRET_ACCESS_KEY", user)
    patch.setenv("AWS_DEFAULT_REGION", REGION)
    patch.setenv("AWS_CONFIG_FILE", os.devnull)
    patch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
