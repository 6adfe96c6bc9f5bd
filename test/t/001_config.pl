# Configuration: missing preload, unset node id, and settings that must stop
# the server from starting.
use strict;
use warnings;
use lib 'test';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

# not preloaded: every generating function says what to add
my $np = snowseq_node('not_preloaded', preload => 0);
for my $f ('snowseq_next()', 'snowseq_next_n(3)', "snowseq_gene_next('k')", 'snowseq_status()')
{
	my ($rc, $out, $err) = $np->psql('postgres', "SELECT $f");
	like($err, qr/snowseq must be loaded via shared_preload_libraries.*\n.*HINT:.*Add snowseq to shared_preload_libraries/s,
		"not preloaded: $f names shared_preload_libraries and hints");
}
is($np->safe_psql('postgres', 'SELECT 1'), '1', 'not preloaded: server still up');
$np->stop;

# node id unset: ERROR naming snowseq.node_id
my $nu = snowseq_node('node_unset', node_id => undef);
my ($rc, $out, $err) = $nu->psql('postgres', 'SELECT snowseq_next()');
like($err, qr/snowseq\.node_id is not set/, 'node id unset: ERROR names snowseq.node_id');
($rc, $out, $err) = $nu->psql('postgres', "SELECT snowseq_gene_next(1::bigint)");
like($err, qr/snowseq\.node_id is not set/, 'node id unset: gene IDs refuse too');
$nu->stop;

# settings that must keep the server from starting, with a clear log line
my @bad = (
	[ 'layout sum', [ 'snowseq.time_bits = 41', 'snowseq.node_bits = 10', 'snowseq.seq_bits = 13' ],
	  qr/snowseq layout adds up to 64 bits, at most 63 are allowed/ ],
	[ 'node id out of range', [ 'snowseq.node_bits = 10', 'snowseq.node_id = 1024' ],
	  qr/snowseq\.node_id = 1024 does not fit in snowseq\.node_bits = 10/ ],
	[ 'negative node id', [ 'snowseq.node_id = -5' ],
	  qr/-5 is outside the valid range for parameter "snowseq\.node_id"/ ],
	[ 'node id not a number', [ "snowseq.node_id = 'seven'" ],
	  qr/invalid value for parameter "snowseq\.node_id": "seven"/ ],
	[ 'time unit too long', [ 'snowseq.time_unit_ms = 100000000' ],
	  qr/100000000 ms is outside the valid range for parameter "snowseq\.time_unit_ms"/ ],
	[ 'lead negative', [ 'snowseq.max_lead_ms = -1' ],
	  qr/-1 ms is outside the valid range for parameter "snowseq\.max_lead_ms"/ ],
	# an integer setting with a fraction is not rounded to another value
	[ 'node id with a fraction', [ 'snowseq.node_id = 1.5' ],
	  qr/invalid value for parameter "snowseq\.node_id": "1\.5"\n.*DETAIL:  snowseq\.node_id takes a whole number, and PostgreSQL would round 1\.5 to 2\.\n.*HINT:  Set snowseq\.node_id to a whole number\./ ],
	[ 'lead with a fraction of a ms', [ 'snowseq.max_lead_ms = 2.5' ],
	  qr/invalid value for parameter "snowseq\.max_lead_ms": "2\.5"\n.*DETAIL:  snowseq\.max_lead_ms takes a whole number of milliseconds/ ],
	[ 'counters with a fraction', [ 'snowseq.max_counters = 10.4' ],
	  qr/invalid value for parameter "snowseq\.max_counters": "10\.4"/ ],
	[ 'version bits with a fraction', [ 'snowseq.public_version_bits = 5.5' ],
	  qr/invalid value for parameter "snowseq\.public_version_bits": "5\.5"/ ],
	[ 'epoch unparseable', [ "snowseq.epoch = 'not a time'" ],
	  qr/invalid value for parameter "snowseq\.epoch": "not a time"\n.*DETAIL:  invalid input syntax for type timestamp with time zone/ ],
	[ 'epoch in the future', [ "snowseq.epoch = '2999-01-01 00:00:00+00'" ],
	  qr/invalid value for parameter "snowseq\.epoch": "2999-01-01 00:00:00\+00"\n.*DETAIL:  The epoch is in the future\./ ],
	[ 'epoch now', [ "snowseq.epoch = 'now'" ],
	  qr/invalid value for parameter "snowseq\.epoch": "now"\n.*DETAIL:  "now" is relative to the moment it is read; an epoch must be a fixed instant\./ ],
	[ 'epoch yesterday', [ "snowseq.epoch = 'yesterday'" ],
	  qr/invalid value for parameter "snowseq\.epoch": "yesterday"\n.*DETAIL:  "yesterday" is relative/ ],
	[ 'epoch infinite', [ "snowseq.epoch = '-infinity'" ],
	  qr/invalid value for parameter "snowseq\.epoch": "-infinity"\n.*DETAIL:  An epoch must be a finite timestamp\./ ],
);
for my $b (@bad)
{
	my ($what, $conf, $re) = @$b;
	(my $name = $what) =~ s/\W+/_/g;
	my $n = snowseq_node("bad_$name", conf => $conf, start => 0);
	my $started = $n->start(fail_ok => 1);
	ok(!$started, "$what: server refuses to start");
	like(slurp_file($n->logfile), $re, "$what: log says why");
}

# a value with a fraction in a larger unit that is a whole number of ms
# passes (1.5 s is 1500 ms), as PostgreSQL's own settings take it
{
	my $n = snowseq_node('lead_in_seconds', conf => [ "snowseq.max_lead_ms = '1.5s'" ]);
	is($n->safe_psql('postgres', 'SHOW snowseq.max_lead_ms'), '1500ms', "max_lead_ms = '1.5s' runs as 1500 ms");
	$n->stop;
}

# an epoch before 1970 whose time field has run out: the server starts (as
# for any epoch) and says so in the log; 41 bits of 1 ms from 1900 ended in
# 1969.  (The end used to be computed with a signed overflow for epochs
# before 1970, and the warning was skipped.)
{
	my $n = snowseq_node('epoch_1900', conf => [ "snowseq.epoch = '1900-01-01 00:00:00+00'" ]);
	like(slurp_file($n->logfile), qr/WARNING:  the snowseq time field has run out: snowseq_next\(\) will fail/,
		'epoch 1900: the log warns that the time field has run out');
	$n->stop;
}

# an epoch before 1970 whose time field runs out within the year warns a
# year ahead, as for any epoch: 41 bits of 1 ms end 100 days from now
{
	my $end = time() + 100 * 86400;
	my @t = gmtime($end - 2**41 / 1000);
	my $epoch = sprintf('%04d-%02d-%02d %02d:%02d:%02d+00', $t[5] + 1900, $t[4] + 1, @t[ 3, 2, 1, 0 ]);
	my $n = snowseq_node('epoch_before_1970', conf => [ "snowseq.epoch = '$epoch'" ]);
	like(slurp_file($n->logfile), qr/WARNING:  the snowseq time field runs out in (99|100) days/,
		"epoch $epoch: the log warns that the time field runs out in 100 days");
	$n->stop;
}

# the layouts README lists all start and generate
for my $l ([ 'sonyflake', 39, 16, 8, 10 ], [ 'uidgen', 28, 22, 13, 1000 ], [ 'instagram', 40, 13, 10, 1 ])
{
	my ($name, $t, $nb, $s, $u) = @$l;
	my $n = snowseq_node("layout_$name", node_id => 3,
		conf => [ "snowseq.time_bits = $t", "snowseq.node_bits = $nb", "snowseq.seq_bits = $s",
				  "snowseq.time_unit_ms = $u" ]);
	my $r = $n->safe_psql('postgres',
		'SELECT p.node, p.ts <= now() + interval \'2 s\' FROM snowseq_parse(snowseq_next()) p');
	is($r, '3|t', "$name layout ($t/$nb/$s at $u ms) generates IDs that parse back");
	$n->stop;
}

done_testing();
