# Elastic shards, safety: what a move must never do to the servers it
# touches.
#
#   router  (node 1): orders PARTITION BY RANGE (order_id), one postgres_fdw
#                     partition on shard_a for every gene to begin with
#   shard_a (node 2), shard_b (node 3): wal_level = logical, a superuser
#                     "mover" that logs in with a password (scram-sha-256)
#
# (1) Foreign keys on the source.  order_items on shard_a references orders
#     ON DELETE CASCADE: a split of orders would delete the moved rows with
#     triggers off and leave order items without their order.  The move
#     refuses before it starts, names the constraint, and changes nothing.
# (2) No secret in any SQL text.  The router's user mappings carry the
#     password of "mover"; shard_b reaches shard_a for the copy with a
#     password file.  With every logging, sampling and statistics setting
#     on, a split runs while a pg_read_all_stats role samples
#     pg_stat_activity on every server; then that role reads
#     pg_stat_statements everywhere, and every server log is searched: the
#     password appears nowhere.  A destination without a password file is
#     refused with a hint.
# (3) A router killed between its two commits of a switch (the source's
#     prepared transaction and its own): the first query after the restart
#     returns every row once, with no manual step (the move resolver undoes
#     or finishes the move at start); writes to the moved genes work.  Both
#     sides of the router's commit are tested, at pause points, and a
#     source that is down when the router starts again.  A router killed
#     once a move recorded what it will make, before it made any of it:
#     the cleanup takes the recorded objects as dropped.
# (4) Progress: while a slow copy runs, snowseq_move_progress shows its
#     phase, rows copied of the total, percent, bytes, lag and time left;
#     afterwards snowseq_moves keeps the totals.  The table-sync slot the
#     copy makes on the source is recorded under its exact name.
# (5) snowseq_move_cleanup() reads records, never names: prepared
#     transactions that no record names are neither listed nor resolved.
use strict;
use warnings;
use lib 'test';
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;
use Time::HiRes qw(usleep);

my $tmp = $PostgreSQL::Test::Utils::tmp_check;
my $secret = 'Mv-7q3Zk9-pw-e81f';
my $pause_lock = 7236949375;

# ---------------------------------------------------------------------
# Servers: everything a log or a statistics view can show, on
# ---------------------------------------------------------------------
my @loud = (
	"shared_preload_libraries = 'snowseq, pg_stat_statements'",
	'pg_stat_statements.track = all', 'pg_stat_statements.track_utility = on',
	'log_statement = all', 'log_min_duration_statement = 0', 'log_min_duration_sample = 0',
	'log_statement_sample_rate = 1', 'log_transaction_sample_rate = 1',
	'log_connections = on', 'log_disconnections = on', 'log_replication_commands = on',
	'log_min_messages = debug1', 'log_min_error_statement = debug1',
	'log_parameter_max_length = -1', 'log_parameter_max_length_on_error = -1',
	'track_activity_query_size = 16384');
my @shard_conf = (@loud, shard_conf());
my $router = snowseq_node('router', node_id => 1, conf => \@loud);
my $sa = snowseq_node('shard_a', node_id => 2, conf => \@shard_conf);
my $sb = snowseq_node('shard_b', node_id => 3, conf => \@shard_conf);
my @all = ($router, $sa, $sb);

# "mover" logs in with its password on the shards, everyone else as before
my $passfile = "$tmp/shard_pgpass";
for my $s ($sa, $sb)
{
	$s->safe_psql('postgres', qq{SET log_statement = 'none'; SET pg_stat_statements.track = 'none';
		CREATE ROLE mover SUPERUSER LOGIN PASSWORD '$secret';
		CREATE ROLE mover2 SUPERUSER LOGIN PASSWORD '$secret'});
	my $hba = $s->data_dir . '/pg_hba.conf';
	my $old = slurp_file($hba);
	open my $fh, '>', $hba or die;
	print $fh "local all mover,mover2 scram-sha-256\n$old";
	close $fh;
	$s->reload;
}
{
	open my $fh, '>', $passfile or die;
	print $fh "*:*:*:mover:$secret\n*:*:*:mover2:$secret\n";
	close $fh;
	chmod 0600, $passfile;
}
for my $n (@all)
{
	$n->safe_psql('postgres', q{CREATE EXTENSION pg_stat_statements;
		CREATE ROLE watcher LOGIN IN ROLE pg_read_all_stats});
}

$sa->safe_psql('postgres', q{
CREATE TABLE orders (order_id bigint PRIMARY KEY, buyer_id text NOT NULL, amount numeric NOT NULL DEFAULT 0);
CREATE TABLE order_items (item_id bigserial PRIMARY KEY,
	order_id bigint NOT NULL CONSTRAINT order_items_order_fk REFERENCES orders ON DELETE CASCADE, qty int NOT NULL);
});
my $servers = '';
for my $s ([ 'shard_a', $sa ], [ 'shard_b', $sb ])
{
	# the password file is read where a connection starts: by the router
	# (which has the mapping's password and never needs it) and by the
	# destination of a copy
	$servers .= sprintf("CREATE SERVER %s FOREIGN DATA WRAPPER postgres_fdw OPTIONS "
		  . "(host '%s', port '%s', dbname 'postgres', passfile '%s');\n"
		  . "CREATE USER MAPPING FOR CURRENT_USER SERVER %s OPTIONS (user 'mover', password '%s');\n"
		  . "CREATE USER MAPPING FOR shardadmin SERVER %s OPTIONS (user 'mover2', password '%s');\n",
		$s->[0], $s->[1]->host, $s->[1]->port, $passfile, $s->[0], $secret, $s->[0], $secret);
}
$router->safe_psql('postgres', "SET log_statement = 'none'; SET pg_stat_statements.track = 'none';\n"
	  . "CREATE EXTENSION postgres_fdw; CREATE ROLE shardadmin SUPERUSER LOGIN;\n$servers" . q{
CREATE TABLE orders (order_id bigint NOT NULL, buyer_id text NOT NULL, amount numeric NOT NULL DEFAULT 0)
	PARTITION BY RANGE (order_id);
CREATE FOREIGN TABLE orders_0 PARTITION OF orders FOR VALUES FROM (0) TO (MAXVALUE)
	SERVER shard_a OPTIONS (table_name 'orders');
INSERT INTO snowseq_shard_map VALUES (32767, 'shard_a');
INSERT INTO orders (order_id, buyer_id)
	SELECT snowseq_gene_next('b' || i), 'b' || i FROM generate_series(1, 3000) i;
});
$sa->safe_psql('postgres', q{INSERT INTO order_items (order_id, qty) SELECT order_id, 1 FROM orders});
my $total = 3000;
my $upper = $router->safe_psql('postgres', q{SELECT count(*) FROM orders WHERE order_id >= 16384::bigint << 48});
ok($upper > 1000 && $upper < 2000, "genes 16384..32767 hold $upper of the $total orders");

# how many order items on shard_a have no order
sub orphans
{
	return $sa->safe_psql('postgres',
		q{SELECT count(*) FROM order_items i WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.order_id = i.order_id)});
}

sub layout
{
	return $router->safe_psql('postgres', q{
		SELECT string_agg(upper_gene || '=' || shard, ',' ORDER BY upper_gene) FROM snowseq_shard_map})
	  . ' ' . $router->safe_psql('postgres', q{
		SELECT string_agg(c.relname || ':' || pg_get_expr(c.relpartbound, c.oid), ', ' ORDER BY c.relname)
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'orders'::regclass});
}

# every row once, through the router and on the shards
sub check_rows
{
	my ($step, $n) = @_;
	is($router->safe_psql('postgres', 'SELECT count(*) || \' \' || count(DISTINCT order_id) FROM orders'),
		"$n $n", "$step: the router returns every row once");
	my $on_shards = 0;
	for my $s ($sa, $sb)
	{
		my $q = $s->safe_psql('postgres', q{
			SELECT string_agg(format('SELECT count(*) FROM %I', relname), ' UNION ALL ')
			FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace AND relname LIKE 'orders%'});
		next unless $q;
		$on_shards += $_ for split /\n/, $s->safe_psql('postgres', $q);
	}
	is($on_shards, $n, "$step: the shards hold every row once");
}

# ---------------------------------------------------------------------
# (1) A foreign key references the source table: the move refuses
# ---------------------------------------------------------------------
my $before = layout();
my ($ok, $out, $err) = (0, '', '');
$ok = $router->psql('postgres', q{CALL snowseq_split_shard('orders', 28672, 'shard_b')},
	stdout => \$out, stderr => \$err) == 0;
note "split with a foreign key:\n$err";
ok(!$ok, '(1) a split of a table that order_items references fails');
like($err, qr/ERROR:  foreign key order_items_order_fk of table public\.order_items on server "shard_a" references table public\.orders, whose rows would move/,
	'(1) ... naming the constraint, its table and server');
like($err, qr/DETAIL:  .*would be deleted with them/, '(1) ... saying what would happen to the referencing rows');
like($err, qr/HINT:  Drop the foreign key/, '(1) ... with a hint');
my $orphans = orphans();
is($orphans, 0, "(1) no order item lost its order on shard_a ($orphans orphans)");
is($sa->safe_psql('postgres', 'SELECT count(*) FROM order_items'), $total, '(1) and none was deleted');
is(layout(), $before, '(1) the placement is unchanged');
check_rows('(1) after the refusal', $total);
is($router->safe_psql('postgres', q{SELECT state FROM snowseq_moves ORDER BY move_id DESC LIMIT 1}), 'failed',
	'(1) the move is recorded as failed');
is($sa->safe_psql('postgres', q{SELECT count(*) FROM pg_publication}) . $sa->safe_psql('postgres', q{SELECT count(*) FROM snowseq_fence}),
	'00', '(1) it left no publication or fence on the source');

$sa->safe_psql('postgres', 'ALTER TABLE order_items DROP CONSTRAINT order_items_order_fk');

# ---------------------------------------------------------------------
# (2) A split with every log and statistic on: the password is nowhere
# ---------------------------------------------------------------------
my %log_from = map { $_->name => -s $_->logfile } @all;
$_->safe_psql('postgres', 'SELECT pg_stat_statements_reset()') for @all;

# a pg_read_all_stats role samples every server's activity, again and again
my $stop = "$tmp/safety_stop";
unlink $stop;
my @samplers;
for my $n (@all)
{
	my $file = "$tmp/activity_" . $n->name;
	unlink $file;
	my $h = IPC::Run::start([ 'bash', '-c', q{
		while [ ! -e "$2" ]; do
			psql -X -Atq -d "$1" -U watcher -c "SELECT pid, backend_type, query FROM pg_stat_activity" >> "$3" 2>&1 || sleep 0.05
		done }, 'sampler', $n->connstr('postgres'), $stop, $file ]);
	push @samplers, { h => $h, file => $file };
}
END { my $fh; close $fh if open $fh, '>', $stop; }

$ok = $router->psql('postgres', q{CALL snowseq_split_shard('orders', 16384, 'shard_b')},
	stdout => \$out, stderr => \$err) == 0;
note "split:\n$err";
ok($ok, '(2) the split succeeds, the destination reading its password file');
{
	my $fh;
	close $fh if open $fh, '>', $stop;
}
$_->{h}->finish for @samplers;
like(layout(), qr/^16383=shard_a,32767=shard_b /, '(2) genes 16384..32767 are on shard_b');
check_rows('(2) after the split', $total);

my $samples = 0;
my @seen;
for my $s (@samplers)
{
	my $text = slurp_file($s->{file});
	$samples += () = $text =~ /\n/g;
	push @seen, $s->{file} if index($text, $secret) >= 0;
}
ok($samples > 20, "(2) the activity of the three servers was sampled ($samples lines)");
is(join(',', @seen), '', '(2) no pg_stat_activity sample shows the password');
for my $n (@all)
{
	my $stmts = $n->safe_psql('postgres', 'SELECT string_agg(query, E\'\n\') FROM pg_stat_statements',
		extra_params => [ '-U', 'watcher' ]);
	like($stmts, qr/\S/, '(2) ' . $n->name . ': pg_stat_statements has rows for pg_read_all_stats') if $n != $router;
	ok(index($stmts, $secret) < 0, '(2) ' . $n->name . ': no pg_stat_statements row shows the password')
	  or diag join "\n", grep { index($_, $secret) >= 0 } split /\n/, $stmts;
	my $log = server_log_since($n, $log_from{ $n->name });
	ok(length($log) > 0 && index($log, $secret) < 0, '(2) ' . $n->name . ': the server log never shows the password')
	  or diag join "\n", grep { index($_, $secret) >= 0 } split /\n/, $log;
}
like($sb->safe_psql('postgres', 'SELECT string_agg(query, E\'\n\') FROM pg_stat_statements',
		extra_params => [ '-U', 'watcher' ]), qr/CREATE SUBSCRIPTION/,
	'(2) the CREATE SUBSCRIPTION on shard_b is among the statements read');

# a destination that cannot authenticate: refused, with a hint, undone
$router->safe_psql('postgres', "SET log_statement = 'none'; SET pg_stat_statements.track = 'none';\n"
	  . "ALTER SERVER shard_a OPTIONS (SET passfile '$tmp/no_such_pgpass')");
$before = layout();
$ok = $router->psql('postgres', q{CALL snowseq_split_shard('orders', 12288, 'shard_b')},
	stdout => \$out, stderr => \$err) == 0;
note "split without a password file:\n$err";
ok(!$ok, '(2) without a password file on the destination, the split fails');
like($err, qr/ERROR:  server "shard_b" could not connect to server "shard_a" to copy the genes/,
	'(2) ... saying the destination could not connect');
like($err, qr/HINT:  Moves send no password: give the operating system user of server "shard_b" a password file entry/,
	'(2) ... with a hint about the password file');
ok(index($err, $secret) < 0, '(2) ... without showing the password');
is(layout(), $before, '(2) the placement is unchanged');
is($sa->safe_psql('postgres', q{SELECT count(*) FROM pg_replication_slots}) . $sa->safe_psql('postgres', q{SELECT count(*) FROM pg_publication}),
	'00', '(2) and nothing is left on the source');
$router->safe_psql('postgres', "SET log_statement = 'none'; SET pg_stat_statements.track = 'none';\n"
	  . "ALTER SERVER shard_a OPTIONS (SET passfile '$passfile')");

# ---------------------------------------------------------------------
# (3) The router dies between the two commits of a switch
# ---------------------------------------------------------------------
# The mover stops at a pause point; the router stops at once (immediate, as
# a kill -9 of the postmaster); it starts again, and the first query reads
# the orders.
sub crash_at
{
	my ($point, $call, $while_down, $at_pause) = @_;
	my $locker = $router->background_psql('postgres');
	$locker->query_safe("SELECT pg_advisory_lock($pause_lock)");
	my ($mout, $merr) = ('', '');
	my $mover = IPC::Run::start([ 'psql', '-X', '-d', $router->connstr('postgres'), '-U', 'shardadmin',
		'-c', "SET snowseq.test_pause_at = '$point'", '-c', $call ], '>', \$mout, '2>', \$merr);
	my $paused = $router->poll_query_until('postgres', q{
		SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event = 'advisory' AND query LIKE 'CALL%'});
	$at_pause->() if $at_pause;
	$router->stop('immediate');
	my $from = -s $sa->logfile;
	$mover->finish;
	eval { $locker->quit };
	$while_down->() if $while_down;
	$router->start;
	return ($paused, $from);
}

# (3a) after the source prepared, before the router committed: undone
# (genes 8192 to the end of the partition that holds them)
my $n_lower = $router->safe_psql('postgres', q{SELECT count(*) FROM orders WHERE order_id >= 8192::bigint << 48 AND order_id < 16384::bigint << 48});
$before = layout();
my ($paused, $from) = crash_at('move_after_source_commit', q{CALL snowseq_split_shard('orders', 8192, 'shard_b')});
ok($paused, '(3a) the split paused after the source\'s commit of the switch');
# the very first query after the restart
is($router->safe_psql('postgres', 'SELECT count(*) || \' \' || count(DISTINCT order_id) FROM orders'),
	"$total $total", "(3a) the first query after the restart returns all $total rows once ($n_lower in the moved genes)");
is(layout(), $before, '(3a) the old placement serves');
$router->poll_query_until('postgres', q{SELECT count(*) = 0 FROM snowseq_moves WHERE state IN ('switch', 'switched')})
  or diag $router->safe_psql('postgres', 'SELECT move_id, state, error FROM snowseq_moves');
is($router->safe_psql('postgres', q{SELECT state FROM snowseq_moves ORDER BY move_id DESC LIMIT 1}), 'failed',
	'(3a) the resolver undid the move at start, with no manual step');
ok($router->log_contains(qr/LOG:  interrupted move \d+ of genes 8192 to \d+: .*move: undone/),
	'(3a) and said so in the router\'s log');
is($sa->safe_psql('postgres', q{SELECT count(*) FROM pg_prepared_xacts}), '0', '(3a) no prepared transaction is left on the source');
is($router->safe_psql('postgres', q{SELECT mover::regrole FROM snowseq_moves ORDER BY move_id DESC LIMIT 1}), 'shardadmin',
	'(3a) the move recorded the role that ran it');
ok($sa->log_contains(qr/connection authorized: user=mover2 /, $from),
	'(3a) the resolver reached the source as that role\'s user mapping says');
is($router->safe_psql('postgres', q{
	UPDATE orders SET amount = amount + 1 WHERE order_id >= 8192::bigint << 48 AND order_id < 16384::bigint << 48;
	SELECT count(*) FROM orders WHERE amount = 1}), $n_lower, '(3a) the rows of the moved genes take updates again');
$router->safe_psql('postgres', q{
	INSERT INTO orders (order_id, buyer_id) SELECT snowseq_gene_next('c' || i), 'c' || i FROM generate_series(1, 200) i});
$total += 200;
check_rows('(3a) after the resolution', $total);

# (3b) after the router committed, before the source did: finished
$n_lower = $router->safe_psql('postgres', q{SELECT count(*) FROM orders WHERE order_id >= 8192::bigint << 48 AND order_id < 16384::bigint << 48});
($paused, $from) = crash_at('move_after_router_commit', q{CALL snowseq_split_shard('orders', 8192, 'shard_b')});
ok($paused, '(3b) the split paused after the router\'s commit of the switch');
is($router->safe_psql('postgres', 'SELECT count(*) || \' \' || count(DISTINCT order_id) FROM orders'),
	"$total $total", "(3b) the first query after the restart returns all $total rows once");
like(layout(), qr/^8191=shard_a,32767=shard_b /, '(3b) genes 8192..16383 are on shard_b');
$router->poll_query_until('postgres', q{SELECT count(*) = 0 FROM snowseq_moves WHERE state IN ('switch', 'switched')})
  or diag $router->safe_psql('postgres', 'SELECT move_id, state, error FROM snowseq_moves');
is($router->safe_psql('postgres', q{SELECT state FROM snowseq_moves ORDER BY move_id DESC LIMIT 1}), 'done',
	'(3b) the resolver finished the move at start');
is($sa->safe_psql('postgres', q{SELECT count(*) FROM pg_prepared_xacts}), '0', '(3b) no prepared transaction is left on the source');
is($sa->safe_psql('postgres', q{SELECT count(*) FROM orders WHERE order_id >= 8192::bigint << 48}), '0',
	'(3b) the moved rows are gone from shard_a');
my $sum = $router->safe_psql('postgres', q{SELECT sum(amount) FROM orders});
$router->safe_psql('postgres', q{
	UPDATE orders SET amount = amount + 1 WHERE order_id >= 8192::bigint << 48 AND order_id < 16384::bigint << 48});
is($router->safe_psql('postgres', q{SELECT sum(amount) FROM orders}), $sum + $n_lower,
	"(3b) the $n_lower moved rows take updates on shard_b");
check_rows('(3b) after the resolution', $total);

# (3c) the source is down when the router starts again: the resolver
# tries again until it can reach it, and the prepared transaction, which
# the source's restart kept, is rolled back then
$before = layout();
my $router_from = -s $router->logfile;
($paused, $from) = crash_at('move_after_source_commit', q{CALL snowseq_split_shard('orders', 4096, 'shard_b')},
	sub { $sa->stop('immediate'); });
ok($paused, '(3c) the split paused after the source\'s commit of the switch; the source stops too');
ok($router->poll_query_until('postgres', q{SELECT true}, 't'), '(3c) the router starts without the source');
ok($router->wait_for_log(qr/LOG:  interrupted move \d+ of genes 4096 to 8191: .*unresolved/, $router_from),
	'(3c) the resolver says it cannot resolve the move yet');
is($router->safe_psql('postgres', q{SELECT state FROM snowseq_moves ORDER BY move_id DESC LIMIT 1}), 'switch',
	'(3c) the move waits in its switch');
$sa->start;
ok($router->poll_query_until('postgres', q{SELECT state = 'failed' FROM snowseq_moves ORDER BY move_id DESC LIMIT 1}),
	'(3c) once the source is back, the resolver undoes the move');
is($sa->safe_psql('postgres', q{SELECT count(*) FROM pg_prepared_xacts}), '0', '(3c) no prepared transaction is left on the source');
is(layout(), $before, '(3c) the old placement serves');
check_rows('(3c) after the resolution', $total);

# (3d) after the move recorded what it will make, before it made any of it:
# the records name objects that are absent; the router's resolver undoes
# the move at its start and takes them as dropped
$before = layout();
my $rec;
($paused, $from) = crash_at('move_after_record', q{CALL snowseq_split_shard('orders', 4096, 'shard_b')}, undef,
	sub { $rec = $router->safe_psql('postgres', q{SELECT string_agg(DISTINCT kind::text, ',' ORDER BY kind::text) FROM snowseq_move_objects
		WHERE move_id = (SELECT max(move_id) FROM snowseq_moves)}) });
ok($paused, '(3d) the split paused once its records were committed, before it made anything');
is($rec, 'fence,prepared transaction,publication,replication slot,subscription',
	'(3d) the router recorded the publication, slot, subscription, fence and prepared transaction before making them');
ok($router->poll_query_until('postgres', q{SELECT state = 'failed' FROM snowseq_moves ORDER BY move_id DESC LIMIT 1}),
	'(3d) the router\'s resolver undoes the move at its start');
is($router->safe_psql('postgres', q{SELECT count(*) FROM snowseq_move_objects WHERE move_id = (SELECT max(move_id) FROM snowseq_moves)}), '0',
	'(3d) ... and forgets the records of what it never made');
my $cleanup3d = $router->safe_psql('postgres', q{SELECT coalesce(server, '-') || ' ' || object || ': ' || action FROM snowseq_move_cleanup()});
note "cleanup:\n$cleanup3d";
# (3b)'s move was finished by the resolver, which leaves the keep view to the next cleanup
is($cleanup3d =~ s/_\d+_\d+_keep_\d+:/_D_N_keep_N:/r, 'shard_a view public.snowseq_move_1_D_N_keep_N: dropped',
	'(3d) the next cleanup has only the keep view that (3b)\'s finish by the resolver left to drop, by its record');
is($router->safe_psql('postgres', q{SELECT count(*) FROM snowseq_move_objects}), '0', '(3d) ... and forgets the records');
is(layout(), $before, '(3d) the old placement serves');
check_rows('(3d) after the cleanup', $total);

# ---------------------------------------------------------------------
# (4) Progress: snowseq_move_progress while the copy runs, the record after
# ---------------------------------------------------------------------
# The copy lands in an empty table of the source's name on shard_b, whose
# trigger (enabled for replication too) makes every row take a few ms.
$sb->safe_psql('postgres', q{
CREATE TABLE orders (order_id bigint PRIMARY KEY, buyer_id text NOT NULL, amount numeric NOT NULL DEFAULT 0);
CREATE FUNCTION slow_copy() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN PERFORM pg_sleep(0.005); RETURN NEW; END$$;
CREATE TRIGGER slow_copy BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION slow_copy();
ALTER TABLE orders ENABLE ALWAYS TRIGGER slow_copy;
});
my $n_moved = $router->safe_psql('postgres', q{SELECT count(*) FROM orders WHERE order_id >= 4096::bigint << 48 AND order_id < 8192::bigint << 48});
my $progress = "$tmp/progress";
unlink $progress, $stop;
my $sampler = IPC::Run::start([ 'bash', '-c', q{
	while [ ! -e "$2" ]; do
		psql -X -Atq -d "$1" -c "SELECT phase, rows_copied, rows_total, percent, bytes_copied, lag_bytes IS NOT NULL,
			extract(epoch FROM time_left) > 0 FROM snowseq_move_progress" >> "$3" 2>&1
		psql -X -Atq -d "$1" -c "SELECT 'recorded', name FROM snowseq_move_objects WHERE kind = 'replication slot'" >> "$3" 2>&1
		psql -X -Atq -d "$4" -c "SELECT 'live', slot_name FROM pg_replication_slots WHERE slot_name LIKE 'pg\_%\_sync\_%'" >> "$3" 2>&1
		sleep 0.05
	done }, 'sampler', $router->connstr('postgres'), $stop, $progress, $sa->connstr('postgres') ]);
$ok = $router->psql('postgres', q{CALL snowseq_split_shard('orders', 4096, 'shard_b')},
	stdout => \$out, stderr => \$err) == 0;
note "split with a slow copy:\n$err";
{
	my $fh;
	close $fh if open $fh, '>', $stop;
}
$sampler->finish;
ok($ok, "(4) a split of $n_moved rows with a slow copy succeeds");
my @samples = grep { /^copy\|/ } split /\n/, slurp_file($progress);
note "progress samples:\n" . join("\n", @samples[0 .. ($#samples < 15 ? $#samples : 15)]);
my @midway = grep {
	my @f = split /\|/;
	$f[1] > 0 && $f[1] < $f[2] && $f[2] == $n_moved && $f[3] > 0 && $f[3] < 100 && $f[4] > 0 && $f[5] eq 't' && $f[6] eq 't'
} @samples;
ok(scalar(@midway) >= 2, '(4) snowseq_move_progress showed the copy midway: rows copied of the total, percent, bytes, lag, time left ('
	  . scalar(@midway) . ' samples)');
# the table-sync slot of the copy was recorded, by its exact name, before it existed
my %recorded = map { (split /\|/)[1] => 1 } grep { /^recorded\|/ } split /\n/, slurp_file($progress);
my %live = map { (split /\|/)[1] => 1 } grep { /^live\|/ } split /\n/, slurp_file($progress);
note 'table-sync slots seen on shard_a: ' . join(', ', sort keys %live) . '; recorded: ' . join(', ', sort keys %recorded);
ok(%live && !grep({ !$recorded{$_} } keys %live),
	'(4) the table-sync slot the copy made on the source is recorded under its exact name');
my @copied = map { (split /\|/)[1] } @samples;
ok((grep { $copied[$_] < $copied[ $_ - 1 ] } 1 .. $#copied) == 0, '(4) rows copied never went back');
is($router->safe_psql('postgres', q{SELECT count(*) FROM snowseq_move_progress}), '0', '(4) the view is empty once the move is over');
is($router->safe_psql('postgres', q{SELECT state || ' ' || rows_total || ' ' || rows_copied || ' ' || (bytes_copied > 0)
	|| ' ' || (copy_started_at <= copied_at) FROM snowseq_moves ORDER BY move_id DESC LIMIT 1}), "done $n_moved $n_moved true true",
	'(4) snowseq_moves keeps the rows, bytes and times of the copy');
$sb->safe_psql('postgres', 'DROP TRIGGER slow_copy ON orders_g4096_8191');
check_rows('(4) after the split', $total);

# ---------------------------------------------------------------------
# (5) Cleanup reads the records of moves, never names: a prepared
# transaction named like a move of this router that no record names (and
# one named like another router's) was not made by a move of this router
# (each records its prepared transaction, committed, before it prepares
# it): snowseq_move_cleanup() neither lists nor resolves either
# ---------------------------------------------------------------------
$sa->safe_psql('postgres', q{BEGIN; SELECT 1; PREPARE TRANSACTION 'snowseq_move_1_999'});
$sa->safe_psql('postgres', q{BEGIN; SELECT 1; PREPARE TRANSACTION 'snowseq_move_77_1'});
my $cleanup = $router->safe_psql('postgres', q{SELECT coalesce(move_id::text, '-') || ' ' || server || ' ' || object || ': ' || action FROM snowseq_move_cleanup()});
note "cleanup:\n$cleanup";
unlike($cleanup, qr/snowseq_move_1_999|snowseq_move_77_1/,
	'(5) snowseq_move_cleanup() lists no prepared transaction that no record names');
is($sa->safe_psql('postgres', q{SELECT string_agg(gid, ',' ORDER BY gid) FROM pg_prepared_xacts}), 'snowseq_move_1_999,snowseq_move_77_1',
	'(5) ... and resolves neither');
is($router->safe_psql('postgres', q{SELECT count(*) FROM snowseq_move_objects}), '0',
	'(5) the moves that are over left no record');
$sa->safe_psql('postgres', q{ROLLBACK PREPARED 'snowseq_move_1_999'});
$sa->safe_psql('postgres', q{ROLLBACK PREPARED 'snowseq_move_77_1'});
check_rows('(5) after the cleanup', $total);

done_testing();
