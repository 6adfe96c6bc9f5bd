------------------------------------------------------------------------
-- Sharding-gene IDs: [0][gene: 15][segment: 48]
------------------------------------------------------------------------

-- IMMUTABLE: a fixed hash of the key bytes.  Not STRICT: a NULL key is an
-- ERROR, never a NULL gene.
CREATE FUNCTION @extschema@.snowseq_gene(key text) RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_gene_text'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION @extschema@.snowseq_gene(key bigint) RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_gene_int8'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION @extschema@.snowseq_gene(key bytea) RETURNS integer
	AS 'MODULE_PATHNAME', 'snowseq_gene_bytea'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_gene(text) IS 'gene (0..32767) of a text key, hashed as UTF-8';
COMMENT ON FUNCTION @extschema@.snowseq_gene(bigint) IS 'gene (0..32767) of a bigint key, hashed as 8 bytes little-endian';
COMMENT ON FUNCTION @extschema@.snowseq_gene(bytea) IS 'gene (0..32767) of a bytea key';

CREATE FUNCTION @extschema@.snowseq_gene_next(key text) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_gene_next_text'
	LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE FUNCTION @extschema@.snowseq_gene_next(key bigint) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_gene_next_int8'
	LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE FUNCTION @extschema@.snowseq_gene_next(key bytea) RETURNS bigint
	AS 'MODULE_PATHNAME', 'snowseq_gene_next_bytea'
	LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_gene_next(text) IS 'next gene ID of a text key: gene << 48 | segment';
COMMENT ON FUNCTION @extschema@.snowseq_gene_next(bigint) IS 'next gene ID of a bigint key: gene << 48 | segment';
COMMENT ON FUNCTION @extschema@.snowseq_gene_next(bytea) IS 'next gene ID of a bytea key: gene << 48 | segment';

CREATE FUNCTION @extschema@.snowseq_fill_gene_id() RETURNS trigger
	AS 'MODULE_PATHNAME', 'snowseq_fill_gene_id'
	LANGUAGE C;
COMMENT ON FUNCTION @extschema@.snowseq_fill_gene_id() IS
	'BEFORE INSERT trigger: snowseq_fill_gene_id(''id_column'', ''key_column'') fills a NULL ID from the key';

-- VOLATILE PARALLEL SAFE, as snowseq_gene_next(): one value of this
-- node's 128-bit segment counter per call; a NULL key is an ERROR.
CREATE FUNCTION @extschema@.snowseq_gene_uuid(key text) RETURNS uuid
	AS 'MODULE_PATHNAME', 'snowseq_gene_uuid_text'
	LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE FUNCTION @extschema@.snowseq_gene_uuid(key bigint) RETURNS uuid
	AS 'MODULE_PATHNAME', 'snowseq_gene_uuid_int8'
	LANGUAGE C VOLATILE PARALLEL SAFE;
CREATE FUNCTION @extschema@.snowseq_gene_uuid(key bytea) RETURNS uuid
	AS 'MODULE_PATHNAME', 'snowseq_gene_uuid_bytea'
	LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.snowseq_gene_uuid(text) IS
	'next 128-bit gene ID of a text key: version 8 UUID, 23-bit gene whose top 15 bits are snowseq_gene(key), 79-bit segment';
COMMENT ON FUNCTION @extschema@.snowseq_gene_uuid(bigint) IS
	'next 128-bit gene ID of a bigint key: version 8 UUID, 23-bit gene whose top 15 bits are snowseq_gene(key), 79-bit segment';
COMMENT ON FUNCTION @extschema@.snowseq_gene_uuid(bytea) IS
	'next 128-bit gene ID of a bytea key: version 8 UUID, 23-bit gene whose top 15 bits are snowseq_gene(key), 79-bit segment';
