-- Sharding genes: test vectors (README lists them; they were checked
-- against independent XXH64 and MurmurHash3_x64_128 implementations).
SELECT k AS key, snowseq_gene(k) AS gene FROM (VALUES
	(''), ('a'), ('abc'), ('hello'), ('Zürich-東京'),
	('order-key-0123456789-abcdefghijklmnopqrs'),
	('6ba7b810-9dad-11d1-80b4-00c04fd430c8')) v(k);
SELECT k AS key, snowseq_gene(k) AS gene
FROM (VALUES (0::bigint), (1), (-1), (1234567890123)) v(k);
SELECT k AS key, snowseq_gene(k) AS gene
FROM (VALUES (''::bytea), ('\x00'), ('\xdeadbeef')) v(k);
SELECT octet_length('order-key-0123456789-abcdefghijklmnopqrs') AS len40,
       octet_length(convert_to('Zürich-東京', 'UTF8')) AS utf8_len;

-- the three key types agree on the bytes they hash
SELECT snowseq_gene('abc') = snowseq_gene('\x616263'::bytea) AS text_is_utf8_bytes,
       snowseq_gene('Zürich-東京') = snowseq_gene(convert_to('Zürich-東京', 'UTF8')) AS utf8_ok,
       snowseq_gene(1::bigint) = snowseq_gene('\x0100000000000000'::bytea) AS bigint_is_le,
       snowseq_gene(-2::bigint) = snowseq_gene('\xfeffffffffffffff'::bytea) AS negative_le;

-- a text key is hashed as UTF-8 whatever the database encoding
CREATE DATABASE snowseq_latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0;
\c snowseq_latin1
CREATE EXTENSION snowseq;
SELECT snowseq_gene(convert_from('\x5afc72696368', 'LATIN1')) AS latin1_text,
       snowseq_gene('\x5ac3bc72696368'::bytea) AS utf8_bytes;
\c contrib_regression
DROP DATABASE snowseq_latin1;

-- genes spread evenly over 0..32767
SELECT min(g) >= 0 AS in_range_low, max(g) <= 32767 AS in_range_high,
       count(DISTINCT g) BETWEEN 8300 AND 8900 AS spread,
       count(*) FILTER (WHERE g < 16384) BETWEEN 4700 AND 5300 AS balanced
FROM (SELECT snowseq_gene('buyer-' || i) AS g FROM generate_series(1, 10000) i) s;

-- gene IDs: the gene on top, positive, increasing within a gene,
-- the node id (7) in the low node_bits of the segment
CREATE TEMP TABLE gids AS
SELECT n, snowseq_gene_next('buyer-' || (n % 10)) AS id, 'buyer-' || (n % 10) AS buyer
FROM generate_series(1, 5000) n;
SELECT bool_and(id > 0) AS positive,
       bool_and(shard_of(id) = snowseq_gene(buyer)) AS gene_on_top,
       bool_and((id & ((1::bigint << 48) - 1)) & 1023 = 7) AS node_interleaved,
       count(DISTINCT id) AS distinct_ids
FROM gids;
SELECT bool_and(id > prev) AS increasing_within_gene
FROM (SELECT id, lag(id) OVER (PARTITION BY buyer ORDER BY n) AS prev FROM gids) t
WHERE prev IS NOT NULL;
SELECT shard_of(snowseq_gene_next(42::bigint)) = snowseq_gene(42::bigint) AS bigint_key,
       shard_of(snowseq_gene_next('\xdeadbeef'::bytea)) = 12354 AS bytea_key,
       shard_of(snowseq_gene_next('')) = 27033 AS empty_key;

-- the trigger fills a NULL ID from the business key, keeps a given one
CREATE TABLE gene_orders (order_id bigint PRIMARY KEY, buyer_id text NOT NULL, amount numeric);
CREATE TRIGGER gene_orders_id BEFORE INSERT ON gene_orders
	FOR EACH ROW EXECUTE FUNCTION snowseq_fill_gene_id('order_id', 'buyer_id');
INSERT INTO gene_orders (buyer_id, amount) VALUES ('alice', 10), ('bob', 20), ('alice', 30);
INSERT INTO gene_orders (order_id, buyer_id, amount) VALUES (12345, 'carol', 40);
SELECT buyer_id, amount, shard_of(order_id) = snowseq_gene(buyer_id) AS routed,
       order_id <@ snowseq_key_range(buyer_id) AS in_key_range
FROM gene_orders ORDER BY amount;
-- integer and bigint key columns hash as bigint
CREATE TABLE int_keyed (id bigint, k integer);
CREATE TRIGGER int_keyed_id BEFORE INSERT ON int_keyed
	FOR EACH ROW EXECUTE FUNCTION snowseq_fill_gene_id('id', 'k');
INSERT INTO int_keyed (k) VALUES (1), (-1);
SELECT k, shard_of(id) = snowseq_gene(k::bigint) AS as_bigint FROM int_keyed ORDER BY k;

-- a char(n) key is hashed as snowseq_gene(key) hashes it: without padding
-- (its cast to text drops the trailing blanks), also through a domain
CREATE DOMAIN buyer_code AS char(12);
CREATE TABLE char_keyed (id bigint, k char(10));
CREATE TRIGGER char_keyed_id BEFORE INSERT ON char_keyed
	FOR EACH ROW EXECUTE FUNCTION snowseq_fill_gene_id('id', 'k');
CREATE TABLE domain_keyed (id bigint, d buyer_code);
CREATE TRIGGER domain_keyed_id BEFORE INSERT ON domain_keyed
	FOR EACH ROW EXECUTE FUNCTION snowseq_fill_gene_id('id', 'd');
INSERT INTO char_keyed (k) VALUES ('alice'), ('bob  '), ('Zürich'), ('');
INSERT INTO domain_keyed (d) VALUES ('alice'), ('carol');
SELECT k, shard_of(id) = snowseq_gene(k) AS gene_of_key,
       shard_of(id) = snowseq_gene(rtrim(k::text)) AS unpadded,
       id <@ snowseq_key_range(k) AS in_key_range
FROM char_keyed ORDER BY k;
SELECT d, shard_of(id) = snowseq_gene(d) AS gene_of_key, id <@ snowseq_key_range(d) AS in_key_range
FROM domain_keyed ORDER BY d;
