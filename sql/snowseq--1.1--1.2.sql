/* snowseq--1.1--1.2.sql: upgrade of the snowseq extension from 1.1 to 1.2 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION snowseq UPDATE TO '1.2'" to load this file. \quit

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
