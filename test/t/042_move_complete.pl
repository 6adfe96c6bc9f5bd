# Elastic shards: the destination of a move gets a complete table, and no
# reader through the router sees a half-switched state.
#
#   router  (node 1): orders PARTITION BY RANGE (order_id), one postgres_fdw
#                     partition on shard_a for every gene to begin with
#   shard_a (node 2), shard_b (node 3): wal_level = logical
#
# shard_a's orders has a secondary index, an expression index with a WHERE
# clause, a unique constraint, a check constraint, a default that calls a
# function of its own, a column comment, a trigger that stamps the table it
# fired on and its server's port, a trigger ENABLE REPLICA, row level
# security with a policy for role "reader", a GRANT to it, and a foreign key
# to buyers (a table that does not move).
#
# (1) A destination that lacks the default's function is refused before the
#     move starts, naming the function; nothing changes.  So is one that
#     lacks a role of the grants, naming the role.
# (2) A split to shard_b, then a move of the new table back to shard_a:
#     after each, the destination table has every index of the source (and
#     the planner uses them), its constraints reject bad rows, the default
#     applies, the trigger fires there (and did not fire again on the copied
#     rows), the replica trigger keeps its state, the policy and the grant
#     hold for "reader"; the foreign key is named in a NOTICE.  Writes
#     while the split is paused after its copy (pause point
#     move_after_copy) are applied on shard_b without firing its triggers
#     again.
# (3) The switch window: a split paused after the router's commit of the
#     switch, before the source's COMMIT PREPARED (pause point
#     move_after_router_commit).  A reader through the router started then
#     waits on the parent's lock, which the mover holds until the source
#     committed, and once released sees every row exactly once.  The keep
#     view the router's partition now reads exists already, and a reader of
#     it on the source waits for the prepared transaction too.
# (4) A split deletes nothing in its switch: paused after the switch, before
#     the moved rows are deleted (pause point move_before_source_delete),
#     the source still holds them, the partition that keeps the rest of the
#     genes reads them through the keep view (the rows that stay), and the
#     router returns every row once; writes to both sides work, updates the
#     remote server cannot run alone (by ctid) included, and the view's
#     check option refuses a moved ID.  The router is killed there: the
#     first query after its restart sees every row once, the resolver
#     deletes the moved rows and points the partition back at the table,
#     and snowseq_move_cleanup() drops the view.
use strict;
use warnings;
use lib 'test';
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $pause_lock = 7236949375;
my @shard_conf = shard_conf();
my $router = snowseq_node('router', node_id => 1);
my $sa = snowseq_node('shard_a', node_id => 2, conf => \@shard_conf);
my $sb = snowseq_node('shard_b', node_id => 3, conf => \@shard_conf);

my $functions = q{
CREATE FUNCTION public.stamp() RETURNS trigger LANGUAGE plpgsql
	AS $$BEGIN NEW.stamped := 'stamped by ' || TG_TABLE_NAME || ' on ' || current_setting('port'); RETURN NEW; END$$;
CREATE TABLE public.audit_log (tab text, order_id bigint);
CREATE FUNCTION public.audit() RETURNS trigger LANGUAGE plpgsql
	AS $$BEGIN INSERT INTO public.audit_log VALUES (TG_TABLE_NAME, NEW.order_id); RETURN NEW; END$$;
};
my $default_note = q{CREATE FUNCTION public.default_note() RETURNS text LANGUAGE sql AS $$SELECT 'noted'$$};
$sa->safe_psql('postgres', "CREATE ROLE reader LOGIN; CREATE ROLE auditor; $functions; $default_note;" . q{
CREATE TABLE buyers (buyer_id text PRIMARY KEY);
INSERT INTO buyers SELECT 'b' || i FROM generate_series(0, 99) i;
CREATE TABLE orders (
	order_id bigint PRIMARY KEY,
	buyer_id text NOT NULL CONSTRAINT orders_buyer_fk REFERENCES buyers,
	code text CONSTRAINT orders_code_key UNIQUE,
	amount numeric NOT NULL DEFAULT 0 CONSTRAINT orders_amount_check CHECK (amount >= 0),
	note text DEFAULT public.default_note(),
	stamped text);
CREATE INDEX orders_buyer_idx ON orders (buyer_id);
CREATE INDEX orders_lower_code_idx ON orders (lower(code)) WHERE code IS NOT NULL;
COMMENT ON COLUMN orders.code IS 'the buyer''s code';
CREATE TRIGGER orders_stamp BEFORE INSERT OR UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION public.stamp();
CREATE TRIGGER orders_audit AFTER INSERT ON orders FOR EACH ROW EXECUTE FUNCTION public.audit();
ALTER TABLE orders ENABLE REPLICA TRIGGER orders_audit;
GRANT SELECT ON orders TO reader;
GRANT SELECT ON orders TO auditor;
ALTER TABLE orders ENABLE ROW LEVEL SECURITY;
CREATE POLICY orders_cheap ON orders FOR SELECT TO reader USING (amount < 10);
});
$sb->safe_psql('postgres', "CREATE ROLE reader LOGIN; $functions");

my $servers = '';
for my $s ([ 'shard_a', $sa ], [ 'shard_b', $sb ])
{
	$servers .= sprintf("CREATE SERVER %s FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '%s', port '%s', dbname 'postgres');\n"
		  . "CREATE USER MAPPING FOR CURRENT_USER SERVER %s;\n", $s->[0], $s->[1]->host, $s->[1]->port, $s->[0]);
}
$router->safe_psql('postgres', "CREATE EXTENSION postgres_fdw;\n$servers" . q{
CREATE TABLE orders (order_id bigint NOT NULL, buyer_id text NOT NULL, code text,
	amount numeric NOT NULL DEFAULT 0, stamped text) PARTITION BY RANGE (order_id);
CREATE FOREIGN TABLE orders_0 PARTITION OF orders FOR VALUES FROM (0) TO (MAXVALUE)
	SERVER shard_a OPTIONS (table_name 'orders');
INSERT INTO snowseq_shard_map VALUES (32767, 'shard_a');
INSERT INTO orders (order_id, buyer_id, code, amount)
	SELECT snowseq_gene_next('b' || i % 100), 'b' || i % 100, 'c' || i, i % 50 FROM generate_series(1, 3000) i;
});
my $total = 3000;
my $moved = $router->safe_psql('postgres', q{SELECT count(*) FROM orders WHERE order_id >= 16384::bigint << 48});
ok($moved > 1000 && $moved < 2000, "genes 16384..32767 hold $moved of the $total orders");

sub layout
{
	return $router->safe_psql('postgres', q{
		SELECT string_agg(upper_gene || '=' || shard, ',' ORDER BY upper_gene) FROM snowseq_shard_map})
	  . ' ' . $router->safe_psql('postgres', q{
		SELECT string_agg(c.relname || ':' || pg_get_expr(c.relpartbound, c.oid), ', ' ORDER BY c.relname)
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'orders'::regclass});
}

sub count_once
{
	return $router->safe_psql('postgres', q{SELECT count(*) || ' ' || count(DISTINCT order_id) FROM orders});
}

# the indexes of a table, without their names and the table's
sub index_defs
{
	my ($node, $table) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT string_agg(regexp_replace(pg_get_indexdef(indexrelid), '^CREATE (UNIQUE )?INDEX \\S+ ON \\S+ ', '\\1'),
			E'\\n' ORDER BY 1) FROM pg_index WHERE indrelid = '$table'::regclass});
}

# ---------------------------------------------------------------------
# (1) The destination lacks a function the source table uses
# ---------------------------------------------------------------------
my $before = layout();
my ($out, $err) = ('', '');
my $rc = $router->psql('postgres', q{CALL snowseq_split_shard('orders', 16384, 'shard_b')},
	stdout => \$out, stderr => \$err);
note "split without the function:\n$err";
isnt($rc, 0, '(1) a split to a server without the default\'s function fails');
like($err, qr/ERROR:  function public\.default_note\(\) does not exist on server "shard_b"/,
	'(1) ... naming the function and the server');
like($err, qr/HINT:  Create the function on server "shard_b", then move the genes\./, '(1) ... with a hint');
is(layout(), $before, '(1) the placement is unchanged');
is($sb->safe_psql('postgres', q{SELECT count(*) FROM pg_class WHERE relname LIKE 'orders%'}), '0',
	'(1) no table was created on shard_b');
is(count_once(), "$total $total", '(1) the router returns every row once');

$sb->safe_psql('postgres', $default_note);
($out, $err) = ('', '');
$rc = $router->psql('postgres', q{CALL snowseq_split_shard('orders', 16384, 'shard_b')},
	stdout => \$out, stderr => \$err);
isnt($rc, 0, '(1) a split to a server without a role of the grants fails');
like($err, qr/ERROR:  role auditor does not exist on server "shard_b"/, '(1) ... naming the role and the server');
is(layout(), $before, '(1) the placement is unchanged');
$sb->safe_psql('postgres', 'CREATE ROLE auditor');

# ---------------------------------------------------------------------
# (2) Split to shard_b, then move back to shard_a: complete tables
# ---------------------------------------------------------------------

# everything one destination table must show; $next: an ID in its genes
sub check_complete
{
	my ($step, $node, $table, $next) = @_;
	my $name = $node->name;

	is(index_defs($node, $table), index_defs($sa, 'orders'), "$step: $name.$table has every index of the source");
	like($node->safe_psql('postgres', qq{SELECT string_agg(c.relname, ' ' ORDER BY c.relname)
		FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = '$table'::regclass}),
		qr/^${table}_buyer_idx ${table}_code_key ${table}_lower_code_idx ${table}_pkey$/,
		"$step: named after the table");
	$node->safe_psql('postgres', "ANALYZE $table");
	like($node->safe_psql('postgres', "EXPLAIN (COSTS OFF) SELECT * FROM $table WHERE buyer_id = 'b7'"),
		qr/Index Scan (using|on) ${table}_buyer_idx/, "$step: a query by buyer_id uses its index");
	like($node->safe_psql('postgres', "EXPLAIN (COSTS OFF) SELECT * FROM $table WHERE lower(code) = 'c17'"),
		qr/Index Scan (using|on) ${table}_lower_code_idx/, "$step: a query by lower(code) uses the expression index");

	my ($o, $e) = ('', '');
	$router->psql('postgres', "INSERT INTO orders (order_id, buyer_id, amount) VALUES ($next, 'b1', -1)",
		stdout => \$o, stderr => \$e);
	like($e, qr/violates check constraint "${table}_amount_check"/, "$step: the check constraint rejects a negative amount");
	my $code = $node->safe_psql('postgres', "SELECT code FROM $table WHERE code IS NOT NULL LIMIT 1");
	$router->psql('postgres', "INSERT INTO orders (order_id, buyer_id, code) VALUES ($next, 'b1', '$code')",
		stdout => \$o, stderr => \$e);
	like($e, qr/violates unique constraint "${table}_code_key"/, "$step: the unique constraint rejects code $code twice");
	$node->psql('postgres', "INSERT INTO $table (order_id, buyer_id) VALUES ($next, NULL)", stdout => \$o, stderr => \$e);
	like($e, qr/violates not-null constraint/, "$step: NOT NULL holds");

	# a row through the router: the default and the trigger of the destination
	is($router->safe_psql('postgres', "INSERT INTO orders (order_id, buyer_id, code) VALUES ($next, 'b1', 'new$next') RETURNING stamped"),
		"stamped by $table on " . $node->port, "$step: the trigger fires on $name");
	is($node->safe_psql('postgres', "SELECT note FROM $table WHERE order_id = $next"), 'noted', "$step: the default applies on $name");
	is($node->safe_psql('postgres', qq{SELECT string_agg(tgname || '=' || tgenabled::text, ' ' ORDER BY tgname) FROM pg_trigger
		WHERE tgrelid = '$table'::regclass AND NOT tgisinternal AND tgname NOT LIKE 'snowseq%'}),
		'orders_audit=R orders_stamp=O', "$step: the triggers keep their states (the replica trigger ENABLE REPLICA)");
	is($node->safe_psql('postgres', "SELECT col_description('$table'::regclass, 3)"), "the buyer's code",
		"$step: the column comment is there");

	# row level security and the grant, as "reader"
	is($node->safe_psql('postgres', "SELECT relrowsecurity FROM pg_class WHERE oid = '$table'::regclass"), 't',
		"$step: row level security is on");
	my $all = $node->safe_psql('postgres', "SELECT count(*) FROM $table");
	my $cheap = $node->safe_psql('postgres', "SELECT count(*) FROM $table WHERE amount < 10");
	ok($cheap > 0 && $cheap < $all, "$step: $cheap of $all rows are cheap");
	is($node->safe_psql('postgres', "SET ROLE reader; SELECT count(*) FROM $table"), $cheap,
		"$step: reader sees the cheap rows only (policy orders_cheap)");
	$node->psql('postgres', "SET ROLE reader; INSERT INTO $table (order_id, buyer_id) VALUES ($next + 1, 'b1')",
		stdout => \$o, stderr => \$e);
	like($e, qr/permission denied for table $table/, "$step: reader may read, not insert (the grant)");
	$router->safe_psql('postgres', "DELETE FROM orders WHERE order_id = $next");
}

# the split pauses once the copy is done, while the subscription streams:
# writes to the moved genes then reach shard_b by logical apply, which fires
# neither the ordinary trigger (it fired on shard_a) nor the replica one
my $locker = $router->background_psql('postgres');
$locker->query_safe("SELECT pg_advisory_lock($pause_lock)");
($out, $err) = ('', '');
my $split = IPC::Run::start([ 'psql', '-X', '-d', $router->connstr('postgres'),
	'-c', "SET snowseq.test_pause_at = 'move_after_copy'",
	'-c', q{CALL snowseq_split_shard('orders', 16384, 'shard_b')} ], '>', \$out, '2>', \$err);
ok($router->poll_query_until('postgres', q{
	SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event = 'advisory' AND query LIKE 'CALL%'}),
	'(2) the split paused after the copy');
my $updated = $router->safe_psql('postgres', q{WITH u AS (UPDATE orders SET amount = amount + 100
	WHERE buyer_id = 'b3' AND order_id >= 16384::bigint << 48 RETURNING 1) SELECT count(*) FROM u});
$router->safe_psql('postgres', q{INSERT INTO orders (order_id, buyer_id, code, amount)
	VALUES ((20000::bigint << 48) + 7, 'b3', 'streamed', 100)});
$total++;
$moved++;
ok($sb->poll_query_until('postgres', q{SELECT count(*) = 1 FROM orders WHERE code = 'streamed'}),
	'(2) the writes during the pause reached shard_b');
is($sb->safe_psql('postgres', "SELECT count(*) FROM orders WHERE buyer_id = 'b3' AND amount >= 100 "
	  . "AND stamped = 'stamped by orders on " . $sa->port . "'"), $updated + 1,
	"(2) the $updated updated rows and the new one carry shard_a's stamp: the trigger did not fire in apply");
is($sb->safe_psql('postgres', 'SELECT count(*) FROM audit_log'), '0', '(2) nor did the replica trigger');
$locker->query_safe("SELECT pg_advisory_unlock($pause_lock)");
$split->finish;
$locker->quit;
note "split:\n$err";
is($split->result(0), 0, '(2) the split succeeds once the function and the role are there');
like($err, qr/NOTICE:  foreign key orders_buyer_fk of table public\.orders is not created on server "shard_b"/,
	'(2) a NOTICE names the foreign key that is not created');
like($err, qr/NOTICE:  built 3 indexes and constraints of table public\.orders on server "shard_b"/,
	'(2) the indexes were built after the copy');
like(layout(), qr/^16383=shard_a,32767=shard_b /, '(2) genes 16384..32767 are on shard_b');
is(count_once(), "$total $total", '(2) the router returns every row once');
is($sb->safe_psql('postgres', "SELECT count(*) FROM orders_g16384_32767 WHERE stamped = 'stamped by orders on " . $sa->port . "'"), $moved,
	'(2) the copied rows keep the source\'s stamp: the trigger did not fire again on the copy');
check_complete('(2) split', $sb, 'orders_g16384_32767', '(20000::bigint << 48) + 1');
is($sa->safe_psql('postgres', q{SELECT count(*) FROM pg_views WHERE viewname ~ '^snowseq_move_.*_keep_'}), '0',
	'(2) the split left no view on shard_a');
is($router->safe_psql('postgres', q{SELECT ftoptions::text FROM pg_foreign_table WHERE ftrelid = 'orders_0'::regclass}),
	'{table_name=orders,schema_name=public}', '(2) the partition that kept genes 0..16383 reads the table again');

($out, $err) = ('', '');
$rc = $router->psql('postgres', q{CALL snowseq_move_genes('orders', 16384, 32767, 'shard_a')},
	stdout => \$out, stderr => \$err);
note "move back:\n$err";
is($rc, 0, '(2) moving the genes back to shard_a succeeds');
like(layout(), qr/^32767=shard_a /, '(2) genes 16384..32767 are on shard_a again');
is(count_once(), "$total $total", '(2) the router returns every row once');
is($sa->safe_psql('postgres', q{SELECT string_agg(conname, ' ' ORDER BY conname) FROM pg_constraint
	WHERE conrelid = 'orders_g16384_32767'::regclass AND contype = 'c'}),
	'orders_g16384_32767_amount_check orders_g16384_32767_genes', '(2) one check of the genes, and the source\'s check');
check_complete('(2) move back', $sa, 'orders_g16384_32767', '(20000::bigint << 48) + 2');

# ---------------------------------------------------------------------
# (3) The switch window: readers wait for the source's commit
# ---------------------------------------------------------------------
my $in_moved = $router->safe_psql('postgres',
	q{SELECT count(*) FROM orders WHERE order_id >= 8192::bigint << 48 AND order_id < 16384::bigint << 48});
$locker = $router->background_psql('postgres');
$locker->query_safe("SELECT pg_advisory_lock($pause_lock)");
my ($mout, $merr) = ('', '');
my $mover = IPC::Run::start([ 'psql', '-X', '-d', $router->connstr('postgres'),
	'-c', "SET snowseq.test_pause_at = 'move_after_router_commit'",
	'-c', q{CALL snowseq_split_shard('orders', 8192, 'shard_b')} ], '>', \$mout, '2>', \$merr);
ok($router->poll_query_until('postgres', q{
	SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event = 'advisory' AND query LIKE 'CALL%'}),
	'(3) the split paused after the router\'s commit of the switch');
is($sa->safe_psql('postgres', q{SELECT count(*) FROM pg_prepared_xacts}), '1',
	'(3) ... with the source transaction prepared, not committed');
like(layout(), qr/^8191=shard_a,16383=shard_b,32767=shard_a /, '(3) ... and the router\'s map switched');
# the partition that keeps genes 0..8191 reads the keep view, which exists
# already (made before the source transaction): a reader of it waits for the
# source table's lock, held by the prepared transaction, rather than failing
my $view3 = $sa->safe_psql('postgres', q{SELECT viewname FROM pg_views WHERE viewname ~ '^snowseq_move_.*_keep_'});
like($view3, qr/^snowseq_move_1_\d+_\d+_keep_\d+$/, "(3) the keep view $view3 exists before the source commits");
like($router->safe_psql('postgres', q{SELECT ftoptions::text FROM pg_foreign_table WHERE ftrelid = 'orders_0'::regclass}),
	qr/table_name=\Q$view3\E/, '(3) ... and the router\'s committed partition reads it');
$sa->psql('postgres', qq{SET lock_timeout = '300ms'; SELECT count(*) FROM "$view3"}, stdout => \$out, stderr => \$err);
like($err, qr/canceling statement due to lock timeout/, '(3) ... a reader of it waits for the prepared transaction');

# a reader through the router, started in the window
my ($rout, $rerr) = ('', '');
my $reader = IPC::Run::start([ 'psql', '-X', '-At', '-d', $router->connstr('postgres'),
	'-c', q{SELECT count(*) || ' ' || count(DISTINCT order_id) AS reader_in_window FROM orders} ],
	'>', \$rout, '2>', \$rerr);
# it waits: on the router for the parent's lock, or on the source's table
ok($router->poll_query_until('postgres', q{
	SELECT count(*) > 0 FROM pg_stat_activity WHERE query LIKE '%reader_in_window%'
	AND wait_event_type IN ('Lock', 'Extension') AND pid <> pg_backend_pid()}),
	'(3) the reader started in the window waits');
is($router->safe_psql('postgres', q{
	SELECT string_agg(a.wait_event_type || '/' || l.mode || '/' || l.relation::regclass::text, ' ')
	FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid AND NOT l.granted
	WHERE a.query LIKE '%reader_in_window%' AND a.pid <> pg_backend_pid()}),
	'Lock/AccessShareLock/orders', '(3) ... for the parent\'s lock on the router, which the mover holds');
$locker->query_safe("SELECT pg_advisory_unlock($pause_lock)");
$mover->finish;
$reader->finish;
$locker->quit;
note "reader: $rout $rerr";
is($rout, "$total $total\n", "(3) once released, the reader sees all $total rows once ($in_moved in the moved genes)");
like(layout(), qr/^8191=shard_a,16383=shard_b,32767=shard_a /, '(3) the split finished');
is($sa->safe_psql('postgres', q{SELECT count(*) FROM pg_prepared_xacts}), '0', '(3) and committed on the source');
is(count_once(), "$total $total", '(3) the router returns every row once');

# ---------------------------------------------------------------------
# (4) The moved rows are deleted after the switch, through the keep view
# ---------------------------------------------------------------------
my $lo4 = q{4096::bigint << 48};
my $hi4 = q{8192::bigint << 48};
my $in_moved4 = $router->safe_psql('postgres', "SELECT count(*) FROM orders WHERE order_id >= $lo4 AND order_id < $hi4");
ok($in_moved4 > 100, "(4) genes 4096..8191 hold $in_moved4 orders");
$locker = $router->background_psql('postgres');
$locker->query_safe("SELECT pg_advisory_lock($pause_lock)");
($mout, $merr) = ('', '');
$mover = IPC::Run::start([ 'psql', '-X', '-d', $router->connstr('postgres'),
	'-c', "SET snowseq.test_pause_at = 'move_before_source_delete'",
	'-c', q{CALL snowseq_split_shard('orders', 4096, 'shard_b')} ], '>', \$mout, '2>', \$merr);
ok($router->poll_query_until('postgres', q{
	SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event = 'advisory' AND query LIKE 'CALL%'}),
	'(4) the split paused after its switch, before deleting the moved rows');
like(layout(), qr/^4095=shard_a,16383=shard_b,32767=shard_a /, '(4) the router switched');
is($router->safe_psql('postgres', q{SELECT state FROM snowseq_moves ORDER BY move_id DESC LIMIT 1}), 'switched',
	'(4) ... and recorded it');
is($sa->safe_psql('postgres', "SELECT count(*) FROM orders WHERE order_id >= $lo4 AND order_id < $hi4"), $in_moved4,
	"(4) the source still holds the $in_moved4 moved rows: the switch deleted none");
my $view = $sa->safe_psql('postgres', q{SELECT viewname FROM pg_views WHERE viewname ~ '^snowseq_move_.*_keep_'});
like($view, qr/^snowseq_move_1_\d+_\d+_keep_\d+$/, "(4) the source has the keep view $view");
like($router->safe_psql('postgres', q{SELECT ftoptions::text FROM pg_foreign_table WHERE ftrelid = 'orders_0'::regclass}),
	qr/table_name=\Q$view\E/, '(4) the partition that keeps genes 0..4095 reads it');
my $first_moved = $router->safe_psql('postgres', "SELECT $lo4");
like($sa->safe_psql('postgres', qq{SELECT pg_get_viewdef('$view'::regclass)}), qr/WHERE \(?(t\.)?order_id < '?$first_moved'?/,
	'(4) ... the rows below the first moved ID');
is(count_once(), "$total $total", '(4) the router returns every row once');

# writes on both sides of the cut, while the moved rows are still on shard_a
$router->safe_psql('postgres', qq{INSERT INTO orders (order_id, buyer_id, code) VALUES ((1000::bigint << 48) + 11, 'b1', 'kept4'),
	((5000::bigint << 48) + 11, 'b1', 'moved4')});
$total += 2;
is($sb->safe_psql('postgres', q{SELECT count(*) FROM orders_g4096_8191 WHERE code = 'moved4'}), '1',
	'(4) a new row of the moved genes lands on shard_b: their writes no longer wait');
is($sa->safe_psql('postgres', q{SELECT count(*) FROM orders WHERE code = 'kept4'}), '1',
	'(4) a new row of genes 0..4095 lands on shard_a, through the view');
my $bumped = $router->safe_psql('postgres', qq{WITH u AS (UPDATE orders SET amount = amount + 1, stamped = 'at ' || clock_timestamp()
	WHERE order_id < $lo4 AND amount < 5 RETURNING 1) SELECT count(*) FROM u});
ok($bumped > 0, "(4) an update the remote server cannot run alone (clock_timestamp) updates $bumped rows of genes 0..4095 by ctid");
like($router->safe_psql('postgres', qq{EXPLAIN (VERBOSE, COSTS OFF) UPDATE orders SET stamped = 'at ' || clock_timestamp()
	WHERE order_id < $lo4 AND amount < 5}), qr/Remote SQL: UPDATE public\.\Q$view\E SET .* WHERE ctid = \$1/,
	'(4) ... through the view, by ctid');
is($router->safe_psql('postgres', qq{WITH d AS (DELETE FROM orders WHERE code = 'kept4' AND stamped <> clock_timestamp()::text
	RETURNING 1) SELECT count(*) FROM d}), '1', '(4) a delete by ctid works too');
$total--;
# (with triggers off, so that the fence does not refuse it first)
$sa->psql('postgres', qq{SET session_replication_role = replica;
	INSERT INTO "$view" (order_id, buyer_id) VALUES ((5000::bigint << 48) + 12, 'b1')},
	stdout => \$out, stderr => \$err);
like($err, qr/new row violates check option for view "\Q$view\E"/, '(4) the view\'s check option refuses a moved ID');
is(count_once(), "$total $total", '(4) the router returns every row once');

# the router dies before the moved rows are deleted
$router->stop('immediate');
$mover->finish;
eval { $locker->quit };
$router->start;
is(count_once(), "$total $total", '(4) the first query after the restart returns every row once');
ok($router->poll_query_until('postgres', q{SELECT state = 'done' FROM snowseq_moves ORDER BY move_id DESC LIMIT 1}),
	'(4) the resolver finished the split');
is($sa->safe_psql('postgres', "SELECT count(*) FROM orders WHERE order_id >= $lo4 AND order_id < $hi4"), '0',
	'(4) ... deleted the moved rows on shard_a');
is($router->safe_psql('postgres', q{SELECT ftoptions::text FROM pg_foreign_table WHERE ftrelid = 'orders_0'::regclass}),
	'{table_name=orders,schema_name=public}', '(4) ... and pointed the partition back at the table');
is(count_once(), "$total $total", '(4) the router returns every row once');
like($router->safe_psql('postgres', q{SELECT string_agg(object || ': ' || action, E'\n') FROM snowseq_move_cleanup()}),
	qr/view (public\.)?\Q$view\E: dropped/, '(4) snowseq_move_cleanup() drops the view');
is($sa->safe_psql('postgres', q{SELECT count(*) FROM pg_views WHERE viewname ~ '^snowseq_move_.*_keep_'}), '0',
	'(4) no view is left on shard_a');
is(count_once(), "$total $total", '(4) the router returns every row once');

done_testing();
