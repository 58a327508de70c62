#!/usr/bin/env bash
# tools/layers.sh accepts edges down the layers and refuses each kind of
# edge that goes up or sideways, naming it.
set -uo pipefail
layers="$1"
fail() { echo "FAIL: $*"; exit 1; }

ok_edges='//store:capture_store //format:record 0 cc_library
//sdk:argsdump //collector:collector 0 cc_library
//store:capture_store_test //tests/testing:temp_dir 1 cc_test
//collector:sim_run //apps/sim_run:sim_run 0 alias
//server:capture_hub //store:capture_store 0 cc_library
//tests:x //server:capture_service 1 cc_test
//sdk:x_test //server:capture_server 1 cc_test'
out=$(printf '%s\n' "$ok_edges" | bash "$layers") || fail "good edges refused: $out"

expect_refused() {
  out=$(printf '%s\n' "$1" | bash "$layers") && fail "accepted: $1"
  grep -qF -- "$2" <<< "$out" || fail "for '$1' expected '$2' in: $out"
}
expect_refused '//collector:sim_job //sdk:argsdump 0 cc_library' 'upward dependency: //collector:sim_job -> //sdk:argsdump (collector may use'
expect_refused '//sdk:wiring //server:capture_hub 0 cc_library' '-> //server:capture_hub'
expect_refused '//server:x //sdk:argsdump 0 cc_library' '//server:x -> //sdk:argsdump'
expect_refused '//proto:a //tools:b 0 cc_library' '//proto:a -> //tools:b'
expect_refused '//store:x //tests/testing:temp_dir 0 cc_library' '//tests/testing:temp_dir'
expect_refused '//store:x //client:capture_client 1 cc_test' '-> //client:capture_client'
expect_refused '//viewer:x //collector:sink 0 cc_library' '//viewer:x -> //collector:sink'
expect_refused '//examples:x //device:sim 0 cc_library' '//examples:x -> //device:sim'
expect_refused '//newpkg:x //base:files 0 cc_library' 'unknown package'
expect_refused '//sdk:x //server:capture_server 0 cc_library' '//sdk:x -> //server:capture_server'
expect_refused '//sdk:x_test //server:capture_hub 1 cc_test' '//sdk:x_test -> //server:capture_hub'
echo PASS
