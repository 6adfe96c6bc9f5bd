# Counters and serials across an asynchronous failover: the standby stops
# receiving WAL while the primary goes on issuing counter values and serial
# numbers (and writes megabytes of other WAL), the primary is killed, the
# standby promoted.  The reservation records of that window never reached
# the standby, so the replayed bounds lie below what the primary issued;
# the promoted server must jump past what the old primary could have issued
# in the time it was not heard from (its last rate times that time), and
# issue no value twice.
#
# Time unheard is made with libfaketime on the standby's postmaster: its
# clock is stepped an hour ahead once WAL receipt has stopped, as if the
# primary had gone unheard that long (the test never sleeps).  The
# counters advance one fixed block of 1,000 values at a time
# (segment_block_min = segment_block_max), so how far each record reaches is
# the same on any machine.  The rate a jump is sized by is measured on the
# primary (values a second since its advance before), and a loaded machine
# measures less: with a minute unheard, a loaded run's tickets jumped 8,440
# of the 8,805 numbers left and did not run out.  An hour needs about 3
# values a second to pass both the 10,000 numbers of tickets and the
# 10,000 values of each counter the primary issued unheard; an idle run
# measures hundreds, so what this test sees does not depend on the
# machine's speed.
use strict;
use warnings;
use lib 'test';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my @BLOCKS = ('snowseq.segment_block_min = 1000', 'snowseq.segment_block_max = 1000');

# Take $n values of counter $c (or numbers of serial $s) on $node in
# statements of $per; returns what the client received.
sub take
{
	my ($node, $f, $n, $per) = @_;
	my @got;
	for (my $done = 0; $done < $n; $done += $per)
	{
		push @got, split /\n/,
		  $node->safe_psql('postgres', "SELECT $f FROM generate_series(1, $per)");
	}
	return @got;
}

# Values of @$a that also appear in @$b.
sub twice
{
	my ($a, $b) = @_;
	my %seen = map { $_ => 1 } @$a;
	return scalar grep { $seen{$_} } @$b;
}

my $primary = snowseq_node('primary', streaming => 1, node_id => 3, conf => \@BLOCKS);
$primary->safe_psql('postgres', q{
	SELECT snowseq_create_counter('orders');
	SELECT snowseq_create_serial('invoices', 'INV-YYYYMMDD-#########');
	SELECT snowseq_create_serial('tickets', 'T-####');
	CREATE TABLE filler (x text);
});

my (@p_orders, @p_invoices, @p_tickets);    # what the primary's clients received
push @p_orders,   take($primary, "snowseq_counter_next('orders')", 500, 100);
push @p_invoices, take($primary, "snowseq_serial('invoices')",     500, 100);
push @p_tickets,  take($primary, "snowseq_serial('tickets')",      500, 100);

$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
my $fake = "$PostgreSQL::Test::Utils::tmp_check/faketime_076";
set_fake_offset($fake, '+0');
start_faketime($standby, $fake);

# a little traffic the standby hears, then its WAL receipt stops
push @p_orders,   take($primary, "snowseq_counter_next('orders')", 500, 100);
push @p_invoices, take($primary, "snowseq_serial('invoices')",     500, 100);
push @p_tickets,  take($primary, "snowseq_serial('tickets')",      500, 100);
$primary->wait_for_catchup($standby);
$standby->safe_psql('postgres', "ALTER SYSTEM SET primary_conninfo = ''");
$standby->reload;
ok($standby->poll_query_until('postgres', 'SELECT count(*) = 0 FROM pg_stat_wal_receiver'),
	'the standby stopped receiving WAL');
my $heard = $standby->safe_psql('postgres', 'SELECT pg_last_wal_receive_lsn()');

# unheard: the primary issues 10 blocks of each, and 5 MB of other WAL
push @p_orders,   take($primary, "snowseq_counter_next('orders')", 10000, 500);
push @p_invoices, take($primary, "snowseq_serial('invoices')",     10000, 500);
push @p_tickets,  take($primary, "snowseq_serial('tickets')",      1500,  500);
$primary->safe_psql('postgres',
	"INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 5000)");
is($standby->safe_psql('postgres', 'SELECT pg_last_wal_receive_lsn()'), $heard,
	'the standby received nothing of it');
$primary->stop('immediate');
is(scalar(@p_orders) + scalar(@p_invoices) + scalar(@p_tickets), 24500,
	'the primary issued every value asked for');

# an hour passes unheard, then the standby is promoted
set_fake_offset($fake, '+3600s');
$standby->promote;
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 'f', 'standby promoted');
my $log = slurp_file($standby->logfile);
like($log, qr/snowseq resumes above the replayed reservations: .*orders \d+ \(\d+ above, \d+ ms unheard\)/,
	'the promotion logs how far each counter jumped and for how long the primary was unheard');
like($log, qr/WARNING:.*snowseq serial or counter "tickets" .*old primary may have issued every value left/,
	'the promotion warns that the jump took what was left of tickets');

my @s_orders   = take($standby, "snowseq_counter_next('orders')", 5000, 500);
my @s_invoices = take($standby, "snowseq_serial('invoices')",     5000, 500);
is(scalar(@s_orders) + scalar(@s_invoices), 10000, 'the promoted standby issued every value asked for');
is(twice(\@p_orders, \@s_orders), 0,
	sprintf('no counter value twice among %d of the primary and %d of the promoted standby',
		scalar(@p_orders), scalar(@s_orders)));
is(twice(\@p_invoices, \@s_invoices), 0,
	sprintf('no serial number twice among %d of the primary and %d of the promoted standby',
		scalar(@p_invoices), scalar(@s_invoices)));

# a serial whose jump would pass the last number it holds is not silently
# exhausted: it refuses, and says why
my ($rc, $out, $err) = $standby->psql('postgres', "SELECT snowseq_serial('tickets')");
like($err, qr/ERROR:\s+serial "tickets" ran out of numbers/, 'tickets refuses after the promotion');
like($err, qr/HINT:.*promot/, 'its hint names the promotion');
my @t_after = grep { /^T-/ } split /\n/, $out;
is(twice(\@p_tickets, \@t_after), 0, 'no ticket twice');
is($standby->safe_psql('postgres', 'SELECT 1'), '1', 'the server keeps running');

done_testing();
