#!/usr/bin/env bash
# Download the official connector releases and package them as MSK Connect custom plugins.
#
#   connectors/package_plugins.sh [--out DIR] [--upload s3://bucket/prefix]
#
# Produces, in DIR (default connectors/dist):
#   debezium-connector-postgres-<version>.zip   Debezium PostgreSQL connector (Maven Central)
#   confluentinc-kafka-connect-s3-<version>.zip Confluent S3 sink (Confluent Hub)
# each with the AWS MSK config providers added, because the shared worker configuration loads
# the Secrets Manager config provider and MSK Connect only sees classes inside the plugin.
#
# Versions are pinned here and in connectors/versions.py (a test keeps them equal):
#   - MSK Connect runs Kafka Connect 3.7.x on Java 17; Debezium 2.7 targets Kafka 3.7 / Java 11+.
#   - Confluent S3 sink 10.5.x supports Kafka Connect 3.x.
#   - msk-config-providers r0.1.0 is the release the MSK Connect config-provider tutorial uses.
# Override a version with the environment (e.g. DEBEZIUM_VERSION=2.7.3.Final) and pin the
# download by checksum with DEBEZIUM_SHA256 / S3_SINK_SHA256 / CONFIG_PROVIDERS_SHA256.
#
# Each zip is the same bytes whenever the same release is packaged (connectors/zip_plugin.sh),
# so a rebuild leaves the deployed plugins and connectors as they are.
# Needs curl, unzip, zip, tar and sha256sum; --upload needs the AWS CLI. `make plugins` runs
# this with --out connectors/dist: the default connect.debezium_plugin / connect.s3_sink_plugin
# point there and synth uploads the zips as CDK assets. With --upload, set the printed s3://
# keys in config/<env>.yaml (or pass them as `-c debezium_plugin=...`) instead.
set -euo pipefail

DEBEZIUM_VERSION="${DEBEZIUM_VERSION:-2.7.4.Final}"
S3_SINK_VERSION="${S3_SINK_VERSION:-10.5.17}"
CONFIG_PROVIDERS_VERSION="${CONFIG_PROVIDERS_VERSION:-0.1.0}"

DEBEZIUM_URL="https://repo1.maven.org/maven2/io/debezium/debezium-connector-postgres/${DEBEZIUM_VERSION}/debezium-connector-postgres-${DEBEZIUM_VERSION}-plugin.tar.gz"
S3_SINK_URL="https://hub-downloads.confluent.io/api/plugins/confluentinc/kafka-connect-s3/versions/${S3_SINK_VERSION}/confluentinc-kafka-connect-s3-${S3_SINK_VERSION}.zip"
CONFIG_PROVIDERS_URL="https://github.com/aws-samples/msk-config-providers/releases/download/r${CONFIG_PROVIDERS_VERSION}/msk-config-providers-${CONFIG_PROVIDERS_VERSION}-with-dependencies.zip"

OUT="connectors/dist"
UPLOAD=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) OUT="$2"; shift 2 ;;
    --upload) UPLOAD="${2%/}"; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

for tool in curl unzip zip tar sha256sum; do
  command -v "$tool" >/dev/null || { echo "missing tool: $tool" >&2; exit 1; }
done

HERE="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# fetch URL FILE EXPECTED_SHA256(optional): download, print the checksum, verify when pinned.
fetch() {
  local url="$1" file="$2" expected="${3:-}"
  echo "downloading $url"
  curl --fail --location --silent --show-error --retry 3 --output "$file" "$url"
  local actual
  actual="$(sha256sum "$file" | cut -d' ' -f1)"
  echo "  sha256 $actual"
  if [[ -n "$expected" && "$actual" != "$expected" ]]; then
    echo "checksum mismatch for $url: expected $expected" >&2
    exit 1
  fi
}

fetch "$CONFIG_PROVIDERS_URL" "$WORK/providers.zip" "${CONFIG_PROVIDERS_SHA256:-}"
mkdir -p "$WORK/providers"
unzip -q "$WORK/providers.zip" -d "$WORK/providers"

# Debezium: the plugin tarball holds one folder of jars; add the providers beside them.
fetch "$DEBEZIUM_URL" "$WORK/debezium.tar.gz" "${DEBEZIUM_SHA256:-}"
mkdir -p "$WORK/debezium"
tar -xzf "$WORK/debezium.tar.gz" -C "$WORK/debezium"
mkdir -p "$WORK/debezium/msk-config-providers"
cp -R "$WORK/providers/." "$WORK/debezium/msk-config-providers/"
DEBEZIUM_ZIP="$OUT/debezium-connector-postgres-${DEBEZIUM_VERSION}.zip"
"$HERE/zip_plugin.sh" "$WORK/debezium" "$DEBEZIUM_ZIP"

# Confluent S3 sink: a Confluent Hub archive (lib/ holds the jars); add the providers to lib/.
fetch "$S3_SINK_URL" "$WORK/s3-sink.zip" "${S3_SINK_SHA256:-}"
mkdir -p "$WORK/s3-sink"
unzip -q "$WORK/s3-sink.zip" -d "$WORK/s3-sink"
SINK_LIB="$(find "$WORK/s3-sink" -maxdepth 2 -type d -name lib | head -n 1)"
[[ -n "$SINK_LIB" ]] || { echo "no lib/ folder in the S3 sink archive" >&2; exit 1; }
find "$WORK/providers" -name '*.jar' -exec cp {} "$SINK_LIB/" \;
S3_SINK_ZIP="$OUT/confluentinc-kafka-connect-s3-${S3_SINK_VERSION}.zip"
"$HERE/zip_plugin.sh" "$WORK/s3-sink" "$S3_SINK_ZIP"

echo "packaged:"
ls -l "$DEBEZIUM_ZIP" "$S3_SINK_ZIP"

if [[ -n "$UPLOAD" ]]; then
  command -v aws >/dev/null || { echo "--upload needs the AWS CLI" >&2; exit 1; }
  aws s3 cp "$DEBEZIUM_ZIP" "$UPLOAD/$(basename "$DEBEZIUM_ZIP")"
  aws s3 cp "$S3_SINK_ZIP" "$UPLOAD/$(basename "$S3_SINK_ZIP")"
  echo "set in config/<env>.yaml:"
  echo "  connect.debezium_plugin: $UPLOAD/$(basename "$DEBEZIUM_ZIP")"
  echo "  connect.s3_sink_plugin: $UPLOAD/$(basename "$S3_SINK_ZIP")"
fi
