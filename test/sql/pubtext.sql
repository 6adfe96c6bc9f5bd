-- Public IDs as text: snowseq_public_text(id) and snowseq_from_public_text(code),
-- 14 characters of Crockford's base32 (13 digits of the public ID and a
-- check character).  In a database of its own, whose keys are fixed by
-- this test (crypt.sql spends every key version of the shared database),
-- so that codes are vectors.
CREATE DATABASE snowseq_pubtext TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C';
\c snowseq_pubtext
CREATE EXTENSION snowseq;
SET client_min_messages = notice;

-- the same markings and rights as snowseq_encrypt and snowseq_decrypt
SELECT p.oid::regprocedure AS function, p.provolatile AS vol, p.proisstrict AS strict,
       p.proparallel AS par, has_function_privilege('public', p.oid, 'EXECUTE') AS public_exec
FROM pg_proc p
WHERE p.proname IN ('snowseq_encrypt', 'snowseq_decrypt', 'snowseq_public_text', 'snowseq_from_public_text')
ORDER BY p.proname, p.pronargs;

-- ---- the code alone ----

-- the module's test entry points (not part of the extension): a number
-- written as a code and read back, without encryption
CREATE FUNCTION pg_temp.enc(value bigint) RETURNS text
	AS '$libdir/snowseq', 'snowseq_pubtext_test_encode' LANGUAGE C STRICT;
CREATE FUNCTION pg_temp.dec(code text) RETURNS bigint
	AS '$libdir/snowseq', 'snowseq_pubtext_test_decode' LANGUAGE C STRICT;

-- the check character, computed here another way: the weight of the i-th
-- of the 13 digits is a^(14 - i) in GF(32) = GF(2)[x] / (x^5 + x^2 + 1),
-- a = x, products by carry-less multiplication and reduction
CREATE FUNCTION pg_temp.gf_mul(a int, b int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
	r int := 0;
BEGIN
	FOR k IN 0..4 LOOP
		IF (b >> k) & 1 = 1 THEN
			r := r # (a << k);
		END IF;
	END LOOP;
	FOR k IN REVERSE 8..5 LOOP
		IF (r >> k) & 1 = 1 THEN
			r := r # (37 << (k - 5));
		END IF;
	END LOOP;
	RETURN r;
END
$$;
CREATE FUNCTION pg_temp.check_char(digits text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
	alphabet text := '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
	s int := 0;
	w int := 2;
BEGIN
	FOR i IN REVERSE 13..1 LOOP
		s := s # pg_temp.gf_mul(w, strpos(alphabet, substr(digits, i, 1)) - 1);
		w := pg_temp.gf_mul(w, 2);
	END LOOP;
	RETURN substr(alphabet, s + 1, 1);
END
$$;
-- the digits, computed here another way: 5 bits at a time from the top
CREATE FUNCTION pg_temp.digits(v bigint) RETURNS text LANGUAGE sql IMMUTABLE AS $$
	SELECT string_agg(substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ',
	                         ((v >> (5 * (12 - i))) & 31)::int + 1, 1), '' ORDER BY i)
	FROM generate_series(0, 12) i
$$;

-- vectors
SELECT v, pg_temp.enc(v) AS code, pg_temp.dec(pg_temp.enc(v)) = v AS reads_back,
       pg_temp.enc(v) = pg_temp.digits(v) || pg_temp.check_char(pg_temp.digits(v)) AS as_computed_here
FROM (VALUES (0::bigint), (1), (31), (32), (1234567890123456789), (9223372036854775806),
             (9223372036854775807)) t(v);
-- 10,000 random numbers: digits and check character as computed here
SELECT setseed(0.125);
SELECT count(*) AS numbers,
       count(*) FILTER (WHERE pg_temp.enc(v) <> pg_temp.digits(v) || pg_temp.check_char(pg_temp.digits(v))) AS differ,
       count(*) FILTER (WHERE pg_temp.dec(pg_temp.enc(v)) <> v) AS round_trip_fails
FROM (SELECT (floor(random() * 2147483648)::bigint << 32) | floor(random() * 4294967296)::bigint AS v
      FROM generate_series(1, 10000)) r;

-- catches the ERROR of reading a code: the number, or the kind of ERROR
CREATE FUNCTION pg_temp.try_dec(code text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	RETURN pg_temp.dec(code)::text;
EXCEPTION WHEN OTHERS THEN
	RETURN CASE WHEN SQLERRM LIKE '% is mistyped' THEN 'mistyped' ELSE SQLERRM END;
END
$$;

-- The check character refuses every single substitution and every
-- transposition of neighbours, exhaustively: the check is linear, so
-- whether a change is refused depends only on its position and on the
-- digits before and after it, and each (position, old digit, new
-- character) and each (position, digit pair) is tried here on a fixed
-- background.  Substitutions: at each of the 14 positions, each digit the
-- position can hold (0 to 7 first: 63 bits), replaced by each of the 70
-- characters that read as a digit (32 symbols, their lower case, O o I i L l).
CREATE TEMP TABLE subst_base AS
SELECT i, pg_temp.enc((1234567890123456789 & ~(31::bigint << (5 * (12 - i)))) | (a::bigint << (5 * (12 - i)))) AS code
FROM generate_series(0, 12) i, generate_series(0, 31) a
WHERE i > 0 OR a <= 7
UNION ALL
-- the check character: the last digit takes its 32 values, and the check
-- character with it
SELECT 13, pg_temp.enc((1234567890123456789 & ~31::bigint) | a) FROM generate_series(0, 31) a;
SELECT count(*) AS bases, count(DISTINCT (i, substr(code, i + 1, 1))) AS position_digit_pairs FROM subst_base;
CREATE TEMP TABLE subst AS
SELECT b.code, overlay(b.code PLACING c FROM b.i + 1) AS typo,
       upper(translate(c, 'OoIiLl', '001111')) = substr(b.code, b.i + 1, 1) AS same_digit
FROM subst_base b,
     regexp_split_to_table('0123456789ABCDEFGHJKMNPQRSTVWXYZabcdefghjkmnpqrstvwxyzOoIiLl', '') c;
SELECT count(*) AS substitutions,
       count(*) FILTER (WHERE NOT same_digit) AS other_digit,
       count(*) FILTER (WHERE NOT same_digit AND pg_temp.try_dec(typo) = 'mistyped') AS refused_as_mistyped,
       count(*) FILTER (WHERE NOT same_digit AND pg_temp.try_dec(typo) <> 'mistyped') AS not_refused,
       count(*) FILTER (WHERE same_digit AND pg_temp.try_dec(typo) = pg_temp.dec(code)::text) AS same_digit_reads_same
FROM subst;
-- transpositions: at each of the 13 pairs of neighbours, each pair of
-- digits the pair can hold (the last pair: each last digit with each check
-- character, as the two digits before the check character vary)
CREATE TEMP TABLE swap_base AS
SELECT i, pg_temp.enc((1234567890123456789 & ~(1023::bigint << (5 * (11 - i)))) | (ab::bigint << (5 * (11 - i)))) AS code
FROM generate_series(0, 11) i, generate_series(0, 1023) ab
WHERE i > 0 OR ab < 256
UNION ALL
SELECT 12, pg_temp.enc((1234567890123456789 & ~1023::bigint) | ab) FROM generate_series(0, 1023) ab;
SELECT count(*) AS bases, count(DISTINCT (i, substr(code, i + 1, 2))) AS position_pairs FROM swap_base;
CREATE TEMP TABLE swap AS
SELECT code, overlay(code PLACING substr(code, i + 2, 1) || substr(code, i + 1, 1) FROM i + 1) AS typo
FROM swap_base WHERE substr(code, i + 1, 1) <> substr(code, i + 2, 1);
SELECT count(*) AS transpositions,
       count(*) FILTER (WHERE pg_temp.try_dec(typo) = 'mistyped') AS refused_as_mistyped,
       count(*) FILTER (WHERE pg_temp.try_dec(typo) <> 'mistyped') AS not_refused
FROM swap;

-- ---- keys ----

-- no key yet
SELECT snowseq_public_text(1);
SELECT snowseq_from_public_text(pg_temp.enc((12345::bigint << 48) | (1::bigint << 42) | 777));

-- fixed keys, written into the key table by its owner: version 1, 4 check
-- bits, NIST's FF1-AES256 sample key; version 2, 8 check bits, made later
INSERT INTO snowseq_key_store (version, state, key, version_bits, check_bits)
VALUES (1, 'active', '\x2b7e151628aed2a6abf7158809cf4f3cef4359d8d580aa4f7f036d6f04fc6a94', 6, 4);
SELECT snowseq_public_text(1);
SELECT snowseq_use_key(1);

-- vectors: each code is that of the public ID, computed here from the
-- module's FF1 test path (checked against NIST in crypt.sql): the gene,
-- version 1, FF1 over 42 bits of segment << 4 with the gene as tweak
CREATE FUNCTION pg_temp.ff1_bits(key bytea, tweak bytea, nbits integer, x bigint, decrypt boolean)
	RETURNS bigint AS '$libdir/snowseq', 'snowseq_ff1_test_bits' LANGUAGE C STRICT;
CREATE FUNCTION pg_temp.public_id_v1(id bigint) RETURNS bigint LANGUAGE sql AS $$
	SELECT ((id >> 48) << 48) | (1::bigint << 42) |
	       pg_temp.ff1_bits('\x2b7e151628aed2a6abf7158809cf4f3cef4359d8d580aa4f7f036d6f04fc6a94',
	                        decode(lpad(to_hex(id >> 48), 4, '0'), 'hex'), 42,
	                        (id & ((1::bigint << 48) - 1)) << 4, false)
$$;
SELECT id, snowseq_public_text(id) AS code,
       snowseq_public_text(id) = pg_temp.enc(pg_temp.public_id_v1(id)) AS as_computed_here,
       snowseq_from_public_text(snowseq_public_text(id)) = id AS reads_back
FROM (VALUES (0::bigint), (1), ((12345::bigint << 48) | 777), ((32767::bigint << 48) | ((1::bigint << 38) - 1)),
             (snowseq_gene_next('alice'::text) & ~((1::bigint << 48) - 1))) t(id)
ORDER BY id;

-- 1,000,000 round trips with random genes and segments up to the largest
-- version 1 holds (2^38 - 1), and the edges
SELECT setseed(0.25);
CREATE TEMP TABLE ids AS
SELECT (floor(random() * 32768)::bigint << 48) | floor(random() * 2 ^ 38)::bigint AS id
FROM generate_series(1, 1000000 - 4);
INSERT INTO ids VALUES (0), ((1::bigint << 38) - 1), (32767::bigint << 48),
	((32767::bigint << 48) | ((1::bigint << 38) - 1));
CREATE TEMP TABLE codes AS SELECT id, snowseq_public_text(id) AS code FROM ids;
SELECT count(*) AS ids,
       count(*) FILTER (WHERE snowseq_from_public_text(code) <> id) AS round_trip_fails,
       count(*) FILTER (WHERE code !~ '^[0-7][0-9A-HJKMNP-TV-Z]{13}$') AS not_14_symbols,
       count(*) FILTER (WHERE code <> pg_temp.enc(snowseq_encrypt(id))) AS not_encrypt_then_encode,
       count(DISTINCT code) = count(DISTINCT id) AS one_code_each
FROM codes;
-- IDs of this node
SELECT count(*) AS ids,
       count(*) FILTER (WHERE snowseq_from_public_text(snowseq_public_text(id)) <> id) AS round_trip_fails
FROM (SELECT snowseq_gene_next('buyer-' || g % 100) AS id FROM generate_series(1, 10000) g) s;

-- the same code read in other spellings: lower case, mixed case, hyphens
-- in groups, everywhere, doubled, at the ends; O for 0, I and L for 1
CREATE TEMP TABLE some_codes AS SELECT id, code FROM codes LIMIT 10000;
SELECT setseed(0.5);
SELECT count(*) AS codes,
       count(*) FILTER (WHERE snowseq_from_public_text(lower(code)) <> id) AS lower_fails,
       count(*) FILTER (WHERE snowseq_from_public_text(
           (SELECT string_agg(CASE WHEN random() < 0.5 THEN lower(c) ELSE c END, '' ORDER BY n)
            FROM regexp_split_to_table(code, '') WITH ORDINALITY t(c, n))) <> id) AS mixed_case_fails,
       count(*) FILTER (WHERE snowseq_from_public_text(
           substr(code, 1, 4) || '-' || substr(code, 5, 5) || '-' || substr(code, 10)) <> id) AS grouped_fails,
       count(*) FILTER (WHERE snowseq_from_public_text(
           regexp_replace(code, '(.)', '-\1', 'g') || '--') <> id) AS hyphens_everywhere_fails,
       count(*) FILTER (WHERE snowseq_from_public_text(translate(code, '01', 'oi')) <> id) AS o_i_fails,
       count(*) FILTER (WHERE snowseq_from_public_text(translate(code, '01', 'OL')) <> id) AS o_l_fails,
       count(*) FILTER (WHERE code ~ '[01]') AS with_0_or_1
FROM some_codes;

-- every single substitution (by each of the 31 other symbols) and every
-- transposition of neighbours of 10,000 codes is refused, by the check
-- character, before decryption
CREATE FUNCTION pg_temp.try(code text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	RETURN snowseq_from_public_text(code)::text;
EXCEPTION WHEN OTHERS THEN
	RETURN CASE WHEN SQLERRM LIKE '% is mistyped' THEN 'mistyped' ELSE SQLERRM END;
END
$$;
SELECT count(*) AS substitutions,
       count(*) FILTER (WHERE r = 'mistyped') AS refused_as_mistyped,
       count(*) FILTER (WHERE r <> 'mistyped') AS accepted_or_other_error
FROM (SELECT pg_temp.try(overlay(code PLACING c FROM i)) AS r
      FROM some_codes, generate_series(1, 14) i,
           regexp_split_to_table('0123456789ABCDEFGHJKMNPQRSTVWXYZ', '') c
      WHERE substr(code, i, 1) <> c) s;
SELECT count(*) AS transpositions,
       count(*) FILTER (WHERE r = 'mistyped') AS refused_as_mistyped,
       count(*) FILTER (WHERE r <> 'mistyped') AS accepted_or_other_error
FROM (SELECT pg_temp.try(overlay(code PLACING substr(code, i + 1, 1) || substr(code, i, 1) FROM i)) AS r
      FROM some_codes, generate_series(1, 13) i
      WHERE substr(code, i, 1) <> substr(code, i + 1, 1)) s;

-- rotation: version 2 (8 check bits) decrypts at once, encrypts once in
-- use; codes of version 1 keep reading
INSERT INTO snowseq_key_store (version, state, key, version_bits, check_bits)
VALUES (2, 'active', decode(md5('pubtext') || md5('version 2'), 'hex'), 6, 8);
SELECT snowseq_public_text(777) = pg_temp.enc(pg_temp.public_id_v1(777)) AS still_version_1;
SELECT snowseq_use_key(2);
SELECT id, snowseq_public_text(id) AS code, (pg_temp.dec(snowseq_public_text(id)) >> 42) & 63 AS version,
       snowseq_from_public_text(snowseq_public_text(id)) = id AS reads_back
FROM (VALUES (1::bigint), ((12345::bigint << 48) | 777)) t(id);
SELECT count(*) AS version_1_codes, count(*) FILTER (WHERE snowseq_from_public_text(code) <> id) AS round_trip_fails
FROM some_codes;
-- an ID that fits version 1 but not version 2
SELECT snowseq_public_text((12345::bigint << 48) | (1::bigint << 34));
-- version 1 retired: its codes no longer read
SELECT snowseq_retire_key(1);
SELECT snowseq_from_public_text(snowseq_public_text((12345::bigint << 48) | 777)) AS version_2_reads;
SELECT snowseq_from_public_text(code) FROM codes WHERE id = 0;
SELECT count(*) FILTER (WHERE pg_temp.try(code) ~ '^[0-9]+$') AS still_read FROM some_codes;

-- ---- type prefixes ----
-- ord_<code>: the prefix, an underscore, the same 14 characters
SELECT snowseq_public_text(1, 'ord') = 'ord_' || snowseq_public_text(1) AS prefixed,
       snowseq_from_public_text(snowseq_public_text(1, 'ord'), 'ord') = 1 AS reads_back,
       snowseq_from_public_text(upper(snowseq_public_text(1, 'ord')), 'ord') = 1 AS case_ignored,
       snowseq_from_public_text(snowseq_public_text(1, 'line_item'), 'line_item') = 1 AS underscores_in_prefix;
-- another kind of ID, none, a prefix where none is expected: refused
SELECT snowseq_from_public_text(snowseq_public_text(1, 'cus'), 'ord');
SELECT snowseq_from_public_text(snowseq_public_text(1), 'ord');
SELECT snowseq_from_public_text(snowseq_public_text(1, 'ord'));
SELECT snowseq_from_public_text('ord_' || snowseq_public_text(1), 'order');
-- the code after the prefix is checked as ever
SELECT snowseq_from_public_text(overlay(snowseq_public_text(1, 'ord') PLACING 'Z' FROM 9), 'ord');
-- prefixes: 1 to 63 of a-z and _, a letter first and last
SELECT snowseq_public_text(1, NULL);
SELECT snowseq_public_text(1, '');
SELECT snowseq_public_text(1, 'Ord');
SELECT snowseq_public_text(1, '_ord');
SELECT snowseq_public_text(1, 'ord_');
SELECT snowseq_public_text(1, 'or-d');
SELECT snowseq_public_text(1, repeat('a', 64));
SELECT length(snowseq_public_text(1, repeat('a', 63))) AS longest;
SELECT snowseq_from_public_text(snowseq_public_text(1, 'ord'), 'ORD');

-- ---- bad input: clear ERRORs ----
SELECT snowseq_public_text(NULL);
SELECT snowseq_public_text(-1);
SELECT snowseq_from_public_text(NULL);
SELECT snowseq_from_public_text('');
SELECT snowseq_from_public_text('---');
SELECT snowseq_from_public_text('0123456789ABCDE');
SELECT snowseq_from_public_text('0123-4567-89AB-CDEF-GHJK');
SELECT snowseq_from_public_text('0123456789ABC');
SELECT snowseq_from_public_text('0123456789ABC$');
SELECT snowseq_from_public_text('0123 456789ABC');
SELECT snowseq_from_public_text(E'0123\t456789ABC');
SELECT snowseq_from_public_text('0123456789ABCU');
SELECT snowseq_from_public_text('012345-6789ABCé');
-- mistyped: the check character does not match
SELECT snowseq_from_public_text(overlay(snowseq_public_text(1) PLACING 'Z' FROM 5));
-- a valid check character on a number of 64 bits
SELECT snowseq_from_public_text('8000000000000' || pg_temp.check_char('8000000000000'));
SELECT snowseq_from_public_text('ZZZZZZZZZZZZZ' || pg_temp.check_char('ZZZZZZZZZZZZZ'));
-- codes that read but do not decrypt: a private ID (version 0), a version
-- that does not exist, a retired version, and check bits that are not zero
SELECT snowseq_from_public_text(pg_temp.enc((12345::bigint << 48) | 777));
SELECT snowseq_from_public_text(pg_temp.enc((12345::bigint << 48) | (5::bigint << 42) | 777));
SELECT snowseq_from_public_text(pg_temp.enc(pg_temp.public_id_v1(1)));
SELECT snowseq_from_public_text(pg_temp.enc((12345::bigint << 48) | (2::bigint << 42) | 777));
-- the test entry points refuse what they cannot write
SELECT pg_temp.enc(-1);

-- ---- rights and parallel workers ----
CREATE ROLE regress_pubtext_app;
CREATE ROLE regress_pubtext_nobody;
GRANT EXECUTE ON FUNCTION snowseq_public_text(bigint), snowseq_from_public_text(text) TO regress_pubtext_app;
SET ROLE regress_pubtext_nobody;
SELECT snowseq_public_text(1);
SELECT snowseq_from_public_text('00000000000000');
RESET ROLE;
SET ROLE regress_pubtext_app;
SELECT count(*) FILTER (WHERE snowseq_from_public_text(snowseq_public_text(id)) <> id) AS round_trip_fails
FROM (SELECT (g::bigint << 48) | g AS id FROM generate_series(1, 1000) g) s;
SELECT snowseq_encrypt(1);
RESET ROLE;
DROP OWNED BY regress_pubtext_app, regress_pubtext_nobody;
DROP ROLE regress_pubtext_app, regress_pubtext_nobody;

CREATE TABLE pubtext_parallel AS SELECT id FROM ids WHERE id & ((1::bigint << 48) - 1) < (1::bigint << 34) LIMIT 10000;
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
EXPLAIN (COSTS OFF) SELECT count(*) FROM pubtext_parallel WHERE snowseq_from_public_text(snowseq_public_text(id)) <> id;
SELECT count(*) AS round_trip_fails FROM pubtext_parallel WHERE snowseq_from_public_text(snowseq_public_text(id)) <> id;
RESET max_parallel_workers_per_gather;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;

\c contrib_regression
DROP DATABASE snowseq_pubtext;
