#!/usr/bin/env python3
"""Move a gene range under a steady insert load and report what writers saw.

Run by bench/move.sh, which starts the clusters: a router, a source shard A
and a destination shard C, all with snowseq preloaded.  For each kind of move
(a whole partition, or a split that leaves the rest of the partition on A),
a database of its own is set up on all three, the moved range is loaded with
BENCH_MOVE_ROWS rows, two writers insert through the router at
BENCH_MOVE_RATE rows/s each (one into the moved genes, one into others), the
range moves, and the longest gap between two inserts returning to a writer
is that writer's longest pause.  The figures replace the section between the
markers in the report file (or are appended).
"""
import argparse
import os
import random
import re
import subprocess
import sys
import threading
import time

BEGIN = "<!-- begin: bash bench/move.sh -->"
END = "<!-- end: bash bench/move.sh -->"
MOVED = (0, 8191)           # genes that move
OTHER = (8192, 32767)       # genes that stay


def psql(args, port, sql, db="postgres", check=True, settings=""):
    """Run SQL with psql (settings: for its session, as PGOPTIONS); returns (stdout, stderr)."""
    env = dict(os.environ, PGOPTIONS=settings) if settings else None
    p = subprocess.run(["psql", "-X", "-At", "-v", "ON_ERROR_STOP=1", "-h", args.host, "-p", str(port),
                        "-d", db, "-c", sql], capture_output=True, text=True, env=env)
    if check and p.returncode != 0:
        raise RuntimeError("psql on port %s failed: %s\n%s" % (port, sql[:200], p.stderr))
    return p.stdout.strip(), p.stderr


class Writer:
    """One psql session inserting through the router at a steady rate."""

    def __init__(self, args, db, genes, tag, rate):
        self.genes, self.tag, self.rate = genes, tag, rate
        self.times, self.errors, self.stop = [], [], False
        self.proc = subprocess.Popen(
            ["psql", "-X", "-At", "-h", args.host, "-p", str(args.router), "-d", db],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
        self.threads = [threading.Thread(target=f, daemon=True) for f in (self.feed, self.read, self.read_err)]
        for t in self.threads:
            t.start()

    def feed(self):
        # an insert, then a backslash command: psql flushes its output after
        # every backslash command, so each result arrives as it is ready
        rng = random.Random(self.tag)
        start = time.monotonic()
        k = 0
        while not self.stop:
            gene = rng.randint(*self.genes)
            oid = (gene << 48) | (k << 10) | self.tag
            self.proc.stdin.write("INSERT INTO orders VALUES (%d, 'w%d', %d) RETURNING 1;\n\\set f 1\n"
                                  % (oid, self.tag, k))
            k += 1
            delay = start + k / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        self.proc.stdin.close()

    def read(self):
        for line in self.proc.stdout:
            if line.strip() == "1":
                self.times.append(time.monotonic())

    def read_err(self):
        for line in self.proc.stderr:
            if "ERROR" in line:
                self.errors.append(line.strip())

    def finish(self):
        self.stop = True
        self.proc.wait(timeout=120)
        for t in self.threads:
            t.join(timeout=10)

    def longest_gap(self, t0, t1):
        """Longest time between two inserts returning, within [t0, t1]."""
        ts = [t for t in self.times if t0 <= t <= t1]
        gaps = [b - a for a, b in zip(ts, ts[1:])]
        return (max(gaps) if gaps else float("nan")), len(ts)


def setup(args, kind, rows):
    db = "bench_" + kind
    for port in (args.router, args.source, args.dest):
        psql(args, port, "DROP DATABASE IF EXISTS %s" % db)
        psql(args, port, "CREATE DATABASE %s" % db)
        psql(args, port, "CREATE EXTENSION snowseq", db)
    user, _ = psql(args, args.source, "SELECT current_user", db)
    table = "CREATE TABLE %s (order_id bigint PRIMARY KEY, buyer_id text NOT NULL, amount numeric NOT NULL)"
    load = ("INSERT INTO %s SELECT ((%d + i %% %d)::bigint << 48) | (i::bigint << 10) | 1023, 'k' || i, i "
            "FROM generate_series(1, %d) i")
    span_m, span_o = MOVED[1] - MOVED[0] + 1, OTHER[1] - OTHER[0] + 1
    if kind == "whole":
        # the moved genes are a partition of their own; the others another one
        psql(args, args.source, table % "orders_moved" + "; " + table % "orders_rest", db)
        psql(args, args.source, load % ("orders_moved", MOVED[0], span_m, rows), db)
        psql(args, args.source, load % ("orders_rest", OTHER[0], span_o, rows // 10), db)
        parts = ("CREATE FOREIGN TABLE orders_moved PARTITION OF orders FOR VALUES FROM (0) TO (%d) "
                 "SERVER shard_a OPTIONS (table_name 'orders_moved');"
                 "CREATE FOREIGN TABLE orders_rest PARTITION OF orders FOR VALUES FROM (%d) TO (MAXVALUE) "
                 "SERVER shard_a OPTIONS (table_name 'orders_rest');"
                 "INSERT INTO snowseq_shard_map VALUES (%d, 'shard_a'), (32767, 'shard_a');"
                 % (OTHER[0] << 48, OTHER[0] << 48, MOVED[1]))
    else:
        # one partition holds both; the move splits it
        psql(args, args.source, table % "orders", db)
        psql(args, args.source, load % ("orders", MOVED[0], span_m, rows), db)
        psql(args, args.source, load.replace("'k' ||", "'o' ||") % ("orders", OTHER[0], span_o, rows), db)
        parts = ("CREATE FOREIGN TABLE orders_all PARTITION OF orders FOR VALUES FROM (0) TO (MAXVALUE) "
                 "SERVER shard_a OPTIONS (table_name 'orders');"
                 "INSERT INTO snowseq_shard_map VALUES (32767, 'shard_a');")
    psql(args, args.source, "VACUUM ANALYZE", db)
    psql(args, args.source, "CHECKPOINT", db)
    # the mapping names the role: without it libpq connects as the operating
    # system user the router runs as, a role the shards do not have when the
    # clusters run as an ordinary user whose initdb made the role "postgres"
    servers = "".join("CREATE SERVER %s FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '%s', port '%d', dbname '%s');"
                      "CREATE USER MAPPING FOR CURRENT_USER SERVER %s OPTIONS (user '%s');"
                      % (name, args.host, port, db, name, user)
                      for name, port in (("shard_a", args.source), ("shard_c", args.dest)))
    psql(args, args.router, "CREATE EXTENSION postgres_fdw;" + servers
         + "CREATE TABLE orders (order_id bigint NOT NULL, buyer_id text NOT NULL, amount numeric NOT NULL) "
         "PARTITION BY RANGE (order_id);" + parts, db)
    return db


def run_kind(args, kind, rows, rate, settle):
    """A move of MOVED under the writers; for kind "revert", a split kept
    revertable (snowseq.move_revert_window), then reverted, under them too."""
    db = setup(args, "split" if kind == "revert" else kind, rows)
    writers = {"moved": Writer(args, db, MOVED, 1001, rate), "other": Writer(args, db, OTHER, 1002, rate)}
    time.sleep(settle)
    t0 = time.monotonic()
    # a CALL of its own: the window is a setting of the session
    _, notices = psql(args, args.router, "CALL snowseq_move_genes('orders', %d, %d, 'shard_c')" % MOVED, db,
                      settings="-c snowseq.move_revert_window=3600" if kind == "revert" else "")
    t1 = time.monotonic()
    time.sleep(settle)
    rec, _ = psql(args, args.router, "SELECT move_id, pause_ms, dest_table FROM snowseq_moves", db)
    move_id, pause, dest = rec.split("|")
    r = {"kind": kind, "rows": rows, "rate": rate, "total_s": t1 - t0, "notices": notices, "held_ms": float(pause)}
    t2 = t3 = t1
    if kind == "revert":
        t2 = time.monotonic()
        _, rnotices = psql(args, args.router, "CALL snowseq_move_revert(%s)" % move_id, db)
        t3 = time.monotonic()
        r["notices"] += rnotices
        time.sleep(settle)
        r["revert_s"] = t3 - t2
        held, _ = psql(args, args.router, "SELECT pause_ms FROM snowseq_moves WHERE reverts = %s" % move_id, db)
        r["revert_held_ms"] = float(held)
    for w in writers.values():
        w.finish()
    m = re.search(r"copied (\d+) rows of genes .* in ([\d.]+) s", notices)
    r["copied"], r["copy_s"] = (int(m.group(1)), float(m.group(2))) if m else (0, float("nan"))
    for name, w in writers.items():
        gap, n = w.longest_gap(t0 - settle, t1 + settle)
        r[name + "_gap_ms"], r[name + "_n"] = gap * 1000, n
        if kind == "revert":
            gap, _ = w.longest_gap(t2 - settle, t3 + settle)
            r[name + "_revert_gap_ms"] = gap * 1000
        r[name + "_errors"] = len(w.errors)
        r[name + "_other_errors"] = [e for e in w.errors if "are moving to server" not in e][:3]
    # the destination holds the moved genes and nothing else (after a revert: nothing)
    if kind == "revert":
        left, _ = psql(args, args.dest, "SELECT count(*) FROM pg_class WHERE relname ~ '^orders'", db)
        r["dest_rows"], r["dest_foreign"] = 0, int(left)
    else:
        on_dest, _ = psql(args, args.dest, "SELECT count(*), count(*) FILTER (WHERE order_id < %d OR order_id >= %d) FROM %s"
                          % (MOVED[0] << 48, (MOVED[1] + 1) << 48, dest), db)
        r["dest_rows"], r["dest_foreign"] = [int(x) for x in on_dest.split("|")]
    routed, _ = psql(args, args.router, "SELECT count(*) FROM orders WHERE order_id < %d" % ((MOVED[1] + 1) << 48), db)
    r["routed_rows"] = int(routed)
    total, _ = psql(args, args.router, "SELECT count(*), count(DISTINCT order_id) FROM orders", db)
    r["total"], r["distinct"] = [int(x) for x in total.split("|")]
    # every insert a writer saw return is there, once
    loaded = rows + rows // 10 if kind == "whole" else 2 * rows
    r["expected"] = loaded + sum(len(w.times) for w in writers.values())
    return r


def under_writers(args, db, rate, settle, call):
    """Run a CALL on the router while the two writers insert, settle seconds
    of load before and after it; returns (writers, notices, t0, t1)."""
    writers = {"moved": Writer(args, db, MOVED, 1001, rate), "other": Writer(args, db, OTHER, 1002, rate)}
    time.sleep(settle)
    t0 = time.monotonic()
    _, notices = psql(args, args.router, call, db)
    t1 = time.monotonic()
    time.sleep(settle)
    for w in writers.values():
        w.finish()
    return writers, notices, t0, t1


def writer_figures(r, writers, t0, t1, settle, expected_errors=None):
    """Each writer's longest pause around t0..t1 and its errors (those but
    expected_errors, a text they hold, are unexpected); every row once."""
    for name, w in writers.items():
        gap, n = w.longest_gap(t0 - settle, t1 + settle)
        r[name + "_gap_ms"], r[name + "_n"] = gap * 1000, n
        r[name + "_errors"] = len(w.errors)
        r[name + "_other_errors"] = [e for e in w.errors if expected_errors is None or expected_errors not in e][:3]


def run_rebalance(args, rows, rate, settle):
    """The split's layout (one partition on A holding every gene, 2 x rows),
    then CALL snowseq_rebalance onto C, a server the map does not name yet,
    under the writers: its moves, rows copied, total time and pauses."""
    db = setup(args, "rebalance", rows)
    writers, notices, t0, t1 = under_writers(args, db, rate, settle,
                                             "CALL snowseq_rebalance('orders', fill => ARRAY['shard_c']::name[])")
    steps, _ = psql(args, args.router, "SELECT count(*), coalesce(sum(rows_copied), 0) FROM snowseq_rebalance_steps "
                    "WHERE state = 'done'", db)
    held, _ = psql(args, args.router, "SELECT coalesce(max(pause_ms), 0) FROM snowseq_moves", db)
    servers, _ = psql(args, args.router, "SELECT string_agg(shard || ' ' || rows, ', ' ORDER BY shard) FROM "
                      "(SELECT shard, sum(rows) AS rows FROM snowseq_shard_stats('orders') GROUP BY shard) s", db)
    r = {"kind": "rebalance", "rows": 2 * rows, "total_s": t1 - t0, "notices": notices, "held_ms": float(held),
         "servers": servers}
    r["moves"], r["copied"] = [int(x) for x in steps.split("|")]
    writer_figures(r, writers, t0, t1, settle, "are moving to server")
    total, _ = psql(args, args.router, "SELECT count(*), count(DISTINCT order_id) FROM orders", db)
    r["total"], r["distinct"] = [int(x) for x in total.split("|")]
    r["expected"] = 2 * rows + sum(len(w.times) for w in writers.values())
    r["dest_foreign"] = 0
    return r


def run_merge(args, rows, rate, settle):
    """The whole layout (two partitions on A: genes 0..8191 with rows rows,
    8192..32767 with a tenth of that), then CALL snowseq_merge_partitions of
    all genes under the writers: the merge's copy, total time and pauses."""
    db = setup(args, "whole", rows)
    writers, notices, t0, t1 = under_writers(args, db, rate, settle, "CALL snowseq_merge_partitions('orders', 0, 32767)")
    rec, _ = psql(args, args.router, "SELECT pause_ms, rows_copied, extract(epoch FROM copied_at - started_at), state "
                  "FROM snowseq_merges WHERE group_merge IS NULL", db)
    held, copied, copy_s, state = rec.split("|")
    parts, _ = psql(args, args.router, "SELECT count(*) FROM pg_inherits WHERE inhparent = 'orders'::regclass", db)
    r = {"kind": "merge", "rows": rows + rows // 10, "total_s": t1 - t0, "notices": notices, "held_ms": float(held),
         "copied": int(copied), "copy_s": float(copy_s), "state": state, "partitions": int(parts)}
    writer_figures(r, writers, t0, t1, settle)
    total, _ = psql(args, args.router, "SELECT count(*), count(DISTINCT order_id) FROM orders", db)
    r["total"], r["distinct"] = [int(x) for x in total.split("|")]
    r["expected"] = rows + rows // 10 + sum(len(w.times) for w in writers.values())
    r["dest_foreign"] = 0
    return r


def merge_section(r):
    """The merge's paragraph of the report."""
    return ("\n**Merge** (`CALL snowseq_merge_partitions('orders', 0, 32767)`, the whole layout: A holds genes "
            "0..8191 and 8192..32767 in two partitions, %s rows; the same two writers, one into each): %s rows "
            "copied in %.1f s (from the start of the merge to the end of its copy; then the comparison of "
            "every row and the switch), %.1f s in all; the switch held the table for %.0f ms (`snowseq_merges.pause_ms`); longest pause of the writer "
            "of genes 0..8191 %.0f ms, of genes 8192..32767 %.0f ms, inserts turned away %d; %d partition "
            "afterwards; rows through the router: %s, %s distinct, %s loaded plus inserts the writers saw."
            % (fmt_int(r["rows"]), fmt_int(r["copied"]), r["copy_s"], r["total_s"], r["held_ms"],
               r["moved_gap_ms"], r["other_gap_ms"], r["moved_errors"] + r["other_errors"], r["partitions"],
               fmt_int(r["total"]), fmt_int(r["distinct"]), fmt_int(r["expected"])))


def rebalance_section(r):
    """The rebalance's paragraph of the report."""
    return ("\n**Rebalance** (`CALL snowseq_rebalance('orders', fill => ARRAY['shard_c'])`, the split's layout: A "
            "holds all %s rows, C none and is not in the map yet; the same two writers): %d move%s, %s rows copied, "
            "%.1f s in all; writes held back at most %.0f ms (`pause_ms`); longest pause of the writer of genes "
            "0..8191 %.0f ms, of genes 8192..32767 %.0f ms; rows per server afterwards (`snowseq_shard_stats`): %s; "
            "rows through the router: %s, %s distinct, %s loaded plus inserts the writers saw."
            % (fmt_int(r["rows"]), r["moves"], "" if r["moves"] == 1 else "s", fmt_int(r["copied"]), r["total_s"],
               r["held_ms"], r["moved_gap_ms"], r["other_gap_ms"], r["servers"], fmt_int(r["total"]),
               fmt_int(r["distinct"]), fmt_int(r["expected"])))


def fmt_int(n):
    return "{:,}".format(int(n))


def machine(load_before, load_after):
    """Cores, CPU model and load averages: the harness does not have the machine to itself."""
    model = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return ("Machine: %d cores (`nproc`), %s. The harness does not have it to itself: whatever else runs on it "
            "shares those cores. Load average (1, 5 and 15 minutes) before the harness started anything: %s; "
            "at the end of the run: %s."
            % (os.cpu_count() or 0, model, load_before or "not recorded", load_after))


def section(results, mode, elapsed, rows, rate, rebalance=None, load_before="", load_after="", merge=None):
    L = [BEGIN, "## Moving a gene range (`bash bench/move.sh`)", ""]
    L.append("Generated by `bash bench/move.sh` on %s (%s mode, %.1f minutes). " % (
        time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), mode, elapsed / 60)
             + machine(load_before, load_after) + " "
             "Three clusters on it: a router (node 1), the source shard A (node 2) and the destination C "
             "(node 3), all PostgreSQL 15 with initdb's settings plus `wal_level = logical`. On the router, "
             "`orders` is partitioned by gene range into postgres_fdw foreign tables on A. The moved genes "
             "0..8191 hold %s rows. Two writers insert through the router the whole time, %d rows/s each, one "
             "into the genes that move and one into genes 8192..32767, each through one psql session; the time "
             "every insert returns is recorded, and a writer's pause is the longest gap between two of its inserts "
             "returning (%.0f ms apart when nothing holds them back). A writer whose insert is turned away during "
             "the switch (a serialization failure) simply sends its next one."
             % (fmt_int(rows), rate, 1000.0 / rate))
    if mode != "full":
        L.append("\n**Smoke run: tiny sizes, the numbers mean nothing.**")
    L += ["", "* **whole**: the moved genes are a partition of their own (on A, table `orders_moved`); the other "
          "genes are another partition on A. After the switch the source rows are deleted in batches.",
          "* **split**: one partition holds all genes (on A, table `orders`, %s more rows in genes 8192..32767); "
          "the move takes genes 0..8191 out of it. The switch deletes nothing: until the moved rows are "
          "deleted in batches after it, the partition that keeps genes 8192..32767 reads a view of the rows "
          "that stay on A, and is then pointed back at the table (one catalog change). The pause of the moved "
          "genes is the final catch-up and the switch, whatever the number of rows."
          % fmt_int(rows),
          "* **revert**: the split, with `snowseq.move_revert_window` set: after the switch A is kept current "
          "by replication from C; then `snowseq_move_revert` moves the genes back (the writers go on), and C's "
          "tables go (the destination row shows what is left of them there).", ""]
    kinds = [r["kind"] for r in results]
    L.append("| | " + " | ".join(kinds) + " |")
    L.append("|---|" + "---:|" * len(kinds))

    def row(name, f):
        L.append("| %s | %s |" % (name, " | ".join(f(r) for r in results)))

    row("rows in the moved genes", lambda r: fmt_int(r["rows"]))
    row("total time of the CALL", lambda r: "%.1f s" % r["total_s"])
    row("initial copy and catch-up", lambda r: "%s rows in %.1f s" % (fmt_int(r["copied"]), r["copy_s"]))
    row("rows copied per second", lambda r: fmt_int(r["copied"] / r["copy_s"]) if r["copy_s"] > 0 else "-")
    row("writes to the moved genes held back (`snowseq_moves.pause_ms`)", lambda r: "%.0f ms" % r["held_ms"])
    row("pause of a writer of the moved genes", lambda r: "%.0f ms" % r["moved_gap_ms"])
    row("... its inserts turned away to retry", lambda r: str(r["moved_errors"]))
    row("pause of a writer of other genes", lambda r: "%.0f ms" % r["other_gap_ms"])
    row("... its inserts turned away", lambda r: str(r["other_errors"]))
    row("revert (a split kept revertable, then reverted): total time of the CALL",
        lambda r: "%.1f s" % r["revert_s"] if "revert_s" in r else "-")
    row("revert: writes to the moved genes held back (its `pause_ms`)",
        lambda r: "%.0f ms" % r["revert_held_ms"] if "revert_held_ms" in r else "-")
    row("revert: pause of a writer of the moved genes / of other genes",
        lambda r: "%.0f ms / %.0f ms" % (r["moved_revert_gap_ms"], r["other_revert_gap_ms"]) if "revert_s" in r else "-")
    row("rows on the destination afterwards (genes outside the range)",
        lambda r: "%s (%d)" % (fmt_int(r["dest_rows"]), r["dest_foreign"]))
    row("rows through the router: all / distinct / loaded plus inserts the writers saw",
        lambda r: "%s / %s / %s" % (fmt_int(r["total"]), fmt_int(r["distinct"]), fmt_int(r["expected"])))
    L.append("")
    L.append("Aim: the moved genes pause for under 300 ms whatever the rows moved, other genes not at all; "
             "only the moved range is copied. Results: "
             + "; ".join("%s: moved genes %.0f ms (%s), other genes %.0f ms, %s"
                         % (r["kind"], r["moved_gap_ms"], "met" if r["moved_gap_ms"] < 300 else "missed",
                            r["other_gap_ms"],
                            "only the moved genes copied" if r["dest_foreign"] == 0 else "OTHER GENES COPIED")
                         + ("; its revert: moved genes %.0f ms (%s), other genes %.0f ms"
                            % (r["moved_revert_gap_ms"], "met" if r["moved_revert_gap_ms"] < 300 else "missed",
                               r["other_revert_gap_ms"]) if "revert_s" in r else "")
                         for r in results) + ". "
             "The other writer's figure is its longest gap with the move running, which includes the ordinary "
             "jitter of a loaded 2-core machine (compare the nominal gap above).")
    if rebalance is not None:
        L.append(rebalance_section(rebalance))
    if merge is not None:
        L.append(merge_section(merge))
    L.append(END)
    return "\n".join(L) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["full", "smoke"], default="full")
    ap.add_argument("--out", required=True)
    ap.add_argument("--host", required=True)
    ap.add_argument("--router", type=int, required=True)
    ap.add_argument("--source", type=int, required=True)
    ap.add_argument("--dest", type=int, required=True)
    ap.add_argument("--load-before", default="", help="/proc/loadavg's first three fields before the build")
    args = ap.parse_args()
    smoke = args.mode == "smoke"
    rows = int(os.environ.get("BENCH_MOVE_ROWS", 20000 if smoke else 1000000))
    rate = int(os.environ.get("BENCH_MOVE_RATE", 200))
    settle = float(os.environ.get("BENCH_MOVE_SETTLE", 1 if smoke else 3))
    kinds = os.environ.get("BENCH_MOVE_KINDS", "whole split revert rebalance merge").split()
    start = time.time()
    results = []
    rebalance = None
    merge = None
    for kind in kinds:
        print("move bench: %s, %s rows" % (kind, fmt_int(rows)), flush=True)
        if kind == "merge":
            r = run_merge(args, rows, rate, settle)
            print("  total %.1f s, %s rows copied in %.1f s, held %.0f ms, writer of 0..8191 %.0f ms, other writer %.0f ms"
                  % (r["total_s"], fmt_int(r["copied"]), r["copy_s"], r["held_ms"], r["moved_gap_ms"],
                     r["other_gap_ms"]), flush=True)
        elif kind == "rebalance":
            r = run_rebalance(args, rows, rate, settle)
            print("  total %.1f s, %d moves, %s rows copied, held %.0f ms, moved writer %.0f ms, other writer %.0f ms; %s"
                  % (r["total_s"], r["moves"], fmt_int(r["copied"]), r["held_ms"], r["moved_gap_ms"],
                     r["other_gap_ms"], r["servers"]), flush=True)
        else:
            r = run_kind(args, kind, rows, rate, settle)
            print("  total %.1f s, copy %.1f s, held %.0f ms, moved writer %.0f ms, other writer %.0f ms"
                  % (r["total_s"], r["copy_s"], r["held_ms"], r["moved_gap_ms"], r["other_gap_ms"]), flush=True)
        if "revert_s" in r:
            print("  revert: total %.1f s, held %.0f ms, moved writer %.0f ms, other writer %.0f ms"
                  % (r["revert_s"], r["revert_held_ms"], r["moved_revert_gap_ms"], r["other_revert_gap_ms"]), flush=True)
        print("  " + r["notices"].strip().replace("\n", "\n  "), flush=True)
        for name in ("moved", "other"):
            if r[name + "_other_errors"]:
                print("  unexpected errors of the %s writer: %s" % (name, r[name + "_other_errors"]), file=sys.stderr)
                sys.exit(1)
        if r["dest_foreign"] != 0 or r["total"] != r["distinct"] or r["total"] != r["expected"]:
            print("  the move copied other genes, or lost or duplicated rows: %d rows, %d distinct, %d expected"
                  % (r["total"], r["distinct"], r["expected"]), file=sys.stderr)
            sys.exit(1)
        if kind == "rebalance":
            if r["moves"] == 0:
                print("  the rebalance made no move", file=sys.stderr)
                sys.exit(1)
            rebalance = r
        elif kind == "merge":
            if r["state"] != "done" or r["partitions"] != 1:
                print("  the merge did not end with one partition: %s, %d partitions" % (r["state"], r["partitions"]),
                      file=sys.stderr)
                sys.exit(1)
            merge = r
        else:
            results.append(r)
    with open("/proc/loadavg") as f:
        load_after = " ".join(f.read().split()[:3])
    text = section(results, args.mode, time.time() - start, rows, rate, rebalance, args.load_before, load_after, merge)
    old = open(args.out).read() if os.path.isfile(args.out) else ""
    if BEGIN in old and END in old:
        new = old[:old.index(BEGIN)] + text + old[old.index(END) + len(END) + 1:]
    else:
        new = old.rstrip("\n") + ("\n\n" if old else "") + text
    with open(args.out, "w") as f:
        f.write(new)
    print("move bench: wrote %s" % args.out)


if __name__ == "__main__":
    main()
