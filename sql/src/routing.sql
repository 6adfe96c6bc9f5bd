------------------------------------------------------------------------
-- Routing
------------------------------------------------------------------------

-- IMMUTABLE: id >> 48 whatever the configuration, so it can be used in
-- generated columns, index expressions and partition keys.
CREATE FUNCTION @extschema@.shard_of(id bigint) RETURNS integer
	AS 'MODULE_PATHNAME', 'shard_of'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.shard_of(bigint) IS 'gene of a gene ID (id >> 48), the key to its shard';

CREATE FUNCTION @extschema@.snowseq_gene_range(gene integer) RETURNS int8range
	AS 'MODULE_PATHNAME', 'snowseq_gene_range'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_gene_range(integer) IS 'the IDs of one gene: [gene << 48, (gene + 1) << 48)';

CREATE FUNCTION @extschema@.snowseq_key_range(key text) RETURNS int8range
	LANGUAGE SQL IMMUTABLE PARALLEL SAFE
	RETURN @extschema@.snowseq_gene_range(@extschema@.snowseq_gene(key));
CREATE FUNCTION @extschema@.snowseq_key_range(key bigint) RETURNS int8range
	LANGUAGE SQL IMMUTABLE PARALLEL SAFE
	RETURN @extschema@.snowseq_gene_range(@extschema@.snowseq_gene(key));
CREATE FUNCTION @extschema@.snowseq_key_range(key bytea) RETURNS int8range
	LANGUAGE SQL IMMUTABLE PARALLEL SAFE
	RETURN @extschema@.snowseq_gene_range(@extschema@.snowseq_gene(key));
COMMENT ON FUNCTION @extschema@.snowseq_key_range(text) IS 'the IDs of the gene of a text key';
COMMENT ON FUNCTION @extschema@.snowseq_key_range(bigint) IS 'the IDs of the gene of a bigint key';
COMMENT ON FUNCTION @extschema@.snowseq_key_range(bytea) IS 'the IDs of the gene of a bytea key';

-- PostgreSQL 15 cannot prune partitions on "bigint <@ int8range".  This
-- operator means exactly what the built-in one means, but is written as an
-- inlinable SQL function of two plain comparisons, so the planner sees
-- id >= lower AND id <= upper - 1 and prunes, at plan time for a constant
-- range and at run time for a parameter.  int8range is canonical ([)); an
-- empty range, and one that ends before the smallest bigint, give bounds
-- no ID satisfies (and upper - 1 is never computed for them); an unbounded
-- side gives the extreme; a NULL range NULL.
CREATE FUNCTION @extschema@.snowseq_in_range(id bigint, r int8range) RETURNS boolean
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
COMMENT ON FUNCTION @extschema@.snowseq_in_range(bigint, int8range) IS
	'id <@ r, written so that partition pruning sees the bounds';
CREATE OPERATOR @extschema@.<@ (
	LEFTARG = bigint, RIGHTARG = int8range,
	FUNCTION = @extschema@.snowseq_in_range,
	COMMUTATOR = OPERATOR(@extschema@.@>)
);
-- the commutator, a real operator: "range @> id" prunes too, and no shell
-- operator is left to hide the built-in anyrange @> anyelement
CREATE FUNCTION @extschema@.snowseq_range_contains(r int8range, id bigint) RETURNS boolean
	LANGUAGE SQL IMMUTABLE PARALLEL SAFE
	RETURN @extschema@.snowseq_in_range(id, r);
COMMENT ON FUNCTION @extschema@.snowseq_range_contains(int8range, bigint) IS
	'r @> id, written so that partition pruning sees the bounds';
CREATE OPERATOR @extschema@.@> (
	LEFTARG = int8range, RIGHTARG = bigint,
	FUNCTION = @extschema@.snowseq_range_contains,
	COMMUTATOR = OPERATOR(@extschema@.<@)
);

-- The routing map: a gene belongs to the row with the smallest upper_gene >= it.
CREATE TABLE @extschema@.snowseq_shard_map (
	upper_gene integer PRIMARY KEY CHECK (upper_gene BETWEEN 0 AND 32767),
	shard text NOT NULL
);
COMMENT ON TABLE @extschema@.snowseq_shard_map IS
	'routing map: each shard holds the genes above the previous row''s upper_gene up to its own';
SELECT pg_catalog.pg_extension_config_dump('@extschema@.snowseq_shard_map', '');
-- routing is for everyone, changing the map is not
GRANT SELECT ON @extschema@.snowseq_shard_map TO PUBLIC;

-- Every change of the map, however applied, tells every backend to reload
-- its copy: ENABLE ALWAYS, so the triggers fire under
-- session_replication_role = replica and in a logical replication
-- subscriber too, whose apply fires row triggers only.
CREATE FUNCTION @extschema@.snowseq_shard_map_changed() RETURNS trigger
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
CREATE FUNCTION @extschema@.snowseq_route(id bigint) RETURNS text
	AS 'MODULE_PATHNAME', 'snowseq_route'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.snowseq_route(bigint) IS 'shard that holds a gene ID, from snowseq_shard_map';

CREATE FUNCTION @extschema@.snowseq_route_gene(gene integer) RETURNS text
	AS 'MODULE_PATHNAME', 'snowseq_route_gene'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.snowseq_route_gene(integer) IS 'shard that holds a gene, from snowseq_shard_map';

--@block route_ranges
-- The map as the routing functions read it (their cache): what elastic
-- shards read it through.
CREATE FUNCTION @extschema@.snowseq_route_ranges(OUT first_gene integer, OUT last_gene integer, OUT shard text)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'snowseq_route_ranges'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.snowseq_route_ranges() IS
	'the servers of snowseq_shard_map and the genes each holds (first to last), as snowseq_route routes them (1.3)';
--@end

CREATE FUNCTION @extschema@.snowseq_route_key(key text) RETURNS text
	LANGUAGE SQL STABLE PARALLEL RESTRICTED
	RETURN @extschema@.snowseq_route_gene(@extschema@.snowseq_gene(key));
CREATE FUNCTION @extschema@.snowseq_route_key(key bigint) RETURNS text
	LANGUAGE SQL STABLE PARALLEL RESTRICTED
	RETURN @extschema@.snowseq_route_gene(@extschema@.snowseq_gene(key));
CREATE FUNCTION @extschema@.snowseq_route_key(key bytea) RETURNS text
	LANGUAGE SQL STABLE PARALLEL RESTRICTED
	RETURN @extschema@.snowseq_route_gene(@extschema@.snowseq_gene(key));
COMMENT ON FUNCTION @extschema@.snowseq_route_key(text) IS 'shard that holds the rows of a text key';
COMMENT ON FUNCTION @extschema@.snowseq_route_key(bigint) IS 'shard that holds the rows of a bigint key';
COMMENT ON FUNCTION @extschema@.snowseq_route_key(bytea) IS 'shard that holds the rows of a bytea key';

-- Creates tables and fills the map: not for PUBLIC.  A caller granted
-- EXECUTE must own the table and be allowed to insert into the map.
CREATE FUNCTION @extschema@.snowseq_create_shards(parent regclass, n integer) RETURNS void
	AS 'MODULE_PATHNAME', 'snowseq_create_shards'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_create_shards(regclass, integer) IS
	'n range partitions of a table partitioned on its bigint ID, on gene boundaries, and the map to match';
REVOKE ALL ON FUNCTION @extschema@.snowseq_create_shards(regclass, integer) FROM PUBLIC;


-- IMMUTABLE: the top 23 bits whatever the configuration, so it can be used
-- in generated columns, index expressions and partition keys.
CREATE FUNCTION @extschema@.shard_of(id uuid) RETURNS integer
	AS 'MODULE_PATHNAME', 'shard_of_uuid'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.shard_of(uuid) IS
	'23-bit gene of a 128-bit gene ID; shard_of(id) >> 8 is the 15-bit gene of the same key';

-- STABLE PARALLEL RESTRICTED, as snowseq_route(bigint): reads the cached map.
CREATE FUNCTION @extschema@.snowseq_route(id uuid) RETURNS text
	AS 'MODULE_PATHNAME', 'snowseq_route_uuid'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.snowseq_route(uuid) IS
	'shard that holds a 128-bit gene ID, from snowseq_shard_map (the same shard as the 64-bit IDs of its key)';

-- ---- end of features (1.2) ----

-- ---- untyped arguments of shard_of and snowseq_route (1.2) ----
-- With uuid overloads beside the bigint ones, an untyped literal or an
-- untyped driver parameter (shard_of($1) from node-postgres or pgx) would
-- be ambiguous; a text overload is what PostgreSQL picks for it, and reads
-- the value as 1.1 did: up to 20 characters a bigint, longer a uuid.
CREATE FUNCTION @extschema@.shard_of(id text) RETURNS integer
	LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
	RETURN CASE WHEN pg_catalog.length(id) OPERATOR(pg_catalog.<=) 20
				THEN @extschema@.shard_of(CAST(id AS pg_catalog.int8))
				ELSE @extschema@.shard_of(CAST(id AS pg_catalog.uuid)) END;
COMMENT ON FUNCTION @extschema@.shard_of(text) IS
	'shard_of of a bigint or uuid written as text (an untyped literal or parameter)';

CREATE FUNCTION @extschema@.snowseq_route(id text) RETURNS text
	LANGUAGE sql STABLE STRICT PARALLEL RESTRICTED
	RETURN CASE WHEN pg_catalog.length(id) OPERATOR(pg_catalog.<=) 20
				THEN @extschema@.snowseq_route(CAST(id AS pg_catalog.int8))
				ELSE @extschema@.snowseq_route(CAST(id AS pg_catalog.uuid)) END;
COMMENT ON FUNCTION @extschema@.snowseq_route(text) IS
	'snowseq_route of a bigint or uuid written as text (an untyped literal or parameter)';
-- ---- end of untyped arguments (1.2) ----
