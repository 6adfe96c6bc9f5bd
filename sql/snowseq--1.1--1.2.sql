/* snowseq--1.1--1.2.sql: upgrade of the snowseq extension from 1.1 to 1.2 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION snowseq UPDATE TO '1.2'" to load this file. \quit

-- ---- features: IDs for a past instant, 128-bit gene IDs (1.2) ----

-- VOLATILE PARALLEL SAFE, as snowseq_next(): one value of the backfill
-- clock per call.  Not STRICT: a NULL instant is an ERROR, not a NULL ID.
-- EXECUTE is a GRANT: a caller backfilling a late instant holds every
-- other backfill of the server to later instants.
CREATE FUNCTION snowseq_id_at(ts timestamptz) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_id_at'
	LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_id_at(timestamptz) IS
	'new snowflake ID whose time field is that of the past instant ts, with snowseq.backfill_node_id: never equal to an ID of the clock or another (needs EXECUTE granted)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_id_at(timestamptz) FROM PUBLIC;

CREATE FUNCTION snowseq_uuid_at(ts timestamptz) RETURNS uuid
	AS 'MODULE_PATHNAME', 'snowseq_uuid_at'
	LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_uuid_at(timestamptz) IS
	'new version 7 UUID whose time is that of the past instant ts, with snowseq.backfill_node_id: never equal to a UUID of snowseq_uuid() or another (needs EXECUTE granted)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_uuid_at(timestamptz) FROM PUBLIC;

-- STABLE: depends on the layout settings, as snowseq_min_id().
CREATE FUNCTION snowseq_uuid_min(ts timestamptz) RETURNS uuid
	AS 'MODULE_PATHNAME', 'snowseq_uuid_min'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_uuid_min(timestamptz) IS
	'smallest UUID of the time unit of ts: WHERE id >= snowseq_uuid_min(...) uses the primary key';

CREATE FUNCTION snowseq_uuid_max(ts timestamptz) RETURNS uuid
	AS 'MODULE_PATHNAME', 'snowseq_uuid_max'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_uuid_max(timestamptz) IS
	'largest UUID of the time unit of ts or before';

-- VOLATILE PARALLEL SAFE, as snowseq_gene_next(): one value of this
-- node's 128-bit segment counter per call; a NULL key is an ERROR.
CREATE FUNCTION snowseq_gene_uuid(key text) RETURNS uuid
	AS 'MODULE_PATHNAME', 'snowseq_gene_uuid_text'
	LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE FUNCTION snowseq_gene_uuid(key bigint) RETURNS uuid
	AS 'MODULE_PATHNAME', 'snowseq_gene_uuid_int8'
	LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE FUNCTION snowseq_gene_uuid(key bytea) RETURNS uuid
	AS 'MODULE_PATHNAME', 'snowseq_gene_uuid_bytea'
	LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_gene_uuid(text) IS
	'next 128-bit gene ID of a text key: version 8 UUID, 23-bit gene whose top 15 bits are snowseq_gene(key), 79-bit segment';
COMMENT ON FUNCTION @extschema@.snowseq_gene_uuid(bigint) IS
	'next 128-bit gene ID of a bigint key: version 8 UUID, 23-bit gene whose top 15 bits are snowseq_gene(key), 79-bit segment';
COMMENT ON FUNCTION @extschema@.snowseq_gene_uuid(bytea) IS
	'next 128-bit gene ID of a bytea key: version 8 UUID, 23-bit gene whose top 15 bits are snowseq_gene(key), 79-bit segment';

-- IMMUTABLE: the top 23 bits whatever the configuration, so it can be used
-- in generated columns, index expressions and partition keys.
CREATE FUNCTION shard_of(id uuid) RETURNS integer
	AS 'MODULE_PATHNAME', 'shard_of_uuid'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.shard_of(uuid) IS
	'23-bit gene of a 128-bit gene ID; shard_of(id) >> 8 is the 15-bit gene of the same key';

-- STABLE PARALLEL RESTRICTED, as snowseq_route(bigint): reads the cached map.
CREATE FUNCTION snowseq_route(id uuid) RETURNS text
	AS 'MODULE_PATHNAME', 'snowseq_route_uuid'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.snowseq_route(uuid) IS
	'shard that holds a 128-bit gene ID, from snowseq_shard_map (the same shard as the 64-bit IDs of its key)';

-- ---- end of features (1.2) ----
