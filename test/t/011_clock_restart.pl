# The clock going back: a restart with the clock one hour behind, and steps
# back and forward while the server runs (libfaketime on the postmaster).
# Snowflake IDs stay unique and increasing throughout: after the restart
# the logical clock resumes at the saved reservation, not at the wall clock.
#
# Also reports what one statement costs in reservations and WAL: the
# reservation advances of 10M IDs, and the WAL bytes of 1M IDs next to
# those of nextval() on a sequence.
use strict;
use warnings;
use lib 'test';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;
use Time::HiRes qw(usleep time);

# ---------------------------------------------------------------------
# Reservations and WAL per statement, on a node with the real clock
# (libfaketime reads its file at every clock call: far too slow for 10M).
# ---------------------------------------------------------------------
my $plain = snowseq_node('figures');

sub insert_lsn { return $plain->safe_psql('postgres', 'SELECT pg_current_wal_insert_lsn()'); }

sub wal_bytes
{
	my ($from, $to) = @_;
	return $plain->safe_psql('postgres', "SELECT '$to'::pg_lsn - '$from'::pg_lsn");
}

# clock reservation advances so far; the worker may still be finishing an
# advance a statement asked for, so wait for it to settle (the count
# unchanged over 300 ms).  Only for the figures reported: the one check on
# it (at least one advance) holds whether or not the worker has finished.
sub clock_advances
{
	my ($prev, $now) = (-1, 0);
	while (1)
	{
		$now = $plain->safe_psql('postgres', "SELECT advances FROM snowseq_reservations WHERE kind = 'clock'");
		last if $now == $prev;
		$prev = $now;
		usleep(300_000);
	}
	return $now;
}

# 1M IDs in one statement, right after the start (first reservation)
my $lsn0 = insert_lsn();
is($plain->safe_psql('postgres', 'SELECT count(snowseq_next()) FROM generate_series(1, 1000000)'),
	'1000000', '1M IDs in one statement, first of the server');
my $lsn1 = insert_lsn();
my $wal_cold = wal_bytes($lsn0, $lsn1);

# 10M IDs in one statement
my $adv0 = clock_advances();
my $waits0 = $plain->safe_psql('postgres', "SELECT waits FROM snowseq_reservations WHERE kind = 'clock'");
$lsn0 = insert_lsn();
my $t0 = time;
is($plain->safe_psql('postgres', 'SELECT count(snowseq_next()) FROM generate_series(1, 10000000)'),
	'10000000', '10M IDs in one statement');
my $secs = time - $t0;
$lsn1 = insert_lsn();
my $wal_10m = wal_bytes($lsn0, $lsn1);
my $adv_10m = clock_advances() - $adv0;
my $waits_10m = $plain->safe_psql('postgres', "SELECT waits FROM snowseq_reservations WHERE kind = 'clock'") - $waits0;
my $block = $plain->safe_psql('postgres', "SELECT block FROM snowseq_reservations WHERE kind = 'clock'");
diag(sprintf('10M IDs in one statement (%.1f s): %d clock reservation advances, %d waits, block now %d values, %d WAL bytes',
		$secs, $adv_10m, $waits_10m, $block, $wal_10m));
cmp_ok($adv_10m, '>=', 1, '10M IDs advanced the clock reservation');

# 1M IDs in one statement, in steady state
$lsn0 = insert_lsn();
$plain->safe_psql('postgres', 'SELECT count(snowseq_next()) FROM generate_series(1, 1000000)');
$lsn1 = insert_lsn();
my $wal_steady = wal_bytes($lsn0, $lsn1);

# nextval() for 1M values
$plain->safe_psql('postgres', 'CREATE SEQUENCE s1m');
$lsn0 = insert_lsn();
is($plain->safe_psql('postgres', "SELECT count(nextval('s1m')) FROM generate_series(1, 1000000)"),
	'1000000', '1M nextval() in one statement');
$lsn1 = insert_lsn();
my $wal_nextval = wal_bytes($lsn0, $lsn1);

diag(sprintf('WAL bytes per 1M IDs: snowseq %d (first statement of the server), %d (steady state), '
		  . '%.0f (10M statement / 10); nextval %d',
		$wal_cold, $wal_steady, $wal_10m / 10, $wal_nextval));
cmp_ok($wal_cold * 10, '<', $wal_nextval, 'snowseq WAL for 1M IDs (first statement) < 1/10 of nextval');
cmp_ok($wal_steady * 10, '<', $wal_nextval, 'snowseq WAL for 1M IDs (steady state) < 1/10 of nextval');
cmp_ok($wal_10m, '<', $wal_nextval, 'snowseq WAL per 1M IDs over 10M < 1/10 of nextval');
$plain->stop;

# Steady state: with blocks of at most 800 ms a statement that runs until
# the clock reservation has advanced 6 times (however many IDs that takes
# on this machine) sees the worker make those advances at the low-water
# mark, half a block (at least 100 ms) ahead of need, so (nearly) none of
# them makes the statement wait.
my $small = snowseq_node('small_blocks',
	conf => [ 'snowseq.clock_block_min_ms = 200', 'snowseq.clock_block_max_ms = 800',
			  'snowseq.reserve_buffer_ms = 400' ]);
$small->safe_psql('postgres', 'SELECT snowseq_next()');    # the first call of a new cluster waits
my ($adv_a, $waits_a) = split /\|/, $small->safe_psql('postgres',
	"SELECT advances, waits FROM snowseq_reservations WHERE kind = 'clock'");
$small->safe_psql('postgres', "DO \$\$ BEGIN
	WHILE (SELECT advances FROM snowseq_reservations WHERE kind = 'clock') < $adv_a + 6 LOOP
		PERFORM count(snowseq_next()) FROM generate_series(1, 10000);
	END LOOP; END \$\$");
my ($adv_b, $waits_b) = split /\|/, $small->safe_psql('postgres',
	"SELECT advances, waits FROM snowseq_reservations WHERE kind = 'clock'");
diag(sprintf('steady state, blocks <= 800 ms: %d advances, %d waits', $adv_b - $adv_a, $waits_b - $waits_a));
cmp_ok($adv_b - $adv_a, '>=', 6, 'steady state: the clock reservation advanced several times');
cmp_ok(2 * ($waits_b - $waits_a), '<', $adv_b - $adv_a, 'steady state: advances came ahead of need, callers (nearly) never waited');
$small->stop;

# ---------------------------------------------------------------------
# The clock going back
# ---------------------------------------------------------------------
my $fake = "$PostgreSQL::Test::Utils::tmp_check/faketime_011";
set_fake_offset($fake, '+0');
my $node = snowseq_node('clock', faketime => $fake);

my %seen;
my $ndup = 0;
my $max_before = 0;

# Record a batch of IDs received by clients: each session's increasing,
# none seen before, all greater than every ID received before the batch.
sub take_batch
{
	my ($clients, $what) = @_;
	my $ids = check_ids($clients, $what);
	ok(@$ids > 0, "$what: clients received IDs");
	my $dup = grep { $seen{$_}++ } @$ids;
	is($dup, 0, "$what: no ID received before");
	my $min = (sort { $a <=> $b } @$ids)[0] // 0;
	cmp_ok($min, '>', $max_before, "$what: every ID is greater than every ID received before")
	  if $max_before;
	$max_before = max_of($max_before, @$ids);
	return $ids;
}

# ID -> instant in ms (layout 41/10/12, 1 ms units, epoch 2025-01-01 UTC)
my $EPOCH_MS = 1735689600000;
sub id_ms { my ($id) = @_; return ($id >> 22) + $EPOCH_MS; }

# the server's clock, as seconds since 1970, compared with ours
sub server_offset
{
	my $s = $node->safe_psql('postgres', 'SELECT extract(epoch FROM clock_timestamp())');
	return $s - time;
}

cmp_ok(abs(server_offset()), '<', 60, 'server clock starts at the real time');

my $c = id_clients($node, 3, 'SELECT snowseq_next() FROM generate_series(1, 3000)', 'before');
wait_clients($c);
take_batch($c, 'before the restart');
my $last_ms_before = id_ms($max_before);

# restart with the clock one hour behind
$node->stop;
set_fake_offset($fake, '-1h');
my $log_pos = -s $node->logfile;
start_faketime($node, $fake);
my $off = server_offset();
ok($off > -3660 && $off < -3540, sprintf('server clock is one hour behind after the restart (%.0f s)', $off));
like($node->safe_psql('postgres', 'SELECT now() < clock_timestamp() AND now() < statement_timestamp() + interval \'1 s\''),
	qr/t/, 'now() works under the offset');
ok(abs($node->safe_psql('postgres', 'SELECT extract(epoch FROM now())') - (time - 3600)) < 60,
	'now() of the server is one hour behind');

$c = id_clients($node, 3, 'SELECT snowseq_next() FROM generate_series(1, 3000)', 'behind');
wait_clients($c);
my $ids = take_batch($c, 'restarted one hour behind');
ok(!(grep { id_ms($_) < $last_ms_before } @$ids), 'IDs after the restart carry times not before those issued before it');
my $drift = $node->safe_psql('postgres', "SELECT extract(epoch FROM drift) FROM snowseq_status");
ok($drift > 3500, "the logical clock runs ahead of the wall clock ($drift s), it did not follow it back");

# Steps while clients generate: forward to the real time, back 30 min,
# forward past the real time, back 2 h, forward 1 h.  Clients run scripts
# of many short statements and are stopped when the steps are done.  No
# pg_sleep() in them: it sleeps until a wall-clock instant, so a step back
# would put the clients to sleep for the length of the step.
my $script = PostgreSQL::Test::Utils::tempdir() . '/steps.sql';
{
	open my $fh, '>', $script or die "cannot write $script: $!";
	print $fh "SELECT snowseq_next() FROM generate_series(1, 5);\n" for 1 .. 100000;
	close $fh;
}
my $back0 = $node->safe_psql('postgres', 'SELECT clock_backward_events FROM snowseq_status');
$c = id_clients($node, 3, "\\i $script", 'steps');
ok(wait_until(sub { !grep { !-s $_->[1] } @$c }), 'the clients are generating');
my $t_future;
my %offset_s = ('+0' => 0, '-30m' => -1800, '+10m' => 600, '-2h' => -7200, '-1h' => -3600);
for my $step ('+0', '-30m', '+10m', '-2h', '-1h')
{
	set_fake_offset($fake, $step);
	$t_future = time if $step eq '+10m';
	my $o = server_offset();
	ok(abs($o - $offset_s{$step}) < 60, sprintf('step to %s reached the backends (%.0f s)', $step, $o));
	# the clients generate under this offset before the next step: wait for
	# 3,000 more IDs (the server's count), not for a length of time
	my $issued = $node->safe_psql('postgres', 'SELECT ids_issued FROM snowseq_status');
	ok($node->poll_query_until('postgres', "SELECT ids_issued >= $issued + 3000 FROM snowseq_status", 't'),
		"IDs were generated with the clock at $step");
}
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity
	  WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()");
wait_clients($c);
$ids = take_batch($c, 'clock stepped back and forward at run time');
# Both steps back were counted (perhaps more events than steps: the
# reservation worker, forked by the postmaster from a signal handler, may
# read the real clock rather than libfaketime's, so its readings can
# interleave with the backends').
my $back = $node->safe_psql('postgres', 'SELECT clock_backward_events FROM snowseq_status') - $back0;
cmp_ok($back, '>=', 2, "the server saw the clock go back ($back backward events)");
# the forward step past the real time reached the IDs, and the steps back
# after it did not take them back
my $max_ms = id_ms(max_of(@$ids));
ok($max_ms >= ($t_future + 590) * 1000,
	'IDs issued after the step 10 min ahead carry times at least 10 min ahead of the real time');

# and after the steps, still above everything
$c = id_clients($node, 2, 'SELECT snowseq_next() FROM generate_series(1, 2000)', 'after');
wait_clients($c);
take_batch($c, 'after the steps');
is($node->safe_psql('postgres', 'SELECT state FROM snowseq_status'), 'ok', 'state is ok');

$node->stop;
done_testing();
