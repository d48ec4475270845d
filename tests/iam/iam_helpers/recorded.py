"""Recorded requests: what moto cannot enforce, checked against the statements.

Spark's S3A client (AWS SDK v1) gets 403 from a moto server that enforces IAM, whatever the
policy (docs/iam.md). The merge job therefore runs against a moto server that records every
request (moto's own recorder: method, URL, headers, body) and enforces nothing; each recorded
request is then mapped to the IAM action, resource and condition keys AWS authorizes it with,
and checked against the role's verbatim statements, conditions included. Debezium Server's
Kinesis writes are read from the same kind of recording.
"""

from __future__ import annotations

import base64
import json
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import boto3

from tests.iam.iam_helpers.moto import PARTITION, REGION
from tests.iam.iam_helpers.statements import Access
from tests.iam.iam_helpers.templates import Physical, Resolver, logical_id, symbolic_resolver


def recorded_accesses(recording: str, account: str | None = None) -> list[Access]:
    """The IAM authorizations of every request in a moto recording (one JSON per line);
    ``account`` names the ARNs of Glue jobs."""
    accesses: list[Access] = []
    for line in recording.splitlines():
        if line.strip():
            accesses += request_accesses(json.loads(line), account)
    return accesses


#: Glue job operations and the request field naming the job they act on.
GLUE_JOB_OPERATIONS = {"GetJob": "JobName", "GetJobRuns": "JobName", "StartJobRun": "JobName"}


def request_accesses(entry: Mapping[str, Any], account: str | None = None) -> list[Access]:
    """What AWS authorizes for one recorded request (S3's REST API, CloudWatch metrics, Glue's
    job calls).

    The service is the one the request is signed for. A request of any other kind raises,
    naming it: an unmapped request must not pass unchecked.
    """
    from urllib.parse import parse_qs, unquote, urlsplit

    headers = {k.lower(): v for k, v in entry["headers"].items()}
    url = urlsplit(entry["url"])
    method = entry["method"]
    named = f"{method} {url.path}" + (f"?{url.query}" if url.query else "")
    scope = headers.get("authorization", "").partition("Credential=")[2].split(",")[0]
    service = scope.split("/")[3] if scope.count("/") >= 4 else ""
    body = base64.b64decode(entry["body"]) if entry.get("body_encoded") else entry.get("body")

    def access(action: str, resource: str, **context: str) -> Access:
        return Access(action, resource, tuple(sorted(context.items())), named)

    if service == "monitoring":
        # botocore speaks JSON (X-Amz-Target) or CBOR (the operation in the path) to CloudWatch.
        target = headers.get("x-amz-target") or url.path
        operation = target.rsplit(".", 1)[-1].rsplit("/", 1)[-1]
        if operation == "PutMetricData":
            if "json" in headers.get("content-type", ""):
                payload = json.loads(body or "{}")
            else:
                from io import BytesIO

                from botocore.parsers import RpcV2CBORParser

                payload = RpcV2CBORParser().parse_data_item(BytesIO(body or b""))
            namespace = {"cloudwatch:namespace": payload["Namespace"]}
            return [access("cloudwatch:PutMetricData", "*", **namespace)]
    if service == "glue" and account is not None:
        operation = headers.get("x-amz-target", "").rsplit(".", 1)[-1]
        payload = json.loads(body or "{}")
        if operation == "ListJobs":  # no resource-level permission
            return [access("glue:ListJobs", "*")]
        if operation in GLUE_JOB_OPERATIONS:
            region = scope.split("/")[2]
            job = payload[GLUE_JOB_OPERATIONS[operation]]
            return [
                access(f"glue:{operation}", f"arn:{PARTITION}:glue:{region}:{account}:job/{job}")
            ]
    if service != "s3":
        raise NotImplementedError(f"no IAM mapping for {service or 'an unsigned'} request {named}")

    query = parse_qs(url.query, keep_blank_values=True)
    bucket, _, key = url.path.lstrip("/").partition("/")
    key = unquote(key)
    bucket_arn = f"arn:{PARTITION}:s3:::{bucket}"
    if not key:
        if method == "POST" and "delete" in query:
            keys = re.findall(
                r"<Key>(.*?)</Key>",
                (body or b"").decode() if isinstance(body, bytes) else body or "",
            )
            return [access("s3:DeleteObject", f"{bucket_arn}/{_xml_text(k)}") for k in keys]
        if method in ("GET", "HEAD") and "location" in query:
            return [access("s3:GetBucketLocation", bucket_arn)]
        if method == "GET" and "uploads" in query:
            return [access("s3:ListBucketMultipartUploads", bucket_arn)]
        if method == "HEAD" or (method == "GET" and not set(query) - LIST_PARAMETERS):
            # s3:prefix is in the request context only when the request has a prefix.
            prefix = {"s3:prefix": query["prefix"][0]} if "prefix" in query else {}
            return [access("s3:ListBucket", bucket_arn, **prefix)]
        raise NotImplementedError(f"no IAM mapping for bucket request {named}")
    object_arn = f"{bucket_arn}/{key}"
    if method in ("GET", "HEAD") and "uploadId" in query:
        return [access("s3:ListMultipartUploadParts", object_arn)]
    if method in ("GET", "HEAD") and not set(query) - OBJECT_READ_PARAMETERS:
        return [access("s3:GetObject", object_arn)]
    if method == "PUT" and "x-amz-copy-source" in headers:
        source = unquote(headers["x-amz-copy-source"]).lstrip("/").split("?", 1)[0]
        return [
            access("s3:PutObject", object_arn),
            access("s3:GetObject", f"arn:{PARTITION}:s3:::{source}"),
        ]
    if method in ("PUT", "POST") and set(query) <= {"uploads", "uploadId", "partNumber"}:
        return [access("s3:PutObject", object_arn)]
    if method == "DELETE" and "uploadId" in query:
        return [access("s3:AbortMultipartUpload", object_arn)]
    if method == "DELETE" and not query:
        return [access("s3:DeleteObject", object_arn)]
    raise NotImplementedError(f"no IAM mapping for object request {named}")


#: Query parameters of a ListObjects(V2) request (anything else on a bucket GET is another API).
LIST_PARAMETERS = frozenset(
    {
        "list-type",
        "prefix",
        "delimiter",
        "max-keys",
        "marker",
        "start-after",
        "continuation-token",
        "encoding-type",
        "fetch-owner",
    }
)


#: Query parameters a GetObject/HeadObject may carry without becoming another API.
OBJECT_READ_PARAMETERS = frozenset({"partNumber", "response-content-type"})


def _xml_text(text: str) -> str:
    from xml.sax.saxutils import unescape

    return unescape(text, {"&quot;": '"', "&apos;": "'"})


def sse_kms_accesses(accesses: Sequence[Access], bucket_keys: Mapping[str, str]) -> list[Access]:
    """What S3 asks KMS for, as the caller, on a bucket whose default encryption is SSE-KMS
    (``bucket_keys``: bucket name -> key ARN): ``kms:GenerateDataKey`` to write an object,
    ``kms:Decrypt`` to read one. moto does not call KMS; AWS does, with the caller's rights."""
    derived = []
    for access in accesses:
        bucket = access.resource.removeprefix(f"arn:{PARTITION}:s3:::").split("/", 1)[0]
        if bucket not in bucket_keys or "/" not in access.resource.split(":::", 1)[1]:
            continue
        if access.action == "s3:PutObject":
            derived.append(Access("kms:GenerateDataKey", bucket_keys[bucket], (), access.request))
        elif access.action == "s3:GetObject":
            derived.append(Access("kms:Decrypt", bucket_keys[bucket], (), access.request))
    return derived


#: Debezium Server's Kinesis sink is the AWS SDK for Java v2; the local stack's own clients and
#: the fan-out handler are boto3 ("Boto3/...").
SERVER_USER_AGENT = "aws-sdk-java/"


@dataclass(frozen=True)
class ServerRecording:
    """moto's recording of the local stack with the fan-out, and the stream of each table."""

    recording: str
    streams: Mapping[str, str]


def kinesis_accesses(
    recording: str,
    user_agent: str,
    stream_arns: Mapping[str, str],
    stream_keys: Mapping[str, str],
    others: Sequence[str] = (),
) -> list[Access]:
    """The IAM authorizations of the recorded requests whose User-Agent starts with
    ``user_agent``: ``kinesis:<operation>`` on the stream (by name or ARN in the JSON body),
    and for a write to an encrypted stream ``kms:GenerateDataKey`` on its key (what Kinesis
    asks KMS for with the producer's permissions). Any other request of that client, or an
    unknown stream, raises: an unmapped request must not pass unchecked. ``others``: URL path
    prefixes of S3 objects another process writes with the same SDK on the same moto server
    (the lake capture's S3 sink), whose requests are not this client's."""
    accesses: list[Access] = []
    by_arn = {arn: arn for arn in stream_arns.values()}
    for line in recording.splitlines():
        if not line.strip():
            continue
        entry = json.loads(line)
        headers = {k.lower(): v for k, v in entry["headers"].items()}
        if not headers.get("user-agent", "").startswith(user_agent):
            continue
        target = headers.get("x-amz-target", "")
        if not target and urllib.parse.urlsplit(entry["url"]).path.startswith(tuple(others)):
            continue
        named = f"{entry['method']} {target or entry['url']}"
        service, _, operation = target.partition(".")
        if not service.startswith("Kinesis_"):
            raise NotImplementedError(f"no IAM mapping for {named}")
        raw = entry.get("body") or "{}"
        body = json.loads(base64.b64decode(raw) if entry.get("body_encoded") else raw)
        stream = body.get("StreamARN") or body.get("StreamName")
        arn = by_arn.get(stream) or stream_arns.get(stream)
        if arn is None:
            raise LookupError(f"{named}: unknown stream {stream!r}")
        accesses.append(Access(f"kinesis:{operation}", arn, (), named))
        if operation in ("PutRecord", "PutRecords") and arn in stream_keys:
            accesses.append(Access("kms:GenerateDataKey", stream_keys[arn], (), named))
    return accesses


@dataclass(frozen=True)
class LakeWorld:
    """The lake stack's key and buckets created in moto, and how to resolve its template."""

    resolve: Resolver
    bucket_keys: dict[str, str]  # bucket -> KMS key ARN, where the template encrypts SSE-KMS


def lake_world(
    templates: Mapping[str, Mapping[str, Any]], account: str, buckets: Sequence[str], suffix: str
) -> LakeWorld:
    """The lake's key and the ``buckets`` (logical id prefixes) in the current moto, named
    ``<env>-<name>-<suffix>``. The template's default encryption is not set in moto: S3A (SDK
    v1) refuses to copy an object moto reports as SSE-KMS over plain HTTP; what it costs in
    KMS rights is derived from the template instead (:func:`sse_kms_accesses`)."""
    lake = templates["lake"]
    physical: dict[str, Physical] = {}
    key_id = logical_id(lake, "AWS::KMS::Key", "StorageKey")
    key_arn = boto3.client("kms", region_name=REGION).create_key()["KeyMetadata"]["Arn"]
    physical[key_id] = Physical(key_arn, {"Arn": key_arn})
    # Other stacks' resources (the bootstrap function a rebuild run signals through) are named
    # symbolically: these runs never call them.
    others = symbolic_resolver(templates, account).physical
    resolve = Resolver(
        templates,
        {"lake": physical, **{r: others[r] for r in templates if r != "lake"}},
        account=account,
    )
    s3 = boto3.client("s3", region_name=REGION)
    bucket_keys: dict[str, str] = {}
    for prefix in buckets:
        lid = logical_id(lake, "AWS::S3::Bucket", prefix)
        bucket = f"dev-{prefix.removeprefix('Storage').lower()}-{suffix}"
        physical[lid] = Physical(bucket, {"Arn": f"arn:aws:s3:::{bucket}"})
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
        encryption = resolve(lake["Resources"][lid]["Properties"]["BucketEncryption"], "lake")
        (rule,) = encryption["ServerSideEncryptionConfiguration"]
        default = rule["ServerSideEncryptionByDefault"]
        if default["SSEAlgorithm"] == "aws:kms":
            bucket_keys[bucket] = default["KMSMasterKeyID"]
    return LakeWorld(resolve, bucket_keys)
