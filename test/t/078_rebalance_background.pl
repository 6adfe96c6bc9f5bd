# Background rebalances: snowseq_rebalance_start runs a rebalance in a
# background worker, as the role that started it, and returns its job (the
# run's id) at once; snowseq_rebalance_status reports it,
# snowseq_rebalance_wait waits for its end, snowseq_rebalance_stop stops
# it; a throttle (max_rows_per_second) sleeps between its steps; it goes on
# after the session that started it ends, and after a crash of the router
# (the move resolver starts its worker again).
#
#   router  (node 1): items PARTITION BY RANGE (item_id), postgres_fdw
#                       items_0 -> s1.items_1: genes     0..16383
#                       items_1 -> s2.items_2: genes 16384..24575
#                       items_2 -> s2.items_3: genes 24576..32767
#   s1, s2 (nodes 2, 3): wal_level = logical
#
# Job 1 drains s2 (two steps, one per partition).  Every move of a job
# stops at the pause point move_after_copy (snowseq.test_pause_at, set for
# the database) while the test holds its lock, so each check happens at a
# known point, whatever the machine's speed.  Job 1's worker, cancelled in
# its first move, fails (wait: an ERROR with its error); started again it
# goes on, and is stopped (wait: stopped) after its first step; started
# again with a throttle of one row per second it sleeps before its second
# step (status: throttled_until, the worker in PgSleep); its worker
# terminated, wait says no process runs it, and a start takes it on again;
# it is stopped there,
# and started again without the throttle it finishes (wait: done).  Job 2
# fills s2 again while two writers insert through the router, with at most
# 1 MB of lag on the standbys of its servers: it waits (status:
# throttled_by) while a standby of s1, its replay paused, is further
# behind, and goes on once it replays; the router
# is killed (immediate stop) while its move is paused after the copy; after
# the restart the resolver starts its worker again, and it finishes by
# itself: the servers are even, every row a writer was told of is there
# exactly once.  Rights: a role without the grant starts no job, nor one
# that cannot log in; a mapping whose user cannot see the standbys'
# positions is refused (it would read no lag); a router
# administrator that does not own the table starts none of it, sees none
# of its jobs and stops none; pg_monitor sees them without their errors.
use strict;
use warnings;
use lib 'test';
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $tmp = $PostgreSQL::Test::Utils::tmp_check;
my $long = $PostgreSQL::Test::Utils::timeout_default * 3;

# ---------------------------------------------------------------------
# Topology
# ---------------------------------------------------------------------
my @shard_conf = shard_conf();
my $router = snowseq_node('router', node_id => 1);
# s1 takes a standby (the throttle on its lag)
my %node = map { ("s$_" => snowseq_node("s$_", node_id => $_ + 1, conf => \@shard_conf, streaming => ($_ == 1))) } 1 .. 2;
my @servers = sort keys %node;
$node{s1}->safe_psql('postgres', 'CREATE TABLE items_1 (item_id bigint PRIMARY KEY, k text NOT NULL)');
$node{s2}->safe_psql('postgres', "CREATE TABLE items_$_ (item_id bigint PRIMARY KEY, k text NOT NULL)") for 2 .. 3;
$router->safe_psql('postgres', "CREATE EXTENSION postgres_fdw;\n"
	. fdw_servers_sql('postgres', map { [ $_, $node{$_} ] } @servers) . q{
	CREATE TABLE items (item_id bigint NOT NULL, k text NOT NULL) PARTITION BY RANGE (item_id);
	CREATE FOREIGN TABLE items_0 PARTITION OF items FOR VALUES FROM (0) TO (16384::bigint << 48)
		SERVER s1 OPTIONS (table_name 'items_1');
	CREATE FOREIGN TABLE items_1 PARTITION OF items FOR VALUES FROM (16384::bigint << 48) TO (24576::bigint << 48)
		SERVER s2 OPTIONS (table_name 'items_2');
	CREATE FOREIGN TABLE items_2 PARTITION OF items FOR VALUES FROM (24576::bigint << 48) TO (MAXVALUE)
		SERVER s2 OPTIONS (table_name 'items_3');
	INSERT INTO snowseq_shard_map VALUES (16383, 's1'), (24575, 's2'), (32767, 's2');
	CREATE TABLE plain (id bigint);
});
is($router->safe_psql('postgres', q{WITH i AS (INSERT INTO items (item_id, k) SELECT snowseq_gene_next('k' || g), 'k' || g
	FROM generate_series(1, 4000) g RETURNING 1) SELECT count(*) FROM i}), '4000', 'router: 4000 rows to begin with');

# rows per server, counted where they live
sub loads
{
	my %l = map { $_ => 0 } @servers;
	for (split /\n/, $router->safe_psql('postgres', q{SELECT shard, sum(rows) FROM snowseq_shard_stats('items') GROUP BY shard}))
	{
		my ($s, $n) = split /\|/;
		$l{$s} = $n;
	}
	return \%l;
}
sub status
{
	my ($job, $cols) = @_;
	return $router->safe_psql('postgres', "SELECT $cols FROM snowseq_rebalance_status($job)");
}
my $paused = q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'snowseq rebalance job' AND wait_event = 'advisory'};
my $workers = q{(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'snowseq rebalance job')};
my $su = $router->safe_psql('postgres', 'SELECT current_user');

# ---------------------------------------------------------------------
# Rights and bad input: clear errors, nothing written
# ---------------------------------------------------------------------
$router->safe_psql('postgres', qq{CREATE ROLE nobody LOGIN; CREATE ROLE mon LOGIN IN ROLE pg_monitor;
	CREATE ROLE radmin LOGIN;
	GRANT SELECT ON snowseq_shard_map, snowseq_rebalance_runs, snowseq_rebalance_steps, snowseq_moves, snowseq_merges TO radmin;
	GRANT EXECUTE ON FUNCTION snowseq_rebalance_start(regclass, text, double precision, name[], name[], interval, double precision, double precision, bigint),
		snowseq_rebalance_status(bigint), snowseq_rebalance_wait(bigint), snowseq_rebalance_stop(regclass, boolean),
		snowseq_rebalance_job_launch(bigint), snowseq_rebalance_job_record(bigint, double precision, bigint, integer, boolean),
		snowseq_rebalance_job_failed(bigint, text), snowseq_rebalance_job_throttled(bigint, timestamptz, text),
		snowseq_rebalance_runner_alive(integer, timestamptz), snowseq_rebalance_open_run(regclass),
		snowseq_rebalance_save_run(snowseq_rebalance_runs, boolean), snowseq_rebalance_save_steps(snowseq_rebalance_steps[]),
		snowseq_rebalance_plan_from(regclass, text, double precision, name[], name[], interval, oid[], bigint[], bigint[], timestamptz, boolean, double precision)
		TO radmin;
	GRANT EXECUTE ON PROCEDURE snowseq_rebalance(regclass, text, double precision, name[], name[], interval, double precision),
		snowseq_rebalance_job_run(bigint) TO radmin;});
my ($rc, $out, $err) = $router->psql('postgres', q{SET ROLE nobody; SELECT snowseq_rebalance_start('items')});
like($err, qr/permission denied for function snowseq_rebalance_start/, 'a role without the grant starts no job');
($rc, $out, $err) = $router->psql('postgres', q{SET ROLE radmin; SELECT snowseq_rebalance_start('items')});
like($err, qr/must be owner of table (public\.)?items to rebalance it/, 'a router administrator starts no job of a table it does not own');
# the worker connects as the starting role: one that cannot log in is refused
$router->safe_psql('postgres', q{CREATE ROLE nolog NOLOGIN; GRANT EXECUTE ON FUNCTION snowseq_rebalance_job_launch(bigint) TO nolog});
($rc, $out, $err) = $router->psql('postgres', q{SET ROLE nolog; SELECT snowseq_rebalance_job_launch(1)});
like($err, qr/role "nolog" cannot start a background rebalance: it cannot log in.*HINT:  Start it as a role with LOGIN/s,
	'a role that cannot log in starts no worker');
my @bad = (
	[ q{'items', max_rows_per_second => 0}, qr/max_rows_per_second 0 is not above 0.*HINT:  Give the most rows per second/s, 'a throttle of 0' ],
	[ q{'items', max_rows_per_second => -5}, qr/max_rows_per_second -5 is not above 0/, 'a negative throttle' ],
	[ q{'items', max_lag_bytes => 0}, qr/max_lag_bytes 0 is not above 0.*HINT:  Give the most bytes of WAL/s, 'a lag bound of 0' ],
	[ q{'items', 'nope'}, qr/unknown rebalance strategy 'nope'/, 'an unknown strategy' ],
	[ q{'items', 'rows', 1.25, '{nope}'}, qr/server "nope" to drain is not in snowseq_shard_map/, 'a drain server not in the map' ],
	[ q{'plain'}, qr/table plain is not gene-sharded/, 'a table that is not gene-sharded' ],
	[ q{NULL}, qr/the table of a rebalance must not be NULL/, 'a NULL table' ]);
for my $b (@bad)
{
	my ($args, $re, $what) = @$b;
	($rc, $out, $err) = $router->psql('postgres', "SELECT snowseq_rebalance_start($args)");
	like($err, $re, "start: $what is refused");
}
for my $f ('snowseq_rebalance_status(424242)', 'snowseq_rebalance_wait(424242)')
{
	($rc, $out, $err) = $router->psql('postgres', "SELECT * FROM $f");
	like($err, qr/rebalance job 424242 does not exist.*HINT:  snowseq_rebalance_status\(\) lists the jobs/s, "$f: an unknown job is refused");
}
($rc, $out, $err) = $router->psql('postgres', q{SELECT snowseq_rebalance_wait(NULL)});
like($err, qr/the job to wait for must not be NULL/, 'wait: a NULL job is refused');
is($router->safe_psql('postgres', 'SELECT count(*) FROM snowseq_rebalance_runs'), '0', 'refused starts wrote no run');
# a start rolled back: its worker waits for the transaction, finds no run, ends
($rc, $out, $err) = $router->psql('postgres', q{BEGIN; SELECT snowseq_rebalance_start('items'); ROLLBACK;});
is($rc, 0, 'a start in a transaction rolled back') or diag($err);
ok($router->poll_query_until('postgres', "SELECT $workers = 0"), 'its worker ends');
is($router->safe_psql('postgres', 'SELECT count(*) FROM snowseq_rebalance_runs'), '0', 'and it ran nothing');
# the launch takes a worker slot for an open run of one's own table, once
# per transaction: not for a run that does not exist, nor again for the
# run a start launched (each worker would wait for the transaction)
($rc, $out, $err) = $router->psql('postgres', q{SELECT snowseq_rebalance_job_launch(424242)});
like($err, qr/rebalance job 424242 is not an open run of a table of role/, 'launch: an unknown run is refused');
($rc, $out, $err) = $router->psql('postgres', q{BEGIN;
	SELECT snowseq_rebalance_job_launch(snowseq_rebalance_start('items'));
	ROLLBACK;});
like($err, qr/this transaction started a worker for rebalance job \d+ already.*HINT:  Commit, then start it again/s,
	'launch: a second worker for a run in one transaction is refused');
ok($router->poll_query_until('postgres', "SELECT $workers = 0"), 'the first worker ends (its start rolled back)');
is($router->safe_psql('postgres', 'SELECT count(*) FROM snowseq_rebalance_runs'), '0', 'and nothing ran');

# ---------------------------------------------------------------------
# Job 1 drains s2: failed, started again, stopped
# ---------------------------------------------------------------------
$router->safe_psql('postgres', q{ALTER DATABASE postgres SET snowseq.test_pause_at = 'move_after_copy'});
my $locker = $router->background_psql('postgres');
$locker->query_safe('SELECT pg_advisory_lock(7236949375)');
# the session that starts it ends at once
my $job = $router->safe_psql('postgres', q{SELECT snowseq_rebalance_start('items', drain => '{s2}')});
like($job, qr/^\d+$/, "start returns the job ($job)");
ok($router->poll_query_until('postgres', $paused), 'its worker runs its first move, paused after the copy');
is(status($job, 'state, background, job_role, runner_alive, steps_done, steps_total, step, last_error IS NULL'),
	"running|t|$su|t|0|2|1|t", 'status: running in the background as the starting role, step 1 of 2 running');
like(status($job, 'step_running'), qr/^move of genes \d+ to \d+ from server s2 to server s1$/, 'status: the step running');
is(status($job, 'rows_planned > 0 AND time_left IS NULL'), 't', 'status: the rows planned, no time left known before a step is done');
is($router->safe_psql('postgres', "SELECT runner_pid = (SELECT pid FROM pg_stat_activity WHERE backend_type = 'snowseq rebalance job')
	AND job_role = '$su'::regrole FROM snowseq_rebalance_runs WHERE run_id = $job"), 't', 'the run records the worker and its role');
($rc, $out, $err) = $router->psql('postgres', q{SELECT snowseq_rebalance_start('items')});
like($err, qr/rebalance $job of table items is running in process \d+/, 'a second start is refused');
($rc, $out, $err) = $router->psql('postgres', q{CALL snowseq_rebalance('items')});
like($err, qr/rebalance $job of table items is running in the session of process \d+/, 'a CALL is refused too');
# who sees it
is($router->safe_psql('postgres', q{SET ROLE radmin; SELECT count(*) FROM snowseq_rebalance_status()}), '0',
	'a router administrator that does not own the table sees none of its jobs');
($rc, $out, $err) = $router->psql('postgres', "SET ROLE radmin; SELECT * FROM snowseq_rebalance_status($job)");
like($err, qr/rebalance job $job does not exist/, '... nor that one by its id');
is($router->safe_psql('postgres', q{SET ROLE radmin; SELECT snowseq_rebalance_stop('items')}), '0', '... and stops none');
is($router->safe_psql('postgres', 'SELECT stop IS NULL FROM snowseq_rebalance_runs'), 't', 'the run has no stop asked');
is($router->safe_psql('postgres', "SET ROLE mon; SELECT state || ' ' || steps_total FROM snowseq_rebalance_status($job)"),
	'running 2', 'pg_monitor sees the job');

# cancelled in its move: the job fails; wait says why
my $wpid = $router->safe_psql('postgres', q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'snowseq rebalance job'});
$router->safe_psql('postgres', "SELECT pg_cancel_backend($wpid)");
($rc, $out, $err) = $router->psql('postgres', "SELECT snowseq_rebalance_wait($job)", timeout => $long);
like($err, qr/rebalance job $job failed: .*canceling statement due to user request.*HINT:  Fix the cause and resume it with snowseq_rebalance_start/s,
	'wait: an ERROR with the error of the failed job');
is(status($job, 'state, runner_alive'), 'stopped|f', 'status: the failed job is stopped');
like(status($job, 'last_error'), qr/canceling statement due to user request/, 'status: its error');
is($router->safe_psql('postgres', "SET ROLE mon; SELECT last_error IS NULL FROM snowseq_rebalance_status($job)"), 't',
	'pg_monitor does not read the error');

# started again: the same job goes on from its step not done; stopped
is($router->safe_psql('postgres', q{SELECT snowseq_rebalance_start('items')}), $job, 'a start continues the job not finished');
ok($router->poll_query_until('postgres', $paused), 'its worker runs its first step again, paused after the copy');
is(status($job, 'state, runner_alive, step, last_error IS NULL'), 'running|t|1|t', 'status: running, its error cleared');
is($router->safe_psql('postgres', q{SELECT snowseq_rebalance_stop('items')}), '1', 'snowseq_rebalance_stop marks the job');
$locker->query_safe('SELECT pg_advisory_unlock(7236949375)');
is($router->safe_psql('postgres', "SELECT snowseq_rebalance_wait($job)", timeout => $long), 'stopped',
	'wait returns the state: stopped');
is(status($job, 'state, steps_done, steps_total, runner_alive'), 'stopped|1|2|f', 'status: one step done of two, no runner');
is(status($job, "rows_copied > 0 AND rows_copied = (SELECT sum(rows_copied) FROM snowseq_rebalance_steps WHERE run_id = $job)
	AND time_left > interval '0'"), 't', 'status: the rows its step done copied, and a time left from its rate');
ok($router->poll_query_until('postgres', "SELECT $workers = 0"), 'the worker is gone');

# A stop asked while the process that holds a run has not yet looked (a
# worker between its takeover and its CALL, or a session whose CALL was
# cut, idle): its CALL stops at once instead of clearing the stop and
# moving on.  The run is put in that state by hand, held by the session
# that then CALLs.
{
	my ($rc, $out, $err) = $router->psql('postgres', qq{
		UPDATE snowseq_rebalance_runs SET state = 'running', stop = 'stop', runner_pid = pg_backend_pid(),
			runner_start = NULL WHERE run_id = $job;
		CALL snowseq_rebalance('items');}, timeout => $long);
	like($err, qr/rebalance $job: stopped between moves/, 'a stop asked before the holder looked: its CALL stops')
	  or diag($err);
	is(status($job, 'state, steps_done, runner_alive'), 'stopped|1|f', 'status: stopped, no step run meanwhile');
}

# ---------------------------------------------------------------------
# The throttle: one row per second; the job sleeps before its next step
# ---------------------------------------------------------------------
is($router->safe_psql('postgres', q{SELECT snowseq_rebalance_start('items', max_rows_per_second => 1)}), $job,
	'a start with a throttle continues the job');
ok($router->poll_query_until('postgres', qq{SELECT throttled_until > now() AND steps_done = 1
	AND throttled_by LIKE 'max_rows_per_second: % rows copied since %, at most 1 a second'
	AND EXISTS (SELECT FROM pg_stat_activity WHERE backend_type = 'snowseq rebalance job' AND wait_event = 'PgSleep')
	FROM snowseq_rebalance_status($job)}),
	'status: throttled (the rows of its step done at one per second), its worker sleeping before step 2');
is($router->safe_psql('postgres', "SELECT max_rows_per_second FROM snowseq_rebalance_runs WHERE run_id = $job"), '1',
	'the run records its throttle');
# its worker terminated: the run is left running with no process; wait
# says so (after 10 seconds), a start takes it on again
$router->safe_psql('postgres', q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'snowseq rebalance job'});
ok($router->poll_query_until('postgres', "SELECT $workers = 0"), 'its worker is terminated');
is(status($job, 'state, runner_alive'), 'running|f', 'status: running, no process runs it');
($rc, $out, $err) = $router->psql('postgres', "SELECT snowseq_rebalance_wait($job)", timeout => $long);
like($err, qr/rebalance job $job is running but no process has run it for 10 seconds.*HINT:  Its worker ended/s,
	'wait: an ERROR when no process runs the job');
is($router->safe_psql('postgres', q{SELECT snowseq_rebalance_start('items', max_rows_per_second => 1)}), $job,
	'a start takes the job on again');
ok($router->poll_query_until('postgres', qq{SELECT throttled_until IS NOT NULL AND runner_alive FROM snowseq_rebalance_status($job)}),
	'its new worker sleeps for the throttle');
is($router->safe_psql('postgres', q{SELECT snowseq_rebalance_stop('items')}), '1', 'a throttled job is stopped');
is($router->safe_psql('postgres', "SELECT snowseq_rebalance_wait($job)", timeout => $long), 'stopped',
	'it stops in its sleep');
is(status($job, 'steps_done, throttled_until IS NULL'), '1|t', 'no step ran meanwhile, and it sleeps no more');

# started again without a throttle, it finishes
is($router->safe_psql('postgres', q{SELECT snowseq_rebalance_start('items')}), $job, 'started again');
is($router->safe_psql('postgres', "SELECT snowseq_rebalance_wait($job)", timeout => $long), 'done', 'wait returns the state: done');
is(status($job, 'state, steps_done, steps_total, runner_alive, finished_at IS NOT NULL, last_error IS NULL'), 'done|2|2|f|t|t',
	'status: every step done, and its worker ended with no error');
is(loads()->{s2}, 0, 's2 is drained');
# a wait in a transaction that has written is refused: a job started there
# begins only when it ends
($rc, $out, $err) = $router->psql('postgres', "BEGIN; CREATE TEMP TABLE w (x int); SELECT snowseq_rebalance_wait($job); COMMIT;");
like($err, qr/snowseq_rebalance_wait cannot wait in a transaction that has written.*HINT:  A job's worker begins when the transaction that started it ends/s,
	'wait in a transaction that has written is refused, with a hint');
is($router->safe_psql('postgres', 'SELECT count(*) || \' \' || count(DISTINCT item_id) FROM items'), '4000 4000', 'every row is there, once');

# ---------------------------------------------------------------------
# Job 2 fills s2 while writers write; the router crashes in its move
# ---------------------------------------------------------------------
my $stop = "$tmp/bg_stop";
unlink $stop;
END
{
	my $fh;
	close $fh if open $fh, '>', $stop;
}
open my $wfh, '>', "$tmp/bg_writer.sql" or die;
print $wfh "INSERT INTO items (item_id, k) SELECT snowseq_gene_next(x), x FROM (SELECT md5(random()::text) x) s RETURNING item_id;\n"
  for 1 .. 20;
close $wfh;
sub nlines { my @l = read_lines(@_); return scalar @l; }
my @writers = map {
	my ($o, $e) = ("$tmp/bg_w$_.out", "$tmp/bg_w$_.err");
	unlink $o, $e;
	{ out => $o, h => IPC::Run::start([ 'bash', '-c', q{
		while [ ! -e "$3" ] && [ -d "${3%/*}" ]; do
			psql -X -Atq -d "$1" -f "$2" >> "$4" 2>> "$5" || sleep 0.2
		done }, 'writer', $router->connstr('postgres'), "$tmp/bg_writer.sql", $stop, $o, $e ]) }
} 1 .. 2;
ok(wait_until(sub { !grep { nlines($_->{out}) < 20 } @writers }), 'the writers write');

# a standby of s1, its replay paused: more than 1 MB of WAL behind
$node{s1}->backup('s1_backup');
my $standby = PostgreSQL::Test::Cluster->new('s1_standby');
$standby->init_from_backup($node{s1}, 's1_backup', has_streaming => 1);
$standby->start;
ok($router->poll_query_until('postgres', q{SELECT snowseq_shard_standby_lag('s1') IS NOT NULL}), 'snowseq_shard_standby_lag: s1 has a standby');
is($router->safe_psql('postgres', q{SELECT snowseq_shard_standby_lag('s2') IS NULL}), 't', 'snowseq_shard_standby_lag: s2 has none');
# a mapping whose user cannot see the standbys' positions reads no lag: refused
$node{s1}->safe_psql('postgres', 'CREATE ROLE lagger LOGIN');
$router->safe_psql('postgres', q{GRANT EXECUTE ON FUNCTION snowseq_shard_standby_lag(name) TO radmin;
	CREATE USER MAPPING FOR radmin SERVER s1 OPTIONS (user 'lagger', password_required 'false')});
# a role without USAGE on the server reads nothing there, as a query of a foreign table would not
($rc, $out, $err) = $router->psql('postgres', q{SET ROLE radmin; SELECT snowseq_shard_standby_lag('s1')});
like($err, qr/permission denied for foreign server s1/, 'the lag of a server the role has no USAGE on is refused');
$router->safe_psql('postgres', q{GRANT USAGE ON FOREIGN SERVER s1 TO radmin});
($rc, $out, $err) = $router->psql('postgres', q{SET ROLE radmin; SELECT snowseq_shard_standby_lag('s1')});
like($err, qr/the user of the mapping for server "s1" cannot read the positions of its standbys.*HINT:  Grant pg_read_all_stats/s,
	'a mapping whose user cannot read the standbys\' positions is refused');
# (a mapping on one server alone would make the moves refuse)
$router->safe_psql('postgres', q{DROP USER MAPPING FOR radmin SERVER s1; REVOKE USAGE ON FOREIGN SERVER s1 FROM radmin});
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_pause()');
$node{s1}->safe_psql('postgres', q{CREATE TABLE wal_filler AS SELECT g, repeat('x', 200) AS pad FROM generate_series(1, 20000) g});
ok($router->poll_query_until('postgres', q{SELECT snowseq_shard_standby_lag('s1') > 1000000}),
	'the standby of s1 is more than 1 MB behind');

$locker->query_safe('SELECT pg_advisory_lock(7236949375)');
my $job2 = $router->safe_psql('postgres', q{SELECT snowseq_rebalance_start('items', fill => '{s2}', max_lag_bytes => 1000000)});
cmp_ok($job2, '>', $job, "a second job ($job2), at most 1 MB of lag");
ok($router->poll_query_until('postgres', qq{SELECT step IS NULL AND steps_done = 0 AND steps_total > 0
	AND throttled_by ~ '^max_lag_bytes: a standby of server s1 has [0-9]+ bytes of WAL to replay \\(at most 1000000\\)\$'
	AND EXISTS (SELECT FROM pg_stat_activity WHERE backend_type = 'snowseq rebalance job' AND wait_event = 'PgSleep')
	FROM snowseq_rebalance_status($job2)}), 'status: it waits for the standby of s1 before its first step');
$standby->safe_psql('postgres', 'SELECT pg_wal_replay_resume()');
ok($router->poll_query_until('postgres', $paused), 'the standby replays: the job runs a move, paused after the copy');
is(status($job2, 'throttled_by IS NULL'), 't', 'status: no longer throttled');
is(status($job2, 'state, step IS NOT NULL'), 'running|t', 'status: a step running');
# the job's role is renamed before the crash (by another superuser): the
# resolver finds it by its OID, and resumes the job as that role
$router->safe_psql('postgres', 'CREATE ROLE su_other SUPERUSER LOGIN');
my @as_other = (extra_params => [ '-U', 'su_other' ]);
$router->safe_psql('postgres', qq{ALTER ROLE "$su" RENAME TO su_renamed}, @as_other);
is($router->safe_psql('postgres', "SELECT job_role FROM snowseq_rebalance_runs WHERE run_id = $job2", @as_other), 'su_renamed',
	'the run\'s role is the role, whatever its name');
my $log_at = -s $router->logfile;
$router->stop('immediate');
$locker->{run}->kill_kill;
$router->start;
ok(wait_until(sub { slurp_file($router->logfile, $log_at) =~ /rebalance job $job2 (?:resumes in a background worker|is not resumed)/ }),
	'the resolver looked at the job');
like(slurp_file($router->logfile, $log_at), qr/rebalance job $job2 resumes in a background worker/,
	'the resolver started its worker again, as the renamed role (the log says so)');
$router->safe_psql('postgres', qq{ALTER ROLE su_renamed RENAME TO "$su"}, @as_other);
ok($router->poll_query_until('postgres', "SELECT state = 'done' FROM snowseq_rebalance_status($job2)"),
	'after the restart the job finishes by itself');
is($router->safe_psql('postgres', "SELECT snowseq_rebalance_wait($job2)"), 'done', 'wait returns the state: done');
is(status($job2, 'last_error IS NULL'), 't', 'its resumed worker ended with no error');
is($router->safe_psql('postgres', "SELECT count(*) FILTER (WHERE state <> 'done') FROM snowseq_rebalance_steps WHERE run_id = $job2"),
	'0', 'every step of it is done');
$router->safe_psql('postgres', q{ALTER DATABASE postgres RESET snowseq.test_pause_at});
ok(wait_until(sub { !grep { nlines($_->{out}) < 60 } @writers }), 'the writers wrote after the restart');
{ my $fh; close $fh if open $fh, '>', $stop; }
$_->{h}->finish for @writers;

# ---------------------------------------------------------------------
# Afterwards
# ---------------------------------------------------------------------
my $after = loads();
my $total = $after->{s1} + $after->{s2};
note "rows per server: s1 $after->{s1}, s2 $after->{s2}";
ok(!grep({ $after->{$_} > 1.25 * $total / 2 } @servers), 'no server holds more than 1.25 x the mean rows');
is($router->safe_psql('postgres', q{SELECT count(*) FROM snowseq_rebalance_plan('items')}), '0', 'the plan is empty afterwards');
my @written = map { read_lines($_->{out}) } @writers;
my %seen;
$seen{$_}++ for split /\n/, $router->safe_psql('postgres', 'SELECT item_id FROM items');
my @lost = grep { !$seen{$_} } @written;
my @doubled = grep { $seen{$_} > 1 } keys %seen;
note scalar(@written) . ' rows the writers were told of, ' . scalar(@lost) . ' lost, ' . scalar(@doubled) . ' doubled';
cmp_ok(scalar(@written), '>', 40, 'the writers wrote during the job');
is(scalar(@lost), 0, 'no row a writer was told of is lost');
is(scalar(@doubled), 0, 'no row is there twice');
is($total, scalar(keys %seen), 'the servers hold the rows the router reads, once each');
is($router->safe_psql('postgres', q{SELECT count(*) FROM items t JOIN pg_foreign_table ft ON ft.ftrelid = t.tableoid
	JOIN pg_foreign_server s ON s.oid = ft.ftserver WHERE snowseq_route(t.item_id) <> s.srvname}), '0',
	'map and partitions agree');
is(join(', ', move_leftovers('postgres', map { $node{$_} } @servers)), '', 'no replication object or fence is left');
is($router->safe_psql('postgres', "SELECT $workers"), '0', 'no worker is left');

done_testing();
