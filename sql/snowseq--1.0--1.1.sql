/* snowseq--1.0--1.1.sql: upgrade of the snowseq extension from 1.0 to 1.1 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION snowseq UPDATE TO '1.1'" to load this file. \quit

------------------------------------------------------------------------
-- Public IDs
-- [0][gene: 15][key version: v][FF1-AES256 of segment << check bits]
------------------------------------------------------------------------

-- The keys.  No right for PUBLIC: snowseq's functions read the table as a
-- plain heap scan and change it as its owner.  pg_dump keeps the rows (a
-- dump holds the keys); physical standbys get them through WAL.  A row
-- trigger checks each change before the constraints do (their errors would
-- print the row, key included) and tells every backend to reload its keys;
-- DELETE and TRUNCATE are refused: versions are never reused.
CREATE TABLE snowseq_key_store (
	version integer PRIMARY KEY,
	state text NOT NULL,
	key bytea,
	version_bits integer NOT NULL,
	check_bits integer NOT NULL,
	created timestamptz NOT NULL DEFAULT pg_catalog.now(),
	retired timestamptz
);
COMMENT ON TABLE @extschema@.snowseq_key_store IS
	'keys of public IDs: secret, readable by no role but the owner; manage them with snowseq_new_key, snowseq_use_key, snowseq_retire_key';
REVOKE ALL ON TABLE @extschema@.snowseq_key_store FROM PUBLIC;
CREATE UNIQUE INDEX snowseq_key_store_one_current ON @extschema@.snowseq_key_store ((true))
	WHERE state OPERATOR(pg_catalog.=) 'current';
SELECT pg_catalog.pg_extension_config_dump('@extschema@.snowseq_key_store', '');

CREATE FUNCTION snowseq_key_store_trigger() RETURNS trigger
	AS 'MODULE_PATHNAME', 'snowseq_key_store_trigger'
	LANGUAGE C;
COMMENT ON FUNCTION @extschema@.snowseq_key_store_trigger() IS
	'checks changes of snowseq_key_store and makes every backend reload its keys';
CREATE TRIGGER snowseq_key_store_row
	BEFORE INSERT OR UPDATE OR DELETE ON @extschema@.snowseq_key_store
	FOR EACH ROW EXECUTE FUNCTION @extschema@.snowseq_key_store_trigger();
CREATE TRIGGER snowseq_key_store_truncate
	BEFORE TRUNCATE ON @extschema@.snowseq_key_store
	FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.snowseq_key_store_trigger();
-- ALWAYS: rows applied by logical replication are checked and seen too
ALTER TABLE @extschema@.snowseq_key_store ENABLE ALWAYS TRIGGER snowseq_key_store_row;
ALTER TABLE @extschema@.snowseq_key_store ENABLE ALWAYS TRIGGER snowseq_key_store_truncate;

-- What may be known about the keys, without them.
CREATE VIEW snowseq_keys AS
	SELECT version, state, check_bits, version_bits,
		(1::bigint OPERATOR(pg_catalog.<<) (48 OPERATOR(pg_catalog.-) version_bits
			OPERATOR(pg_catalog.-) check_bits)) OPERATOR(pg_catalog.-) 1 AS max_segment,
		created, retired
	FROM @extschema@.snowseq_key_store;
COMMENT ON VIEW @extschema@.snowseq_keys IS
	'key versions of public IDs: state, check bits, largest segment each can encrypt; no key material';
REVOKE ALL ON TABLE @extschema@.snowseq_keys FROM PUBLIC;

-- STABLE: the result depends on the current key, a row of a table.  Not
-- STRICT: NULL is an ERROR, never a NULL public ID.  PARALLEL SAFE: each
-- worker reads the keys with the leader's snapshot.  EXECUTE is a GRANT.
CREATE FUNCTION snowseq_encrypt(id bigint) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_encrypt'
	LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_encrypt(bigint) IS
	'public ID of a gene ID: same gene, key version, FF1-AES256-encrypted segment';
REVOKE ALL ON FUNCTION @extschema@.snowseq_encrypt(bigint) FROM PUBLIC;

CREATE FUNCTION snowseq_decrypt(public_id bigint) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_decrypt'
	LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_decrypt(bigint) IS
	'gene ID of a public ID; an ERROR for a number snowseq_encrypt did not make';
REVOKE ALL ON FUNCTION @extschema@.snowseq_decrypt(bigint) FROM PUBLIC;

-- STRICT: a predicate, NULL for NULL.
CREATE FUNCTION snowseq_is_public_id(public_id bigint) RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_is_public_id'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_is_public_id(bigint) IS
	'true when snowseq_decrypt would return an ID for this number, false when it would reject it';
REVOKE ALL ON FUNCTION @extschema@.snowseq_is_public_id(bigint) FROM PUBLIC;

-- Key management changes the key table: VOLATILE, PARALLEL UNSAFE, for
-- the roles an administrator grants it to.
CREATE FUNCTION snowseq_new_key(check_bits integer DEFAULT 4) RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_new_key'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_new_key(integer) IS
	'makes a random key inside the server and returns its version; it decrypts at once, snowseq_use_key makes it encrypt';
REVOKE ALL ON FUNCTION @extschema@.snowseq_new_key(integer) FROM PUBLIC;

CREATE FUNCTION snowseq_use_key(version integer) RETURNS void
	AS 'MODULE_PATHNAME', 'snowseq_use_key'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_use_key(integer) IS
	'the key new public IDs are made with from now on; older keys keep decrypting';
REVOKE ALL ON FUNCTION @extschema@.snowseq_use_key(integer) FROM PUBLIC;

CREATE FUNCTION snowseq_retire_key(version integer) RETURNS void
	AS 'MODULE_PATHNAME', 'snowseq_retire_key'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_retire_key(integer) IS
	'erases a key that is not current: its public IDs no longer decrypt; its version is never reused';
REVOKE ALL ON FUNCTION @extschema@.snowseq_retire_key(integer) FROM PUBLIC;
