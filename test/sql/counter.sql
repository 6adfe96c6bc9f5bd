-- Named counters and formatted serials, on a server with snowseq.node_id = 7.
SET timezone = 'UTC';

-- a counter: 1, 2, 3 ...
SELECT snowseq_create_counter('invoice');
SELECT snowseq_counter_next('invoice') FROM generate_series(1, 3);
-- interleaved over 4 nodes: this node (7 % 4 = 3) takes start + 3, + 7, ...
SELECT snowseq_create_counter('tickets', start => 100, nodes => 4);
SELECT snowseq_counter_next('tickets') FROM generate_series(1, 3);

-- bad names and definitions
SELECT snowseq_counter_next('nope');
SELECT snowseq_create_counter('invoice');
SELECT snowseq_create_counter('');
SELECT snowseq_create_counter(repeat('x', 64));
SELECT snowseq_create_counter('neg', start => -1);
SELECT snowseq_create_counter('zero_nodes', nodes => 0);
SELECT snowseq_create_counter(NULL);
SELECT snowseq_create_counter('null_start', start => NULL);
SELECT snowseq_counter_next(NULL);

-- dropped: no more values; created again with the same definition it
-- continues where it was, never issuing a value twice
SELECT snowseq_drop_counter('invoice');
SELECT snowseq_counter_next('invoice');
SELECT snowseq_drop_counter('invoice');
SELECT snowseq_create_counter('invoice');
SELECT snowseq_counter_next('invoice');
-- another definition would issue old values again: refused, unless asked
SELECT snowseq_drop_counter('invoice');
SELECT snowseq_create_counter('invoice', start => 1000);
SELECT snowseq_create_counter('invoice', start => 1, restart => true);
SELECT snowseq_counter_next('invoice') AS restarted;

-- raise: the next value is above the one given, never below the last
SELECT snowseq_counter_raise('tickets', 500) AS next_after_raise;
SELECT snowseq_counter_next('tickets');
SELECT snowseq_counter_raise('tickets', 10) AS never_lowers;
SELECT snowseq_counter_next('tickets');

-- a serial: the number restarts every day of the format, in its time zone
SELECT snowseq_create_serial('inv', 'INV-YYYYMMDD-######');
SELECT s ~ '^INV-[0-9]{8}-00000[123]$' AS shaped,
       substr(s, 5, 8)::date BETWEEN current_date - 1 AND current_date + 1 AS today,
       right(s, 6)
FROM (SELECT snowseq_serial('inv') AS s FROM generate_series(1, 3)) t;
-- the node id in the serial; another time zone; a monthly and a yearly
-- number; a literal escaped
SELECT snowseq_create_serial('node_serial', 'N@@-####');
SELECT snowseq_serial('node_serial');
SELECT snowseq_create_serial('tokyo', 'YYMMDD/#####', 'Asia/Tokyo', 10);
SELECT substr(s, 1, 6) = to_char(now() AT TIME ZONE 'Asia/Tokyo', 'YYMMDD') AS tokyo_date, right(s, 5)
FROM snowseq_serial('tokyo') s;
SELECT snowseq_create_serial('monthly', 'YYYY-MM/###');
SELECT snowseq_serial('monthly') = to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM') || '/001' AS monthly;
SELECT snowseq_create_serial('escaped', 'A\DDRESS-##');
SELECT snowseq_serial('escaped');

-- the digits run out: an ERROR, never a wider or a repeated number
SELECT snowseq_create_serial('tiny', 'T#');
SELECT snowseq_serial('tiny') FROM generate_series(1, 9);
SELECT snowseq_serial('tiny');

-- bad formats and time zones
SELECT snowseq_create_serial('f1', '');
SELECT snowseq_create_serial('f2', 'no number');
SELECT snowseq_create_serial('f3', '##-##');
SELECT snowseq_create_serial('f4', 'DD-####');
SELECT snowseq_create_serial('f5', 'MM-####');
SELECT snowseq_create_serial('f6', '####\');
SELECT snowseq_create_serial('f7', repeat('#', 19));
SELECT snowseq_create_serial('f8', '@@-@-####');
SELECT snowseq_create_serial('f9', 'YYYY-####', 'Mars/Olympus_Mons');
SELECT snowseq_create_serial('f10', NULL);
-- a counter is not a serial, nor the other way round
SELECT snowseq_serial('invoice');
SELECT snowseq_counter_next('inv');
SELECT snowseq_create_serial('inv', 'INV-YYYYMMDD-######');

-- what there is
SELECT name, kind, start, nodes, format, time_zone, dropped, last_value
FROM snowseq_counter_status ORDER BY name;

-- rights: taking values is a grant on the counter; creating is EXECUTE on
-- the create functions; dropping is the counter owner's; the definitions
-- table is snowseq's alone (no role may read or write it)
CREATE ROLE snowseq_counter_user;
SET ROLE snowseq_counter_user;
SELECT snowseq_counter_next('tickets');
SELECT snowseq_serial('inv');
SELECT snowseq_counter_raise('tickets', 1000000);
SELECT snowseq_create_counter('mine');
SELECT snowseq_drop_counter('tickets');
SELECT count(*) > 0 AS can_read_definitions FROM snowseq_counters;
RESET ROLE;
GRANT EXECUTE ON FUNCTION snowseq_counter_next(text) TO snowseq_counter_user;
-- EXECUTE is not enough: the counter must be granted too (counter_rights)
SET ROLE snowseq_counter_user;
SELECT snowseq_counter_next('tickets');
RESET ROLE;
SELECT snowseq_grant_counter('tickets', 'snowseq_counter_user');
SET ROLE snowseq_counter_user;
SELECT snowseq_counter_next('tickets') % 4 AS node_offset;
RESET ROLE;
REVOKE EXECUTE ON FUNCTION snowseq_counter_next(text) FROM snowseq_counter_user;
-- a role holding a counter's grant cannot be dropped before it gives it up
DROP ROLE snowseq_counter_user;
DROP OWNED BY snowseq_counter_user;
DROP ROLE snowseq_counter_user;

-- whole life: a value once issued is never issued again, whatever the
-- definitions table says
-- a deleted definition row (even by a superuser) and another start: the
-- counter continues above everything it issued
SELECT snowseq_create_counter('z', start => 100);
SELECT min(v), max(v) FROM (SELECT snowseq_counter_next('z') AS v FROM generate_series(1, 100)) t;
DELETE FROM snowseq_counters WHERE name = 'z';
SELECT snowseq_create_counter('z', start => 0);
SELECT snowseq_counter_next('z') > 199 AS above_all_issued;
-- a definition changed by hand in the table continues above it too
SELECT snowseq_create_counter('u', start => 100);
SELECT max(v) FROM (SELECT snowseq_counter_next('u') AS v FROM generate_series(1, 10)) t;
UPDATE snowseq_counters SET start = 0, nodes = 3 WHERE name = 'u';
SELECT snowseq_counter_next('u') > 109 AS above_all_issued;
-- its floor sequence says how far it went; it is no member of the
-- extension, in schema snowseq_state, which no member is either, owned by
-- the bootstrap superuser with CREATE for nobody else
SELECT c.relkind, n.nspname, d.description, e.objid IS NULL AS not_a_member
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_description d ON d.objoid = c.oid AND d.classoid = 'pg_class'::regclass
LEFT JOIN pg_depend e ON e.objid = c.oid AND e.deptype = 'e'
WHERE c.relname LIKE 'snowseq_floor_%' AND d.description LIKE '%"z"%';
SELECT n.nspowner = 10 AS bootstrap_owned,
	NOT EXISTS (SELECT FROM pg_depend e WHERE e.objid = n.oid AND e.deptype = 'e') AS not_a_member,
	(SELECT array_agg(a.privilege_type ORDER BY a.privilege_type) FROM aclexplode(n.nspacl) a
	 WHERE a.grantee <> n.nspowner) AS others_may
FROM pg_namespace n WHERE n.nspname = 'snowseq_state';
-- a serial re-created with another start continues above its numbers; with
-- another format it is refused (its old numbers would read differently)
SELECT snowseq_create_serial('s', 'S-#####');
SELECT snowseq_serial('s') FROM generate_series(1, 3);
DELETE FROM snowseq_counters WHERE name = 's';
SELECT snowseq_create_serial('s', 'S-#####', start => 1, nodes => 2);
SELECT right(snowseq_serial('s'), 5)::int > 3 AS above_all_issued;
DELETE FROM snowseq_counters WHERE name = 's';
SELECT snowseq_create_serial('s', 'S-YY-#####');
-- restart => true is the one way to issue a counter's values again
DELETE FROM snowseq_counters WHERE name = 'z';
SELECT snowseq_create_counter('z', start => 0, restart => true);
SELECT snowseq_counter_next('z') AS restarted;

-- a read-only transaction takes values up to the recorded position only
SELECT snowseq_create_counter('ro');
BEGIN READ ONLY;
SELECT snowseq_counter_next('ro');
ROLLBACK;
SELECT snowseq_counter_next('ro');

-- a counter whose floor is gone (a superuser dropped it) is refused: its
-- record is missing; snowseq_counter_raise says where it stands and makes
-- the floor again; without a floor and without its row, a counter that
-- issued values is refused too: nothing says what they were
SELECT format('DROP SEQUENCE snowseq_state.%I', c.relname) AS drop_floor
FROM pg_class c JOIN pg_description d ON d.objoid = c.oid AND d.classoid = 'pg_class'::regclass
WHERE d.description = 'floor of snowseq counter "ro"' \gset
:drop_floor;
SELECT snowseq_counter_next('ro');
SELECT snowseq_counter_raise('ro', 2) AS raised;
SELECT count(snowseq_counter_next('ro')) FROM generate_series(1, 2000);
SELECT count(*) AS floor_made_again FROM pg_description WHERE description = 'floor of snowseq counter "ro"';
SELECT format('DROP SEQUENCE snowseq_state.%I', c.relname) AS drop_floor
FROM pg_class c JOIN pg_description d ON d.objoid = c.oid AND d.classoid = 'pg_class'::regclass
WHERE d.description = 'floor of snowseq counter "ro"' \gset
:drop_floor;
DELETE FROM snowseq_counters WHERE name = 'ro';
SELECT snowseq_create_counter('ro');
SELECT snowseq_create_counter('ro', restart => true);
SELECT snowseq_counter_next('ro') AS restarted;

-- a role with EXECUTE only records the position as the definitions' owner
CREATE ROLE snowseq_counter_taker;
GRANT EXECUTE ON FUNCTION snowseq_counter_next(text) TO snowseq_counter_taker;
SELECT snowseq_create_counter('granted');
SELECT snowseq_grant_counter('granted', 'snowseq_counter_taker');
SET ROLE snowseq_counter_taker;
SELECT snowseq_counter_next('granted');
RESET ROLE;
REVOKE EXECUTE ON FUNCTION snowseq_counter_next(text) FROM snowseq_counter_taker;
DROP OWNED BY snowseq_counter_taker;
DROP ROLE snowseq_counter_taker;

-- the end of bigint: the status view shows the last value, raise refuses
-- what next would refuse
SELECT snowseq_create_counter('edge', start => 9223372036854775800);
SELECT max(v) FROM (SELECT snowseq_counter_next('edge') AS v FROM generate_series(1, 8)) t;
SELECT snowseq_counter_next('edge');
SELECT last_value FROM snowseq_counter_status WHERE name = 'edge';
SELECT snowseq_create_counter('edge2');
SELECT snowseq_counter_raise('edge2', 9223372036854775807);
SELECT snowseq_counter_next('edge2');
SELECT snowseq_counter_raise('edge2', 9223372036854775805);
SELECT snowseq_counter_next('edge2');
