# snowseq_id_at(): IDs for a past instant, never equal to an ID the clock
# issued or will issue, nor to another, across a crash and a restart.
#
# Four clients backfill the same instant while a fifth draws from the clock;
# the server is stopped in immediate mode (a crash) while they run, then
# four more clients go on with the same instant, then after a clean restart
# once more.  Whatever a client received counts as issued: the IDs are
# taken from psql's output, outside the server, and checked together.
# Then two clients backfill descending instants (every call a step back in
# time).  Layout 39/6/18: 262,144 sequence values per time unit.
use strict;
use warnings;
use lib 'test';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $EPOCH_MS = 1735689600000;    # 2025-01-01 00:00:00 UTC
my $INSTANT = '2025-03-01 10:00:00.123+00';
my $INSTANT_T = 1740823200123 - $EPOCH_MS;
my ($NODE, $BACKFILL) = (5, 9);

my $node = snowseq_node('backfill', node_id => $NODE,
	conf => [ 'snowseq.time_bits = 39', 'snowseq.node_bits = 6', 'snowseq.seq_bits = 18',
			  "snowseq.backfill_node_id = $BACKFILL" ]);

# Scripts: four backfilling the instant, one drawing from the clock.
sub scripts
{
	my ($rounds) = @_;
	my $at = "SELECT snowseq_id_at('$INSTANT') FROM generate_series(1, 100);\n" x $rounds;
	my $clock = "SELECT snowseq_next() FROM generate_series(1, 100);\n" x $rounds;
	return [ $at, $at, $at, $at, $clock ];
}

# The IDs received so far by a round's clients.
sub received
{
	my ($clients) = @_;
	return [ map { [ read_ids($_->[1]) ] } @$clients ];
}

# round 1: crash while the clients run.  Each client ends by waiting for an
# advisory lock that a session of the test holds until the crash, so the
# crash cuts every client off however fast the machine is.
my $holder = $node->background_psql('postgres');
$holder->query_safe('SELECT pg_advisory_lock(53)');
my $c1 = script_clients($node, 'round1',
	[ map { $_ . "SELECT pg_advisory_lock(53);\n" } @{ scripts(300) } ]);
$node->poll_query_until('postgres',
	"SELECT used > 4000 FROM snowseq_capacity WHERE kind = 'backfill'")
  or die 'the backfill clients did not start';
$node->stop('immediate');
my $failed = wait_clients($c1);
eval { $holder->quit };
$node->start;
my $r1 = received($c1);
my $n1 = 0;
$n1 += scalar(@$_) for @$r1[ 0 .. 3 ];
ok($n1 > 0, "round 1: the backfilling clients received $n1 IDs before the crash");
is($failed, 5, "round 1: all 5 clients were cut off by the crash");

# round 2: the same instant after crash recovery, to the end
my $c2 = script_clients($node, 'round2', scripts(50));
is(wait_clients($c2), 0, 'round 2: every client finished after crash recovery');
my $r2 = received($c2);

# round 3: the same instant after a clean restart
$node->restart;
my $c3 = script_clients($node, 'round3', scripts(20));
is(wait_clients($c3), 0, 'round 3: every client finished after a clean restart');
my $r3 = received($c3);

# every ID received, checked outside the server
my (@at, @clock);
for my $r ($r1, $r2, $r3)
{
	push @at, map { @$_ } @$r[ 0 .. 3 ];
	push @clock, @{ $r->[4] };
}
my $inc = 1;
for my $r ($r1, $r2, $r3)
{
	for my $ids (@$r) { $inc = 0 unless strictly_increasing($ids); }
}
ok(scalar(@at) > 30000, scalar(@at) . ' IDs for the instant, ' . scalar(@clock) . ' from the clock');
ok(all_unique([ @at, @clock ]), 'no ID received twice among all of them, across the crash and the restart');
ok($inc, "each session's IDs strictly increase");
is(scalar(grep { ($_ >> 24) != $INSTANT_T || (($_ >> 18) & 63) != $BACKFILL } @at), 0,
	"every backfilled ID has the instant's time field and the backfill node id $BACKFILL");
is(scalar(grep { (($_ >> 18) & 63) != $NODE } @clock), 0, "every clock ID has node id $NODE");
is($node->safe_psql('postgres', "SELECT count(DISTINCT snowseq_time(id)) || ' ' || min(snowseq_time(id))
	FROM unnest('{" . join(',', @at[ 0 .. 99 ]) . "}'::bigint[]) id"),
	'1 2025-03-01 10:00:00.123+00', 'snowseq_time() of a backfilled ID is the instant');
# the backfill clock resumed above what round 1 received, each time
my $max1 = max_of(map { @$_ } @$r1[ 0 .. 3 ]);
my $min2 = min_of(map { @$_ } @$r2[ 0 .. 3 ]);
my $max2 = max_of(map { @$_ } @$r2[ 0 .. 3 ]);
my $min3 = min_of(map { @$_ } @$r3[ 0 .. 3 ]);
ok($min2 > $max1 && $min3 > $max2, 'after the crash and the restart the backfill clock resumed above every ID handed out');

# round 4: two clients backfill 2,000 instants in descending order (every
# call a step back in time, so a lap of its own), after a crash
$node->stop('immediate');
$node->start;
my $desc = join('', map { "SELECT snowseq_id_at('2025-02-01 00:00:00+00'::timestamptz - interval '$_ s');\n" }
	  reverse 1 .. 1000);
my $c4 = script_clients($node, 'round4', [ $desc, $desc ]);
is(wait_clients($c4), 0, 'round 4: both clients backfilled 1,000 descending instants');
my @r4 = map { read_ids($_->[1]) } @$c4;
is(scalar(@r4), 2000, 'round 4: 2,000 IDs');
ok(all_unique([ @at, @clock, @r4 ]), 'round 4: no ID received twice, with every round before');
is(scalar(grep { (($_ >> 18) & 63) != $BACKFILL } @r4), 0, 'round 4: the backfill node id on each');

# after a clean stop, the instant and the first of round 4's instants go on
# above every ID they handed out (the backfill map, snowseq.backfill, holds
# what each time unit took)
$node->stop;
ok(-f $node->data_dir . '/snowseq.backfill', 'the backfill map is a file of its own');
$node->start;
my $next = $node->safe_psql('postgres', "SELECT snowseq_id_at('$INSTANT')");
ok($next > max_of(@at), "after the stop, the instant's next ID ($next) lies above every one it handed out");
my $first4 = $node->safe_psql('postgres',
	"SELECT snowseq_id_at('2025-02-01 00:00:00+00'::timestamptz - interval '1000 s')");
ok($first4 > max_of(grep { ($_ >> 24) == ($r4[0] >> 24) } @r4),
	"after the stop, a round 4 instant's next ID lies above both it handed out");

done_testing();
