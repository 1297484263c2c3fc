"""Parsers for what each tool prints: netchar --json, iperf3 -J, iperf2 -y C and -e text, nuttcp
-fparse, sockperf pp, netperf -o and bench/ref/udp_ref.

Every parser takes the tool's output as text and returns a dict of figures plus "notes" (tokens
without spaces naming anything odd in the output, listed in the report).  Output that carries no
usable figure raises ParseError with one line saying what is missing, never a figure read from
the wrong place.

As a command, one line per run for the shell scripts (exit status 1 and one line on stderr when
the output is unusable):

    python3 -m netchar_bench.peers tcp TOOL FILE DIRECTION DUR ZC
        -> "gbps bytes cpu_seconds|- retransmits|- note..."
    python3 -m netchar_bench.peers udp VARIANT FILE LEN DUR MODE [SERVERLOG]
        -> "sent_pkts sent_secs rx_pkts rx_secs rx_bps sent_bps loss_pct cpu_self|- note..."
    python3 -m netchar_bench.peers rr TOOL FILE PROTO LEN CCPU SCPU BUSYPOLL DUR
        -> "tps mean_us p50_us p99_us p999_us|- note..."   (PROTO crr: netchar crr, netperf TCP_CRR)
    python3 -m netchar_bench.peers placement FILE    -> netchar's .summary.placement
    python3 -m netchar_bench.peers bps FILE          -> receiver bit/s of iperf3 -J or netchar --json, or nan
    python3 -m netchar_bench.peers csv-bps < CSV     -> bit/s of iperf2 -y C lines, or nan
"""

import csv
import functools
import json
import re
import sys


class ParseError(Exception):
    """The output holds no usable result; the message says what is missing."""


def _guarded(what):
    """Turn a missing field or a value of the wrong type in WHAT's output into a ParseError
    naming it, so a changed output format fails with a message instead of a traceback."""

    def wrap(parse):
        @functools.wraps(parse)
        def run(*args, **kwargs):
            try:
                return parse(*args, **kwargs)
            except ParseError:
                raise
            except json.JSONDecodeError as e:
                raise ParseError(f"{what}: not JSON ({e})") from None
            except KeyError as e:
                raise ParseError(f"{what}: no field {e} in the output") from None
            except (TypeError, ValueError, IndexError, AttributeError, ZeroDivisionError) as e:
                raise ParseError(f"{what}: unexpected output ({type(e).__name__}: {e})") from None

        return run

    return wrap


def _json_object(text):
    d = json.loads(text)
    if not isinstance(d, dict):
        raise ParseError("the JSON document is not an object")
    return d


def _error_note(d, notes):
    if d.get("error"):
        notes.append(("error=%r" % d["error"]).replace(" ", "_"))


def _netchar_cpu(d, notes):
    """Client + server CPU seconds from netchar's .cpu.local and .cpu.remote, or None."""
    c = d.get("cpu") or {}
    if "local" in c and "remote" in c:
        return sum(c[k]["user_seconds"] + c[k]["system_seconds"] for k in ("local", "remote"))
    notes.append("no-cpu-in-json")
    return None


# ------------------------------------------------------------------ TCP throughput (tcp.sh)
# Each returns dict(bps, bytes, cpu (s or None), retransmits (or None), notes).


@_guarded("netchar JSON")
def tcp_netchar(text, direction, dur, zerocopy, skip_rx_copy=False, verify=False):
    notes = []
    d = _json_object(text)
    _error_note(d, notes)
    s = (d.get("summary") or {}).get(direction)
    if not s:
        raise ParseError("no summary.%s in netchar JSON (error=%r)" % (direction, d.get("error")))
    snd, rcv = s["sender"], s["receiver"]
    # Loopback TCP delivers everything that was sent; any mismatch is a netchar counting bug.
    if s.get("bytes_match") is False or snd["bytes"] != rcv["bytes"]:
        notes.append(
            "bytes-mismatch(sent=%d,received=%d,bytes_match=%s)"
            % (snd["bytes"], rcv["bytes"], s.get("bytes_match"))
        )
    # The reported rate should be bytes*8/seconds; flag anything else.
    if rcv["seconds"] > 0 and abs(rcv["bits_per_second"] - rcv["bytes"] * 8 / rcv["seconds"]) > 1e-3 * rcv["bits_per_second"]:
        notes.append("rate!=bytes/seconds")
    if abs(rcv["seconds"] - dur) > 0.05 * dur:
        notes.append("receiver-seconds=%.3f(expected~%g)" % (rcv["seconds"], dur))
    # Same bytes over a different interval biases the receiver rate against the sender's.
    if snd["seconds"] > 0 and abs(rcv["seconds"] / snd["seconds"] - 1) > 0.01:
        notes.append("receiver-interval-vs-sender:%+.1f%%" % (100 * (rcv["seconds"] / snd["seconds"] - 1)))
    if zerocopy and not d.get("test", {}).get("tcp", {}).get("zerocopy"):
        notes.append("zerocopy-not-recorded-in-test-spec")
    if zerocopy:
        # Which method the probe kept, and what each measured (Gbit/s), for the notes.
        for st in d.get("streams") or []:
            z = st.get("zerocopy") or {}
            if z.get("method"):
                tried = ",".join("%s=%.1f" % (t["method"], t["bits_per_second"] / 1e9) for t in z.get("tried") or [])
                notes.append("zc-method=%s%s" % (z["method"], "(" + tried + ")" if tried else ""))
                break
    _verify_notes(s, rcv, verify, notes)
    if skip_rx_copy:
        methods = {st.get("receive_method") for st in d.get("streams") or [] if st.get("role") == "receiver"}
        if methods != {"msg_trunc"}:
            notes.append("receive-method=%s(not-msg_trunc)" % ",".join(sorted(str(m) for m in methods)))
    cpu = _netchar_cpu(d, notes)
    return dict(bps=rcv["bits_per_second"], bytes=rcv["bytes"], cpu=cpu,
                retransmits=snd.get("retransmits"), notes=notes)


def _verify_notes(flow, rcv, verify, notes):
    """--verify runs: loopback corrupts nothing, and every byte received was compared."""
    v = flow.get("verify")
    if verify and not v:
        notes.append("verify-not-in-summary")
    if not v:
        return
    if v.get("corrupted_bytes") or v.get("corrupted_datagrams"):
        notes.append("verify-corrupted=%s" % v.get("corrupted_bytes"))
    # UDP compares the payload behind each datagram's 24-byte header.
    expected = rcv["total_bytes"] - 24 * rcv["packets"] if "packets" in rcv else rcv["total_bytes"]
    if v.get("checked_bytes") != expected:
        notes.append("verify-checked=%s(expected %d)" % (v.get("checked_bytes"), expected))


@_guarded("iperf3 JSON")
def tcp_iperf3(text):
    d = _json_object(text)
    if d.get("error"):
        raise ParseError("iperf3 error: %s" % d["error"])
    e = d["end"]
    r = e["sum_received"]
    c = e["cpu_utilization_percent"]
    # host_total = client, remote_total = server; % of one core over the test.
    cpu = (c["host_total"] + c["remote_total"]) / 100 * r["seconds"]
    return dict(bps=r["bits_per_second"], bytes=r["bytes"], cpu=cpu,
                retransmits=e.get("sum_sent", {}).get("retransmits"), notes=[])


@_guarded("netperf output")
def tcp_netperf(text):
    """`netperf -t TCP_STREAM -P 0 ... -- -o THROUGHPUT,THROUGHPUT_UNITS,ELAPSED_TIME`: one line
    "42345.67,10^6bits/s,3.00" (the receiver's rate: netperf reports netserver's bytes)."""
    for line in text.splitlines():
        f = line.strip().split(",")
        if len(f) >= 3 and f[1].endswith("bits/s"):
            scale = {"10^6bits/s": 1e6, "10^9bits/s": 1e9, "10^3bits/s": 1e3}.get(f[1])
            if scale is None:
                raise ParseError("netperf: unknown unit %r" % f[1])
            bps, secs = float(f[0]) * scale, float(f[2])
            return dict(bps=bps, bytes=int(bps * secs / 8), cpu=None, retransmits=None, notes=[])
    raise ParseError("no netperf -o THROUGHPUT,THROUGHPUT_UNITS,ELAPSED_TIME line")


def _iperf2_csv_rows(text):
    # CSV: date,local_ip,local_port,remote_ip,remote_port,id,interval,bytes,bits_per_second
    return [r for r in csv.reader(text.splitlines()) if len(r) >= 9]


@_guarded("iperf2 CSV")
def tcp_iperf2(text):
    # One line per stream (id -1 would be a sum line: not printed by 2.1.8 with -y C, but
    # skipped if present).  iperf2 has no CPU report: the caller uses process accounting.
    rows = _iperf2_csv_rows(text)
    streams = [r for r in rows if r[5] != "-1"] or rows
    if not streams:
        raise ParseError("no iperf2 CSV lines")
    return dict(bps=sum(float(r[8]) for r in streams), bytes=sum(int(r[7]) for r in streams),
                cpu=None, retransmits=None, notes=[])


@_guarded("iperf2 CSV")
def iperf2_csv_bps(text):
    """bit/s of iperf2 -y C stream lines: the sum of their bytes over the longest interval
    (field 7, "a-b"); the figure of iperf2.sh."""
    total, secs = 0, 0.0
    for f in _iperf2_csv_rows(text):
        if f[5] == "-1":
            continue
        total += int(f[7])
        a, b = f[6].split("-")
        secs = max(secs, float(b) - float(a))
    if secs <= 0:
        raise ParseError("no iperf2 CSV stream lines with an interval")
    return total * 8 / secs


@_guarded("receiver JSON")
def receiver_bps(text):
    """Receiver bit/s of iperf3 -J (end.sum_received) or netchar --json (summary.up); the
    figure of adapters.sh."""
    d = _json_object(text)
    if "end" in d:
        v = d["end"].get("sum_received", {}).get("bits_per_second")
    else:
        v = d.get("summary", {}).get("up", {}).get("receiver", {}).get("bits_per_second")
    if v is None:
        raise ParseError("no receiver bits_per_second (iperf3 end.sum_received, netchar summary.up.receiver)")
    return float(v)


# ------------------------------------------------------------------ UDP (udp.sh)
# Each returns dict(sent, sent_secs, rx, rx_secs, rx_bps, sent_bps, loss, cpu, notes): datagrams
# sent and received, each side's interval, payload bit/s, the tool's own loss % and its own CPU
# seconds (None where it has none).


def _udp(sent, sent_s, rx, rx_s, rx_bps, sent_bps, loss, cpu, notes):
    return dict(sent=sent, sent_secs=sent_s, rx=rx, rx_secs=rx_s, rx_bps=rx_bps, sent_bps=sent_bps,
                loss=loss, cpu=cpu, notes=notes)


@_guarded("netchar JSON")
def udp_netchar(text, variant, length, dur):
    """VARIANT: netchar (GSO), netchar-nogso, netchar-gro, netchar-q100, netchar-rand (--payload
    random) or netchar-verify (--payload random --verify)."""
    notes = []
    L = length
    d = _json_object(text)
    _error_note(d, notes)
    s = (d.get("summary") or {}).get("up")
    if not s:
        raise ParseError("no summary.up in netchar JSON (error=%r)" % d.get("error"))
    snd, rcv = s["sender"], s["receiver"]
    gro = variant == "netchar-gro"
    want_gso = variant != "netchar-nogso"
    u = (d.get("test") or {}).get("udp") or {}
    if u.get("gso") != want_gso or u.get("gro") != gro:
        notes.append("test.udp-gso=%s,gro=%s(expected %s,%s)" % (u.get("gso"), u.get("gro"), want_gso, gro))
    if want_gso and not snd.get("gso"):
        notes.append("sender-did-not-use-GSO")
    if bool(rcv.get("coalesced")) != gro:
        notes.append("coalesced=%s(expected %s)" % (rcv.get("coalesced"), gro))
    sp, rp, lost = snd["packets"], rcv["packets"], rcv.get("lost", 0)
    # Every datagram is either received (counted once) or lost.
    if sp != rp + lost:
        notes.append("sent!=received+lost(%d!=%d+%d)" % (sp, rp, lost))
    if s.get("packets_accounted") is False:
        notes.append("packets_accounted=false")
    # Fixed-size payload: received bytes must be packets x L.
    if rcv["bytes"] != rp * L:
        notes.append("received-bytes/L=%d!=packets=%d" % (rcv["bytes"] // L, rp))
    if snd["bytes"] != sp * L:
        notes.append("sent-bytes/L=%d!=packets=%d" % (snd["bytes"] // L, sp))
    # On loopback the socket buffer is the only place to lose datagrams: drops == lost.
    kd = rcv.get("kernel_drops")
    if kd is not None and kd != lost:
        by_bytes = sp - rcv["bytes"] // L
        notes.append("kernel_drops=%d!=lost=%d(sent-bytes/L=%d)" % (kd, lost, by_bytes))
    for k in ("duplicates", "out_of_order", "foreign"):
        if rcv.get(k):
            notes.append("%s=%d" % (k, rcv[k]))
    if snd.get("send_errors"):
        notes.append("send_errors=%d" % snd["send_errors"])
    if rcv["seconds"] > 0 and abs(rcv["bits_per_second"] - rcv["bytes"] * 8 / rcv["seconds"]) > 1e-3 * rcv["bits_per_second"]:
        notes.append("rate!=bytes/seconds")
    if abs(rcv["seconds"] - dur) > 0.05 * dur:
        notes.append("receiver-seconds=%.3f(expected~%g)" % (rcv["seconds"], dur))
    _verify_notes(s, rcv, variant == "netchar-verify", notes)
    cpu = _netchar_cpu(d, notes)
    return _udp(sp, snd["seconds"], rp, rcv["seconds"], rcv["bits_per_second"], snd["bits_per_second"],
                rcv.get("loss_percent", 0.0), cpu, notes)


@_guarded("udp_ref output")
def udp_ref(text, length):
    """bench/ref/udp_ref's line "udp_ref len=L segments=S sent=N sent_s=T received=M received_s=U"."""
    m = re.search(r"udp_ref len=(\d+) segments=(\d+) sent=(\d+) sent_s=([\d.]+) received=(\d+) received_s=([\d.]+)", text)
    if not m:
        raise ParseError("no udp_ref line")
    L, sent, sent_s, rx, rx_s = int(m.group(1)), int(m.group(3)), float(m.group(4)), int(m.group(5)), float(m.group(6))
    if L != length:
        raise ParseError("udp_ref ran with len=%d, not %d" % (L, length))
    if rx_s <= 0 or sent_s <= 0:
        raise ParseError("udp_ref measured no interval")
    loss = 100.0 * (sent - rx) / sent if sent else 0.0
    return _udp(sent, sent_s, rx, rx_s, rx * L * 8 / rx_s, sent * L * 8 / sent_s, loss, None, [])


@_guarded("iperf3 JSON")
def udp_iperf3(text, length):
    notes = []
    L = length
    d = _json_object(text)
    if d.get("error"):
        raise ParseError("iperf3 error: %s" % d["error"])
    e = d["end"]
    s, r = e["sum_sent"], e["sum_received"]
    c = e["cpu_utilization_percent"]
    rx = r["bytes"] // L                     # bytes of the datagrams the server really got
    if r["packets"] - r["lost_packets"] != rx:
        notes.append("iperf3-packets-lost=%d!=bytes/L=%d" % (r["packets"] - r["lost_packets"], rx))
    # host_total = client, remote_total = server; % of one core over the test.
    cpu = (c["host_total"] + c["remote_total"]) / 100 * s["seconds"]
    return _udp(s["packets"], s["seconds"], rx, r["seconds"], rx * L * 8 / r["seconds"],
                s["packets"] * L * 8 / s["seconds"], r["lost_percent"], cpu, notes)


# iperf2 -e receiver line: "a-b sec ... lost/total (pct%)"
_IPERF2_RX = r"(\d+\.\d+)-(\d+\.\d+) sec .*? (-?\d+)/(\d+) +\((-?[\d.e+]+)%\)"


@_guarded("iperf2 output")
def udp_iperf2(client_text, server_text, length):
    """CLIENT_TEXT: `iperf -c -u -e` output; SERVER_TEXT: the per-run `iperf -s -u -e` log."""
    notes = []
    L = length
    t, srv = client_text, server_text
    m = re.search(r"Sent (\d+) datagrams", t)
    iv = re.search(r"(\d+\.\d+)-(\d+\.\d+) sec", t)
    if not m or not iv:
        raise ParseError("iperf2 client printed no send summary")
    sent, tx_s = int(m.group(1)), float(iv.group(2)) - float(iv.group(1))
    # receiver view: the server's own log, else the server report relayed to the client
    rep = re.findall(_IPERF2_RX, srv)
    if not rep and "Server Report:" in t:
        rep = re.findall(_IPERF2_RX, t.split("Server Report:")[-1])
        notes.append("rx-from-client's-server-report")
    if not rep:
        raise ParseError("iperf2: no receiver report (server log nor client's Server Report)")
    a, b, lost, tot, pct = rep[-1]
    rx_s = float(b) - float(a)
    rx = int(tot) - int(lost)
    return _udp(sent, tx_s, rx, rx_s, rx * L * 8 / rx_s, sent * L * 8 / tx_s, float(pct), None, notes)


@_guarded("nuttcp output")
def udp_nuttcp(text, length):
    notes = []
    L = length
    v = {}
    for line in text.splitlines():
        for f in line.split():
            if "=" in f:
                k, _, x = f.partition("=")
                v[k] = x
    if "pkt" not in v or "rate_Mbps" not in v:
        raise ParseError("nuttcp printed no -fparse result")
    mb, rate = float(v["megabytes"]), float(v["rate_Mbps"])
    # real_seconds is printed with 2 decimals; megabytes/rate_Mbps (4 decimals each) give the
    # interval nuttcp itself used.
    secs = mb * 1048576 * 8 / (rate * 1e6) if rate > 0 else float(v["real_seconds"])
    rx = int(v["pkt"]) - int(v["drop"])
    if abs(rx - mb * 1048576 / L) > 2:
        notes.append("nuttcp-pkt-drop=%d!=megabytes/L=%.0f" % (rx, mb * 1048576 / L))
    sent = round(float(v["tx_megabytes"]) * 1048576 / L)
    cpu = (float(v.get("tx_cpu", "nan")) + float(v.get("rx_cpu", "nan"))) / 100 * secs
    cpu = None if cpu != cpu else cpu
    # nuttcp reports no transmit interval of its own: the receiver's is used for both.
    return _udp(sent, secs, rx, secs, rate * 1e6, sent * L * 8 / secs, float(v["data_loss"]), cpu, notes)


# ------------------------------------------------------------------ request/response (rr.sh)
# Each returns dict(tps, mean, p50, p99, p999, notes): transactions/s and round-trip latency in µs
# (None where the tool has no such figure).


def _rr(tps, mean, p50, p99, p999, notes):
    return dict(tps=tps, mean=mean, p50=p50, p99=p99, p999=p999, notes=notes)


@_guarded("netchar JSON")
def rr_netchar(text, proto, length, ccpu, scpu, busy_poll, dur):
    notes = []
    d = _json_object(text)
    _error_note(d, notes)
    summ = d.get("summary") or {}
    s = summ.get("rr")
    if not s or not s.get("latency_us"):
        raise ParseError("no summary.rr in netchar JSON (error=%r)" % d.get("error"))
    lat = s["latency_us"]
    tps, mean = s["transactions_per_second"], lat["mean"]
    # Percentiles must be ordered, the mean inside [min, max].
    keys = [k for k in ("min", "p50", "p90", "p99", "p999", "max") if lat.get(k) is not None]
    vals = [lat[k] for k in keys]
    if any(a > b for a, b in zip(vals, vals[1:])):
        notes.append("percentiles-out-of-order(" + ",".join("%s=%g" % kv for kv in zip(keys, vals)) + ")")
    if lat.get("min") is not None and not (lat["min"] <= mean <= lat["max"]):
        notes.append("mean-outside-min..max(%g)" % mean)
    # One transaction in flight: back-to-back transactions fill the interval, so
    # tps * mean ~= 1 (a bit below: time between transactions is not in any latency).
    # Above 1 is impossible with one in flight; well below 1 means unmeasured gaps.
    fill = tps * mean / 1e6
    if fill > 1.01 or fill < 0.90:
        notes.append("tps*mean=%.3f(expect~0.95-1.0)" % fill)
    if s.get("transactions") and tps > 0 and abs(s["transactions"] / tps - dur) > 0.05 * dur:
        notes.append("transactions/tps=%.3fs(expected~%g)" % (s["transactions"] / tps, dur))
    if s.get("lost"):
        notes.append("lost=%d" % s["lost"])
    if s.get("late"):
        notes.append("late=%d" % s["late"])
    # The test record must say what was asked for.
    t = d.get("test") or {}
    rr = t.get("rr") or {}
    want = {"udp": proto == "udp", "request_bytes": length, "response_bytes": length,
            "inflight": 1, "busy_poll": busy_poll}
    for k, v in want.items():
        if k in rr and rr[k] != v:
            notes.append("test.rr.%s=%r(asked:%r)" % (k, rr[k], v))
    if t.get("client_cpu") != ccpu or t.get("server_cpu") != scpu:
        notes.append("pinning-recorded-as-client=%s,server=%s" % (t.get("client_cpu"), t.get("server_cpu")))
    pl = summ.get("placement")
    if not pl:
        notes.append("no-summary.placement")
    elif not re.search(r"\bCPU %d\b" % ccpu, pl) or not re.search(r"\bCPU %d\b" % scpu, pl):
        notes.append(("placement=%r" % pl).replace(" ", "_"))
    # The sender stream counts request bytes: transactions x request size.
    for st in d.get("streams") or []:
        if st.get("role") == "sender" and st.get("bytes") is not None and s.get("transactions"):
            if st["bytes"] != s["transactions"] * length:
                notes.append("sender-bytes=%d!=transactions*%d=%d" % (st["bytes"], length, s["transactions"] * length))
    return _rr(tps, mean, lat.get("p50"), lat.get("p99"), lat.get("p999"), notes)


@_guarded("netchar JSON")
def crr_netchar(text):
    """`netchar crr --json`: connections (transactions) per second and their latency."""
    notes = []
    d = _json_object(text)
    _error_note(d, notes)
    s = (d.get("summary") or {}).get("rr")
    if not s or not s.get("latency_us"):
        raise ParseError("no summary.rr in netchar crr JSON (error=%r)" % d.get("error"))
    lat = s["latency_us"]
    return _rr(s["transactions_per_second"], lat["mean"], lat.get("p50"), lat.get("p99"), lat.get("p999"), notes)


@_guarded("netchar JSON")
def netchar_placement(text):
    """netchar's own description of where client and server ran (.summary.placement), or None."""
    return (_json_object(text).get("summary") or {}).get("placement")


@_guarded("sockperf output")
def rr_sockperf(text):
    """TEXT: everything `sockperf pp --full-rtt` printed (stdout and stderr: some versions put
    part of the summary on stderr)."""
    notes = []
    txt = re.sub(r"\x1b\[[0-9;]*m", "", text)
    # Figures over sockperf's "valid duration" (after its 400 ms warm-up): transactions/s =
    # replies received in that window / its length.  Every reply completes one round trip.
    m = re.search(r"\[Valid Duration\] RunTime=([\d.]+) sec; SentMessages=(\d+); ReceivedMessages=(\d+)", txt)
    a = re.search(r"avg-rtt=([\d.]+)", txt)
    if not m or not a:
        raise ParseError("no sockperf summary")
    secs, recv = float(m.group(1)), int(m.group(3))

    def p(q):
        r = re.search(r"percentile %s = *([\d.]+)" % q, txt)
        return float(r.group(1)) if r else None

    avg = float(a.group(1))
    tps = recv / secs if secs > 0 else 0.0
    for what in ("dropped", "duplicated", "out-of-order"):
        r = re.search(r"# %s messages = (\d+)" % what, txt)
        if r and int(r.group(1)):
            notes.append("%s=%s" % (what, r.group(1)))
    if avg > 0 and abs(tps * avg / 1e6 - 1) > 0.05:
        notes.append("count-rate-vs-1e6/avg=%.3f" % (tps * avg / 1e6))
    return _rr(tps, avg, p("50.000"), p("99.000"), p("99.900"), notes)


@_guarded("netperf output")
def rr_netperf(text):
    # -P 0 -o THROUGHPUT,MEAN_LATENCY,P50_LATENCY,P99_LATENCY: one CSV line of values.
    row = None
    for line in text.splitlines():
        f = line.strip().split(",")
        try:
            v = [float(x) for x in f[:4]]
        except ValueError:
            continue
        if len(v) == 4:
            row = v
    if not row:
        raise ParseError("no netperf -o line")
    return _rr(row[0], row[1], row[2], row[3], None, [])


# ------------------------------------------------------------------ command line


def _read(path):
    with open(path, errors="replace") as f:
        return f.read()


def _tcp_line(tool, path, direction, dur, zc):
    # zc: the case's mode, "0" plain, "1" --zerocopy, "skip" --skip-rx-copy, "rand" --payload
    # random, "ver" --payload random --verify.
    text = _read(path)
    if tool == "netchar":
        r = tcp_netchar(text, direction, float(dur), zc == "1", zc == "skip", zc == "ver")
    elif tool == "iperf3":
        r = tcp_iperf3(text)
    elif tool == "iperf2":
        r = tcp_iperf2(text)
    elif tool == "netperf":
        r = tcp_netperf(text)
    else:
        raise ParseError(f"unknown TCP tool {tool!r} (netchar, iperf3, iperf2, netperf)")
    return "%.4f %d %s %s %s" % (r["bps"] / 1e9, r["bytes"], "-" if r["cpu"] is None else "%.4f" % r["cpu"],
                                 "-" if r["retransmits"] is None else r["retransmits"], " ".join(r["notes"]))


def _udp_line(variant, path, length, dur, mode, server_log=None):
    L = int(length)
    text = _read(path)
    if variant.startswith("netchar"):
        r = udp_netchar(text, variant, L, float(dur))
    elif variant == "iperf3":
        r = udp_iperf3(text, L)
    elif variant == "iperf2":
        if server_log is None:
            raise ParseError("iperf2 needs the server log as its sixth argument")
        r = udp_iperf2(text, _read(server_log), L)
    elif variant == "nuttcp":
        r = udp_nuttcp(text, L)
    elif variant == "udp_ref":
        r = udp_ref(text, L)
    else:
        raise ParseError(f"unknown UDP variant {variant!r}")
    return "%d %.6f %d %.6f %.1f %.1f %.4f %s %s" % (
        r["sent"], r["sent_secs"], r["rx"], r["rx_secs"], r["rx_bps"], r["sent_bps"], r["loss"],
        "-" if r["cpu"] is None else "%.4f" % r["cpu"], " ".join(r["notes"]))


def _rr_line(tool, path, proto, length, ccpu, scpu, busy, dur):
    text = _read(path)
    if tool == "netchar" and proto == "crr":
        r = crr_netchar(text)
    elif tool == "netchar":
        r = rr_netchar(text, proto, int(length), int(ccpu), int(scpu), busy == "1", float(dur))
    elif tool == "sockperf":
        r = rr_sockperf(text)
    elif tool == "netperf":
        r = rr_netperf(text)
    else:
        raise ParseError(f"unknown rr tool {tool!r} (netchar, sockperf, netperf)")

    def f(x):
        return "-" if x is None else "%.3f" % x

    return "%.1f %s %s %s %s %s" % (r["tps"], f(r["mean"]), f(r["p50"]), f(r["p99"]), f(r["p999"]), " ".join(r["notes"]))


USAGE = __doc__.split("As a command")[1]


def main(argv):
    cmd, args = (argv[0], argv[1:]) if argv else ("", [])
    try:
        if cmd == "tcp" and len(args) == 5:
            print(_tcp_line(*args))
        elif cmd == "udp" and len(args) in (5, 6):
            print(_udp_line(*args))
        elif cmd == "rr" and len(args) == 8:
            print(_rr_line(*args))
        elif cmd == "placement" and len(args) == 1:
            print(netchar_placement(_read(args[0])))
        elif cmd == "bps" and len(args) == 1:
            # adapters.sh and iperf2.sh count "nan" as a run without a figure (and note it).
            try:
                print(receiver_bps(_read(args[0])))
            except (ParseError, OSError):
                print("nan")
        elif cmd == "csv-bps" and not args:
            try:
                print(iperf2_csv_bps(sys.stdin.read()))
            except ParseError:
                print("nan")
        else:
            print("usage:" + USAGE.rstrip(), file=sys.stderr)
            return 2
    except (ParseError, OSError) as e:
        print(f"{cmd} {args[0] if args else ''}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
