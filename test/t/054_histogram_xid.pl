# snowseq_shard_histogram counts as written the rows whose version a
# transaction at or after a first reading's next transaction id wrote: their
# xmin against it, by age(), which is modulo 2^32.  A frozen row keeps its
# xmin; once it is more than 2^31 transactions old its age is negative, and
# such a row is old, not written.  The server is taken past that point
# with pg_resetwal -x (its transaction log segment made first, as
# pg_resetwal's documentation says), in two steps so that the frozen xids of
# the cluster stay young enough for it to take writes.
use strict;
use warnings;
use lib 'test';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

# autovacuum off: nothing but the test freezes a table (past each
# pg_resetwal -x a vacuum against wraparound starts all the same; it changes
# no xmin)
my $node = snowseq_node('main', node_id => 1, conf => [ 'autovacuum = off' ]);
$node->safe_psql('postgres', q{CREATE TABLE h (id bigint PRIMARY KEY);
	INSERT INTO h SELECT (g::bigint << 48) | 1 FROM generate_series(0, 9) g;
	VACUUM (FREEZE) h});

# the histogram of genes 0 to 9, one gene a bucket: rows and rows written
# since $since, each summed
sub histogram
{
	my ($since) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) || ' ' || sum(rows) || ' ' || sum(written) FROM snowseq_shard_histogram('h', 'id', 0, 9, 1, $since)");
}
sub next_xid
{
	return $node->safe_psql('postgres', 'SELECT pg_snapshot_xmax(pg_current_snapshot())');
}

my $since = next_xid();
is(histogram($since), '10 10 0', 'nothing written since the reading: 10 rows, none written');
is(histogram('NULL'), '10 10 10', 'since NULL: every row counts as written');
$node->safe_psql('postgres', q{INSERT INTO h VALUES ((3::bigint << 48) | 2)});
is(histogram($since), '10 11 1', 'a row inserted after the reading is written');
$node->safe_psql('postgres', q{DELETE FROM h WHERE id = (3::bigint << 48) | 2});

# Take the server to the next transaction id that starts segment $segment of
# the transaction status log (segments of 2^20 transactions), with
# pg_resetwal -x, the segment made first
sub jump
{
	my ($segment) = @_;
	my $xid = $segment * 1048576;
	$node->stop;
	my $file = sprintf('%s/pg_xact/%04X', $node->data_dir, $segment);
	open my $fh, '>', $file or die "open $file: $!";
	binmode $fh;
	print $fh "\0" x 262144;
	close $fh;
	command_ok([ 'pg_resetwal', '-x', $xid, $node->data_dir ], "pg_resetwal -x $xid");
	$node->start;
	return $xid;
}

# The rows' xmin must end up more than 2^31 transactions old, every frozen
# xid of the cluster less than that (else it takes no write): 9 x 2^20
# transactions on, every database is frozen (template0 too), then the server
# goes to 2^31 + 2^20
$node->safe_psql('postgres', 'ALTER DATABASE template0 ALLOW_CONNECTIONS true');
jump(9);
$node->safe_psql($_, 'VACUUM (FREEZE)') for qw(postgres template1 template0);
my $xid = jump(2048 + 1);

is($node->safe_psql('postgres', 'SELECT min(age(xmin)) < 0 FROM h'), 't',
	'the frozen rows\' age is negative now');
$since = next_xid();
cmp_ok($since, '>=', $xid, "the next transaction id is past 2^31 ($since)");
is(histogram($since), '10 10 0', 'the old frozen rows are not counted as written');
$node->safe_psql('postgres', q{UPDATE h SET id = id WHERE id = (5::bigint << 48) | 1});
is(histogram($since), '10 10 1', 'a row updated after the reading is');

done_testing();
