#!/usr/bin/env bash
# object_store_up.sh DIR — a local stack to try capture_server's object-store
# mode, every file inside DIR, every daemon on 127.0.0.1 and free ports:
#   - a Ceph RGW (tools/ceph_rgw_up.sh in DIR/ceph: mon, memstore OSD,
#     radosgw) with a bucket `argsdump` and an S3 user with random keys;
#   - a PostgreSQL (initdb + postgres in DIR/pg) with a role and a database
#     `argsdump` (password authentication, a random password);
#   - DIR/scratch, capture_server's --root (its scratch and cache disk).
# The store keeps its objects in memory (memstore): they end with the stack.
# Each run starts empty: the files of a stopped stack in DIR (ceph, pg,
# scratch) are replaced.
#
# Prints the capture_server command line, the lines to export (the S3 keys,
# the PostgreSQL password) and how to stop the stack. Writes:
#   DIR/pids         "PID NAME" per daemon, in the order to stop them
#                    (tools/object_store_down.sh DIR stops them by pid)
#   DIR/env          the export lines
#   DIR/credentials  the S3 keys as an AWS ini file ([default])
#   DIR/stack        the endpoints as shell assignments, for scripts
# As root PostgreSQL runs as the `postgres` user (PostgreSQL refuses root);
# when that user cannot reach DIR, or cannot be switched to (a sandbox whose
# user namespace maps root only), it runs in a user namespace of its own as
# `postgres` mapped onto root, as tests/testing/postgres_server.cc does.
#
# Exit status: 0 up; 1 a step failed (named, with its log's last lines;
# whatever was started is stopped); 2 refused, nothing touched (DIR already
# runs a stack, another object_store_up.sh works on DIR, DIR holds other
# files and was never a stack's, a bad path);
# 77 a program is missing (tools/setup.sh installs them).
# Environment: RGW_STAGE_TIMEOUT (seconds a stage may take, default 90),
# PG_BINDIR (default /usr/lib/postgresql/15/bin).
set -euo pipefail

usage="usage: object_store_up.sh DIR"
dir=${1:?$usage}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
timeout=${RGW_STAGE_TIMEOUT:-90}
bucket=argsdump
prefix=captures
database=argsdump
py=/usr/bin/python3

refuse() { echo "object_store_up: $*" >&2; exit 2; }

# Ceph's config names paths inside DIR unquoted: a plain path.
mkdir -p "$dir" || refuse "cannot make $dir"
dir=$(cd "$dir" && pwd)
[[ $dir =~ ^[A-Za-z0-9._/+-]+$ ]] ||
  refuse "$dir: use a folder whose path has only letters, digits and ._+-/ (Ceph's config names it)"

bin=${PG_BINDIR:-}
if [[ -z $bin ]]; then
  if [[ -x /usr/lib/postgresql/15/bin/postgres ]]; then
    bin=/usr/lib/postgresql/15/bin
  else
    bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  fi
fi
for b in "$bin/initdb" "$bin/postgres" "$bin/pg_isready" "$bin/psql" curl openssl flock unshare "$py"; do
  command -v "$b" >/dev/null 2>&1 ||
    { echo "object_store_up: $b missing (tools/setup.sh installs it)" >&2; exit 77; }
done
if ((EUID == 0)); then
  command -v setpriv >/dev/null 2>&1 || { echo "object_store_up: setpriv missing" >&2; exit 77; }
fi

# DIR's ceph, pg and scratch folders are replaced: DIR must be new, empty,
# or an earlier stack's (the lock file marks it).
if [[ ! -e $dir/.object_store_up.lock && -n $(ls -A "$dir") ]]; then
  refuse "$dir holds files and no stack: use a new or empty folder"
fi
# One object_store_up.sh per DIR at a time; the daemons do not inherit the
# lock (9>&- on each), so it ends with this script.
exec 9>"$dir/.object_store_up.lock"
flock -n 9 || refuse "another object_store_up.sh is working on $dir"

# A daemon of DIR's: a live process (not a zombie) whose command line names
# a file inside DIR (ceph.conf, the data folder): a reused pid is not ours.
alive() {
  local stat state
  [[ $1 =~ ^[0-9]+$ ]] || return 1
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  state=${stat##*) }
  [[ ${state%% *} != Z ]]
}
ours() { alive "$1" && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF -- "$dir/"; }
running=()
for f in "$dir/pids" "$dir/ceph/pids" "$dir/ceph/pids.starting"; do
  [[ -f $f ]] || continue
  while read -r pid name; do
    [[ " ${running[*]} " == *" (pid $pid) "* ]] && continue
    if ours "$pid"; then running+=("$name (pid $pid)"); fi
  done <"$f"
done
if ((${#running[@]} > 0)); then
  refuse "$dir already runs a stack: ${running[*]}; tools/object_store_down.sh $dir stops it"
fi

t0=$(date +%s%N)
stage() { echo "object_store_up: $* after $((($(date +%s%N) - t0) / 1000000)) ms" >&2; }
# A step failed: what, the log's last lines, and everything started stopped.
fail() {
  local what=$1 log=${2:-}
  echo "object_store_up: $what" >&2
  if [[ -n $log && -f $log ]]; then
    echo "object_store_up: last lines of $log:" >&2
    tail -n 15 "$log" >&2
  fi
  bash "$here/object_store_down.sh" "$dir" >&2 9>&- || true
  exit 1
}
trap 'fail "interrupted"' INT TERM

rm -rf "$dir"/{ceph,pg,scratch,pids,env,credentials,stack}
mkdir -p "$dir/scratch"
# The gateway's folder holds its keys (endpoint, logs): the owner's only.
mkdir -m 700 "$dir/ceph" "$dir/pg"
: >"$dir/pids"

# Random keys: the gateway and the database answer every local user.
access_key=$(openssl rand -hex 10 | tr a-f A-F)
secret_key=$(openssl rand -hex 20)
pg_password=$(openssl rand -hex 16)
superuser_password=$(openssl rand -hex 16)

# --- the Ceph RGW -----------------------------------------------------------
rc=0
RGW_ACCESS_KEY=$access_key RGW_SECRET_KEY=$secret_key RGW_STAGE_TIMEOUT=$timeout \
  bash "$here/ceph_rgw_up.sh" "$dir/ceph" >"$dir/ceph.out" 9>&- || rc=$?
mv "$dir/ceph.out" "$dir/ceph/up.out" 2>/dev/null || true
if ((rc == 77)); then exit 77; fi
# ceph_rgw_up.sh stopped what it started and said why, with its logs' tails.
((rc == 0)) || fail "the Ceph RGW did not start (tools/ceph_rgw_up.sh exited $rc; logs in $dir/ceph/log)"
cat "$dir/ceph/pids" >>"$dir/pids"
endpoint="" tls_endpoint="" ca_file="" region=""
for field in $(cat "$dir/ceph/endpoint"); do
  case $field in
    endpoint=*) endpoint=${field#*=} ;;
    tls_endpoint=*) tls_endpoint=${field#*=} ;;
    ca_file=*) ca_file=${field#*=} ;;
    region=*) region=${field#*=} ;;
  esac
done
[[ -n $endpoint && -n $region ]] || fail "tools/ceph_rgw_up.sh wrote no endpoint" "$dir/ceph/endpoint"

# --- the bucket ---------------------------------------------------------------
# curl signs with SigV4 itself; RGW wants x-amz-content-sha256 (curl 7.88
# does not send it: the SHA-256 of the empty body). The keys go through -K
# (stdin), not the command line, which every local user can read.
empty_sha256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
code=$(curl -sS -K - -o "$dir/ceph/log/bucket.out" -w '%{http_code}' --max-time 30 -X PUT \
  --aws-sigv4 "aws:amz:$region:s3" -H "x-amz-content-sha256: $empty_sha256" \
  "$endpoint/$bucket" <<<"user = \"$access_key:$secret_key\"" 2>>"$dir/ceph/log/bucket.out") || true
[[ $code == 200 ]] ||
  fail "creating bucket $bucket at $endpoint answered HTTP ${code:-nothing} (radosgw's log: $dir/ceph/log/client.rgw.0.log)" \
    "$dir/ceph/log/bucket.out"
stage "bucket $bucket made"

# --- PostgreSQL ----------------------------------------------------------------
pg=$dir/pg
# Never the caller's PG* settings for our own psql and the server.
while read -r var; do unset "$var"; done < <(compgen -e | grep '^PG' || true)
as=()
how="as $(id -un)"
if ((EUID == 0)); then
  user=postgres
  id -u "$user" >/dev/null 2>&1 || user=nobody
  uid=$(id -u "$user")
  gid=$(id -g "$user")
  # The user itself, when it may own the folder and reach it (every parent
  # folder searchable by it); else a user namespace where this process is
  # that user, mapped onto root (files stay root's outside).
  if chown "$uid:$gid" "$pg" 2>/dev/null &&
     setpriv --reuid="$uid" --regid="$gid" --init-groups test -w "$pg" 2>/dev/null; then
    as=(setpriv --reuid="$uid" --regid="$gid" --init-groups)
    how="as $user"
  else
    chown 0:0 "$pg" 2>/dev/null || true
    as=(unshare --map-user="$uid" --map-group="$gid" --)
    how="as $user in a user namespace, root outside: $user cannot reach $dir or cannot be switched to here"
  fi
fi
port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
( umask 077 && printf '%s\n' "$superuser_password" >"$pg/superuser_password" )
[[ ${#as[@]} -gt 0 && ${as[0]} == setpriv ]] && chown "$uid:$gid" "$pg/superuser_password"
# initdb and postgres run with stdio on files (a caller reading our stdout
# through a pipe must not wait for them), in their own folder, HOME there.
# Called in a subshell (or with &): the exec makes the subshell's pid the
# program's.
run_pg() { cd "$pg" && exec "${as[@]}" env HOME="$pg" LC_ALL=C.UTF-8 "$@"; }
(run_pg "$bin/initdb" -D "$pg/data" -U postgres -A scram-sha-256 --pwfile="$pg/superuser_password" \
  -E UTF8 --locale=C.UTF-8 --no-sync --no-instructions) </dev/null >"$pg/initdb.log" 2>&1 9>&- ||
  fail "initdb failed ($how)" "$pg/initdb.log"
# TCP on 127.0.0.1 only: no Unix socket (its path would be bounded to 107
# bytes, and the default folder is outside DIR).
run_pg "$bin/postgres" -D "$pg/data" -p "$port" -c listen_addresses=127.0.0.1 \
  -c unix_socket_directories= -c logging_collector=off \
  </dev/null >"$pg/postgres.log" 2>&1 9>&- &
pg_pid=$!
echo "$pg_pid postgres" >>"$dir/pids"
deadline=$((SECONDS + timeout))
until "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -t 2; do
  alive "$pg_pid" || fail "postgres exited before it answered ($how)" "$pg/postgres.log"
  ((SECONDS < deadline)) || fail "postgres did not answer on 127.0.0.1:$port within ${timeout}s" "$pg/postgres.log"
  sleep 0.05
done
stage "postgres answers on 127.0.0.1:$port ($how)"
# The role owns its database (PostgreSQL 15: and its public schema), all
# the catalog needs; the names are ours, the password hex.
PGPASSWORD=$superuser_password "$bin/psql" -X -q -h 127.0.0.1 -p "$port" -U postgres -d postgres \
  -v ON_ERROR_STOP=1 >"$pg/create.log" 2>&1 <<SQL || fail "creating role and database $database failed" "$pg/create.log"
CREATE ROLE $database LOGIN PASSWORD '$pg_password';
CREATE DATABASE $database OWNER $database;
SQL
stage "database $database made"

# --- what to tell ----------------------------------------------------------------
catalog="postgresql://$database@127.0.0.1:$port/$database"
(
  umask 077
  printf '[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n' \
    "$access_key" "$secret_key" >"$dir/credentials"
  printf 'export AWS_ACCESS_KEY_ID=%s\nexport AWS_SECRET_ACCESS_KEY=%s\nexport PGPASSWORD=%s\n' \
    "$access_key" "$secret_key" "$pg_password" >"$dir/env"
)
cat >"$dir/stack" <<STACK
S3_ENDPOINT=$endpoint
S3_TLS_ENDPOINT=$tls_endpoint
S3_CA_FILE=$ca_file
S3_REGION=$region
S3_BUCKET=$bucket
OBJECT_STORE=s3://$bucket/$prefix
CATALOG=$catalog
PG_PORT=$port
ROOT=$dir/scratch
STACK
stage "up"

cat <<EOF
A Ceph RGW (S3 at $endpoint, bucket $bucket) and a PostgreSQL 15 (127.0.0.1:$port,
database $database) run for capture_server, every file in $dir.

Export the credentials (S3 keys, PostgreSQL password), also in $dir/env:
$(cat "$dir/env")

Then run the server:
bazel run -c opt //server:capture_server -- --root=$dir/scratch --object_store=s3://$bucket/$prefix --s3_endpoint=$endpoint --s3_region=$region --catalog=$catalog

Instead of the AWS_* exports: --s3_credentials_file=$dir/credentials
The same gateway over TLS: --s3_endpoint=$tls_endpoint --s3_ca_file=$ca_file
Virtual-host addressing ($bucket.localhost): --s3_endpoint=${endpoint/127.0.0.1/localhost} --s3_virtual_host

Stop capture_server first, then the stack (the stored captures end with it):
tools/object_store_down.sh $dir
EOF
