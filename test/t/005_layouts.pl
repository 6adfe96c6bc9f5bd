# Layouts at their edges: every limit is computed without overflow, the end
# of the time field is loud long before and after it comes, and layouts of
# fewer than 63 bits (IDs that JavaScript numbers hold exactly) work
# throughout.  Also: a state file that cannot be read says why.
use strict;
use warnings;
use lib 'test';
use POSIX qw(strftime);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

# An instant $days days ago, as a UTC timestamp string.
sub days_ago
{
	my ($days) = @_;
	return strftime('%Y-%m-%d %H:%M:%S+00', gmtime(time() - $days * 86400));
}

# A node with a layout; returns it started (the extension created).
sub layout_node
{
	my ($name, @conf) = @_;
	return snowseq_node($name, node_id => 0, conf => [ "timezone = 'UTC'", @conf ]);
}

###########################################################################
# 1. 32/0/31: 32 bits of milliseconds last 49.7 days.  With an epoch 120
#    days back, (now - epoch) << 31 wraps 64 bits; the time field has run
#    out, and generating must say so rather than issue IDs of the past.
###########################################################################
{
	my $n = layout_node('ran_out', 'snowseq.time_bits = 32', 'snowseq.node_bits = 0',
		'snowseq.seq_bits = 31', "snowseq.epoch = '" . days_ago(120) . "'");
	like(slurp_file($n->logfile), qr/WARNING:  the snowseq time field has run out: snowseq_next\(\) will fail/,
		'32/0/31, epoch 120 days back: the start warns that the time field has run out');
	my ($rc, $out, $err) = $n->psql('postgres', 'SELECT snowseq_next()');
	like($err, qr/ERROR:  snowseq time field ran out at \d{4}-/, 'snowseq_next() is an ERROR, not an ID of the past');
	is($out, '', 'no ID was returned');
	($rc, $out, $err) = $n->psql('postgres', "SELECT snowseq_gene_next('k') > 0");
	is($out, 't', 'gene IDs, which have no time field, are still issued');
	is($n->safe_psql('postgres', "SELECT lifetime_left = interval '0' FROM snowseq_status"), 't',
		'snowseq_status shows no lifetime left');
	$n->stop;
}

###########################################################################
# 2. 62/0/1 at 1 ms: the time field outlives the timestamp type; decoding
#    an ID past year 294276 is an ERROR, not a time before the epoch.
###########################################################################
{
	my $n = layout_node('wide', 'snowseq.time_bits = 62', 'snowseq.node_bits = 0', 'snowseq.seq_bits = 1');
	my ($rc, $out, $err) = $n->psql('postgres', 'SELECT snowseq_time(9223372036854775807)');
	like($err, qr/ERROR:  snowseq time field value \d+ is beyond the timestamp range/,
		'62/0/1: snowseq_time of the largest ID is an ERROR');
	($rc, $out, $err) = $n->psql('postgres', 'SELECT (snowseq_parse(9223372036854775807)).ts');
	like($err, qr/beyond the timestamp range/, '62/0/1: so is snowseq_parse');
	is($n->safe_psql('postgres',
			"SELECT abs(extract(epoch FROM snowseq_time(id) - now())) < 5
			    AND id BETWEEN snowseq_min_id(snowseq_time(id)) AND snowseq_max_id(snowseq_time(id))
			   FROM snowseq_next() id"), 't',
		'62/0/1: a fresh ID decodes to now and lies within the bounds of its instant');
	is($n->safe_psql('postgres', "SELECT time_field_ends IS NULL AND lifetime_left IS NULL FROM snowseq_status"), 't',
		'62/0/1: the time field ends past what a timestamp holds (NULL)');
	$n->stop;
}

###########################################################################
# 3. 53 bits, 41/5/7 at 1 ms: IDs below 2^53 that JavaScript numbers hold
#    exactly, 69.7 years, 128,000 IDs per second per node, 32 nodes.
###########################################################################
{
	my $n = layout_node('js53', 'snowseq.time_bits = 41', 'snowseq.node_bits = 5', 'snowseq.seq_bits = 7',
		'snowseq.node_id = 31');
	my $r = $n->safe_psql('postgres', q{
		CREATE TABLE ids AS SELECT n, snowseq_next() AS id FROM generate_series(1, 200000) n;
		SELECT count(DISTINCT id), bool_and(id > 0 AND id < 2^53), bool_and(snowseq_node(id) = 31),
		       bool_and(id::float8::bigint = id)
		FROM ids});
	is($r, '200000|t|t|t', '53-bit layout: 200,000 IDs, unique, below 2^53, exact as float8, node 31');
	is($n->safe_psql('postgres', 'SELECT bool_and(id > prev) FROM (SELECT id, lag(id) OVER (ORDER BY n) prev FROM ids) s WHERE prev IS NOT NULL'),
		't', '53-bit layout: strictly increasing');
	# a batch of 1,000 spans 8 time units of 128 IDs at once, whatever the
	# speed of the machine (200,000 single calls borrow only if some
	# millisecond holds more than 128 of them)
	is($n->safe_psql('postgres', 'SELECT count(*) FROM snowseq_next_n(1000)'), '1000', '53-bit layout: a batch of 1,000');
	cmp_ok($n->safe_psql('postgres', 'SELECT overflow_borrows FROM snowseq_status'), '>', 0,
		'53-bit layout: a batch of 1,000 IDs borrowed time (128 per ms)');
	is($n->safe_psql('postgres', q{
		SELECT snowseq_max_id('2094-09-07 15:47:35.551+00') = 2^53 - 1,
		       snowseq_min_id('2025-01-01 00:00:01+00') = 1000::bigint << 12,
		       (snowseq_parse((1000::bigint << 12) | (31 << 7) | 5)).*}),
		't|t|2025-01-01 00:00:01+00|31|5', '53-bit layout: bounds and parse');
	my ($rc, $out, $err) = $n->psql('postgres', "SELECT snowseq_min_id('2094-09-07 15:47:35.552+00')");
	like($err, qr/is past the end of the snowseq time field at 2094-09-07 15:47:35\.552\+00/,
		'53-bit layout: the end of the time field is an ERROR naming it');
	is($n->safe_psql('postgres', "SELECT time_field_ends, extract(year FROM lifetime_left) >= 0 FROM snowseq_status"),
		'2094-09-07 15:47:35.552+00|t', '53-bit layout: snowseq_status shows where the time field ends');
	$n->stop;
}

###########################################################################
# 4. Less than a year left: a WARNING at start, the lifetime in status.
###########################################################################
{
	# 35 bits of ms: 397.7 days; the epoch 200 days back leaves 197.7
	my $n = layout_node('short', 'snowseq.time_bits = 35', 'snowseq.node_bits = 10', 'snowseq.seq_bits = 12',
		"snowseq.epoch = '" . days_ago(200) . "'");
	like(slurp_file($n->logfile), qr/WARNING:  the snowseq time field runs out in 197 days/,
		'less than a year left: the start warns how many days remain');
	my $left = $n->safe_psql('postgres', 'SELECT extract(epoch FROM lifetime_left) / 86400 FROM snowseq_status');
	ok($left > 197 && $left < 198, "snowseq_status.lifetime_left is 197.x days ($left)");
	$n->stop;
}

###########################################################################
# 5. A state file that cannot be read (here: a directory) says why.
###########################################################################
{
	my $n = layout_node('unreadable');
	$n->safe_psql('postgres', 'SELECT snowseq_next()');
	$n->stop;
	for my $f ('snowseq.state', 'snowseq.state.copy')
	{
		my $p = $n->data_dir . "/$f";
		unlink $p or die "cannot remove $p: $!";
		mkdir $p or die "cannot create $p: $!";
	}
	$n->start;
	like(slurp_file($n->logfile), qr/snowseq state file "snowseq.state" is corrupt, no ID will be generated\n.*DETAIL:  Could not read file "snowseq.state": Is a directory\./,
		'a state file that is a directory: the start says it could not be read and why');
	my ($rc, $out, $err) = $n->psql('postgres', 'SELECT snowseq_next()');
	like($err, qr/DETAIL:  Could not read file "snowseq.state": Is a directory\./, 'and so does snowseq_next()');
	$n->stop;
}

done_testing();
