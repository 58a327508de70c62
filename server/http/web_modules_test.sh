#!/bin/sh
# Runs the web page's module tests (server/http/web_test/*.test.mjs) with
# node --test: Debian's nodejs, no npm packages. Fails when node is missing
# (tools/setup.sh installs it).
set -eu
node=$(command -v node || command -v nodejs || true)
if [ -z "$node" ]; then
  echo "web_modules_test: no node on PATH (tools/setup.sh installs Debian's nodejs)" >&2
  exit 1
fi
dir="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-argsdump}/server/http/web_test"
[ -d "$dir" ] || dir="$(dirname "$0")/web_test"
# The server's filter schema (GET /v1/schema), which filters.test.mjs
# builds the form's fields from.
ARGSDUMP_SCHEMA_JSON="$dir/../schema.json"
[ -f "$ARGSDUMP_SCHEMA_JSON" ] || { echo "web_modules_test: no $ARGSDUMP_SCHEMA_JSON" >&2; exit 1; }
export ARGSDUMP_SCHEMA_JSON
exec "$node" --test "$dir"/*.test.mjs
