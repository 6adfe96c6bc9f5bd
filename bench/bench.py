#!/usr/bin/env python3
"""snowseq benchmarks: measurements, report and plots.

Started by bench/run.sh against a throwaway server it has set up (PGHOST,
PGPORT, PGUSER and PGDATABASE in the environment).  Python standard library
only; the work is done by psql (client-side \\timing), pgbench and gnuplot.

Every measurement is repeated; the repetitions alternate between the
generators (A B C, then C B A, ...) so that drift of the machine is spread
over all of them, and the report shows medians and ratios taken in the same
run.
"""

import argparse
import datetime
import glob
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))

# --------------------------------------------------------------------------
# sizes

FULL = {
    "reps": 5,                # call cost and WAL repetitions
    "call_n": 3000000,        # IDs per call-cost query
    "clients": "1 2 4 8",
    "seconds": 6,             # pgbench -T
    "client_reps": 5,
    "insert_rows": "1000000 5000000",
    "insert_reps": 3,
    "buyers": 100000,
    "wal_n": 1000000,
    "shmem_n": 10000000,      # IDs generated between the two shmem readings
}
SMOKE = {
    "reps": 2,
    "call_n": 20000,
    "clients": "1 2",
    "seconds": 1,
    "client_reps": 1,
    "insert_rows": "2000 10000",
    "insert_reps": 2,
    "buyers": 1000,
    "wal_n": 20000,
    "shmem_n": 100000,
}
ENV = {
    "reps": "BENCH_REPS",
    "call_n": "BENCH_CALL_N",
    "clients": "BENCH_CLIENTS",
    "seconds": "BENCH_SECONDS",
    "client_reps": "BENCH_CLIENT_REPS",
    "insert_rows": "BENCH_INSERT_ROWS",
    "insert_reps": "BENCH_INSERT_REPS",
    "buyers": "BENCH_BUYERS",
    "wal_n": "BENCH_WAL_N",
    "shmem_n": "BENCH_SHMEM_N",
}

NEXT_N_MAX = 1 << 22          # snowseq_next_n(n) takes at most 2^22 per call

# --------------------------------------------------------------------------
# what is measured

# call cost: (key, label, expression evaluated once per row).  Keys are
# constants, so key construction is not timed (repeat() is IMMUTABLE and is
# folded into a constant when the query is planned).
KEY8_TEXT = "buyer-42"
PUBLIC_ID_SOURCE = (4242 << 48) | 123456789   # a gene ID; bench/setup.sql encrypts it too
KEY36_TEXT = "0b7e6a4e-5d8c-4f5e-9a57-3c0d1f2e4b6a"
CALL_GENERATORS = [
    ("loop", "(loop only: count(i))", None),
    ("clock_timestamp", "clock_timestamp() (floor)", "clock_timestamp()"),
    ("random", "random() (floor)", "random()"),
    ("snowseq_next", "snowseq_next()", "snowseq_next()"),
    ("snowseq_scatter", "snowseq_scatter(snowseq_next(), 2)", "snowseq_scatter(snowseq_next(), 2)"),
    ("snowseq_next_n_from", "snowseq_next_n(N), FROM clause", None),
    ("snowseq_next_n_select", "snowseq_next_n(N), SELECT list", None),
    ("gene_int8", "snowseq_gene_next(bigint)", "snowseq_gene_next(4242424242::bigint)"),
    ("gene_text8", "snowseq_gene_next(8-byte text)",
     "snowseq_gene_next('%s'::text)" % KEY8_TEXT),
    ("gene_text36", "snowseq_gene_next(36-byte uuid text)",
     "snowseq_gene_next('%s'::text)" % KEY36_TEXT),
    ("gene_text1k", "snowseq_gene_next(1 KB text)", "snowseq_gene_next(repeat('k', 1024))"),
    # public IDs: encrypt and decrypt one constant ID (the public ID is read
    # once per query by an InitPlan), so no generator cost is mixed in; and
    # a fresh gene ID encrypted, what an application does per order
    ("snowseq_encrypt", "snowseq_encrypt(constant ID)", "snowseq_encrypt(%d::bigint)" % PUBLIC_ID_SOURCE),
    ("snowseq_decrypt", "snowseq_decrypt(constant public ID)",
     "snowseq_decrypt((SELECT public_id FROM bench_public))"),
    ("snowseq_encrypt_gene", "snowseq_encrypt(snowseq_gene_next(bigint))",
     "snowseq_encrypt(snowseq_gene_next(4242424242::bigint))"),
    ("nextval_c1", "nextval() CACHE 1", "nextval('bench_seq_cache1')"),
    ("nextval_c100", "nextval() CACHE 100", "nextval('bench_seq_cache100')"),
    ("counter", "snowseq_counter_next(name)", "snowseq_counter_next('bench_counter')"),
    ("serial", "snowseq_serial('INV-YYYYMMDD-##########')", "snowseq_serial('bench_serial')"),
    ("serial_glue", "to_char() || lpad(nextval()) (same text)",
     "'INV-' || to_char(clock_timestamp(), 'YYYYMMDD') || '-' || lpad(nextval('bench_seq_cache1')::text, 10, '0')"),
    ("gen_random_uuid", "gen_random_uuid()", "gen_random_uuid()"),
    ("uuidv7", "UUIDv7 (PL/pgSQL)", "bench_uuidv7()"),
    ("instagram", "Instagram-style (PL/pgSQL)", "bench_instagram_id()"),
]

# many clients: (key, label, expression)
CLIENT_GENERATORS = [
    ("snowseq_next", "snowseq_next()", "snowseq_next()"),
    ("nextval", "nextval() CACHE 1", "nextval('bench_seq_cache1')"),
    ("gen_random_uuid", "gen_random_uuid()", "gen_random_uuid()"),
]
CLIENT_SCRIPTS = [(1, "SELECT {e};\n"),
                  (1000, "SELECT count({e}) FROM generate_series(1, 1000);\n")]
# the 1-ID script mostly measures round trips: only these run it
CLIENT_ONE_ID = ("snowseq_next", "nextval", "gen_random_uuid")


def client_scripts(key):
    return [(p, t) for p, t in CLIENT_SCRIPTS if p != 1 or key in CLIENT_ONE_ID]

# inserts: (key, label, id column DDL, extra DDL, INSERT statement)
INS_PLAIN = "INSERT INTO bench_t (buyer, amount) SELECT buyer, n FROM bench_src LIMIT {n}"
INSERT_VARIANTS = [
    ("snowseq_next", "DEFAULT snowseq_next()",
     "id bigint PRIMARY KEY DEFAULT snowseq_next()", "", INS_PLAIN),
    ("bigserial", "bigserial", "id bigserial PRIMARY KEY", "", INS_PLAIN),
    ("identity", "identity", "id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY", "", INS_PLAIN),
    ("gen_random_uuid", "DEFAULT gen_random_uuid()",
     "id uuid PRIMARY KEY DEFAULT gen_random_uuid()", "", INS_PLAIN),
    ("uuidv7", "DEFAULT UUIDv7 (PL/pgSQL)", "id uuid PRIMARY KEY DEFAULT bench_uuidv7()", "",
     INS_PLAIN),
    ("gene_trigger", "gene ID, trigger", "id bigint PRIMARY KEY",
     "CREATE TRIGGER bench_t_gene BEFORE INSERT ON bench_t FOR EACH ROW "
     "EXECUTE FUNCTION snowseq_fill_gene_id('id', 'buyer');", INS_PLAIN),
    ("gene_select", "gene ID, INSERT ... SELECT", "id bigint PRIMARY KEY", "",
     "INSERT INTO bench_t (id, buyer, amount) "
     "SELECT snowseq_gene_next(buyer), buyer, n FROM bench_src LIMIT {n}"),
]

# WAL with no insert: (key, label, expression)
WAL_GENERATORS = [
    ("snowseq_next", "snowseq_next()", "snowseq_next()"),
    ("gene_int8", "snowseq_gene_next(bigint)", "snowseq_gene_next(4242424242::bigint)"),
    ("counter", "snowseq_counter_next(name)", "snowseq_counter_next('bench_counter')"),
    ("nextval_c1", "nextval() CACHE 1", "nextval('bench_seq_cache1')"),
]

# Generators that exist only on some servers: the peer extensions (built by
# bench/run.sh when their sources are found), PostgreSQL 18's built-in
# uuidv7(), and snowseq's own UUIDv7 when this build has it.  (key, label,
# expression, SQL type, what it needs: ("extension", name) or ("function",
# signature)).  Each joins the call cost, inserts, clients (1,000 IDs per
# transaction) and WAL measurements and the correctness observations.
OPTIONAL_GENERATORS = [
    ("snowflake", "pgEdge snowflake.nextval()", "snowflake.nextval()", "bigint",
     ("extension", "snowflake")),
    ("pg_uuidv7", "pg_uuidv7 uuid_generate_v7()", "uuid_generate_v7()", "uuid",
     ("extension", "pg_uuidv7")),
    ("uuidv7_builtin", "uuidv7() (built-in)", "uuidv7()", "uuid",
     ("function", "pg_catalog.uuidv7()")),
    ("snowseq_uuid", "snowseq_uuid()", "snowseq_uuid()", "uuid", ("function", "snowseq_uuid()")),
]
PEER_LABELS = {"snowflake": "pgEdge snowflake", "pg_uuidv7": "pg_uuidv7"}

# the generators whose behaviour the correctness observations record:
# (key, label, expression, SQL type)
OBSERVED_GENERATORS = [
    ("snowseq_next", "snowseq_next()", "snowseq_next()", "bigint"),
    ("gene_int8", "snowseq_gene_next(bigint), one key", "snowseq_gene_next(4242424242::bigint)", "bigint"),
    ("nextval_c1", "nextval() CACHE 1", "nextval('bench_seq_cache1')", "bigint"),
    ("nextval_c100", "nextval() CACHE 100", "nextval('bench_seq_cache100')", "bigint"),
    ("gen_random_uuid", "gen_random_uuid()", "gen_random_uuid()", "uuid"),
    ("uuidv7", "UUIDv7 (PL/pgSQL)", "bench_uuidv7()", "uuid"),
    ("instagram", "Instagram-style (PL/pgSQL)", "bench_instagram_id()", "bigint"),
]


def add_optional_generators():
    """Create what the optional generators need and add those available to
    the measurement lists.  Returns (available keys, [(label, why skipped)])."""
    built = os.environ.get("BENCH_PEERS_BUILT", "").split()
    skipped = [tuple(x.split(": ", 1)) for x in os.environ.get("BENCH_PEERS_SKIPPED", "").split(";") if x]
    have = []
    for key, label, expr, typ, (kind, name) in OPTIONAL_GENERATORS:
        if kind == "extension":
            if name not in built:
                if not any(l == PEER_LABELS[name] for l, _ in skipped):
                    skipped.append((PEER_LABELS[name], "not built (BENCH_PEERS)"))
                continue
            psql("CREATE EXTENSION IF NOT EXISTS %s;\n" % name)
        elif query_value("SELECT to_regprocedure('%s') IS NOT NULL" % name) != "t":
            skipped.append((label, "no %s on this server" % name))
            continue
        have.append(key)
        CALL_GENERATORS.append((key, label, expr))
        CLIENT_GENERATORS.append((key, label, expr))
        INSERT_VARIANTS.append((key, "DEFAULT " + label,
                                "id %s PRIMARY KEY DEFAULT %s" % (typ, expr), "", INS_PLAIN))
        WAL_GENERATORS.append((key, label, expr))
        OBSERVED_GENERATORS.append((key, label, expr, typ))
    return have, skipped


SETTINGS = [
    "shared_buffers", "work_mem", "maintenance_work_mem", "wal_buffers", "fsync",
    "synchronous_commit", "full_page_writes", "wal_level", "wal_compression",
    "max_wal_size", "checkpoint_timeout", "autovacuum", "jit", "max_connections",
    "huge_pages", "data_checksums", "server_encoding", "lc_collate",
    "shared_preload_libraries", "snowseq.node_id", "snowseq.time_bits",
    "snowseq.node_bits", "snowseq.seq_bits", "snowseq.reserve_buffer_ms",
]


# --------------------------------------------------------------------------
# running things

class HarnessError(Exception):
    pass


def log(msg=""):
    print(msg, flush=True)


def run(cmd, stdin=None):
    p = subprocess.run(cmd, input=stdin, capture_output=True, text=True)
    if p.returncode != 0:
        raise HarnessError("%s failed (%d):\n%s%s" % (" ".join(cmd[:3]), p.returncode,
                                                      p.stdout[-2000:], p.stderr[-2000:]))
    return p.stdout


def psql(script):
    """Run a psql script in one session; returns its unaligned output."""
    return run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-f", "-"], script)


TIME_RE = re.compile(r"^Time: ([0-9.]+) ms", re.M)


def timed(setup, stmt, after=""):
    """Time stmt with psql \\timing (client side, one round trip) in a fresh
    session after setup.  Returns (ms, {key: value}) where the key/value
    pairs are the two-column rows of the setup and after queries."""
    out = psql("%s\n\\timing on\n%s;\n\\timing off\n%s\n" % (setup, stmt, after))
    times = TIME_RE.findall(out)
    if len(times) != 1:
        raise HarnessError("expected one timing, got %r from:\n%s" % (times, out[-2000:]))
    kv = {}
    for line in out.splitlines():
        if line.count("|") == 1:
            k, v = line.split("|")
            kv[k] = v
    return float(times[0]), kv


def query_rows(sql):
    return [line.split("|") for line in psql(sql + ";\n").splitlines() if line]


def query_value(sql):
    rows = query_rows(sql)
    return rows[0][0]


def alternate(items, rep):
    """A B C on even repetitions, C B A on odd ones."""
    return list(items) if rep % 2 == 0 else list(reversed(items))


def median(xs):
    return statistics.median(xs)


def finite(x):
    return isinstance(x, (int, float)) and math.isfinite(x)


# --------------------------------------------------------------------------
# 1. call cost

def call_query(key, expr, n):
    """The query that issues n IDs and the number it really issues."""
    if key == "loop":
        return "SELECT count(i) FROM generate_series(1, %d) i" % n, n
    if key.startswith("snowseq_next_n"):
        calls = max(1, -(-n // NEXT_N_MAX))
        per = n // calls
        if key == "snowseq_next_n_from":
            if calls == 1:
                return "SELECT count(*) FROM snowseq_next_n(%d)" % per, per
            return ("SELECT count(*) FROM generate_series(1, %d) c, LATERAL snowseq_next_n(%d)"
                    % (calls, per), per * calls)
        if calls == 1:
            return "SELECT count(x) FROM (SELECT snowseq_next_n(%d) AS x) s" % per, per
        return ("SELECT count(x) FROM (SELECT snowseq_next_n(%d) AS x FROM generate_series(1, %d)) s"
                % (per, calls), per * calls)
    return "SELECT count(%s) FROM generate_series(1, %d)" % (expr, n), n


def call_generators():
    """The call-cost generators this server has (add_optional_generators()
    has appended the optional ones it found)."""
    return list(CALL_GENERATORS)


def bench_calls(cfg):
    n = cfg["call_n"]
    generators = call_generators()
    samples = {k: [] for k, _, _ in generators}
    issued = {}
    log("== 1. call cost in one backend: %d IDs per query, %d repetitions" % (n, cfg["reps"]))
    for rep in range(cfg["reps"]):
        line = []
        for key, label, expr in alternate(generators, rep):
            q, real_n = call_query(key, expr, n)
            warm, _ = call_query(key, expr, 1000)
            ms, _ = timed(warm + ";", q)
            samples[key].append(ms * 1e6 / real_n)
            issued[key] = real_n
            line.append("%s %.0f" % (key, ms * 1e6 / real_n))
        log("  rep %d (ns/ID): %s" % (rep + 1, ", ".join(line)))
    res = []
    floor = median(samples["clock_timestamp"])
    loop = median(samples["loop"])
    for key, label, expr in generators:
        ns = median(samples[key])
        res.append({
            "key": key, "label": label,
            "query": call_query(key, expr, n)[0],
            "ns": ns, "min": min(samples[key]), "max": max(samples[key]),
            "samples": samples[key], "ids": issued[key],
            "x_floor": ns / floor, "over_loop": ns - loop,
        })
    return res


# --------------------------------------------------------------------------
# 2. many clients

# generators that take the cluster's logical clock: at most 2^seq_bits IDs
# per time unit in the long run (4,096,000 IDs/s with the default layout),
# more only by borrowing time ahead, up to snowseq.max_lead_ms
CLOCK_GENERATORS = ("snowseq_next", "snowseq_uuid")


def clock_caught_up(limit_s=30.0):
    """Wait until the logical clock no longer leads the wall clock, so that
    every many-client run of a clock generator starts alike (with the whole
    of snowseq.max_lead_ms to borrow) whatever ran before it."""
    deadline = time.time() + limit_s
    while time.time() < deadline:
        if query_value("SELECT drift <= interval '0' FROM snowseq_status") == "t":
            return
        time.sleep(0.2)
    raise HarnessError("the snowseq clock still leads the wall clock after %.0f s" % limit_s)


def bench_clients(cfg, tmp):
    clients = [int(c) for c in cfg["clients"].split()]
    nproc = os.cpu_count() or 1
    scripts = {}
    for key, label, expr in CLIENT_GENERATORS:
        for per_tx, tmpl in client_scripts(key):
            path = os.path.join(tmp, "pgbench_%s_%d.sql" % (key, per_tx))
            with open(path, "w") as f:
                f.write(tmpl.format(e=expr))
            scripts[(key, per_tx)] = path
    runs = [(key, per_tx, c) for key, _, _ in CLIENT_GENERATORS
            for per_tx, _ in client_scripts(key) for c in clients]
    samples = {r: [] for r in runs}
    log("== 2. many clients: pgbench -n -M prepared -T %d, clients %s, %d repetitions"
        % (cfg["seconds"], cfg["clients"], cfg["client_reps"]))
    for rep in range(cfg["client_reps"]):
        for key, per_tx, c in alternate(runs, rep):
            if key in CLOCK_GENERATORS:
                clock_caught_up()
            out = run(["pgbench", "-n", "-M", "prepared", "-T", str(cfg["seconds"]),
                       "-c", str(c), "-j", str(min(c, nproc)), "-f", scripts[(key, per_tx)]])
            m = re.search(r"^tps = ([0-9.]+) \(without initial connection time\)", out, re.M)
            if not m:
                raise HarnessError("no tps in pgbench output:\n" + out[-2000:])
            samples[(key, per_tx, c)].append(float(m.group(1)) * per_tx)
        log("  rep %d: %s" % (rep + 1, ", ".join(
            "%s/%d/%dc %.0f" % (k, p, c, samples[(k, p, c)][-1]) for k, p, c in runs)))
    res = []
    for key, label, expr in CLIENT_GENERATORS:
        for per_tx, tmpl in client_scripts(key):
            ids = {c: median(samples[(key, per_tx, c)]) for c in clients}
            base = ids[clients[0]]
            res.append({
                "key": key, "label": label, "per_tx": per_tx,
                "script": tmpl.format(e=expr).strip(),
                "ids_per_s": ids, "scaling": {c: ids[c] / base for c in clients},
                "samples": {c: samples[(key, per_tx, c)] for c in clients},
            })
    return clients, res


# --------------------------------------------------------------------------
# 3. inserts

def bench_inserts(cfg):
    sizes = [int(s) for s in cfg["insert_rows"].split()]
    reps = cfg["insert_reps"]
    log("== 3. inserts: %s rows, %d buyers, %d repetitions"
        % (", ".join(str(s) for s in sizes), cfg["buyers"], reps))
    # the payload, precomputed once: the same rows for every variant
    psql("SELECT setseed(0.42);\n"
         "DROP TABLE IF EXISTS bench_src;\n"
         "CREATE TABLE bench_src AS SELECT n::integer AS n, "
         "(1 + floor(random() * %d))::bigint AS buyer FROM generate_series(1, %d) n;\n"
         "VACUUM (FREEZE, ANALYZE) bench_src;\n" % (cfg["buyers"], max(sizes)))
    res = []
    for size in sizes:
        samples = {v[0]: [] for v in INSERT_VARIANTS}
        for rep in range(reps):
            for key, label, idcol, extra, ins in alternate(INSERT_VARIANTS, rep):
                setup = ("DROP TABLE IF EXISTS bench_t;\n"
                         "CREATE TABLE bench_t (%s, buyer bigint NOT NULL, amount integer NOT NULL);\n"
                         "%s\nCHECKPOINT;\n"
                         "SELECT pg_current_wal_lsn() AS lsn0 \\gset\n" % (idcol, extra))
                after = ("SELECT 'wal', pg_wal_lsn_diff(pg_current_wal_lsn(), :'lsn0');\n"
                         "SELECT 'rows', count(*) FROM bench_t;\n"
                         "SELECT 'table', pg_relation_size('bench_t');\n"
                         "SELECT 'index', pg_relation_size(conindid) FROM pg_constraint "
                         "WHERE conrelid = 'bench_t'::regclass AND contype = 'p';\n"
                         "DROP TABLE bench_t;\n")
                ms, kv = timed(setup, ins.format(n=size), after)
                if int(kv["rows"]) != size:
                    raise HarnessError("%s: %s rows inserted, expected %d" % (key, kv["rows"], size))
                samples[key].append({"ms": ms, "wal": float(kv["wal"]),
                                     "table": int(kv["table"]), "index": int(kv["index"])})
            log("  %d rows, rep %d (rows/s): %s" % (size, rep + 1, ", ".join(
                "%s %.0f" % (k, size * 1000.0 / samples[k][-1]["ms"]) for k, *_ in INSERT_VARIANTS)))
        rows = []
        for key, label, idcol, extra, ins in INSERT_VARIANTS:
            s = samples[key]
            ms = median([x["ms"] for x in s])
            rows.append({
                "key": key, "label": label, "ddl": idcol, "trigger": extra,
                "insert": ins.format(n=size),
                "rows_per_s": size * 1000.0 / ms, "seconds": ms / 1000.0,
                "rows_per_s_samples": [size * 1000.0 / x["ms"] for x in s],
                "table_bytes": median([x["table"] for x in s]),
                "index_bytes": median([x["index"] for x in s]),
                "wal_bytes": median([x["wal"] for x in s]),
            })
        base = next(r for r in rows if r["key"] == "bigserial")
        uuid = next(r for r in rows if r["key"] == "gen_random_uuid")
        for r in rows:
            r["x_bigserial"] = r["rows_per_s"] / base["rows_per_s"]
            r["x_uuid"] = r["rows_per_s"] / uuid["rows_per_s"]
            r["index_x_bigserial"] = r["index_bytes"] / base["index_bytes"]
            r["wal_per_row"] = r["wal_bytes"] / size
        res.append({"rows": size, "variants": rows})
    psql("DROP TABLE bench_src;\n")
    return res


# --------------------------------------------------------------------------
# 4. WAL per 1M IDs, no insert

def bench_wal(cfg):
    n = cfg["wal_n"]
    samples = {k: [] for k, _, _ in WAL_GENERATORS}
    adv = {k: [] for k, _, _ in WAL_GENERATORS}
    log("== 4. WAL per 1M IDs with no insert: %d IDs per query, %d repetitions" % (n, cfg["reps"]))
    for rep in range(cfg["reps"]):
        for key, label, expr in alternate(WAL_GENERATORS, rep):
            setup = ("SELECT count(%s) FROM generate_series(1, 1000);\n"
                     "SELECT pg_sleep(0.2);\n"
                     "SELECT pg_current_wal_lsn() AS lsn0 \\gset\n"
                     "SELECT sum(advances) AS adv0 FROM snowseq_reservations \\gset\n" % expr)
            # the reservation worker writes asynchronously: give it time to
            # finish before the end of the WAL is read
            after = ("SELECT pg_sleep(0.2);\n"
                     "SELECT 'wal', pg_wal_lsn_diff(pg_current_wal_lsn(), :'lsn0');\n"
                     "SELECT 'adv', sum(advances) - :adv0 FROM snowseq_reservations;\n")
            ms, kv = timed(setup, "SELECT count(%s) FROM generate_series(1, %d)" % (expr, n), after)
            samples[key].append(float(kv["wal"]) * 1e6 / n)
            adv[key].append(int(kv["adv"]))
        log("  rep %d (bytes per 1M IDs): %s" % (rep + 1, ", ".join(
            "%s %.0f" % (k, samples[k][-1]) for k, _, _ in WAL_GENERATORS)))
    res = []
    for key, label, expr in WAL_GENERATORS:
        res.append({"key": key, "label": label, "expr": expr,
                    "bytes_per_1m": median(samples[key]), "samples": samples[key],
                    "advances": median(adv[key])})
    base = next(r for r in res if r["key"] == "nextval_c1")
    for r in res:
        r["x_nextval"] = r["bytes_per_1m"] / base["bytes_per_1m"]
    return res


# --------------------------------------------------------------------------
# 5. shared memory

SHMEM_SQL = ("SELECT s.shmem_bytes, s.ids_issued, "
             "(SELECT size FROM pg_shmem_allocations WHERE name = 'snowseq') "
             "FROM snowseq_status s")


def shmem_reading():
    b, ids, alloc = query_rows(SHMEM_SQL)[0]
    return {"shmem_bytes": int(b), "ids_issued": int(ids), "allocation": int(alloc)}


def bench_shmem_burst(cfg):
    n = cfg["shmem_n"]
    per = min(n, NEXT_N_MAX)
    calls = max(1, n // per)
    log("== 5. shared memory: %d more IDs (snowseq_next_n, snowseq_next, snowseq_gene_next)"
        % (calls * per + 2 * cfg["wal_n"]))
    psql("SELECT count(*) FROM generate_series(1, %d) c, LATERAL snowseq_next_n(%d);\n"
         "SELECT count(snowseq_next()) FROM generate_series(1, %d);\n"
         "SELECT count(snowseq_gene_next(i)) FROM generate_series(1, %d) i;\n"
         % (calls, per, cfg["wal_n"], cfg["wal_n"]))


# --------------------------------------------------------------------------
# 0. correctness observations: what a user sees, measured on this server
#    (and on a standby and a second cluster under libfaketime)

OBS_SIZES = {"full": {"series": 2000, "interleaved": 1000, "clock": 200},
             "smoke": {"series": 200, "interleaved": 100, "clock": 20}}

INTERLEAVED_FN = r"""
CREATE OR REPLACE FUNCTION pg_temp.bench_interleaved(expr text, typ text, n integer, conn text,
	OUT out_of_order integer, OUT repeated integer)
LANGUAGE plpgsql AS $$
DECLARE
	cur text;
	prev text;
	back boolean;
	seen text[] := '{}';
BEGIN
	PERFORM dblink_connect('bench_a', conn);
	PERFORM dblink_connect('bench_b', conn);
	out_of_order := 0;
	FOR i IN 1 .. n LOOP
		SELECT t.v INTO cur FROM dblink(CASE WHEN i % 2 = 1 THEN 'bench_a' ELSE 'bench_b' END,
			'SELECT (' || expr || ')::text') AS t(v text);
		IF prev IS NOT NULL THEN
			EXECUTE format('SELECT $1::%s <= $2::%s', typ, typ) INTO back USING cur, prev;
			IF back THEN out_of_order := out_of_order + 1; END IF;
		END IF;
		seen := seen || cur;
		prev := cur;
	END LOOP;
	SELECT count(*) - count(DISTINCT v) INTO repeated FROM unnest(seen) v;
	PERFORM dblink_disconnect('bench_a');
	PERFORM dblink_disconnect('bench_b');
END
$$;
"""


def as_server(cmd, env=()):
    """A command run as the server's user (PostgreSQL refuses root)."""
    pre = ["env", "PATH=" + os.environ["PATH"]] + list(env)
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--"] + pre + cmd
    return pre + cmd


def psql_at(port, script, db="postgres"):
    """A psql script on the server at port; returns (ok, output, first error)."""
    p = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-p", str(port),
                        "-d", db, "-f", "-"], input=script, capture_output=True, text=True)
    err = ""
    for line in p.stderr.splitlines():
        m = re.search(r"(ERROR|FATAL):\s+(.*)", line)
        if m:
            err = "%s: %s" % (m.group(1), m.group(2))
            break
    return p.returncode == 0, p.stdout, err


def short_error(err, n=70):
    return err if len(err) <= n else err[:n - 1] + "…"


def ordered(values, typ):
    """Values as received, comparable in their SQL type's order (uuid text
    is fixed-width lower-case hex, so its string order is the uuid order)."""
    return [int(v) for v in values] if typ == "bigint" else list(values)


def order_cell(out_of_order, repeated, steps):
    if out_of_order == 0 and repeated == 0:
        return "yes"
    cell = "no: %s of %s steps go back" % (fmt_int(out_of_order), fmt_int(steps))
    if repeated:
        cell += ", %s repeated" % fmt_int(repeated)
    return cell


def clock_cell(before, phase, typ):
    """What the IDs taken after the clock stepped back did, against those
    taken before it."""
    if phase.get("error"):
        return short_error(phase["error"])
    after = ordered(phase["ids"], typ)
    prev = ordered(before, typ)
    if not after:
        return "no IDs"
    cells = []
    if phase["seconds"] > 2:
        cells.append("wait %.1f s" % phase["seconds"])
    repeated = len(set(after) & set(prev))
    if min(after) <= max(prev):
        cells.append("go back" + (", %s repeated" % fmt_int(repeated) if repeated else ""))
    else:
        cells.append("increase")
    return "; ".join(cells)


def faketime_library():
    for pattern in ("/usr/lib/*/faketime/libfaketime.so.1", "/usr/lib/faketime/libfaketime.so.1"):
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


def observe(mode, tmp, peers):
    """The correctness observations table: for every generator, measured
    here.  Returns {"rows": [...], "notes": [...]}."""
    sizes = OBS_SIZES[mode]
    gens = OBSERVED_GENERATORS
    host, port = os.environ["PGHOST"], int(os.environ["PGPORT"])
    res = {key: {"label": label} for key, label, _, _ in gens}
    notes = []
    log("== 0. correctness observations (%d generators)" % len(gens))

    # within one session, and two sessions taking turns (dblink)
    for key, label, expr, typ in gens:
        n = sizes["series"]
        row = query_rows("SELECT count(*) FILTER (WHERE x <= p), count(p), count(*) - count(DISTINCT x) FROM "
                         "(SELECT x, lag(x) OVER (ORDER BY i) p FROM "
                         "(SELECT i, %s AS x FROM generate_series(1, %d) i) s) t" % (expr, n))[0]
        res[key]["session"] = order_cell(int(row[0]), int(row[2]), int(row[1]))
    ok, _, err = psql_at(port, "CREATE EXTENSION IF NOT EXISTS dblink;")
    if ok:
        conn = "host=%s port=%d dbname=%s user=%s" % (host, port, os.environ["PGDATABASE"],
                                                     os.environ["PGUSER"])
        for key, label, expr, typ in gens:
            n = sizes["interleaved"]
            ok, out, err = psql_at(port, INTERLEAVED_FN + "SELECT out_of_order || '|' || repeated FROM "
                                   "pg_temp.bench_interleaved(%s, '%s', %d, %s);"
                                   % (sql_literal(expr), typ, n, sql_literal(conn)))
            if ok:
                back, rep = [int(x) for x in out.strip().split("|")]
                res[key]["sessions"] = order_cell(back, rep, n - 1)
            else:
                res[key]["sessions"] = short_error(err)
    else:
        notes.append("Two sessions: not measured, dblink is not available (%s)." % err)

    # a read-only transaction
    for key, label, expr, typ in gens:
        ok, _, err = psql_at(port, "BEGIN READ ONLY;\nSELECT %s;\nCOMMIT;" % expr)
        res[key]["read_only"] = "works" if ok else short_error(err)

    # a hot standby of this server
    standby = os.path.join(tmp, "standby")
    sport = port + 1
    try:
        run(as_server(["pg_basebackup", "-D", standby, "-X", "stream", "-R", "-c", "fast",
                       "-h", host, "-p", str(port)]))
        with open(os.path.join(standby, "postgresql.auto.conf"), "a") as f:
            f.write("port = %d\n" % sport)
        run(as_server(["pg_ctl", "-D", standby, "-l", standby + ".log", "-w", "-t", "60", "start"]))
        try:
            for key, label, expr, typ in gens:
                ok, _, err = psql_at(sport, "SELECT %s;" % expr)
                res[key]["standby"] = "works" if ok else short_error(err)
        finally:
            run(as_server(["pg_ctl", "-D", standby, "-m", "fast", "-w", "stop"]))
    except HarnessError as e:
        notes.append("Hot standby: not measured, the standby did not start (%s)." % str(e).splitlines()[0])
    shutil.rmtree(standby, ignore_errors=True)

    # the clock stepped back 10 s: a second cluster under libfaketime
    lib = faketime_library()
    if lib:
        clock_step(gens, res, sizes["clock"], tmp, host, port + 2, lib, peers, notes)
    else:
        notes.append("Clock step: not measured, libfaketime is not installed (Debian package faketime).")

    rows = []
    for key, label, expr, typ in gens:
        r = res[key]
        rows.append({"key": key, "label": label, "expr": expr,
                     "session": r.get("session", "—"), "sessions": r.get("sessions", "—"),
                     "read_only": r.get("read_only", "—"), "standby": r.get("standby", "—"),
                     "clock_same": r.get("clock_same", "—"), "clock_new": r.get("clock_new", "—"),
                     "clock_restart": r.get("clock_restart", "—")})
        log("  %-36s %s" % (label, " | ".join(rows[-1][k] for k in OBS_COLUMNS)))
    return {"rows": rows, "notes": notes, "sizes": sizes}


OBS_COLUMNS = ["session", "sessions", "read_only", "standby", "clock_same", "clock_new", "clock_restart"]
OBS_HEADERS = ["increasing within a session", "increasing across 2 sessions taking turns",
               "in a READ ONLY transaction", "on a hot standby", "clock 10 s back: same session",
               "clock 10 s back: new session", "clock 10 s back: after a restart"]


def sql_literal(s):
    return "'" + s.replace("'", "''") + "'"


def clock_step(gens, res, n, tmp, host, port, lib, peers, notes):
    data = os.path.join(tmp, "faketime")
    offset = os.path.join(tmp, "faketime.offset")

    def set_offset(o):
        with open(offset + ".tmp", "w") as f:
            f.write(o + "\n")
        os.chmod(offset + ".tmp", 0o644)
        os.rename(offset + ".tmp", offset)

    env = ["LD_PRELOAD=" + lib, "FAKETIME_TIMESTAMP_FILE=" + offset, "FAKETIME_NO_CACHE=1",
           "FAKETIME_DONT_FAKE_MONOTONIC=1"]
    set_offset("+0")
    run(as_server(["initdb", "-D", data, "-U", "postgres", "-E", "UTF8", "--locale=C", "-A", "trust",
                   "--no-sync"]))
    with open(os.path.join(data, "postgresql.conf"), "a") as f:
        f.write("listen_addresses = ''\nunix_socket_directories = '%s'\nport = %d\n"
                "shared_preload_libraries = 'snowseq'\nsnowseq.node_id = 1\nsnowflake.node = 2\n"
                "jit = off\n" % (host, port))
    pg_ctl = lambda *a: run(as_server(["pg_ctl", "-D", data, "-l", data + ".log", "-w", "-t", "60"] + list(a),
                                      env))
    pg_ctl("start")
    try:
        ok, _, err = psql_at(port, "\\i %s\n" % os.path.join(BENCH_DIR, "setup.sql") +
                             "".join("CREATE EXTENSION %s;\n" % p for p in peers))
        if not ok:
            raise HarnessError("setup of the libfaketime cluster: " + err)
        series = "SELECT %s FROM generate_series(1, " + str(n) + ");"
        before = {}
        # the same session: IDs, the step back (psql's \! runs a shell command), IDs
        for key, label, expr, typ in gens:
            ok, out, err = psql_at(port, "%s\n\\echo STEP\n\\! echo -10 > %s\n%s\n\\! echo +0 > %s\n"
                                   % (series % expr, offset, series % expr, offset))
            set_offset("+0")
            ids = out.split()
            if "STEP" not in ids:
                res[key]["clock_same"] = short_error(err)
                continue
            cut = ids.index("STEP")
            before[key] = ids[:cut]
            res[key]["clock_same"] = clock_cell(before[key], {"ids": ids[cut + 1:], "seconds": 0,
                                                              "error": err}, typ)

        def phase(column):
            for key, label, expr, typ in gens:
                if key not in before:
                    continue
                t0 = time.time()
                ok, out, err = psql_at(port, series % expr)
                res[key][column] = clock_cell(before[key], {"ids": out.split(), "seconds": time.time() - t0,
                                                            "error": "" if ok else err}, typ)
        set_offset("-10")
        phase("clock_new")
        pg_ctl("restart")
        phase("clock_restart")
    except HarnessError as e:
        notes.append("Clock step: not measured (%s)." % str(e).splitlines()[0])
    finally:
        set_offset("+0")
        try:
            pg_ctl("-m", "fast", "stop")
        except HarnessError:
            pass
        shutil.rmtree(data, ignore_errors=True)


# --------------------------------------------------------------------------
# report

def fmt_int(x):
    return "{:,}".format(int(round(x)))


def fmt_mb(b):
    return "%.1f" % (b / 1048576.0)


def fmt_x(x):
    return "%.2fx" % x


def machine_info():
    model = "unknown"
    virtual = False
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown":
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags") and " hypervisor" in line:
                    virtual = True
    except OSError:
        pass
    mem = 0
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    os_name = ""
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    os_name = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": model, "virtual": virtual, "mem_gib": mem / 1073741824.0,
            "os": os_name, "kernel": os.uname().release}


def targets(calls, clients, client_res, inserts, wal, shmem, skipped=None):
    c = {r["key"]: r for r in calls}
    t = []
    snow, floor = c["snowseq_next"]["ns"], c["clock_timestamp"]["ns"]
    t.append(("snowseq_next() call cost <= 1.10x the clock_timestamp() floor",
              "%.1f ns vs %.1f ns = %s" % (snow, floor, fmt_x(snow / floor)), snow / floor <= 1.10))
    nv = c["nextval_c1"]["ns"]
    t.append(("snowseq_next() >= 2x faster than nextval() (CACHE 1)",
              "%.1f ns vs %.1f ns = %s faster" % (snow, nv, fmt_x(nv / snow)), nv / snow >= 2.0))
    gu = c["gen_random_uuid"]["ns"]
    if "snowseq_uuid" in c:
        su = c["snowseq_uuid"]["ns"]
        t.append(("snowseq_uuid() call cost <= gen_random_uuid()'s",
                  "%.1f ns vs %.1f ns = %s" % (su, gu, fmt_x(su / gu)), su <= gu))
    big = inserts[-1]
    v = {r["key"]: r for r in big["variants"]}
    s = v["snowseq_next"]
    t.append(("inserts >= 0.95x bigserial rows/s at %s rows" % fmt_int(big["rows"]),
              "%s vs %s rows/s = %s" % (fmt_int(s["rows_per_s"]), fmt_int(v["bigserial"]["rows_per_s"]),
                                        fmt_x(s["x_bigserial"])), s["x_bigserial"] >= 0.95))
    t.append(("inserts >= 2x gen_random_uuid() rows/s at %s rows" % fmt_int(big["rows"]),
              "%s vs %s rows/s = %s" % (fmt_int(s["rows_per_s"]),
                                        fmt_int(v["gen_random_uuid"]["rows_per_s"]), fmt_x(s["x_uuid"])),
              s["x_uuid"] >= 2.0))
    t.append(("PK index within 5%% of bigserial's at %s rows" % fmt_int(big["rows"]),
              "%s MB vs %s MB = %s" % (fmt_mb(s["index_bytes"]), fmt_mb(v["bigserial"]["index_bytes"]),
                                       fmt_x(s["index_x_bigserial"])),
              abs(s["index_x_bigserial"] - 1.0) <= 0.05))
    cn = c["counter"]["ns"]
    t.append(("snowseq_counter_next() >= 2x faster than nextval() (CACHE 1)",
              "%.1f ns vs %.1f ns = %s faster" % (cn, nv, fmt_x(nv / cn)), nv / cn >= 2.0))
    w = {r["key"]: r for r in wal}
    for key in ("snowseq_next", "gene_int8", "counter"):
        t.append(("WAL per 1M IDs of %s < 1/10 of nextval()'s" % w[key]["label"],
                  "%s vs %s bytes = %s" % (fmt_int(w[key]["bytes_per_1m"]),
                                           fmt_int(w["nextval_c1"]["bytes_per_1m"]),
                                           "%.4fx" % w[key]["x_nextval"]),
                  w[key]["x_nextval"] < 0.1))
    if 2 in clients and clients[0] == 1:
        r = next(r for r in client_res if r["key"] == "snowseq_next" and r["per_tx"] == 1000)
        t.append(("snowseq_next() IDs/s at 2 clients >= 1.7x 1 client (1000 IDs per transaction)",
                  "%s vs %s IDs/s = %s" % (fmt_int(r["ids_per_s"][2]), fmt_int(r["ids_per_s"][1]),
                                           fmt_x(r["scaling"][2])), r["scaling"][2] >= 1.7))
    # (results saved before public IDs existed have no such rows)
    for key in [k for k in ("snowseq_encrypt", "snowseq_decrypt") if k in c]:
        ns = c[key]["ns"]
        t.append(("%s under 1 us per call" % c[key]["label"],
                  "%.1f ns (%.1f ns over the loop)" % (ns, c[key]["over_loop"]), ns < 1000.0))
    # the peers and PostgreSQL 18's uuidv7(): measured side by side, or SKIP
    # naming what was missing
    why = dict(skipped or [])

    def skip(target, label):
        t.append((target, "not measured: %s (%s)" % (label, why.get(label, "not available")), None))

    if "snowflake" in c:
        sf = c["snowflake"]["ns"]
        t.append(("snowseq_next() >= 2.5x faster than pgEdge snowflake.nextval()",
                  "%.1f ns vs %.1f ns = %s faster" % (snow, sf, fmt_x(sf / snow)), sf / snow >= 2.5))
    else:
        skip("snowseq_next() >= 2.5x faster than pgEdge snowflake.nextval()", "pgEdge snowflake")
    for key, label, want in (("snowflake", "pgEdge snowflake", 1.05), ("pg_uuidv7", "pg_uuidv7", 1.8)):
        target = "inserts >= %.2fx %s's rows/s at %s rows" % (want, label, fmt_int(big["rows"]))
        if key in v:
            x = s["rows_per_s"] / v[key]["rows_per_s"]
            t.append((target, "%s vs %s rows/s = %s" % (fmt_int(s["rows_per_s"]),
                                                       fmt_int(v[key]["rows_per_s"]), fmt_x(x)), x >= want))
        else:
            skip(target, label)
    if "uuidv7_builtin" in c:
        u7 = c["uuidv7_builtin"]["ns"]
        t.append(("snowseq_next() faster than the built-in uuidv7()",
                  "%.1f ns vs %.1f ns = %s faster" % (snow, u7, fmt_x(u7 / snow)), snow < u7))
        if "snowseq_uuid" in c:
            su = c["snowseq_uuid"]["ns"]
            t.append(("snowseq_uuid() call cost <= 1.2x the built-in uuidv7()'s",
                      "%.1f ns vs %.1f ns = %s" % (su, u7, fmt_x(su / u7)), su / u7 <= 1.2))
        else:
            skip("snowseq_uuid() call cost <= 1.2x the built-in uuidv7()'s", "snowseq_uuid()")
    else:
        skip("snowseq_next() faster than the built-in uuidv7()", "uuidv7() (built-in)")
    t.append(("snowseq shared memory does not grow",
              "%s bytes before, %s bytes after %s IDs" % (
                  fmt_int(shmem["before"]["shmem_bytes"]), fmt_int(shmem["after"]["shmem_bytes"]),
                  fmt_int(shmem["after"]["ids_issued"] - shmem["before"]["ids_issued"])),
              shmem["after"]["shmem_bytes"] == shmem["before"]["shmem_bytes"]
              and shmem["after"]["allocation"] == shmem["before"]["allocation"]))
    return t


def verdict(ok):
    return "SKIP" if ok is None else "PASS" if ok else "MISS"


def md_table(header, rows, align=None):
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join(align or ["---"] * len(header)) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(x) for x in r) + " |")
    return "\n".join(out)


def write_report(path, ctx):
    m, cfg = ctx["machine"], ctx["cfg"]
    L = []
    L.append("# snowseq benchmarks\n")
    L.append("Generated by `bash bench/run.sh` on %s (%s mode, %.1f minutes); "
             "re-run it to regenerate this page and the plots. Every figure below is a median "
             "of the repetitions of one run, and every ratio compares medians taken in that "
             "same run." % (ctx["date"], ctx["mode"], ctx["elapsed"] / 60.0))
    if ctx["mode"] != "full":
        L.append("\n**Smoke run: tiny sizes, the numbers mean nothing.**")
    L.append("\n## Machine\n")
    L.append(md_table(["", ""], [
        ("CPU", "%s, %d cores (nproc)%s" % (m["cpu"], m["nproc"],
                                             ", virtual machine" if m.get("virtual") else "")),
        ("memory", "%.1f GiB" % m["mem_gib"]),
        ("OS", "%s, Linux %s" % (m["os"], m["kernel"].split("-")[0])),
        ("PostgreSQL", ctx["pg_version"]),
    ], ["---", "---"]))
    L.append("\nThe machine was not otherwise idle: treat differences of a few percent as noise "
             "(the *spread* columns show the range over the repetitions).")
    if ctx.get("load"):
        L.append("Its load average (1, 5 and 15 minutes; %d cores) as each section began: %s."
                 % (m["nproc"], "; ".join("%s %s" % (sec, la) for sec, la in ctx["load"])))
    L.append("\n## Server settings\n")
    L.append("A throwaway cluster made by `initdb` for the run (`-E UTF8 --locale=C`). The settings "
             "are initdb's (it writes `max_connections` and `shared_buffers` into postgresql.conf, hence "
             "*configuration file* below) except these lines the harness adds: `shared_preload_libraries = 'snowseq'`, "
             "`snowseq.node_id = 1`, `listen_addresses = ''` (Unix socket only), `jit = off` "
             "(JIT compilation would otherwise add a varying compile time to the large queries), "
             "`autovacuum = off` (so no vacuum of a previous insert table runs during the next "
             "measurement), `max_wal_size = 8GB` and `checkpoint_timeout = 1h` (so that no "
             "checkpoint falls inside a timed insert; the harness runs `CHECKPOINT` before each one).\n")
    L.append(md_table(["setting", "value", "source"], ctx["settings"], ["---", "---", "---"]))
    L.append("\n## Method\n")
    L.append("* Sizes: %s IDs per call-cost query; pgbench `-T %d` with %s clients; inserts of %s rows "
             "into a table `(id, buyer bigint, amount integer)` with %s distinct buyers; %s IDs for the "
             "WAL measurement." % (fmt_int(cfg["call_n"]), cfg["seconds"], cfg["clients"].replace(" ", ", "),
                                   " and ".join(fmt_int(int(s)) for s in cfg["insert_rows"].split()),
                                   fmt_int(cfg["buyers"]), fmt_int(cfg["wal_n"])))
    L.append("* Repetitions: %d for call cost and WAL, %d for clients, %d for inserts. Each repetition "
             "runs every generator once, in alternating order (A B C, then C B A, ...), so slow "
             "drift of the machine affects all of them alike."
             % (cfg["reps"], cfg["client_reps"], cfg["insert_reps"]))
    L.append("* Timing is client-side: psql `\\timing` around one statement in its own session (after a "
             "1,000-ID warm-up in that session), so it includes one round trip over a Unix socket and "
             "no EXPLAIN ANALYZE instrumentation. Many clients: pgbench's tps (without connection time) "
             "times IDs per transaction.")
    L.append("* Call cost: `SELECT count(f()) FROM generate_series(1, N)`; ns/ID = elapsed / N, loop "
             "overhead included (the series in the FROM clause passes through a tuplestore, which "
             "spills to a temporary file at the default `work_mem`). The *loop only* row (`count(i)` of the series) is that overhead; "
             "*over loop* is the generator's own cost. Keys of `snowseq_gene_next` are constants "
             "(literals; the 1 KB key `repeat('k', 1024)` is folded into a constant when the query is "
             "planned), so building the key is not timed. `snowseq_next_n(N)` appears twice: in the "
             "FROM clause (`SELECT count(*) FROM snowseq_next_n(N)`, rows pass through a tuplestore) "
             "and in the SELECT list (`SELECT count(x) FROM (SELECT snowseq_next_n(N) x) s`); it takes "
             "at most 2^22 IDs per call, more are taken in several calls. Public IDs: `snowseq_encrypt` of a "
             "constant gene ID and `snowseq_decrypt` of its public ID (read once per query by an InitPlan), "
             "under a key made by `bench/setup.sql`, so that no generator cost is mixed in; "
             "`snowseq_encrypt(snowseq_gene_next(...))` is what an application pays per public order number.")
    L.append("* Inserts: the buyers (uniform random, fixed seed) are precomputed once into `bench_src(n, buyer)`, "
             "vacuumed and frozen; every variant runs `INSERT INTO bench_t (buyer, amount) SELECT buyer, n "
             "FROM bench_src LIMIT <rows>` (the gene variant without a trigger adds "
             "`snowseq_gene_next(buyer)` as the id), so all of them insert the same payload into a fresh "
             "table after a `CHECKPOINT`. Rows/s includes the commit. Table and primary key index sizes "
             "are `pg_relation_size`; WAL is `pg_wal_lsn_diff` of `pg_current_wal_lsn()` around the INSERT.")
    L.append("* WAL with no insert: `pg_current_wal_lsn()` before and after `SELECT count(f()) FROM "
             "generate_series(1, N)`, with a 0.2 s pause before the second reading so that reservations "
             "the snowseq worker writes in the background are counted; scaled to 1M IDs.")
    L.append("* Generators compared: `bench/setup.sql` (sequences, a PL/pgSQL UUIDv7 and an "
             "Instagram-style PL/pgSQL function: 41 bits of ms since 2025-01-01, 13 bits of shard id, "
             "`nextval() % 1024`), and PostgreSQL 18's built-in `uuidv7()` on servers that have it.")
    opt = ctx.get("optional", [])
    if opt:
        L.append("* Also compared, in every section (clients: the 1,000-IDs-per-transaction script): " +
                 "; ".join("%s%s" % (o["label"], ", extension version %s built from its sources by "
                                     "`bench/run.sh`" % o["version"] if o["version"] else "") for o in opt) +
                 ". pgEdge snowflake runs with `snowflake.node = 2` and its default sequence "
                 "(`snowflake.nextval()`).")
    for label, why in ctx.get("skipped", []):
        L.append("* Not compared: %s (%s)." % (label, why))

    # summary
    L.append("\n## Summary: targets\n")
    L.append(md_table(["target", "measured", "result"],
                      [(t, m_, verdict(ok)) for t, m_, ok in ctx["targets"]],
                      ["---", "---", ":---:"]))
    L.append("\nA MISS is reported, never hidden; what each target compares:\n")
    L.append("* `snowseq_next()` against `clock_timestamp()`: both read the wall clock once per call; "
             "`snowseq_next()` also installs the new value in the cluster-wide counter with one "
             "compare-and-swap in shared memory (what makes IDs unique and increasing across "
             "backends), converts the clock to time units and splices in the node id. Those few "
             "nanoseconds are the whole difference; `over loop` in section 1 shows them.")
    L.append("* `snowseq_uuid()` against `gen_random_uuid()`: both return a 16-byte uuid; "
             "`snowseq_uuid()` takes one value of the same counter as `snowseq_next()` and 52 random "
             "bits from a buffer that one `pg_strong_random()` call fills for 512 UUIDs, where "
             "`gen_random_uuid()` calls `pg_strong_random()` for every UUID.")
    L.append("* Insert speed and index size: `snowseq_next()` IDs increase, so like bigserial every "
             "insert goes to the right edge of the primary key index (and so do `snowseq_uuid()` "
             "UUIDs); random UUIDs scatter over the whole index.")
    L.append("* WAL: `nextval()` logs the sequence every 32 values; snowseq logs a reservation only when "
             "the counter nears its durable bound (see section 4).")
    L.append("* Scaling: a single counter that every backend updates is one cache line moving between "
             "cores; the 1,000-IDs-per-transaction script keeps both cores busy generating IDs.")
    keys = {o["key"] for o in ctx.get("optional", [])}
    if "snowflake" in keys:
        L.append("* pgEdge `snowflake.nextval()` keeps its state in a sequence relation: every call "
                 "opens the sequence, locks its buffer, reads the clock and writes the new value into the "
                 "page (WAL-logged from time to time), so it is serialised on that buffer and refused "
                 "wherever a sequence cannot be written (read-only transactions, standbys).")
    if keys & {"pg_uuidv7", "uuidv7_builtin", "snowseq_uuid"}:
        L.append("* UUIDv7 generators return 16-byte keys: a 48-bit millisecond time followed by random "
                 "bits (`pg_uuidv7` draws 74 of them from `pg_strong_random()` per call; PostgreSQL 18's "
                 "`uuidv7()` uses 12 of them for sub-millisecond time, monotonic within a backend), so "
                 "they cost a random draw per ID and make a larger index than a bigint.")

    # 0
    obs = ctx.get("observations")
    if obs:
        L.append("\n## Correctness observations\n")
        L.append("Measured in this run, not taken from documentation: each generator called %s times in "
                 "one session and %s times by two sessions taking turns (dblink, one call each in turn); "
                 "`BEGIN READ ONLY; SELECT f(); COMMIT;`; `SELECT f()` on a hot standby of the benchmark "
                 "server (pg_basebackup, streaming); and on a second cluster whose postmaster runs under "
                 "libfaketime, %s IDs before the clock steps back 10 s and %s after it: in the same "
                 "session, in a new session, and after a restart with the clock still behind. *go back*: "
                 "an ID after the step is smaller than one before it; *repeated*: the same ID issued "
                 "again; *wait*: the %s IDs took more than 2 s.\n"
                 % (fmt_int(obs["sizes"]["series"]), fmt_int(obs["sizes"]["interleaved"]),
                    obs["sizes"]["clock"], obs["sizes"]["clock"], obs["sizes"]["clock"]))
        L.append(md_table(["generator"] + OBS_HEADERS,
                          [[r["label"]] + [r[k] for k in OBS_COLUMNS] for r in obs["rows"]],
                          ["---"] * (1 + len(OBS_COLUMNS))))
        for n in obs["notes"]:
            L.append("\n" + n)
        L.append("\n`gen_random_uuid()` is random by design; `nextval()` with a cache hands each session "
                 "its own block; on a standby snowseq refuses on purpose (the standby has its "
                 "primary's node id; a promoted standby starts above its primary's reservation).")

    # 1
    L.append("\n## 1. Call cost in one backend\n")
    L.append("![ns per ID](%s)\n" % ctx["png"]["calls"])
    rows = []
    for r in ctx["calls"]:
        rows.append((r["label"], "%.1f" % r["ns"], "%.1f" % r["over_loop"], fmt_x(r["x_floor"]),
                     "%.1f–%.1f" % (r["min"], r["max"]), "`%s`" % r["query"]))
    L.append(md_table(["generator", "ns/ID", "over loop (ns)", "x clock_timestamp()", "spread (ns)",
                       "query"], rows, ["---", "---:", "---:", "---:", "---:", "---"]))

    # 2
    L.append("\n## 2. Many clients\n")
    L.append("![IDs per second vs clients](%s)\n" % ctx["png"]["clients"])
    clients = ctx["clients"]
    for per_tx in (1, 1000):
        L.append("\n%s per transaction (`%s`), IDs/s:\n" % (
            "1 ID" if per_tx == 1 else "1,000 IDs",
            next(r for r in ctx["client_res"] if r["per_tx"] == per_tx)["script"].replace(
                "snowseq_next()", "f()")))
        rows = []
        for r in ctx["client_res"]:
            if r["per_tx"] != per_tx:
                continue
            lo, hi = min(r["samples"][clients[0]]), max(r["samples"][clients[0]])
            rows.append([r["label"]] + [fmt_int(r["ids_per_s"][c]) for c in clients] +
                        [fmt_x(r["scaling"][c]) for c in clients[1:]] +
                        ["%s–%s" % (fmt_int(lo), fmt_int(hi))])
        L.append(md_table(["generator"] + ["%d client%s" % (c, "" if c == 1 else "s") for c in clients] +
                          ["%d vs %d" % (c, clients[0]) for c in clients[1:]] +
                          ["spread at %d" % clients[0]], rows,
                          ["---"] + ["---:"] * (2 * len(clients))))
    L.append("\npgbench runs on the same %d cores as the server (`-j` = min(clients, cores)), so "
             "beyond %d clients the client and server compete for CPU and IDs/s cannot grow. With one "
             "client every transaction waits for a round trip between pgbench and its backend; that "
             "round trip costs much more when the two run on different cores than on the same one "
             "(on virtual machines especially), so the 1-client figures, and the 1-ID-per-transaction ones most of all, "
             "can jump between two levels from one repetition to the next (*spread*) and scaling "
             "ratios above the number of cores appear. The 1,000-IDs-per-transaction script is the one "
             "that measures the generators." % (m["nproc"], m["nproc"]))
    L.append("\n`snowseq_next()` and `snowseq_uuid()` take values of the cluster's logical clock, which "
             "holds 2^seq_bits IDs per time unit: 4,096,000 IDs/s with the default layout (41/10/12, 1 ms) "
             "in the long run. Beyond that rate the clock borrows time ahead of the wall clock, up to "
             "`snowseq.max_lead_ms` (10 s by default, that is 41 million IDs), and then callers wait for "
             "the wall clock (`lead_waits` in `snowseq_status`). So a run of T seconds can reach at most "
             "4.1M x (T + 10) / T IDs/s, and only if it starts with the clock caught up: the harness waits "
             "for that before each of their runs%s. IDs/s near 4.1M, or near that ceiling, are the layout's "
             "limit, not the generator's: a node that needs more uses more sequence bits "
             "(`snowseq.seq_bits`)." % ("" if ctx.get("clock_caught_up") else
                                        " (this run's harness did not yet: their figures depend on "
                                        "whether the run before them had used up the lead)"))

    # 3
    L.append("\n## 3. Inserts\n")
    L.append("![rows per second](%s)\n" % ctx["png"]["inserts"])
    for block in ctx["inserts"]:
        L.append("\n%s rows:\n" % fmt_int(block["rows"]))
        rows = []
        for r in block["variants"]:
            rows.append((r["label"], fmt_int(r["rows_per_s"]), fmt_x(r["x_bigserial"]), fmt_x(r["x_uuid"]),
                         "%.2f" % r["seconds"], fmt_mb(r["table_bytes"]), fmt_mb(r["index_bytes"]),
                         fmt_x(r["index_x_bigserial"]), fmt_mb(r["wal_bytes"]), "%.0f" % r["wal_per_row"]))
        L.append(md_table(["primary key", "rows/s", "x bigserial", "x gen_random_uuid", "s", "table MB",
                           "PK index MB", "index x bigserial", "WAL MB", "WAL bytes/row"], rows,
                          ["---"] + ["---:"] * 9))
    L.append("\nGene IDs put a 15-bit hash of the buyer on top, so consecutive rows land in up to 32,768 "
             "separate key ranges of the index instead of its right edge: that is the price of IDs that "
             "say which shard holds their row, paid in index page splits (leaf pages end about 2/3 "
             "full instead of 90 %), like any key that is not time-ordered. With that many insertion "
             "points the leaf pages being filled (up to 32,768 x 8 kB = 256 MB) no longer fit in the "
             "default 128 MB of shared_buffers, which is what slows the larger insert down.")

    # 4
    L.append("\n## 4. WAL per 1M IDs, no insert\n")
    rows = [(r["label"], fmt_int(r["bytes_per_1m"]), "%.4fx" % r["x_nextval"], "%g" % r["advances"])
            for r in ctx["wal"]]
    L.append(md_table(["generator", "WAL bytes per 1M IDs", "x nextval()", "reservation advances"],
                      rows, ["---", "---:", "---:", "---:"]))
    L.append("\n`nextval()` logs its sequence every 32 values. snowseq writes one small WAL record per "
             "reservation advance (blocks sized to about 5 s of the observed rate), whatever the number "
             "of IDs; a figure of a few hundred bytes here may also include records other processes "
             "wrote in the same window.")

    # 5
    sh = ctx["shmem"]
    L.append("\n## 5. Shared memory\n")
    L.append(md_table(["reading", "snowseq_status.shmem_bytes", "pg_shmem_allocations 'snowseq'",
                       "ids_issued"], [
        ("after CREATE EXTENSION", fmt_int(sh["before"]["shmem_bytes"]), fmt_int(sh["before"]["allocation"]),
         fmt_int(sh["before"]["ids_issued"])),
        ("after every benchmark", fmt_int(sh["after"]["shmem_bytes"]), fmt_int(sh["after"]["allocation"]),
         fmt_int(sh["after"]["ids_issued"])),
    ], ["---", "---:", "---:", "---:"]))
    L.append("\nsnowseq's shared memory is sized once at server start (one cache line per process "
             "slot plus the two counters) and does not depend on the number of IDs.")
    # sections other benchmark commands own (bash bench/move.sh) are kept
    kept = []
    if os.path.isfile(path):
        with open(path) as f:
            kept = re.findall(r"<!-- begin: .*? -->.*?<!-- end: .*? -->\n", f.read(), re.S)
    with open(path, "w") as f:
        f.write("\n".join(L) + "\n")
        for k in kept:
            f.write("\n" + k)


# --------------------------------------------------------------------------
# plots

def gnuplot_terminal():
    p = subprocess.run(["gnuplot", "-e", "set terminal pngcairo"], capture_output=True, text=True)
    return "pngcairo" if p.returncode == 0 and not p.stderr.strip() else "png"


def plot(script, data, out, term, extra=""):
    run(["gnuplot", "-e", "datafile='%s'; outfile='%s'; term='%s'; %s" % (data, out, term, extra),
         os.path.join(BENCH_DIR, script)])
    if not os.path.isfile(out) or os.path.getsize(out) == 0:
        raise HarnessError("gnuplot did not write " + out)


def write_plots(ctx, outdir, datadir):
    term = gnuplot_terminal()
    # call cost: one bar per generator
    d = os.path.join(datadir, "call_cost.dat")
    with open(d, "w") as f:
        for r in ctx["calls"]:
            colour = (0x4c72b0 if r["key"].startswith(("snowseq", "gene")) else
                      0x999999 if r["key"] in ("loop", "clock_timestamp", "random") else 0xdd8452)
            f.write("%s\t%.2f\t%d\n" % (r["label"], r["ns"], colour))
    plot("call_cost.gp", d, os.path.join(outdir, ctx["png"]["calls"]), term,
         "nrows=%d; floor=%f; subtitle='%s'" % (
             len(ctx["calls"]), next(r["ns"] for r in ctx["calls"] if r["key"] == "clock_timestamp"),
             ctx["subtitle"]))
    # clients: IDs/s vs clients, one line per generator, one panel per script
    files = []
    for per_tx in (1, 1000):
        d = os.path.join(datadir, "clients_%d.dat" % per_tx)
        rs = [r for r in ctx["client_res"] if r["per_tx"] == per_tx]
        with open(d, "w") as f:
            f.write("clients\t" + "\t".join(r["label"] for r in rs) + "\n")
            for c in ctx["clients"]:
                f.write("%d\t%s\n" % (c, "\t".join("%.1f" % r["ids_per_s"][c] for r in rs)))
        files.append(d)
    ncols = [len([r for r in ctx["client_res"] if r["per_tx"] == p]) for p in (1, 1000)]
    plot("clients.gp", files[0], os.path.join(outdir, ctx["png"]["clients"]), term,
         "datafile2='%s'; ncols=%d; ncols2=%d; maxclients=%d; subtitle='%s'" % (
             files[1], ncols[0], ncols[1], max(ctx["clients"]), ctx["subtitle"]))
    # inserts: rows/s per primary key, one cluster per size
    d = os.path.join(datadir, "inserts.dat")
    with open(d, "w") as f:
        f.write("label\t" + "\t".join("%s rows" % fmt_int(b["rows"]) for b in ctx["inserts"]) + "\n")
        for i, v in enumerate(ctx["inserts"][0]["variants"]):
            f.write("%s\t%s\n" % (v["label"], "\t".join("%.1f" % b["variants"][i]["rows_per_s"]
                                                         for b in ctx["inserts"])))
    plot("inserts.gp", d, os.path.join(outdir, ctx["png"]["inserts"]), term,
         "nsizes=%d; subtitle='%s'" % (len(ctx["inserts"]), ctx["subtitle"]))


# --------------------------------------------------------------------------
# console summary and sanity checks

def print_calls(ctx):
    log("\n-- 1. call cost, one backend")
    log("%-44s %10s %10s %10s" % ("generator", "ns/ID", "over loop", "x floor"))
    for r in ctx["calls"]:
        log("%-44s %10.1f %10.1f %10s" % (r["label"], r["ns"], r["over_loop"], fmt_x(r["x_floor"])))


def print_summary(ctx):
    log("\n== results (medians; ratios from this run)")
    print_calls(ctx)
    log("\n-- 2. many clients, IDs/s")
    cl = ctx["clients"]
    log("%-32s %6s " % ("generator", "IDs/tx") + " ".join("%12s" % ("%dc" % c) for c in cl) +
        " " + " ".join("%8s" % ("%dc/%dc" % (c, cl[0])) for c in cl[1:]))
    for r in ctx["client_res"]:
        log("%-32s %6d " % (r["label"], r["per_tx"]) + " ".join("%12s" % fmt_int(r["ids_per_s"][c]) for c in cl)
            + " " + " ".join("%8s" % fmt_x(r["scaling"][c]) for c in cl[1:]))
    for b in ctx["inserts"]:
        log("\n-- 3. inserts, %s rows" % fmt_int(b["rows"]))
        log("%-38s %12s %8s %8s %9s %9s %9s %9s" % ("primary key", "rows/s", "x bigser", "x uuid",
                                                    "table MB", "index MB", "idx x big", "WAL MB"))
        for r in b["variants"]:
            log("%-38s %12s %8s %8s %9s %9s %9s %9s" % (
                r["label"], fmt_int(r["rows_per_s"]), fmt_x(r["x_bigserial"]), fmt_x(r["x_uuid"]),
                fmt_mb(r["table_bytes"]), fmt_mb(r["index_bytes"]), fmt_x(r["index_x_bigserial"]),
                fmt_mb(r["wal_bytes"])))
    log("\n-- 4. WAL per 1M IDs, no insert")
    for r in ctx["wal"]:
        log("%-32s %12s bytes %10s  (%g reservation advances)" % (
            r["label"], fmt_int(r["bytes_per_1m"]), "%.4fx" % r["x_nextval"], r["advances"]))
    sh = ctx["shmem"]
    log("\n-- 5. shared memory: %d bytes before, %d bytes after; %s IDs issued in between" % (
        sh["before"]["shmem_bytes"], sh["after"]["shmem_bytes"],
        fmt_int(sh["after"]["ids_issued"] - sh["before"]["ids_issued"])))
    obs = ctx.get("observations")
    if obs:
        log("\n-- 0. correctness observations")
        log(" | ".join(["generator"] + OBS_HEADERS))
        for r in obs["rows"]:
            log(" | ".join([r["label"]] + [r[k] for k in OBS_COLUMNS]))
        for n in obs["notes"]:
            log(n)
    log("\n-- targets")
    for t, m_, ok in ctx["targets"]:
        log("%-4s %s: %s" % (verdict(ok), t, m_))


def ratios(ctx):
    """Every ratio the report shows, for the smoke check."""
    out = []
    for r in ctx["calls"]:
        out += [r["x_floor"], r["ns"]]
    for r in ctx["client_res"]:
        out += list(r["scaling"].values()) + list(r["ids_per_s"].values())
    for b in ctx["inserts"]:
        for r in b["variants"]:
            out += [r["x_bigserial"], r["x_uuid"], r["index_x_bigserial"], r["rows_per_s"]]
    for r in ctx["wal"]:
        out += [r["x_nextval"]]
    return out


# --------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=["full", "smoke"], default="full")
    ap.add_argument("--out", required=True, help="directory of benchmarks.md and the PNGs")
    ap.add_argument("--data", required=True, help="directory of raw results and plot data")
    ap.add_argument("--tmp", help="scratch directory")
    ap.add_argument("--only", choices=["calls"],
                    help="measure section 1 (call cost) only and print it; no report, no plots")
    ap.add_argument("--from-json", metavar="RESULTS",
                    help="measure nothing: redraw the report and plots from a results.json")
    args = ap.parse_args()
    if args.from_json:
        return rerender(args)
    if not args.tmp:
        ap.error("--tmp is required")

    cfg = dict(FULL if args.mode == "full" else SMOKE)
    for k, var in ENV.items():
        if os.environ.get(var):
            cfg[k] = type(cfg[k])(os.environ[var])
    for k in ("reps", "client_reps", "insert_reps"):
        if cfg[k] < 1:
            raise SystemExit("%s must be at least 1" % ENV[k])
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.data, exist_ok=True)

    start = time.time()
    ctx = {"mode": args.mode, "cfg": cfg, "machine": machine_info(),
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "png": {"calls": "bench-call-cost.png", "clients": "bench-clients.png",
                   "inserts": "bench-inserts.png"}}
    psql("\\i %s\n" % os.path.join(BENCH_DIR, "setup.sql"))
    ctx["pg_version"] = query_value("SELECT version()")
    ctx["settings"] = [tuple(r) for r in query_rows(
        "SELECT name, current_setting(name), source FROM pg_settings WHERE name IN (%s) ORDER BY name"
        % ", ".join("'%s'" % s for s in SETTINGS))]
    m = ctx["machine"]
    short_pg = re.sub(r" on .*", "", ctx["pg_version"])
    ctx["subtitle"] = "%s, %d cores; %s; %s" % (m["cpu"], m["nproc"], short_pg, ctx["date"][:10])
    log("machine: %s, %d cores, %.1f GiB; %s" % (m["cpu"], m["nproc"], m["mem_gib"], ctx["pg_version"]))
    log("settings:")
    for name, value, source in ctx["settings"]:
        log("  %-28s %-24s (%s)" % (name, value, source))
    log("sizes: " + ", ".join("%s=%s" % (ENV[k], cfg[k]) for k in ENV))

    if args.only == "calls":
        add_optional_generators()
        ctx["calls"] = bench_calls(cfg)
        print_calls(ctx)
        return 0 if all(finite(r["ns"]) and r["ns"] > 0 for r in ctx["calls"]) else 1

    ctx["load"] = []

    def load(section):
        """The machine's load average when a section starts (the run shares it)."""
        with open("/proc/loadavg") as f:
            ctx["load"].append((section, " ".join(f.read().split()[:3])))

    load("start")
    shmem = {"before": shmem_reading()}
    have, ctx["skipped"] = add_optional_generators()
    ctx["optional"] = [{"key": k, "label": l, "expr": e,
                        "version": (query_value("SELECT extversion FROM pg_extension WHERE extname = '%s'" % n)
                                    if kind == "extension" else "")}
                       for k, l, e, _, (kind, n) in OPTIONAL_GENERATORS if k in have]
    for o in ctx["optional"]:
        log("compared: %s%s" % (o["label"], " (extension version %s)" % o["version"] if o["version"] else ""))
    for label, why in ctx["skipped"]:
        log("skipped: %s: %s" % (label, why))
    peers = [n for k, _, _, _, (kind, n) in OPTIONAL_GENERATORS if k in have and kind == "extension"]
    ctx["observations"] = observe(args.mode, args.tmp, peers)
    load("1. call cost")
    ctx["calls"] = bench_calls(cfg)
    load("2. clients")
    ctx["clients"], ctx["client_res"] = bench_clients(cfg, args.tmp)
    ctx["clock_caught_up"] = True
    load("3. inserts")
    ctx["inserts"] = bench_inserts(cfg)
    load("4. WAL")
    ctx["wal"] = bench_wal(cfg)
    bench_shmem_burst(cfg)
    load("end")
    shmem["after"] = shmem_reading()
    ctx["shmem"] = shmem
    ctx["targets"] = targets(ctx["calls"], ctx["clients"], ctx["client_res"], ctx["inserts"],
                             ctx["wal"], shmem, ctx["skipped"])
    ctx["elapsed"] = time.time() - start

    with open(os.path.join(args.data, "results.json"), "w") as f:
        json.dump(ctx, f, indent=1, default=str)
    return finish(ctx, args, start)


def rerender(args):
    """Report and plots again from saved results (after a change of the report)."""
    with open(args.from_json) as f:
        ctx = json.load(f)
    for r in ctx["client_res"]:
        for k in ("ids_per_s", "scaling", "samples"):
            r[k] = {int(c): v for c, v in r[k].items()}
    ctx["settings"] = [tuple(x) for x in ctx["settings"]]
    ctx["targets"] = targets(ctx["calls"], ctx["clients"], ctx["client_res"], ctx["inserts"],
                             ctx["wal"], ctx["shmem"], ctx.get("skipped"))
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.data, exist_ok=True)
    return finish(ctx, args, time.time())


def finish(ctx, args, start):
    write_plots(ctx, args.out, args.data)
    write_report(os.path.join(args.out, "benchmarks.md"), ctx)
    print_summary(ctx)

    # the harness itself must have worked, whatever the numbers say
    bad = [x for x in ratios(ctx) if not finite(x) or x < 0]
    missing = [p for p in ["benchmarks.md"] + list(ctx["png"].values())
               if not os.path.isfile(os.path.join(args.out, p))
               or os.path.getsize(os.path.join(args.out, p)) == 0]
    if missing or bad:
        log("harness broken: missing files %s, ratios that are not numbers %s" % (missing, bad))
        return 1
    log("\nwrote %s (%.1f min)" % (", ".join(os.path.join(args.out, p) for p in
                                            ["benchmarks.md"] + list(ctx["png"].values())),
                                  (time.time() - start) / 60.0))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except HarnessError as e:
        log("harness error: %s" % e)
        sys.exit(1)
