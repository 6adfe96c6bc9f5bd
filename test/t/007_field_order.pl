# snowseq.layout: the field order of the snowflake layout, so that snowseq
# produces the IDs of the generators a fleet migrates from, bit for bit.
#
# - Sonyflake (time 39 | sequence 8 | machine 16, 10 ms units, epoch
#   2014-09-01): the sequence lies above the machine id.  Sonyflake's README
#   publishes the layout but no example IDs, so the vectors are built from
#   the published layout (its Compose: time << 24 | sequence << 16 |
#   machine); fresh IDs are decomposed with Sonyflake's formula outside the
#   server, and they increase and never repeat.
# - Twitter, Discord, Mastodon: IDs from their published documentation
#   decode to the published instants; Instagram: the worked example of its
#   engineering blog; Baidu uid-generator: vectors built from its published
#   layout (its README publishes none in its default layout).
# - Loud: a layout with the bit settings, or a layout that is not one, stops
#   the server; a changed field order is a changed configuration that
#   snowseq_reset_state() adopts without going back.
use strict;
use warnings;
no warnings 'portable';
use lib 'test';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

# A node with a layout, started (the extension created).
sub layout_node
{
	my ($name, $node_id, @conf) = @_;
	return snowseq_node($name, node_id => $node_id, conf => [ "timezone = 'UTC'", @conf ]);
}

###########################################################################
# 1. Sonyflake: time:39,seq:8,node:16 at 10 ms from 2014-09-01.
###########################################################################
my $sf = layout_node('sonyflake', 4660, "snowseq.layout = 'time:39,seq:8,node:16'",
	'snowseq.time_unit_ms = 10', "snowseq.epoch = '2014-09-01 00:00:00+00'",
	'snowseq.backfill_node_id = 65535');
is($sf->safe_psql('postgres',
		"SELECT time_bits, node_bits, seq_bits, time_unit_ms FROM snowseq_status"),
	'39|16|8|10', 'sonyflake: the layout sets the widths snowseq_status shows');

# vectors from the published layout: id = t << 24 | seq << 16 | machine
for my $v ([ 0, 0, 0 ], [ 1, 0, 0 ], [ 100, 255, 65535 ], [ 123456789, 200, 4660 ], [ 2**39 - 1, 255, 65535 ])
{
	my ($t, $seq, $machine) = @$v;
	my $id = ($t << 24) | ($seq << 16) | $machine;
	my $ms = 1409529600000 + $t * 10;
	my $r = $sf->safe_psql('postgres',
		"SELECT (extract(epoch FROM p.ts) * 1000)::bigint, p.node, p.seq, snowseq_node($id)
		   FROM snowseq_parse($id) p");
	is($r, "$ms|$machine|$seq|$machine", "sonyflake: $id decodes to time $t, sequence $seq, machine $machine");
}
is($sf->safe_psql('postgres',
		"SELECT snowseq_min_id('2017-01-01 00:00:00.005+00') = ((1483228800000 - 1409529600000) / 10)::bigint << 24,
		        snowseq_max_id('2017-01-01 00:00:00.005+00') = ((((1483228800000 - 1409529600000) / 10) + 1)::bigint << 24) - 1"),
	't|t', 'sonyflake: snowseq_min_id and snowseq_max_id bound the time unit');

# fresh IDs, decomposed outside the server with Sonyflake's formula
my @ids = split /\n/, $sf->safe_psql('postgres', 'SELECT snowseq_next() FROM generate_series(1, 20000)');
my $now_t = int((time() * 1000 - 1409529600000) / 10);
my ($bad_machine, $bad_time, $not_increasing) = (0, 0, 0);
my %seqs;
for my $i (0 .. $#ids)
{
	my $id = $ids[$i];
	my ($t, $seq, $machine) = ($id >> 24, ($id >> 16) & 0xFF, $id & 0xFFFF);
	$bad_machine++ if $machine != 4660;
	$bad_time++ if abs($t - $now_t) > 6000;    # within a minute
	$not_increasing++ if $i > 0 && $id <= $ids[ $i - 1 ];
	$seqs{$seq}++;
}
is(scalar(@ids), 20000, 'sonyflake: 20,000 IDs');
is($bad_machine, 0, 'sonyflake: every ID carries machine id 4660 in its low 16 bits');
is($bad_time, 0, 'sonyflake: every ID carries the present in its top 39 bits (10 ms units)');
is($not_increasing, 0, 'sonyflake: IDs strictly increase (the machine id is constant below the sequence)');
ok(all_unique(\@ids), 'sonyflake: no ID twice');
is(scalar(keys %seqs), 256, 'sonyflake: the 8-bit sequence takes all 256 values');
my $sample = $ids[12345];
is($sf->safe_psql('postgres', "SELECT node, seq FROM snowseq_parse($sample)"),
	(($sample & 0xFFFF) . '|' . (($sample >> 16) & 0xFF)),
	'sonyflake: snowseq_parse agrees with the formula');
# IDs for a past instant carry the backfill node id where the machine id goes
my $at = $sf->safe_psql('postgres', "SELECT snowseq_id_at('2020-02-02 02:02:02.02+00')");
is(($at & 0xFFFF) . '|' . (($at >> 16) & 0xFF) . '|' . ($at >> 24),
	'65535|0|' . int((1580608922020 - 1409529600000) / 10),
	'sonyflake: snowseq_id_at puts the backfill node id in the machine field');
# a UUID takes the same clock
is($sf->safe_psql('postgres', "SELECT snowseq_uuid_time(snowseq_uuid()) > now() - interval '1 minute'"), 't',
	'sonyflake: snowseq_uuid() works under the layout');

# the same widths in the other order are another layout: refused until adopted
my $before = $sf->safe_psql('postgres', 'SELECT snowseq_next()');
$sf->append_conf('postgresql.conf', "snowseq.layout = 'time:39,node:16,seq:8'");
$sf->restart;
my ($rc, $out, $err) = $sf->psql('postgres', 'SELECT snowseq_next()');
like($err, qr/snowseq configuration does not match its saved state\n.*DETAIL:  The field order was time, seq, node and is now time, node, seq\./,
	'field order changed: snowseq_next() is refused, naming both orders');
$sf->safe_psql('postgres', 'SELECT snowseq_reset_state()');
my $after = $sf->safe_psql('postgres', 'SELECT snowseq_next()');
ok($after > $before, "after snowseq_reset_state(), the first ID of the new order ($after) is above the last of the old ($before)");
is($sf->safe_psql('postgres', "SELECT node, seq < 256 FROM snowseq_parse($after)"), '4660|t',
	'the new order puts the node id above the sequence');
$sf->stop;

###########################################################################
# 2. Published IDs of other generators decode to their published fields.
###########################################################################
my $v = layout_node('vectors', 0);
my @published = (
	# Twitter API docs, tweet object: created_at "Wed Oct 10 20:19:24 +0000 2018"
	[ 'Twitter', "snowseq.layout = 'time:41,node:10,seq:12'", "snowseq.epoch = '2010-11-04 01:42:54.657+00'", 1,
	  '1050118621198921728', '2018-10-10 20:19:24.211+00', 347, 0 ],
	# Discord API reference, snowflake example: 2016-04-30 11:18:25.796 UTC,
	# worker 1, process 0 (node = worker << 5 | process = 32), increment 7
	[ 'Discord', "snowseq.layout = 'time:41,node:10,seq:12'", "snowseq.epoch = '2015-01-01 00:00:00+00'", 1,
	  '175928847299117063', '2016-04-30 11:18:25.796+00', 32, 7 ],
	# Mastodon API docs, status entity example (created_at 2019-12-08T03:48:33.901Z)
	[ 'Mastodon', "snowseq.layout = 'time:47,node:0,seq:16'", "snowseq.epoch = '1970-01-01 00:00:00+00'", 1,
	  '103270115826048975', '2019-12-08 03:48:33.849+00', 0, 40911 ],
	# Instagram engineering blog, "Sharding & IDs at Instagram": 1387263000 ms
	# after its epoch, shard 1341, sequence 5001 % 1024 = 457
	[ 'Instagram', "snowseq.layout = 'time:40,node:13,seq:10'", "snowseq.epoch = '2011-01-01 00:00:00+00'", 1,
	  (1387263000 << 23 | 1341 << 10 | 457), '2011-01-17 01:21:03+00', 1341, 457 ],
	# Baidu uid-generator, default layout 28 | 22 | 13 in seconds (built from
	# the layout): 100,000,000 s after 2016-05-20, worker 12345, sequence 77
	[ 'uid-generator', "snowseq.layout = 'time:28,node:22,seq:13'", "snowseq.epoch = '2016-05-20 00:00:00+00'", 1000,
	  (100000000 << 35 | 12345 << 13 | 77), '2019-07-21 09:46:40+00', 12345, 77 ],
);
for my $p (@published)
{
	my ($what, $layout, $epoch, $unit, $id, $ts, $node, $seq) = @$p;
	$v->append_conf('postgresql.conf', "$layout\n$epoch\nsnowseq.time_unit_ms = $unit\n");
	$v->restart;
	is($v->safe_psql('postgres', "SELECT ts, node, seq FROM snowseq_parse($id)"), "$ts|$node|$seq",
		"$what: $id decodes to $ts, node $node, sequence $seq");
	is($v->safe_psql('postgres', "SELECT snowseq_min_id('$ts') <= $id AND $id <= snowseq_max_id('$ts')"), 't',
		"$what: $id lies within snowseq_min_id and snowseq_max_id of its instant");
}
$v->stop;

# Twitter and Discord layouts generate: node field above the sequence
my $tw = layout_node('twitter', 347, "snowseq.layout = 'time:41,node:10,seq:12'",
	"snowseq.epoch = '2010-11-04 01:42:54.657+00'");
@ids = split /\n/, $tw->safe_psql('postgres', 'SELECT snowseq_next() FROM generate_series(1, 5000)');
my $twitter_ms = 1288834974657;
is(scalar(grep { (($_ >> 12) & 1023) != 347 || abs(($_ >> 22) + $twitter_ms - time() * 1000) > 60000 } @ids), 0,
	'Twitter layout: fresh IDs carry node 347 and the present by the Twitter epoch');
ok(strictly_increasing(\@ids) && all_unique(\@ids), 'Twitter layout: increasing, unique');
$tw->stop;

###########################################################################
# 3. Refusals: the server does not start.
###########################################################################
my @bad = (
	[ 'layout with bit settings', [ "snowseq.layout = 'time:39,seq:8,node:16'", 'snowseq.seq_bits = 8' ],
	  qr/snowseq\.layout cannot be combined with snowseq\.time_bits, snowseq\.node_bits or snowseq\.seq_bits/ ],
	[ 'time not first', [ "snowseq.layout = 'seq:8,time:39,node:16'" ],
	  qr/invalid value for parameter "snowseq\.layout": "seq:8,time:39,node:16"\n.*DETAIL:  The time field must come first/ ],
	[ 'field missing', [ "snowseq.layout = 'time:41,node:10'" ],
	  qr/DETAIL:  Field seq is missing: give all of time, node and seq \(node:0 for none\)\./ ],
	[ 'field twice', [ "snowseq.layout = 'time:41,node:10,node:10'" ],
	  qr/DETAIL:  Field node is given twice\./ ],
	[ 'unknown field', [ "snowseq.layout = 'time:41,worker:10,seq:12'" ],
	  qr/DETAIL:  Unknown field "worker": the fields are time, node and seq\./ ],
	[ 'no width', [ "snowseq.layout = 'time,node:10,seq:12'" ],
	  qr/DETAIL:  Field "time" has no width: write name:bits, such as time:41\./ ],
	[ 'bad width', [ "snowseq.layout = 'time:41,node:10,seq:x'" ],
	  qr/DETAIL:  Field seq must have 1 to 31 bits, not "x"\./ ],
	[ 'too wide', [ "snowseq.layout = 'time:42,node:10,seq:12'" ],
	  qr/DETAIL:  The fields add up to 64 bits, at most 63 are allowed\./ ],
	[ 'node id beyond layout', [ "snowseq.layout = 'time:39,seq:8,node:16'", 'snowseq.node_id = 65536' ],
	  qr/snowseq\.node_id = 65536 does not fit in snowseq\.node_bits = 16/ ],
	[ 'backfill node id is the node id', [ 'snowseq.backfill_node_id = 1' ],
	  qr/snowseq\.backfill_node_id = 1 is the node id of this server/ ],
	[ 'backfill node id beyond layout', [ "snowseq.layout = 'time:41,node:5,seq:12'", 'snowseq.backfill_node_id = 32' ],
	  qr/snowseq\.backfill_node_id = 32 does not fit in snowseq\.node_bits = 5/ ],
);
for my $b (@bad)
{
	my ($what, $conf, $re) = @$b;
	(my $name = $what) =~ s/\W+/_/g;
	my $n = snowseq_node("bad_$name", conf => $conf, start => 0);
	ok(!$n->start(fail_ok => 1), "$what: server refuses to start");
	like(slurp_file($n->logfile), $re, "$what: log says why");
}

done_testing();
