#!/usr/bin/env bash
# tools/object_store_up.sh boots the real stack (Ceph RGW with its bucket,
# PostgreSQL with its database) in a folder: the bucket answers a signed
# GET, PostgreSQL a query with the printed credentials (and refuses a wrong
# password); up.sh refuses a folder of other files; a second up.sh on
# the folder refuses and leaves the stack running; down.sh stops every pid
# (and a second down.sh finds nothing); up.sh on the stopped folder boots a
# fresh stack again.
# Usage: object_store_up_test.sh UP_SH DOWN_SH
set -uo pipefail
up="$PWD/$1"
down="$PWD/$2"
# /tmp, short: Ceph's Unix sockets live under the folder (at most 107
# bytes), and as root PostgreSQL's user must reach it.
dir=$(mktemp -d /tmp/argsdump_stack_XXXXXX) || exit 1
out=${TEST_TMPDIR:-$dir}
trap 'bash "$down" "$dir" >/dev/null 2>&1; rm -rf "$dir"' EXIT
fail() {
  echo "FAIL: $*"
  for f in "$out"/*.out "$out"/*.err; do [[ -f $f ]] && { echo "--- $f"; tail -n 20 "$f"; }; done
  exit 1
}

empty_sha256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
# HTTP status of a GET signed with the stack's keys (they go through -K, on
# stdin); "000" when nothing answers.
signed_get() {
  curl -s -o /dev/null -w '%{http_code}' --max-time 10 -K - --aws-sigv4 "aws:amz:$S3_REGION:s3" \
    -H "x-amz-content-sha256: $empty_sha256" "$1" \
    <<<"user = \"$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY\""
}
psql_at() {  # psql_at PORT SQL: the answer, unaligned
  psql -X -q -At -h 127.0.0.1 -p "$1" -U argsdump -d argsdump -c "$2" 2>&1
}
# Gone: no such process, or a zombie its parent has not reaped yet.
gone() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  stat=${stat##*) }
  [[ ${stat%% *} == Z ]]
}

# --- a folder of other files is refused, untouched --------------------------
mkdir "$dir/other" && echo keep >"$dir/other/scratch"
bash "$up" "$dir/other" >"$out/up0.out" 2>"$out/up0.err"
rc=$?
((rc == 2)) || fail "up.sh on a folder of other files exited $rc, not 2"
[[ $(ls -A "$dir/other") == scratch && $(cat "$dir/other/scratch") == keep ]] ||
  fail "up.sh touched a folder it refused: $(ls -A "$dir/other")"
rm -rf "$dir/other"

# --- up ------------------------------------------------------------------
bash "$up" "$dir" >"$out/up.out" 2>"$out/up.err"
rc=$?
((rc == 0)) || fail "object_store_up.sh exited $rc"
for want in "--root=$dir/scratch" "--object_store=s3://argsdump/captures" "--s3_endpoint=http://127.0.0.1:" \
    "--s3_region=us-east-1" "--catalog=postgresql://argsdump@127.0.0.1:" "--s3_credentials_file=$dir/credentials" \
    "--s3_ca_file=$dir/ceph/tls.crt" "--s3_virtual_host" "export AWS_ACCESS_KEY_ID=" \
    "export AWS_SECRET_ACCESS_KEY=" "export PGPASSWORD=" "object_store_down.sh $dir"; do
  grep -qF -- "$want" "$out/up.out" || fail "up.sh printed no '$want'"
done
# shellcheck disable=SC1091
. "$dir/stack" && . "$dir/env" || fail "no $dir/stack or $dir/env"
grep -qF -- "--s3_endpoint=$S3_ENDPOINT --s3_region=$S3_REGION --catalog=$CATALOG" "$out/up.out" ||
  fail "the printed command line is not the stack's ($S3_ENDPOINT, $CATALOG)"
grep -qx "aws_access_key_id = $AWS_ACCESS_KEY_ID" "$dir/credentials" || fail "credentials file: no access key"
[[ $(stat -c %a "$dir/credentials") == 600 && $(stat -c %a "$dir/env") == 600 ]] ||
  fail "the credentials files are readable by others"
mapfile -t pids < <(cut -d' ' -f1 "$dir/pids")
((${#pids[@]} == 4)) || fail "DIR/pids lists ${#pids[@]} daemons, not 4: $(cat "$dir/pids")"

# --- the bucket and the database answer ------------------------------------------
code=$(signed_get "$S3_ENDPOINT/$S3_BUCKET")
[[ $code == 200 ]] || fail "signed GET of the bucket answered $code"
code=$(signed_get "$S3_ENDPOINT/argsdump-not-made")
[[ $code == 404 ]] || fail "signed GET of a bucket not made answered $code, not 404"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$S3_ENDPOINT/$S3_BUCKET")
[[ $code == 403 ]] || fail "an unsigned GET of the bucket answered $code, not 403"
code=$(signed_get "http://$S3_BUCKET.localhost:${S3_ENDPOINT##*:}/")
[[ $code == 200 ]] || fail "virtual-host GET of the bucket answered $code"
answer=$(psql_at "$PG_PORT" 'select current_database(), 1')
[[ $answer == "argsdump|1" ]] || fail "psql on 127.0.0.1:$PG_PORT answered: $answer"
answer=$(PGPASSWORD=wrong psql_at "$PG_PORT" 'select 1')
[[ $answer == *"password authentication failed"* ]] || fail "a wrong password was not refused: $answer"

# --- a second up.sh refuses ---------------------------------------------------
bash "$up" "$dir" >"$out/up2.out" 2>"$out/up2.err"
rc=$?
((rc == 2)) || fail "a second up.sh on a running stack exited $rc, not 2"
grep -qF "already runs a stack" "$out/up2.err" || fail "the second up.sh did not say why"
code=$(signed_get "$S3_ENDPOINT/$S3_BUCKET")
[[ $code == 200 ]] || fail "after the refused up.sh the bucket answered $code"
answer=$(psql_at "$PG_PORT" 'select 1')
[[ $answer == 1 ]] || fail "after the refused up.sh psql answered: $answer"

# --- down ---------------------------------------------------------------------
bash "$down" "$dir" >"$out/down.out" 2>"$out/down.err"
rc=$?
((rc == 0)) || fail "object_store_down.sh exited $rc"
for pid in "${pids[@]}"; do gone "$pid" || fail "pid $pid runs after down.sh: $(tr '\0' ' ' </proc/"$pid"/cmdline)"; done
[[ $(grep -c '^object_store_down: stopped ' "$out/down.out") == 4 ]] || fail "down.sh did not stop 4 daemons"
code=$(signed_get "$S3_ENDPOINT/$S3_BUCKET")
[[ $code == 000 ]] || fail "the gateway answered $code after down.sh"
answer=$(psql_at "$PG_PORT" 'select 1')
[[ $answer == *"Connection refused"* ]] || fail "PostgreSQL still answers after down.sh: $answer"
bash "$down" "$dir" >"$out/down2.out" 2>&1 || fail "a second down.sh failed"
grep -qF "nothing of $dir was running" "$out/down2.out" || fail "the second down.sh did not say nothing ran"

# --- up again on the stopped folder ---------------------------------------------
old_keys=$AWS_ACCESS_KEY_ID
bash "$up" "$dir" >"$out/up3.out" 2>"$out/up3.err"
rc=$?
((rc == 0)) || fail "up.sh on a stopped stack's folder exited $rc"
. "$dir/stack" && . "$dir/env"
[[ $AWS_ACCESS_KEY_ID != "$old_keys" ]] || fail "the new stack kept the old keys"
code=$(signed_get "$S3_ENDPOINT/$S3_BUCKET")
[[ $code == 200 ]] || fail "the new stack's bucket answered $code"
answer=$(psql_at "$PG_PORT" 'select 1')
[[ $answer == 1 ]] || fail "the new stack's psql answered: $answer"
bash "$down" "$dir" >"$out/down3.out" 2>&1 || fail "down.sh of the new stack failed"
grep -h '^object_store_up: ' "$out/up.err" "$out/up3.err"
echo PASS
