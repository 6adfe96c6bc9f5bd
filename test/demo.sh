#!/bin/bash
# Install what is missing, build and install snowseq, start a throwaway
# cluster with snowseq preloaded, run a short demo, and remove the cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
. test/lib.sh

ensure_packages
[ -n "${SKIP_BUILD:-}" ] || build_and_install

base=$(mktemp -d /tmp/snowseq-demo.XXXXXX)
[ "$(id -u)" = 0 ] && chown postgres "$base"
port=${PORT:-54329}
stop() { as_server_user pg_ctl -D "$base/data" -m fast -w stop >/dev/null 2>&1 || true; rm -rf "$base"; }
trap stop EXIT

as_server_user initdb -D "$base/data" -A trust -U postgres >/dev/null
cat >> "$base/data/postgresql.conf" <<CONF
shared_preload_libraries = 'snowseq'
snowseq.node_id = 1
port = $port
unix_socket_directories = '$base'
listen_addresses = ''
CONF
as_server_user pg_ctl -D "$base/data" -l "$base/server.log" -w start >/dev/null

as_server_user psql -X -h "$base" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 -e <<'SQL'
CREATE EXTENSION snowseq;
CREATE TABLE orders (
    id       bigint PRIMARY KEY DEFAULT snowseq_next(),
    item     text NOT NULL,
    amount   numeric NOT NULL
);
INSERT INTO orders (item, amount) VALUES ('tea', 3.50), ('cake', 4.20), ('coffee', 2.80);
SELECT id, item, (snowseq_parse(id)).* FROM orders ORDER BY id;
-- the last day's orders, by primary key, without a created_at column
EXPLAIN (COSTS OFF) SELECT * FROM orders WHERE id >= snowseq_min_id(now() - interval '1 day');
-- a sharding-gene ID: the top 15 bits route the row
SELECT snowseq_gene('buyer-42') AS gene, snowseq_gene_next('buyer-42') AS order_id,
       shard_of(snowseq_gene_next('buyer-42')) AS shard_of;
\x on
SELECT * FROM snowseq_status;
SQL
echo "demo done (cluster removed)"
