#!/usr/bin/env bash
# ceph_rgw_up.sh DIR — boots a throw-away single-node Ceph (one mon, one
# memstore OSD, no mgr) and one radosgw (S3) on 127.0.0.1, every file inside
# DIR, without systemd or root. For tests (tests/testing/ceph_rgw.h) and for
# trying the object store by hand. Debian: ceph-mon ceph-osd radosgw ceph-common.
#
# Prints, as its last stdout line (also in DIR/endpoint):
#   endpoint=http://127.0.0.1:PORT access_key=... secret_key=... region=us-east-1
#   tls_endpoint=https://localhost:PORT2 ca_file=DIR/tls.crt
# (the same gateway over TLS, with a self-signed certificate for localhost,
# *.localhost and 127.0.0.1 that ca_file trusts).
# DIR/pids lists "PID NAME" of the daemons (rgw, osd, mon: the order to stop
# them in). Stopping is the caller's: SIGTERM each pid, SIGKILL after a grace.
# On failure it stops what it started and exits 1; 77 when a binary is missing.
#
# Environment: RGW_STAGE_TIMEOUT (seconds a stage may take, default 90),
# RGW_ACCESS_KEY / RGW_SECRET_KEY (the S3 user's keys).
set -euo pipefail

dir=${1:?usage: ceph_rgw_up.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
timeout=${RGW_STAGE_TIMEOUT:-90}
access_key=${RGW_ACCESS_KEY:-argsdumptestaccess01}
secret_key=${RGW_SECRET_KEY:-argsdumptestsecret0000000000000000000001}
py=/usr/bin/python3  # the distribution's python: it has the rados module

for b in ceph-mon ceph-osd radosgw radosgw-admin monmaptool uuidgen curl openssl "$py"; do
  command -v "$b" >/dev/null 2>&1 || { echo "ceph_rgw_up: $b missing (tools/setup.sh)" >&2; exit 77; }
done

started=()
t0=$(date +%s%N)
stage() { echo "ceph_rgw_up: $* after $(( ($(date +%s%N) - t0) / 1000000 )) ms" >&2; }
stop_all() {
  local pid
  for pid in "${started[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
}
fail() {
  echo "ceph_rgw_up: $*; logs in $dir/log" >&2
  tail -n 15 "$dir"/log/*.out "$dir"/log/*.log >&2 2>/dev/null || true
  stop_all
  exit 1
}
trap 'fail "interrupted"' INT TERM

rm -rf "$dir"/{ceph.conf,monmap,mon,osd,rgw,log,run,crash,pids,endpoint,tls.crt,tls.key}
mkdir -p "$dir"/{mon/a,osd/0,rgw,log,run,crash}

free_port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
mon_port=$(free_port)
rgw_port=$(free_port)
tls_port=$(free_port)
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
  -addext "subjectAltName=DNS:localhost,DNS:*.localhost,IP:127.0.0.1" \
  -keyout "$dir/tls.key" -out "$dir/tls.crt" >"$dir/log/tls.out" 2>&1 || fail "openssl req failed"
fsid=$(uuidgen)
osd_uuid=$(uuidgen)
conf=$dir/ceph.conf

# Why each line is there:
# - auth none everywhere, and "ms mon client mode = crc secure": radosgw as a
#   daemon client asks for "secure" by default, which auth none cannot give
#   (it would retry "get_initial_auth_request returned -13" forever);
# - every path inside DIR (defaults are /var/log/ceph, /run/ceph, /var/lib/ceph),
#   the cluster log too; only 127.0.0.1, msgr2 only;
# - memstore, one replica, small pools, no autoscale, weight 1 (a tiny OSD
#   could otherwise get CRUSH weight ~0);
# - mon data avail warn/crit low: at "crit" (default 5 % free) the mon shuts
#   itself down, which a nearly full CI disk would cause;
# - paxos propose interval 0.05 s (default 1 s a map change): faster boot;
# - rgw gc quick: deleted objects' tails leave memstore's RAM in seconds.
cat >"$conf" <<CONF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$mon_port
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr1 = false
ms bind ipv6 = false
auth cluster required = none
auth service required = none
auth client required = none
ms mon client mode = crc secure
run dir = $dir/run
admin socket = $dir/run/\$name.asok
pid file = $dir/run/\$name.pid
log file = $dir/log/\$name.log
mon cluster log file = $dir/log/\$cluster.\$channel.log
crash dir = $dir/crash
keyring = $dir/keyring
mon data = $dir/mon/\$id
osd data = $dir/osd/\$id
osd objectstore = memstore
memstore device bytes = 8589934592
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
osd crush initial weight = 1
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
paxos propose interval = 0.05
mon osd full ratio = 0.97
mon osd backfillfull ratio = 0.96
mon osd nearfull ratio = 0.95

[client.rgw.0]
# tcp_nodelay: without it beast's last short write of an answer waits for
# the client's delayed ACK, and every GET whose body is not a multiple of
# 64 KiB took 44 ms instead of 1 (a query by task on a ranged index: 50 ms).
rgw frontends = beast endpoint=127.0.0.1:$rgw_port ssl_endpoint=127.0.0.1:$tls_port ssl_certificate=$dir/tls.crt ssl_private_key=$dir/tls.key tcp_nodelay=1
# Virtual-host addressing for http://BUCKET.localhost:PORT (libcurl resolves
# *.localhost to the loopback itself); path style works on any host name.
rgw dns name = localhost
rgw data = $dir/rgw
rgw thread pool size = 64
rgw gc obj min wait = 5
rgw gc processor period = 10
CONF

# Waits (polling, bounded) until "$@" succeeds.
wait_until() {
  local what=$1; shift
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "no $what within ${timeout}s"
    sleep 0.05
  done
}
# Starts a daemon with its stdio on files (a caller reading our stdout through
# a pipe must not wait for the daemons to close it).
start() {
  local name=$1; shift
  "$@" </dev/null >"$dir/log/$name.out" 2>&1 &
  started+=("$!")
  echo "$! $name" >>"$dir/pids.starting"
}

monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon_port]" \
  --enable-all-features --set-min-mon-release pacific "$dir/monmap" >"$dir/log/monmap.out" 2>&1 \
  || fail "monmaptool failed"
ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" >"$dir/log/mon.mkfs.out" 2>&1 \
  || fail "ceph-mon --mkfs failed"
start mon.a ceph-mon -f -c "$conf" -i a
stage "mon started"

# One librados connection registers osd.0 and makes every pool radosgw wants
# (it would make them one by one, the bucket pools lazily on the first PUT,
# each a map change).
timeout "$timeout" "$py" - "$conf" "$osd_uuid" "$timeout" >"$dir/log/pools.out" 2>&1 <<'PY' || fail "pool setup failed"
import json, sys, rados
conf, osd_uuid, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3])
cluster = rados.Rados(conffile=conf, conf={"client_mount_timeout": str(timeout)})
cluster.connect(timeout=timeout)
def command(**kw):
    ret, out, err = cluster.mon_command(json.dumps(kw), b"")
    if ret != 0:
        sys.exit("mon_command %r: %d %s" % (kw, ret, err))
    return out
if command(prefix="osd new", uuid=osd_uuid).strip() != b"0":
    sys.exit("osd new did not give osd.0")
for pool in (".rgw.root", "default.rgw.log", "default.rgw.control", "default.rgw.meta",
             "default.rgw.buckets.index", "default.rgw.buckets.data",
             "default.rgw.buckets.non-ec"):
    command(prefix="osd pool create", pool=pool, pg_num=8, pgp_num=8)
    command(prefix="osd pool application enable", pool=pool, app="rgw")
cluster.shutdown()
PY

stage "osd.0 registered, pools made"
ceph-osd -c "$conf" -i 0 --mkfs --osd-uuid "$osd_uuid" >"$dir/log/osd.mkfs.out" 2>&1 \
  || fail "ceph-osd --mkfs failed"
start osd.0 ceph-osd -f -c "$conf" -i 0
# radosgw only after the OSD is active: a librados client that finds no OSD
# up re-asks the mon for the map on its 5 s tick.
wait_until "active osd.0" grep -q 'state: booting -> active' "$dir/log/osd.0.log"

stage "osd.0 active"
start rgw.0 radosgw -f -c "$conf" -n client.rgw.0
tac "$dir/pids.starting" >"$dir/pids"
rm -f "$dir/pids.starting"
wait_until "answer from radosgw on 127.0.0.1:$rgw_port" \
  curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$rgw_port/"

stage "radosgw answers"
radosgw-admin -c "$conf" user create --uid=argsdump --display-name=argsdump \
  --access-key="$access_key" --secret-key="$secret_key" >"$dir/log/user.out" 2>&1 \
  || fail "radosgw-admin user create failed"

stage "user made"
line="endpoint=http://127.0.0.1:$rgw_port access_key=$access_key secret_key=$secret_key region=us-east-1 tls_endpoint=https://localhost:$tls_port ca_file=$dir/tls.crt"
echo "$line" >"$dir/endpoint"
echo "$line"
