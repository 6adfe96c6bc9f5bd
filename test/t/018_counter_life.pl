# Named counters and serials over their whole life: a value a client
# received is never issued again, whatever happens to the definition, the
# extension or the database.
#   1. DROP EXTENSION / CREATE EXTENSION, then the counter re-created with
#      another start, the serial with another start (issue 17, item 1)
#   2. pg_dump / restore into the same cluster and into another one, with a
#      transaction that took values still open while the dump runs: the
#      restored counter and serial continue above everything the source had
#      issued, with no manual step (item 2)
#   3. a serial crossing midnight, then a clean restart and a crash: its
#      next number is small and fits its digits (item 6)
#   4. counter places are taken at creation; those of a dropped database and
#      of dropped counters are freed when needed, so snowseq.max_counters
#      never runs out for good (item 8)
# Every value is read from psql's output: whatever a client received
# counts as issued.
use strict;
use warnings;
use lib 'test';
use Time::HiRes qw(time usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $tmp = $PostgreSQL::Test::Utils::tmp_check;

sub lines { return grep { length } split /\n/, $_[0]; }

# Values seen more than once in the lists given.
sub dups
{
	my %s;
	$s{$_}++ for @_;
	return grep { $s{$_} > 1 } sort keys %s;
}

sub take_counter
{
	my ($node, $db, $name, $n) = @_;
	return lines($node->safe_psql($db, "SELECT snowseq_counter_next('$name') FROM generate_series(1, $n)"));
}

sub take_serial
{
	my ($node, $db, $name, $n) = @_;
	return lines($node->safe_psql($db, "SELECT snowseq_serial('$name') FROM generate_series(1, $n)"));
}

###########################################################################
# 1. DROP EXTENSION / CREATE EXTENSION, definitions changed (a lower
#    start: what the reservation counts would map to old values)
###########################################################################

my $node = snowseq_node('life', node_id => 1, conf => [ "timezone = 'UTC'" ]);
$node->safe_psql('postgres', q{
	SELECT snowseq_create_counter('z', start => 100);
	SELECT snowseq_create_serial('inv', 'INV-######', start => 51);
});
my @z = take_counter($node, 'postgres', 'z', 100);
my @inv = take_serial($node, 'postgres', 'inv', 50);
is("$z[0]..$z[-1]", '100..199', 'extension: counter z issued 100..199');
$node->safe_psql('postgres', 'DROP EXTENSION snowseq; CREATE EXTENSION snowseq;');
$node->safe_psql('postgres', q{
	SELECT snowseq_create_counter('z', start => 0);
	SELECT snowseq_create_serial('inv', 'INV-######', start => 1);
});
my @z2 = take_counter($node, 'postgres', 'z', 100);
my @inv2 = take_serial($node, 'postgres', 'inv', 50);
my @d = dups(@z, @z2);
is(scalar(@d), 0, 'extension: counter z re-created with start 0 issues none of its values again (' .
	scalar(@d) . " repeated, first new $z2[0])");
@d = dups(@inv, @inv2);
is(scalar(@d), 0, 'extension: serial re-created with another start issues none of its numbers again (' .
	scalar(@d) . " of 50 repeated, first new $inv2[0])");

# the same after a crash: the positions are durable
$node->stop('immediate');
$node->start;
my @z3 = take_counter($node, 'postgres', 'z', 100);
my @inv3 = take_serial($node, 'postgres', 'inv', 50);
is(scalar(dups(@z, @z2, @z3)), 0, 'extension: after a crash still no counter value twice');
is(scalar(dups(@inv, @inv2, @inv3)), 0, 'extension: after a crash still no serial twice');

###########################################################################
# 2. pg_dump / restore, same cluster and another one
###########################################################################

$node->safe_psql('postgres', 'CREATE DATABASE shop');
$node->safe_psql('shop', q{
	CREATE EXTENSION snowseq;
	SELECT snowseq_create_counter('orders', start => 1000, nodes => 2);
	SELECT snowseq_create_serial('rcpt', 'R-YYYY-########');
	CREATE TABLE orders (n bigint PRIMARY KEY);
});
my @orders = take_counter($node, 'shop', 'orders', 3000);
my @rcpt = take_serial($node, 'shop', 'rcpt', 3000);

# a transaction takes values and stays open while pg_dump runs
my $open = $node->background_psql('shop');
$open->query_safe('BEGIN');
push @orders, lines($open->query_safe("SELECT snowseq_counter_next('orders') FROM generate_series(1, 5000)"));
push @rcpt, lines($open->query_safe("SELECT snowseq_serial('rcpt') FROM generate_series(1, 5000)"));
my $dump = "$tmp/life.dump";
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('shop') ],
	'dump: pg_dump while a transaction that took values is open');
$open->query_safe('ROLLBACK');
$open->quit;
is(scalar(@orders), 8000, 'dump: the source issued 8,000 counter values');

$node->safe_psql('postgres', 'CREATE DATABASE shop_copy');
$node->command_ok([ 'pg_restore', '-d', $node->connstr('shop_copy'), $dump ], 'dump: restored into the same cluster');
my @copy_orders = take_counter($node, 'shop_copy', 'orders', 1000);
my @copy_rcpt = take_serial($node, 'shop_copy', 'rcpt', 1000);
@d = dups(@orders, @copy_orders);
is(scalar(@d), 0, 'dump, same cluster: the restored counter issues nothing the source issued (' .
	scalar(@d) . " repeated, first $copy_orders[0])");
@d = dups(@rcpt, @copy_rcpt);
is(scalar(@d), 0, 'dump, same cluster: the restored serial issues nothing the source issued (' .
	scalar(@d) . " repeated, first $copy_rcpt[0])");

my $other = snowseq_node('life_other', node_id => 1, extension => 0, conf => [ "timezone = 'UTC'" ]);
$other->safe_psql('postgres', 'CREATE DATABASE shop');
$other->command_ok([ 'pg_restore', '-d', $other->connstr('shop'), $dump ], 'dump: restored into another cluster');
my @other_orders = take_counter($other, 'shop', 'orders', 1000);
my @other_rcpt = take_serial($other, 'shop', 'rcpt', 1000);
@d = dups(@orders, @other_orders);
is(scalar(@d), 0, 'dump, another cluster: the restored counter continues above the source (' .
	scalar(@d) . " repeated, first $other_orders[0])");
@d = dups(@rcpt, @other_rcpt);
is(scalar(@d), 0, 'dump, another cluster: the restored serial continues above the source (' .
	scalar(@d) . " repeated, first $other_rcpt[0])");
ok(!(grep { $_ % 2 != 1 } @other_orders), 'dump, another cluster: node 1 of 2 keeps its odd values');
# and after a restart of the restored cluster
$other->restart;
my @other_orders2 = take_counter($other, 'shop', 'orders', 100);
is(scalar(dups(@orders, @other_orders, @other_orders2)), 0, 'dump, another cluster: and after its restart');
$other->stop;

###########################################################################
# 3. A serial across midnight, then a restart: blocks follow the real rate
###########################################################################

my $ft = "$tmp/life_faketime";
set_fake_offset($ft, '+0');
my $mid = snowseq_node('life_midnight', node_id => 1, faketime => $ft,
	conf => [ "timezone = 'UTC'", 'snowseq.segment_block_min = 10' ]);
$mid->safe_psql('postgres', "SELECT snowseq_create_serial('daily', 'D-YYYYMMDD-######')");
my $to_midnight = 86400 - (time() % 86400);
set_fake_offset($ft, sprintf('+%ds', $to_midnight - 2));
my @daily;
my %days;
my $deadline = time() + 60;
# take serials until the day changed and 500 more were taken in the new day
while (time() < $deadline)
{
	push @daily, take_serial($mid, 'postgres', 'daily', 50);
	%days = ();
	$days{ (/^D-(\d{8})-/)[0] }++ for @daily;
	last if keys(%days) == 2 && $days{ (sort keys %days)[1] } >= 500;
}
is(scalar(keys %days), 2, 'midnight: the serials fall in two days (' . join(', ', sort keys %days) . ')');
my $block = $mid->safe_psql('postgres', "SELECT block FROM snowseq_reservations WHERE kind = 'daily'");
cmp_ok($block, '<', 1000000, "midnight: the block follows the rate, not the period's jump ($block)");

sub next_after
{
	my ($how) = @_;
	my ($ret, $out, $err) = $mid->psql('postgres', "SELECT snowseq_serial('daily')");
	is($ret, 0, "midnight: after a $how the serial issues a number" . ($err ? " ($err)" : ''));
	my ($n) = ($out // '') =~ /-(\d+)$/;
	cmp_ok($n // 1e12, '<', 100000, "midnight: after a $how the number is small (" . ($out // '') . ')');
	push @daily, $out if $ret == 0;
}
$mid->stop;
start_faketime($mid, $ft);
next_after('clean restart');
$mid->stop('immediate');
start_faketime($mid, $ft);
next_after('crash');
is(scalar(dups(@daily)), 0, 'midnight: no serial twice across the switch and the restarts');
$mid->stop;

###########################################################################
# 4. Places: taken at creation, freed with their database
###########################################################################

my $small = snowseq_node('life_places', node_id => 1, conf => [ 'snowseq.max_counters = 2' ]);
$small->safe_psql('postgres', 'CREATE DATABASE a');
$small->safe_psql('a', q{
	CREATE EXTENSION snowseq;
	SELECT snowseq_create_counter('c1');
	SELECT snowseq_create_serial('c2', 'C-####');
});
is($small->safe_psql('a', "SELECT string_agg(kind, ',' ORDER BY kind) FROM snowseq_reservations WHERE kind LIKE 'c_'"),
	'c1,c2', 'places: both counters have their place at creation, before any use');
$small->safe_psql('a', "SELECT snowseq_counter_next('c1'), snowseq_serial('c2')");
my ($ret, $out, $err) = $small->psql('a', "SELECT snowseq_create_counter('c3')");
like($err, qr/no room for counter "c3"/, 'places: a third counter finds no room');
$small->safe_psql('postgres', 'DROP DATABASE a');
$small->safe_psql('postgres', 'CREATE DATABASE b');
($ret, $out, $err) = $small->psql('b', q{
	CREATE EXTENSION snowseq;
	SELECT snowseq_create_counter('d1');
	SELECT snowseq_create_counter('d2');
	SELECT snowseq_counter_next('d2');
});
is($ret, 0, 'places: after DROP DATABASE its places are free for another database' . ($err ? " ($err)" : ''));
$small->restart;
is($small->safe_psql('b', "SELECT snowseq_counter_next('d1')"), '1', 'places: and stay so across a restart');

# a dropped counter's place is freed when a new counter needs one; its
# floor sequence keeps its position, so created again it continues above
my @d1 = ('1', take_counter($small, 'b', 'd1', 100));
$small->safe_psql('b', "SELECT snowseq_drop_counter('d1')");
($ret, $out, $err) = $small->psql('b', "SELECT snowseq_create_counter('d3'); SELECT snowseq_counter_next('d3')");
is($ret, 0, "places: a dropped counter's place is free for a new counter" . ($err ? " ($err)" : ''));
$small->safe_psql('b', "SELECT snowseq_drop_counter('d3'); SELECT snowseq_create_counter('d1')");
my @d1b = take_counter($small, 'b', 'd1', 100);
@d = dups(@d1, @d1b);
is(scalar(@d), 0, 'places: created again in another place, the dropped counter continues above its values (' .
	scalar(@d) . " repeated, first $d1b[0])");
$small->stop;

$node->stop;
done_testing();
