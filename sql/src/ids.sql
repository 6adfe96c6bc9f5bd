------------------------------------------------------------------------
-- Snowflake IDs: [0][time][node][seq]
------------------------------------------------------------------------

-- VOLATILE: every call returns a new ID.  PARALLEL SAFE: the state is one
-- counter in shared memory, shared by parallel workers and the leader alike.
CREATE FUNCTION @extschema@.snowseq_next() RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_next'
	LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_next() IS
	'next snowflake ID of this node: unique, greater than every ID issued before';

-- Not for PUBLIC: one call takes up to a second of the clock's capacity at
-- once (2^(seq_bits+10) IDs), which other callers would wait for.  Grant it
-- to the roles that load in bulk.
CREATE FUNCTION @extschema@.snowseq_next_n(n integer) RETURNS SETOF bigint
	AS 'MODULE_PATHNAME', 'snowseq_next_n'
	LANGUAGE C VOLATILE STRICT PARALLEL SAFE ROWS 1000;
COMMENT ON FUNCTION @extschema@.snowseq_next_n(integer) IS
	'n consecutive snowflake IDs taken in one atomic step (bulk loads; needs EXECUTE granted)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_next_n(integer) FROM PUBLIC;

-- STABLE, not IMMUTABLE: the layout and epoch are settings read at server
-- start, so the same ID may parse differently after a reconfiguration.
CREATE FUNCTION @extschema@.snowseq_parse(id bigint, OUT ts timestamptz, OUT node integer, OUT seq integer)
	AS 'MODULE_PATHNAME', 'snowseq_parse'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_parse(bigint) IS
	'time, node and sequence fields of a snowflake ID';

CREATE FUNCTION @extschema@.snowseq_time(id bigint) RETURNS timestamptz
	AS 'MODULE_PATHNAME', 'snowseq_time'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_time(bigint) IS 'instant a snowflake ID was issued at';

CREATE FUNCTION @extschema@.snowseq_node(id bigint) RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_node'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_node(bigint) IS 'node that issued a snowflake ID';

CREATE FUNCTION @extschema@.snowseq_min_id(ts timestamptz) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_min_id'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_min_id(timestamptz) IS
	'smallest snowflake ID issued at or after ts: WHERE id >= snowseq_min_id(...) uses the primary key';

CREATE FUNCTION @extschema@.snowseq_max_id(ts timestamptz) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_max_id'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_max_id(timestamptz) IS
	'largest snowflake ID issued in the time unit of ts or before';

------------------------------------------------------------------------
-- Status and administration
------------------------------------------------------------------------

CREATE FUNCTION @extschema@.snowseq_status(
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

CREATE VIEW @extschema@.snowseq_status AS SELECT * FROM @extschema@.snowseq_status();
COMMENT ON VIEW @extschema@.snowseq_status IS 'the snowseq generator at a glance';

--@block reservations
CREATE FUNCTION @extschema@.snowseq_reservations(
	OUT kind text, OUT counter bigint, OUT bound bigint, OUT low_water bigint,
	OUT block bigint, OUT advances bigint, OUT waits bigint,
	OUT last_advance timestamptz, OUT database name)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'snowseq_reservations_1_3'
	LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_reservations() IS
	'durable reservations: the fixed ones, and the named counters the caller may see (pg_read_all_stats: every database''s; else its own database''s that it may use), with their database';
CREATE VIEW @extschema@.snowseq_reservations AS SELECT * FROM @extschema@.snowseq_reservations();
COMMENT ON VIEW @extschema@.snowseq_reservations IS 'snowseq durable reservations';
--@end

-- PARALLEL UNSAFE: rewrites the state file.
CREATE FUNCTION @extschema@.snowseq_reset_state(segment_floor bigint DEFAULT NULL) RETURNS text
	AS 'MODULE_PATHNAME', 'snowseq_reset_state'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_reset_state(bigint) IS
	'adopt the configured layout, epoch and node id after a deliberate change, above every ID issued before (needs EXECUTE granted)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_reset_state(bigint) FROM PUBLIC;

-- Converting tables, scattered writes, UUIDv7
------------------------------------------------------------------------

-- Changes a table's default, drops sequences: not for PUBLIC.  A caller
-- granted EXECUTE must own the table (checked before any lock is taken).
-- PARALLEL UNSAFE: DDL.
CREATE FUNCTION @extschema@.snowseq_convert(tab regclass, col name, keep_sequence boolean DEFAULT false)
	RETURNS text
	AS 'MODULE_PATHNAME', 'snowseq_convert'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_convert(regclass, name, boolean) IS
	'switch a serial, identity or bigint key column (and its partitions) to DEFAULT snowseq_next(), above every value it holds (needs EXECUTE granted)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_convert(regclass, name, boolean) FROM PUBLIC;

-- IMMUTABLE: a fixed bijection of [0, 2^63), whatever the configuration,
-- so it can be used in defaults, generated columns and partition keys.
CREATE FUNCTION @extschema@.snowseq_scatter(id bigint, bits integer) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_scatter'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_scatter(bigint, integer) IS
	'the low bits of an ID, XORed with a hash of the rest, moved to the top: spreads new rows over range partitions';

CREATE FUNCTION @extschema@.snowseq_unscatter(value bigint, bits integer) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_unscatter'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_unscatter(bigint, integer) IS
	'the ID a value of snowseq_scatter(id, bits) was made from';

-- VOLATILE PARALLEL SAFE, as snowseq_next(): one value of the same
-- cluster-wide clock per call.
CREATE FUNCTION @extschema@.snowseq_uuid() RETURNS uuid
	AS 'MODULE_PATHNAME', 'snowseq_uuid'
	LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_uuid() IS
	'RFC 9562 version 7 UUID from the snowseq clock: greater than every UUID and ID issued before, carries the node id';

-- IMMUTABLE: reads the 48-bit Unix time in ms of any version 7 UUID.
CREATE FUNCTION @extschema@.snowseq_uuid_time(id uuid) RETURNS timestamptz
	AS 'MODULE_PATHNAME', 'snowseq_uuid_time'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_uuid_time(uuid) IS
	'instant (unix_ts_ms) of a version 7 UUID';

-- ---- features: IDs for a past instant, 128-bit gene IDs (1.2) ----

-- VOLATILE PARALLEL SAFE, as snowseq_next(): one value of the backfill
-- clock per call.  Not STRICT: a NULL instant is an ERROR, not a NULL ID.
-- EXECUTE is a GRANT: a caller backfilling a late instant holds every
-- other backfill of the server to later instants.
CREATE FUNCTION @extschema@.snowseq_id_at(ts timestamptz) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_id_at'
	LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_id_at(timestamptz) IS
	'new snowflake ID whose time field is that of the past instant ts, with snowseq.backfill_node_id: never equal to an ID of the clock or another (needs EXECUTE granted)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_id_at(timestamptz) FROM PUBLIC;

CREATE FUNCTION @extschema@.snowseq_uuid_at(ts timestamptz) RETURNS uuid
	AS 'MODULE_PATHNAME', 'snowseq_uuid_at'
	LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_uuid_at(timestamptz) IS
	'new version 7 UUID whose time is that of the past instant ts, with snowseq.backfill_node_id: never equal to a UUID of snowseq_uuid() or another (needs EXECUTE granted)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_uuid_at(timestamptz) FROM PUBLIC;

-- STABLE: depends on the layout settings, as snowseq_min_id().
CREATE FUNCTION @extschema@.snowseq_uuid_min(ts timestamptz) RETURNS uuid
	AS 'MODULE_PATHNAME', 'snowseq_uuid_min'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_uuid_min(timestamptz) IS
	'smallest UUID of the time unit of ts: WHERE id >= snowseq_uuid_min(...) uses the primary key';

CREATE FUNCTION @extschema@.snowseq_uuid_max(ts timestamptz) RETURNS uuid
	AS 'MODULE_PATHNAME', 'snowseq_uuid_max'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_uuid_max(timestamptz) IS
	'largest UUID of the time unit of ts or before';
