# Crashes under load: a backend killed with SIGKILL (the postmaster resets
# shared memory and runs crash recovery) and an immediate shutdown followed
# by a start, each while four clients generate snowflake and gene IDs.
#
# Whatever a client received counts as issued.  After every round: no ID
# was ever received twice, every snowflake ID received after a restart is
# greater than every one received before it, and every gene segment (the
# low 48 bits of a gene ID; one counter per node, shared by all genes)
# received after a restart is greater than every one received before it.
use strict;
use warnings;
use lib 'test';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;
use Time::HiRes qw(usleep time);
use List::Util qw(min);

my $ROUNDS = 6;

# Small reservation blocks, so that reservations advance (WAL record, state
# file) many times during each round and a crash can land in the middle
# of one.  Few sequence bits (4 IDs per ms), so that the clients run the
# logical clock far ahead of the wall clock: after a restart only the
# durable reservation, not the wall clock, keeps new IDs above old ones.
my $node = snowseq_node('crash',
	conf => [
		'restart_after_crash = on',
		'snowseq.time_bits = 51',
		'snowseq.node_bits = 10',
		'snowseq.seq_bits = 2',
		'snowseq.reserve_buffer_ms = 50',
		'snowseq.clock_block_min_ms = 5',
		'snowseq.clock_block_max_ms = 200',
		'snowseq.segment_block_min = 20',
		'snowseq.segment_block_max = 2000',
	]);

# A psql script per client: many short statements, so that every statement
# that completes before the crash reaches the client's file, with a short
# sleep between them to keep the number of IDs to check moderate.  Far more
# than a round takes: the clients end when the server goes away.
my $script_dir = PostgreSQL::Test::Utils::tempdir();
my @scripts;
for my $c (1 .. 4)
{
	my $f = "$script_dir/client_$c.sql";
	open my $fh, '>', $f or die "cannot write $f: $!";
	for my $i (1 .. 20000)
	{
		if ($c <= 2)
		{
			print $fh "SELECT snowseq_next() FROM generate_series(1, 40);\n";
			print $fh "SELECT * FROM snowseq_next_n(30);\n" if $i % 10 == 0;
		}
		else
		{
			# text, bigint and bytea keys, several genes per statement
			print $fh "SELECT snowseq_gene_next('order-' || (g % 5)) FROM generate_series(1, 8) g;\n";
			print $fh "SELECT snowseq_gene_next((g % 7)::bigint) FROM generate_series($c, $c + 7) g;\n";
			print $fh "SELECT snowseq_gene_next(convert_to('key' || (g % 3), 'UTF8')) FROM generate_series(1, 4) g;\n";
		}
		# no row: psql prints nothing
		print $fh "SELECT 1 FROM pg_sleep(0.002) WHERE random() < 0;\n";
	}
	close $fh;
	push @scripts, $f;
}

# Start four clients (two snowflake, two gene) for one phase.
sub start_phase
{
	my ($tag) = @_;
	my @c;
	for my $i (0 .. 3)
	{
		my $kind = $i < 2 ? 'sf' : 'gene';
		my $cl = id_clients($node, 1, "\\i $scripts[$i]", "${tag}_${kind}_$i");
		push @c, [ $kind, $cl, "client $i ($kind)" ];
	}
	return \@c;
}

# Reservation advances counted just before each crash (shared memory, so
# the count starts over at every restart).
my $advances_seen = 0;

# Wait until every client has written IDs to its file (so the crash comes
# while all four are generating), then until they have taken another 2,000
# IDs (the server's count: enough for reservations to advance under them).
sub wait_phase_running
{
	my ($phase) = @_;
	ok(wait_until(sub { (grep { -s $_->[1][0][1] } @$phase) == @$phase }), 'every client is generating');
	my $issued = $node->safe_psql('postgres', 'SELECT ids_issued FROM snowseq_status');
	ok($node->poll_query_until('postgres', "SELECT ids_issued >= $issued + 2000 FROM snowseq_status", 't'),
		'the clients generate');
	$advances_seen += $node->safe_psql('postgres', 'SELECT reservation_advances FROM snowseq_status');
}

# Pids of the client backends (the generating clients: nothing else is
# connected).
sub generating_backends
{
	my $pids = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity
		  WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()");
	return split /\n/, $pids;
}

# Wait for the clients to end; returns how many ended by losing the server.
sub finish_phase
{
	my ($phase) = @_;
	my $failed = 0;
	$failed += wait_clients($_->[1]) for @$phase;
	return $failed;
}

# The IDs each client of a phase received, by kind.
sub phase_ids
{
	my ($phase) = @_;
	my %ids = (sf => [], gene => []);
	for my $p (@$phase)
	{
		my @got = read_ids($p->[1][0][1]);
		push @{ $ids{ $p->[0] } }, [ $p->[2], @got ];
	}
	return \%ids;
}

# Every ID received so far (snowflake and gene alike: the union must not
# repeat), with the phase that received it; the duplicates found.
my %seen;
my @dups;
my ($n_sf, $n_gene) = (0, 0);
my ($max_sf_before, $max_seg_before) = (0, 0);
my $total_failed = 0;

sub check_phase
{
	my ($phase, $what) = @_;
	my $ids = phase_ids($phase);

	my (@sf, @seg, @gene);
	my $inc = 1;
	my $dups_before = @dups;
	for my $kind ('sf', 'gene')
	{
		for my $entry (@{ $ids->{$kind} })
		{
			my ($client, @list) = @$entry;
			my @s = $kind eq 'sf' ? @list : map { segment_of($_) } @list;
			$inc = 0 unless strictly_increasing(\@s);
			if ($kind eq 'sf') { push @sf, @list; }
			else { push @seg, @s; push @gene, @list; }
			for my $id (@list)
			{
				if (exists $seen{$id}) { push @dups, "$id (in $seen{$id} and $what, $client)"; }
				else { $seen{$id} = "$what, $client"; }
			}
		}
	}
	$n_sf += @sf;
	$n_gene += @gene;
	is(scalar(@dups) - $dups_before, 0, "$what: no ID received twice, in this phase or any before")
	  or diag('first duplicates: ' . join(', ', @dups[ $dups_before .. min($#dups, $dups_before + 4) ]));
	ok($inc, "$what: each session's snowflake IDs and gene segments strictly increase");
	ok(@sf > 0 && @seg > 0, "$what: clients received IDs (" . scalar(@sf) . ' snowflake, ' . scalar(@seg) . ' gene)');
	ok(!(grep { $_ <= 0 } @sf, @gene), "$what: every ID is positive");

	my $min_sf = @sf ? (sort { $a <=> $b } @sf)[0] : 0;
	my $min_seg = @seg ? (sort { $a <=> $b } @seg)[0] : 0;
	if ($max_sf_before)
	{
		cmp_ok($min_sf, '>', $max_sf_before,
			"$what: every snowflake ID after the restart is greater than every one before it");
		cmp_ok($min_seg, '>', $max_seg_before,
			"$what: every gene segment after the restart is greater than every one before it");
	}
	$max_sf_before = max_of($max_sf_before, @sf);
	$max_seg_before = max_of($max_seg_before, @seg);
}

# Wait for the server to accept connections and generate again after a
# crash reset or a start.
sub wait_ready
{
	# while the server resets, psql can exit before it reads its query, and
	# the harness dies of the broken pipe: that is a try, not an answer
	for my $try (1 .. 100)
	{
		my $up = eval { $node->poll_query_until('postgres', 'SELECT true') };
		return if $up;
		die "server did not come back after the crash" if defined $up;
		note "asking again whether the server is up: $@";
		usleep(100_000);
	}
	die "server did not come back after the crash";
}

for my $round (1 .. $ROUNDS)
{
	# (a) SIGKILL of one generating backend: the postmaster kills the
	# others, resets shared memory and runs crash recovery.
	my $log_pos = -s $node->logfile;
	my $phase = start_phase("r${round}_kill");
	wait_phase_running($phase);
	# In even rounds a checkpoint just before the crash: recovery then
	# replays few reservation records or none, and the counters must come
	# from the state file.
	$node->safe_psql('postgres', 'CHECKPOINT') if $round % 2 == 0;
	my @pids = generating_backends();
	ok(@pids >= 1, "round $round: found generating backends (@pids)");
	my $victim = $pids[ $round % @pids ];
	kill 'KILL', $victim;
	my $failed = finish_phase($phase);
	$total_failed += $failed;
	wait_ready();
	my $log = server_log_since($node, $log_pos);
	# 18 names the backend type where 15 to 17 say "server process"
	like($log, qr/(?:server process|client backend) \(PID $victim\) was terminated by signal 9/,
		"round $round: backend $victim was killed");
	like($log, qr/all server processes terminated; reinitializing/,
		"round $round: postmaster reset shared memory");
	check_phase($phase, "round $round, SIGKILL");

	# (b) immediate shutdown and a start, clients still generating
	$log_pos = -s $node->logfile;
	$phase = start_phase("r${round}_immediate");
	wait_phase_running($phase);
	$node->safe_psql('postgres', 'CHECKPOINT') if $round % 2 == 1;
	$node->stop('immediate');
	$failed = finish_phase($phase);
	$total_failed += $failed;
	$node->start;
	wait_ready();
	like(server_log_since($node, $log_pos), qr/database system was interrupted|was not properly shut down/,
		"round $round: start after the immediate shutdown ran crash recovery");
	check_phase($phase, "round $round, immediate shutdown");
}

# The crashes really cut clients off mid-run (otherwise every check above
# would be about clean runs).
cmp_ok($total_failed, '>=', $ROUNDS * 2 * 4 / 2,
	"clients were cut off by the crashes ($total_failed client runs ended early)");

is(scalar(@dups), 0, "no ID received twice across all rounds ($n_sf snowflake and $n_gene gene IDs)");

# the clients really ran the logical clock ahead of the wall clock, and
# the crashes came while reservations kept advancing
my $status = $node->safe_psql('postgres',
	"SELECT state, drift > interval '1 s', drift FROM snowseq_status");
like($status, qr/^ok\|t\|/, "state is ok after all the crashes; the logical clock runs ahead ($status)");
cmp_ok($advances_seen, '>=', $ROUNDS * 2 * 5, "reservations advanced often during the rounds ($advances_seen)");

$node->stop;
done_testing();
