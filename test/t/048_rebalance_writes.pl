# Writes and reads per partition, and the rebalancer's strategy 'writes'.
#
#   router  (node 1): items PARTITION BY RANGE (item_id), postgres_fdw
#                       items_0 -> s1.items_1: genes     0..10922
#                       items_1 -> s2.items_2: genes 10923..21845
#                       items_2 -> s3.items_3: genes 21846..32767
#   s1..s3 (nodes 2..4): wal_level = logical
#
# The rows are even (3000 rows of hashed keys over three equal gene ranges);
# one writer updates the rows of s1's genes the whole time, so s1 takes
# every write.  snowseq_shard_stats reports the writes and reads of each
# partition's table from its server's cumulative statistics: they grow
# after writes and reads, and the pieces of one partition share its counts
# out by rows, adding up to what the server counts.  The plan by rows
# moves nothing; the plan by writes (sampled twice, a second apart) moves
# genes off s1, and CALL snowseq_rebalance(strategy => 'writes') runs it:
# afterwards s1 takes at most 60% of the writes (the other two servers
# the rest), every row is there once.  A bad sample is refused with a
# clear error, and so is an unknown strategy; a bad argument is refused
# before any sample.
#
# The sample holds no lock on the table (issue 28): the first reading is
# snowseq_shard_counters (the writes snowseq_shard_stats reads, per
# partition, no row counted, no lock kept), so while a CALL or a plan by
# writes is in its sample (its session waits in PgSleep), another session
# takes the table's ACCESS EXCLUSIVE lock at once; the CALL commits each
# second of its sample (its snapshot moves on), the plan, one statement,
# holds its snapshot.  Both are cancelled in their sample of an hour: no
# run is written.
#
# Nothing here depends on the machine's speed: the counters are judged by
# counts, a sample that saw no write (a stalled writer) is taken again
# (poll_query_until), and shares are measured over at least 1000 writes.
use strict;
use warnings;
use lib 'test';
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $tmp = $PostgreSQL::Test::Utils::tmp_check;

# ---------------------------------------------------------------------
# Topology
# ---------------------------------------------------------------------
my @shard_conf = shard_conf();
my $router = snowseq_node('router', node_id => 1);
my %node = map { ("s$_" => snowseq_node("s$_", node_id => $_ + 1, conf => \@shard_conf)) } 1 .. 3;
my @servers = sort keys %node;
my @bounds = ([ 0, 10922 ], [ 10923, 21845 ], [ 21846, 32767 ]);
my $hot_end = '(10923::bigint << 48)';    # the first ID past s1's genes

gene_sharded_items($router, \%node, \@bounds, 3000);

# per server: rows, and writes and reads of its partitions
sub stats
{
	my %s = map { $_ => { rows => 0, writes => 0, reads => 0 } } @servers;
	for (split /\n/, $router->safe_psql('postgres',
			q{SELECT shard, sum(rows), sum(writes), sum(reads) FROM snowseq_shard_stats('items') GROUP BY shard}))
	{
		my ($s, $r, $w, $d) = split /\|/;
		$s{$s} = { rows => $r, writes => $w, reads => $d };
	}
	return \%s;
}
# writes per partition, for shares between two readings
sub part_writes
{
	my %w;
	for (split /\n/, $router->safe_psql('postgres',
			q{SELECT partition, shard, sum(writes) FROM snowseq_shard_stats('items') GROUP BY 1, 2}))
	{
		my ($p, $s, $n) = split /\|/;
		$w{$p} = [ $s, $n ];
	}
	return \%w;
}
# each server's share of the writes counted between two readings, once
# at least 1000 writes were counted (counters that went back count from 0)
sub write_shares
{
	my $first = part_writes();
	my (%d, $total);
	ok(wait_until(sub {
		my $now = part_writes();
		%d = map { $_ => 0 } @servers;
		$total = 0;
		for my $p (keys %$now)
		{
			my ($s, $n) = @{ $now->{$p} };
			my $was = $first->{$p} ? $first->{$p}[1] : 0;
			my $delta = $n >= $was ? $n - $was : $n;
			$d{$s} += $delta;
			$total += $delta;
		}
		return $total >= 1000;
	}), 'at least 1000 writes counted for the shares');
	return { map { $_ => ($total ? $d{$_} / $total : 0) } @servers };
}
sub show { my ($l, $k) = @_; return join ', ', map { "$_ " . (ref $l->{$_} ? $l->{$_}{$k} : sprintf('%.3f', $l->{$_})) } @servers; }

# a session's counts reach its server's statistics up to seconds later: wait for them
ok($router->poll_query_until('postgres', q{SELECT bool_and(w >= r) FROM (SELECT sum(writes) w, sum(rows) r
	FROM snowseq_shard_stats('items') GROUP BY shard) s}), 'the writes of each server count the rows inserted');
my $before = stats();
note 'rows per server: ' . show($before, 'rows');
ok(!grep({ $before->{$_}{rows} < 900 || $before->{$_}{rows} > 1100 } @servers), 'the rows are even');

# ---------------------------------------------------------------------
# The new columns grow after writes and reads
# ---------------------------------------------------------------------
my $w0 = $before->{s1}{writes};
my $r0 = $before->{s1}{reads};
my $s2w = $before->{s2}{writes};
my $upd = $router->safe_psql('postgres', "WITH u AS (UPDATE items SET k = k || 'x' WHERE item_id < $hot_end RETURNING 1) SELECT count(*) FROM u");
$router->safe_psql('postgres', "SELECT count(*) FROM items WHERE item_id < $hot_end");
ok($router->poll_query_until('postgres', qq{SELECT sum(writes) >= $w0 + $upd AND sum(reads) >= $r0 + 2 * $upd
	FROM snowseq_shard_stats('items') WHERE shard = 's1'}),
	"the writes of s1 grow by the $upd rows updated, its reads by the rows the update and a count read");
is(stats()->{s2}{writes}, $s2w, 'the writes of s2, not written to, stay');

# two pieces of one partition share its counts out by rows, and add up to
# what its server counts
$router->safe_psql('postgres', q{INSERT INTO snowseq_shard_map VALUES (5000, 's1')});
my $whole;
ok(wait_until(sub {
	$whole = $node{s1}->safe_psql('postgres', q{SELECT n_tup_ins + n_tup_upd + n_tup_del FROM pg_stat_user_tables WHERE relname = 'items_1'});
	return $router->safe_psql('postgres', q{SELECT sum(writes) FROM snowseq_shard_stats('items') WHERE shard = 's1'}) eq $whole;
}), "the pieces of s1's partition add up to the writes its server counts ($whole)");
my @pieces = map { [ split /\|/ ] } split /\n/, $router->safe_psql('postgres',
	q{SELECT rows, writes FROM snowseq_shard_stats('items') WHERE shard = 's1' ORDER BY first_gene});
is(scalar(@pieces), 2, "s1's partition is two pieces of the map");
my $prow = $pieces[0][0] + $pieces[1][0];
ok(abs($pieces[0][1] - $whole * $pieces[0][0] / $prow) <= 1, "each piece's writes are its share by rows ($pieces[0][0]/$prow rows: $pieces[0][1] of $whole writes)");
$router->safe_psql('postgres', q{DELETE FROM snowseq_shard_map WHERE upper_gene = 5000});

# ---------------------------------------------------------------------
# Bad input: clear errors, nothing written
# ---------------------------------------------------------------------
my @bad = (
	[ q{'items', 'nope'}, qr/unknown rebalance strategy 'nope'.*HINT:  Use 'rows'.*'writes'/s, 'an unknown strategy' ],
	[ q{'items', 'writes', sample => '0 s'}, qr/rebalance sample '00:00:00' is not between 1 second and 1 hour.*HINT:  The sample is how long/s, 'a sample of 0' ],
	[ q{'items', 'writes', sample => '500 ms'}, qr/rebalance sample '00:00:00.5' is not between 1 second and 1 hour/, 'a sample under a second' ],
	[ q{'items', 'writes', sample => '-5 s'}, qr/rebalance sample '-00:00:05' is not between/, 'a negative sample' ],
	[ q{'items', 'writes', sample => '2 h'}, qr/rebalance sample '02:00:00' is not between/, 'a sample over an hour' ],
	[ q{'items', 'writes', sample => NULL}, qr/rebalance sample NULL is not between/, 'a NULL sample' ],
	[ q{'items', 'writes', drain => '{nope}', sample => '1 h'}, qr/server "nope" to drain is not in snowseq_shard_map/,
		'a drain server not in the map, before a sample of an hour' ]);
for my $b (@bad)
{
	my ($args, $re, $what) = @$b;
	my ($rc, $out, $err) = $router->psql('postgres', "SELECT * FROM snowseq_rebalance_plan($args)",
		timeout => $PostgreSQL::Test::Utils::timeout_default);
	like($err, $re, "plan: $what is refused");
	($rc, $out, $err) = $router->psql('postgres', "CALL snowseq_rebalance($args)",
		timeout => $PostgreSQL::Test::Utils::timeout_default);
	like($err, $re, "CALL: $what is refused");
}
is($router->safe_psql('postgres', 'SELECT count(*) FROM snowseq_rebalance_runs'), '0', 'refused calls wrote no run');
my ($rc, $out, $err) = $router->psql('postgres', q{SELECT * FROM snowseq_rebalance_plan('items', 'writes', sample => '1 s')});
like($err, qr/no server counted a write of table items in the 00:00:01 sample: nothing to even out/,
	'a sample without writes says so');
is($out, '', 'and plans nothing');

# ---------------------------------------------------------------------
# The sample holds no lock on the table
# ---------------------------------------------------------------------
my $in_sample = q{SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = 'sampler' AND wait_event = 'PgSleep'};
for my $c ([ 'CALL', q{CALL snowseq_rebalance('items', 'writes', sample => '1 h')} ],
	[ 'plan', q{SELECT count(*) FROM snowseq_rebalance_plan('items', 'writes', sample => '1 h')} ])
{
	my ($what, $sql) = @$c;
	my ($so, $se) = ('', '');
	my $h = IPC::Run::start([ 'psql', '-X', '-Atq', '-d', $router->connstr('postgres') . ' application_name=sampler',
		'-c', $sql ], '>', \$so, '2>', \$se);
	ok($router->poll_query_until('postgres', $in_sample), "$what by writes: in its sample");
	my $xid = $router->safe_psql('postgres', 'SELECT txid_current()');
	my ($rc, $out, $err) = $router->psql('postgres', 'BEGIN; LOCK TABLE items IN ACCESS EXCLUSIVE MODE NOWAIT; ROLLBACK;');
	is($err, '', "$what by writes: another session takes the table's ACCESS EXCLUSIVE lock during the sample");
	my $xmin = qq{SELECT coalesce(backend_xmin::text::bigint > $xid, true) FROM pg_stat_activity
		WHERE application_name = 'sampler'};
	if ($what eq 'CALL')
	{
		ok($router->poll_query_until('postgres', $xmin), 'CALL by writes: its snapshot moves on during the sample (it commits)');
	}
	else
	{
		is($router->safe_psql('postgres', $xmin), 'f', 'plan by writes: it holds its snapshot (one statement)');
	}
	$router->safe_psql('postgres', q{SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'sampler'});
	$h->finish;
	like($se, qr/canceling statement due to user request/, "$what by writes: cancelled in its sample");
}
is($router->safe_psql('postgres', 'SELECT count(*) FROM snowseq_rebalance_runs'), '0', 'a run cancelled in its sample wrote no run');

# nothing writes: the counters settle, and each partition's writes are
# the sum of its pieces' in snowseq_shard_stats
ok($router->poll_query_until('postgres', q{SELECT count(*) = 3 AND bool_and(c.writes = s.w)
	FROM snowseq_shard_counters('items') c FULL JOIN (SELECT partition, sum(writes) AS w
		FROM snowseq_shard_stats('items') GROUP BY partition) s USING (partition)}),
	'snowseq_shard_counters: one row per partition, its writes the sum of its pieces\' in snowseq_shard_stats');
my $locks = q{SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND relation = 'items'::regclass};
is($router->safe_psql('postgres', "BEGIN; SELECT count(*) FROM snowseq_shard_counters('items'); $locks; COMMIT;"),
	"3\n0", 'snowseq_shard_counters keeps no lock on the table');
is($router->safe_psql('postgres', "BEGIN; SELECT count(*) FROM snowseq_shard_stats('items'); $locks; COMMIT;"),
	"3\n1", 'snowseq_shard_stats keeps its lock (it counts the rows)');

# ---------------------------------------------------------------------
# A writer updates the rows of s1's genes all along
# ---------------------------------------------------------------------
my $stop = "$tmp/writes_stop";
unlink $stop;
END
{
	my $fh;
	close $fh if open $fh, '>', $stop;
}
open my $wfh, '>', "$tmp/writes_writer.sql" or die;
print $wfh "UPDATE items SET k = k WHERE item_id < $hot_end AND item_id % 7 = $_;\nSELECT 'w';\n" for 0 .. 6;
close $wfh;
my ($wo, $we) = ("$tmp/writes_w.out", "$tmp/writes_w.err");
unlink $wo, $we;
my $writer = IPC::Run::start([ 'bash', '-c', q{
	while [ ! -e "$3" ] && [ -d "${3%/*}" ]; do
		psql -X -Atq -d "$1" -f "$2" >> "$4" 2>> "$5" || sleep 0.2
	done }, 'writer', $router->connstr('postgres'), "$tmp/writes_writer.sql", $stop, $wo, $we ]);
sub nlines { my @l = read_lines(@_); return scalar @l; }
ok(wait_until(sub { nlines($wo) >= 14 }), 'the writer writes');

my $hot = write_shares();
note 'write shares before: ' . show($hot);
cmp_ok($hot->{s1}, '>', 0.99, 's1 takes every write');

# ---------------------------------------------------------------------
# The plan by rows moves nothing, the plan by writes moves genes off s1
# ---------------------------------------------------------------------
is($router->safe_psql('postgres', q{SELECT count(*) FROM snowseq_rebalance_plan('items', 'rows')}), '0',
	'the plan by rows moves nothing: the rows are even');
# (wait_until, not poll_query_until: each try samples for a second)
ok(wait_until(sub { $router->safe_psql('postgres', q{SELECT count(*) > 0 AND bool_and(from_server = 's1')
	FROM snowseq_rebalance_plan('items', 'writes', sample => '1 s')}) eq 't' }),
	'the plan by writes moves genes off s1, and only off s1');
my $plan = $router->safe_psql('postgres', q{SELECT * FROM snowseq_rebalance_plan('items', 'writes', sample => '1 s')});
note "plan by writes:\n$plan";

# the run: a run whose sample saw no write plans nothing; run again then
my $runs = 0;
ok(wait_until(sub {
	$runs++;
	my ($rc, $out, $err) = $router->psql('postgres', q{CALL snowseq_rebalance('items', 'writes', sample => '2 s')},
		timeout => $PostgreSQL::Test::Utils::timeout_default * 3);
	note "CALL by writes ($runs):\n$err";
	die "the rebalance failed: $err" if $rc != 0;
	return $router->safe_psql('postgres', q{SELECT count(*) FROM snowseq_rebalance_steps WHERE state = 'done'}) > 0;
}), 'CALL snowseq_rebalance by writes moves genes');
is($router->safe_psql('postgres', q{SELECT string_agg(DISTINCT r.strategy || ' ' || r.sample || ' ' || r.state, ', ')
	FROM snowseq_rebalance_runs r}), 'writes 00:00:02 done', 'the runs record the strategy and the sample');
is($router->safe_psql('postgres', q{SELECT count(*) FROM snowseq_rebalance_steps WHERE state <> 'done'}), '0',
	'every step is done');
my $moved = $router->safe_psql('postgres', q{SELECT string_agg(from_server || '->' || to_server || ' ' || first_gene || '..' || last_gene, ', ' ORDER BY run_id, step)
	FROM snowseq_rebalance_steps});
note "moves: $moved";
unlike($moved, qr/s[23]->/, 'every move took genes off s1');

# the moves' own writes (the copies' inserts, the deletes on s1) are
# counted before the shares are taken
my $r1 = $before->{s1}{rows};
ok(wait_until(sub {
	my $left = $node{s1}->safe_psql('postgres', q{SELECT count(*) FROM items_1});
	return 0 if $node{s1}->safe_psql('postgres', q{SELECT n_tup_del FROM pg_stat_user_tables WHERE relname = 'items_1'}) < $r1 - $left;
	for my $s ('s2', 's3')
	{
		next if $node{$s}->safe_psql('postgres', q{SELECT to_regclass('items_1') IS NULL}) eq 't';
		return 0 if $node{$s}->safe_psql('postgres', q{SELECT n_tup_ins < (SELECT count(*) FROM items_1)
			FROM pg_stat_user_tables WHERE relname = 'items_1'}) eq 't';
	}
	return 1;
}), 'the moves\' copies and deletes are counted');
my $after = write_shares();
note 'write shares after: ' . show($after);
cmp_ok($after->{s1}, '<', 0.6, 's1 takes less than 60% of the writes afterwards');
cmp_ok($after->{s2} + $after->{s3}, '>', 0.4, 's2 and s3 take the rest');

{ my $fh; close $fh if open $fh, '>', $stop; }
$writer->finish;
ok(nlines($wo) > 14, 'the writer wrote during the run');

is($router->safe_psql('postgres', 'SELECT count(*) || \' \' || count(DISTINCT item_id) FROM items'), '3000 3000',
	'every row is there, once');
my $rows = stats();
my $sum = 0;
$sum += $rows->{$_}{rows} for @servers;
is($sum, 3000, 'the servers hold every row, once');
is($router->safe_psql('postgres', q{SELECT count(*) FROM items t JOIN pg_foreign_table ft ON ft.ftrelid = t.tableoid
	JOIN pg_foreign_server s ON s.oid = ft.ftserver WHERE snowseq_route(t.item_id) <> s.srvname}), '0',
	'map and partitions agree afterwards');
is(join(', ', move_leftovers('postgres', map { $node{$_} } @servers)), '', 'no replication object or fence is left');

done_testing();
