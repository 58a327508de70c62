#!/usr/bin/env bash
# Runs the libFuzzer targets (clang 14, ASan + UBSan: --config=fuzz) for a
# while each, from their seed corpora; a crash leaves its input in
# .fuzz/<target>/ and fails. Add the input to the target's seeds
# (*/testdata/*_corpus/) once fixed: every test pass replays them.
#   tools/fuzz.sh            30 s per target
#   tools/fuzz.sh 300        5 min per target
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
# target (package:name) and its seed folder
targets=(
  "viewer:zip_archive_fuzzer viewer/testdata/zip_corpus"
  "viewer:zip_extract_fuzzer viewer/testdata/zip_extract_corpus"
  "viewer:manifest_reader_fuzzer viewer/testdata/manifest_corpus"
  "format:capture_index_fuzzer format/testdata/index_corpus"
  "tests:journal_fuzzer tests/testdata/journal_corpus"
  "tests:ingest_stream_fuzzer tests/testdata/ingest_corpus"
  "server:page_token_fuzzer server/testdata/page_token_corpus"
  "store:payload_map_fuzzer store/testdata/payload_map_corpus"
  "server/http:tensor_view_fuzzer server/http/testdata/tensor_view_corpus"
  "device:workload_fuzzer device/testdata/workload_corpus"
  "device:dump_config_fuzzer device/testdata/dump_config_corpus"
  "base:token_fuzzer base/testdata/token_corpus"
  "device:flight_fuzzer device/testdata/flight_corpus"
  "tools:quantity_fuzzer tools/testdata/quantity_corpus"
  "collector:refused_record_fuzzer collector/testdata/refused_record_corpus"
  "format:job_fuzzer format/testdata/job_corpus"
  "s3:s3_xml_fuzzer s3/testdata/s3_xml_corpus"
  "catalog:catalog_row_fuzzer catalog/testdata/catalog_row_corpus"
  "store:segment_fuzzer store/testdata/segment_corpus"
)
labels=()
for t in "${targets[@]}"; do labels+=("//${t%% *}"); done
if ! bazel build --config=fuzz "${labels[@]}" >/tmp/argsdump_fuzz_build.log 2>&1; then
  tail -20 /tmp/argsdump_fuzz_build.log
  echo "fuzz: build failed"
  exit 1
fi
bin=$(bazel info --config=fuzz bazel-bin 2>/dev/null)
# One target for `seconds`; its report goes to .fuzz/<name>/report, and it
# fails when the target found a crash.
fuzz_one() {
  local label=${1%% *} seeds=${1#* }
  local name=${label#*:}
  local work=".fuzz/$name"
  mkdir -p "$work/corpus" "$work/crashes"
  cp -n "$seeds"/* "$work/corpus/" 2>/dev/null || true
  if "$bin/${label%%:*}/$name" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
      -artifact_prefix="$work/crashes/" -print_final_stats=1 "$work/corpus" 2>"$work/log"; then
    { echo "=== fuzz $label for ${seconds}s"
      grep -E "^stat::number_of_executed_units|^Done" "$work/log" | tr '\n' ' '; echo; } > "$work/report"
  else
    { echo "=== fuzz $label for ${seconds}s"
      tail -40 "$work/log"
      echo "fuzz: $label found a crash: $(ls "$work/crashes")"; } > "$work/report"
    return 1
  fi
}
# The targets run side by side, one a core (each is one process on one
# thread): the phase takes its time budget once per core, not per target.
jobs=$(nproc)
rc=0
running=()
for t in "${targets[@]}"; do
  if [ "${#running[@]}" -ge "$jobs" ]; then
    wait "${running[0]}" || rc=1
    running=("${running[@]:1}")
  fi
  fuzz_one "$t" &
  running+=("$!")
done
for pid in "${running[@]}"; do wait "$pid" || rc=1; done
for t in "${targets[@]}"; do
  label=${t%% *}
  cat ".fuzz/${label#*:}/report"
done
exit $rc
