#!/usr/bin/env bash
# Checks dependency edges against the project's layers. Reads edges on stdin,
# one per line: "<from label> <to label> <from is test-only: 0|1> <from kind>",
# prints every edge a package may not have, and exits 1 if there is one.
#
# What each top-level package may depend on besides itself (everything may
# use third_party and bazel):
#   proto                 -
#   base                  proto
#   tools                 proto base
#   format                proto base tools
#   device                proto base tools format
#   s3                    proto base tools format
#   catalog               proto base tools
#   store                 proto base tools format s3 catalog
#   client                proto base tools format
#   collector             ... format device store client
#   viewer                ... format client
#   sdk                   ... format device store client collector viewer
#   server                ... format store s3 catalog
#   apps                  ... format device store client collector viewer sdk
#   examples              sdk
#   tests, docs, //:      anything
# Exceptions: a test-only target may also use the shared test helpers
# (//tests/...), the store (to write captures to read back) and the public
# binaries (capture_server, sim_run: run as processes, not linked); an alias
# may point anywhere (old labels kept working).
set -euo pipefail

awk '
BEGIN {
  low = "third_party bazel proto base tools format"
  may["third_party"] = ""
  may["bazel"] = "third_party"
  may["proto"] = "third_party bazel"
  may["base"] = "third_party bazel proto"
  may["tools"] = "third_party bazel proto base"
  may["format"] = low
  may["device"] = low
  may["s3"] = low
  may["store"] = low " s3 catalog"
  may["client"] = low
  may["catalog"] = "third_party bazel proto base tools"
  may["collector"] = low " device store client"
  may["viewer"] = low " client"
  may["sdk"] = low " device store client collector viewer"
  may["server"] = low " store s3 catalog"
  may["apps"] = low " device store client collector viewer sdk"
  may["examples"] = "third_party bazel sdk"
  may["tests"] = "*"; may["docs"] = "*"; may[""] = "*"
  binary["//server:capture_server"] = 1
  binary["//apps/sim_run:sim_run"] = 1
}
function top(label,   pkg) {
  pkg = label; sub(/^\/\//, "", pkg); sub(/[:].*$/, "", pkg); sub(/\/.*$/, "", pkg)
  return pkg
}
function allowed(from, to,   list, n, i, a) {
  if (from == to || may[from] == "*") return 1
  n = split(may[from], a, " ")
  for (i = 1; i <= n; i++) if (a[i] == to) return 1
  return 0
}
NF < 4 { next }
$1 !~ /^\/\// || $2 !~ /^\/\// { next }
{
  from = top($1); to = top($2)
  if (!(from in may)) { print "unknown package (add it to tools/layers.sh): " $1; bad++; next }
  if (!(to in may)) { print "unknown package (add it to tools/layers.sh): " $2; bad++; next }
  if ($4 == "alias") next
  if ($3 == "1" && (to == "tests" || to == "store" || $2 in binary)) next
  if (!allowed(from, to)) {
    printf "upward dependency: %s -> %s (%s may use: %s)\n", $1, $2, from, may[from]
    bad++
  }
}
END {
  if (bad) { printf "%d edge(s) break the layers (tools/layers.sh)\n", bad; exit 1 }
}'
