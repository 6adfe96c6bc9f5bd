/* snowseq--1.1--1.2.sql: upgrade of the snowseq extension from 1.1 to 1.2 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION snowseq UPDATE TO '1.2'" to load this file. \quit

-- ---- keys: wrapped key material (1.2) ----
-- New keys are stored wrapped under a wrap key of the data directory's
-- keyring file (snowseq_keyring), which no table holds: logical decoding
-- shows wrapped keys only.  Key rows restored by pg_dump into another
-- cluster, or applied by logical replication, need the wrap keys of the
-- cluster that made them: import a copy of its keyring file.  Reads a
-- server file and adds secrets: not for PUBLIC.
CREATE FUNCTION snowseq_import_wrap_keys(path text) RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_import_wrap_keys'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_import_wrap_keys(text) IS
	'adds the wrap keys of a copy of another cluster''s snowseq_keyring file, so its key rows unwrap here; returns how many were new';
REVOKE ALL ON FUNCTION @extschema@.snowseq_import_wrap_keys(text) FROM PUBLIC;
-- Keys made by 1.1 are stored as they are; the table's trigger wraps the
-- key of any row it sees change, so touch each (of this server's width:
-- rows of another width are left for snowseq_retire_key).
UPDATE @extschema@.snowseq_key_store SET state = state
	WHERE key IS NOT NULL
		AND pg_catalog.octet_length(key) OPERATOR(pg_catalog.=) 32
		AND version_bits OPERATOR(pg_catalog.=)
			pg_catalog.current_setting('snowseq.public_version_bits', true)::pg_catalog.int4;
-- ---- end keys: wrapped key material ----

-- ---- counters: whole-life positions (1.2) ----
-- Values of counters and serials are taken in the leader only, as
-- nextval() is: taking one may record the counter's floor (a sequence).
ALTER FUNCTION @extschema@.snowseq_counter_next(text) PARALLEL UNSAFE;
ALTER FUNCTION @extschema@.snowseq_serial(text) PARALLEL UNSAFE;

-- the view (last_value in numeric, never "bigint out of range" at the
-- end of bigint) is defined once, with owners and grants, below
-- ---- end counters ----

-- ---- counters: owners and grants (1.2) ----
-- A counter or serial has an owner (the role that created it) and USAGE
-- grants, as a sequence has: only roles with the owner's privileges, or
-- with USAGE granted to them, to a role they are members of, or to PUBLIC,
-- draw values, raise it or see its state.  EXECUTE on the functions is
-- still needed as well.  Both columns are rows of the configuration
-- table: pg_dump keeps them, with role names (regrole and aclitem print
-- names), so the roles must exist where a dump is restored.  A row
-- written without an owner (a plain INSERT, or a dump made by 1.1) is
-- owned by the role that writes it.
ALTER TABLE @extschema@.snowseq_counters
	ADD COLUMN owner pg_catalog.regrole NOT NULL
		DEFAULT pg_catalog.to_regrole(pg_catalog.quote_ident(CAST(CURRENT_USER AS pg_catalog.text))),
	ADD COLUMN acl pg_catalog.aclitem[];
COMMENT ON COLUMN @extschema@.snowseq_counters.owner IS
	'the role that owns the counter: it and its members may use it, grant and revoke it';
COMMENT ON COLUMN @extschema@.snowseq_counters.acl IS
	'USAGE grants of the counter (snowseq_grant_counter, snowseq_revoke_counter); NULL: its owner only';
-- Counters made before 1.2 are owned by the owner of this table and
-- granted to PUBLIC: every role with EXECUTE keeps drawing from them.
UPDATE @extschema@.snowseq_counters c
	SET owner = CAST(t.relowner AS pg_catalog.regrole),
		acl = ARRAY[pg_catalog.makeaclitem(0, t.relowner, 'USAGE', false)]
	FROM pg_catalog.pg_class t
	WHERE t.oid OPERATOR(pg_catalog.=) CAST('@extschema@.snowseq_counters' AS pg_catalog.regclass);

-- Only a role with the counter owner's privileges may grant and revoke:
-- the functions check it, EXECUTE is everyone's.  role is a role name as
-- pg_roles has it, or 'public'.
CREATE FUNCTION snowseq_grant_counter(name text, role text) RETURNS void
	AS 'MODULE_PATHNAME', 'snowseq_grant_counter'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_grant_counter(text, text) IS
	'lets a role (or public) draw from a counter or serial, raise it and see its state; only its owner may grant';
CREATE FUNCTION snowseq_revoke_counter(name text, role text) RETURNS void
	AS 'MODULE_PATHNAME', 'snowseq_revoke_counter'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_revoke_counter(text, text) IS
	'takes back a grant of snowseq_grant_counter; it holds from the next call of every session';

-- The view shows the counters the caller may use, and their owners.
CREATE OR REPLACE VIEW @extschema@.snowseq_counter_status AS
	SELECT c.name, c.kind, c.start, c.nodes, c.format, c.time_zone, c.dropped,
		CAST(LEAST(
			CASE WHEN c.kind OPERATOR(pg_catalog.=) 'counter'
					  AND s.issued OPERATOR(pg_catalog.>) c.restart_base
				 THEN CAST(c.start AS pg_catalog.numeric) OPERATOR(pg_catalog.+)
					  ((CAST(s.issued AS pg_catalog.numeric) OPERATOR(pg_catalog.-) 1
						OPERATOR(pg_catalog.-) c.restart_base)
					   OPERATOR(pg_catalog.*) c.nodes) OPERATOR(pg_catalog.+)
					  (st.node_id OPERATOR(pg_catalog.%) c.nodes)
				 WHEN c.kind OPERATOR(pg_catalog.=) 'serial' AND s.issued OPERATOR(pg_catalog.>) 0
				 THEN CAST(c.start AS pg_catalog.numeric) OPERATOR(pg_catalog.+)
					  ((CAST(s.issued OPERATOR(pg_catalog.&) 1099511627775 AS pg_catalog.numeric)
						OPERATOR(pg_catalog.-) 1) OPERATOR(pg_catalog.*) c.nodes) OPERATOR(pg_catalog.+)
					  (st.node_id OPERATOR(pg_catalog.%) c.nodes)
			END,
			-- the largest value of the counter's progression that bigint holds
			(CAST(c.start AS pg_catalog.numeric) OPERATOR(pg_catalog.+)
			 (st.node_id OPERATOR(pg_catalog.%) c.nodes))
			OPERATOR(pg_catalog.+)
			(pg_catalog.div(CAST(9223372036854775807 AS pg_catalog.numeric)
							OPERATOR(pg_catalog.-) c.start
							OPERATOR(pg_catalog.-) (st.node_id OPERATOR(pg_catalog.%) c.nodes),
							CAST(c.nodes AS pg_catalog.numeric))
			 OPERATOR(pg_catalog.*) c.nodes)) AS pg_catalog.int8) AS last_value,
		s.issued, s.reserved, c.owner
	FROM @extschema@.snowseq_counters c
	CROSS JOIN LATERAL @extschema@.snowseq_counter_state(c.name) s
	CROSS JOIN @extschema@.snowseq_status st
	WHERE pg_catalog.pg_has_role(c.owner, 'USAGE')
		OR EXISTS (SELECT FROM pg_catalog.aclexplode(c.acl) g
				   WHERE g.privilege_type OPERATOR(pg_catalog.=) 'USAGE'
					 AND (g.grantee OPERATOR(pg_catalog.=) 0
						  OR pg_catalog.pg_has_role(g.grantee, 'USAGE')));
COMMENT ON VIEW @extschema@.snowseq_counter_status IS
	'named counters and serials of this database that the caller may use: definition, last value this node issued (serials: in the last period), raw reservation, owner';
GRANT SELECT ON @extschema@.snowseq_counter_status TO PUBLIC;
-- ---- end counters: owners and grants ----

-- ---- public text IDs (1.2) ----
-- A public ID as 14 characters of Crockford's base32, the last a check
-- character: case and hyphens are ignored on input, O reads as 0, I and L
-- as 1, and a changed character or two swapped neighbours is refused.  The
-- markings and rights of snowseq_encrypt and snowseq_decrypt, whose keys
-- they use: STABLE (the current key is a row of a table), not STRICT (NULL
-- is an ERROR, never a NULL code or ID), PARALLEL SAFE, EXECUTE a GRANT.
CREATE FUNCTION snowseq_public_text(id bigint) RETURNS text
	AS 'MODULE_PATHNAME', 'snowseq_public_text'
	LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_public_text(bigint) IS
	'public ID of a gene ID as text: 14 characters of Crockford base32, the last a check character';
REVOKE ALL ON FUNCTION @extschema@.snowseq_public_text(bigint) FROM PUBLIC;

CREATE FUNCTION snowseq_from_public_text(code text) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_from_public_text'
	LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_from_public_text(text) IS
	'gene ID of a public text ID (case and hyphens ignored); an ERROR for a mistyped code or one snowseq_public_text did not make';
REVOKE ALL ON FUNCTION @extschema@.snowseq_from_public_text(text) FROM PUBLIC;
-- ---- end of public text IDs (1.2) ----

-- ---- public 128-bit gene IDs (1.2) ----
-- The public form of a 128-bit gene ID (snowseq_gene_uuid): the same
-- 23-bit gene, the key version in the 20-bit version field, the 79-bit
-- segment FF1-AES256-encrypted.  The keys, markings and rights of
-- snowseq_encrypt and snowseq_decrypt: STABLE (the current key is a row of
-- a table), not STRICT (NULL is an ERROR, never a NULL ID), PARALLEL SAFE,
-- EXECUTE a GRANT.  Names of their own: uuid overloads of snowseq_encrypt
-- would make snowseq_encrypt('123') ambiguous.
CREATE FUNCTION snowseq_encrypt_uuid(id uuid) RETURNS uuid
	AS 'MODULE_PATHNAME', 'snowseq_encrypt_uuid'
	LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_encrypt_uuid(uuid) IS
	'public form of a 128-bit gene ID: same gene, key version, FF1-AES256-encrypted segment';
REVOKE ALL ON FUNCTION @extschema@.snowseq_encrypt_uuid(uuid) FROM PUBLIC;

CREATE FUNCTION snowseq_decrypt_uuid(public_id uuid) RETURNS uuid
	AS 'MODULE_PATHNAME', 'snowseq_decrypt_uuid'
	LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_decrypt_uuid(uuid) IS
	'128-bit gene ID of a public one; an ERROR for a UUID snowseq_encrypt_uuid did not make';
REVOKE ALL ON FUNCTION @extschema@.snowseq_decrypt_uuid(uuid) FROM PUBLIC;

-- STRICT: a predicate, NULL for NULL.
CREATE FUNCTION snowseq_is_public_uuid(public_id uuid) RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_is_public_uuid'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_is_public_uuid(uuid) IS
	'true when snowseq_decrypt_uuid would return an ID for this UUID, false when it would reject it';
REVOKE ALL ON FUNCTION @extschema@.snowseq_is_public_uuid(uuid) FROM PUBLIC;
-- ---- end of public 128-bit gene IDs (1.2) ----

-- ---- moves: crash-safe switch (1.2) ----
-- The source's part of a switch is a prepared transaction that the router's
-- record decides; at the router's start a resolver commits or rolls it
-- back, acting as the role that ran the move (its user mappings).
ALTER TABLE @extschema@.snowseq_moves ADD COLUMN mover oid;
COMMENT ON COLUMN @extschema@.snowseq_moves.mover IS
	'the role that ran the move; the resolver at the router''s start acts as it';
-- ---- end of moves: crash-safe switch (1.2) ----

-- ---- moves: progress (1.2) ----
-- A move commits its progress about twice a second while it copies, so
-- that other sessions see it; the columns stay as the move's record.
ALTER TABLE @extschema@.snowseq_moves
	ADD COLUMN rows_total bigint,
	ADD COLUMN bytes_copied bigint,
	ADD COLUMN lag_bytes bigint,
	ADD COLUMN copy_started_at timestamptz,
	ADD COLUMN progress_at timestamptz;
COMMENT ON COLUMN @extschema@.snowseq_moves.rows_total IS
	'rows of the moved genes on the source when the copy began';
COMMENT ON COLUMN @extschema@.snowseq_moves.bytes_copied IS
	'size of the copy on the destination (pg_table_size), as last seen';
COMMENT ON COLUMN @extschema@.snowseq_moves.lag_bytes IS
	'WAL of the source not yet confirmed by the subscription, as last seen';
COMMENT ON COLUMN @extschema@.snowseq_moves.copy_started_at IS
	'when the initial copy began';
COMMENT ON COLUMN @extschema@.snowseq_moves.progress_at IS
	'when the progress columns were last written';

-- The moves not over, with their progress, as pg_stat_progress_* views
-- show commands: phase, rows copied of the total, bytes, lag, time left
-- (the copy's rate so far, over the rows left).
CREATE VIEW @extschema@.snowseq_move_progress AS
SELECT m.move_id, m.parent, m.first_gene, m.last_gene, m.source_server, m.dest_server,
	m.state AS phase, m.rows_copied, m.rows_total,
	CASE WHEN m.rows_total OPERATOR(pg_catalog.>) 0
		THEN pg_catalog.round(100.0 OPERATOR(pg_catalog.*) LEAST(m.rows_copied, m.rows_total)
			OPERATOR(pg_catalog./) m.rows_total, 1) END AS percent,
	m.bytes_copied, m.lag_bytes,
	pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) m.started_at AS elapsed,
	CASE WHEN m.state OPERATOR(pg_catalog.=) 'copy' AND m.rows_copied OPERATOR(pg_catalog.>) 0
		AND m.rows_total OPERATOR(pg_catalog.>=) m.rows_copied
		THEN (m.progress_at OPERATOR(pg_catalog.-) m.copy_started_at) OPERATOR(pg_catalog.*)
			((m.rows_total OPERATOR(pg_catalog.-) m.rows_copied)::pg_catalog.float8
			 OPERATOR(pg_catalog./) m.rows_copied::pg_catalog.float8) END AS time_left,
	m.progress_at AS updated_at
FROM @extschema@.snowseq_moves m
WHERE m.state OPERATOR(pg_catalog.<>) ALL (ARRAY['done', 'failed', 'rollback']::pg_catalog.text[]);
COMMENT ON VIEW @extschema@.snowseq_move_progress IS
	'moves under way (or interrupted): phase, rows copied of the total, bytes, lag and estimated time left';
-- ---- end of moves: progress (1.2) ----

-- ---- moves: placement groups (1.2) ----
-- snowseq_shard_map governs every gene-sharded table, so a move takes the
-- genes of all of them at once (the placement group): one record per
-- table, those of the other tables pointing at the move's leading record.
ALTER TABLE @extschema@.snowseq_moves ADD COLUMN group_move bigint;
COMMENT ON COLUMN @extschema@.snowseq_moves.group_move IS
	'NULL: the move''s leading record (its state and progress are the whole move''s); else the leading record of the move this table moved in';
CREATE INDEX snowseq_moves_group_move ON @extschema@.snowseq_moves (group_move);

CREATE OR REPLACE VIEW @extschema@.snowseq_move_progress AS
SELECT m.move_id, m.parent, m.first_gene, m.last_gene, m.source_server, m.dest_server,
	m.state AS phase, m.rows_copied, m.rows_total,
	CASE WHEN m.rows_total OPERATOR(pg_catalog.>) 0
		THEN pg_catalog.round(100.0 OPERATOR(pg_catalog.*) LEAST(m.rows_copied, m.rows_total)
			OPERATOR(pg_catalog./) m.rows_total, 1) END AS percent,
	m.bytes_copied, m.lag_bytes,
	pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) m.started_at AS elapsed,
	CASE WHEN m.state OPERATOR(pg_catalog.=) 'copy' AND m.rows_copied OPERATOR(pg_catalog.>) 0
		AND m.rows_total OPERATOR(pg_catalog.>=) m.rows_copied
		THEN (m.progress_at OPERATOR(pg_catalog.-) m.copy_started_at) OPERATOR(pg_catalog.*)
			((m.rows_total OPERATOR(pg_catalog.-) m.rows_copied)::pg_catalog.float8
			 OPERATOR(pg_catalog./) m.rows_copied::pg_catalog.float8) END AS time_left,
	m.progress_at AS updated_at,
	ARRAY(SELECT g.parent FROM @extschema@.snowseq_moves g
		WHERE g.move_id OPERATOR(pg_catalog.=) m.move_id OR g.group_move OPERATOR(pg_catalog.=) m.move_id
		ORDER BY g.move_id) AS tables
FROM @extschema@.snowseq_moves m
WHERE m.state OPERATOR(pg_catalog.<>) ALL (ARRAY['done', 'failed', 'rollback']::pg_catalog.text[])
	AND m.group_move IS NULL;

-- Without a table: every gene-sharded table.
CREATE PROCEDURE @extschema@.snowseq_move_genes(first_gene integer, last_gene integer, to_server name)
	AS 'MODULE_PATHNAME', 'snowseq_move_genes_all'
	LANGUAGE C;
COMMENT ON PROCEDURE @extschema@.snowseq_move_genes(integer, integer, name) IS
	'move the rows of genes first_gene..last_gene of every gene-sharded table to a postgres_fdw server, online, in one move';
REVOKE ALL ON PROCEDURE @extschema@.snowseq_move_genes(integer, integer, name) FROM PUBLIC;
-- ---- end of moves: placement groups (1.2) ----

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

-- ---- untyped arguments of shard_of and snowseq_route (1.2) ----
-- With uuid overloads beside the bigint ones, an untyped literal or an
-- untyped driver parameter (shard_of($1) from node-postgres or pgx) would
-- be ambiguous; a text overload is what PostgreSQL picks for it, and reads
-- the value as 1.1 did: up to 20 characters a bigint, longer a uuid.
CREATE FUNCTION shard_of(id text) RETURNS integer
	LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
	RETURN CASE WHEN pg_catalog.length(id) OPERATOR(pg_catalog.<=) 20
				THEN @extschema@.shard_of(CAST(id AS pg_catalog.int8))
				ELSE @extschema@.shard_of(CAST(id AS pg_catalog.uuid)) END;
COMMENT ON FUNCTION @extschema@.shard_of(text) IS
	'shard_of of a bigint or uuid written as text (an untyped literal or parameter)';

CREATE FUNCTION snowseq_route(id text) RETURNS text
	LANGUAGE sql STABLE STRICT PARALLEL RESTRICTED
	RETURN CASE WHEN pg_catalog.length(id) OPERATOR(pg_catalog.<=) 20
				THEN @extschema@.snowseq_route(CAST(id AS pg_catalog.int8))
				ELSE @extschema@.snowseq_route(CAST(id AS pg_catalog.uuid)) END;
COMMENT ON FUNCTION @extschema@.snowseq_route(text) IS
	'snowseq_route of a bigint or uuid written as text (an untyped literal or parameter)';
-- ---- end of untyped arguments (1.2) ----
