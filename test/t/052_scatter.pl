# Scattered writes: a table range-partitioned four ways on
# snowseq_scatter(snowseq_next(), 2) receives the single-row inserts of four
# concurrent clients evenly, each partition 25% +- 5% of 10,000 rows, where
# the same table partitioned by time sends every one of them to its newest
# partition; and so it does for a writer so slow that every ID it gets has
# sequence 0.  The keys come back exactly (snowseq_unscatter), unique, of
# this node, and within each partition they still increase with time.
#
# Whatever a client received counts as issued: the keys are taken from
# psql's output (INSERT ... RETURNING), outside the server.
use strict;
use warnings;
use lib 'test';
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $tmp = $PostgreSQL::Test::Utils::tmp_check;
my $node = snowseq_node('scatter', node_id => 9);

$node->safe_psql('postgres', q{
	CREATE TABLE events (id bigint NOT NULL DEFAULT snowseq_scatter(snowseq_next(), 2),
	                     client int, n int) PARTITION BY RANGE (id);
	CREATE TABLE events_0 PARTITION OF events FOR VALUES FROM (0) TO (1::bigint << 61);
	CREATE TABLE events_1 PARTITION OF events FOR VALUES FROM (1::bigint << 61) TO (2::bigint << 61);
	CREATE TABLE events_2 PARTITION OF events FOR VALUES FROM (2::bigint << 61) TO (3::bigint << 61);
	CREATE TABLE events_3 PARTITION OF events FOR VALUES FROM (3::bigint << 61) TO (MAXVALUE);
	ALTER TABLE events ADD PRIMARY KEY (id);

	-- the same rows partitioned by time, the newest range open-ended
	CREATE TABLE by_time (id bigint NOT NULL DEFAULT snowseq_next(), client int, n int)
		PARTITION BY RANGE (id);
	DO $$ BEGIN
		EXECUTE format('CREATE TABLE by_time_0 PARTITION OF by_time FOR VALUES FROM (MINVALUE) TO (%s)',
		               snowseq_min_id(now() - interval '3 hours'));
		EXECUTE format('CREATE TABLE by_time_1 PARTITION OF by_time FOR VALUES FROM (%s) TO (%s)',
		               snowseq_min_id(now() - interval '3 hours'), snowseq_min_id(now() - interval '2 hours'));
		EXECUTE format('CREATE TABLE by_time_2 PARTITION OF by_time FOR VALUES FROM (%s) TO (%s)',
		               snowseq_min_id(now() - interval '2 hours'), snowseq_min_id(now() - interval '1 hour'));
		EXECUTE format('CREATE TABLE by_time_3 PARTITION OF by_time FOR VALUES FROM (%s) TO (MAXVALUE)',
		               snowseq_min_id(now() - interval '1 hour'));
	END $$;
});

# four clients, 2,500 single-row inserts each, into both tables
my $per = 2500;
my @clients;
for my $i (1 .. 4)
{
	my $script = "$tmp/scatter_$i.sql";
	open my $fh, '>', $script or die "cannot write $script: $!";
	for my $n (1 .. $per)
	{
		print $fh "INSERT INTO events (client, n) VALUES ($i, $n) RETURNING id;\n";
		print $fh "INSERT INTO by_time (client, n) VALUES ($i, $n);\n";
	}
	close $fh;
	my $file = "$tmp/ids_scatter_$i.txt";
	my $err = '';
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-At', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'), '-f', $script ],
		'>', $file, '2>', \$err);
	push @clients, [ $h, $file, \$err ];
}
is(wait_clients(\@clients), 0, 'four clients inserted 2,500 rows each');

# the spread
my @counts = split /\n/, $node->safe_psql('postgres',
	'SELECT tableoid::regclass || \' \' || count(*) FROM events GROUP BY tableoid ORDER BY 1');
note 'scattered: ' . join(', ', @counts);
is(scalar(@counts), 4, 'the scattered table has rows in all four partitions');
for my $c (@counts)
{
	my ($part, $n) = split / /, $c;
	ok($n >= 2000 && $n <= 3000, "$part holds $n of 10,000 rows: 25% +- 5%");
}
my $by_time = $node->safe_psql('postgres',
	'SELECT string_agg(tableoid::regclass || \' \' || n, \', \' ORDER BY tableoid::regclass::text)
	   FROM (SELECT tableoid, count(*) AS n FROM by_time GROUP BY tableoid) t');
is($by_time, 'by_time_3 10000', 'partitioned by time, every insert went to the newest partition');

# a quiet writer, one insert per millisecond or less: each of its IDs is the first of
# its millisecond, sequence 0, and still they spread (a plain rotation of
# the low bits would put every one of them into events_0)
$node->safe_psql('postgres', q{
	DO $$ BEGIN
		FOR i IN 1 .. 4000 LOOP
			INSERT INTO events (client, n) VALUES (5, i);
			PERFORM pg_sleep(0.001);
		END LOOP;
	END $$});
@counts = split /\n/, $node->safe_psql('postgres',
	'SELECT tableoid::regclass || \' \' || count(*) FROM events WHERE client = 5 GROUP BY tableoid ORDER BY 1');
note 'quiet writer: ' . join(', ', @counts);
is($node->safe_psql('postgres', q{SELECT count(*) FROM events WHERE client = 5 AND (snowseq_unscatter(id, 2) & 4095) = 0}),
	4000, 'the quiet writer\'s IDs all have sequence 0');
is(scalar(@counts), 4, 'its rows are in all four partitions');
for my $c (@counts)
{
	my ($part, $n) = split / /, $c;
	ok($n >= 800 && $n <= 1200, "$part holds $n of its 4,000 rows: 25% +- 5%");
}

# the keys: unique as received (not increasing: that is the point), the IDs
# behind them unique, of this node, increasing within each client; within
# each partition the scattered keys increase in the order they were inserted
my @all = map { read_ids($_->[1]) } @clients;
is(scalar(@all), 10_000, 'every insert returned its key');
ok(all_unique(\@all), 'no key received twice');
is($node->safe_psql('postgres', q{
	SELECT count(DISTINCT snowseq_unscatter(id, 2)) = 14000
	   AND bool_and(snowseq_node(snowseq_unscatter(id, 2)) = 9)
	   AND bool_and(snowseq_scatter(snowseq_unscatter(id, 2), 2) = id) FROM events}),
	't', 'the IDs come back exactly: unique, this node\'s');
is($node->safe_psql('postgres', q{
	SELECT bool_and(ok) FROM (
		SELECT snowseq_unscatter(id, 2) > lag(snowseq_unscatter(id, 2)) OVER w AS ok FROM events
		WINDOW w AS (PARTITION BY client ORDER BY n)) t WHERE ok IS NOT NULL}),
	't', 'each client\'s IDs increase in the order it inserted them');
is($node->safe_psql('postgres', q{
	SELECT bool_and(ok) FROM (
		SELECT id > lag(id) OVER w AS ok FROM events
		WINDOW w AS (PARTITION BY tableoid, client ORDER BY n)) t WHERE ok IS NOT NULL}),
	't', 'within each partition, keys increase with time (each index appends)');

$node->stop;
done_testing();
