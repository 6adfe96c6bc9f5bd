# Elastic shards: a group move undone after its copy leaves nothing on its
# destination, in one pass, whatever the foreign keys between its copies.
#
#   router  (node 1): orders and order_items PARTITION BY RANGE on their
#                     IDs, one postgres_fdw partition each on shard_a for
#                     every gene (a placement group)
#   shard_a (node 2), shard_b (node 3): wal_level = logical; order_items
#                     REFERENCES orders on shard_a, so the copies on
#                     shard_b reference one another too
#
# (1) The session of a group move paused after its copy ends (the router
#     stays up): one snowseq_move_cleanup() undoes the move, the record of
#     every table `failed`, no table left on shard_b, and a second cleanup
#     has nothing left to do.  Before, the drop of the copy of orders failed
#     (the copy of order_items depends on it), the records stayed
#     `rollback` and the rows stayed on shard_b until a second cleanup.
# (2) The router crashes at the same pause: its resolver alone, at the
#     restart, undoes the move, with no cleanup run by hand.
# (3) The same move then succeeds.
# (4) Whole moves of that partition back and forth drop each emptied source
#     table (before, one was left behind each time); a split at the same
#     boundary then works.
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

$sa->safe_psql('postgres', q{
CREATE TABLE orders (order_id bigint PRIMARY KEY, buyer_id text NOT NULL);
CREATE TABLE order_items (item_id bigint PRIMARY KEY,
	order_id bigint NOT NULL CONSTRAINT order_items_order_fk REFERENCES orders, qty int NOT NULL);
});
$router->safe_psql('postgres', "CREATE EXTENSION postgres_fdw;\n"
	  . fdw_servers_sql('postgres', [ 'shard_a', $sa ], [ 'shard_b', $sb ]) . q{
CREATE TABLE orders (order_id bigint NOT NULL, buyer_id text NOT NULL) PARTITION BY RANGE (order_id);
CREATE FOREIGN TABLE orders_0 PARTITION OF orders FOR VALUES FROM (0) TO (MAXVALUE)
	SERVER shard_a OPTIONS (table_name 'orders');
CREATE TABLE order_items (item_id bigint NOT NULL, order_id bigint NOT NULL, qty int NOT NULL)
	PARTITION BY RANGE (item_id);
CREATE FOREIGN TABLE order_items_0 PARTITION OF order_items FOR VALUES FROM (0) TO (MAXVALUE)
	SERVER shard_a OPTIONS (table_name 'order_items');
INSERT INTO snowseq_shard_map VALUES (32767, 'shard_a');
INSERT INTO orders SELECT snowseq_gene_next('b' || i % 300), 'b' || i % 300 FROM generate_series(1, 2000) i;
INSERT INTO order_items SELECT snowseq_gene_next(buyer_id), order_id, 1 FROM orders;
});
my $all = q{SELECT (SELECT count(*) FROM orders) || ' ' || (SELECT count(*) FROM order_items)};
is($router->safe_psql('postgres', $all), '2000 2000', '2000 orders with an item each, on shard_a');
my $call = q{CALL snowseq_move_genes('orders', 0, 16383, 'shard_b')};

# the tables of orders and items on shard_b (snowseq has its own), and the states of the records of the last move
sub sb_tables
{
	return $sb->safe_psql('postgres', q{SELECT coalesce(string_agg(c.relname || ' ' || c.reltuples::bigint, ', '
		ORDER BY c.relname), '') FROM pg_class c WHERE c.relname LIKE 'order%' AND c.relkind IN ('r', 'p')});
}
sub last_move
{
	return $router->safe_psql('postgres', q{SELECT string_agg(parent::text || ' ' || state, ', ' ORDER BY move_id)
		FROM snowseq_moves WHERE move_id >= (SELECT max(move_id) FROM snowseq_moves WHERE group_move IS NULL)});
}

# The move, its session paused after the copy; returns [psql harness, locker]
sub pause_after_copy
{
	my ($what) = @_;
	my $locker = $router->background_psql('postgres');
	$locker->query_safe("SELECT pg_advisory_lock($pause_lock)");
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start([ 'psql', '-X', '-d', $router->connstr('postgres'),
		'-c', "SET snowseq.test_pause_at = 'move_after_copy'", '-c', $call ], '>', \$out, '2>', \$err);
	ok($router->poll_query_until('postgres', q{
		SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event = 'advisory' AND query LIKE 'CALL%'}),
		"$what the group move pauses after its copy");
	ok($sb->poll_query_until('postgres', q{SELECT count(*) = 2 FROM pg_class
		WHERE relname LIKE 'order%' AND relkind = 'r'}), "$what ... both copies are on shard_b");
	is($sb->safe_psql('postgres', q{SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND conrelid::regclass::text LIKE 'order%'}), 1,
		"$what ... the copy of order_items references the copy of orders");
	return ($h, $locker);
}

# ---------------------------------------------------------------------
# (1) The mover's session ends: one cleanup undoes it all
# ---------------------------------------------------------------------
my ($h, $locker) = pause_after_copy('(1)');
$router->safe_psql('postgres', q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity
	WHERE wait_event = 'advisory' AND query LIKE 'CALL%'});
$h->finish;
$locker->quit;
my $report = $router->safe_psql('postgres',
	q{SELECT coalesce(server, '-') || ' ' || object || ': ' || action FROM snowseq_move_cleanup()});
note "cleanup:\n$report";
unlike($report, qr/left:/, '(1) one snowseq_move_cleanup() leaves nothing behind');
is(last_move(), 'orders failed, order_items failed', '(1) ... the move of every table is undone');
is(sb_tables(), '', '(1) ... no table is left on shard_b');
is(join(',', move_leftovers('postgres', $sa, $sb)), '', '(1) ... nor a slot, publication, subscription or fence');
is($router->safe_psql('postgres', q{SELECT count(*) FROM snowseq_move_objects}), 0, '(1) ... nor a record of an object');
$report = $router->safe_psql('postgres',
	q{SELECT coalesce(server, '-') || ' ' || object || ': ' || action FROM snowseq_move_cleanup()});
is($report, '', '(1) a second cleanup has nothing to do');
is($router->safe_psql('postgres', $all), '2000 2000', '(1) the router returns every row');

# ---------------------------------------------------------------------
# (2) The router crashes at the pause: the resolver undoes it at the restart
# ---------------------------------------------------------------------
($h, $locker) = pause_after_copy('(2)');
$router->stop('immediate');
$h->finish;
eval { $locker->quit };
$router->start;
ok($router->poll_query_until('postgres', q{SELECT count(*) = 0 FROM snowseq_moves
	WHERE state NOT IN ('done', 'failed', 'reverted')}), '(2) the resolver resolves the move at the restart')
  or diag $router->safe_psql('postgres', 'SELECT move_id, parent, state, error FROM snowseq_moves');
is(last_move(), 'orders failed, order_items failed', '(2) ... it undid the move of every table');
is(sb_tables(), '', '(2) ... no table is left on shard_b');
is(join(',', move_leftovers('postgres', $sa, $sb)), '', '(2) ... nor a slot, publication, subscription or fence');
is($router->safe_psql('postgres', $all), '2000 2000', '(2) the router returns every row');

# ---------------------------------------------------------------------
# (3) The move then succeeds
# ---------------------------------------------------------------------
$router->safe_psql('postgres', $call);
is(last_move(), 'orders done, order_items done', '(3) the same move then succeeds');
is($sb->safe_psql('postgres', q{SELECT (SELECT count(*) FROM orders_g0_16383) || ' ' || (SELECT count(*) FROM order_items_g0_16383)}),
	$router->safe_psql('postgres', q{SELECT (SELECT count(*) FROM orders WHERE order_id < 16384::bigint << 48) || ' '
		|| (SELECT count(*) FROM order_items WHERE item_id < 16384::bigint << 48)}), '(3) ... every row of genes 0..16383 is on shard_b');
is($router->safe_psql('postgres', $all), '2000 2000', '(3) the router returns every row');

# ---------------------------------------------------------------------
# (4) Whole moves back and forth leave no empty table behind
# ---------------------------------------------------------------------
sub tables_of
{
	my ($node) = @_;
	return $node->safe_psql('postgres', q{SELECT coalesce(string_agg(relname, ' ' ORDER BY relname), '')
		FROM pg_class WHERE relname LIKE 'order%' AND relkind = 'r'});
}
$router->safe_psql('postgres', q{CALL snowseq_move_genes('orders', 0, 16383, 'shard_a')});
is(last_move(), 'orders done, order_items done', '(4) the partition of genes 0..16383 moves back to shard_a, whole');
is(tables_of($sb), '', '(4) ... and its tables, emptied, are gone from shard_b');
is(tables_of($sa), 'order_items order_items_g0_16383 orders orders_g0_16383', '(4) shard_a holds both partitions');
$router->safe_psql('postgres', q{CALL snowseq_move_genes('orders', 0, 16383, 'shard_b')});
is(tables_of($sa), 'order_items orders', '(4) moved away again, whole: nothing empty is left on shard_a');
is(tables_of($sb), 'order_items_g0_16383 orders_g0_16383', '(4) ... and shard_b holds its tables once');
$router->safe_psql('postgres', q{CALL snowseq_split_shard('orders', 8192, 'shard_a')});
is(last_move(), 'orders done, order_items done', '(4) a split at the boundary of the earlier moves then works');
is($router->safe_psql('postgres', $all), '2000 2000', '(4) the router returns every row');

done_testing();
