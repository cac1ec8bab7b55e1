#!/usr/bin/python3
"""Test of bench/peer/ort_scenario.js: hand-written schedules (SingleStream, Offline, Server) run against
the tiny dynamic-axes SQuAD model (ort_export.py --task=squad --model=tiny, exported and verified first),
and the invariants of each log checked (check_log):
  - one entry per issue, in issue order, with the issue's query and its real token count;
  - no query starts before its arrival; done after start;
  - numeric arrivals are the schedule's times; a null-time issue arrives exactly when the previous one
    is done (SingleStream chaining; issue 0 at 0);
  - batches: ordinals 0, 1, 2, ... in issue order, consecutive issues, at most batch_size each, one
    start and one done per batch, and each batch starts no earlier than the previous one is done (one SUT);
  - FIFO and work conservation: a batch holds every issue that had arrived by its start, up to batch_size
    (no arrived issue is passed over, none that had not arrived is taken);
  - the run's settings the summary reads (seeds, minimums, loadgen_target_qps, performance_sample_count) copied from
    the schedule unchanged (64-bit seeds as decimal strings, which JavaScript would round as numbers).
check_log itself is tested on logs broken on purpose (each must be refused). Also: a malformed schedule
is refused with one line naming the file. Exit status 0 when all pass; prints what it checked.
Usage: /usr/bin/python3 bench/peer/scenario_test.py [--threads=1]"""
import copy
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


class Bad(Exception):
    pass


COPIED = ["qsl_rng_seed", "sample_index_rng_seed", "schedule_rng_seed", "min_duration_s", "min_query_count",
          "loadgen_target_qps", "performance_sample_count"]


def check_log(schedule, log):
    """Raises Bad naming the first broken invariant (see the docstring)."""
    issues, B, qs = schedule["issues"], schedule["batch_size"], schedule["queries"]
    e = log["entries"]
    if log["format"] != "bertbench-scenario-log/1" or log["scenario"] != schedule["scenario"] or log["batch_size"] != B:
        raise Bad("header %s does not match the schedule" % {k: log.get(k) for k in ("format", "scenario", "batch_size")})
    for k in COPIED:  # what the summary reads: as the schedule names it (seeds as the same decimal strings)
        if log.get(k) != schedule[k]:
            raise Bad("%s %r, expected the schedule's %r" % (k, log.get(k), schedule[k]))
    # singlestream ends as LoadGen's issue loop does: after the first issue that makes
    # min_query_count and is itself issued at or after min_duration_s; every other log has them all
    if schedule["scenario"] == "singlestream":
        ends = [k for k in range(len(e)) if k + 1 >= schedule["min_query_count"]
                and e[k]["arrival"] >= schedule["min_duration_s"]]
        if (ends and ends[0] != len(e) - 1) or (not ends and len(e) != len(issues)):
            raise Bad("%d entries for %d issues: not LoadGen's natural end (after entry %s)" % (
                len(e), len(issues), ends[0] if ends else "none: all issues"))
    elif len(e) != len(issues):
        raise Bad("%d entries for %d issues" % (len(e), len(issues)))
    eps = 1e-9
    for k, (x, is_) in enumerate(zip(e, issues)):
        if x["q"] != is_["q"] or x["tokens"] != len(qs[is_["q"]]["input_ids"]):
            raise Bad("entry %d: q %s tokens %s, expected the issue's q %d with %d tokens" % (
                k, x["q"], x["tokens"], is_["q"], len(qs[is_["q"]]["input_ids"])))
        want = is_["t"] if is_["t"] is not None else (e[k - 1]["done"] if k else 0.0)
        if abs(x["arrival"] - want) > eps:
            raise Bad("entry %d: arrival %.9f, expected %.9f (%s)" % (
                k, x["arrival"], want, "the schedule's t" if is_["t"] is not None else "the previous issue's done"))
        if x["start"] < x["arrival"] - eps:
            raise Bad("entry %d: starts at %.6f before its arrival %.6f" % (k, x["start"], x["arrival"]))
        if x["done"] <= x["start"]:
            raise Bad("entry %d: done %.6f not after start %.6f" % (k, x["done"], x["start"]))
    k, prev_done = 0, 0.0
    for b in range(len(e)):
        if k == len(e):
            break
        members = [j for j in range(k, len(e)) if e[j]["batch"] == b]
        if not members or members != list(range(k, k + len(members))):
            raise Bad("batch %d: entries %s, expected consecutive entries from %d" % (b, members, k))
        if len(members) > B:
            raise Bad("batch %d: %d queries, batch_size %d" % (b, len(members), B))
        start = e[k]["start"]
        if any(e[j]["start"] != start or e[j]["done"] != e[k]["done"] for j in members):
            raise Bad("batch %d: its entries disagree on start/done" % b)
        if start < prev_done - eps:
            raise Bad("batch %d: starts at %.6f before batch %d is done at %.6f" % (b, start, b - 1, prev_done))
        end = k + len(members)
        if len(members) < B and end < len(e) and e[end]["arrival"] <= start + eps:
            raise Bad("batch %d: %d queries while entry %d had arrived (%.6f <= start %.6f): not work-conserving/FIFO"
                      % (b, len(members), end, e[end]["arrival"], start))
        k, prev_done = end, e[k]["done"]
    if k != len(e):
        raise Bad("entries after %d are in no batch ordinal in sequence" % k)


def schedule(scenario, B, times, nq=6, min_duration_s=0.0, min_query_count=None):
    """A hand-written schedule on nq made-up queries of lengths 20, 35, 50, ... (tiny model)."""
    qs = [{"id": i, "unique_id": 1000 + i, "input_ids": [101] + [2000 + i] * (18 + 15 * i) + [102],
           "segment_ids": [0] * 5 + [1] * (15 + 15 * i)} for i in range(nq)]
    return {"format": "bertbench-scenario-schedule/1", "scenario": scenario,
            "target_qps": None if scenario == "singlestream" else 50.0, "latency_bound_ms": 100.0, "batch_size": B,
            "qsl_rng_seed": "3066443479025735752", "sample_index_rng_seed": "10688027786191513374",
            "schedule_rng_seed": "14962580496156340209", "min_duration_s": min_duration_s,
            "min_query_count": len(times) if min_query_count is None else min_query_count,
            "loadgen_target_qps": 50.0, "performance_sample_count": nq, "queries": qs,
            "issues": [{"q": k % nq, "t": t} for k, t in enumerate(times)]}


def main():
    threads = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--threads=")), "1")
    import ort_export as oe
    import ort_squad
    ort_dir = oe.setup_ort()
    onnx, record = ort_squad.export_and_verify("tiny", int(threads), ort_dir, "fp32")
    cases = {
        "singlestream": schedule("singlestream", 1, [None] * 8),
        # LoadGen's natural end: after the first issue at or past 0.03 s with 3 made (of 5000)
        "singlestream_end": schedule("singlestream", 1, [None] * 5000, min_duration_s=0.03, min_query_count=3),
        "offline": schedule("offline", 4, [0.0] * 10),  # batches of 4, 4, 2
        "server": schedule("server", 3, [0.0, 0.001, 0.002, 0.05, 0.051, 0.2, 0.2, 0.2, 0.2, 0.2, 0.3]),
    }
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        for name, s in cases.items():
            sp, lp = os.path.join(d, name + ".schedule.json"), os.path.join(d, name + ".log.json")
            with open(sp, "w") as f:
                json.dump(s, f)
            r = subprocess.run(["node", os.path.join(HERE, "ort_scenario.js"), "--ort_dir=" + ort_dir, "--onnx=" + onnx,
                                "--verified=" + record, "--schedule=" + sp, "--threads=" + threads, "--log=" + lp])
            if r.returncode != 0:
                print("FAIL %s: ort_scenario.js exit status %d" % (name, r.returncode))
                failures += 1
                continue
            with open(lp) as f:
                log = json.load(f)
            try:
                check_log(s, log)
                sizes = [sum(1 for x in log["entries"] if x["batch"] == b) for b in range(1 + log["entries"][-1]["batch"])]
                if name == "offline" and sizes != [4, 4, 2]:
                    raise Bad("offline batches %s, expected [4, 4, 2] (all arrived at 0)" % sizes)
                if name.startswith("singlestream") and sizes != [1] * len(log["entries"]):
                    raise Bad("singlestream batches %s, expected one query each" % sizes)
                if name == "singlestream_end" and not 3 <= len(log["entries"]) < 5000:
                    raise Bad("singlestream_end: %d entries" % len(log["entries"]))
                if name == "server" and not (max(sizes) <= 3 and sum(sizes) == 11 and log["entries"][5]["start"] >= 0.2):
                    raise Bad("server batches %s" % sizes)
                print("ok   %s: %d issues, batches %s, last done %.3f s" % (name, len(log["entries"]), sizes,
                                                                          log["entries"][-1]["done"]))
            except Bad as e:
                print("FAIL %s: %s" % (name, e))
                failures += 1
        # check_log must refuse logs broken on purpose, each for the reason broken
        def merge_first_two_batches(L):
            first = L["entries"][0]
            for x in L["entries"]:
                if x["batch"] == 1:
                    x.update(batch=0, start=first["start"], done=first["done"])

        def pass_over(L):  # offline: all arrived at 0; batch 0 cut to 3 queries, the 4th run alone after it
            e = L["entries"]
            for x in e[4:]:
                x["batch"] += 1
            e[3].update(batch=1, start=e[0]["done"], done=e[0]["done"] + 1e-3)

        def delay_chained(L):
            L["entries"][3]["arrival"] += 0.01
            L["entries"][3]["start"] += 0.01

        breaks = [
            ("server", "start before arrival", lambda L: L["entries"][5].update(start=0.1), "before its arrival"),
            ("offline", "batch over batch_size", merge_first_two_batches, "batch_size"),
            ("server", "not FIFO", lambda L: L["entries"].insert(0, L["entries"].pop(1)), "expected the issue's q"),
            ("offline", "an arrived query left out of a batch", pass_over, "not work-conserving"),
            ("singlestream", "singlestream chaining", delay_chained, "the previous issue's done"),
            ("singlestream_end", "a singlestream log cut one issue early",
             lambda L: L["entries"].pop(), "natural end"),
            ("offline", "a seed through a double", lambda L: L.update(sample_index_rng_seed=10688027786191513600),
             "expected the schedule's"),
        ]
        for name, what, brk, reason in breaks:
            with open(os.path.join(d, name + ".log.json")) as f:
                bad = json.load(f)
            brk(bad)
            try:
                check_log(cases[name], bad)
                print("FAIL check_log accepted a %s log broken by: %s" % (name, what))
                failures += 1
            except Bad as e:
                if reason not in str(e):
                    print("FAIL check_log refused a %s log broken by %s, but for another reason: %s" % (name, what, e))
                    failures += 1
                else:
                    print("ok   check_log refuses %s: %s" % (what, e))
        bad_sp = os.path.join(d, "bad.schedule.json")
        broken = copy.deepcopy(cases["offline"])
        broken["issues"][2]["q"] = 99
        with open(bad_sp, "w") as f:
            json.dump(broken, f)
        r = subprocess.run(["node", os.path.join(HERE, "ort_scenario.js"), "--ort_dir=" + ort_dir, "--onnx=" + onnx,
                            "--verified=" + record, "--schedule=" + bad_sp, "--threads=" + threads,
                            "--log=" + os.path.join(d, "bad.log.json")], stderr=subprocess.PIPE, text=True)
        msg = r.stderr.strip()
        if r.returncode == 0 or bad_sp not in msg or "issue 2" not in msg or len(msg.splitlines()) != 1:
            print("FAIL a schedule with an out-of-range query index: exit %d, stderr %r" % (r.returncode, msg))
            failures += 1
        else:
            print("ok   malformed schedule refused: %s" % msg)
    print("scenario_test.py: %s" % ("PASS" if not failures else "%d FAILED" % failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
