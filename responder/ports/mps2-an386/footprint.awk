# The footprint of a board image by part, from the GNU ld map file (-Wl,-Map): every input
# section the link kept, summed by the part its object belongs to and by kind (code and
# constants in flash, initialised data, zeroed data). Sections the linker dropped
# (--gc-sections) are in the map's "Discarded input sections" and not counted.
#
#   awk -f footprint.awk -v budget_text=24576 -v budget_ram=16384 build/board/x.map
#
# Parts: "responder" (src/), "board" (ports/mps2-an386/, its stack included), "lwIP" (the lwIP
# objects) and "libc+libgcc" (newlib-nano and libgcc archives). String constants are counted
# as each object brings them, before the linker merges duplicates: the parts add up to more
# flash than the image has (about 1.6 KiB here), and a part's figure is an upper bound. With the budgets given, the exit status is 1
# when the responder's flash (.text + .rodata) or its RAM (.data + .bss) is over.

# A "0x..." number (POSIX awk has no strtonum).
function hex(s,    i, v, c) {
    v = 0
    s = tolower(substr(s, 3))
    for (i = 1; i <= length(s); i++) {
        c = index("0123456789abcdef", substr(s, i, 1))
        if (c == 0) break
        v = v * 16 + c - 1
    }
    return v
}

function part(file) {
    if (file ~ /\/lwip\//) return "lwIP"
    if (file ~ /\/(responder|board-peers|board)\/nc_/) return "responder"
    if (file ~ /\/(board|board-peers)\/(startup|board|lan9118|counters|main)\.o/) return "board"
    if (file ~ /\.a\(/ || file ~ /lib(c|g|gcc|nosys)/) return "libc+libgcc"
    return "other"
}

function add(name, size, file,    p, k) {
    if (file == "" || size == 0) return
    p = part(file)
    if (name ~ /^\.(text|rodata|ARM|vectors)/) k = "text"
    else if (name ~ /^\.data/) k = "data"
    else if (name ~ /^\.bss|^COMMON/) k = "bss"
    else return
    sum[p, k] += size
    seen[p] = 1
}

/^Discarded input sections/ { skip = 1; next }
/^Memory Configuration/ { skip = 1; next }
/^Linker script and memory map/ { skip = 0; next }

skip { next }

# The stack the linker script reserves: the board's RAM.
/^\.stack / { sum["board", "bss"] += hex($3); seen["board"] = 1; next }

# " .text.name  0xADDR  0xSIZE file" on one line, or the name alone and the rest on the next.
/^ [.A-Za-z_]/ {
    if (NF >= 4 && $2 ~ /^0x/ && $3 ~ /^0x/) {
        add($1, hex($3), $4)
        pending = ""
    } else if (NF == 1) {
        pending = $1
    } else {
        pending = ""
    }
    next
}
/^  +0x/ {
    if (pending != "" && NF >= 3 && $2 ~ /^0x/) add(pending, hex($2), $3)
    pending = ""
    next
}
{ pending = "" }

END {
    split("responder board lwIP libc+libgcc other", order, " ")
    printf "%-14s %8s %8s %8s %10s\n", "part", "flash", ".data", ".bss", "RAM"
    for (i = 1; i <= 5; i++) {
        p = order[i]
        if (!(p in seen)) continue
        t = sum[p, "text"]; d = sum[p, "data"]; b = sum[p, "bss"]
        printf "%-14s %8d %8d %8d %10d\n", p, t, d, b, d + b
        tt += t; td += d; tb += b
    }
    printf "%-14s %8d %8d %8d %10d\n", "image", tt, td, tb, td + tb
    if (budget_text != "") {
        t = sum["responder", "text"]; r = sum["responder", "data"] + sum["responder", "bss"]
        printf "responder: flash %d of %d bytes, RAM %d of %d bytes: %s\n", t, budget_text, r, budget_ram, \
            (t <= budget_text && r <= budget_ram) ? "within budget" : "OVER BUDGET"
        if (t > budget_text || r > budget_ram) exit 1
    }
}
