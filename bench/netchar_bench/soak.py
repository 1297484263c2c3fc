"""The checks of bench/soak.sh.

    python3 -m netchar_bench.soak check RESULT.json
        "ok", or the one reason netchar's --json result is wrong (exit 1): error set, stream
        records missing, inexact accounting (TCP: receiver bytes = sender bytes per stream and
        = -n; UDP: sent = received + lost; rr/crr: one request per transaction).
    python3 -m netchar_bench.soak peer-check RESULT.json ARG...
        the same for a netchar client speaking a peer protocol (ARG...: its command line, whose
        --proto names the protocol the result must carry): one JSON document or an array (suites);
        error null in each, every stream record moved something, and exact accounting wherever
        both ends of a stream are in the result (TCP bytes, UDP sent = received + lost), echo's
        bytes and datagrams back equal to those sent, rr transactions (TCP: none lost).
    python3 -m netchar_bench.soak iperf3-check RESULT.json
        stock `iperf3 -c -J` against netchar's --iperf3: no error, every stream reported; TCP up:
        the receiver's bytes are the sender's (netchar settles on the client's totals), TCP -R:
        some and no more than were sent; UDP: datagrams received + lost no more than sent, and
        up, the receiver's total is the sender's.
    python3 -m netchar_bench.soak iperf2-check OUTPUT ARG...
        stock `iperf -c` (2.x, text output with stderr) against netchar's --iperf2 (ARG...: its
        command line): a report line for every stream (-P N, or 2 for -r/-d: the dial-back
        stream arrived), no "failed"/"refused"/WARNING line (iperf exits 0 after those); UDP: the
        server's report came back (up) or the datagrams arrived (-R), Lost/Total with a total.
    python3 -m netchar_bench.soak ports N
        N ports P such that P and P+1 are free for TCP and for UDP on 127.0.0.1 (the netio and
        nc_test clients bind the port after the server's), no two adjacent, one line.
    python3 -m netchar_bench.soak summary < SAMPLES
        the figures and the flat/NOT FLAT verdict (exit 1) from the server samples
        "elapsed_s rss_kib fds threads [rss_anon_kib]", one a line; SOAK_TESTS, SOAK_FAILURES,
        SOAK_WARMUP, SOAK_LOGGED and SOAK_SERVER_STATUS in the environment, and optionally
        SOAK_LOGGED_BY (the server's log lines per protocol, printed as given).
"""

import json
import os
import re
import socket
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


def _load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except Exception as e:
        fail(f"stdout is not one JSON document ({e})")


def _fields(check, *args):
    """check(*args), with a missing or mistyped field as Failed (one line, no traceback)."""
    try:
        return check(*args)
    except (KeyError, TypeError, AttributeError, IndexError) as e:
        raise Failed(f"the result lacks a field or has one of the wrong type ({type(e).__name__}: {e})") from None


def _arg(args, flag):
    """The value after FLAG in a command line, or None."""
    return args[args.index(flag) + 1] if flag in args[:-1] else None


def _check_peer_doc(doc, proto, where):
    if doc.get("error") is not None:
        fail(f"{where}error: {doc['error']}")
    test, summary, streams = doc["test"], doc["summary"], doc["streams"]
    kind = test["kind"]
    if proto is not None and test.get("protocol") != proto:
        fail(f"{where}protocol {test.get('protocol')!r}, asked for {proto!r}")
    if not streams:
        fail(f"{where}no stream records")
    by_id = defaultdict(dict)
    for s in streams:
        if s["bytes"] <= 0:
            fail(f"{where}stream {s['id']} {s['flow']} {s['role']}: {s['bytes']} bytes")
        by_id[(s["id"], s["flow"])][s["role"]] = s
    for (sid, flow), ends in sorted(by_id.items()):
        if set(ends) != {"sender", "receiver"}:
            continue
        if kind == "tcp" and ends["sender"]["bytes"] != ends["receiver"]["bytes"]:
            fail(f"{where}stream {sid} {flow}: sender wrote {ends['sender']['bytes']} bytes, receiver read {ends['receiver']['bytes']}")
        if kind == "udp":
            sent = ends["sender"]["udp_sent"]["packets"]
            rx = ends["receiver"]["udp_received"]
            if sent != rx["packets"] + rx["lost"]:
                fail(f"{where}stream {sid} {flow}: sent {sent} != received {rx['packets']} + lost {rx['lost']}")
    if proto == "echo" and kind in ("tcp", "udp"):
        up = [s for s in streams if s["flow"] == "up" and s["role"] == "sender"]
        down = [s for s in streams if s["flow"] == "down" and s["role"] == "receiver"]
        if not up or not down:
            fail(f"{where}echo: records of the bytes sent and of the bytes back expected")
        if kind == "tcp":
            sent, back = sum(s["bytes"] for s in up), sum(s["bytes"] for s in down)
            if sent != back:
                fail(f"{where}echo: sent {sent} bytes, {back} came back")
        else:
            sent = sum(s["udp_sent"]["packets"] for s in up)
            back = sum(s["udp_received"]["packets"] + s["udp_received"]["lost"] for s in down)
            if sent != back:
                fail(f"{where}echo: sent {sent} datagrams, received + lost {back}")
    if kind == "rr":
        rr = summary["rr"]
        if rr["transactions"] <= 0:
            fail(f"{where}no transactions")
        if not test["rr"]["udp"] and (rr["lost"] or rr["late"]):
            fail(f"{where}TCP rr with lost {rr['lost']}, late {rr['late']}")


def check_peer(path, args):
    doc = _load(path)
    docs = doc if isinstance(doc, list) else [doc]
    if not docs:
        fail("an empty array of results")
    proto = _arg(args, "--proto")
    for i, d in enumerate(docs):
        _fields(_check_peer_doc, d, proto, f"result {i + 1} of {len(docs)}: " if len(docs) > 1 else "")
    return "ok"


def _check_iperf3(d):
    if d.get("error"):
        fail(f"error: {d['error']}")
    start, end = d["start"]["test_start"], d["end"]
    udp, reverse, n = start["protocol"] == "UDP", bool(start["reverse"]), start["num_streams"]
    if len(end["streams"]) != n:
        fail(f"{len(end['streams'])} streams in the results, {n} asked for")
    sent, recv = end["sum_sent"], end["sum_received"]
    if not udp:
        if recv["bytes"] <= 0:
            fail("the receiver read no bytes")
        if not reverse and recv["bytes"] != sent["bytes"]:
            fail(f"sender {sent['bytes']} bytes, the netchar receiver {recv['bytes']}")
        if reverse and recv["bytes"] > sent["bytes"]:
            fail(f"received {recv['bytes']} bytes, more than the {sent['bytes']} sent")
    else:
        total, lost = recv["packets"], recv["lost_packets"]
        if total <= 0 or lost < 0 or lost > total or total > sent["packets"]:
            fail(f"sent {sent['packets']} datagrams, receiver total {total}, lost {lost}")
        if not reverse and total != sent["packets"]:
            fail(f"sent {sent['packets']} datagrams, the netchar receiver's total {total}")
    return "ok"


def check_iperf3(path):
    return _fields(_check_iperf3, _load(path))


_I2_REPORT = re.compile(r"^\[\s*\*?(\d+)\]\s+\d+\.\d+-\s*\d+\.\d+ sec\s+[\d.]+ [KMGT]?Bytes", re.M)
_I2_LOST = re.compile(r"\s(\d+)/\s*(\d+) \(")


def check_iperf2(path, args):
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError as e:
        fail(f"no output ({e})")
    bad = [l.strip() for l in text.splitlines() if re.search(r"failed|refused|WARNING|error", l)]
    if bad:
        fail(bad[0])
    ids = set(_I2_REPORT.findall(text))
    want = 2 if ("-r" in args or "-d" in args) else int(_arg(args, "-P") or 1)
    if len(ids) != want:
        fail(f"report lines for {len(ids)} stream(s), {want} expected")
    if "-u" in args:
        tail = text.split("Server Report:", 1)[1] if "-R" not in args and "Server Report:" in text else text
        if "-R" not in args and "Server Report:" not in text:
            fail("no server report (the server did not answer the FIN)")
        m = _I2_LOST.search(tail)
        if m is None or int(m.group(2)) <= 0:
            fail("no Lost/Total figure with a total")
    return "ok"


def free_ports(n):
    """N ports P with P and P+1 free for TCP and UDP on 127.0.0.1, no two within 1 of each other."""
    out = []
    for _ in range(1000):
        if len(out) == n:
            break
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if p >= 65535 or any(abs(p - q) < 2 for q in out):
            continue
        ok = True
        for port in (p, p + 1):
            for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
                with socket.socket(socket.AF_INET, kind) as x:
                    try:
                        x.bind(("127.0.0.1", port))
                    except OSError:
                        ok = False
        if ok:
            out.append(p)
    if len(out) < n:
        fail(f"found only {len(out)} free port pairs of {n}")
    return out


def summary(stdin, env):
    rows = [list(map(int, l.split())) for l in stdin if l.strip()]
    t = [r[0] for r in rows]; rss = [r[1] for r in rows]; fds = [r[2] for r in rows]; thr = [r[3] for r in rows]
    anon = [r[4] for r in rows] if all(len(r) > 4 for r in rows) else None
    warm = next((i for i, s in enumerate(t) if s >= int(env["SOAK_WARMUP"])), len(rows) - 1)
    base = rss[warm]
    limit = base * 1.10 + 2048
    def mib(kib):
        return f"{kib / 1024:.1f} MiB"
    tests, logged, failures = env["SOAK_TESTS"], env["SOAK_LOGGED"], env["SOAK_FAILURES"]
    print()
    print(f"tests run        {tests} ({logged} logged by the server), failures {failures}")
    if env.get("SOAK_LOGGED_BY"):
        print(f"server log lines {env['SOAK_LOGGED_BY']}")
    print(f"samples          {len(rows)}, every 30 s over {t[-1]} s")
    print(f"RSS              first {mib(rss[0])}, after warm-up ({t[warm]} s) {mib(base)}, min {mib(min(rss))}, max {mib(max(rss))}, last {mib(rss[-1])}")
    if anon is not None:
        print(f"RSS anonymous    first {mib(anon[0])}, after warm-up {mib(anon[warm])}, max {mib(max(anon))}, last {mib(anon[-1])} (the rest: the binary's and libraries' pages)")
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
    checks = {
        "peer-check": lambda a: check_peer(a[0], a[1:]),
        "iperf3-check": lambda a: check_iperf3(a[0]) if len(a) == 1 else None,
        "iperf2-check": lambda a: check_iperf2(a[0], a[1:]),
    }
    if argv[:1] and argv[0] in checks and len(argv) >= 2:
        try:
            verdict = checks[argv[0]](argv[1:])
        except Failed as e:
            print(e)
            return 1
        if verdict is not None:
            print(verdict)
            return 0
    if argv[:1] == ["ports"] and len(argv) == 2 and argv[1].isdigit():
        try:
            print(*free_ports(int(argv[1])))
        except Failed as e:
            print(e, file=sys.stderr)
            return 1
        return 0
    if argv == ["summary"]:
        return summary(sys.stdin, os.environ)
    print("usage: python3 -m netchar_bench.soak check RESULT.json | peer-check RESULT.json ARG... | "
          "iperf3-check RESULT.json | iperf2-check OUTPUT ARG... | ports N | summary", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
