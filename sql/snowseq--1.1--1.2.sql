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
-- ---- end keys: wrapped key material ----
