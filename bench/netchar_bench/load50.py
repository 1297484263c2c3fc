"""The check of bench/load50.sh: every client's netchar --json result against its manifest row
(its title, -n, exact accounting, and that the server counted exactly this client's bytes or
datagrams), and the server log's byte counts against the clients' receiver figures.  Prints one
row per client and a summary; exit 1 on any failure.

    python3 -m netchar_bench.load50 WORKDIR

WORKDIR holds manifest.tsv ("i kind title n"), status.tsv ("i exit_status"), client.I.json,
client.I.err and server.log.
"""

import json
import re
import sys
from collections import defaultdict


def check(work):
    status = dict(l.split() for l in open(f"{work}/status.tsv"))
    rows, failures, server_rx = [], [], []
    for line in open(f"{work}/manifest.tsv"):
        i, kind, title, n = line.rstrip("\n").split("\t")
        n = int(n)
        problems = []
        row = dict(i=i, kind=kind, n=n, tx="-", rx="-", lost="-", conc="-", rate="-")
        if status[i] != "0":
            err = open(f"{work}/client.{i}.err").read().strip().splitlines()
            problems.append(f"exit {status[i]}" + (f": {err[-1]}" if err else ""))
        try:
            doc = json.load(open(f"{work}/client.{i}.json"))
        except Exception as e:
            doc = None
            problems.append(f"no JSON result ({e})")
        if doc is not None and doc.get("error") is not None:
            problems.append(f"error: {doc['error']}")
        if doc is not None and "test" in doc:
            test = doc["test"]
            if test.get("title") != title:
                problems.append(f"title {test.get('title')!r}, expected {title!r}")
            if test["kind"] != kind or test["end"].get("bytes") != n:
                problems.append(f"ran {test['kind']} {test['end']}, asked for {kind} -n {n}")
            up = doc["summary"].get("up")
            ends = defaultdict(dict)
            for s in doc["streams"]:
                ends[s["id"]][s["role"]] = s
            for sid, e in sorted(ends.items()):
                if set(e) != {"sender", "receiver"} or e["receiver"]["measured_by"] != "server":
                    problems.append(f"stream {sid}: records {sorted(e)}")
                    continue
                if kind == "tcp" and e["sender"]["bytes"] != e["receiver"]["bytes"]:
                    problems.append(f"stream {sid}: wrote {e['sender']['bytes']}, server read {e['receiver']['bytes']}")
                if kind == "udp":
                    sent, got = e["sender"]["udp_sent"]["packets"], e["receiver"]["udp_received"]
                    if sent != got["packets"] + got["lost"]:
                        problems.append(f"stream {sid}: sent {sent} != received {got['packets']} + lost {got['lost']}")
            if up is None:
                problems.append("no up summary")
            else:
                tx, rx = up["sender"]["total_bytes"], up["receiver"]["total_bytes"]
                row.update(tx=tx, rx=rx, conc=test.get("concurrent_tests", "?"),
                           rate=f"{up['receiver']['bits_per_second'] / 1e6:.1f}")
                server_rx.append(rx)
                if tx != n:
                    problems.append(f"sent {tx} bytes, its -n is {n}")
                if kind == "tcp":
                    row["lost"] = ""
                    if rx != n or not up["bytes_match"]:
                        problems.append(f"server read {rx} bytes, this client's -n is {n}")
                else:
                    got = up["receiver"]
                    row["lost"] = got["lost"]
                    want_packets = n // 1472
                    if up["sender"]["packets"] != want_packets or got["packets"] + got["lost"] != want_packets:
                        problems.append(f"datagrams: sent {up['sender']['packets']}, server received {got['packets']} + lost {got['lost']}, this client's -n is {want_packets} datagrams")
                    if rx != 1472 * got["packets"] or (got["lost"] == 0 and rx != n):
                        problems.append(f"server read {rx} bytes in {got['packets']} datagrams, this client's -n is {n}")
                    if not up["packets_accounted"]:
                        problems.append("packets_accounted is false")
        row["ok"] = "ok" if not problems else "FAIL"
        rows.append(row)
        failures += [f"client {i} ({title}): {p}" for p in problems]

    logged = [int(m.group(1)) for m in re.finditer(r"^test from .*: received (\d+) bytes", open(f"{work}/server.log").read(), re.M)]
    if len(logged) != len(rows):
        failures.append(f"the server logged {len(logged)} tests, {len(rows)} clients ran")
    elif sorted(logged) != sorted(server_rx):
        failures.append("the byte counts in the server's log are not the clients' receiver figures")

    print(f"{'i':>3} {'kind':4} {'-n bytes':>10} {'sent':>10} {'server read':>11} {'lost':>5} {'at once':>7} {'Mbit/s':>8}  result")
    for r in rows:
        print(f"{r['i']:>3} {r['kind']:4} {r['n']:>10} {r['tx']:>10} {r['rx']:>11} {r['lost']:>5} {r['conc']:>7} {r['rate']:>8}  {r['ok']}")
    ok = sum(r["ok"] == "ok" for r in rows)
    conc = [r["conc"] for r in rows if isinstance(r["conc"], int)]
    udp_lost = sum(r["lost"] for r in rows if isinstance(r["lost"], int))
    print()
    print(f"clients ok       {ok} of {len(rows)}; server logged {len(logged)} tests, their byte counts {'match' if sorted(logged) == sorted(server_rx) else 'DO NOT match'} the clients' results")
    print(f"at once          up to {max(conc) if conc else '?'} tests on the server (concurrent_tests in the results)")
    print(f"UDP lost         {udp_lost} datagrams in all (each counted: sent = received + lost)")
    if failures:
        print("failures:")
        for f in failures:
            print(f"  {f}")
        return 1
    return 0


def main(argv):
    if len(argv) != 1:
        print("usage: python3 -m netchar_bench.load50 WORKDIR", file=sys.stderr)
        return 2
    return check(argv[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
