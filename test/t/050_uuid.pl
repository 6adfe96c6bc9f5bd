# snowseq_uuid(): version 7 UUIDs drawn from the cluster-wide clock.
#
# - Strictly increasing across backends, not only within one: calls that
#   alternate between two sessions, and a new session after the clock is
#   stepped back, always get a greater UUID (PostgreSQL 18's uuidv7() is
#   monotonic within one backend only).
# - Never repeated: concurrent clients, a clock stepped back ten minutes
#   at run time (libfaketime on the postmaster), a restart with the clock
#   one hour behind; every UUID carries the node id and a time that does not
#   go back.
# - Other layouts: fewer sequence bits than rand_a's 12, more (the counter
#   runs on into rand_b), long time units; the counter is the clock's, so
#   each UUID lies between the snowflake IDs issued just before and after.
#
# Whatever a client received counts as issued: the UUIDs are taken from
# psql's output, outside the server.
use strict;
use warnings;
no warnings 'portable';    # hex() of 16 digits: 64-bit integers
use lib 'test';
use Time::HiRes qw(time usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $UUID_RE = qr/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
my $EPOCH_MS = 1735689600000;    # 2025-01-01 00:00:00 UTC

# The UUIDs of a client's file (complete lines only).
sub read_uuids { return read_lines($_[0], $UUID_RE); }

# The fields of a UUID under a layout (seq_bits, node_bits): unix_ts_ms,
# version, variant, the counter (rand_a, then the top of rand_b when the
# sequence is wider than 12 bits) and the node id.
sub uuid_fields
{
	my ($u, $seq_bits, $node_bits) = @_;
	(my $h = $u) =~ s/-//g;
	my $hi = hex(substr($h, 0, 16));
	my $lo = hex(substr($h, 16, 16));
	my $extra = ($seq_bits > 12 ? $seq_bits : 12) - 12;
	my $random_bits = 62 - $extra - $node_bits;
	return {
		ms => $hi >> 16,
		version => ($hi >> 12) & 0xF,
		variant => $lo >> 62,
		counter => (($hi & 0xFFF) << $extra) | (($lo >> (62 - $extra)) & ((1 << $extra) - 1)),
		node => ($lo >> $random_bits) & ((1 << $node_bits) - 1),
	};
}

# Check the UUIDs clients received: each client's strictly increasing,
# none received twice, none at or below $floor; version 7, RFC variant,
# node $node.  Returns the union, sorted.
sub check_uuids
{
	my ($clients, $what, $node_id, $floor, %layout) = @_;
	my ($seq_bits, $node_bits) = ($layout{seq_bits} // 12, $layout{node_bits} // 10);
	my (@all, $increasing);
	$increasing = 1;
	for my $c (@$clients)
	{
		my @u = read_uuids($c->[1]);
		for my $i (1 .. $#u) { $increasing = 0 unless $u[$i] gt $u[ $i - 1 ]; }
		push @all, @u;
	}
	ok(scalar(@all) > 0, "$what: clients received " . scalar(@all) . ' UUIDs');
	ok($increasing, "$what: each session's UUIDs strictly increase");
	my %seen;
	is(scalar(grep { $seen{$_}++ } @all), 0, "$what: no UUID received twice");
	my $bad = grep {
		my $f = uuid_fields($_, $seq_bits, $node_bits);
		$f->{version} != 7 || $f->{variant} != 2 || $f->{node} != $node_id
	} @all;
	is($bad, 0, "$what: every one is version 7, RFC variant, node $node_id");
	if (defined $floor)
	{
		is(scalar(grep { $_ le $floor } @all), 0, "$what: every one is greater than every UUID received before");
	}
	return [ sort @all ];
}

sub uuid_clients
{
	my ($node, $n, $count, $tag) = @_;
	my $c = id_clients($node, $n, "COPY (SELECT snowseq_uuid() FROM generate_series(1, $count)) TO STDOUT", $tag);
	is(wait_clients($c), 0, "$tag: $n clients succeeded");
	return $c;
}

###########################################################################
# 1. One server, default layout, node 3, its clock under libfaketime.
###########################################################################

my $fake = "$PostgreSQL::Test::Utils::tmp_check/faketime_050";
set_fake_offset($fake, '+0');
my $node = snowseq_node('uuid', node_id => 3, faketime => $fake);

# four backends at once
my $t0 = time();
my $c = uuid_clients($node, 4, 50_000, 'concurrent');
my $t1 = time();
my $all = check_uuids($c, '4 concurrent backends', 3);
is(scalar(@$all), 200_000, 'the union holds 200,000 UUIDs');
my @ms = map { uuid_fields($_, 12, 10)->{ms} } @$all;
cmp_ok($ms[0], '>=', int($t0 * 1000) - 1000, 'their times start at the real time');
cmp_ok($ms[-1], '<=', int($t1 * 1000) + 10_000, 'and end within the lead the clock may borrow');
is($node->safe_psql('postgres', "SELECT (extract(epoch FROM snowseq_uuid_time('$all->[0]')) * 1000)::bigint"),
	$ms[0], 'snowseq_uuid_time() reads the same instant');
my $last = $all->[-1];

# alternating between two backends: each call's UUID is above the one the
# other backend got just before
my $s1 = $node->background_psql('postgres');
my $s2 = $node->background_psql('postgres');
my @alt;
for my $i (1 .. 300)
{
	push @alt, $s1->query_safe('SELECT snowseq_uuid()');
	push @alt, $s2->query_safe('SELECT snowseq_uuid()');
}
my $alt_ok = 1;
for my $i (1 .. $#alt) { $alt_ok = 0 unless $alt[$i] gt $alt[ $i - 1 ]; }
ok($alt_ok, '600 calls alternating between two backends: each UUID greater than the one before');
ok($alt[0] gt $last, 'and greater than those of the concurrent clients before');
$last = $alt[-1];

# the clock steps back ten minutes: backends already running and new ones
# keep going up, and so does the time in the UUIDs
set_fake_offset($fake, '-10m');
my $skew = $node->safe_psql('postgres', 'SELECT extract(epoch FROM clock_timestamp())') - time();
ok($skew < -570 && $skew > -630, sprintf('stepped back: the server clock is 10 minutes back (%.0f s)', $skew));
my $u_old_backend = $s1->query_safe('SELECT snowseq_uuid()');
ok($u_old_backend gt $last, 'stepped back: a backend started before the step gets a greater UUID');
$c = uuid_clients($node, 4, 20_000, 'stepped_back');
my $back = check_uuids($c, 'stepped back, new backends', 3, $u_old_backend);
cmp_ok(uuid_fields($back->[0], 12, 10)->{ms}, '>=', uuid_fields($last, 12, 10)->{ms},
	'stepped back: the UUIDs carry no earlier time than before the step');
$last = $back->[-1];
$s1->quit;
$s2->quit;

# a restart with the clock one hour behind: the reservation, not the wall
# clock, says where the clock resumes
$node->stop;
set_fake_offset($fake, '-1h');
start_faketime($node, $fake);
$skew = $node->safe_psql('postgres', 'SELECT extract(epoch FROM clock_timestamp())') - time();
ok($skew < -3540 && $skew > -3660, sprintf('restarted one hour behind (%.0f s)', $skew));
$c = uuid_clients($node, 4, 20_000, 'restarted');
my $after = check_uuids($c, 'restarted one hour behind', 3, $last);
cmp_ok(uuid_fields($after->[0], 12, 10)->{ms}, '>=', uuid_fields($last, 12, 10)->{ms},
	'restarted: the UUIDs carry no earlier time than before the restart');

# UUIDs and snowflake IDs share one counter
my ($id1, $u, $id2) = split /\|/,
  $node->safe_psql('postgres', 'SELECT snowseq_next(), snowseq_uuid(), snowseq_next()');
my $f = uuid_fields($u, 12, 10);
my $uc = (($f->{ms} - $EPOCH_MS) << 12) | $f->{counter};
my $counter_of = sub { my ($id) = @_; return (($id >> 22) << 12) | ($id & 4095); };
ok($counter_of->($id1) < $uc && $uc < $counter_of->($id2), 'a UUID takes the clock value between two snowflake IDs');
$node->stop;

###########################################################################
# 2. Other layouts.  The counter is seq (seq_bits wide, at least 12): zero
#    padded in rand_a when narrower, running on into rand_b when wider.
#    Each statement takes more UUIDs than a time unit holds, so the clock
#    borrows; UUIDs still strictly increase.
###########################################################################

for my $l (
	[ 'sonyflake', 39, 16, 8, 10, 40_000 ],
	[ 'js_safe', 38, 8, 7, 10, 20_000 ],
	[ 'wide_seq', 41, 1, 21, 1, 100_000 ],
	[ 'uid_generator', 28, 22, 13, 1000, 20_000 ])
{
	my ($name, $tb, $nb, $sb, $unit, $count) = @$l;
	my $node_id = (1 << $nb) - 1;
	my $n = snowseq_node("uuid_$name", node_id => $node_id,
		conf => [ "snowseq.time_bits = $tb", "snowseq.node_bits = $nb", "snowseq.seq_bits = $sb",
				  "snowseq.time_unit_ms = $unit" ]);
	my $cl = uuid_clients($n, 2, $count, $name);
	my $got = check_uuids($cl, "$tb/$nb/$sb at $unit ms", $node_id, undef,
		seq_bits => $sb, node_bits => $nb);
	is(scalar(@$got), 2 * $count, "$name: " . 2 * $count . ' UUIDs');
	# within one time unit, the counter counts; the time is a multiple of the unit
	my $bad_ms = grep { (uuid_fields($_, $sb, $nb)->{ms} - $EPOCH_MS) % $unit } @$got;
	is($bad_ms, 0, "$name: unix_ts_ms is the start of a $unit ms time unit");
	my ($i1, $uu, $i2) = split /\|/, $n->safe_psql('postgres', 'SELECT snowseq_next(), snowseq_uuid(), snowseq_next()');
	my $ff = uuid_fields($uu, $sb, $nb);
	my $counter = ((($ff->{ms} - $EPOCH_MS) / $unit) << $sb) | $ff->{counter};
	my $of = sub { my ($id) = @_; return (($id >> ($nb + $sb)) << $sb) | ($id & ((1 << $sb) - 1)); };
	ok($of->($i1) < $counter && $counter < $of->($i2),
		"$name: the UUID holds the clock value between two snowflake IDs");
	$n->stop;
}

done_testing();
