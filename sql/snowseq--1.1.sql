/* snowseq--1.1.sql: install script of the snowseq extension */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION snowseq" to load this file. \quit

------------------------------------------------------------------------
-- Snowflake IDs: [0][time][node][seq]
------------------------------------------------------------------------

-- VOLATILE: every call returns a new ID.  PARALLEL SAFE: the state is one
-- counter in shared memory, shared by parallel workers and the leader alike.
CREATE FUNCTION snowseq_next() RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_next'
	LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION snowseq_next() IS
	'next snowflake ID of this node: unique, greater than every ID issued before';

-- Not for PUBLIC: one call takes up to a second of the clock's capacity at
-- once (2^(seq_bits+10) IDs), which other callers would wait for.  Grant it
-- to the roles that load in bulk.
CREATE FUNCTION snowseq_next_n(n integer) RETURNS SETOF bigint
	AS 'MODULE_PATHNAME', 'snowseq_next_n'
	LANGUAGE C VOLATILE STRICT PARALLEL SAFE ROWS 1000;
COMMENT ON FUNCTION snowseq_next_n(integer) IS
	'n consecutive snowflake IDs taken in one atomic step (bulk loads; needs EXECUTE granted)';
REVOKE ALL ON FUNCTION snowseq_next_n(integer) FROM PUBLIC;

-- STABLE, not IMMUTABLE: the layout and epoch are settings read at server
-- start, so the same ID may parse differently after a reconfiguration.
CREATE FUNCTION snowseq_parse(id bigint, OUT ts timestamptz, OUT node integer, OUT seq integer)
	AS 'MODULE_PATHNAME', 'snowseq_parse'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION snowseq_parse(bigint) IS
	'time, node and sequence fields of a snowflake ID';

CREATE FUNCTION snowseq_time(id bigint) RETURNS timestamptz
	AS 'MODULE_PATHNAME', 'snowseq_time'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION snowseq_time(bigint) IS 'instant a snowflake ID was issued at';

CREATE FUNCTION snowseq_node(id bigint) RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_node'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION snowseq_node(bigint) IS 'node that issued a snowflake ID';

CREATE FUNCTION snowseq_min_id(ts timestamptz) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_min_id'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION snowseq_min_id(timestamptz) IS
	'smallest snowflake ID issued at or after ts: WHERE id >= snowseq_min_id(...) uses the primary key';

CREATE FUNCTION snowseq_max_id(ts timestamptz) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_max_id'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION snowseq_max_id(timestamptz) IS
	'largest snowflake ID issued in the time unit of ts or before';

------------------------------------------------------------------------
-- Status and administration
------------------------------------------------------------------------

CREATE FUNCTION snowseq_status(
	OUT node_id integer, OUT time_bits integer, OUT node_bits integer,
	OUT seq_bits integer, OUT time_unit_ms integer, OUT epoch timestamptz,
	OUT last_time timestamptz, OUT wall_clock timestamptz, OUT drift interval,
	OUT ids_issued bigint, OUT clock_backward_events bigint,
	OUT overflow_borrows bigint, OUT clock_reserved_until timestamptz,
	OUT reservation_advances bigint, OUT reservation_waits bigint,
	OUT state text, OUT worker_running boolean, OUT shmem_bytes bigint,
	OUT max_lead interval, OUT lead_waits bigint,
	OUT time_field_ends timestamptz, OUT lifetime_left interval)
	AS 'MODULE_PATHNAME', 'snowseq_status_1_1'
	LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION snowseq_status() IS
	'node, layout, logical clock, drift, lead, lifetime and counters of the snowseq generator';

CREATE VIEW snowseq_status AS SELECT * FROM @extschema@.snowseq_status();
COMMENT ON VIEW snowseq_status IS 'the snowseq generator at a glance';

CREATE FUNCTION snowseq_reservations(
	OUT kind text, OUT counter bigint, OUT bound bigint, OUT low_water bigint,
	OUT block bigint, OUT advances bigint, OUT waits bigint,
	OUT last_advance timestamptz)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'snowseq_reservations'
	LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION snowseq_reservations() IS
	'each durable reservation: counter, bound, block size, advances and waits';

CREATE VIEW snowseq_reservations AS SELECT * FROM @extschema@.snowseq_reservations();
COMMENT ON VIEW snowseq_reservations IS 'snowseq durable reservations';

-- PARALLEL UNSAFE: rewrites the state file.
CREATE FUNCTION snowseq_reset_state(segment_floor bigint DEFAULT NULL) RETURNS text
	AS 'MODULE_PATHNAME', 'snowseq_reset_state'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION snowseq_reset_state(bigint) IS
	'adopt the configured layout, epoch and node id after a deliberate change, above every ID issued before (needs EXECUTE granted)';
REVOKE ALL ON FUNCTION snowseq_reset_state(bigint) FROM PUBLIC;

------------------------------------------------------------------------
-- Sharding-gene IDs: [0][gene: 15][segment: 48]
------------------------------------------------------------------------

-- IMMUTABLE: a fixed hash of the key bytes.  Not STRICT: a NULL key is an
-- ERROR, never a NULL gene.
CREATE FUNCTION snowseq_gene(key text) RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_gene_text'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION snowseq_gene(key bigint) RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_gene_int8'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION snowseq_gene(key bytea) RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_gene_bytea'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION snowseq_gene(text) IS 'gene (0..32767) of a text key, hashed as UTF-8';
COMMENT ON FUNCTION snowseq_gene(bigint) IS 'gene (0..32767) of a bigint key, hashed as 8 bytes little-endian';
COMMENT ON FUNCTION snowseq_gene(bytea) IS 'gene (0..32767) of a bytea key';

CREATE FUNCTION snowseq_gene_next(key text) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_gene_next_text'
	LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE FUNCTION snowseq_gene_next(key bigint) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_gene_next_int8'
	LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE FUNCTION snowseq_gene_next(key bytea) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_gene_next_bytea'
	LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION snowseq_gene_next(text) IS 'next gene ID of a text key: gene << 48 | segment';
COMMENT ON FUNCTION snowseq_gene_next(bigint) IS 'next gene ID of a bigint key: gene << 48 | segment';
COMMENT ON FUNCTION snowseq_gene_next(bytea) IS 'next gene ID of a bytea key: gene << 48 | segment';

CREATE FUNCTION snowseq_fill_gene_id() RETURNS trigger
	AS 'MODULE_PATHNAME', 'snowseq_fill_gene_id'
	LANGUAGE C;
COMMENT ON FUNCTION snowseq_fill_gene_id() IS
	'BEFORE INSERT trigger: snowseq_fill_gene_id(''id_column'', ''key_column'') fills a NULL ID from the key';

------------------------------------------------------------------------
-- Routing
------------------------------------------------------------------------

-- IMMUTABLE: id >> 48 whatever the configuration, so it can be used in
-- generated columns, index expressions and partition keys.
CREATE FUNCTION shard_of(id bigint) RETURNS integer
	AS 'MODULE_PATHNAME', 'shard_of'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION shard_of(bigint) IS 'gene of a gene ID (id >> 48), the key to its shard';

CREATE FUNCTION snowseq_gene_range(gene integer) RETURNS int8range
	AS 'MODULE_PATHNAME', 'snowseq_gene_range'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION snowseq_gene_range(integer) IS 'the IDs of one gene: [gene << 48, (gene + 1) << 48)';

CREATE FUNCTION snowseq_key_range(key text) RETURNS int8range
	LANGUAGE SQL IMMUTABLE PARALLEL SAFE
	RETURN @extschema@.snowseq_gene_range(@extschema@.snowseq_gene(key));
CREATE FUNCTION snowseq_key_range(key bigint) RETURNS int8range
	LANGUAGE SQL IMMUTABLE PARALLEL SAFE
	RETURN @extschema@.snowseq_gene_range(@extschema@.snowseq_gene(key));
CREATE FUNCTION snowseq_key_range(key bytea) RETURNS int8range
	LANGUAGE SQL IMMUTABLE PARALLEL SAFE
	RETURN @extschema@.snowseq_gene_range(@extschema@.snowseq_gene(key));
COMMENT ON FUNCTION snowseq_key_range(text) IS 'the IDs of the gene of a text key';
COMMENT ON FUNCTION snowseq_key_range(bigint) IS 'the IDs of the gene of a bigint key';
COMMENT ON FUNCTION snowseq_key_range(bytea) IS 'the IDs of the gene of a bytea key';

-- PostgreSQL 15 cannot prune partitions on "bigint <@ int8range".  This
-- operator means exactly what the built-in one means, but is written as an
-- inlinable SQL function of two plain comparisons, so the planner sees
-- id >= lower AND id <= upper - 1 and prunes, at plan time for a constant
-- range and at run time for a parameter.  int8range is canonical ([)); an
-- empty range, and one that ends before the smallest bigint, give bounds
-- no ID satisfies (and upper - 1 is never computed for them); an unbounded
-- side gives the extreme; a NULL range NULL.
CREATE FUNCTION snowseq_in_range(id bigint, r int8range) RETURNS boolean
	LANGUAGE SQL IMMUTABLE PARALLEL SAFE
	RETURN id OPERATOR(pg_catalog.>=) CASE
			WHEN pg_catalog.isempty(r) OR pg_catalog.upper(r) OPERATOR(pg_catalog.=) '-9223372036854775808'::bigint
				THEN '9223372036854775807'::bigint
			WHEN NOT pg_catalog.isempty(r)
				THEN COALESCE(pg_catalog.lower(r), '-9223372036854775808'::bigint) END
		AND id OPERATOR(pg_catalog.<=) CASE
			WHEN pg_catalog.isempty(r) OR pg_catalog.upper(r) OPERATOR(pg_catalog.=) '-9223372036854775808'::bigint
				THEN '-9223372036854775808'::bigint
			WHEN NOT pg_catalog.isempty(r)
				THEN COALESCE(pg_catalog.upper(r) OPERATOR(pg_catalog.-) 1, '9223372036854775807'::bigint) END;
COMMENT ON FUNCTION snowseq_in_range(bigint, int8range) IS
	'id <@ r, written so that partition pruning sees the bounds';
CREATE OPERATOR <@ (
	LEFTARG = bigint, RIGHTARG = int8range,
	FUNCTION = @extschema@.snowseq_in_range,
	COMMUTATOR = OPERATOR(@extschema@.@>)
);
-- the commutator, a real operator: "range @> id" prunes too, and no shell
-- operator is left to hide the built-in anyrange @> anyelement
CREATE FUNCTION snowseq_range_contains(r int8range, id bigint) RETURNS boolean
	LANGUAGE SQL IMMUTABLE PARALLEL SAFE
	RETURN @extschema@.snowseq_in_range(id, r);
COMMENT ON FUNCTION snowseq_range_contains(int8range, bigint) IS
	'r @> id, written so that partition pruning sees the bounds';
CREATE OPERATOR @> (
	LEFTARG = int8range, RIGHTARG = bigint,
	FUNCTION = @extschema@.snowseq_range_contains,
	COMMUTATOR = OPERATOR(@extschema@.<@)
);

-- The routing map: a gene belongs to the row with the smallest upper_gene >= it.
CREATE TABLE snowseq_shard_map (
	upper_gene integer PRIMARY KEY CHECK (upper_gene BETWEEN 0 AND 32767),
	shard text NOT NULL
);
COMMENT ON TABLE snowseq_shard_map IS
	'routing map: each shard holds the genes above the previous row''s upper_gene up to its own';
SELECT pg_catalog.pg_extension_config_dump('@extschema@.snowseq_shard_map', '');
-- routing is for everyone, changing the map is not
GRANT SELECT ON @extschema@.snowseq_shard_map TO PUBLIC;

-- Every change of the map, however applied, tells every backend to reload
-- its copy: ENABLE ALWAYS, so the triggers fire under
-- session_replication_role = replica and in a logical replication
-- subscriber too, whose apply fires row triggers only.
CREATE FUNCTION snowseq_shard_map_changed() RETURNS trigger
	AS 'MODULE_PATHNAME', 'snowseq_shard_map_changed'
	LANGUAGE C;
CREATE TRIGGER snowseq_shard_map_changed
	AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.snowseq_shard_map
	FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.snowseq_shard_map_changed();
CREATE TRIGGER snowseq_shard_map_row_changed
	AFTER INSERT OR UPDATE OR DELETE ON @extschema@.snowseq_shard_map
	FOR EACH ROW EXECUTE FUNCTION @extschema@.snowseq_shard_map_changed();
ALTER TABLE @extschema@.snowseq_shard_map ENABLE ALWAYS TRIGGER snowseq_shard_map_changed;
ALTER TABLE @extschema@.snowseq_shard_map ENABLE ALWAYS TRIGGER snowseq_shard_map_row_changed;

-- STABLE: reads the map.  PARALLEL RESTRICTED: the map is cached per
-- backend and kept current by invalidations the leader processes.
CREATE FUNCTION snowseq_route(id bigint) RETURNS text
	AS 'MODULE_PATHNAME', 'snowseq_route'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION snowseq_route(bigint) IS 'shard that holds a gene ID, from snowseq_shard_map';

CREATE FUNCTION snowseq_route_gene(gene integer) RETURNS text
	AS 'MODULE_PATHNAME', 'snowseq_route_gene'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION snowseq_route_gene(integer) IS 'shard that holds a gene, from snowseq_shard_map';

CREATE FUNCTION snowseq_route_key(key text) RETURNS text
	LANGUAGE SQL STABLE PARALLEL RESTRICTED
	RETURN @extschema@.snowseq_route_gene(@extschema@.snowseq_gene(key));
CREATE FUNCTION snowseq_route_key(key bigint) RETURNS text
	LANGUAGE SQL STABLE PARALLEL RESTRICTED
	RETURN @extschema@.snowseq_route_gene(@extschema@.snowseq_gene(key));
CREATE FUNCTION snowseq_route_key(key bytea) RETURNS text
	LANGUAGE SQL STABLE PARALLEL RESTRICTED
	RETURN @extschema@.snowseq_route_gene(@extschema@.snowseq_gene(key));
COMMENT ON FUNCTION snowseq_route_key(text) IS 'shard that holds the rows of a text key';
COMMENT ON FUNCTION snowseq_route_key(bigint) IS 'shard that holds the rows of a bigint key';
COMMENT ON FUNCTION snowseq_route_key(bytea) IS 'shard that holds the rows of a bytea key';

-- Creates tables and fills the map: not for PUBLIC.  A caller granted
-- EXECUTE must own the table and be allowed to insert into the map.
CREATE FUNCTION snowseq_create_shards(parent regclass, n integer) RETURNS void
	AS 'MODULE_PATHNAME', 'snowseq_create_shards'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION snowseq_create_shards(regclass, integer) IS
	'n range partitions of a table partitioned on its bigint ID, on gene boundaries, and the map to match';
REVOKE ALL ON FUNCTION snowseq_create_shards(regclass, integer) FROM PUBLIC;

------------------------------------------------------------------------
-- Converting tables, scattered writes, UUIDv7
------------------------------------------------------------------------

-- Changes a table's default, drops sequences: not for PUBLIC.  A caller
-- granted EXECUTE must own the table (checked before any lock is taken).
-- PARALLEL UNSAFE: DDL.
CREATE FUNCTION snowseq_convert(tab regclass, col name, keep_sequence boolean DEFAULT false)
	RETURNS text
	AS 'MODULE_PATHNAME', 'snowseq_convert'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_convert(regclass, name, boolean) IS
	'switch a serial, identity or bigint key column (and its partitions) to DEFAULT snowseq_next(), above every value it holds (needs EXECUTE granted)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_convert(regclass, name, boolean) FROM PUBLIC;

-- IMMUTABLE: a fixed bijection of [0, 2^63), whatever the configuration,
-- so it can be used in defaults, generated columns and partition keys.
CREATE FUNCTION snowseq_scatter(id bigint, bits integer) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_scatter'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_scatter(bigint, integer) IS
	'the low bits of an ID, XORed with a hash of the rest, moved to the top: spreads new rows over range partitions';

CREATE FUNCTION snowseq_unscatter(value bigint, bits integer) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_unscatter'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_unscatter(bigint, integer) IS
	'the ID a value of snowseq_scatter(id, bits) was made from';

-- VOLATILE PARALLEL SAFE, as snowseq_next(): one value of the same
-- cluster-wide clock per call.
CREATE FUNCTION snowseq_uuid() RETURNS uuid
	AS 'MODULE_PATHNAME', 'snowseq_uuid'
	LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_uuid() IS
	'RFC 9562 version 7 UUID from the snowseq clock: greater than every UUID and ID issued before, carries the node id';

-- IMMUTABLE: reads the 48-bit Unix time in ms of any version 7 UUID.
CREATE FUNCTION snowseq_uuid_time(id uuid) RETURNS timestamptz
	AS 'MODULE_PATHNAME', 'snowseq_uuid_time'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_uuid_time(uuid) IS
	'instant (unix_ts_ms) of a version 7 UUID';
