-- Public IDs
-- [0][gene: 15][key version: v][FF1-AES256 of segment << check bits]
------------------------------------------------------------------------

-- The keys.  No right for PUBLIC: snowseq's functions read the table as a
-- plain heap scan and change it as its owner.  pg_dump keeps the rows (a
-- dump holds the keys); physical standbys get them through WAL.  A row
-- trigger checks each change before the constraints do (their errors would
-- print the row, key included) and tells every backend to reload its keys;
-- DELETE and TRUNCATE are refused: versions are never reused.
CREATE TABLE @extschema@.snowseq_key_store (
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

CREATE FUNCTION @extschema@.snowseq_key_store_trigger() RETURNS trigger
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
CREATE VIEW @extschema@.snowseq_keys AS
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
CREATE FUNCTION @extschema@.snowseq_encrypt(id bigint) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_encrypt'
	LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_encrypt(bigint) IS
	'public ID of a gene ID: same gene, key version, FF1-AES256-encrypted segment';
REVOKE ALL ON FUNCTION @extschema@.snowseq_encrypt(bigint) FROM PUBLIC;

CREATE FUNCTION @extschema@.snowseq_decrypt(public_id bigint) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_decrypt'
	LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_decrypt(bigint) IS
	'gene ID of a public ID; an ERROR for a number snowseq_encrypt did not make';
REVOKE ALL ON FUNCTION @extschema@.snowseq_decrypt(bigint) FROM PUBLIC;

-- STRICT: a predicate, NULL for NULL.
CREATE FUNCTION @extschema@.snowseq_is_public_id(public_id bigint) RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_is_public_id'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_is_public_id(bigint) IS
	'true when snowseq_decrypt would return an ID for this number, false when it would reject it';
REVOKE ALL ON FUNCTION @extschema@.snowseq_is_public_id(bigint) FROM PUBLIC;

-- Key management changes the key table: VOLATILE, PARALLEL UNSAFE, for
-- the roles an administrator grants it to.
CREATE FUNCTION @extschema@.snowseq_new_key(check_bits integer DEFAULT 4) RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_new_key'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_new_key(integer) IS
	'makes a random key inside the server and returns its version; it decrypts at once, snowseq_use_key makes it encrypt';
REVOKE ALL ON FUNCTION @extschema@.snowseq_new_key(integer) FROM PUBLIC;

CREATE FUNCTION @extschema@.snowseq_use_key(version integer) RETURNS void
	AS 'MODULE_PATHNAME', 'snowseq_use_key'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_use_key(integer) IS
	'the key new public IDs are made with from now on; older keys keep decrypting';
REVOKE ALL ON FUNCTION @extschema@.snowseq_use_key(integer) FROM PUBLIC;

CREATE FUNCTION @extschema@.snowseq_retire_key(version integer) RETURNS void
	AS 'MODULE_PATHNAME', 'snowseq_retire_key'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_retire_key(integer) IS
	'erases a key that is not current: its public IDs no longer decrypt; its version is never reused';
REVOKE ALL ON FUNCTION @extschema@.snowseq_retire_key(integer) FROM PUBLIC;

-- ---- keys: wrapped key material (1.2) ----
-- New keys are stored wrapped under a wrap key of the data directory's
-- keyring file (snowseq_keyring), which no table holds: logical decoding
-- shows wrapped keys only.  Key rows restored by pg_dump into another
-- cluster, or applied by logical replication, need the wrap keys of the
-- cluster that made them: import a copy of its keyring file.  Reads a
-- server file and adds secrets: not for PUBLIC.
CREATE FUNCTION @extschema@.snowseq_import_wrap_keys(path text) RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_import_wrap_keys'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_import_wrap_keys(text) IS
	'adds the wrap keys of a copy of another cluster''s snowseq_keyring file, so its key rows unwrap here; returns how many were new';
REVOKE ALL ON FUNCTION @extschema@.snowseq_import_wrap_keys(text) FROM PUBLIC;
-- ---- end keys: wrapped key material ----

-- ---- public text IDs (1.2) ----
-- A public ID as 14 characters of Crockford's base32, the last a check
-- character: case and hyphens are ignored on input, O reads as 0, I and L
-- as 1, and a changed character or two swapped neighbours is refused.  The
-- markings and rights of snowseq_encrypt and snowseq_decrypt, whose keys
-- they use: STABLE (the current key is a row of a table), not STRICT (NULL
-- is an ERROR, never a NULL code or ID), PARALLEL SAFE, EXECUTE a GRANT.
CREATE FUNCTION @extschema@.snowseq_public_text(id bigint) RETURNS text
	AS 'MODULE_PATHNAME', 'snowseq_public_text'
	LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_public_text(bigint) IS
	'public ID of a gene ID as text: 14 characters of Crockford base32, the last a check character';
REVOKE ALL ON FUNCTION @extschema@.snowseq_public_text(bigint) FROM PUBLIC;

CREATE FUNCTION @extschema@.snowseq_from_public_text(code text) RETURNS bigint
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
CREATE FUNCTION @extschema@.snowseq_encrypt_uuid(id uuid) RETURNS uuid
	AS 'MODULE_PATHNAME', 'snowseq_encrypt_uuid'
	LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_encrypt_uuid(uuid) IS
	'public form of a 128-bit gene ID: same gene, key version, FF1-AES256-encrypted segment';
REVOKE ALL ON FUNCTION @extschema@.snowseq_encrypt_uuid(uuid) FROM PUBLIC;

CREATE FUNCTION @extschema@.snowseq_decrypt_uuid(public_id uuid) RETURNS uuid
	AS 'MODULE_PATHNAME', 'snowseq_decrypt_uuid'
	LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_decrypt_uuid(uuid) IS
	'128-bit gene ID of a public one; an ERROR for a UUID snowseq_encrypt_uuid did not make';
REVOKE ALL ON FUNCTION @extschema@.snowseq_decrypt_uuid(uuid) FROM PUBLIC;

-- STRICT: a predicate, NULL for NULL.
CREATE FUNCTION @extschema@.snowseq_is_public_uuid(public_id uuid) RETURNS boolean
	AS 'MODULE_PATHNAME', 'snowseq_is_public_uuid'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_is_public_uuid(uuid) IS
	'true when snowseq_decrypt_uuid would return an ID for this UUID, false when it would reject it';
REVOKE ALL ON FUNCTION @extschema@.snowseq_is_public_uuid(uuid) FROM PUBLIC;
-- ---- end of public 128-bit gene IDs (1.2) ----

--@block public_text_prefix

-- ---- type prefixes of public text IDs (1.3) ----
-- ord_<code>, as TypeID and Stripe-style IDs write them; reading checks the
-- prefix.  The same markings and rights as the functions without one.
CREATE FUNCTION @extschema@.snowseq_public_text(id pg_catalog.int8, prefix pg_catalog.text) RETURNS pg_catalog.text
	AS 'MODULE_PATHNAME', 'snowseq_public_text_prefixed'
	LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_public_text(pg_catalog.int8, pg_catalog.text) IS
	'public ID of a gene ID as text with a type prefix: prefix, an underscore and the 14 characters of snowseq_public_text(id)';
REVOKE ALL ON FUNCTION @extschema@.snowseq_public_text(pg_catalog.int8, pg_catalog.text) FROM PUBLIC;
CREATE FUNCTION @extschema@.snowseq_from_public_text(code pg_catalog.text, prefix pg_catalog.text) RETURNS pg_catalog.int8
	AS 'MODULE_PATHNAME', 'snowseq_from_public_text_prefixed'
	LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_from_public_text(pg_catalog.text, pg_catalog.text) IS
	'gene ID of a public text ID of that type prefix; an ERROR for another prefix, none, or a mistyped code';
REVOKE ALL ON FUNCTION @extschema@.snowseq_from_public_text(pg_catalog.text, pg_catalog.text) FROM PUBLIC;
--@end
--@block wrap_keys_drop
-- ---- keyring: dropping imported wrap keys (1.3) ----
-- An import that filled the keyring, or brought the wrong cluster's keys,
-- is undone by dropping the wrap keys no key row of this database uses;
-- granted like the import.
CREATE FUNCTION @extschema@.snowseq_drop_wrap_keys() RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_drop_wrap_keys'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.snowseq_drop_wrap_keys() IS
	'drop from the keyring every wrap key but the cluster''s own that no row of this database''s key table uses; returns how many were dropped';
REVOKE ALL ON FUNCTION @extschema@.snowseq_drop_wrap_keys() FROM PUBLIC;
-- ---- end keyring: dropping imported wrap keys (1.3) ----

--@end
