-- Public IDs on a preloaded server with the default
-- snowseq.public_version_bits = 6: [0][gene 15][version 6][FF1 42 bits].
-- Keys are random, so results that depend on them are shown as counts and
-- truth values, and error messages with their numbers masked.
SET client_min_messages = notice;
SELECT current_setting('snowseq.public_version_bits') AS version_bits;

-- FF1 itself, through two entry points the module exports for tests only
-- (not part of the extension): any radix over digit strings, and the
-- radix-2 path public IDs use, over numbers.
CREATE FUNCTION pg_temp.ff1(key bytea, tweak bytea, radix integer, input text, decrypt boolean)
	RETURNS text AS '$libdir/snowseq', 'snowseq_ff1_test_vector' LANGUAGE C STRICT;
CREATE FUNCTION pg_temp.ff1_bits(key bytea, tweak bytea, nbits integer, x bigint, decrypt boolean)
	RETURNS bigint AS '$libdir/snowseq', 'snowseq_ff1_test_bits' LANGUAGE C STRICT;

-- NIST SP 800-38G FF1 samples 7, 8 and 9 (FF1-AES256)
CREATE TEMP TABLE nist (sample int, key bytea, tweak bytea, radix int, pt text, ct text);
INSERT INTO nist VALUES
	(7, '\x2b7e151628aed2a6abf7158809cf4f3cef4359d8d580aa4f7f036d6f04fc6a94', '\x',
	 10, '0123456789', '6657667009'),
	(8, '\x2b7e151628aed2a6abf7158809cf4f3cef4359d8d580aa4f7f036d6f04fc6a94', '\x39383736353433323130',
	 10, '0123456789', '1001623463'),
	(9, '\x2b7e151628aed2a6abf7158809cf4f3cef4359d8d580aa4f7f036d6f04fc6a94', '\x3737373770717273373737',
	 36, '0123456789abcdefghi', 'xs8a0azh2avyalyzuwd');
SELECT sample, radix, pg_temp.ff1(key, tweak, radix, pt, false) AS encrypted,
       pg_temp.ff1(key, tweak, radix, pt, false) = ct AS matches_nist,
       pg_temp.ff1(key, tweak, radix, ct, true) = pt AS decrypts
FROM nist ORDER BY sample;

-- a radix-2 vector of another FF1 implementation (47 bits, 32-byte tweak),
-- through both paths
CREATE TEMP TABLE bin AS SELECT
	'\xf4a116d6ee406a53a56cbe0f4aa7b1001cdc0a55cac963cf5ace390488b3477a'::bytea AS key,
	'\xfd7f4b9945a3c535adb4720027116ca0f4987d7f3fdba9bbc40e75375feaa63c'::bytea AS tweak,
	'00000101011011011101001001010011100111100011001' AS pt,
	'10110101001110101101110000011000000011111100111' AS ct;
SELECT pg_temp.ff1(key, tweak, 2, pt, false) = ct AS general_path,
       pg_temp.ff1_bits(key, tweak, 47, lpad(pt, 64, '0')::bit(64)::bigint, false)
           = lpad(ct, 64, '0')::bit(64)::bigint AS binary_path,
       pg_temp.ff1_bits(key, tweak, 47, lpad(ct, 64, '0')::bit(64)::bigint, true)
           = lpad(pt, 64, '0')::bit(64)::bigint AS binary_decrypts
FROM bin;

-- the binary path agrees with the general one: lengths 20 to 62 bits,
-- tweaks of 0, 2 (as public IDs use), 11 (one block of Q at most) and 30 bytes
SELECT setseed(0.5);
CREATE TEMP TABLE cmp AS
SELECT n, t, decode(md5('k' || n) || md5('K' || t), 'hex') AS key,
       substr(decode(md5('t' || n) || md5('T' || t), 'hex'), 1, t) AS tweak,
       floor(random() * 2 ^ n)::bigint AS x
FROM (VALUES (20), (21), (41), (42), (43), (47), (62)) ns(n),
     (VALUES (0), (2), (11), (30)) ts(t),
     generate_series(1, 40);
SELECT count(*) AS compared,
       count(*) FILTER (WHERE right(pg_temp.ff1(key, tweak, 2, right(x::bit(64)::text, n), false), n)
                        <> right(pg_temp.ff1_bits(key, tweak, n, x, false)::bit(64)::text, n)) AS encrypt_differs,
       count(*) FILTER (WHERE pg_temp.ff1_bits(key, tweak, n, pg_temp.ff1_bits(key, tweak, n, x, false), true)
                        <> x) AS round_trip_fails
FROM cmp;

-- a full domain, exhaustively: FF1 on 20 bits is a permutation of all
-- 1,048,576 numbers, and decryption inverts it
SELECT count(*) AS inputs, count(DISTINCT e) AS distinct_outputs,
       min(e) >= 0 AND max(e) < 2 ^ 20 AS in_domain,
       count(*) FILTER (WHERE pg_temp.ff1_bits(k, '\x4e21', 20, e, true) <> x) AS round_trip_fails,
       count(*) FILTER (WHERE e = x) AS fixed_points
FROM (SELECT x, k, pg_temp.ff1_bits(k, '\x4e21', 20, x, false) AS e
      FROM generate_series(0, (1 << 20) - 1) x,
           (SELECT decode(md5('full') || md5('domain'), 'hex') AS k) kk) s;

-- test-path inputs it refuses
SELECT pg_temp.ff1('\x00', '\x', 10, '0123456789', false);
SELECT pg_temp.ff1(key, tweak, 10, '01234', false) FROM nist WHERE sample = 7;
SELECT pg_temp.ff1(key, tweak, 10, '012345678a', false) FROM nist WHERE sample = 7;
SELECT pg_temp.ff1_bits(key, tweak, 19, 1, false) FROM nist WHERE sample = 7;
SELECT pg_temp.ff1_bits(key, tweak, 20, 1048576, false) FROM nist WHERE sample = 7;

-- ---- public IDs ----

-- masks the long numbers (IDs, public IDs) of an error message, which
-- depend on the random keys
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	msg text;
	det text;
BEGIN
	EXECUTE q;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
	RETURN SQLSTATE || ': ' || regexp_replace(msg || ' / ' || coalesce(det, ''), '[0-9]{8,}', 'N', 'g');
END
$$;

-- no key yet
SELECT * FROM snowseq_keys;
SELECT snowseq_encrypt(1);
SELECT snowseq_decrypt((1::bigint << 48) | (1::bigint << 42) | 5);

SELECT snowseq_new_key() AS v1;
SELECT snowseq_encrypt(1);
SELECT snowseq_use_key(1);
SELECT version, state, check_bits, version_bits, max_segment, created <= now() AS created_ok, retired
FROM snowseq_keys;

-- round trip of 1,000,000 IDs with random genes and segments up to the
-- largest one key version 1 holds (2^38 - 1), and the edges
SELECT setseed(0.25);
CREATE TEMP TABLE ids AS
SELECT (floor(random() * 32768)::bigint << 48) | floor(random() * 2 ^ 38)::bigint AS id
FROM generate_series(1, 1000000 - 6);
INSERT INTO ids VALUES (0), (1), ((1::bigint << 38) - 1), (32767::bigint << 48),
	((32767::bigint << 48) | ((1::bigint << 38) - 1)), ((12345::bigint << 48) | 777);
CREATE TEMP TABLE pub AS SELECT id, snowseq_encrypt(id) AS p FROM ids;
SELECT count(*) AS ids,
       count(*) FILTER (WHERE snowseq_decrypt(p) <> id) AS round_trip_fails,
       count(*) FILTER (WHERE shard_of(p) <> shard_of(id)) AS gene_changed,
       count(*) FILTER (WHERE (p >> 42) & 63 <> 1) AS not_version_1,
       count(*) FILTER (WHERE p < 0) AS negative,
       count(DISTINCT p) = count(DISTINCT id) AS one_public_id_each,
       count(*) FILTER (WHERE p = id) AS unchanged
FROM pub;
-- the segments look random: neither the order nor the distance of two
-- public IDs of one gene tells how far apart their IDs are
SELECT corr(id & ((1::bigint << 38) - 1), p & ((1::bigint << 42) - 1)) BETWEEN -0.01 AND 0.01 AS uncorrelated
FROM pub;

-- exhaustively, over a full range of 2^20 consecutive segments of one
-- gene: 1,048,576 IDs, as many public IDs
SELECT count(*) AS ids, count(DISTINCT p) AS public_ids,
       count(*) FILTER (WHERE snowseq_decrypt(p) <> id) AS round_trip_fails,
       count(*) FILTER (WHERE shard_of(p) <> 4242) AS other_gene
FROM (SELECT id, snowseq_encrypt(id) AS p
      FROM (SELECT (4242::bigint << 48) | s AS id FROM generate_series(0, (1 << 20) - 1) s) i) t;

-- real gene IDs of this node
SELECT count(*) AS ids,
       count(*) FILTER (WHERE snowseq_decrypt(snowseq_encrypt(id)) <> id) AS round_trip_fails,
       count(*) FILTER (WHERE shard_of(snowseq_encrypt(id)) <> snowseq_gene('buyer-' || g % 100)) AS gene_changed
FROM (SELECT g, snowseq_gene_next('buyer-' || g % 100) AS id FROM generate_series(1, 10000) g) s;

-- a public ID routes and prunes like its ID (the map of earlier tests is
-- set aside and put back)
CREATE TEMP TABLE saved_map AS SELECT * FROM snowseq_shard_map;
DELETE FROM snowseq_shard_map;
INSERT INTO snowseq_shard_map VALUES (8191, 'a'), (16383, 'b'), (24575, 'c'), (32767, 'd');
SELECT count(*) FILTER (WHERE snowseq_route(snowseq_encrypt(id)) <> snowseq_route(id)) AS routed_elsewhere,
       count(*) FILTER (WHERE NOT snowseq_encrypt(id) <@ snowseq_key_range('buyer-' || g % 100)) AS outside_key_range
FROM (SELECT g, snowseq_gene_next('buyer-' || g % 100) AS id FROM generate_series(1, 1000) g) s;
DELETE FROM snowseq_shard_map;
CREATE TABLE public_orders (public_id bigint NOT NULL, buyer text NOT NULL) PARTITION BY RANGE (public_id);
SELECT snowseq_create_shards('public_orders', 4);
DELETE FROM snowseq_shard_map;
INSERT INTO public_orders
SELECT snowseq_encrypt(snowseq_gene_next('buyer-' || g % 100)), 'buyer-' || g % 100 FROM generate_series(1, 1000) g;
EXPLAIN (COSTS OFF) SELECT * FROM public_orders WHERE public_id <@ snowseq_key_range('buyer-7');
SELECT count(*) = 10 AS all_rows_of_the_buyer FROM public_orders WHERE public_id <@ snowseq_key_range('buyer-7');
DROP TABLE public_orders;
INSERT INTO snowseq_shard_map SELECT * FROM saved_map;

-- what decryption guarantees.  A number that snowseq_encrypt did not make
-- decrypts only if its version field names a live key (1 of its 64 values)
-- and its 4 check bits come out zero (1 in 16): of 1,000,000 random
-- bigints, half negative, 10^6 / 2 / 64 / 16 = 488 are expected to decrypt
-- (the bound below is 7 standard deviations wide); without check bits it
-- would be 7,812.
SELECT setseed(0.75);
SELECT count(*) FILTER (WHERE snowseq_is_public_id(x)) BETWEEN 340 AND 650 AS within_bound
FROM (SELECT (floor(random() * 4294967296)::bigint << 32) | floor(random() * 4294967296)::bigint AS x
      FROM generate_series(1, 1000000)) r;
-- a mistyped public ID (the last decimal digit changed) keeps its gene and
-- version, so 1 in 16 pass the check bits: about 6,250 of 100,000 (bound: 7
-- standard deviations), and of those that pass, none is the public ID of
-- another of the 1,000,000 IDs
CREATE TEMP TABLE typo AS
SELECT p, CASE WHEN p % 10 = 9 THEN p - 1 ELSE p + 1 END AS t FROM pub LIMIT 100000;
CREATE TEMP TABLE typo_ok AS SELECT t, snowseq_decrypt(t) AS id FROM typo WHERE snowseq_is_public_id(t);
ANALYZE ids, typo_ok;
SELECT count(*) BETWEEN 5700 AND 6800 AS about_one_in_16,
       (SELECT count(*) FROM typo_ok JOIN ids USING (id)) AS another_ids
FROM typo_ok;
SELECT pg_temp.err('SELECT snowseq_decrypt(' || t || ')') AS typo_error
FROM typo WHERE NOT snowseq_is_public_id(t) LIMIT 1;

-- bad input: clear ERRORs
SELECT snowseq_encrypt(NULL);
SELECT snowseq_decrypt(NULL);
SELECT snowseq_is_public_id(NULL);
SELECT snowseq_encrypt(-1);
SELECT snowseq_decrypt(-9223372036854775808);
SELECT snowseq_is_public_id(-1);
-- a private ID: version field 0
SELECT snowseq_decrypt((12345::bigint << 48) | 777);
-- key version 5 does not exist
SELECT snowseq_decrypt((12345::bigint << 48) | (5::bigint << 42) | 777);
-- a segment of 39 bits does not fit key version 1 (4 check bits)
SELECT snowseq_encrypt((12345::bigint << 48) | (1::bigint << 38));
-- a public ID given to snowseq_encrypt
SELECT pg_temp.err('SELECT snowseq_encrypt(' || p || ')') FROM pub LIMIT 1;

-- rotation: version 2, with 8 check bits, decrypts at once but encrypts
-- only once in use; public IDs of version 1 keep decrypting
SELECT snowseq_new_key(check_bits => 8) AS v2;
SELECT count(*) FILTER (WHERE (snowseq_encrypt(id) >> 42) & 63 <> 1) AS not_version_1
FROM (SELECT id FROM ids LIMIT 1000) s;
SELECT snowseq_use_key(2);
SELECT snowseq_use_key(2);
SELECT version, state, check_bits, max_segment FROM snowseq_keys ORDER BY version;
CREATE TEMP TABLE pub2 AS
SELECT id, snowseq_encrypt(id) AS p FROM ids WHERE id & ((1::bigint << 48) - 1) < (1::bigint << 34) LIMIT 10000;
SELECT count(*) AS ids, count(*) FILTER (WHERE (p >> 42) & 63 <> 2) AS not_version_2,
       count(*) FILTER (WHERE snowseq_decrypt(p) <> id) AS round_trip_fails
FROM pub2;
SELECT count(*) AS version_1_ids, count(*) FILTER (WHERE snowseq_decrypt(p) <> id) AS round_trip_fails
FROM pub;
-- an ID whose segment fits version 1 but not version 2
SELECT snowseq_encrypt((12345::bigint << 48) | (1::bigint << 34));
-- version 1 retired: its public IDs no longer decrypt, its key is erased
SELECT snowseq_retire_key(2);
SELECT snowseq_retire_key(1);
SELECT snowseq_retire_key(1);
SELECT version, state, retired IS NOT NULL AS retired_set FROM snowseq_keys ORDER BY version;
SELECT pg_temp.err('SELECT snowseq_decrypt(' || p || ')') AS retired_error FROM pub LIMIT 1;
SELECT count(*) FILTER (WHERE snowseq_is_public_id(p)) AS still_valid FROM pub;
SELECT snowseq_use_key(1);
SELECT count(*) AS version_2_ids, count(*) FILTER (WHERE snowseq_decrypt(p) <> id) AS round_trip_fails
FROM pub2;
SELECT count(*) AS keys, count(key) AS with_material FROM snowseq_key_store;

-- key management: bad arguments
SELECT snowseq_use_key(NULL);
SELECT snowseq_use_key(0);
SELECT snowseq_use_key(64);
SELECT snowseq_use_key(9);
SELECT snowseq_retire_key(9);
SELECT snowseq_new_key(NULL);
SELECT snowseq_new_key(-1);
SELECT snowseq_new_key(17);

-- the key table refuses rows that break its rules, without printing them
UPDATE snowseq_key_store SET state = 'bogus' WHERE version = 2;
UPDATE snowseq_key_store SET key = NULL WHERE version = 2;
UPDATE snowseq_key_store SET key = '\x00' WHERE version = 2;
UPDATE snowseq_key_store SET key = decode(repeat('00', 32), 'hex') WHERE version = 2;
UPDATE snowseq_key_store SET check_bits = 4 WHERE version = 2;
UPDATE snowseq_key_store SET state = 'active', key = '\x0000000000000000000000000000000000000000000000000000000000000000' WHERE version = 1;
UPDATE snowseq_key_store SET version_bits = 7 WHERE version = 2;
INSERT INTO snowseq_key_store (version, state, key, version_bits, check_bits) VALUES (3, 'active', '\x01', 6, 4);
INSERT INTO snowseq_key_store (version, state, key, version_bits, check_bits) VALUES (64, 'retired', NULL, 6, 4);
INSERT INTO snowseq_key_store (version, state, key, version_bits, check_bits) VALUES (NULL, 'retired', NULL, 6, 4);
DELETE FROM snowseq_key_store WHERE version = 1;
TRUNCATE snowseq_key_store;
SELECT count(*) AS keys FROM snowseq_key_store;

-- parallel workers read the keys themselves
CREATE TABLE crypt_parallel AS SELECT id FROM pub2;
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
EXPLAIN (COSTS OFF) SELECT count(*) FROM crypt_parallel WHERE snowseq_decrypt(snowseq_encrypt(id)) <> id;
SELECT count(*) AS round_trip_fails FROM crypt_parallel WHERE snowseq_decrypt(snowseq_encrypt(id)) <> id;
RESET max_parallel_workers_per_gather;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
DROP TABLE crypt_parallel;

-- rights: nothing for PUBLIC; encryption and key management are GRANTs
CREATE ROLE regress_crypt_app;
CREATE ROLE regress_crypt_keys;
CREATE ROLE regress_crypt_nobody;
GRANT EXECUTE ON FUNCTION snowseq_encrypt(bigint), snowseq_decrypt(bigint),
	snowseq_is_public_id(bigint) TO regress_crypt_app;
GRANT EXECUTE ON FUNCTION snowseq_new_key(integer), snowseq_use_key(integer),
	snowseq_retire_key(integer) TO regress_crypt_keys;
GRANT SELECT ON snowseq_keys TO regress_crypt_keys;
SELECT r.rolname,
       has_table_privilege(r.oid, 'snowseq_key_store', 'SELECT') AS read_keys,
       has_table_privilege(r.oid, 'snowseq_keys', 'SELECT') AS read_key_list,
       has_function_privilege(r.oid, 'snowseq_encrypt(bigint)', 'EXECUTE') AS encrypt,
       has_function_privilege(r.oid, 'snowseq_decrypt(bigint)', 'EXECUTE') AS decrypt,
       has_function_privilege(r.oid, 'snowseq_new_key(integer)', 'EXECUTE') AS new_key,
       has_function_privilege(r.oid, 'snowseq_use_key(integer)', 'EXECUTE') AS use_key
FROM pg_roles r WHERE r.rolname IN ('regress_crypt_app', 'regress_crypt_keys', 'regress_crypt_nobody')
ORDER BY 1;
SET ROLE regress_crypt_nobody;
SELECT snowseq_encrypt(1);
SELECT snowseq_decrypt(1);
SELECT snowseq_new_key();
SELECT key FROM snowseq_key_store;
SELECT * FROM snowseq_keys;
RESET ROLE;
SET ROLE regress_crypt_app;
SELECT count(*) FILTER (WHERE snowseq_decrypt(snowseq_encrypt(id)) <> id) AS round_trip_fails
FROM (SELECT (g::bigint << 48) | g AS id FROM generate_series(1, 10000) g) s;
SELECT key FROM snowseq_key_store;
SELECT snowseq_use_key(2);
RESET ROLE;
SET ROLE regress_crypt_keys;
SELECT snowseq_use_key(snowseq_new_key());
SELECT version, state FROM snowseq_keys ORDER BY version;
SELECT key FROM snowseq_key_store;
SELECT snowseq_encrypt(1);
RESET ROLE;
SET ROLE regress_crypt_app;
SELECT (snowseq_encrypt(1) >> 42) & 63 AS version_in_use;
RESET ROLE;
DROP OWNED BY regress_crypt_app, regress_crypt_keys, regress_crypt_nobody;
DROP ROLE regress_crypt_app, regress_crypt_keys, regress_crypt_nobody;

-- a key encrypts only once the transaction that made it has committed, in
-- a parallel worker too (which sees the leader's uncommitted row); the
-- rolled-back version is spent
BEGIN;
SELECT snowseq_use_key(snowseq_new_key());
SELECT pg_temp.err('SELECT snowseq_encrypt(1)');
-- force_parallel_mode, renamed debug_parallel_query in PostgreSQL 16
SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000
                       THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END,
                  'on', true) AS parallel_query_forced;
SET LOCAL parallel_setup_cost = 0;
SET LOCAL parallel_tuple_cost = 0;
EXPLAIN (COSTS OFF) SELECT snowseq_encrypt(1);
SELECT snowseq_encrypt(1);
ROLLBACK;
SELECT (snowseq_encrypt(1) >> 42) & 63 AS version_in_use;

-- versions are never reused: after 63 of them (6 version bits), no more
SELECT count(snowseq_new_key(0)) AS more_keys FROM generate_series(1, 59);
SELECT max(version) AS last_version, count(*) AS keys FROM snowseq_keys;
SELECT snowseq_new_key();
