# Bounded spaces never run out by policy.  For each bounded kind, rounds of
# a burst, then a clean restart or a crash (and, for a serial, a period
# switch): what is left (snowseq_capacity) never drops by more than the
# stated share of what was left across a restart (an advance takes at most
# 1/32 of what is left above it, so a restart skips at most 1/31 of it,
# plus the value the check itself takes), and no call fails while space is
# left.  docs/durability.md states the share per kind.
#
# | kind               | space                                  | rounds                         |
# |--------------------|----------------------------------------|--------------------------------|
# | serial             | 99,999 numbers a day ('Q-YYYYMMDD-#####') | burst 4,500; restart, crash; midnight |
# | counter, maximum   | 100,000 values                         | burst 4,500; restart, crash    |
# | gene segments      | 262,143 segments (30 node bits)        | burst 20,000; restart, crash   |
# | backfill (bigint)  | 4,096 IDs a time unit                  | burst at one instant; restart, crash; earlier instants; 5,000 descending |
# | backfill (uuid)    | 2^32 UUIDs a millisecond               | a million at one instant; restart |
# | key versions       | 63 (6 version bits)                    | a key; restart, crash: exact   |
# | time field         | its last 15 minutes (53-bit layout)    | burst; restart: the lead it leaves |
use strict;
use warnings;
use lib 'test';
use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $tmp = $PostgreSQL::Test::Utils::tmp_check;
my $fake = "$tmp/cap.faketime";

# What is left of a space, from snowseq_capacity.
sub left
{
	my ($node, $kind, $name) = @_;
	my $v = $node->safe_psql('postgres', "SELECT remaining FROM snowseq_capacity WHERE kind = '$kind'"
		  . (defined $name ? " AND name = '$name'" : ''));
	die "no capacity row for $kind" . (defined $name ? " $name" : '') unless length $v;
	return $v + 0;
}

# A restart (clean or a crash) keeping the postmaster under libfaketime.
sub restart
{
	my ($node, $how, $faked) = @_;
	$node->stop($how eq 'crash' ? 'immediate' : 'fast');
	if ($faked) { start_faketime($node, $fake); }
	else { $node->start; }
}

# One round for a kind: the burst, what is left, the restart, the first
# call after it (it must succeed), what is left then; the drop is within
# the share.
sub round
{
	my (%o) = @_;
	my ($node, $kind, $name, $how) = @o{qw(node kind name how)};
	$node->safe_psql('postgres', $o{burst}) if $o{burst};
	my $before = left($node, $kind, $name);
	restart($node, $how, $o{faked});
	my ($rc, $out, $err) = $node->psql('postgres', $o{one});
	is($rc, 0, "$kind x $how: the first call after it succeeds ($before left before)") or diag($err);
	my $after = left($node, $kind, $name);
	my $allowed = int(($before + 1) / 31) + 1 + ($o{taken} // 1);
	cmp_ok($before - $after, '<=', $allowed,
		"$kind x $how: what is left dropped by " . ($before - $after) . " of $before, at most $allowed (1/31 of it, and the call)");
	return $after;
}

# ---- serials, counters with a maximum, backfill, key versions ----
set_fake_offset($fake, '+0');
my $node = snowseq_node('cap', node_id => 1, faketime => $fake,
	conf => [ 'snowseq.backfill_node_id = 1000', "timezone = 'UTC'" ]);
$node->safe_psql('postgres', q{
	SELECT snowseq_create_serial('q5', 'Q-YYYYMMDD-#####', 'UTC');
	SELECT snowseq_create_counter('m', maximum => 100000);
});
is(left($node, 'serial', 'q5'), 99999, 'a serial of five digits holds 99,999 numbers a day');
is(left($node, 'counter', 'm'), 100000, 'a counter with a maximum of 100,000 holds 100,000 values');

# issue 27 (1): 4,500 numbers in one statement and a clean restart ended
# the day of 1.2's serial ("number 102400 ... does not fit in its 5 digits")
for my $how ('restart', 'crash', 'restart', 'crash')
{
	round(node => $node, kind => 'serial', name => 'q5', how => $how, faked => 1,
		burst => "SELECT count(snowseq_serial('q5')) FROM generate_series(1, 4500)",
		one => "SELECT snowseq_serial('q5')");
	round(node => $node, kind => 'counter', name => 'm', how => $how, faked => 1,
		burst => "SELECT count(snowseq_counter_next('m')) FROM generate_series(1, 4500)",
		one => "SELECT snowseq_counter_next('m')");
}
# the numbers go on up to the last that fits, then a clear ERROR
my $last_left = left($node, 'serial', 'q5');
my ($rc, $out, $err) = $node->psql('postgres',
	"SELECT count(snowseq_serial('q5')) FROM generate_series(1, $last_left)");
is($out, $last_left, "serial: every one of the $last_left numbers left is handed out");
($rc, $out, $err) = $node->psql('postgres', "SELECT snowseq_serial('q5')");
like($err, qr/serial "q5" ran out of numbers for period \d{4}-\d\d-\d\d.*Q-\d{8}-99999, was taken/s,
	'serial: then a clear ERROR naming the period and its last number');
# the period switch: midnight, by the clock the server reads
my $to_midnight = 86400 - (time() % 86400) + 2;
set_fake_offset($fake, "+${to_midnight}s");
$node->poll_query_until('postgres', "SELECT right(snowseq_serial('q5'), 5) = '00001'")
  or die 'the serial did not reach its next period';
cmp_ok(left($node, 'serial', 'q5'), '>=', 99999 - 2, 'serial x period switch: the new day holds its numbers');
round(node => $node, kind => 'serial', name => 'q5', how => 'restart', faked => 1,
	burst => "SELECT count(snowseq_serial('q5')) FROM generate_series(1, 4500)",
	one => "SELECT snowseq_serial('q5')");

# key versions: made exactly, a restart or a crash spends none
$node->safe_psql('postgres', 'SELECT snowseq_use_key(snowseq_new_key())');
my $keys = left($node, 'key version');
is($keys, 62, 'key versions: one of 63 made');
restart($node, 'restart', 1);
restart($node, 'crash', 1);
is(left($node, 'key version'), 62, 'key versions: a restart and a crash spend none');

# Backfill in random order: instants spread over 200 days, 30,000 rows a
# pass.  1.3's first map (128 regions, raised by merging) lost 890 values of
# its fullest time unit a pass of 50,000 and ran out after about 250,000
# rows; the table of units in front of the regions folds into them once
# 12,288 units are in it, each fold a value or so.
my @fullest;
my $random = q{SELECT count(DISTINCT snowseq_id_at(timestamptz '2025-01-01 00:00:00+00'
	+ (random() * 200 * 86400000)::bigint * interval '1 ms')) FROM generate_series(1, 30000)};
for my $pass (1 .. 2)
{
	is((split /\n/, $node->safe_psql('postgres', "SELECT setseed(0.$pass); $random"))[-1], 30000,
		"backfill in random order, pass $pass: 30,000 distinct IDs");
	push @fullest, 4096 - left($node, 'backfill');
}
cmp_ok($fullest[1] - $fullest[0], '<=', 16,
	"backfill in random order: a pass spends at most 16 values of the fullest unit ($fullest[0], then $fullest[1])");
for my $how ('restart', 'crash')
{
	round(node => $node, kind => 'backfill', how => $how, faked => 1,
		burst => "SELECT setseed(0.3); $random",
		one => "SELECT snowseq_id_at('2025-03-01 00:00:00+00')");
}
# the fullest unit is one a burst was in; a typical unit lost a few values
my $median = $node->safe_psql('postgres', q{SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY (snowseq_parse(id)).seq)
	FROM (SELECT snowseq_id_at(timestamptz '2025-01-01 00:00:00+00'
	+ (random() * 200 * 86400000)::bigint * interval '1 ms') AS id FROM generate_series(1, 30000)) t});
cmp_ok($median, '<=', 32, "backfill in random order: after four passes, two restarts and a crash, the median value is $median of 4,096");

# issue 27 (2): the backfill space.  A burst at one instant, then an earlier
# instant, a restart, a crash: 1.2 ran out ("the sequence values for IDs
# for past instants are used up")
my $t1 = "'2025-06-01 00:00:00+00'";
is($node->safe_psql('postgres', "SELECT count(DISTINCT snowseq_id_at($t1)) FROM generate_series(1, 4000)"),
	4000, 'backfill: 4,000 IDs for one instant');
for my $how ('restart', 'crash')
{
	round(node => $node, kind => 'backfill', how => $how, faked => 1,
		one => "SELECT snowseq_id_at($t1)");
	is($node->psql('postgres', "SELECT snowseq_id_at('2025-05-31 00:00:00+00')"), 0,
		"backfill x $how: an earlier instant still gets an ID");
}
is($node->safe_psql('postgres', q{SELECT count(DISTINCT snowseq_id_at('2025-05-01 00:00:00+00'::timestamptz - n * interval '1 ms'))
	FROM generate_series(1, 5000) n}), 5000, 'backfill: 5,000 descending instants, all distinct');
restart($node, 'restart', 1);
is($node->safe_psql('postgres', q{SELECT count(DISTINCT snowseq_id_at('2025-04-01 00:00:00+00'::timestamptz - n * interval '1 ms'))
	FROM generate_series(1, 5000) n}), 5000, 'backfill: and 5,000 more after a restart');
# the instant of the burst holds what is left of its 4,096, then refuses,
# saying where else to go
my $unit_left = 4096 - $node->safe_psql('postgres', q{SELECT max((snowseq_parse(id)).seq) + 1 FROM
	(SELECT snowseq_id_at('2025-06-01 00:00:00+00') AS id) t});
($rc, $out, $err) = $node->psql('postgres', "SELECT count(snowseq_id_at($t1)) FROM generate_series(1, $unit_left)");
is($rc, 0, "backfill: the $unit_left values left of the instant are handed out");
($rc, $out, $err) = $node->psql('postgres', "SELECT snowseq_id_at($t1)");
like($err, qr/all 4096 IDs for the time unit of 2025-06-01 00:00:00\+00 are taken on this server.*another snowseq.backfill_node_id/s,
	'backfill: then a clear ERROR naming the instant and another backfill node id');

# issue 27 (3): UUIDs for one instant, far more than the bigint values
is($node->safe_psql('postgres', "SELECT count(DISTINCT snowseq_uuid_at($t1)) FROM generate_series(1, 1000000)"),
	1000000, 'backfill uuid: a million distinct UUIDs for one instant whose bigint IDs are all taken');
round(node => $node, kind => 'backfill uuid', how => 'restart', faked => 1,
	one => "SELECT snowseq_uuid_at($t1)");
$node->stop;

# ---- gene segments: a node of 30 node bits holds 262,143 segments ----
my $genes = snowseq_node('cap_genes', node_id => 5,
	conf => [ 'snowseq.node_bits = 30', 'snowseq.seq_bits = 2', 'snowseq.time_bits = 31',
		'snowseq.time_unit_ms = 1000' ]);
is(left($genes, 'gene segment'), 262143, 'gene segments: 262,143 with 30 node bits');
for my $how ('restart', 'crash', 'restart')
{
	round(node => $genes, kind => 'gene segment', how => $how,
		burst => "SELECT count(snowseq_gene_next(i)) FROM generate_series(1, 20000) i",
		one => "SELECT snowseq_gene_next(1)");
}
$genes->stop;

# ---- the time field near its end: a 53-bit layout (31 + 10 + 12) whose
# epoch leaves 15 minutes of its 2^31 ms; the lead a restart leaves is at
# most 1/31 of what was left ----
my $end_ms = (time() + 900) * 1000;
my $epoch_ms = $end_ms - 2**31;
my $epoch = POSIX::strftime('%Y-%m-%d %H:%M:%S', gmtime(int($epoch_ms / 1000))) . sprintf('.%03d+00', $epoch_ms % 1000);
my $clock = snowseq_node('cap_clock', node_id => 6,
	conf => [ 'snowseq.time_bits = 31', "snowseq.epoch = '$epoch'" ]);
my $units_left = left($clock, 'clock');
cmp_ok($units_left, '<', 900_001, "time field: $units_left ms left of it");
$clock->safe_psql('postgres', 'SELECT count(snowseq_next()) FROM generate_series(1, 200000)');
my $before = left($clock, 'clock');
$clock->restart;
$clock->safe_psql('postgres', 'SELECT snowseq_next()');
my $lead = $clock->safe_psql('postgres', "SELECT extract(epoch FROM drift) * 1000 FROM snowseq_status");
cmp_ok($lead, '<=', int($before / 31) + 1,
	"time field x restart: the clock leads the wall clock by $lead ms, at most 1/31 of the $before ms left");
$clock->stop;

done_testing();
