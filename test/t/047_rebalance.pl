# The rebalancer: snowseq_rebalance_plan plans moves that bring every server
# of the map to at most threshold x the mean load, and CALL
# snowseq_rebalance runs them one by one with snowseq_move_genes, stoppable
# between moves and resumable.
#
#   router  (node 1): items PARTITION BY RANGE (item_id), postgres_fdw
#                       items_0 -> s1.items_1: genes     0..24575  (three quarters)
#                       items_1 -> s2.items_2: genes 24576..27306
#                       items_2 -> s3.items_3: genes 27307..30037
#                       items_3 -> s4.items_4: genes 30038..32767
#   s1..s4 (nodes 2..5): wal_level = logical
#
# Two writers insert through the router the whole time and a reader samples,
# in one statement, duplicates and rows read from another server than the
# map names.  A first CALL is stopped between moves (the run is left
# stopped, with steps not done); a second CALL resumes and finishes it.
# Then a rebalance that drains s4, cut by a crash of the router during its
# first move, is resumed by a second CALL; and s4, no longer in the map, is
# filled again by a rebalance that names it.
# Afterwards no server holds more than 1.25 x the mean rows, every row
# written is there exactly once, the reader saw no disagreement, no
# replication object is left, and the plan is empty.  Bad input is refused
# with clear errors and nothing written.
use strict;
use warnings;
use lib 'test';
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;
use Time::HiRes qw(time);

my $tmp = $PostgreSQL::Test::Utils::tmp_check;

# ---------------------------------------------------------------------
# Topology
# ---------------------------------------------------------------------
my @shard_conf = shard_conf();
my $router = snowseq_node('router', node_id => 1);
my %node = map { ("s$_" => snowseq_node("s$_", node_id => $_ + 1, conf => \@shard_conf)) } 1 .. 4;
my @servers = sort keys %node;
my @bounds = ([ 0, 24575 ], [ 24576, 27306 ], [ 27307, 30037 ], [ 30038, 32767 ]);

# a table of its own name on each server: a move copies into the table of
# the source's name on the destination
gene_sharded_items($router, \%node, \@bounds, 8000);
$router->safe_psql('postgres', 'CREATE TABLE plain (id bigint)');

# rows per server, counted where they live
sub loads
{
	my %l = map { $_ => 0 } @servers;
	for (split /\n/, $router->safe_psql('postgres',
			'SELECT shard, sum(rows) FROM snowseq_shard_stats(\'items\') GROUP BY shard'))
	{
		my ($s, $n) = split /\|/;
		$l{$s} = $n;
	}
	return \%l;
}
sub show { my ($l) = @_; return join ', ', map { "$_ $l->{$_}" } @servers; }
my $before = loads();
note 'rows per server before: ' . show($before);
cmp_ok($before->{s1}, '>', 0.7 * 8000, 's1 holds about three quarters of the rows');

# ---------------------------------------------------------------------
# Bad input: clear errors, nothing written
# ---------------------------------------------------------------------
my @bad = (
	[ q{'items', 'nope'}, qr/unknown rebalance strategy 'nope'.*HINT:  Use 'rows'/s, 'an unknown strategy' ],
	[ q{'items', 'rows', 0.9}, qr/rebalance threshold '0.9' is below 1/, 'a threshold below 1' ],
	[ q{'items', 'rows', 1.25, '{nope}'}, qr/server "nope" to drain is not in snowseq_shard_map/, 'a drain server not in the map' ],
	[ q{'items', 'rows', 1.25, '{s1,s2,s3,s4}'}, qr/drains every server of snowseq_shard_map/, 'draining every server' ],
	[ q{'items', 'rows', 1.25, '{}', '{nope}'}, qr/server "nope" to fill is not a postgres_fdw server/,
		'a server to fill that does not exist' ],
	[ q{'items', 'rows', 1.25, '{s2}', '{s2}'}, qr/server "s2" is both to drain and to fill/,
		'a server both to drain and to fill' ],
	[ q{'plain'}, qr/table plain is not gene-sharded/, 'a table that is not gene-sharded' ]);
for my $b (@bad)
{
	my ($args, $re, $what) = @$b;
	my ($rc, $out, $err) = $router->psql('postgres', "SELECT * FROM snowseq_rebalance_plan($args)");
	like($err, $re, "plan: $what is refused");
	($rc, $out, $err) = $router->psql('postgres', "CALL snowseq_rebalance($args)");
	like($err, $re, "CALL: $what is refused");
}
is($router->safe_psql('postgres', 'SELECT count(*) FROM snowseq_rebalance_runs'), '0', 'refused calls wrote no run');
my ($rc, $out, $err) = $router->psql('postgres', q{BEGIN; CALL snowseq_rebalance('items'); COMMIT;});
like($err, qr/a move of genes must run as a CALL of its own|invalid transaction termination/,
	'a rebalance inside a transaction block is refused');
$router->safe_psql('postgres', q{CREATE ROLE nobody LOGIN; DELETE FROM snowseq_rebalance_runs;});
($rc, $out, $err) = $router->psql('postgres', q{SET ROLE nobody; SELECT * FROM snowseq_rebalance_plan('items')});
like($err, qr/permission denied for function snowseq_rebalance_plan/, 'PUBLIC may not plan');
($rc, $out, $err) = $router->psql('postgres', q{SET ROLE nobody; SELECT snowseq_rebalance_stop()});
like($err, qr/permission denied for function snowseq_rebalance_stop/, 'PUBLIC may not stop');
($rc, $out, $err) = $router->psql('postgres', q{DELETE FROM snowseq_rebalance_runs});
is($rc, 0, 'the owner may change the runs') ;
$router->safe_psql('postgres', q{CREATE ROLE grantee; GRANT ALL ON snowseq_rebalance_steps TO grantee});
($rc, $out, $err) = $router->psql('postgres', q{SET ROLE grantee; DELETE FROM snowseq_rebalance_steps});
like($err, qr/table snowseq_rebalance_steps is written by snowseq's functions alone/, 'the guard refuses a grantee');

# A router administrator: a role granted what docs/security.md lists for
# rebalancing, and no right on the runs and steps but SELECT, with user
# mappings of its own; the records are written for it as their owner
my $su = $router->safe_psql('postgres', 'SELECT current_user');
$router->safe_psql('postgres', qq{CREATE ROLE radmin LOGIN;
	GRANT SELECT ON snowseq_shard_map, snowseq_rebalance_runs, snowseq_rebalance_steps, snowseq_moves TO radmin;
	GRANT EXECUTE ON FUNCTION snowseq_rebalance_plan(regclass, text, double precision, name[], name[], interval, double precision),
		snowseq_rebalance_stop(regclass, boolean), snowseq_shard_stats(regclass),
		snowseq_rebalance_runner_alive(integer, timestamptz), snowseq_rebalance_open_run(regclass),
		snowseq_rebalance_save_run(snowseq_rebalance_runs, boolean), snowseq_rebalance_save_steps(snowseq_rebalance_steps[]),
		snowseq_rebalance_plan_from(regclass, text, double precision, name[], name[], interval, oid[], bigint[], bigint[], timestamptz, boolean, double precision),
		snowseq_shard_counters(regclass), snowseq_shard_histogram(regclass, name, integer, integer, integer, bigint),
		snowseq_placement_group(regclass), snowseq_rebalance_finish(snowseq_rebalance_runs, text),
		snowseq_rebalance_step_done(snowseq_rebalance_steps, bigint, bigint),
		snowseq_rebalance_step_move(regclass, snowseq_rebalance_steps, timestamptz),
		snowseq_rebalance_plan_steps(snowseq_rebalance_runs, name[], oid[], bigint[], bigint[], timestamptz),
		snowseq_rebalance_job_throttled(bigint, timestamptz, text)
		TO radmin;
	GRANT EXECUTE ON PROCEDURE snowseq_rebalance(regclass, text, double precision, name[], name[], interval, double precision),
		snowseq_rebalance_sample(regclass, interval, oid[], bigint[], bigint[], timestamptz),
		snowseq_rebalance_throttle(bigint, name[], boolean) TO radmin;
	} . join('', map { qq{CREATE USER MAPPING FOR radmin SERVER $_ OPTIONS (user '$su', password_required 'false');\n} } @servers));
($rc, $out, $err) = $router->psql('postgres', q{SET ROLE radmin; SELECT snowseq_rebalance_stop()});
is("$rc $out", '0 0', 'a router administrator may stop rebalances (there are none)') or diag($err);
# ... but records runs of its own tables alone (a planted run of a table of
# another role would be run by that role's next CALL), and resolves no
# other role's moves
($rc, $out, $err) = $router->psql('postgres', q{SET ROLE radmin; SELECT snowseq_rebalance_save_run(ROW(NULL, 'items',
	'rows', 1.25, '{}', '{}', '10 s', 0, 'stopped', NULL, 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::snowseq_rebalance_runs)});
like($err, qr/must be owner of table (public\.)?items to record its rebalance/, 'it plants no run for a table it does not own');
($rc, $out, $err) = $router->psql('postgres', q{SET ROLE radmin; SELECT * FROM snowseq_rebalance_open_run('items')});
like($err, qr/must be owner of table (public\.)?items to rebalance it/, 'nor locks the run of one');
$router->safe_psql('postgres', q{GRANT EXECUTE ON FUNCTION snowseq_move_cleanup() TO radmin});
($rc, $out, $err) = $router->psql('postgres', q{SET ROLE radmin; SELECT count(*) FROM snowseq_move_cleanup()});
like($err, qr/snowseq_move_cleanup resolves the moves of every role: it needs the privileges of role/,
	'nor resolves every role\'s moves');
# snowseq reaches servers of postgres_fdw alone: another wrapper's server
# (whose mappings no validator checks) is refused before any connection
$router->safe_psql('postgres', q{CREATE FOREIGN DATA WRAPPER novalid;
	CREATE SERVER sx FOREIGN DATA WRAPPER novalid OPTIONS (host 'localhost');
	CREATE USER MAPPING FOR CURRENT_USER SERVER sx OPTIONS (user 'x', password_required 'false');
	CREATE TABLE rt (id bigint NOT NULL) PARTITION BY RANGE (id);
	CREATE FOREIGN TABLE rt_0 PARTITION OF rt FOR VALUES FROM (0) TO (MAXVALUE) SERVER sx});
($rc, $out, $err) = $router->psql('postgres', q{SELECT * FROM snowseq_shard_counters('rt')});
like($err, qr/server "sx" is not a postgres_fdw server/, 'a server of another wrapper is refused');
($rc, $out, $err) = $router->psql('postgres', q{SELECT * FROM snowseq_shard_histogram('rt_0', 'id', 0, 99, 10, NULL)});
like($err, qr/partition rt_0 reads server "sx", which is not a postgres_fdw server/, 'by the histogram too');
$router->safe_psql('postgres', q{DROP TABLE rt; DROP SERVER sx CASCADE; DROP FOREIGN DATA WRAPPER novalid});
# an error on the server leaves no connection of the histogram behind (the
# caller's session goes on): a partition reading a table its server lacks;
# the server's sessions read through a foreign table, in the same session
$router->safe_psql('postgres', q{CREATE TABLE ghost (id bigint NOT NULL) PARTITION BY RANGE (id);
	CREATE FOREIGN TABLE ghost_0 PARTITION OF ghost FOR VALUES FROM (0) TO (MAXVALUE) SERVER s1 OPTIONS (table_name 'no_such_table');
	CREATE FOREIGN TABLE s1_activity (application_name text, query text) SERVER s1 OPTIONS (schema_name 'pg_catalog', table_name 'pg_stat_activity')});
# (polled a transaction at a time, each reading the view afresh, until the
# session has ended there; one that stays is still there when the poll
# gives up)
is($router->safe_psql('postgres', q{DO $$ BEGIN PERFORM snowseq_shard_histogram('ghost_0', 'id', 0, 9, 1, NULL);
		EXCEPTION WHEN undefined_table THEN RAISE NOTICE 'refused: %', SQLERRM; END $$;
	DO $$ BEGIN
		FOR i IN 1 .. 600 LOOP
			EXIT WHEN NOT EXISTS (SELECT FROM s1_activity WHERE application_name = 'snowseq move' AND query LIKE '%no_such_table%');
			PERFORM pg_sleep(0.1);
			COMMIT;
		END LOOP;
	END $$;
	SELECT count(*) FROM s1_activity WHERE application_name = 'snowseq move' AND query LIKE '%no_such_table%'}), '0',
	'an error on the server in the histogram leaves no connection behind');
# nor do the statistics and the counters, whose connections are kept for
# every partition of the call
for my $f ('snowseq_shard_stats', 'snowseq_shard_counters')
{
	is($router->safe_psql('postgres', qq{DO \$\$ BEGIN PERFORM * FROM $f('ghost');
			EXCEPTION WHEN undefined_table THEN RAISE NOTICE 'refused: %', SQLERRM; END \$\$;
		DO \$\$ BEGIN
			FOR i IN 1 .. 600 LOOP
				EXIT WHEN NOT EXISTS (SELECT FROM s1_activity WHERE application_name = 'snowseq move');
				PERFORM pg_sleep(0.1);
				COMMIT;
			END LOOP;
		END \$\$;
		SELECT count(*) FROM s1_activity WHERE application_name = 'snowseq move'}), '0',
		"an error on the server in $f leaves no connection behind");
}
$router->safe_psql('postgres', 'DROP TABLE ghost; DROP FOREIGN TABLE s1_activity');

# after a run: every row once (8,000 and those the writers wrote: $rows),
# map and partitions agree, nothing of the moves left on any server
sub settled
{
	my ($when, $rows) = @_;
	is($router->safe_psql('postgres', 'SELECT count(*) || \' \' || count(DISTINCT item_id) FROM items'),
		"$rows $rows", "every row is still there, once ($when)") if defined $rows;
	is($router->safe_psql('postgres', q{SELECT count(*) FROM items t JOIN pg_foreign_table ft ON ft.ftrelid = t.tableoid
		JOIN pg_foreign_server s ON s.oid = ft.ftserver WHERE snowseq_route(t.item_id) <> s.srvname}), '0',
		"map and partitions agree ($when)");
	is(join(', ', move_leftovers('postgres', map { $node{$_} } @servers)), '', "no replication object or fence is left ($when)");
}

my $plan = $router->safe_psql('postgres', q{SELECT * FROM snowseq_rebalance_plan('items')});
note "plan:\n$plan";
my @plan = split /\n/, $plan;
cmp_ok(scalar(@plan), '>=', 2, 'the plan has at least two moves');
ok(!grep({ (split /\|/)[3] ne 's1' } @plan), 'every move of the plan takes genes from s1');
my @bytes_plan = split /\n/, $router->safe_psql('postgres', q{SELECT * FROM snowseq_rebalance_plan('items', 'bytes', 1.1)});
cmp_ok(scalar(@bytes_plan), '>=', 2, 'the plan by row bytes has at least two moves');
ok(!grep({ (split /\|/)[3] ne 's1' } @bytes_plan), 'every move of the plan by row bytes takes genes from s1');
is($router->safe_psql('postgres', q{SELECT count(*) FROM snowseq_rebalance_plan('items', 'rows', 100)}), '0',
	'no move under a threshold no server is above');

# Moves kept revertable (snowseq.move_revert_window): a move of a partition
# a revertable move touched is refused until that one is finalized, so the
# plan takes genes from a partition once (the plan above cuts s1's one
# partition more than once), and from none a revertable move touched; the
# run moves what it can and ends, and finalizing leaves nothing behind
my @keep_plan = split /\n/, $router->safe_psql('postgres',
	q{SET snowseq.move_revert_window = '1h'; SELECT * FROM snowseq_rebalance_plan('items')});
note "plan with moves kept revertable:\n" . join("\n", @keep_plan);
my %keep_parts;
for (@keep_plan)
{
	my $first = (split /\|/)[1];
	$keep_parts{ scalar(grep { $_->[0] <= $first } @bounds) }++;
}
cmp_ok(scalar(@keep_plan), '>=', 1, 'with moves kept revertable, the plan still moves genes');
is(join(',', grep { $keep_parts{$_} > 1 } sort keys %keep_parts), '',
	'with moves kept revertable, no step takes genes from a partition another step takes genes from');
($rc, $out, $err) = $router->psql('postgres', q{SET snowseq.move_revert_window = '1h'; CALL snowseq_rebalance('items')});
is($rc, 0, 'a rebalance whose moves are kept revertable runs to its end') or diag($err);
my $kept = $router->safe_psql('postgres', q{SELECT string_agg(move_id::text, ',' ORDER BY move_id) FROM snowseq_moves
	WHERE state = 'revertable' AND group_move IS NULL});
isnt($kept, '', "its moves are revertable ($kept)");
is($router->safe_psql('postgres', q{SELECT count(*) FROM snowseq_rebalance_plan('items')}), '0',
	'the plan takes no genes a revertable move touched');
($rc, $out, $err) = $router->psql('postgres', q{SELECT * FROM snowseq_rebalance_plan('items', drain => '{s1}')});
like($err, qr/genes 0 to \d+ of server "s1" cannot be drained: move \d+ can still revert them/,
	'a drain of genes a revertable move touched is refused, naming the move');
$router->safe_psql('postgres', "CALL snowseq_move_finalize($_)") for split /,/, $kept;
settled('after the revertable rebalance, finalized', 8000);
# (the runs below are counted from none)
$router->safe_psql('postgres', 'DELETE FROM snowseq_rebalance_steps; DELETE FROM snowseq_rebalance_runs');

# ---------------------------------------------------------------------
# Clients: two writers and a reader, through the router, all along
# ---------------------------------------------------------------------
my $stop = "$tmp/rebal_stop";
unlink $stop;
END
{
	my $fh;
	close $fh if open $fh, '>', $stop;
}
open my $wfh, '>', "$tmp/rebal_writer.sql" or die;
print $wfh "INSERT INTO items (item_id, k) SELECT snowseq_gene_next(x), x FROM (SELECT md5(random()::text) x) s RETURNING item_id;\n"
  for 1 .. 20;
close $wfh;
open my $rfh, '>', "$tmp/rebal_reader.sql" or die;
print $rfh "SELECT 'r', count(*) FILTER (WHERE snowseq_route(t.item_id) <> s.srvname), count(*) - count(DISTINCT t.item_id), count(*) "
  . "FROM items t JOIN pg_foreign_table ft ON ft.ftrelid = t.tableoid JOIN pg_foreign_server s ON s.oid = ft.ftserver;\n"
  for 1 .. 5;
close $rfh;
sub nlines { my @l = read_lines(@_); return scalar @l; }
sub client
{
	my ($tag, $batch) = @_;
	my ($o, $e) = ("$tmp/rebal_$tag.out", "$tmp/rebal_$tag.err");
	unlink $o, $e;
	my $h = IPC::Run::start([ 'bash', '-c', q{
		while [ ! -e "$3" ] && [ -d "${3%/*}" ]; do
			psql -X -Atq -d "$1" -f "$2" >> "$4" 2>> "$5" || sleep 0.2
		done }, 'client', $router->connstr('postgres'), $batch, $stop, $o, $e ]);
	return { h => $h, out => $o, err => $e, tag => $tag };
}
my @writers = map { client("w$_", "$tmp/rebal_writer.sql") } 1 .. 2;
my $reader = client('r', "$tmp/rebal_reader.sql");
ok(wait_until(sub { !grep { nlines($_->{out}) < 20 } @writers, $reader }), 'the clients write and read');

# ---------------------------------------------------------------------
# A first CALL, stopped between moves
# ---------------------------------------------------------------------
# The first move stops at the pause point after its copy (the test lock
# held) until the stop is marked: a fast move would otherwise end, and the
# next begin, before the stop.
my $t0 = time;
my ($cout, $cerr) = ('', '');
my $locker = $router->background_psql('postgres');
$locker->query_safe('SELECT pg_advisory_lock(7236949375)');
my $call = IPC::Run::start([ 'psql', '-X', '-Atq', '-d', $router->connstr('postgres'),
	'-c', "SET snowseq.test_pause_at = 'move_after_copy'", '-c', q{CALL snowseq_rebalance('items')} ],
	'>', \$cout, '2>', \$cerr);
ok($router->poll_query_until('postgres', q{SELECT (SELECT count(*) FROM snowseq_rebalance_steps WHERE state = 'running') = 1
	AND EXISTS (SELECT FROM pg_stat_activity WHERE wait_event = 'advisory' AND query LIKE 'CALL%')}),
	'the first move of the run starts, and pauses after its copy');
($rc, $out, $err) = $router->psql('postgres', q{CALL snowseq_rebalance('items')});
like($err, qr/rebalance \d+ of table items is running in the session of process \d+/,
	'a second CALL while the run goes on is refused');
is($router->safe_psql('postgres', q{SELECT snowseq_rebalance_stop('items')}), '1', 'snowseq_rebalance_stop marks the run');
$locker->query_safe('SELECT pg_advisory_unlock(7236949375)');
$locker->quit;
$call->finish;
note "first CALL:\n$cerr";
like($cerr, qr/rebalance \d+: step 1 of \d+: genes \d+ to \d+ of table items from server "s1"/, 'a NOTICE per step');
like($cerr, qr/stopped between moves/, 'the run stops between moves');
is($router->safe_psql('postgres', q{SELECT state FROM snowseq_rebalance_runs}), 'stopped', 'the run is left stopped');
($rc, $out, $err) = $router->psql('postgres', q{SET ROLE radmin; SELECT snowseq_rebalance_stop('items', abandon => true)});
is("$rc $out", '0 0', 'a router administrator that does not own the table stops none of its runs');
is($router->safe_psql('postgres', q{SELECT state FROM snowseq_rebalance_runs}), 'stopped', 'the run is still stopped, not abandoned');
my $left = $router->safe_psql('postgres', q{SELECT count(*) FILTER (WHERE state = 'done') || '/' || count(*) FROM snowseq_rebalance_steps});
like($left, qr{^1/[2-9]}, "one step done, more left ($left)");
my $mid = loads();
note 'rows per server after the stop: ' . show($mid);

# ---------------------------------------------------------------------
# A second CALL resumes and finishes it
# ---------------------------------------------------------------------
($rc, $out, $err) = $router->psql('postgres', q{CALL snowseq_rebalance('items')}, timeout => $PostgreSQL::Test::Utils::timeout_default * 3);
is($rc, 0, 'the second CALL succeeds');
note "second CALL:\n$err";
like($err, qr/resuming the run/, 'the second CALL resumes the stopped run');
like($err, qr/rebalance \d+: done, \d+ moves, \d+ rows copied/, 'and finishes it');
my $took = time - $t0;
is($router->safe_psql('postgres', q{SELECT r.state || ' ' || count(*) FILTER (WHERE s.state <> 'done') FROM snowseq_rebalance_runs r
	JOIN snowseq_rebalance_steps s USING (run_id) GROUP BY r.state}), 'done 0', 'the run is done, every step done');
is($router->safe_psql('postgres', q{SELECT count(*) FROM snowseq_rebalance_steps s
	JOIN snowseq_moves m ON m.move_id = s.move_id WHERE m.state = 'done'}),
	$router->safe_psql('postgres', 'SELECT count(*) FROM snowseq_rebalance_steps'), 'each step names the move that did it');

ok(wait_until(sub { !grep { nlines($_->{out}) < 60 } @writers }), 'the writers wrote after the run');
{ my $fh; close $fh if open $fh, '>', $stop; }
$_->{h}->finish for @writers, $reader;

# ---------------------------------------------------------------------
# Afterwards
# ---------------------------------------------------------------------
my $after = loads();
my $total = 0;
$total += $after->{$_} for @servers;
my $mean = $total / 4;
note 'rows per server after: ' . show($after) . sprintf(' (mean %.0f, %.1f s)', $mean, $took);
ok(!grep({ $after->{$_} > 1.25 * $mean } @servers), 'no server holds more than 1.25 x the mean rows');
is($router->safe_psql('postgres', q{SELECT count(*) FROM snowseq_rebalance_plan('items')}), '0', 'the plan is empty afterwards');

my @written = map { read_lines($_->{out}) } @writers;
my %seen;
$seen{$_}++ for split /\n/, $router->safe_psql('postgres', 'SELECT item_id FROM items');
my @lost = grep { !$seen{$_} } @written;
my @doubled = grep { $seen{$_} > 1 } keys %seen;
note scalar(@written) . ' rows written during the run, ' . scalar(@lost) . ' lost, ' . scalar(@doubled) . ' doubled';
cmp_ok(scalar(@written), '>', 40, 'the writers wrote during the run');
is(scalar(@lost), 0, 'no row written is lost');
is(scalar(@doubled), 0, 'no row is there twice');
is(scalar(keys %seen), 8000 + scalar(@written), 'the router holds the rows written and nothing else');
is($total, 8000 + scalar(@written), 'the servers hold them, once each');
my @samples = map { [ split /\|/ ] } grep { /^r\|/ } read_lines($reader->{out});
cmp_ok(scalar(@samples), '>=', 5, 'the reader sampled during the run (' . scalar(@samples) . ')');
is(scalar(grep { $_->[1] != 0 || $_->[2] != 0 } @samples), 0,
	'every sample: each row read from the server the map names, none twice');
settled('afterwards');

# ---------------------------------------------------------------------
# A drained server gives up all its genes; the router crashes during the
# run's first move, and a second CALL resumes the run
# ---------------------------------------------------------------------
($cout, $cerr) = ('', '');
$call = IPC::Run::start([ 'psql', '-X', '-Atq', '-d', $router->connstr('postgres'), '-c',
	q{CALL snowseq_rebalance('items', drain => '{s4}')} ], '>', \$cout, '2>', \$cerr);
ok(wait_until(sub { $router->safe_psql('postgres', q{SELECT count(*) FROM snowseq_moves m
	JOIN snowseq_rebalance_steps s ON s.state = 'running' AND m.first_gene = s.first_gene
	WHERE m.state IN ('prepare', 'copy', 'block', 'switch')}) eq '1' }), 'the first move of the drain is under way');
$router->stop('immediate');
$call->finish;
$router->start;
is($router->safe_psql('postgres', q{SELECT state FROM snowseq_rebalance_runs ORDER BY run_id DESC LIMIT 1}), 'running',
	'the run cut by the crash is left running');
ok($router->poll_query_until('postgres', q{SELECT count(*) = 0 FROM snowseq_moves
	WHERE state NOT IN ('done', 'failed', 'reverted')}), 'the router\'s resolver settles the move the crash cut, at its start');
($rc, $out, $err) = $router->psql('postgres', q{CALL snowseq_rebalance('items', drain => '{s4}')},
	timeout => $PostgreSQL::Test::Utils::timeout_default * 3);
is($rc, 0, 'a second CALL after the crash succeeds');
note "CALL after the crash:\n$err";
like($err, qr/resuming the run/, 'it resumes the run the crash cut');
unlike($err, qr/step \d+ was cut/, 'the resumed run finds no move left to settle');
like($err, qr/rebalance \d+: done/, 'and finishes it');
is($router->safe_psql('postgres', q{SELECT count(*) FROM snowseq_rebalance_runs WHERE state <> 'done'}), '0', 'every run is done');
my $drained = loads();
note 'rows per server after draining s4: ' . show($drained);
is($drained->{s4}, 0, 's4 holds no rows');
is($router->safe_psql('postgres', q{SELECT count(*) FROM snowseq_shard_map WHERE shard = 's4'}), '0', 'nor any gene');
is($router->safe_psql('postgres', q{SELECT count(*) FROM snowseq_rebalance_plan('items')}), '0',
	'the plan without s4 is empty');
settled('after the drain', 8000 + scalar(@written));

# ---------------------------------------------------------------------
# A server not in the map is filled
# ---------------------------------------------------------------------
is($router->safe_psql('postgres', q{SELECT count(*) FROM snowseq_rebalance_plan('items', fill => '{s4}')
	WHERE to_server = 's4'}) > 0 ? 'yes' : 'no', 'yes', 'the plan with s4 to fill gives it genes');
($rc, $out, $err) = $router->psql('postgres', q{CALL snowseq_rebalance('items', fill => '{s4}')},
	timeout => $PostgreSQL::Test::Utils::timeout_default * 3);
is($rc, 0, 'a rebalance filling s4 succeeds');
note "filling CALL:\n$err";
my $filled = loads();
my $ftotal = 0;
$ftotal += $filled->{$_} for @servers;
note 'rows per server after filling s4: ' . show($filled);
ok(!grep({ $filled->{$_} > 1.25 * $ftotal / 4 } @servers), 'no server holds more than 1.25 x the mean rows');
cmp_ok($filled->{s4}, '>', 0, 's4 holds rows again');
is($ftotal, 8000 + scalar(@written), 'the servers hold every row, once');
is($router->safe_psql('postgres', 'SELECT count(*) || \' \' || count(DISTINCT item_id) FROM items'),
	(8000 + scalar(@written)) . ' ' . (8000 + scalar(@written)), 'the router reads every row, once');
is($router->safe_psql('postgres', q{SELECT count(*) FROM snowseq_rebalance_plan('items')}), '0',
	'the plan is empty afterwards');
is(join(', ', move_leftovers('postgres', map { $node{$_} } @servers)), '', 'no replication object or fence is left');
is($router->safe_psql('postgres', q{SELECT snowseq_rebalance_stop()}), '0', 'nothing is left to stop');

# the router administrator, not the table's owner, runs no rebalance of it
my $runs_before = $router->safe_psql('postgres', q{SELECT count(*) FROM snowseq_rebalance_runs});
($rc, $out, $err) = $router->psql('postgres', q{SET ROLE radmin; CALL snowseq_rebalance('items')});
like($err, qr/must be owner of table (public\.)?items to rebalance it/, 'a router administrator rebalances no table it does not own');
is($router->safe_psql('postgres', q{SELECT count(*) FROM snowseq_rebalance_runs}), $runs_before, 'and records no run');

# ---------------------------------------------------------------------
# A drain by writes while nothing is written: every load is 0, so rows
# decide where each partition goes, as they do for a drain by rows (not
# every partition onto the first server kept)
# ---------------------------------------------------------------------
my $busiest = $router->safe_psql('postgres', q{SELECT shard FROM snowseq_shard_stats('items')
	WHERE partition IS NOT NULL GROUP BY shard ORDER BY count(DISTINCT partition) DESC, shard LIMIT 1});
sub drain_plan
{
	my ($strategy, $extra) = @_;
	my ($prc, $pout, $perr) = $router->psql('postgres', qq{SELECT string_agg(first_gene || '-' || last_gene || ' to ' || to_server, ', '
		ORDER BY step) FROM snowseq_rebalance_plan('items', '$strategy', 1000, '{$busiest}'$extra)});
	is($prc, 0, "the plan by $strategy that drains $busiest succeeds");
	return ($pout, $perr);
}
my ($by_rows) = drain_plan('rows', '');
my ($by_writes, $werr) = drain_plan('writes', q{, '{}', '1 s'});
note "drain $busiest by rows: $by_rows; by writes: $by_writes";
like($werr, qr/no server counted a write/, 'the sample by writes counted no write');
cmp_ok(scalar(my %to = map { (/ to (\S+)$/)[0] => 1 } split /, /, $by_rows), '>=', 2,
	"the drain by rows sends $busiest\'s partitions to more than one server");
is($by_writes, $by_rows, 'the drain by writes with no write sends them where the drain by rows does');

# ---------------------------------------------------------------------
# The router administrator moves: it owns the table and its partitions and
# may create in their schema, and holds no right on snowseq's records but
# SELECT; the moves write those as their owner
# ---------------------------------------------------------------------
$router->safe_psql('postgres', q{GRANT EXECUTE ON PROCEDURE snowseq_move_genes(regclass, integer, integer, name) TO radmin;
	GRANT INSERT, UPDATE, DELETE ON snowseq_shard_map TO radmin;
	GRANT CREATE ON SCHEMA public TO radmin;
	GRANT USAGE ON FOREIGN SERVER s1, s2, s3, s4 TO radmin;
	ALTER TABLE items OWNER TO radmin;
	DO $$DECLARE p regclass; BEGIN
		FOR p IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'items'::regclass LOOP
			EXECUTE format('ALTER FOREIGN TABLE %s OWNER TO radmin', p);
		END LOOP;
	END$$;});
my $radmin_moves = $router->safe_psql('postgres', 'SELECT count(*) FROM snowseq_moves');
($rc, $out, $err) = $router->psql('postgres', qq{SET ROLE radmin; CALL snowseq_rebalance('items', drain => '{$busiest}')},
	timeout => $PostgreSQL::Test::Utils::timeout_default * 3);
is($rc, 0, "the router administrator drains $busiest") or diag($err);
like($err, qr/rebalance \d+: done, [1-9]\d* moves/, 'with moves of its own');
cmp_ok($router->safe_psql('postgres', 'SELECT count(*) FROM snowseq_moves'), '>', $radmin_moves, 'recorded in snowseq_moves');
is($router->safe_psql('postgres', qq{SELECT count(*) FROM snowseq_moves WHERE mover = 'radmin'::regrole
	AND state <> 'done'}), '0', 'every move it made is done');
is(loads()->{$busiest}, 0, "$busiest holds no rows");
# ... and resumes a stopped run of its table (the driver asks whether a
# process drives it, snowseq_rebalance_driven, as the administrator)
$router->safe_psql('postgres', q{SET ROLE radmin;
	SELECT snowseq_rebalance_save_run(jsonb_populate_record(NULL::snowseq_rebalance_runs,
		'{"parent": "items", "strategy": "rows", "threshold": 1000, "drain": [], "fill": [], "sample": "10 s", "merge_below": 0}'));
	SELECT snowseq_rebalance_stop('items');});
($rc, $out, $err) = $router->psql('postgres', q{SET ROLE radmin; CALL snowseq_rebalance('items')},
	timeout => $PostgreSQL::Test::Utils::timeout_default * 3);
is($rc, 0, 'the router administrator resumes a stopped run of its table') or diag($err);
like($err, qr/resuming the run of table items.*rebalance \d+: done, 0 moves/s, 'which has nothing to move');
settled('after the router administrator\'s drain', 8000 + scalar(@written));
($rc, $out, $err) = $router->psql('postgres', q{SET ROLE radmin; INSERT INTO snowseq_moves (parent, first_gene, last_gene)
	VALUES ('items', 0, 1)});
like($err, qr/permission denied for table snowseq_moves/, 'it still may not write the records itself');

done_testing();
