# snowseq_convert() on a table that is being written to.
#
# 1. Three clients insert rows (through the partitioned parent, and straight
#    into a partition) while the table is converted from bigserial: no
#    insert fails, no key is issued twice, and every key issued after the
#    switch is a snowflake ID above every key issued before it.
# 2. A row inserted straight into a partition by a transaction still open
#    when the conversion starts counts: the conversion waits for it, and
#    refuses when its key is ahead of the clock, or stays above it when the
#    clock has passed it by then.
#
# Whatever a client received counts as issued: the keys are taken from
# psql's output (INSERT ... RETURNING), outside the server.
use strict;
use warnings;
use lib 'test';
use IPC::Run ();
use Time::HiRes qw(time usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $timeout = $PostgreSQL::Test::Utils::timeout_default;
my $tmp = $PostgreSQL::Test::Utils::tmp_check;
my $node = snowseq_node('convert', node_id => 5);

# A client inserting rows with $sql, one statement at a time, until a row
# appears in table stop (or $max statements); its output and errors kept.
sub insert_client
{
	my ($tag, $sql, $max) = @_;
	my $script = "$tmp/convert_$tag.sql";
	open my $fh, '>', $script or die "cannot write $script: $!";
	print $fh "SELECT NOT EXISTS (SELECT FROM stop) AS go \\gset\n\\if :go\n$sql;\n\\else\n\\q\n\\endif\n"
	  for 1 .. $max;
	close $fh;
	my $file = "$tmp/ids_convert_$tag.txt";
	my $err = '';
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-At', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'), '-f', $script ],
		'>', $file, '2>', \$err, IPC::Run::timeout(4 * $timeout));
	return [ $h, $file, \$err ];
}

# One statement in a psql of its own, started now, finished by wait_clients.
sub async_psql
{
	my ($tag, $sql) = @_;
	my $file = "$tmp/out_convert_$tag.txt";
	my $err = '';
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-At', '-q', '-d', $node->connstr('postgres'), '-c', $sql ],
		'>', $file, '2>', \$err, IPC::Run::timeout(2 * $timeout));
	return [ $h, $file, \$err ];
}

# Wait until a backend running a statement like $pattern waits for a lock.
sub wait_for_lock_wait
{
	my ($pattern) = @_;
	my $deadline = time() + $timeout;
	while (time() < $deadline)
	{
		return 1 if $node->safe_psql('postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '$pattern'") > 0;
		usleep(20_000);
	}
	return 0;
}

# The value of a file, once written.
sub slurp_trimmed
{
	my ($file) = @_;
	my $s = -e $file ? slurp_file($file) : '';
	$s =~ s/\s+\z//;
	return $s;
}

###########################################################################
# 1. Converting under concurrent inserts.
###########################################################################

$node->safe_psql('postgres', q{
	CREATE TABLE orders (id bigserial, region int NOT NULL, src text) PARTITION BY LIST (region);
	CREATE TABLE orders_1 PARTITION OF orders FOR VALUES IN (1);
	CREATE TABLE orders_2 PARTITION OF orders FOR VALUES IN (2);
	ALTER TABLE orders ADD PRIMARY KEY (id, region);
	INSERT INTO orders (region, src) SELECT 1 + g % 2, 'preload' FROM generate_series(1, 10000) g;
});

# the clients insert until told to stop: after the conversion, once each
# has inserted rows on both sides of it
$node->safe_psql('postgres', 'CREATE TABLE stop ()');
my $clients = [
	insert_client('parent_1', "INSERT INTO orders (region, src) VALUES (1, 'parent_1') RETURNING id", 30_000),
	insert_client('parent_2', "INSERT INTO orders (region, src) VALUES (2, 'parent_2') RETURNING id", 30_000),
	insert_client('partition', "INSERT INTO orders_2 (region, src) VALUES (2, 'partition') RETURNING id", 30_000),
];
my $deadline = time() + $timeout;
usleep(10_000) until (!grep { scalar(read_ids($_->[1])) < 200 } @$clients) || time() > $deadline;
my $result = $node->safe_psql('postgres', "SELECT snowseq_convert('orders', 'id')");
note $result;
my ($switch) = $result =~ /new IDs above (\d+)$/;
usleep(10_000)
  until (!grep { scalar(grep { $_ > $switch } read_ids($_->[1])) < 200 } @$clients) || time() > $deadline;
$node->safe_psql('postgres', 'INSERT INTO stop DEFAULT VALUES');
is(wait_clients($clients), 0, 'every client inserted rows until told to stop');
is(join('', map { ${ $_->[2] } } @$clients), '', 'no client got an error (no duplicate key, no failed insert)');

my ($old_max) = $result =~ /values up to (\d+),/;
ok(defined $old_max, 'the conversion says the largest key it found');
my $all = check_ids($clients, 'keys received across the conversion');
is($node->safe_psql('postgres', "SELECT count(*) FROM orders WHERE src <> 'preload'"), scalar(@$all),
	'every insert returned its key');
my @old = grep { $_ <= $old_max } @$all;
my @new = grep { $_ > $old_max } @$all;
note scalar(@old) . ' keys from the sequence, ' . scalar(@new) . ' from snowseq_next()';
for my $c (@$clients)
{
	my @ids = read_ids($c->[1]);
	my ($tag) = $c->[1] =~ /ids_convert_(\w+)\.txt$/;
	ok((grep { $_ <= $old_max } @ids) && (grep { $_ > $old_max } @ids),
		"client $tag inserted before and after the switch");
}
cmp_ok(max_of(@old), '<', min_of(@new), 'every key issued after the switch is above every key before it');
is($node->safe_psql('postgres', 'SELECT max(id) FROM orders WHERE id < 1000000000000000'), $old_max,
	'the largest key before the switch is the one the conversion found (nothing slipped in)');
my $bad = $node->safe_psql('postgres', "SELECT count(*) FROM orders WHERE id > $old_max
	AND (snowseq_node(id) <> 5 OR snowseq_time(id) NOT BETWEEN now() - interval '5 minutes' AND now() + interval '1 minute')");
is($bad, 0, 'every key after the switch is a snowflake ID of this node, of now');
is($node->safe_psql('postgres', 'SELECT count(*) = count(DISTINCT id) AND count(*) = 10000 + ' . scalar(@$all) . ' FROM orders'),
	't', 'the table holds every row once');

###########################################################################
# 2. A transaction still open when the conversion starts, with a row put
#    straight into a partition (so it holds no lock on the parent).
###########################################################################

$node->safe_psql('postgres', q{
	CREATE TABLE t2 (id bigserial, region int NOT NULL) PARTITION BY LIST (region);
	CREATE TABLE t2_1 PARTITION OF t2 FOR VALUES IN (1);
	CREATE TABLE t2_2 PARTITION OF t2 FOR VALUES IN (2);
	INSERT INTO t2 (region) SELECT 1 FROM generate_series(1, 100);
});

# its key an hour ahead of the clock (however slow the machine, the clock
# does not get there during the test): the conversion waits for it, then
# refuses.
# (The first insert into a partition in a session also locks the parent,
# to read the partition bounds; later ones do not.  The writer has done
# one already, so only a lock on the partition itself makes the conversion
# wait.)
my $writer = $node->background_psql('postgres');
$writer->query_safe('BEGIN; INSERT INTO t2_2 (region) VALUES (2); ROLLBACK');
my $ahead = $writer->query_safe(
	'BEGIN; INSERT INTO t2_2 (id, region) VALUES (snowseq_next() + (3600000::bigint << 22), 2) RETURNING id');
my $conv = async_psql('ahead', "SELECT snowseq_convert('t2', 'id')");
ok(wait_for_lock_wait('SELECT snowseq_convert%'), 'the conversion waits for the open transaction');
$writer->query_safe('COMMIT');
wait_clients([$conv]);
like(${ $conv->[2] }, qr/ERROR:  column "id" of table "t2" holds values up to $ahead, above the IDs snowseq issues now/,
	'once it commits, the conversion sees its key and refuses: the key is ahead of the clock');
is($node->safe_psql('postgres', "SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef WHERE adrelid = 't2'::regclass"),
	"nextval('t2_id_seq'::regclass)", 'the table was left as it was');

# its key 0.5 s ahead, committed once the clock has passed it (the test
# takes IDs until one is above the key): the conversion, waiting meanwhile,
# counts it and every new key is above it
$node->safe_psql('postgres', "DELETE FROM t2 WHERE id = $ahead");
$ahead = $writer->query_safe(
	'BEGIN; INSERT INTO t2_2 (id, region) VALUES (snowseq_next() + (500::bigint << 22), 2) RETURNING id');
$conv = async_psql('passed', "SELECT snowseq_convert('t2', 'id')");
ok(wait_for_lock_wait('SELECT snowseq_convert%'), 'a second conversion waits too');
ok($node->poll_query_until('postgres', "SELECT snowseq_next() > $ahead", 't'), 'the clock passes the key');
$writer->query_safe('COMMIT');
$writer->quit;
is(wait_clients([$conv]), 0, 'once it commits, the conversion succeeds (the clock has passed the key)');
like(slurp_trimmed($conv->[1]), qr/values up to $ahead, new IDs above \d+$/,
	'it found the key of the transaction it waited for');
my $next = $node->safe_psql('postgres', 'INSERT INTO t2_2 (region) VALUES (2) RETURNING id');
cmp_ok($next, '>', $ahead, 'a key inserted into the partition afterwards is above it');

$node->stop;
done_testing();
