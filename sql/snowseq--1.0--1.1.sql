/* snowseq--1.0--1.1.sql: upgrade of the snowseq extension from 1.0 to 1.1 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION snowseq UPDATE TO '1.1'" to load this file. \quit

------------------------------------------------------------------------
-- Hardening
------------------------------------------------------------------------

-- Batches are a grant: one call takes up to a second of the clock's
-- capacity at once, which other callers would wait for.
COMMENT ON FUNCTION @extschema@.snowseq_next_n(integer) IS
	'n consecutive snowflake IDs taken in one atomic step (bulk loads; needs EXECUTE granted)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_next_n(integer) FROM PUBLIC;

-- snowseq_status() gains the lead and the lifetime: a new C symbol, so the
-- 1.0 definition never meets the wider row
DROP VIEW @extschema@.snowseq_status;
DROP FUNCTION @extschema@.snowseq_status();
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
COMMENT ON FUNCTION @extschema@.snowseq_status() IS
	'node, layout, logical clock, drift, lead, lifetime and counters of the snowseq generator';
CREATE VIEW snowseq_status AS SELECT * FROM @extschema@.snowseq_status();
COMMENT ON VIEW @extschema@.snowseq_status IS 'the snowseq generator at a glance';

COMMENT ON FUNCTION @extschema@.snowseq_reset_state(bigint) IS
	'adopt the configured layout, epoch and node id after a deliberate change, above every ID issued before (needs EXECUTE granted)';

-- <@ no longer computes upper - 1 for a range that ends before the
-- smallest bigint (it raised "bigint out of range" where the built-in
-- operator returns false)
CREATE OR REPLACE FUNCTION snowseq_in_range(id bigint, r int8range) RETURNS boolean
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

-- routing is for everyone, changing the map is not
GRANT SELECT ON @extschema@.snowseq_shard_map TO PUBLIC;

-- every change of the map, however applied, invalidates the backends'
-- copies: a row trigger too (logical replication apply fires row triggers
-- only), both ENABLE ALWAYS
CREATE TRIGGER snowseq_shard_map_row_changed
	AFTER INSERT OR UPDATE OR DELETE ON @extschema@.snowseq_shard_map
	FOR EACH ROW EXECUTE FUNCTION @extschema@.snowseq_shard_map_changed();
ALTER TABLE @extschema@.snowseq_shard_map ENABLE ALWAYS TRIGGER snowseq_shard_map_changed;
ALTER TABLE @extschema@.snowseq_shard_map ENABLE ALWAYS TRIGGER snowseq_shard_map_row_changed;

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
