#!/usr/bin/env bash
# object_store_down.sh DIR — stops the stack tools/object_store_up.sh DIR
# started, by pid: the daemons DIR/pids lists, in its order (radosgw, OSD,
# mon, postgres), and any that an interrupted object_store_up.sh left in
# DIR/ceph/pids or DIR/ceph/pids.starting. Each gets SIGTERM (postgres
# SIGINT, its fast shutdown: SIGTERM would wait for its clients to leave),
# then SIGKILL after a grace (postgres: SIGQUIT first). A pid is signalled
# only while it is a live process whose command line names a file inside
# DIR (a reused pid is left alone). Removes nothing outside DIR; inside it
# only the pid lists: logs and data stay (rm -rf DIR when done with them).
# Idempotent: a stack already stopped is said so, exit 0.
# Exit status: 0 all stopped; 1 one survived SIGKILL; 2 a bad DIR.
# Environment: OBJECT_STORE_STOP_GRACE (seconds before SIGKILL, default 15).
set -uo pipefail

dir=${1:?usage: object_store_down.sh DIR}
[[ -d $dir ]] || { echo "object_store_down: $dir is not a folder" >&2; exit 2; }
dir=$(cd "$dir" && pwd)
grace=${OBJECT_STORE_STOP_GRACE:-15}

# A stopped daemon stays a zombie until its parent (init, here) reaps it:
# that is stopped.
alive() {
  local stat state
  [[ $1 =~ ^[0-9]+$ ]] || return 1
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  state=${stat##*) }
  [[ ${state%% *} != Z ]]
}
ours() { alive "$1" && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF -- "$dir/"; }
# Waits (polling, bounded) for `pid` to end; false if it still runs.
ended_within() {
  local pid=$1 deadline=$((SECONDS + $2))
  while ours "$pid"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.05
  done
}

pids=() names=()
for f in "$dir/pids" "$dir/ceph/pids" "$dir/ceph/pids.starting"; do
  [[ -f $f ]] || continue
  while read -r pid name; do
    [[ $pid =~ ^[0-9]+$ ]] || continue
    [[ " ${pids[*]} " == *" $pid "* ]] && continue
    pids+=("$pid")
    names+=("${name:-?}")
  done <"$f"
done

rc=0 stopped=0
for i in "${!pids[@]}"; do
  pid=${pids[$i]} name=${names[$i]}
  ours "$pid" || continue
  if [[ $name == postgres ]]; then first=INT later=(QUIT KILL); else first=TERM later=(KILL); fi
  kill -s "$first" "$pid" 2>/dev/null
  wait_for=$grace
  for sig in "${later[@]}"; do
    ended_within "$pid" "$wait_for" && break
    echo "object_store_down: $name (pid $pid) still runs ${wait_for}s after SIG$first: SIG$sig" >&2
    kill -s "$sig" "$pid" 2>/dev/null
    first=$sig wait_for=5
  done
  if ended_within "$pid" 5; then
    echo "object_store_down: stopped $name (pid $pid)"
    stopped=$((stopped + 1))
  else
    echo "object_store_down: $name (pid $pid) survived SIGKILL" >&2
    rc=1
  fi
done

if ((rc == 0)); then
  ((stopped > 0)) || echo "object_store_down: nothing of $dir was running"
  rm -f "$dir/pids" "$dir/ceph/pids" "$dir/ceph/pids.starting"
fi
exit "$rc"
