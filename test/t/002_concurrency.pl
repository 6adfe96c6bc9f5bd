# Concurrency: many sessions in several databases of one cluster, batches
# interleaved with single IDs, a parallel query, and sequence overflow that
# borrows logical time and catches up with the wall clock afterwards.
#
# Whatever a client received counts as issued: every ID checked here was
# written by psql to a file outside the server.
use strict;
use warnings;
use lib 'test';
use IPC::Run ();
use Time::HiRes qw(time sleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

# Like id_clients, but in database $db, with extra libpq options (for
# example "-c name=value" settings) and a timeout, so that a hung session
# fails the test instead of hanging it.
sub db_clients
{
	my ($node, $db, $n, $sql, $tag, $options) = @_;
	my @c;
	my $connstr = $node->connstr($db);
	$connstr .= " options='$options'" if defined $options;
	for my $i (1 .. $n)
	{
		my $file = sprintf('%s/ids_%s_%d.txt', $PostgreSQL::Test::Utils::tmp_check, $tag, $i);
		my $err = '';
		my $h = IPC::Run::start(
			[ 'psql', '-X', '-At', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $connstr, '-c', $sql ],
			'>', $file, '2>', \$err,
			IPC::Run::timeout(4 * $PostgreSQL::Test::Utils::timeout_default));
		push @c, [ $h, $file, \$err ];
	}
	return \@c;
}

# Wait for clients and say whether all of them succeeded; show any stderr.
sub clients_ok
{
	my ($clients, $what) = @_;
	my $failed = wait_clients($clients);
	my $errs = join('', map { ${ $_->[2] } } @$clients);
	is($failed, 0, "$what: every session succeeded");
	is($errs, '', "$what: no session printed an error");
}

# Wait until a file has some content (a client is running and has issued IDs).
sub wait_for_output
{
	my ($file) = @_;
	my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
	while (time() < $deadline)
	{
		return 1 if -s $file;
		sleep(0.01);
	}
	return 0;
}

# Say which IDs were received twice, and by which sessions (a few of them).
sub diag_duplicates
{
	my ($clients) = @_;
	my (%where, @dups);
	for my $c (@$clients)
	{
		my @ids = read_ids($c->[1]);
		for my $i (0 .. $#ids)
		{
			my $w = "$c->[1] line " . ($i + 1);
			push @dups, $ids[$i] if exists $where{ $ids[$i] } && @{ $where{ $ids[$i] } } == 1;
			push @{ $where{ $ids[$i] } }, $w;
		}
	}
	diag(scalar(@dups) . ' IDs received twice');
	diag("$_: " . join(', ', @{ $where{$_} })) for @dups[ 0 .. ($#dups < 4 ? $#dups : 4) ];
}

# One row of snowseq_status as a hash.
sub status_row
{
	my ($node, @cols) = @_;
	my $out = $node->safe_psql('postgres', 'SELECT ' . join(', ', @cols) . ' FROM snowseq_status');
	my @v = split /\|/, $out, -1;
	my %r;
	@r{@cols} = @v;
	return \%r;
}

# Layout of an ID: [0][time][node][seq].
sub decode_id
{
	my ($id, $node_bits, $seq_bits) = @_;
	$id += 0;
	my $seq = $id & ((1 << $seq_bits) - 1);
	my $node = ($id >> $seq_bits) & ((1 << $node_bits) - 1);
	my $time = $id >> ($node_bits + $seq_bits);
	return ($time, $node, $seq);
}

# The logical clock counter an ID was made from: (time << seq_bits) | seq.
sub counter_of
{
	my ($id, $node_bits, $seq_bits) = @_;
	my ($time, undef, $seq) = decode_id($id, $node_bits, $seq_bits);
	return ($time << $seq_bits) | $seq;
}

###########################################################################
# 1. Four sessions x 250,000 IDs, two of them in a second database.
###########################################################################

my $node = snowseq_node('concurrency', node_id => 1,
	conf => [ 'max_connections = 40', 'max_worker_processes = 16', 'max_parallel_workers = 8' ]);
$node->safe_psql('postgres', 'CREATE DATABASE otherdb');
$node->safe_psql('otherdb', 'CREATE EXTENSION snowseq');

my $per_session = 250_000;
my $issued_before = status_row($node, 'ids_issued')->{ids_issued};
my $sql = "COPY (SELECT snowseq_next() FROM generate_series(1, $per_session)) TO STDOUT";
my $t0 = time();
my $clients = [
	@{ db_clients($node, 'postgres', 2, $sql, 'main') },
	@{ db_clients($node, 'otherdb', 2, $sql, 'otherdb') },
];
clients_ok($clients, '4 sessions in 2 databases');
note sprintf('4 x %d IDs took %.2f s', $per_session, time() - $t0);

for my $c (@$clients)
{
	my @ids = read_ids($c->[1]);
	is(scalar(@ids), $per_session, "session writing $c->[1] received $per_session IDs");
}
my $all = check_ids($clients, '4 sessions in 2 databases');
diag_duplicates($clients) unless all_unique($all);
is(scalar(@$all), 4 * $per_session, 'union holds 1,000,000 IDs');
ok(!(grep { (decode_id($_, 10, 12))[1] != 1 } @$all), 'every ID carries node id 1');

# one clock for the whole cluster, not one per database: the sessions of
# the two databases interleave
{
	my @m = read_ids($clients->[0][1]);
	my @o = read_ids($clients->[2][1]);
	my $inside = grep { $_ > $m[0] && $_ < $m[-1] } @o;
	note "$inside IDs of a session in otherdb lie within the range of a session in postgres";
}
undef $all;

my $st = status_row($node, 'ids_issued');
cmp_ok($st->{ids_issued}, '>=', 1_000_000, 'snowseq_status.ids_issued >= 1,000,000');
is($st->{ids_issued} - $issued_before, 4 * $per_session,
	'snowseq_status.ids_issued grew by exactly the IDs the sessions received');

###########################################################################
# 2. snowseq_next_n batches interleaved with snowseq_next never overlap.
###########################################################################

# first without concurrency: in one session, batches and single IDs
# alternate, so every ID is above every ID of the session before it
{
	my $script = join('', map { "SELECT snowseq_next_n($_); SELECT snowseq_next();\n" } (1, 2, 3, 1000) x 5);
	my @seq = split /\n/, $node->safe_psql('postgres', $script);
	is(scalar(@seq), 5 * (1 + 2 + 3 + 1000 + 4), 'one session: every ID of alternating batches and single IDs received');
	ok(all_unique(\@seq), 'one session: a single ID after a batch is none of the batch\'s IDs')
	  or diag('IDs: ' . join(' ', @seq[ 0 .. 9 ]));
	ok(strictly_increasing(\@seq), 'one session: alternating batches and single IDs strictly increase');
}

my ($batches, $batch) = (200, 1000);
my $singles = 300_000;
# The batch sessions stop halfway, before batch 101, on an advisory lock the
# test holds in each database (advisory locks are per database), until the
# single-ID sessions have received IDs: those lie between two batches of
# each batch session, whatever the speed of the machine.
my $gate = 7236942;
my @gates = map {
	my $g = $node->background_psql($_);
	$g->query_safe("SELECT pg_advisory_lock($gate)");
	$g
} ('postgres', 'otherdb');
my $half = $batches / 2 + 1;
my $batch_sql = "COPY (SELECT snowseq_next_n($batch) FROM generate_series(1, $batches) g "
  . "WHERE g <> $half OR pg_advisory_lock_shared($gate) IS NOT NULL) TO STDOUT";
my $batch_clients = [
	@{ db_clients($node, 'postgres', 1, $batch_sql, 'batch') },
	@{ db_clients($node, 'otherdb', 1, $batch_sql, 'batch_other') },
];
ok($node->poll_query_until('postgres',
		"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = $gate AND NOT granted", '2'),
	'both batch sessions issued half their batches and wait');
my $next_clients = db_clients($node, 'postgres', 2,
	"COPY (SELECT snowseq_next() FROM generate_series(1, $singles)) TO STDOUT", 'single');
ok(wait_for_output($next_clients->[0][1]) && wait_for_output($next_clients->[1][1]),
	'the single-ID sessions received IDs');
$_->query_safe("SELECT pg_advisory_unlock($gate)") for @gates;
$_->quit for @gates;
my $mix = [ @$next_clients, @$batch_clients ];
clients_ok($mix, 'batches and single IDs');
my $mixed = check_ids($mix, 'batches and single IDs');
diag_duplicates($mix) unless all_unique($mixed);
is(scalar(@$mixed), 2 * $singles + 2 * $batches * $batch, 'every ID of the mix was received');

# each batch is n consecutive counter values (taken in one atomic step), so
# with the union unique no other session's ID can fall inside a batch
my ($batches_ok, $nbatches) = (1, 0);
for my $c (@$batch_clients)
{
	my @ids = read_ids($c->[1]);
	is(scalar(@ids), $batches * $batch, "batch session $c->[1] received $batches batches of $batch");
	for (my $b = 0; $b + $batch <= @ids; $b += $batch)
	{
		$nbatches++;
		my $first = counter_of($ids[$b], 10, 12);
		for my $k (1 .. $batch - 1)
		{
			if (counter_of($ids[ $b + $k ], 10, 12) != $first + $k)
			{
				diag("batch at $b of $c->[1] is not consecutive at $k: $ids[$b + $k - 1] then $ids[$b + $k]");
				$batches_ok = 0;
				last;
			}
		}
	}
}
ok($batches_ok, "each of the $nbatches batches is $batch consecutive clock values");

# the batches really interleaved with the single IDs, so the check above
# could have seen an overlap
{
	my @single;
	push @single, read_ids($_->[1]) for @$next_clients;
	my $inside = 0;
	for my $c (@$batch_clients)
	{
		my @ids = read_ids($c->[1]);
		$inside += grep { $_ > $ids[0] && $_ < $ids[-1] } @single;
	}
	cmp_ok($inside, '>', 0, "single IDs were issued between the batches ($inside of them)");
}
undef $mixed;

###########################################################################
# 3. A parallel query: workers and leader share the one clock.
###########################################################################

my $rows = 200_000;
$node->safe_psql('postgres', "CREATE TABLE t AS SELECT g FROM generate_series(1, $rows) g; ANALYZE t");
my @par_gucs = ('parallel_setup_cost=0', 'parallel_tuple_cost=0', 'min_parallel_table_scan_size=0',
	'max_parallel_workers_per_gather=2');
my $par = join(' ', map { "-c $_" } @par_gucs);
my $par_set = join('', map { "SET $_; " } @par_gucs);

my $plan = $node->safe_psql('postgres', "$par_set EXPLAIN (COSTS OFF) SELECT snowseq_next() FROM t");
like($plan, qr/Gather.*Parallel Seq Scan on t/s, 'snowseq_next() runs in a parallel plan');

# issued by the workers and the leader of one parallel query, stored, then
# copied out to the client
my $explain = $node->safe_psql('postgres',
	"$par_set EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) "
	  . "CREATE TABLE par_ids AS SELECT snowseq_next() AS id FROM t");
note $explain;
like($explain, qr/Workers Launched: [1-9]/, 'the parallel query launched workers');
my $par_copy = db_clients($node, 'postgres', 1, 'COPY par_ids TO STDOUT', 'par_table');

# and straight to the client from a parallel plan
my $par_clients = db_clients($node, 'postgres', 2, 'COPY (SELECT snowseq_next() FROM t) TO STDOUT', 'par', $par);
clients_ok([ @$par_copy, @$par_clients ], 'parallel queries');
my @par_table = read_ids($par_copy->[0][1]);
is(scalar(@par_table), $rows, "the parallel CREATE TABLE AS issued $rows IDs");
ok(all_unique(\@par_table), 'IDs issued by parallel workers and leader are unique');
ok(!(grep { $_ <= 0 } @par_table), 'IDs issued in parallel are positive');
my @par_all = (@par_table);
my $par_interleaved = 0;
for my $c (@$par_clients)
{
	my @ids = read_ids($c->[1]);
	is(scalar(@ids), $rows, "parallel SELECT $c->[1] received $rows IDs");
	$par_interleaved++ unless strictly_increasing(\@ids);
	push @par_all, @ids;
}
ok(all_unique(\@par_all), 'no duplicate among ' . scalar(@par_all) . ' IDs of three parallel queries');
note "$par_interleaved of 2 parallel SELECTs returned IDs of several processes interleaved";
$node->stop;

###########################################################################
# 4. Sequence overflow borrows logical time, which the wall clock catches
#    up with once the load stops.
###########################################################################

# Borrowing by construction, not by speed: two IDs per one-hour time unit
# (51/10/1 at 3,600,000 ms) under libfaketime, so 20 IDs need 10 hours of
# logical time and any machine takes them far faster than that.  The fake
# wall clock starts a second past a unit boundary (no unit ends while the
# IDs are taken) and is stepped past the borrowed time by the test, instead
# of the test sleeping until the real clock gets there.
my ($tb, $nb, $sb) = (51, 10, 1);
my $unit_ms = 3_600_000;
my $n_ovf = 20;
my $ovf_clock = "$PostgreSQL::Test::Utils::tmp_check/overflow_clock_offset";
my $to_unit = seconds_to_next_unit($unit_ms) + 1;
set_fake_offset($ovf_clock, "+${to_unit}s");
my $ovf = snowseq_node('overflow', node_id => 5, faketime => $ovf_clock,
	conf => [ "snowseq.time_bits = $tb", "snowseq.node_bits = $nb", "snowseq.seq_bits = $sb",
			  "snowseq.time_unit_ms = $unit_ms", 'snowseq.max_lead_ms = 86400000' ]);
my $ovf_c = db_clients($ovf, 'postgres', 1,
	"COPY (SELECT snowseq_next() FROM generate_series(1, $n_ovf)) TO STDOUT", 'overflow');
clients_ok($ovf_c, 'overflow');
my $after = status_row($ovf, 'overflow_borrows', 'extract(epoch FROM drift)', 'last_time > wall_clock');
my $ovf_ids = check_ids($ovf_c, "overflow ($tb/$nb/$sb layout)");
is(scalar(@$ovf_ids), $n_ovf, "one statement received $n_ovf IDs");
ok(!(grep { (decode_id($_, $nb, $sb))[1] != 5 } @$ovf_ids), 'every ID carries node id 5');
my $first_unit = (decode_id($ovf_ids->[0], $nb, $sb))[0];
my $last_unit = (decode_id($ovf_ids->[-1], $nb, $sb))[0];
is($last_unit - $first_unit, $n_ovf / (1 << $sb) - 1,
	"the IDs span " . ($n_ovf / 2) . " time units, two IDs each");
cmp_ok($after->{overflow_borrows}, '>', 0, "overflow_borrows > 0 ($after->{overflow_borrows})");
is($after->{'last_time > wall_clock'}, 't', 'right after, last_time is ahead of the wall clock');
my $drift = $after->{'extract(epoch FROM drift)'};
cmp_ok($drift, '>', ($n_ovf / 2 - 2) * $unit_ms / 1000, "right after, drift is the borrowed time ($drift s)");

# no load: the wall clock passes the borrowed time (stepped past it)
set_fake_offset($ovf_clock, '+' . ($to_unit + ($n_ovf / 2) * $unit_ms / 1000) . 's');
ok($ovf->poll_query_until('postgres', 'SELECT last_time <= wall_clock FROM snowseq_status', 't'),
	'after a pause, last_time <= wall_clock');
my $caught = status_row($ovf, 'extract(epoch FROM drift)');
cmp_ok($caught->{'extract(epoch FROM drift)'}, '==', 0, 'after a pause, drift is 0');
my ($next, $lag) = split /\|/, $ovf->safe_psql('postgres',
	'SELECT id, extract(epoch FROM clock_timestamp() - snowseq_time(id)) FROM snowseq_next() id');
cmp_ok($next, '>', $ovf_ids->[-1], 'the next ID is above every ID before');
ok($lag >= 0 && $lag < $unit_ms / 1000, "the next ID's time is the wall clock's time unit again (off by $lag s)");
$ovf->stop;

done_testing();
