# Named counters and serials where sequences glued to to_char() fail: four
# clients at once, an immediate stop in the middle of a load, the promotion
# of a standby, a clock crossing midnight (and stepping back across it),
# and pg_dump/restore.  Whatever a client received counts as issued: every
# value is read from psql's output.
use strict;
use warnings;
use lib 'test';
use POSIX qw(strftime);
use Time::HiRes qw(time usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $tmp = $PostgreSQL::Test::Utils::tmp_check;

sub unique { my %s; $s{$_}++ for @_; return !grep { $_ > 1 } values %s; }

# Each list strictly increasing: numbers numerically, serials as text
# (fixed-width dates and numbers sort as they were issued).
sub increasing
{
	my ($numeric, @l) = @_;
	for my $i (1 .. $#l)
	{
		return 0 if $numeric ? $l[$i] <= $l[ $i - 1 ] : $l[$i] le $l[ $i - 1 ];
	}
	return 1;
}

my $COUNTER_SQL = "COPY (SELECT snowseq_counter_next('orders') FROM generate_series(1, %d)) TO STDOUT;\n";
my $SERIAL_SQL = "COPY (SELECT snowseq_serial('invoices') FROM generate_series(1, %d)) TO STDOUT;\n";

###########################################################################
# 1. Four clients at once, then an immediate stop in the middle of a load.
###########################################################################

my $node = snowseq_node('counters', node_id => 1, streaming => 1, conf => [ "timezone = 'UTC'" ]);
$node->safe_psql('postgres', q{
	SELECT snowseq_create_counter('orders', start => 1, nodes => 2);
	SELECT snowseq_create_serial('invoices', 'INV-YYYYMMDD-##########');
});

my $c = script_clients($node, 'four',
	[ (sprintf($COUNTER_SQL, 50000)) x 2, (sprintf($SERIAL_SQL, 50000)) x 2 ]);
is(wait_clients($c), 0, 'four clients: every one finished');
my @counter = map { [ read_lines($_->[1]) ] } @$c[ 0, 1 ];
my @serial = map { [ read_lines($_->[1]) ] } @$c[ 2, 3 ];
my @all_counter = map { @$_ } @counter;
my @all_serial = map { @$_ } @serial;
is(scalar(@all_counter), 100000, 'four clients: 100,000 counter values received');
ok(unique(@all_counter), 'four clients: no counter value twice');
ok(increasing(1, @{ $counter[0] }) && increasing(1, @{ $counter[1] }), 'four clients: each client\'s counter values increase');
ok(!(grep { $_ % 2 != 0 } @all_counter), 'four clients: node 1 of 2 takes the even values (start 1 + offset 1)');
is(scalar(@all_serial), 100000, 'four clients: 100,000 serials received');
ok(unique(@all_serial), 'four clients: no serial twice');
ok(increasing(0, @{ $serial[0] }) && increasing(0, @{ $serial[1] }), 'four clients: each client\'s serials increase');
ok(!(grep { !/^INV-\d{8}-\d{10}$/ } @all_serial), 'four clients: every serial has the format\'s shape');

# an immediate stop while clients take values: after the restart nothing
# received before is issued again
$c = script_clients($node, 'crash', [ sprintf($COUNTER_SQL, 3000000), sprintf($SERIAL_SQL, 3000000) ]);
# (wait until both received values, then as much again: not a length of time)
wait_until(sub { -s $c->[0][1] && -s $c->[1][1] });
my @size = map { -s $_->[1] } @$c;
wait_until(sub { -s $c->[0][1] >= 2 * $size[0] && -s $c->[1][1] >= 2 * $size[1] });
$node->stop('immediate');
wait_clients($c);
my @crash_counter = read_lines($c->[0][1]);
my @crash_serial = read_lines($c->[1][1]);
cmp_ok(scalar(@crash_counter), '>', 0, 'crash: the clients had received values (' . scalar(@crash_counter) . ' and ' . scalar(@crash_serial) . ')');
$node->start;
my @after_counter = split /\n/, $node->safe_psql('postgres', sprintf("SELECT snowseq_counter_next('orders') FROM generate_series(1, %d)", 1000));
my @after_serial = split /\n/, $node->safe_psql('postgres', sprintf("SELECT snowseq_serial('invoices') FROM generate_series(1, %d)", 1000));
push @all_counter, @crash_counter;
push @all_serial, @crash_serial;
ok(unique(@all_counter, @after_counter), 'crash: no counter value issued twice across the immediate stop');
ok(unique(@all_serial, @after_serial), 'crash: no serial issued twice across the immediate stop');
cmp_ok($after_counter[0], '>', max_of(@all_counter), 'crash: the counter resumes above everything received');
ok(($after_serial[0] cmp (sort @all_serial)[-1]) > 0, 'crash: the serial resumes above everything received');
push @all_counter, @after_counter;
push @all_serial, @after_serial;

###########################################################################
# 2. A standby replays the counters' reservations; promoted after the
#    primary stops in the middle of a load, it continues above them.
###########################################################################

$node->backup('counters_backup');
my $standby = PostgreSQL::Test::Cluster->new('counters_standby');
$standby->init_from_backup($node, 'counters_backup', has_streaming => 1);
$standby->start;
$c = script_clients($node, 'failover', [ sprintf($COUNTER_SQL, 3000000), sprintf($SERIAL_SQL, 3000000) ]);
wait_until(sub { -s $c->[0][1] && -s $c->[1][1] });
@size = map { -s $_->[1] } @$c;
wait_until(sub { -s $c->[0][1] >= 2 * $size[0] && -s $c->[1][1] >= 2 * $size[1] });
$node->stop('immediate');
wait_clients($c);
push @all_counter, read_lines($c->[0][1]);
push @all_serial, read_lines($c->[1][1]);
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()') or die 'standby not promoted';
my @promoted_counter = split /\n/, $standby->safe_psql('postgres', "SELECT snowseq_counter_next('orders') FROM generate_series(1, 1000)");
my @promoted_serial = split /\n/, $standby->safe_psql('postgres', "SELECT snowseq_serial('invoices') FROM generate_series(1, 1000)");
is(scalar(@promoted_counter), 1000, 'promotion: the promoted standby issues counter values');
ok(unique(@all_counter, @promoted_counter), 'promotion: no counter value the old primary issued is issued again');
ok(unique(@all_serial, @promoted_serial), 'promotion: no serial the old primary issued is issued again');
cmp_ok($promoted_counter[0], '>', max_of(@all_counter), 'promotion: the counter resumes above everything the primary issued');
$standby->stop;

###########################################################################
# 3. Midnight: a serial's number starts at 1 in the new day, no number
#    repeats across the switch, and a clock stepped back across midnight
#    keeps the new day.
###########################################################################

# the offset file is read at every clock call: the server starts on the
# real clock and is moved to 3 seconds before midnight once it is up
my $ft = "$tmp/counters_faketime";
set_fake_offset($ft, '+0');
my $mid = snowseq_node('midnight', node_id => 1, faketime => $ft, conf => [ "timezone = 'UTC'" ]);
$mid->safe_psql('postgres', "SELECT snowseq_create_serial('daily', 'D-YYYYMMDD-######')");
my $s = $mid->background_psql('postgres');
my $to_midnight = 86400 - (time() % 86400);
set_fake_offset($ft, sprintf('+%ds', $to_midnight - 3));
my $fake_now = $s->query_safe("SELECT to_char(clock_timestamp(), 'HH24:MI:SS')");
like($fake_now, qr/^23:59:5\d$/, "midnight: the server's clock stands just before midnight ($fake_now)");
# serials until ten batches of the new day were taken (the fake clock
# crosses midnight 3 s after it was set), 20 ms apart: pacing, not waiting
my @daily;
my ($new_day, $deadline) = (0, time() + $PostgreSQL::Test::Utils::timeout_default);
while ($new_day < 10 && time() < $deadline)
{
	my @batch = split /\n/, $s->query_safe("SELECT snowseq_serial('daily') FROM generate_series(1, 200)");
	$new_day++ if @daily && substr($batch[-1], 0, 10) ne substr($daily[0], 0, 10);
	push @daily, @batch;
	usleep(20_000);
}
my %by_day;
for (@daily) { my ($d, $n) = /^D-(\d{8})-(\d{6})$/ or die "bad serial $_"; push @{ $by_day{$d} }, $n + 0; }
my @days = sort keys %by_day;
is(scalar(@days), 2, 'midnight: the serials fall in two days (' . join(', ', @days) . ')');
ok(unique(@daily), 'midnight: no serial twice across the switch (' . scalar(@daily) . ' serials)');
is($by_day{ $days[1] }[0], 1, 'midnight: the new day starts at 1');
is(join(',', @{ $by_day{ $days[0] } }), join(',', 1 .. scalar(@{ $by_day{ $days[0] } })),
	'midnight: the old day has every number from 1 up, in order');
is(join(',', @{ $by_day{ $days[1] } }), join(',', 1 .. scalar(@{ $by_day{ $days[1] } })),
	'midnight: so has the new day');

# the clock steps back a minute, across midnight: the serial keeps the new
# day and goes on counting there
my $last_new = $by_day{ $days[1] }[-1];
set_fake_offset($ft, sprintf('+%ds', $to_midnight - 60));
like($mid->safe_psql('postgres', "SELECT to_char(clock_timestamp(), 'HH24:MI')"), qr/^23:5\d$/,
	'midnight: the clock stepped back to the old day');
my @back = split /\n/, $s->query_safe("SELECT snowseq_serial('daily') FROM generate_series(1, 100)");
ok(!(grep { !/^D-$days[1]-/ } @back), 'midnight: after the step back the serials stay in the new day');
is(($back[0] =~ /-(\d+)$/)[0] + 0, $last_new + 1, 'midnight: and continue its numbers');
ok(unique(@daily, @back), 'midnight: nothing repeats after the step back');
$s->quit;
$mid->stop;

###########################################################################
# 4. pg_dump/restore keeps the definitions; a restored counter is raised
#    above the restored data.
###########################################################################

my $src = snowseq_node('counters_src', node_id => 3, conf => [ "timezone = 'UTC'" ]);
$src->safe_psql('postgres', q{
	SELECT snowseq_create_counter('tickets', start => 1000, nodes => 4);
	SELECT snowseq_create_serial('receipts', 'R-YYYYMM-####', 'Europe/Berlin', 1, 2);
	SELECT snowseq_create_counter('old');
	SELECT snowseq_drop_counter('old');
	CREATE TABLE tickets (n bigint PRIMARY KEY);
	INSERT INTO tickets SELECT snowseq_counter_next('tickets') FROM generate_series(1, 100);
});
my $dump = "$tmp/counters.dump";
$src->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $src->connstr('postgres') ], 'pg_dump of a database with counters');
my $defs = "SELECT name, kind, start, nodes, format, time_zone, dropped FROM snowseq_counters ORDER BY name";
my $src_defs = $src->safe_psql('postgres', $defs);
my $dst = snowseq_node('counters_dst', node_id => 3, extension => 0);
$dst->command_ok([ 'pg_restore', '-d', $dst->connstr('postgres'), $dump ], 'pg_restore');
is($dst->safe_psql('postgres', $defs), $src_defs, 'the definitions came along, dropped ones too');
is($dst->safe_psql('postgres', "SELECT snowseq_counter_raise('tickets', (SELECT max(n) FROM tickets)) > (SELECT max(n) FROM tickets)"),
	't', 'snowseq_counter_raise puts the restored counter above the restored data');
$dst->safe_psql('postgres', "INSERT INTO tickets SELECT snowseq_counter_next('tickets') FROM generate_series(1, 10)");
is($dst->safe_psql('postgres', 'SELECT count(*) FROM tickets'), '110', 'new values do not collide with restored ones');
like($dst->safe_psql('postgres', "SELECT snowseq_serial('receipts')"), qr/^R-\d{6}-0002$/,
	'a restored serial issues numbers: start 1 plus this node\'s offset (3 % 2 = 1)');
$src->stop;
$dst->stop;

done_testing();
