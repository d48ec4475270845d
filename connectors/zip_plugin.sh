#!/usr/bin/env bash
# Zip a plugin folder so that the same files give the same bytes, whenever and wherever built:
#
#   connectors/zip_plugin.sh DIR ZIP
#
# A deploy uploads a plugin zip as an asset named by its hash, the custom plugin is named by
# that hash too (stacks/components/kafka_connectors.py), and a new plugin replaces the
# connectors, whose names are fixed: CloudFormation refuses that ("cannot update a stack when a
# custom-named resource requires replacing"). So a rebuild of the same release must not change
# a byte: every mtime is fixed (zip stores them), modes are normalized (it stores those too),
# entries are added in byte order (not the file system's), and -X leaves out the owner and
# the extra timestamps. DIR's files are touched in place.
set -euo pipefail

[[ $# -eq 2 ]] || { echo "usage: $0 DIR ZIP" >&2; exit 2; }
DIR="$1"
ZIP="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"

rm -f "$ZIP"
cd "$DIR"
find . -type d -exec chmod 0755 {} +
find . -type f -exec chmod 0644 {} +
# zip stores local time: the same instant in every time zone.
export TZ=UTC
find . -exec touch -h -d '1980-01-01 00:00:00' {} +
find . -type f -print | LC_ALL=C sort | zip -q -X -@ "$ZIP"
