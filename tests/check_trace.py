# Checks a JSON trace (format/trace_json) with a real JSON parser: exactly
# the expected number of slices, one per task, "ts" monotonic on each
# (pid, tid) track, "dur" >= 0, slice names among the given kernel names;
# with PROCESSES, exactly that many processes (named, each with slices).
#   python3 check_trace.py TRACE SLICES NAME[,NAME...] [PROCESSES]
import json
import sys

trace = json.load(open(sys.argv[1]))
assert trace["displayTimeUnit"] == "ns"
slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
assert len(slices) == int(sys.argv[2]), (len(slices), sys.argv[2])
tasks = [(e["pid"], e["args"]["task"]) for e in slices]
assert len(set(tasks)) == len(tasks), "a task has more than one slice"
last = {}
for e in slices:
    track = (e["pid"], e["tid"])
    assert e["dur"] >= 0, e
    assert e["ts"] >= last.get(track, float("-inf")), ("ts goes back on", track)
    last[track] = e["ts"]
names = set(sys.argv[3].split(","))
assert set(e["name"] for e in slices) <= names, set(e["name"] for e in slices)
for e in trace["traceEvents"]:
    assert e["ph"] in ("X", "M"), e
if len(sys.argv) > 4:
    named = [e["pid"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"]
    assert len(named) == len(set(named)) == int(sys.argv[4]), (named, sys.argv[4])
    assert set(e["pid"] for e in slices) == set(named), "a process without slices"
