#!/usr/bin/env python3
"""Reduces a raw capture of a real netio session to the transcript format of this directory.

usage: reduce.py tcp RAW_PREFIX > transcript.txt   (RAW_PREFIX.c2s and RAW_PREFIX.s2c: the two
       byte streams of one TCP test connection, as recorded by a relay)
       reduce.py udp CTRL_PREFIX DGRAMS > transcript.txt  (the UDP test's control connection,
       and a file of "DIR LEN BYTE0" lines, one per datagram, from a packet capture)

Every CONTROL message is kept verbatim (hex); data blocks are kept as runs: size, count and
their first byte (the only byte netio reads); the rest of a block is netio's rand() filler. The
reduction consumes both streams exactly, so a stream that is not netio's framing fails here.
"""
import struct, sys

def ctl(b):
    return struct.unpack(">II", b)

def blocks(data, pos, size, out, tag):
    run, first = 0, None
    while True:
        if pos + size > len(data):
            sys.exit(f"{tag}: stream ends inside a {size}-byte block at {pos}")
        b0 = data[pos]
        pos += size
        if b0 == 0:
            run += 1
            continue
        if run:
            out.append(f"{tag} blocks {size} {run} 00")
        out.append(f"{tag} blocks {size} 1 {b0:02x}")
        return pos

def tcp(prefix):
    c2s = open(prefix + ".c2s", "rb").read()
    s2c = open(prefix + ".s2c", "rb").read()
    out, pc, ps = [], 0, 0
    while pc < len(c2s):
        raw = c2s[pc:pc + 8]
        cmd, data = ctl(raw)
        out.append(f"c2s ctl {raw.hex()}")
        pc += 8
        if cmd == 1:
            pc = blocks(c2s, pc, data, out, "c2s")
        elif cmd == 2:
            ps = blocks(s2c, ps, data, out, "s2c")
        elif cmd == 0:
            break
        else:
            sys.exit(f"unknown command {cmd}")
    if pc != len(c2s) or ps != len(s2c):
        sys.exit(f"bytes left over: c2s {len(c2s) - pc}, s2c {len(s2c) - ps}")
    print("\n".join(out))

def udp(prefix, dgrams):
    c2s = open(prefix + ".c2s", "rb").read()
    s2c = open(prefix + ".s2c", "rb").read()
    lines = [l.split() for l in open(dgrams) if l.strip()]
    out, pc, ps, pd = [], 0, 0, 0
    def take_dgrams(direction):
        nonlocal pd
        run = None
        while pd < len(lines) and lines[pd][0] == direction:
            key = (lines[pd][1], lines[pd][2])
            if run and run[0] == key:
                run[1] += 1
            else:
                if run:
                    out.append(f"{direction} dgrams {run[0][0]} {run[1]} {run[0][1]}")
                run = [key, 1]
            pd += 1
        if run:
            out.append(f"{direction} dgrams {run[0][0]} {run[1]} {run[0][1]}")
    while pc < len(c2s):
        raw = c2s[pc:pc + 8]; pc += 8
        cmd, data = ctl(raw)
        out.append(f"c2s ctl {raw.hex()}")
        if cmd == 0:
            break
        if cmd == 1:
            out.append(f"s2c ctl {s2c[ps:ps + 8].hex()}"); ps += 8
            take_dgrams("c2s")
        elif cmd == 3:
            out.append(f"s2c ctl {s2c[ps:ps + 8].hex()}"); ps += 8
        elif cmd == 2:
            take_dgrams("s2c")
            out.append(f"s2c ctl {s2c[ps:ps + 8].hex()}"); ps += 8
    if pc != len(c2s) or ps != len(s2c) or pd != len(lines):
        sys.exit(f"left over: c2s {len(c2s) - pc}, s2c {len(s2c) - ps}, datagrams {len(lines) - pd}")
    print("\n".join(out))

if sys.argv[1] == "tcp":
    tcp(sys.argv[2])
else:
    udp(sys.argv[2], sys.argv[3])
