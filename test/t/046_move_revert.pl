# Elastic shards: a way back after the switch.  With
# snowseq.move_revert_window set, a move keeps its source current after the
# switch (replication from the destination back to the source) until it is
# finalized, reverted, or its window ends.
#
#   router  (node 1): orders and order_items PARTITION BY RANGE on their
#                     IDs, one postgres_fdw partition each on shard_a for
#                     every gene (a placement group: items reference their
#                     order, of the same gene)
#   shard_a (node 2), shard_b (node 3): wal_level = logical
#
# Two clients insert orders and items and update amounts through the
# router the whole time; what each saw committed is recorded outside the
# servers.
# (1) Split genes 16384..32767 to shard_b, revertable: the move says so,
#     snowseq_moves and snowseq_move_progress show until when; the source
#     keeps the moved rows; the router reads them on shard_b.
# (2) Writes through the router (inserts, updates, a delete) land on
#     shard_b and come back to shard_a.  A move of those genes is refused
#     while the move is revertable.
# (3) snowseq_move_revert under the writers: the map and partitions are as
#     before the move, every row a client saw is on shard_a once with every
#     update it saw, the destination's tables, slot, publication and the
#     source's subscription are gone, shard_a takes direct writes of those
#     genes again; the revert's pause is reported.
# (4) The same split again, then snowseq_move_finalize: the replication
#     back ends, the moved rows leave shard_a, the partition reads its table.
# (5) A split with a window of one second: once it has passed,
#     snowseq_move_cleanup() finalizes it.
# (6) An autovacuum of the tables the switch locks (likely on tables a move
#     has just filled) is cancelled by a waiting lock only after
#     deadlock_timeout, and every writer waits for the router's lock that
#     long: here 5 s, more than the switch's lock_timeout (2 s), with an
#     autovacuum that crawls on shard_b's copy of orders when the revert
#     switches.  The switch waits 20 ms for it, and the revert succeeds
#     (before, it failed on its lock_timeout).
# (7) An autovacuum that the launcher starts again while the switch retries
#     its lock of a foreign key's tables (a writer holds them) is cancelled
#     too: the switch reads pg_stat_activity afresh at each try.
# (8) A writer that holds those tables through every try: the revert
#     fails, names the writer's process, and can be run again.
# (9) A revert whose session ends in its switch: another revert is
#     refused until snowseq_move_cleanup() has resolved it, then succeeds.
# On PostgreSQL 16 and later the subscription back has origin = none.
use strict;
use warnings;
use lib 'test';
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $tmp = $PostgreSQL::Test::Utils::tmp_check;
my @shard_conf = ('wal_level = logical', 'max_replication_slots = 10', 'max_wal_senders = 10',
	'max_prepared_transactions = 10', 'wal_retrieve_retry_interval = 200ms');
my $router = snowseq_node('router', node_id => 1);
my $sa = snowseq_node('shard_a', node_id => 2, conf => \@shard_conf);
my $sb = snowseq_node('shard_b', node_id => 3, conf => \@shard_conf);
my %node = (shard_a => $sa, shard_b => $sb);

$sa->safe_psql('postgres', q{
CREATE TABLE orders (order_id bigint PRIMARY KEY, buyer_id text NOT NULL, amount numeric NOT NULL DEFAULT 0);
CREATE TABLE order_items (item_id bigint PRIMARY KEY,
	order_id bigint NOT NULL CONSTRAINT order_items_order_fk REFERENCES orders, qty int NOT NULL);
});
my $servers = fdw_servers_sql('postgres', [ 'shard_a', $sa ], [ 'shard_b', $sb ]);
$router->safe_psql('postgres', "CREATE EXTENSION postgres_fdw;\n$servers" . q{
CREATE TABLE orders (order_id bigint NOT NULL, buyer_id text NOT NULL, amount numeric NOT NULL DEFAULT 0)
	PARTITION BY RANGE (order_id);
CREATE FOREIGN TABLE orders_0 PARTITION OF orders FOR VALUES FROM (0) TO (MAXVALUE)
	SERVER shard_a OPTIONS (table_name 'orders');
CREATE TABLE order_items (item_id bigint NOT NULL, order_id bigint NOT NULL, qty int NOT NULL)
	PARTITION BY RANGE (item_id);
CREATE FOREIGN TABLE order_items_0 PARTITION OF order_items FOR VALUES FROM (0) TO (MAXVALUE)
	SERVER shard_a OPTIONS (table_name 'order_items');
INSERT INTO snowseq_shard_map VALUES (32767, 'shard_a');
});
my @initial = split /\n/, $router->safe_psql('postgres', q{
	WITH o AS (INSERT INTO orders (order_id, buyer_id)
		SELECT snowseq_gene_next('b' || i % 500), 'b' || i % 500 FROM generate_series(1, 3000) i
		RETURNING order_id, buyer_id)
	SELECT order_id FROM o});
$router->safe_psql('postgres', q{INSERT INTO order_items SELECT snowseq_gene_next(buyer_id), order_id, 1 FROM orders});
is(scalar(@initial), 3000, '3000 orders to begin with, an item each');

# ---------------------------------------------------------------------
# Clients: two writers through the router, all along
# ---------------------------------------------------------------------
my ($stop, $pause) = ("$tmp/revert_stop", "$tmp/revert_pause");
unlink $stop, $pause;
END
{
	my $fh;
	close $fh if open $fh, '>', $stop;
}
# a batch: new orders with an item each, and updates of all orders of a buyer
my $gen = q{
	my ($k, $f) = @ARGV; open my $fh, '>', $f or die;
	for my $i (1 .. 40) {
		my $b = "w${k}_" . int(rand(300));
		if ($i % 4) {
			print $fh "WITH o AS (INSERT INTO orders (order_id, buyer_id) VALUES (snowseq_gene_next('$b'), '$b') RETURNING order_id), "
			  . "i AS (INSERT INTO order_items SELECT snowseq_gene_next('$b'), order_id, 1 FROM o) SELECT 'i', order_id FROM o;\n";
		} else {
			print $fh "UPDATE orders SET amount = amount + 1 WHERE order_id <\@ snowseq_key_range('$b') AND buyer_id = '$b' RETURNING 'u', order_id, amount;\n";
		}
	}
};
my @clients = map {
	# (retry_sleep: a pause before running a failed batch again, while a
	# server is busy with a move; nothing waits on it)
	batch_client($router, batch => "$tmp/revert_w$_.sql", out => "$tmp/revert_w$_.out", err => "$tmp/revert_w$_.err",
		stop => $stop, pause => $pause, key => $_, gen => $gen, retry_sleep => 0.1)
} 1 .. 2;
sub pause_clients { pause_batch_clients($pause, @clients); }
sub resume_clients { resume_batch_clients($pause); }
sub lines_of
{
	my ($c) = @_;
	open my $fh, '<', $c->{out} or return ();
	my @l;
	while (my $l = <$fh>) { last unless $l =~ /\n\z/; chomp $l; push @l, $l; }
	return @l;
}
# until each writer has received another 40 rows (not a length of time)
sub let_clients_write
{
	my ($what) = @_;
	my %n = map { $_->{out} => scalar(lines_of($_)) } @clients;
	ok(wait_until(sub { !grep { scalar(lines_of($_)) < $n{ $_->{out} } + 40 } @clients }), "$what: the clients write");
}

# ---------------------------------------------------------------------
# The state, checked from every side
# ---------------------------------------------------------------------
sub layout { return shard_layout($router, 'postgres', 'orders', 'order_items'); }
my $layout_before = layout();

# the rows the clients saw committed, and the number of updates of each
sub reference
{
	my (%ref, %updates);
	$ref{$_} = 1 for @initial;
	for my $c (@clients)
	{
		for (lines_of($c))
		{
			my @f = split /\|/;
			if ($f[0] eq 'i') { $ref{ $f[1] }++; }
			elsif ($f[0] eq 'u') { $updates{ $f[1] }++; }
		}
	}
	return (\%ref, \%updates);
}

# what the router's partitions read: every reference order once, with its
# updates, and an item for each; nothing else
sub check_state
{
	my ($step) = @_;
	pause_clients();
	my ($ref, $updates) = reference();
	is(scalar(grep { $_ > 1 } values %$ref), 0, "$step: no ID was issued twice to the clients");
	my %amount = map { split /\|/ } split /\n/, $router->safe_psql('postgres', 'SELECT order_id, amount FROM orders');
	my $n = $router->safe_psql('postgres', 'SELECT count(*) FROM orders');
	is($n, scalar(keys %$ref), "$step: the router returns as many orders as the reference (" . scalar(keys %$ref) . ')');
	is(scalar(keys %amount), $n, "$step: the router returns no order twice");
	is(scalar(grep { !exists $amount{$_} } keys %$ref), 0, "$step: the router returns every order a client saw inserted");
	my @bad = grep { exists $amount{$_} && $amount{$_} != ($updates->{$_} // 0) } keys %$ref;
	is(scalar(@bad), 0, "$step: every order's amount is the number of updates its client saw ("
		  . scalar(keys %$updates) . ' orders updated)')
	  or diag join ', ', map { "$_: $amount{$_} vs " . ($updates->{$_} // 0) } @bad[0 .. ($#bad < 4 ? $#bad : 4)];
	is($router->safe_psql('postgres', q{SELECT count(*) || ' ' || count(DISTINCT item_id) || ' ' || count(DISTINCT order_id) FROM order_items}),
		"$n $n $n", "$step: an item for each order, each once");
	resume_clients();
	return ($ref, $updates);
}
check_state('before any move');

# what a way back leaves: slots, publications, subscriptions, partitioned tables
sub back_objects
{
	my @l;
	for my $s ('shard_a', 'shard_b')
	{
		push @l, map { "$s: $_" } grep { length } split /\n/, $node{$s}->safe_psql('postgres', q{
			SELECT 'slot ' || slot_name FROM pg_replication_slots
			UNION ALL SELECT 'publication ' || pubname FROM pg_publication
			UNION ALL SELECT 'subscription ' || subname FROM pg_subscription
			UNION ALL SELECT 'partitioned ' || relname FROM pg_class WHERE relkind = 'p'
			UNION ALL SELECT 'prepared ' || gid FROM pg_prepared_xacts});
	}
	return @l;
}

# ---------------------------------------------------------------------
# (1) A revertable split
# ---------------------------------------------------------------------
let_clients_write('before the split');
my ($rc, $out, $err) = $router->psql('postgres', q{SET snowseq.move_revert_window = '1h';
	CALL snowseq_split_shard('orders', 16384, 'shard_b')});
note "split:\n$err";
is($rc, 0, '(1) genes 16384..32767 of orders and order_items move to shard_b');
my $move = $router->safe_psql('postgres', q{SELECT move_id FROM snowseq_moves WHERE group_move IS NULL ORDER BY move_id DESC LIMIT 1});
like($err, qr/NOTICE:  move $move keeps server "shard_a" current until .*: CALL snowseq_move_revert\($move\) moves the genes back/,
	'(1) the move says it can be reverted, and until when');
is($router->safe_psql('postgres', "SELECT string_agg(state::text, ',' ORDER BY move_id) FROM snowseq_moves WHERE move_id = $move OR group_move = $move"),
	'revertable,revertable', '(1) both tables\' records say revertable');
is($router->safe_psql('postgres', "SELECT revertable_until > now() + interval '50 minutes' FROM snowseq_moves WHERE move_id = $move"),
	't', '(1) snowseq_moves says until when');
is($router->safe_psql('postgres', "SELECT phase || ' ' || (revertable_until IS NOT NULL) FROM snowseq_move_progress WHERE move_id = $move"),
	'revertable true', '(1) snowseq_move_progress shows the move as revertable');
like(layout(), qr/^16383=shard_a,32767=shard_b /, '(1) the map gives genes 16384..32767 to shard_b');
my $lo = $router->safe_psql('postgres', 'SELECT 16384::bigint << 48');
ok($sa->safe_psql('postgres', "SELECT count(*) FROM orders WHERE order_id >= $lo") > 0,
	'(1) the source keeps the moved rows');
my @objects = back_objects();
note "objects of the way back:\n" . join("\n", @objects);
ok((grep { /^shard_a: subscription snowseq_move_\d+_\d+_\d+_back$/ } @objects), '(1) shard_a subscribes to the way back');
ok((grep { /^shard_b: slot snowseq_move_\d+_\d+_\d+_back$/ } @objects) && (grep { /^shard_b: publication snowseq_move_\d+_\d+_\d+_back$/ } @objects),
	'(1) shard_b publishes it, with its slot');
is(join(',', sort grep { /partitioned/ } @objects), 'shard_b: partitioned order_items,shard_b: partitioned orders',
	'(1) shard_b publishes through tables named like the source tables');
is($router->safe_psql('postgres', "SELECT string_agg(kind::text, ',' ORDER BY kind) FROM snowseq_move_objects WHERE move_id IN "
	  . "(SELECT move_id FROM snowseq_moves WHERE move_id = $move OR group_move = $move)"),
	'publication,replication slot,subscription,table,table,view,view',
	'(1) the router keeps the records of the five objects of the way back and of the two keep views (its own replication, fences and prepared transaction are over)');
if ($sa->safe_psql('postgres', 'SHOW server_version_num') >= 160000)
{
	is($sa->safe_psql('postgres', 'SELECT suborigin FROM pg_subscription'), 'none',
		'(1) on PostgreSQL 16 and later the subscription back takes only changes made on the destination');
}
check_state('(1) after the split');

# ---------------------------------------------------------------------
# (2) Writes on the destination come back to the source
# ---------------------------------------------------------------------
let_clients_write('(2) on shard_b');
my ($gone) = grep { length } split /\n/, $router->safe_psql('postgres',
	"SELECT order_id FROM orders WHERE order_id >= $lo AND buyer_id LIKE 'b%' ORDER BY order_id LIMIT 1");
$router->safe_psql('postgres', "DELETE FROM order_items WHERE order_id = $gone; DELETE FROM orders WHERE order_id = $gone");
@initial = grep { $_ != $gone } @initial;
pause_clients();
my $on_b = q{SELECT count(*) || ' ' || sum(amount) FROM orders_g16384_32767};
my $want = $sb->safe_psql('postgres', $on_b);
ok($sa->poll_query_until('postgres', "SELECT count(*) || ' ' || sum(amount) FROM orders WHERE order_id >= $lo", $want),
	"(2) shard_a catches up with every insert, update and delete of the moved genes on shard_b ($want)");
is($sa->safe_psql('postgres', "SELECT count(*) FROM order_items WHERE item_id >= $lo"),
	$sb->safe_psql('postgres', 'SELECT count(*) FROM order_items_g16384_32767'), '(2) ... and of their items');
is($sa->safe_psql('postgres', "SELECT count(*) FROM orders WHERE order_id = $gone"), 0, '(2) ... the deleted order is gone there too');
resume_clients();
($rc, $out, $err) = $router->psql('postgres', q{CALL snowseq_move_genes('orders', 16384, 32767, 'shard_a')});
like($err, qr/ERROR:  genes 16384 to 32767 of table "orders" can still be moved back by reverting move $move/,
	'(2) a move of those genes is refused while the move is revertable');
($rc, $out, $err) = $router->psql('postgres', "CALL snowseq_move_finalize($move + 1)");
like($err, qr/ERROR:  move \d+ is a table of move $move/, '(2) a move is reverted or finalized by its leading record');

# ---------------------------------------------------------------------
# (3) The revert, under the writers
# ---------------------------------------------------------------------
let_clients_write('(3) before the revert');
($rc, $out, $err) = $router->psql('postgres', "CALL snowseq_move_revert($move)");
note "revert:\n$err";
is($rc, 0, '(3) the move is reverted');
like($err, qr/NOTICE:  genes 16384 to 32767 of table "orders" are on server "shard_a" again; their writes were held back for ([\d.]+) ms/,
	'(3) the revert says how long writes were held back');
my ($revert_pause) = $err =~ /held back for ([\d.]+) ms/;
note "revert pause: $revert_pause ms";
is(layout(), $layout_before, '(3) the map and the partitions are as before the move');
is($router->safe_psql('postgres', "SELECT string_agg(state::text, ',' ORDER BY move_id) FROM snowseq_moves WHERE move_id = $move OR group_move = $move"),
	'reverted,reverted', '(3) the move is recorded as reverted');
is($router->safe_psql('postgres', "SELECT state || ' ' || (pause_ms IS NOT NULL) FROM snowseq_moves WHERE reverts = $move"),
	'done true', '(3) the revert is recorded, with its pause');
is(join(',', back_objects()), '', '(3) no slot, publication, subscription or table of the way back is left');
is($sb->safe_psql('postgres', q{SELECT count(*) FROM pg_class WHERE relname ~ '^(orders|order_items)'}), 0,
	'(3) the destination tables are gone from shard_b');
is($router->safe_psql('postgres', 'SELECT count(*) FROM snowseq_move_objects'), 0, '(3) no object is recorded any more');
let_clients_write('(3) after the revert');
check_state('(3) after the revert');
# every order a client saw is on shard_a, once (the reference taken again:
# the clients wrote between the two pauses)
pause_clients();
my ($ref) = reference();
my %on_a = map { $_ => 1 } split /\n/, $sa->safe_psql('postgres', 'SELECT order_id FROM orders');
is(scalar(grep { !$on_a{$_} } keys %$ref), 0, '(3) shard_a has every order a client saw inserted, the ones written on shard_b included');
is(scalar(keys %on_a), scalar(keys %$ref), '(3) ... and nothing else');
resume_clients();
my ($key) = grep { length } split /\n/, $router->safe_psql('postgres',
	q{SELECT k FROM (SELECT 'k' || i AS k FROM generate_series(1, 500) i) s WHERE snowseq_gene(k) >= 16384 LIMIT 1});
my ($drc, $dout, $derr) = $sa->psql('postgres',
	"BEGIN; INSERT INTO orders (order_id, buyer_id) VALUES (snowseq_gene_next('$key'), '$key'); ROLLBACK");
is($derr, '', '(3) shard_a takes direct writes of the genes again: their fence is gone');

# ---------------------------------------------------------------------
# (4) The same split again, finalized
# ---------------------------------------------------------------------
($rc, $out, $err) = $router->psql('postgres', q{SET snowseq.move_revert_window = '1h';
	CALL snowseq_split_shard('orders', 16384, 'shard_b')});
is($rc, 0, '(4) the split again, revertable');
$move = $router->safe_psql('postgres', q{SELECT move_id FROM snowseq_moves WHERE group_move IS NULL AND reverts IS NULL ORDER BY move_id DESC LIMIT 1});
let_clients_write('(4) on shard_b');
($rc, $out, $err) = $router->psql('postgres', "CALL snowseq_move_finalize($move)");
note "finalize:\n$err";
is($rc, 0, '(4) the move is finalized');
like($err, qr/NOTICE:  move $move is final/, '(4) ... and says so');
is($router->safe_psql('postgres', "SELECT string_agg(state || ' ' || (revertable_until IS NULL), ',' ORDER BY move_id) "
	  . "FROM snowseq_moves WHERE move_id = $move OR group_move = $move"), 'done true,done true', '(4) the move is done');
is(join(',', back_objects()), '', '(4) the replication back is gone');
is($sa->safe_psql('postgres', "SELECT count(*) FROM orders WHERE order_id >= $lo"), 0, '(4) the moved rows left shard_a');
like(layout(), qr/orders_0 FOR VALUES FROM \('0'\) TO \('4611686018427387904'\) shard_a\.orders;/,
	'(4) the partition that kept genes 0..16383 reads its table again');
is($sa->safe_psql('postgres', q{SELECT count(*) FROM pg_views WHERE viewname ~ '_keep_'}), 0, '(4) the keep views are gone');
($rc, $out, $err) = $router->psql('postgres', "CALL snowseq_move_revert($move)");
like($err, qr/ERROR:  move $move is done, not revertable/, '(4) a finalized move cannot be reverted');
check_state('(4) after the finalize');

# ---------------------------------------------------------------------
# (5) The window ends: snowseq_move_cleanup() finalizes
# ---------------------------------------------------------------------
($rc, $out, $err) = $router->psql('postgres', q{SET snowseq.move_revert_window = 1;
	CALL snowseq_move_genes('orders', 16384, 32767, 'shard_a')});
is($rc, 0, '(5) genes 16384..32767 move back to shard_a, revertable for a second');
$move = $router->safe_psql('postgres', q{SELECT move_id FROM snowseq_moves WHERE group_move IS NULL AND reverts IS NULL ORDER BY move_id DESC LIMIT 1});
# the window itself is the point here: wait for its end, not for a time
ok($router->poll_query_until('postgres', "SELECT revertable_until < clock_timestamp() FROM snowseq_moves WHERE move_id = $move"),
	'(5) the window ends');
my $cleanup = $router->safe_psql('postgres', q{SELECT coalesce(move_id::text, '-') || ' ' || object || ': ' || action FROM snowseq_move_cleanup()});
note "cleanup:\n$cleanup";
like($cleanup, qr/^$move move: revert window over: finalized$/m, '(5) snowseq_move_cleanup() finalizes the move');
is($router->safe_psql('postgres', "SELECT state FROM snowseq_moves WHERE move_id = $move"), 'done', '(5) the move is done');
is(join(',', back_objects()), '', '(5) the replication back is gone');
like(layout(), qr/^32767=shard_a /, '(5) all genes are on shard_a again');
check_state('(5) at the end');

open my $sfh, '>', $stop or die;
close $sfh;
$_->{h}->finish for @clients;
my $errors = join '', map { -e $_->{err} ? slurp_file($_->{err}) : '' } @clients;
unlike($errors, qr/duplicate key|violates/, 'no writer hit a duplicate key or a broken constraint');
# the source takes the genes' writes back in the instant of the router's
# switch (its fences go in a transaction committed with it): no write
# through the router is refused there as if the genes were elsewhere
unlike($errors, qr/have moved to server/, 'no writer was refused by a fence of genes that had come back');

# ---------------------------------------------------------------------
# (6) An autovacuum of a table the revert's switch locks
# ---------------------------------------------------------------------
($rc, $out, $err) = $router->psql('postgres', q{SET snowseq.move_revert_window = '1h';
	CALL snowseq_move_genes('orders', 16384, 32767, 'shard_b')});
is($rc, 0, '(6) genes 16384..32767 move to shard_b, revertable');
$move = $router->safe_psql('postgres', q{SELECT move_id FROM snowseq_moves WHERE group_move IS NULL AND reverts IS NULL ORDER BY move_id DESC LIMIT 1});
my $dest = $router->safe_psql('postgres', "SELECT dest_table FROM snowseq_moves WHERE move_id = $move");
$sb->safe_psql('postgres', qq{ALTER SYSTEM SET deadlock_timeout = '5s'; ALTER SYSTEM SET autovacuum_naptime = '1s';
	SELECT pg_reload_conf();
	ALTER TABLE $dest SET (autovacuum_vacuum_cost_delay = 100, autovacuum_vacuum_cost_limit = 1,
		autovacuum_vacuum_threshold = 0, autovacuum_vacuum_scale_factor = 0)});
# 20,000 rows and as many dead ones in the moved genes (written on shard_b,
# they come back to shard_a): autovacuum crawls over them, 100 ms a page
$router->safe_psql('postgres', q{INSERT INTO orders (order_id, buyer_id)
	SELECT ((16384 + i % 16384)::bigint << 48) | (i::bigint << 10) | 1023, 'bulk' FROM generate_series(1, 20000) i});
$router->safe_psql('postgres', 'UPDATE orders SET amount = amount + 1 WHERE order_id >= 16384::bigint << 48');
ok($sb->poll_query_until('postgres', qq{SELECT count(*) > 0 FROM pg_stat_progress_vacuum WHERE relid = '$dest'::regclass}),
	"(6) an autovacuum of $dest runs on shard_b");
($rc, $out, $err) = $router->psql('postgres', "CALL snowseq_move_revert($move)");
note "revert during an autovacuum:\n$err";
is($rc, 0, '(6) the revert switches all the same: its lock cancels the autovacuum without waiting for deadlock_timeout');
like(layout(), qr/^32767=shard_a /, '(6) all genes are on shard_a again');
like(slurp_file($sb->logfile), qr/canceling autovacuum task/, '(6) shard_b says it cancelled the autovacuum');
is(join(',', back_objects()), '', '(6) no slot, publication, subscription or table of the way back is left');

# Genes 16384..32767 to shard_b, revertable: the move's id
sub revertable_split
{
	my ($step) = @_;
	my ($rc, $out, $err) = $router->psql('postgres', q{SET snowseq.move_revert_window = '1h';
		CALL snowseq_move_genes('orders', 16384, 32767, 'shard_b')});
	is($rc, 0, "$step genes 16384..32767 move to shard_b, revertable") or diag($err);
	return $router->safe_psql('postgres',
		q{SELECT move_id FROM snowseq_moves WHERE group_move IS NULL AND reverts IS NULL ORDER BY move_id DESC LIMIT 1});
}

# The router's session waiting at a pause point (the advisory lock of
# snowseq.test_pause_at)
my $paused = q{SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = (7236949375 & 4294967295)};

# A revert of $move that stops before it locks the tables of the foreign
# key, until the returned locker session lets go of the pause's lock:
# (locker, harness); its errors go to $$err_ref
sub paused_revert
{
	my ($step, $move, $err_ref) = @_;
	my $locker = $router->background_psql('postgres');
	$locker->query_safe('SELECT pg_advisory_lock(7236949375)');
	my $out = '';
	$$err_ref = '';
	my $h = IPC::Run::start([ 'psql', '-X', '-v', 'ON_ERROR_STOP=1', '-d', $router->connstr('postgres'),
		'-c', "SET snowseq.test_pause_at = 'move_before_keys_lock'",
		'-c', "CALL snowseq_move_revert($move)" ], '>', \$out, '2>', $err_ref);
	ok($router->poll_query_until('postgres', "SELECT count(*) > 0 FROM ($paused) p"),
		"$step the revert is about to lock the tables of the foreign key");
	return ($locker, $h);
}

# ---------------------------------------------------------------------
# (7) An autovacuum that starts while the switch retries its lock
# ---------------------------------------------------------------------
# The switch tries the lock of a foreign key's tables again while writers
# hold them, cancelling each time the autovacuums that hold them.  Its
# source transaction reads pg_stat_activity, which a transaction sees as it
# was at its first read: a worker the launcher starts again after the first
# was cancelled (autovacuum_naptime, 1 s here) was never cancelled, and the
# switch failed after its tries (as a test run on a busy machine saw).
# Here a writer holds shard_b's orders from the moment the revert is about
# to lock until such a second autovacuum has come (or been cancelled).
$move = revertable_split('(7)');
$dest = $router->safe_psql('postgres', "SELECT dest_table FROM snowseq_moves WHERE move_id = $move");
$sb->safe_psql('postgres', qq{ALTER TABLE $dest SET (autovacuum_vacuum_cost_delay = 100, autovacuum_vacuum_cost_limit = 1,
	autovacuum_vacuum_threshold = 0, autovacuum_vacuum_scale_factor = 0)});
$router->safe_psql('postgres', 'UPDATE orders SET amount = amount + 1 WHERE order_id >= 16384::bigint << 48');
my $vacuums = qq{SELECT string_agg(pid::text, ',') FROM pg_stat_progress_vacuum WHERE relid = '$dest'::regclass};
ok(wait_until(sub { $sb->safe_psql('postgres', $vacuums) ne '' }), "(7) an autovacuum of $dest runs on shard_b");
my $rerr;
my ($locker, $revert) = paused_revert('(7)', $move, \$rerr);
my $writer = $sb->background_psql('postgres');
$writer->query_safe("BEGIN; LOCK TABLE $dest IN ROW EXCLUSIVE MODE");
my $first = '';
ok(wait_until(sub { ($first = $sb->safe_psql('postgres', $vacuums)) =~ /^\d+$/ }), '(7) one autovacuum of it runs');
my $log_from = -s $sb->logfile;
# the workers whose autovacuum of it was cancelled since (one worker may
# be cancelled again on the next table of its list)
sub cancelled
{
	my %pid = map { $_ => 1 } substr(slurp_file($sb->logfile), $log_from)
	  =~ /\[(\d+)\] ERROR:  canceling autovacuum task\n[^\n]*CONTEXT:  (?:[^\n]*\n\s*)?automatic vacuum of table "postgres\.\Q$dest\E"/g;
	return sort keys %pid;
}
$locker->query_safe('SELECT pg_advisory_unlock(7236949375)');
# the first is cancelled; another starts: it runs, or it is cancelled too
ok(wait_until(sub { grep { $_ ne $first } (cancelled(), split /,/, $sb->safe_psql('postgres', $vacuums)) }),
	'(7) the first autovacuum is cancelled, and another one starts');
$writer->query_safe('COMMIT');
$writer->quit;
$locker->quit;
$revert->finish;
note "revert while autovacuums come and go:\n$rerr";
is($revert->result(0), 0, '(7) the revert switches: it cancels the autovacuum that started after its first try');
like(layout(), qr/^32767=shard_a /, '(7) all genes are on shard_a again');
is(join(',', cancelled()), join(',', sort($first, grep { $_ ne $first } cancelled())),
	'(7) shard_b says it cancelled the first autovacuum');
ok(scalar(grep { $_ ne $first } cancelled()), '(7) ... and the one that started after it');
is(join(',', back_objects()), '', '(7) no slot, publication, subscription or table of the way back is left');

# ---------------------------------------------------------------------
# (8) A writer that holds the tables through every try
# ---------------------------------------------------------------------
# The revert fails, says who held them, and leaves the move revertable:
# once the writer is done, the revert succeeds.
$move = revertable_split('(8)');
$dest = $router->safe_psql('postgres', "SELECT dest_table FROM snowseq_moves WHERE move_id = $move");
my $sums = q{SELECT (SELECT count(*) || ' ' || count(DISTINCT order_id) || ' ' || sum(amount) FROM orders) || ' '
	|| (SELECT count(*) || ' ' || count(DISTINCT item_id) FROM order_items)};
my $before8 = $router->safe_psql('postgres', $sums);
($locker, $revert) = paused_revert('(8)', $move, \$rerr);
$writer = $sb->background_psql('postgres');
my $wpid = $writer->query_safe("BEGIN; LOCK TABLE $dest IN ROW EXCLUSIVE MODE; SELECT pg_backend_pid()");
$locker->query_safe('SELECT pg_advisory_unlock(7236949375)');
$revert->finish;
note "revert while a writer holds the tables:\n$rerr";
isnt($revert->result(0), 0, '(8) the revert fails');
like($rerr, qr/ERROR:  could not lock tables \S+ and \S+ on server "shard_b" to check foreign key/, '(8) ... on the lock of the foreign key\'s tables');
# (an autovacuum that started since the last try may be named too)
like($rerr, qr/DETAIL:  They were held through \d+ tries, at the last by [^\n]*\bprocess $wpid \(client backend, idle in transaction\)/,
	'(8) ... and says which session held them');
like(layout(), qr/^16383=shard_a,32767=shard_b /, '(8) the genes stay on shard_b');
is($router->safe_psql('postgres', $sums), $before8, '(8) every order and item is there once, as before');
is($router->safe_psql('postgres', "SELECT string_agg(state::text, ',' ORDER BY move_id) FROM snowseq_moves WHERE reverts = $move AND group_move IS NULL"),
	'failed', '(8) the revert\'s record says it failed');
$writer->query_safe('COMMIT');
$writer->quit;
$locker->quit;
($rc, $out, $err) = $router->psql('postgres', "CALL snowseq_move_revert($move)");
is($rc, 0, '(8) once the writer is done, the move is reverted') or diag($err);
like(layout(), qr/^32767=shard_a /, '(8) all genes are on shard_a again');
is(join(',', back_objects()), '', '(8) no slot, publication, subscription or table of the way back is left');
is($router->safe_psql('postgres', "SELECT string_agg(state::text, ',' ORDER BY move_id) || ' ' || count(DISTINCT token) FROM snowseq_moves WHERE reverts = $move AND group_move IS NULL"),
	'failed,done 1', '(8) the second revert took the name of the failed one');
is($router->safe_psql('postgres', $sums), $before8, '(8) after the revert: every order and item is there once, as before');

# ---------------------------------------------------------------------
# (9) A revert cut off mid-switch: resolved before the next one
# ---------------------------------------------------------------------
$move = revertable_split('(9)');
($locker, $revert) = paused_revert('(9)', $move, \$rerr);
is($router->safe_psql('postgres', "SELECT pg_terminate_backend(pid) FROM ($paused) p"), 't', '(9) ... and its session is ended there');
$revert->finish;
$locker->query_safe('SELECT pg_advisory_unlock(7236949375)');
$locker->quit;
($rc, $out, $err) = $router->psql('postgres', "CALL snowseq_move_revert($move)");
note "revert after the one cut off:\n$err";
like($err, qr/ERROR:  move \d+, an earlier revert of move $move, is \w+\nHINT:  Run snowseq_move_cleanup\(\) to resolve it, then revert again\./,
	'(9) another revert is refused until the one cut off is resolved, and says so');
my $cleanup9 = $router->safe_psql('postgres', q{SELECT coalesce(move_id::text, '-') || ' ' || object || ': ' || action FROM snowseq_move_cleanup()});
note "cleanup:\n$cleanup9";
is($router->safe_psql('postgres', "SELECT string_agg(state::text, ',' ORDER BY move_id) FROM snowseq_moves WHERE reverts = $move AND group_move IS NULL"),
	'failed', '(9) cleanup resolves it: it failed');
like(layout(), qr/^16383=shard_a,32767=shard_b /, '(9) the genes are on shard_b still');
($rc, $out, $err) = $router->psql('postgres', "CALL snowseq_move_revert($move)");
is($rc, 0, '(9) the move is reverted then') or diag($err);
like(layout(), qr/^32767=shard_a /, '(9) all genes are on shard_a again');
is(join(',', back_objects()), '', '(9) no slot, publication, subscription or table of the way back is left');
is($router->safe_psql('postgres', $sums), $before8, '(9) every order and item is there once, as before');
done_testing();
