"""What the tcp, udp and rr reports print alike: the notes block and the target lines."""

import collections

# Other processes' share of the machine (%) above which a report warns that its figures are
# unreliable.
BUSY_PERCENT = 15


def read_lines(path):
    with open(path) as f:
        return f.readlines()


def counted(notes):
    """The notes of a case's runs, each once, with how many runs had it: "a, b (x3)"."""
    cnt = collections.Counter(n for ns in notes for n in ns.split())
    return ", ".join(f"{k} (x{v})" if v > 1 else k for k, v in cnt.items())


def cpu_disagreement(label, cpu, acct):
    """The note when a tool's own CPU figure and process accounting differ by more than 15%,
    or None."""
    if cpu and acct and abs(acct / cpu - 1) > 0.15:
        return f"{label}: self-reported CPU differs from process accounting by {100 * (acct / cpu - 1):+.0f}%"
    return None


def busy_warning(busy, where, what):
    """The warning for runs beside other work, or None: `busy` is the other processes' share
    per case, `where` what follows "during the runs", `what` which figures it spoils."""
    if busy and max(busy) > BUSY_PERCENT:
        return (f"other processes used up to {max(busy):.0f}% of the machine during the runs{where}:"
                f" {what} are unreliable; rerun on an idle machine (IDLE_WAIT=120 waits for one)")
    return None


def print_notes(out, notes_path, blank_before=True, blank_after=False):
    """Prints `out` and the script's own notes file as the report's "Notes:" block."""
    out = out + [l.rstrip() for l in read_lines(notes_path) if l.strip()]
    if out:
        if blank_before:
            print()
        print("Notes:")
        for l in out:
            print("  * " + l)
        if blank_after:
            print()


def target_line(ok, text):
    """One target: PASS, MISS, or n/a when `ok` is None (not measured)."""
    print(f"  {'n/a ' if ok is None else 'PASS' if ok else 'MISS'}  {text}")
