"""The checks of bench/soak.sh.

    python3 -m netchar_bench.soak check RESULT.json
        "ok", or the one reason netchar's --json result is wrong (exit 1): error set, stream
        records missing, inexact accounting (TCP: receiver bytes = sender bytes per stream and
        = -n; UDP: sent = received + lost; rr/crr: one request per transaction).
    python3 -m netchar_bench.soak summary < SAMPLES
        the figures and the flat/NOT FLAT verdict (exit 1) from the server samples
        "elapsed_s rss_kib fds threads", one a line; SOAK_TESTS, SOAK_FAILURES, SOAK_WARMUP,
        SOAK_LOGGED and SOAK_SERVER_STATUS in the environment.
"""

import json
import os
import sys
from collections import defaultdict


class Failed(Exception):
    """The result is wrong; the message is the one reason."""


def fail(msg):
    raise Failed(msg)


def _check(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except Exception as e:
        fail(f"stdout is not one JSON document ({e})")
    if doc.get("error") is not None:
        fail(f"error: {doc['error']}")
    test, summary, streams = doc["test"], doc["summary"], doc["streams"]
    kind = test["kind"]
    by_id = defaultdict(dict)
    for s in streams:
        by_id[(s["id"], s["flow"])][s["role"]] = s
    if not by_id:
        fail("no stream records")

    if kind == "tcp":
        for (sid, flow), ends in sorted(by_id.items()):
            if set(ends) != {"sender", "receiver"}:
                fail(f"stream {sid} {flow}: records from {sorted(ends)} only")
            tx, rx = ends["sender"]["bytes"], ends["receiver"]["bytes"]
            if tx != rx:
                fail(f"stream {sid} {flow}: sender wrote {tx} bytes, receiver read {rx}")
        want = test["end"].get("bytes")
        for flow, d in summary.items():
            tx, rx = d["sender"]["total_bytes"], d["receiver"]["total_bytes"]
            if tx != rx or not d["bytes_match"]:
                fail(f"{flow}: sender {tx} bytes, receiver {rx} (bytes_match {d['bytes_match']})")
            if want is not None and rx != want:
                fail(f"{flow}: -n {want} but the receiver read {rx} bytes")
    elif kind == "udp":
        for (sid, flow), ends in sorted(by_id.items()):
            if set(ends) != {"sender", "receiver"}:
                fail(f"stream {sid} {flow}: records from {sorted(ends)} only")
            sent = ends["sender"]["udp_sent"]["packets"]
            rx = ends["receiver"]["udp_received"]
            if sent != rx["packets"] + rx["lost"]:
                fail(f"stream {sid} {flow}: sent {sent} != received {rx['packets']} + lost {rx['lost']}")
        for flow, d in summary.items():
            if not d["packets_accounted"]:
                fail(f"{flow}: packets_accounted is false")
    elif kind == "rr":
        rr = summary["rr"]
        spec = test["rr"]
        n, lost, late = rr["transactions"], rr["lost"], rr["late"]
        requests = sum(s["bytes"] for s in streams if s["measured_by"] == "server")
        answers = sum(s["bytes"] for s in streams if s["measured_by"] == "client")
        req_b, resp_b = spec["request_bytes"], spec["response_bytes"]
        if n <= 0:
            fail("no transactions")
        if not spec["udp"] or (lost == 0 and late == 0):
            if requests != n * req_b or answers != n * resp_b:
                fail(f"{n} transactions but the responder read {requests} request bytes and the requester {answers} response bytes")
            if lost or late:
                fail(f"TCP rr with lost {lost}, late {late}")
        elif not (n * req_b <= requests <= (n + lost + late) * req_b):
            fail(f"{n} transactions, lost {lost}, late {late}, but the responder read {requests} request bytes")
    else:
        fail(f"unexpected test kind {kind}")
    return "ok"


def check_result(path):
    try:
        return _check(path)
    except (KeyError, TypeError, AttributeError) as e:
        raise Failed(f"the result lacks a field or has one of the wrong type ({type(e).__name__}: {e})") from None


def summary(stdin, env):
    rows = [list(map(int, l.split())) for l in stdin if l.strip()]
    t = [r[0] for r in rows]; rss = [r[1] for r in rows]; fds = [r[2] for r in rows]; thr = [r[3] for r in rows]
    warm = next((i for i, s in enumerate(t) if s >= int(env["SOAK_WARMUP"])), len(rows) - 1)
    base = rss[warm]
    limit = base * 1.10 + 2048
    def mib(kib):
        return f"{kib / 1024:.1f} MiB"
    tests, logged, failures = env["SOAK_TESTS"], env["SOAK_LOGGED"], env["SOAK_FAILURES"]
    print()
    print(f"tests run        {tests} ({logged} logged by the server), failures {failures}")
    print(f"samples          {len(rows)}, every 30 s over {t[-1]} s")
    print(f"RSS              first {mib(rss[0])}, after warm-up ({t[warm]} s) {mib(base)}, min {mib(min(rss))}, max {mib(max(rss))}, last {mib(rss[-1])}")
    print(f"open fds         first {fds[0]}, max {max(fds)}, last {fds[-1]}")
    print(f"threads          first {thr[0]}, max {max(thr)}, last {thr[-1]}")
    print(f"server exit      status {env['SOAK_SERVER_STATUS']} on SIGTERM")
    verdicts = []
    if rss[-1] > limit:
        verdicts.append(f"RSS grew: last {mib(rss[-1])} > {mib(limit)} (10% + 2 MiB over {mib(base)})")
    if fds[-1] != fds[0]:
        verdicts.append(f"fds not back: {fds[0]} -> {fds[-1]}")
    if thr[-1] != thr[0]:
        verdicts.append(f"threads not back: {thr[0]} -> {thr[-1]}")
    if verdicts:
        print("verdict          NOT FLAT: " + "; ".join(verdicts))
        return 1
    print(f"verdict          flat (last RSS at most {mib(limit)}; fds and threads back to their first values)")
    return 0


def main(argv):
    if argv[:1] == ["check"] and len(argv) == 2:
        try:
            print(check_result(argv[1]))
        except Failed as e:
            print(e)
            return 1
        return 0
    if argv == ["summary"]:
        return summary(sys.stdin, os.environ)
    print("usage: python3 -m netchar_bench.soak check RESULT.json | summary", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
