-- Objects the snowseq benchmark compares against.  Loaded once into the
-- throwaway benchmark database by bench/run.sh.

CREATE EXTENSION IF NOT EXISTS snowseq;

-- nextval() with the default cache (every call touches the sequence page,
-- one WAL record per 32 values) and with a per-backend cache of 100.
CREATE SEQUENCE bench_seq_cache1 CACHE 1;
CREATE SEQUENCE bench_seq_cache100 CACHE 100;

-- a named counter and a daily serial, next to nextval() and the usual glue
-- of to_char() and lpad(nextval())
SELECT snowseq_create_counter('bench_counter');
SELECT snowseq_create_serial('bench_serial', 'INV-YYYYMMDD-##########');

-- UUIDv7 (RFC 9562) in PL/pgSQL, the usual recipe: 48 bits of Unix time in
-- ms over a random version-4 UUID, version nibble set to 7.
CREATE FUNCTION bench_uuidv7() RETURNS uuid
LANGUAGE plpgsql VOLATILE PARALLEL SAFE AS $$
BEGIN
	RETURN encode(
		set_bit(set_bit(
			overlay(uuid_send(gen_random_uuid())
					PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
					FROM 1 FOR 6),
			52, 1), 53, 1),
		'hex')::uuid;
END
$$;

-- Instagram-style IDs in PL/pgSQL: 41 bits of ms since a custom epoch,
-- 13 bits of shard id, 10 bits of a sequence (nextval % 1024).
CREATE SEQUENCE bench_insta_seq;
CREATE FUNCTION bench_instagram_id(OUT result bigint)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	our_epoch bigint := 1735689600000;	-- 2025-01-01 00:00:00 UTC in ms
	seq_id bigint;
	now_millis bigint;
	shard_id int := 5;
BEGIN
	SELECT nextval('bench_insta_seq') % 1024 INTO seq_id;
	now_millis := floor(extract(epoch FROM clock_timestamp()) * 1000);
	result := (now_millis - our_epoch) << 23;
	result := result | (shard_id << 10);
	result := result | seq_id;
END
$$;

-- Public IDs: a key in use, and the public ID and public text code of the
-- constant gene ID that bench.py encrypts ((4242 << 48) | 123456789), which
-- it decrypts and decodes.
SELECT snowseq_use_key(snowseq_new_key());
CREATE TABLE bench_public AS
	SELECT snowseq_encrypt((4242::bigint << 48) | 123456789) AS public_id,
		snowseq_public_text((4242::bigint << 48) | 123456789) AS code;

-- a 128-bit gene ID, whose shard bench.py reads with shard_of(uuid), and
-- its public form, which it decrypts
CREATE TABLE bench_gene_uuid AS
	SELECT id, snowseq_encrypt_uuid(id) AS public_id
	FROM (SELECT snowseq_gene_uuid(4242424242::bigint) AS id) g;
