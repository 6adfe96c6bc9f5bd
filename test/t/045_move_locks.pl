# Elastic shards: the locks of moves, which no role can squat on.
#
#   router  (node 1): items PARTITION BY RANGE (item_id), one postgres_fdw
#                     partition on shard_a for every gene
#   shard_a (node 2), shard_b (node 3): wal_level = logical
#
# Up to 1.2 a move held advisory locks that any role can take with
# pg_advisory_lock: 1397640497 with the move's id on the router (the move
# is running), 1397640497 with 0 (one starter at a time), and on the source
# 1397640499 and 1397640498 with a fence's id (the mover is alive; writers
# wait).  An unprivileged role "squatter" takes them all here:
# (1) on the router, the lock of a move that died: snowseq_move_cleanup()
#     still undoes it (it reported it "running" and skipped it);
# (2) on the router, the locks of the moves to come, and on the source
#     those of the fences to come: a new move runs all the same (it waited
#     for the squatter);
# (3) the squatter cannot call the functions that take the new locks.
# The source's side of a dead mover (a fence left at block or reject) is
# the isolation spec fence_squat.
use strict;
use warnings;
use lib 'test';
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $pause_lock = 7236949375;
my @shard_conf = ('wal_level = logical', 'max_replication_slots = 10', 'max_wal_senders = 10',
	'max_prepared_transactions = 10');
my $router = snowseq_node('router', node_id => 1);
my $sa = snowseq_node('shard_a', node_id => 2, conf => \@shard_conf);
my $sb = snowseq_node('shard_b', node_id => 3, conf => \@shard_conf);

for my $n ($router, $sa, $sb)
{
	$n->safe_psql('postgres', 'CREATE ROLE squatter LOGIN');
}
$sa->safe_psql('postgres', q{CREATE TABLE items (item_id bigint PRIMARY KEY, note text NOT NULL);
	INSERT INTO items SELECT ((i % 32768)::bigint << 48) | (i::bigint << 10) | 1023, 'x' FROM generate_series(1, 3000) i});
my $servers = fdw_servers_sql('postgres', [ 'shard_a', $sa ], [ 'shard_b', $sb ]);
$router->safe_psql('postgres', "CREATE EXTENSION postgres_fdw;\n$servers" . q{
CREATE TABLE items (item_id bigint NOT NULL, note text NOT NULL) PARTITION BY RANGE (item_id);
CREATE FOREIGN TABLE items_0 PARTITION OF items FOR VALUES FROM (0) TO (MAXVALUE)
	SERVER shard_a OPTIONS (table_name 'items');
INSERT INTO snowseq_shard_map VALUES (32767, 'shard_a');
});

sub layout { return shard_layout($router, 'postgres', 'items'); }
sub leftovers { return move_leftovers('postgres', $sa, $sb); }
# a session of the squatter on a server
sub squatter
{
	my ($node) = @_;
	return $node->background_psql('postgres', extra_params => [ '-U', 'squatter' ]);
}

# ---------------------------------------------------------------------
# (1) A move that died, its lock squatted: the cleanup undoes it
# ---------------------------------------------------------------------
my $before = layout();
my $locker = $router->background_psql('postgres');
$locker->query_safe("SELECT pg_advisory_lock($pause_lock)");
my ($out, $err) = ('', '');
my $move = IPC::Run::start([ 'psql', '-X', '-d', $router->connstr('postgres'),
	'-c', "SET snowseq.test_pause_at = 'move_after_copy'",
	'-c', q{CALL snowseq_move_genes('items', 0, 8191, 'shard_b')} ], '>', \$out, '2>', \$err);
ok($router->poll_query_until('postgres', q{
	SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event = 'advisory' AND query LIKE 'CALL%'}),
	'(1) a move pauses after its copy');
$router->safe_psql('postgres', q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'CALL%'});
$move->finish;
$locker->query_safe("SELECT pg_advisory_unlock($pause_lock)");
my $dead = $router->safe_psql('postgres', q{SELECT move_id FROM snowseq_moves WHERE state = 'copy'});
like($dead, qr/^\d+$/, "(1) the mover died: move $dead is left in its copy step");

my $sq = squatter($router);
is($sq->query_safe("SELECT pg_advisory_lock(1397640497, $dead) IS NOT NULL"), 't',
	'(1) the squatter takes the advisory lock of that move as moves took it up to 1.2');
my $cleanup = $router->safe_psql('postgres', q{SELECT coalesce(move_id::text, '-') || ' ' || object || ': ' || action
	FROM snowseq_move_cleanup() ORDER BY 1});
note "cleanup:\n$cleanup";
unlike($cleanup, qr/: running$/m, '(1) snowseq_move_cleanup() does not take the dead move for a running one');
like($cleanup, qr/^$dead move: undone$/m, '(1) ... and undoes it');
is($router->safe_psql('postgres', "SELECT state FROM snowseq_moves WHERE move_id = $dead"), 'failed',
	'(1) the move is recorded as failed');
is(layout(), $before, '(1) the placement is unchanged');
is(join(',', leftovers()), '', '(1) nothing of the move is left on the shards');
$sq->query_safe('SELECT pg_advisory_unlock_all()');

# ---------------------------------------------------------------------
# (2) The locks of the moves to come, squatted: a move runs
# ---------------------------------------------------------------------
my $next = $router->safe_psql('postgres', q{SELECT max(move_id) FROM snowseq_moves});
$sq->query_safe(sprintf('SELECT count(pg_advisory_lock(1397640497, i)) FROM generate_series(0, %d) i', $next + 20));
my $sqa = squatter($sa);
$sqa->query_safe('SELECT count(pg_advisory_lock(1397640499, i)) + count(pg_advisory_lock(1397640498, i)) '
	  . 'FROM generate_series(1, 50) i');
($out, $err) = ('', '');
$move = IPC::Run::start([ 'psql', '-X', '-d', $router->connstr('postgres'),
	'-c', q{CALL snowseq_move_genes('items', 0, 8191, 'shard_b')} ], '>', \$out, '2>', \$err);
# the move ends, or waits on an advisory lock (as it did for the squatter up
# to 1.2), on the router or in its session on the source
my $router_waits = q{SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'CALL%' AND wait_event = 'advisory'};
my $source_waits = q{SELECT count(*) FROM pg_stat_activity WHERE application_name = 'snowseq move' AND wait_event = 'advisory'};
ok(wait_until(sub {
			$router->safe_psql('postgres', qq{SELECT EXISTS (SELECT 1 FROM snowseq_moves WHERE move_id > $next
				AND state IN ('done', 'failed'))}) eq 't'
			  || $router->safe_psql('postgres', $router_waits) > 0
			  || $sa->safe_psql('postgres', $source_waits) > 0 }),
	'(2) the move ends or waits');
my $waiting = $router->safe_psql('postgres', $router_waits) + $sa->safe_psql('postgres', $source_waits);
if ($waiting)
{
	# let it go, so the test ends
	$sq->query_safe('SELECT pg_advisory_unlock_all()');
	$sqa->query_safe('SELECT pg_advisory_unlock_all()');
}
$move->finish;
note "move with squatted locks:\n$err";
is($waiting, 0, '(2) nothing of the move waited on a lock the squatter holds');
is($move->result(0), 0, '(2) the move succeeds');
like(layout(), qr/^8191=shard_b,32767=shard_a /, '(2) genes 0..8191 are on shard_b');
is($router->safe_psql('postgres', q{SELECT count(*) || ' ' || count(DISTINCT item_id) FROM items}), '3000 3000',
	'(2) the router returns each of the 3000 rows once');

# ---------------------------------------------------------------------
# (3) The new locks are not for the squatter
# ---------------------------------------------------------------------
my $fence = $sa->safe_psql('postgres', q{SELECT max(fence_id) FROM snowseq_fence});
my ($rc, $o, $e) = $sa->psql('postgres', "SELECT snowseq_fence_hold($fence)", extra_params => [ '-U', 'squatter' ]);
like($e, qr/permission denied for function snowseq_fence_hold/, '(3) the squatter cannot hold a fence');
($rc, $o, $e) = $sa->psql('postgres', "SELECT snowseq_fence_let_go($fence)", extra_params => [ '-U', 'squatter' ]);
like($e, qr/permission denied for function snowseq_fence_let_go/, '(3) ... nor let go of one');
($rc, $o, $e) = $sb->psql('postgres', 'SELECT * FROM snowseq_subscription_error(1)', extra_params => [ '-U', 'squatter' ]);
like($e, qr/permission denied for function snowseq_subscription_error/, '(3) ... nor read the errors of subscriptions');

$sq->quit;
$sqa->quit;
$locker->quit;
done_testing();
