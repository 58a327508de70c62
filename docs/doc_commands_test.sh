#!/usr/bin/env bash
# Runs the shell commands of README.md and docs/*.md against the built
# binaries, so that a page cannot name a flag, a label or a workload that is
# gone. Every command of a ```sh block is run or skipped, and each skip is
# listed with its reason:
#   - `bazel run [-c opt] LABEL -- ARGS` of sim_run, dump_viewer or
#     capture_server runs the binary from the runfiles with ARGS;
#     `tools/run.sh ARGS` runs sim_run --dump-args 2 ARGS, as run.sh does;
#   - a capture_server is started on 127.0.0.1:0, waited for ("listening
#     on"), stopped with SIGTERM, and must exit 0;
#   - `H=URL` and `curl` run against a capture service's HTTP face: an
#     HTTP error is taken (the commands finish and delete a capture) but not
#     an endpoint or a parameter the server does not know;
#   - other commands (bazel test, the suite, the benchmarks, grpc_cli) are
#     skipped with the reason below.
# A command must exit 0 unless the block is preceded by
#   <!-- doc-test: exit 0,1 WHY -->     (the exit statuses it may have)
# and a block preceded by
#   <!-- doc-test: skip WHY -->
# is skipped whole. A table or paragraph preceded by
#   <!-- doc-test: flags sim_run|dump_viewer|capture_server -->
# has every --flag it names (of a table: in its first column) checked
# against that binary's --help.
# The commands run in a scratch folder that stands for the user's workspace:
# outputs/run, outputs/old and outputs/new hold captures, dump.json a dump
# configuration, token a bearer token, bazel-testlogs/axpb_test an SDK
# test's outputs.zip, and a capture service (with a capture run1,
# labelled target=//:axpb_test) answers for 127.0.0.1:50051 and
# ci-host:50051, another one (with its own run1) for http://127.0.0.1:8080.
# Usage: doc_commands_test.sh SIM_RUN DUMP_VIEWER CAPTURE_SERVER PAGE.md...
set -uo pipefail
sim_run="$(realpath "$1")"
dump_viewer="$(realpath "$2")"
capture_server="$(realpath "$3")"
shift 3
runfiles="$PWD"
pages=()
for page in "$@"; do pages+=("$runfiles/${page#./}"); done
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
work="$tmp/workspace"
mkdir -p "$work" "$tmp/home"
export HOME="$tmp/home" BUILD_WORKING_DIRECTORY="$work"
unset XDG_CACHE_HOME TEST_UNDECLARED_OUTPUTS_DIR ARGSDUMP_CAPTURE_SERVER
cd "$work" || exit 1

fails=0 ran=0 skipped=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

# Waits (at most 60 s) for a capture_server to print that it listens; the
# pipeline's status is grep's (tail ends on SIGPIPE or the timeout).
wait_listening() {  # wait_listening OUT_FILE PID [LINE]
  set +o pipefail
  timeout 60 tail -n +1 -f "$1" --pid "$2" | grep -m1 -q "${3:-listening on}"
  local rc=$?
  set -o pipefail
  return "$rc"
}

# --- the workspace the commands run in ----------------------------------
setup() {
  "$sim_run" --dump-args 2 --workload mixed_example --output-prefix outputs/run > "$tmp/setup.log" 2>&1 &&
    "$sim_run" --dump-args 2 --output-prefix outputs/old >> "$tmp/setup.log" 2>&1 &&
    "$sim_run" --dump-args 2 --output-prefix outputs/new >> "$tmp/setup.log" 2>&1 &&
    "$sim_run" --dump-args 2 --output-prefix "$tmp/axpb/Axpb.ThreeSteps" >> "$tmp/setup.log" 2>&1 ||
    { cat "$tmp/setup.log"; echo "FAIL setup: sim_run"; exit 1; }
  mkdir -p bazel-testlogs/axpb_test/test.outputs
  (cd "$tmp/axpb" && zip -qr "$work/bazel-testlogs/axpb_test/test.outputs/outputs.zip" Axpb.ThreeSteps) ||
    { echo "FAIL setup: zip"; exit 1; }
  printf '{"level": 2}\n' > dump.json
  printf 'doc-test-token\n' > token
  # The service the gRPC commands use, and one for the HTTP commands (which
  # finish and delete their run1).
  start_service grpc
  service=$(sed -n 's/^capture_server listening on \([^ ]*\).*/\1/p' "$tmp/grpc.out")
  start_service http --http_listen 127.0.0.1:0
  http=$(sed -n 's|^capture_server http on \(http://[^/]*\).*|\1|p' "$tmp/http.out")
}
service_pids=()
start_service() {  # start_service NAME [FLAGS...]: a capture_server holding run1
  local name="$1"
  shift
  : > "$tmp/$name.out"
  "$capture_server" --listen 127.0.0.1:0 --root "$tmp/$name" "$@" > "$tmp/$name.out" 2> "$tmp/$name.err" &
  service_pids+=($!)
  wait_listening "$tmp/$name.out" "$!" "${1:+http on}" ||
    { cat "$tmp/$name.err"; echo "FAIL setup: capture_server ($name) did not start"; exit 1; }
  local address
  address=$(sed -n 's/^capture_server listening on \([^ ]*\).*/\1/p' "$tmp/$name.out")
  "$sim_run" --dump-args 2 --workload mixed_example --capture-server "$address" \
    --capture-name run1 --labels target=//:axpb_test,user=me,case=demo >> "$tmp/setup.log" 2>&1 ||
    { cat "$tmp/setup.log"; echo "FAIL setup: streaming run1 ($name)"; exit 1; }
}
trap 'kill "${service_pids[@]}" 2>/dev/null; wait 2>/dev/null' EXIT
setup

# --- the commands -------------------------------------------------------
# One line per command: page, line, the block's marker, the command (lines
# ending in a backslash joined).
extract() {
  awk '
    FNR == 1 { marker = ""; inside = 0; cmd = "" }
    !inside && /^<!-- doc-test: .* -->$/ {
      marker = $0; sub(/^<!-- doc-test: /, "", marker); sub(/ -->$/, "", marker); next }
    !inside && /^```(sh|bash)$/ { inside = 1; next }
    inside && /^```$/ { inside = 0; marker = ""; next }
    inside {
      line = $0
      if (cmd == "") { start = FNR; if (line ~ /^[ \t]*$/) next }
      if (line ~ /\\$/) { sub(/\\$/, "", line); cmd = cmd line " "; next }
      cmd = cmd line
      printf "%s\037%d\037%s\037%s\n", FILENAME, start, marker, cmd
      cmd = ""
      next
    }
    !inside && !/^[ \t]*$/ { marker = "" }
  ' "$@"
}

# The words that stand for the user's files and hosts, made real.
localize() {
  local c="$1"
  c="${c//<run>/run}"
  c="${c//\/srv\/captures/$tmp/root_srv}"
  c="${c//\/tmp\/captures/$tmp/root_tmp}"
  c="${c//127.0.0.1:50051/$service}"
  c="${c//ci-host:50051/$service}"
  c="${c//http:\/\/127.0.0.1:8080/$http}"
  printf '%s' "$c"
}

binary_of() {  # a bazel label -> the binary, or nothing
  case "$1" in
    //apps/sim_run:sim_run | //collector:sim_run | @argsdump//apps/sim_run:sim_run) echo "$sim_run" ;;
    //viewer:dump_viewer | @argsdump//viewer:dump_viewer) echo "$dump_viewer" ;;
    //server:capture_server | @argsdump//server:capture_server) echo "$capture_server" ;;
  esac
}

skip() {  # skip WHERE REASON COMMAND
  echo "skip $1: $2: $3"
  skipped=$((skipped + 1))
}

run_server() {  # run_server WHERE ARGS...: starts, waits for it, stops it
  local where="$1" out="$tmp/server.$RANDOM"
  shift
  : > "$out.out"
  "$capture_server" "$@" --listen 127.0.0.1:0 > "$out.out" 2> "$out.err" &
  local pid=$!
  if ! wait_listening "$out.out" "$pid"; then
    kill -KILL "$pid" 2>/dev/null
    wait "$pid"
    fail "$where: capture_server $* did not start (exit $?):"; cat "$out.out" "$out.err"
    return
  fi
  kill -TERM "$pid"
  wait "$pid"
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    fail "$where: capture_server $* exited $rc at SIGTERM:"; cat "$out.err"
  else
    echo "ok   $where: capture_server $*"
    ran=$((ran + 1))
  fi
}

# A curl command against the HTTP service (which holds run1). Its answer may
# be an HTTP error (a finished capture cannot be finished again, a deleted one
# is gone), but never an endpoint or a parameter the server does not know.
run_curl() {  # run_curl WHERE COMMAND ARGS
  local where="$1" cmd="$2" args="$3" out rc body
  out="$(eval "curl --max-time 60 -w '\nHTTP %{http_code}\n' $args" 2>&1 < /dev/null)"
  rc=$?
  body="$out"
  if [[ "$args" =~ -o[[:space:]]+([^[:space:]]+) ]]; then body+="$(head -c 4000 "${BASH_REMATCH[1]}" 2>/dev/null | tr -d '\000')"; fi
  if [ "$rc" -ne 0 ]; then
    fail "$where: curl exited $rc: $cmd"; echo "$out"
  elif grep -qE "no such endpoint|unknown parameter" <<<"$body"; then
    fail "$where: the server does not know this request: $cmd"; head -c 4000 <<<"$body"; echo
  else
    echo "ok   $where ($(tail -n1 <<<"$out")): $cmd"
    ran=$((ran + 1))
  fi
}

run_command() {  # run_command WHERE MARKER COMMAND
  local where="$1" marker="$2" cmd="$3"
  cmd="$(sed -E 's/[[:space:]]+#[[:space:]].*$//; s/[[:space:]]+$//' <<<"$cmd")"
  case "$marker" in
    "" | exit\ [0-9]*) ;;
    skip\ ?*) skip "$where" "${marker#skip }" "$cmd"; return ;;
    *) fail "$where: the block's marker '$marker' is not 'skip WHY' or 'exit N,M WHY'"; return ;;
  esac
  local allowed="0"
  case "$marker" in exit\ *) allowed="${marker#exit }"; allowed="${allowed%% *}" ;; esac
  local envs="" rest="$cmd"
  while [[ "$rest" =~ ^([A-Za-z_][A-Za-z0-9_]*=[^[:space:]]*)[[:space:]]+(.*)$ ]]; do
    envs+="${BASH_REMATCH[1]} "
    rest="${BASH_REMATCH[2]}"
  done
  local background=0
  if [[ "$rest" =~ ^(.*[^[:space:]])[[:space:]]*\&$ ]]; then background=1; rest="${BASH_REMATCH[1]}"; fi
  local program="" args=""
  if [[ "$rest" =~ ^bazel[[:space:]]+run[[:space:]]+(-c[[:space:]]+[a-z]+[[:space:]]+)?([^[:space:]]+)(.*)$ ]]; then
    local label="${BASH_REMATCH[2]}"
    args="${BASH_REMATCH[3]}"
    program="$(binary_of "$label")"
    [[ "$args" =~ ^[[:space:]]*--([[:space:]]|$)(.*)$ ]] && args="${BASH_REMATCH[2]}"
    if [ -z "$program" ]; then
      case "$label" in
        *benchmark*) skip "$where" "a benchmark (run by hand with -c opt: benchmarks.md)" "$cmd" ;;
        *) fail "$where: no binary for $label (a label that moved? docs/doc_commands_test.sh knows the binaries): $cmd" ;;
      esac
      return
    fi
  elif [[ "$rest" =~ ^tools/run\.sh([[:space:]].*)?$ ]]; then
    program="$sim_run"; args="--dump-args 2 ${BASH_REMATCH[1]}"
  else
    case "$rest" in
      tools/test.sh*) skip "$where" "the whole suite, which runs this test" "$cmd" ;;
      "bazel test "*) skip "$where" "runs Bazel (tests of a user's workspace: tools/test_example.sh runs them)" "$cmd" ;;
      grpc_cli\ *) skip "$where" "grpc_cli is not installed (no Debian package; tests/capture_server_process_test.cc reflects)" "$cmd" ;;
      H=*)
        H="$(localize "${rest#H=}")"
        echo "ok   $where: $cmd (H=$H)"
        ran=$((ran + 1)) ;;
      curl\ *) run_curl "$where" "$cmd" "$(localize "${rest#curl }")" ;;
      *) fail "$where: a command this test does not know: mark its block <!-- doc-test: skip WHY --> or teach the test: $cmd" ;;
    esac
    return
  fi
  args="$(localize "$args")"
  if [ "$program" = "$capture_server" ]; then
    eval "run_server \"\$where\" $args"
    return
  fi
  [ "$background" -eq 1 ] && { fail "$where: only a capture_server may run in the background: $cmd"; return; }
  local out rc
  out="$(eval "env $envs \"\$program\" $args" 2>&1 < /dev/null)"
  rc=$?
  if [[ ",$allowed," == *",$rc,"* ]]; then
    echo "ok   $where (exit $rc): $cmd"
    ran=$((ran + 1))
  else
    fail "$where: exit $rc (want $allowed): $cmd"
    head -c 4000 <<<"$out"; echo
  fi
}

while IFS=$'\037' read -r page line marker cmd; do
  run_command "${page#"$runfiles"/}:$line" "$marker" "$cmd"
done < <(extract "${pages[@]}")

# --- the flag tables ----------------------------------------------------
check_flags() {  # check_flags WHERE BINARY_NAME FLAG...
  local where="$1" name="$2" help
  shift 2
  case "$name" in
    sim_run) help="$("$sim_run" --help 2>&1)" ;;
    dump_viewer) help="$("$dump_viewer" --help 2>&1)" ;;
    capture_server) help="$("$capture_server" --help 2>&1)" ;;
    *) fail "$where: no binary $name"; return ;;
  esac
  local known
  # The flag lines of --help: "  --name=...", "  --[no]name", "  -t, --name=...".
  known="$(grep -E -- '^  (-[a-z], )?--' <<<"$help" | grep -oE -- '--(\[no\])?[a-z0-9-]+' |
    sed -E 's/^--(\[no\])?//' | sort -u)"
  local flag bare n=0
  for flag in "$@"; do
    bare="${flag#--}"; bare="${bare//_/-}"
    if grep -qxF -- "$bare" <<<"$known" ||
       { [[ "$bare" == no* ]] && grep -qxF -- "${bare#no}" <<<"$known"; }; then
      n=$((n + 1))
    else
      fail "$where: $name has no flag $flag (--help lists: $(tr '\n' ' ' <<<"$known"))"
    fi
  done
  if [ "$n" -eq 0 ] && [ "$#" -eq 0 ]; then
    fail "$where: a flags marker with no --flag after it"
  else
    echo "ok   $where: $n of $# flags of $name in its --help"
  fi
}

while IFS=$'\t' read -r page line name flags; do
  # shellcheck disable=SC2086
  check_flags "${page#"$runfiles"/}:$line" "$name" $flags
done < <(awk '
  function emit() { printf "%s\t%d\t%s\t%s\n", FILENAME, start, want, flags; want = "" }
  FNR == 1 { if (want != "" && started) emit(); want = "" }
  /^[ \t]*<!-- doc-test: flags [a-z_]+ -->$/ { want = $4; start = FNR; flags = ""; started = 0; next }
  want != "" && /^[ \t]*$/ { if (started) emit(); next }
  want != "" {
    started = 1; text = $0
    if (text ~ /^\|/) { split(text, cell, "|"); text = cell[2] }
    while (match(text, /--[a-z][a-z0-9_-]*/)) {
      flags = flags " " substr(text, RSTART, RLENGTH); text = substr(text, RSTART + RLENGTH) }
  }
  END { if (want != "" && started) emit() }
' "${pages[@]}")

# --- the links between pages -------------------------------------------
# Every [text](page.md#anchor) between README.md and the pages must name a
# page and a heading of it (the anchor as GitHub makes it from the heading).
# Links elsewhere (ARCHITECTURE.md, examples/) are counted, not followed.
slugs="$(awk '
  /^```/ { code = !code; next }
  !code && /^#+ / {
    h = $0; sub(/^#+ /, "", h); h = tolower(h)
    gsub(/[^a-z0-9 _-]/, "", h); gsub(/ /, "-", h)
    print FILENAME "#" h
  }' "${pages[@]}")"
links=0 elsewhere=0
while IFS=$'\t' read -r page line target; do
  case "$target" in http://* | https://*) continue ;; esac
  file="${target%%#*}" anchor=""
  [[ "$target" == *"#"* ]] && anchor="${target#*#}"
  [ -z "$file" ] && file="${page#"$runfiles"/}"
  resolved="$(realpath -m -s --relative-to="$runfiles" "$(dirname "$page")/$file")"
  [ -z "${target%%#*}" ] && resolved="${page#"$runfiles"/}"
  where="${page#"$runfiles"/}:$line"
  is_page=0
  for p in "${pages[@]}"; do [ "${p#"$runfiles"/}" = "$resolved" ] && is_page=1; done
  if [ "$is_page" -eq 0 ]; then
    if [[ "$resolved" == docs/*.md || "$resolved" == README.md ]]; then
      fail "$where: a link to $target, which is no page"
    fi
    elsewhere=$((elsewhere + 1))
    continue
  fi
  if [ -n "$anchor" ] && ! grep -qxF -- "$runfiles/$resolved#$anchor" <<<"$slugs"; then
    fail "$where: a link to $target: $resolved has no heading with that anchor"
    continue
  fi
  links=$((links + 1))
done < <(awk '
  /^```/ { code = !code; next }
  !code {
    text = $0
    while (match(text, /\]\([^) ]+\)/)) {
      printf "%s\t%d\t%s\n", FILENAME, FNR, substr(text, RSTART + 2, RLENGTH - 3)
      text = substr(text, RSTART + RLENGTH)
    }
  }' "${pages[@]}")
echo "ok   $links links between the pages lead to a page and a heading ($elsewhere lead elsewhere)"

echo "$ran run, $skipped skipped, $fails failed"
[ "$fails" -eq 0 ]
