-- Every bad input: a clear ERROR, the server stays up, nothing changes.
SET timezone = 'UTC';

SELECT snowseq_parse(-1);
SELECT snowseq_time(-42);
SELECT snowseq_node(-9223372036854775808);
SELECT * FROM snowseq_next_n(-1);
SELECT * FROM snowseq_next_n(2147483647);
SELECT snowseq_min_id('infinity');
SELECT snowseq_max_id('-infinity');
-- the time field of the default layout ends in 2094
SELECT snowseq_min_id('2094-09-07 15:47:35.552+00');
SELECT snowseq_max_id('2094-09-07 15:47:35.551+00') = 9223372036854775807 AS last_id;

-- NULL keys: an ID without a gene is never issued
SELECT snowseq_gene(NULL::text);
SELECT snowseq_gene(NULL::bigint);
SELECT snowseq_gene(NULL::bytea);
SELECT snowseq_gene_next(NULL::text);
SELECT snowseq_gene_next(NULL::bigint);
SELECT snowseq_gene_next(NULL::bytea);

-- routing inputs
SELECT shard_of(-1);
SELECT snowseq_gene_range(-1);
SELECT snowseq_gene_range(32768);
SELECT snowseq_route(-1);
SELECT snowseq_route_gene(40000);
-- empty map
SELECT snowseq_route(1);
SELECT snowseq_route_key('buyer');
-- a map that stops short of gene 32767
INSERT INTO snowseq_shard_map VALUES (16383, 'a');
SELECT snowseq_route(16383::bigint << 48);
SELECT snowseq_route(16384::bigint << 48);
DELETE FROM snowseq_shard_map;

-- snowseq_create_shards: wrong counts and wrong parents change nothing
CREATE TABLE plain (id bigint PRIMARY KEY);
CREATE TABLE by_list (id bigint) PARTITION BY LIST (id);
CREATE TABLE by_text (id text) PARTITION BY RANGE (id);
CREATE TABLE by_two (id bigint, b bigint) PARTITION BY RANGE (id, b);
CREATE TABLE by_int (id integer) PARTITION BY RANGE (id);
CREATE TABLE good (id bigint) PARTITION BY RANGE (id);
CREATE TABLE a_table_name_of_sixty_one_characters_whose_partition_overflows (id bigint) PARTITION BY RANGE (id);
SELECT snowseq_create_shards('a_table_name_of_sixty_one_characters_whose_partition_overflows', 16);
SELECT snowseq_create_shards('good', 3);
SELECT snowseq_create_shards('good', 0);
SELECT snowseq_create_shards('good', 65536);
SELECT snowseq_create_shards('plain', 4);
SELECT snowseq_create_shards('by_list', 4);
SELECT snowseq_create_shards('by_text', 4);
SELECT snowseq_create_shards('by_two', 4);
SELECT snowseq_create_shards('by_int', 4);
SELECT snowseq_create_shards('no_such_table', 4);
SELECT count(*) AS partitions FROM pg_inherits;
SELECT count(*) AS map_rows FROM snowseq_shard_map;
-- a map with other boundaries is not overwritten
INSERT INTO snowseq_shard_map VALUES (100, 'x'), (32767, 'y');
SELECT snowseq_create_shards('good', 4);
SELECT count(*) AS partitions FROM pg_inherits;
SELECT * FROM snowseq_shard_map ORDER BY upper_gene;
DELETE FROM snowseq_shard_map;
INSERT INTO snowseq_shard_map VALUES (40000, 'x');

-- the trigger: wrong use is refused clearly
CREATE TABLE t_trig (id bigint PRIMARY KEY, buyer text, price numeric, small integer);
CREATE TRIGGER fill BEFORE INSERT ON t_trig FOR EACH ROW EXECUTE FUNCTION snowseq_fill_gene_id('nope', 'buyer');
INSERT INTO t_trig (buyer) VALUES ('x');
DROP TRIGGER fill ON t_trig;
CREATE TRIGGER fill BEFORE INSERT ON t_trig FOR EACH ROW EXECUTE FUNCTION snowseq_fill_gene_id('id', 'nope');
INSERT INTO t_trig (buyer) VALUES ('x');
DROP TRIGGER fill ON t_trig;
CREATE TRIGGER fill BEFORE INSERT ON t_trig FOR EACH ROW EXECUTE FUNCTION snowseq_fill_gene_id('id', 'price');
INSERT INTO t_trig (price) VALUES (1);
DROP TRIGGER fill ON t_trig;
CREATE TRIGGER fill BEFORE INSERT ON t_trig FOR EACH ROW EXECUTE FUNCTION snowseq_fill_gene_id('small', 'buyer');
INSERT INTO t_trig (id, buyer) VALUES (1, 'x');
DROP TRIGGER fill ON t_trig;
CREATE TRIGGER fill BEFORE INSERT ON t_trig FOR EACH ROW EXECUTE FUNCTION snowseq_fill_gene_id('id');
INSERT INTO t_trig (buyer) VALUES ('x');
DROP TRIGGER fill ON t_trig;
CREATE TRIGGER fill AFTER INSERT ON t_trig FOR EACH ROW EXECUTE FUNCTION snowseq_fill_gene_id('id', 'buyer');
INSERT INTO t_trig (id, buyer) VALUES (2, 'x');
DROP TRIGGER fill ON t_trig;
CREATE TRIGGER fill BEFORE INSERT ON t_trig FOR EACH ROW EXECUTE FUNCTION snowseq_fill_gene_id('id', 'buyer');
INSERT INTO t_trig (buyer) VALUES (NULL);
SELECT snowseq_fill_gene_id();
SELECT count(*) AS rows_in_t_trig FROM t_trig;

-- administration is not for PUBLIC, nor are batches or changing the map
CREATE ROLE snowseq_regress_user;
INSERT INTO snowseq_shard_map VALUES (32767, 'the_shard');
SET ROLE snowseq_regress_user;
SELECT snowseq_reset_state();
SELECT snowseq_create_shards('good', 4);
SELECT count(*) FROM snowseq_next_n(10);
INSERT INTO snowseq_shard_map VALUES (100, 'mine');
UPDATE snowseq_shard_map SET shard = 'mine';
DELETE FROM snowseq_shard_map;
-- but generating and routing are
SELECT snowseq_next() > 0 AS can_generate, snowseq_gene('k') >= 0 AS can_hash;
SELECT snowseq_route(5::bigint << 48) AS can_route, snowseq_route_key('buyer') AS by_key;
RESET ROLE;

-- a granted role may take batches and create shards of its own tables,
-- and may change the map only if granted that too
GRANT EXECUTE ON FUNCTION snowseq_next_n(integer) TO snowseq_regress_user;
GRANT EXECUTE ON FUNCTION snowseq_create_shards(regclass, integer) TO snowseq_regress_user;
GRANT CREATE ON SCHEMA public TO snowseq_regress_user;
DELETE FROM snowseq_shard_map;
SET ROLE snowseq_regress_user;
SELECT count(*) FROM snowseq_next_n(10);
-- the owner's right is checked before any lock is taken
SELECT snowseq_create_shards('good', 4);
-- its own table, but the map is not its to fill
CREATE TABLE own_parted (id bigint) PARTITION BY RANGE (id);
SELECT snowseq_create_shards('own_parted', 2);
RESET ROLE;
GRANT INSERT ON snowseq_shard_map TO snowseq_regress_user;
SET ROLE snowseq_regress_user;
SELECT snowseq_create_shards('own_parted', 2);
RESET ROLE;
REVOKE INSERT ON snowseq_shard_map FROM snowseq_regress_user;
SELECT count(*) AS own_partitions FROM pg_inherits WHERE inhparent = 'own_parted'::regclass;

-- a failed load of the map (here a missing privilege) leaves nothing
-- cached: the next lookup loads it again
DELETE FROM snowseq_shard_map;
INSERT INTO snowseq_shard_map VALUES (32767, 'the_shard');
REVOKE SELECT ON snowseq_shard_map FROM PUBLIC;
SET ROLE snowseq_regress_user;
SELECT snowseq_route(1);
RESET ROLE;
SELECT snowseq_route(1) AS after_failed_load;
GRANT SELECT ON snowseq_shard_map TO PUBLIC;
DELETE FROM snowseq_shard_map;
DROP TABLE own_parted;
REVOKE CREATE ON SCHEMA public FROM snowseq_regress_user;
REVOKE EXECUTE ON FUNCTION snowseq_next_n(integer) FROM snowseq_regress_user;
REVOKE EXECUTE ON FUNCTION snowseq_create_shards(regclass, integer) FROM snowseq_regress_user;
DROP ROLE snowseq_regress_user;

-- a rebalance run id that does not exist: said so, with what to do
SELECT snowseq_rebalance_save_run(jsonb_populate_record(NULL::snowseq_rebalance_runs,
	'{"run_id": 424242, "state": "running"}'));
SELECT snowseq_rebalance_save_steps(ARRAY[jsonb_populate_record(NULL::snowseq_rebalance_steps,
	'{"run_id": 424242, "step": 1, "first_gene": 0, "last_gene": 1}')]);

-- the snowseq. prefix is reserved: a misspelt setting is refused
SET snowseq.node_idd = 3;

-- still up, state untouched
SELECT state, node_id FROM snowseq_status;
SELECT 1 AS alive;
