-- The public form of 128-bit gene IDs: snowseq_encrypt_uuid(id),
-- snowseq_decrypt_uuid(public_id), snowseq_is_public_uuid(public_id).  The
-- 23-bit gene stays, the key version goes into the 20-bit version field,
-- and the 79-bit segment, shifted left by the key's check bits, is
-- FF1-AES256-encrypted with the gene's 3 bytes as tweak.  In a database of
-- its own, whose keys are fixed by this test (crypt.sql spends every key
-- version of the shared database), so that public UUIDs are vectors.
CREATE DATABASE snowseq_public_uuid TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C';
\c snowseq_public_uuid
CREATE EXTENSION snowseq;
SET client_min_messages = notice;

-- the markings and rights of snowseq_encrypt and snowseq_decrypt
SELECT p.oid::regprocedure AS function, p.provolatile AS vol, p.proisstrict AS strict,
       p.proparallel AS par, has_function_privilege('public', p.oid, 'EXECUTE') AS public_exec
FROM pg_proc p
WHERE p.proname IN ('snowseq_encrypt', 'snowseq_decrypt', 'snowseq_is_public_id',
                    'snowseq_encrypt_uuid', 'snowseq_decrypt_uuid', 'snowseq_is_public_uuid')
ORDER BY p.proname;

-- ---- FF1 on 79 bits ----

-- the module's test entry points (not part of the extension): FF1 of any
-- radix over digit strings (checked against NIST's samples in crypt.sql),
-- and the radix-2 path of 128-bit public IDs, over binary strings of up to
-- 112 digits
CREATE FUNCTION pg_temp.ff1(key bytea, tweak bytea, radix integer, input text, decrypt boolean)
	RETURNS text AS '$libdir/snowseq', 'snowseq_ff1_test_vector' LANGUAGE C STRICT;
CREATE FUNCTION pg_temp.ff1_wide(key bytea, tweak bytea, bits text, decrypt boolean)
	RETURNS text AS '$libdir/snowseq', 'snowseq_ff1_test_wide' LANGUAGE C STRICT;

-- a vector of an FF1 implementation written apart from the module's (from
-- SP 800-38G with Python's big integers and OpenSSL's AES): NIST's sample
-- key, the tweak of gene 74565 (0x012345), 79 bits
SELECT pg_temp.ff1_wide(k, '\x012345', b, false) AS wide_path,
       pg_temp.ff1_wide(k, '\x012345', b, false) = c AS matches_vector,
       pg_temp.ff1(k, '\x012345', 2, b, false) = c AS general_path_matches,
       pg_temp.ff1_wide(k, '\x012345', c, true) = b AS decrypts
FROM (SELECT '\x2b7e151628aed2a6abf7158809cf4f3cef4359d8d580aa4f7f036d6f04fc6a94'::bytea AS k,
             lpad(((((1::bigint << 30) | 7) << 4))::bit(64)::text, 79, '0') AS b,
             '1100100111101001111111011110101110111000010001110101001010010110001001010010100'::text AS c) v;

-- the wide path agrees with the general one: lengths 20 to 110 bits (the
-- general path's limit), tweaks of 0, 3 (as 128-bit public IDs use), 11
-- and 30 bytes; lengths up to 112 bits round-trip
SELECT setseed(0.5);
CREATE TEMP TABLE cmp AS
SELECT n, t, decode(md5('k' || n) || md5('K' || t), 'hex') AS key,
       substr(decode(md5('t' || n) || md5('T' || t), 'hex'), 1, t) AS tweak,
       (SELECT string_agg(CASE WHEN random() < 0.5 THEN '0' ELSE '1' END, '')
        FROM generate_series(1, n + 0 * g)) AS x
FROM (VALUES (20), (47), (63), (64), (65), (79), (80), (97), (110), (111), (112)) ns(n),
     (VALUES (0), (3), (11), (30)) ts(t),
     generate_series(1, 25) g;
SELECT count(*) AS compared, count(DISTINCT n) AS lengths,
       count(*) FILTER (WHERE n <= 110) AS compared_with_general_path,
       count(*) FILTER (WHERE n <= 110 AND pg_temp.ff1(key, tweak, 2, x, false) <> pg_temp.ff1_wide(key, tweak, x, false)) AS encrypt_differs,
       count(*) FILTER (WHERE pg_temp.ff1_wide(key, tweak, pg_temp.ff1_wide(key, tweak, x, false), true) <> x) AS round_trip_fails,
       count(*) FILTER (WHERE pg_temp.ff1_wide(key, tweak, x, false) = x) AS unchanged
FROM cmp;
-- test-path inputs it refuses
SELECT pg_temp.ff1_wide('\x00', '\x', repeat('0', 79), false);
SELECT pg_temp.ff1_wide(decode(md5('a') || md5('b'), 'hex'), '\x', repeat('0', 19), false);
SELECT pg_temp.ff1_wide(decode(md5('a') || md5('b'), 'hex'), '\x', repeat('0', 113), false);
SELECT pg_temp.ff1_wide(decode(md5('a') || md5('b'), 'hex'), '\x', repeat('0', 78) || '2', false);

-- ---- helpers: 128-bit gene IDs from and to their fields ----

-- (gene, key version field, 79 segment bits as text) -> uuid
CREATE FUNCTION pg_temp.wide(gene int, kv int, seg text) RETURNS uuid LANGUAGE sql IMMUTABLE AS $$
	SELECT (lpad(to_hex(substr(b, 1, 64)::bit(64)::bigint), 16, '0')
	        || lpad(to_hex(substr(b, 65, 64)::bit(64)::bigint), 16, '0'))::uuid
	FROM (SELECT gene::bit(23)::text || kv::bit(20)::text || substr(seg, 1, 5) || '1000'
	             || substr(seg, 6, 12) || '10' || substr(seg, 18, 62) AS b) s
$$;
-- uuid -> its 128 bits as text
CREATE FUNCTION pg_temp.bits(u uuid) RETURNS text LANGUAGE sql IMMUTABLE AS $$
	SELECT ('x' || replace(u::text, '-', ''))::bit(128)::text
$$;
CREATE FUNCTION pg_temp.key_version(u uuid) RETURNS int LANGUAGE sql IMMUTABLE AS $$
	SELECT substr(pg_temp.bits(u), 24, 20)::bit(20)::int
$$;
CREATE FUNCTION pg_temp.segment(u uuid) RETURNS text LANGUAGE sql IMMUTABLE AS $$
	SELECT substr(b, 44, 5) || substr(b, 53, 12) || substr(b, 67, 62) FROM pg_temp.bits(u) b
$$;
-- the public form of a private ID computed here, from the general FF1
-- path: the gene, version, FF1 over the segment shifted left by c
CREATE FUNCTION pg_temp.public_of(u uuid, key bytea, version int, c int) RETURNS uuid LANGUAGE sql AS $$
	SELECT pg_temp.wide(shard_of(u), version,
	                    pg_temp.ff1(key, decode(lpad(to_hex(shard_of(u)), 6, '0'), 'hex'), 2,
	                                substr(pg_temp.segment(u) || repeat('0', c), c + 1), false))
$$;
-- a segment of counter << 30 | node, as 79 bits of text
CREATE FUNCTION pg_temp.seg(counter bigint, node int) RETURNS text LANGUAGE sql IMMUTABLE AS $$
	SELECT lpad(counter::bit(64)::text, 49, '0') || node::bit(30)::text
$$;
SELECT pg_temp.wide(74565, 0, pg_temp.seg(1, 7)) AS composed,
       pg_temp.segment(pg_temp.wide(74565, 0, pg_temp.seg(1, 7))) = pg_temp.seg(1, 7) AS segment_reads_back,
       shard_of(pg_temp.wide(74565, 0, pg_temp.seg(1, 7))) AS gene;

-- ---- keys ----

-- no key yet
SELECT snowseq_encrypt_uuid(snowseq_gene_uuid('k'));
SELECT snowseq_decrypt_uuid(pg_temp.wide(74565, 1, pg_temp.seg(1, 7)));
SELECT snowseq_is_public_uuid(pg_temp.wide(74565, 1, pg_temp.seg(1, 7)));

-- fixed keys, written into the key table by its owner: version 1, 4 check
-- bits, NIST's FF1-AES256 sample key
INSERT INTO snowseq_key_store (version, state, key, version_bits, check_bits)
VALUES (1, 'active', '\x2b7e151628aed2a6abf7158809cf4f3cef4359d8d580aa4f7f036d6f04fc6a94', 6, 4);
SELECT snowseq_encrypt_uuid(snowseq_gene_uuid('k'));
SELECT snowseq_use_key(1);

-- vectors: the public forms computed by the implementation written apart
-- (see above), and here from the general FF1 path; the gene stays, the
-- version field is 1
CREATE TEMP TABLE vec (id uuid, expected uuid);
INSERT INTO vec VALUES
	('00000000-0000-8000-8000-000000000000', '00000000-0030-8dd6-b5fa-9d77970cb8b2'),
	('02468a00-0000-8000-8000-000040000007', '02468a00-0039-83d3-bef5-dc23a94b1294'),
	('fffffe00-0001-8fff-bfff-ffffffffffff', 'fffffe00-0025-83c0-a99a-fba07ff1dbaa'),
	('00212400-0000-8000-81d6-f34540000007', '00212400-0031-8c4c-a93e-efd6c3663e0d');
SELECT id, snowseq_encrypt_uuid(id) AS public_id,
       snowseq_encrypt_uuid(id) = expected AS matches_vector,
       snowseq_encrypt_uuid(id) = pg_temp.public_of(id, '\x2b7e151628aed2a6abf7158809cf4f3cef4359d8d580aa4f7f036d6f04fc6a94', 1, 4) AS as_computed_here,
       snowseq_decrypt_uuid(expected) = id AS decrypts,
       shard_of(snowseq_encrypt_uuid(id)) = shard_of(id) AS same_gene,
       pg_temp.key_version(snowseq_encrypt_uuid(id)) AS version_field
FROM vec ORDER BY id;

-- untyped literals still resolve to the bigint functions as before
SELECT pg_typeof(snowseq_encrypt('281474976710657')) AS encrypt_type,
       snowseq_decrypt(snowseq_encrypt('281474976710657')) AS round_trip,
       snowseq_is_public_id('281474976710657') AS private_is_not_public,
       pg_typeof(snowseq_encrypt_uuid('02468a00-0000-8000-8000-000040000007')) AS uuid_type;

-- 100,000 round trips: random genes (23 bits) and segments of up to 75
-- bits (the most a key with 4 check bits holds), and the edges
SELECT setseed(0.25);
CREATE TEMP TABLE ids AS
SELECT pg_temp.wide(floor(random() * 8388608)::int, 0,
                    '0000' || lpad(floor(random() * 33554432)::bigint::bit(64)::text, 25, '0')
                           || right(floor(random() * 33554432)::bigint::bit(64)::text, 25)
                           || right(floor(random() * 33554432)::bigint::bit(64)::text, 25)) AS id
FROM generate_series(1, 100000 - 4);
INSERT INTO ids VALUES (pg_temp.wide(0, 0, repeat('0', 79))), (pg_temp.wide(8388607, 0, repeat('0', 79))),
	(pg_temp.wide(0, 0, '0000' || repeat('1', 75))), (pg_temp.wide(8388607, 0, '0000' || repeat('1', 75)));
CREATE TEMP TABLE pub AS SELECT id, snowseq_encrypt_uuid(id) AS p FROM ids;
SELECT count(*) AS ids, count(DISTINCT id) AS distinct_ids,
       count(*) FILTER (WHERE snowseq_decrypt_uuid(p) <> id) AS round_trip_fails,
       count(*) FILTER (WHERE shard_of(p) <> shard_of(id)) AS gene_changed,
       count(*) FILTER (WHERE pg_temp.key_version(p) <> 1) AS not_version_1,
       count(*) FILTER (WHERE NOT snowseq_is_public_uuid(p)) AS not_public,
       count(*) FILTER (WHERE snowseq_is_public_uuid(id)) AS private_taken_for_public,
       count(DISTINCT p) AS distinct_public_ids,
       count(*) FILTER (WHERE p = id) AS unchanged
FROM pub;
-- the segments look random: the order of two public segments tells
-- nothing of the order of their IDs' segments (10,000 pairs)
SELECT count(*) FILTER (WHERE (pg_temp.segment(a.id) < pg_temp.segment(b.id))
                              = (pg_temp.segment(a.p) < pg_temp.segment(b.p))) BETWEEN 4500 AND 5500 AS order_hidden
FROM (SELECT id, p, row_number() OVER (ORDER BY id) AS n FROM pub) a
JOIN (SELECT id, p, row_number() OVER (ORDER BY id) - 10000 AS n FROM pub) b USING (n)
WHERE n <= 10000;

-- IDs of this node (node 7): the same, and routing: shard_of(public) =
-- shard_of(private), snowseq_route of both is the same shard, and the
-- narrow gene of the key
INSERT INTO snowseq_shard_map VALUES (8191, 'a'), (16383, 'b'), (24575, 'c'), (32767, 'd');
SELECT count(*) AS ids,
       count(*) FILTER (WHERE snowseq_decrypt_uuid(snowseq_encrypt_uuid(id)) <> id) AS round_trip_fails,
       count(*) FILTER (WHERE shard_of(snowseq_encrypt_uuid(id)) <> shard_of(id)) AS gene_changed,
       count(*) FILTER (WHERE shard_of(snowseq_encrypt_uuid(id)) >> 8 <> snowseq_gene(k)) AS narrow_gene_changed,
       count(*) FILTER (WHERE snowseq_route(snowseq_encrypt_uuid(id)) <> snowseq_route(id)) AS routed_elsewhere,
       count(*) FILTER (WHERE snowseq_route(snowseq_encrypt_uuid(id)) <> snowseq_route_key(k)) AS not_the_key_shard,
       count(DISTINCT snowseq_route(id)) AS shards
FROM (SELECT 'buyer-' || g % 1000 AS k, snowseq_gene_uuid('buyer-' || g % 1000) AS id
      FROM generate_series(1, 10000) g) s;

-- what decryption guarantees: a UUID that snowseq_encrypt_uuid did not make
-- with a live version decrypts only if its 4 check bits come out zero: of
-- 100,000 random segments under version 1, about 6,250 (bound: 7 standard
-- deviations); a version field other than a live key's never decrypts
SELECT setseed(0.75);
SELECT count(*) FILTER (WHERE snowseq_is_public_uuid(u)) BETWEEN 5700 AND 6800 AS about_one_in_16
FROM (SELECT pg_temp.wide(floor(random() * 8388608)::int, 1,
                          lpad(floor(random() * 67108864)::bigint::bit(64)::text, 26, '0')
                          || right(floor(random() * 67108864)::bigint::bit(64)::text, 26)
                          || right(floor(random() * 134217728)::bigint::bit(64)::text, 27)) AS u
      FROM generate_series(1, 100000)) r;
SELECT count(*) FILTER (WHERE snowseq_is_public_uuid(pg_temp.wide(shard_of(p), v, pg_temp.segment(p)))) AS other_versions_pass
FROM (SELECT p FROM pub LIMIT 100) s, (VALUES (0), (2), (63), (64), (1048575)) vs(v);

-- ---- bad input: clear ERRORs ----
SELECT snowseq_encrypt_uuid(NULL);
SELECT snowseq_decrypt_uuid(NULL);
SELECT snowseq_is_public_uuid(NULL) IS NULL AS strict_null;
-- UUIDs that are no 128-bit gene ID: nil, version 4, version 7, NCS variant
SELECT snowseq_encrypt_uuid('00000000-0000-0000-0000-000000000000');
SELECT snowseq_encrypt_uuid('f47ac10b-58cc-4372-a567-0e02b2c3d479');
SELECT snowseq_decrypt_uuid('01941f29-7fe8-7000-8000-000000000000');
SELECT snowseq_decrypt_uuid('00000000-0030-8dd6-35fa-9d77970cb8b2');
SELECT snowseq_is_public_uuid('f47ac10b-58cc-4372-a567-0e02b2c3d479') AS v4_is_public,
       snowseq_is_public_uuid('00000000-0030-8dd6-35fa-9d77970cb8b2') AS ncs_variant_is_public;
-- a private ID given to decrypt, a public one to encrypt
SELECT snowseq_decrypt_uuid('02468a00-0000-8000-8000-000040000007');
SELECT snowseq_encrypt_uuid('02468a00-0039-83d3-bef5-dc23a94b1294');
-- key versions that do not exist: 5, and 1000 (beyond 6 version bits)
SELECT snowseq_decrypt_uuid(pg_temp.wide(74565, 5, pg_temp.seg(1, 7)));
SELECT snowseq_decrypt_uuid(pg_temp.wide(74565, 1000, pg_temp.seg(1, 7)));
-- check bits that are not zero: a segment FF1-encrypted here without the
-- shift, whose decryption ends in 0111
SELECT snowseq_decrypt_uuid(pg_temp.wide(74565, 1,
	pg_temp.ff1('\x2b7e151628aed2a6abf7158809cf4f3cef4359d8d580aa4f7f036d6f04fc6a94', '\x012345', 2,
	            pg_temp.seg(1, 7), false)));
-- a segment of 76 bits does not fit version 1 (4 check bits)
SELECT snowseq_encrypt_uuid(pg_temp.wide(74565, 0, '000' || repeat('1', 76)));

-- ---- rotation ----
-- version 2, 8 check bits, decrypts at once and encrypts once in use;
-- public IDs of version 1 keep decrypting until it is retired
INSERT INTO snowseq_key_store (version, state, key, version_bits, check_bits)
VALUES (2, 'active', decode(md5('public uuid') || md5('version 2'), 'hex'), 6, 8);
SELECT pg_temp.key_version(snowseq_encrypt_uuid(id)) AS still_version_1 FROM vec ORDER BY id LIMIT 1;
SELECT snowseq_use_key(2);
CREATE TEMP TABLE pub2 AS
SELECT id, snowseq_encrypt_uuid(id) AS p FROM ids WHERE substr(pg_temp.segment(id), 1, 8) = '00000000' LIMIT 10000;
SELECT count(*) AS ids, count(*) FILTER (WHERE pg_temp.key_version(p) <> 2) AS not_version_2,
       count(*) FILTER (WHERE snowseq_decrypt_uuid(p) <> id) AS round_trip_fails,
       count(*) FILTER (WHERE p <> pg_temp.public_of(id, decode(md5('public uuid') || md5('version 2'), 'hex'), 2, 8))
           AS not_as_computed_here
FROM pub2;
SELECT count(*) AS version_1_ids, count(*) FILTER (WHERE snowseq_decrypt_uuid(p) <> id) AS round_trip_fails
FROM pub;
-- an ID whose segment fits version 1 but not version 2
SELECT snowseq_encrypt_uuid(pg_temp.wide(74565, 0, '0000' || repeat('1', 75)));
-- version 1 retired: its public IDs no longer decrypt
SELECT snowseq_retire_key(1);
SELECT snowseq_decrypt_uuid('02468a00-0039-83d3-bef5-dc23a94b1294');
SELECT count(*) FILTER (WHERE snowseq_is_public_uuid(p)) AS version_1_still_valid FROM pub;
SELECT count(*) FILTER (WHERE snowseq_decrypt_uuid(p) <> id) AS version_2_round_trip_fails FROM pub2;

-- ---- rights: nothing for PUBLIC; EXECUTE is a GRANT ----
CREATE ROLE regress_wide_app;
CREATE ROLE regress_wide_nobody;
GRANT EXECUTE ON FUNCTION snowseq_encrypt_uuid(uuid), snowseq_decrypt_uuid(uuid),
	snowseq_is_public_uuid(uuid) TO regress_wide_app;
GRANT SELECT ON pub2 TO regress_wide_app;
SELECT r.rolname,
       has_function_privilege(r.oid, 'snowseq_encrypt_uuid(uuid)', 'EXECUTE') AS encrypt,
       has_function_privilege(r.oid, 'snowseq_decrypt_uuid(uuid)', 'EXECUTE') AS decrypt,
       has_function_privilege(r.oid, 'snowseq_is_public_uuid(uuid)', 'EXECUTE') AS is_public,
       has_table_privilege(r.oid, 'snowseq_key_store', 'SELECT') AS read_keys
FROM pg_roles r WHERE r.rolname IN ('regress_wide_app', 'regress_wide_nobody') ORDER BY 1;
SET ROLE regress_wide_nobody;
SELECT snowseq_encrypt_uuid('02468a00-0000-8000-8000-000040000007');
SELECT snowseq_decrypt_uuid('02468a00-0039-83d3-bef5-dc23a94b1294');
SELECT snowseq_is_public_uuid('02468a00-0039-83d3-bef5-dc23a94b1294');
RESET ROLE;
SET ROLE regress_wide_app;
SELECT count(*) FILTER (WHERE snowseq_decrypt_uuid(snowseq_encrypt_uuid(id)) <> id) AS round_trip_fails,
       count(*) FILTER (WHERE NOT snowseq_is_public_uuid(snowseq_encrypt_uuid(id))) AS not_public
FROM (SELECT id FROM pub2 LIMIT 1000) s;
SELECT key FROM snowseq_key_store;
SELECT snowseq_encrypt(1);
RESET ROLE;
DROP OWNED BY regress_wide_app, regress_wide_nobody;
DROP ROLE regress_wide_app, regress_wide_nobody;

-- ---- parallel workers read the keys themselves ----
CREATE TABLE wide_parallel AS SELECT id FROM pub2;
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
EXPLAIN (COSTS OFF) SELECT count(*) FROM wide_parallel WHERE snowseq_decrypt_uuid(snowseq_encrypt_uuid(id)) <> id;
SELECT count(*) AS round_trip_fails FROM wide_parallel WHERE snowseq_decrypt_uuid(snowseq_encrypt_uuid(id)) <> id;
RESET max_parallel_workers_per_gather;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;

\c contrib_regression
DROP DATABASE snowseq_public_uuid;
