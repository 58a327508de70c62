#!/usr/bin/env bash
# Fails when a package depends upward or sideways (the layers are in
# tools/layers.sh). Asks Bazel for every direct dependency edge inside the
# workspace, marks each edge's source as test-only or not and with its rule
# kind, and hands the edges to tools/layers.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

q() { bazel query --noimplicit_deps --keep_going "$@" 2>/dev/null || true; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
q 'kind(rule, //...)' --output=label_kind | awk '{print $3, $1}' | sort > "$tmp/kinds"
q 'attr(testonly, 1, //...) + tests(//...)' | sort -u > "$tmp/testonly"
q 'deps(//..., 1) intersect //...' --output=graph --nograph:factored |
  sed -nE 's/^ *"([^"]+)" -> "([^"]+)".*/\1 \2/p' | sort > "$tmp/edges"
[ -s "$tmp/edges" ] || { echo "check_layers: bazel query returned no edges" >&2; exit 2; }
awk -v kinds="$tmp/kinds" -v testonly="$tmp/testonly" '
  BEGIN {
    while ((getline l < kinds) > 0) { split(l, a, " "); kind[a[1]] = a[2] }
    while ((getline l < testonly) > 0) test[l] = 1
  }
  $1 != $2 { print $1, $2, ($1 in test) ? 1 : 0, kind[$1] }
' "$tmp/edges" | bash tools/layers.sh
echo "check_layers: $(wc -l < "$tmp/edges") edges, none upward"
