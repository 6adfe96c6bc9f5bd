# Clock steps: the server runs under libfaketime, whose offset is read from a
# file at every clock call, and the wall clock is stepped back ten minutes
# and forward again while sessions keep generating IDs.  The logical clock
# must keep going: IDs stay unique and increasing, their time never goes
# back, and generation neither fails nor waits for the wall clock.
#
# Whatever a client received counts as issued: the IDs are taken from psql's
# output, outside the server.
use strict;
use warnings;
use lib 'test';
use IPC::Run ();
use Time::HiRes qw(time sleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $timeout = $PostgreSQL::Test::Utils::timeout_default;
my $tmp = $PostgreSQL::Test::Utils::tmp_check;

# ---- one-shot clients, with a timeout so that a blocked server fails the test

sub clients
{
	my ($node, $n, $sql, $tag) = @_;
	my @c;
	for my $i (1 .. $n)
	{
		my $file = sprintf('%s/ids_%s_%d.txt', $tmp, $tag, $i);
		my $err = '';
		my $h = IPC::Run::start(
			[ 'psql', '-X', '-At', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'), '-c', $sql ],
			'>', $file, '2>', \$err, IPC::Run::timeout(2 * $timeout));
		push @c, [ $h, $file, \$err ];
	}
	return \@c;
}

# ---- long-lived sessions: one backend each for the whole run, fed
# statements on stdin; the IDs come back on stdout

sub session_open
{
	my ($node, $tag) = @_;
	my $s = {
		tag => $tag, in => '', out => '', err => '', n => 0, taken => 0,
		file => "$tmp/ids_session_$tag.txt",
	};
	$s->{h} = IPC::Run::start(
		[ 'psql', '-X', '-At', '-q', '-v', 'ON_ERROR_STOP=1', '-f', '-', '-d', $node->connstr('postgres') ],
		'<', \$s->{in}, '>', \$s->{out}, '2>', \$s->{err});
	return $s;
}

# Queue a statement; session_wait returns once psql has printed its output.
sub session_send
{
	my ($s, $sql) = @_;
	$s->{n}++;
	$s->{in} .= "$sql;\n\\echo done $s->{n}\n";
}

sub session_done
{
	my ($s) = @_;
	my $mark = "done $s->{n}\n";
	return substr($s->{out}, -length($mark)) eq $mark;
}

# Wait for every given session to finish what it was sent.
sub session_wait
{
	my @s = @_;
	my $deadline = time() + $timeout;
	for (;;)
	{
		my $pending = 0;
		for my $s (@s)
		{
			next if session_done($s);
			die "session $s->{tag} ended early: $s->{err}" unless $s->{h}->pumpable;
			$s->{h}->pump_nb;
			$pending++ unless session_done($s);
		}
		last unless $pending;
		die 'sessions still busy after ' . $timeout . ' s' if time() > $deadline;
		sleep(0.002);
	}
}

# The IDs a session printed since the last call.
sub session_take
{
	my ($s) = @_;
	my $new = substr($s->{out}, $s->{taken});
	$s->{taken} = length($s->{out});
	return ($new =~ /^(\d+)$/mg);
}

# End the session; its output is kept in a file, for check_ids.
sub session_close
{
	my ($s) = @_;
	$s->{in} .= "\\q\n";
	$s->{h}->finish;
	open my $fh, '>', $s->{file} or die "cannot write $s->{file}: $!";
	print $fh $s->{out};
	close $fh;
	return [ undef, $s->{file}, \$s->{err} ];
}

# ---- the server's view of the clock

# Server wall clock minus ours, in seconds.
sub server_skew
{
	my ($node) = @_;
	my $before = time();
	my ($server, $snowseq) = split /\|/, $node->safe_psql('postgres',
		'SELECT extract(epoch FROM clock_timestamp()), extract(epoch FROM wall_clock) FROM snowseq_status');
	my $after = time();
	my $mid = ($before + $after) / 2;
	return ($server - $mid, $snowseq - $mid);
}

sub status
{
	my ($node, $col) = @_;
	return $node->safe_psql('postgres', "SELECT $col FROM snowseq_status");
}


###########################################################################

my $fake = "$tmp/faketime_offset";
set_fake_offset($fake, '+0');
my $node = snowseq_node('clock_step', node_id => 2, faketime => $fake);
my $log_from = -s $node->logfile;

# libfaketime really moves the server's clock (else this test proves nothing)
my ($skew, $sskew) = server_skew($node);
ok(abs($skew) < 5, sprintf('under offset +0 the server clock is ours (off by %.3f s)', $skew));
set_fake_offset($fake, '-10m');
($skew, $sskew) = server_skew($node);
ok($skew > -630 && $skew < -570, sprintf('under offset -10m the server clock is 10 minutes back (%.3f s)', $skew));
ok($sskew > -630 && $sskew < -570, sprintf('snowseq_status.wall_clock is 10 minutes back too (%.3f s)', $sskew));
set_fake_offset($fake, '+0');
($skew) = server_skew($node);
ok(abs($skew) < 5, sprintf('back under offset +0 the server clock is ours again (off by %.3f s)', $skew));

my $epoch = status($node, 'extract(epoch FROM epoch)');
my $events0 = status($node, 'clock_backward_events');
my $n = 20_000;
my $gen = "COPY (SELECT snowseq_next() FROM generate_series(1, $n)) TO STDOUT";
my @sessions = (session_open($node, 's1'), session_open($node, 's2'));
my (@all_clients, %phase);

# Run one phase: both long-lived sessions and two new ones generate $n IDs
# each at the same time.  Returns the IDs of the phase.
sub phase
{
	my ($name) = @_;
	session_send($_, $gen) for @sessions;
	my $c = clients($node, 2, $gen, $name);
	session_wait(@sessions);
	is(wait_clients($c), 0, "$name: new sessions succeeded");
	push @all_clients, @$c;
	my @ids = map { session_take($_) } @sessions;
	push @ids, read_ids($_->[1]) for @$c;
	is(scalar(@ids), 4 * $n, "$name: " . 4 * $n . ' IDs received');
	return @ids;
}

# 1. before the step
my @before = phase('before');
push @{ $phase{before} }, @before;

# a long statement that is running while the clock steps back
my $straddle = clients($node, 1, "COPY (SELECT snowseq_next() FROM generate_series(1, 1000000)) TO STDOUT", 'straddle');
my $started = time();
sleep(0.01) until -s $straddle->[0][1] || time() - $started > $timeout;

# 2. the clock steps back ten minutes
my $step_back_at = time();
set_fake_offset($fake, '-10m');
($skew) = server_skew($node);
ok($skew > -630 && $skew < -570, sprintf('stepped back: the server clock is 10 minutes back (%.3f s)', $skew));

# right after the step, 10,000 IDs come at once: nobody waits for the
# clock.  The logical clock now stands 10 minutes ahead of the wall clock,
# far beyond snowseq.max_lead_ms (10 s): had the step counted as lead,
# callers would have waited at the lead bound, and lead_waits would say so
# (told by the server's counter, not by a stopwatch)
my $lead_waits0 = status($node, 'lead_waits');
my $t0 = time();
session_send($sessions[0], 'COPY (SELECT snowseq_next() FROM generate_series(1, 10000)) TO STDOUT');
session_wait($sessions[0]);
my $took = time() - $t0;
my @first_back = session_take($sessions[0]);
is(scalar(@first_back), 10_000, 'stepped back: 10,000 IDs received right after the step');
is(status($node, 'lead_waits'), $lead_waits0, 'stepped back: nobody waited for the clock (lead_waits unchanged)');
note sprintf('stepped back: 10,000 IDs took %.3f s', $took);
$straddle->[0][0]->pump_nb;
note('the long statement was ' . ($straddle->[0][0]->pumpable ? 'still' : 'no longer') . ' running then');

cmp_ok(status($node, 'clock_backward_events'), '>=', $events0 + 1, 'stepped back: clock_backward_events counted the step');

my @back = (@first_back, phase('back'));
push @{ $phase{back} }, @back;
my $drift = status($node, 'extract(epoch FROM drift)');
ok($drift > 540, "stepped back: the logical clock runs ahead of the wall clock (drift $drift s)");
is(status($node, 'last_time > wall_clock'), 't', 'stepped back: last_time is ahead of wall_clock');

# the time field kept going: not earlier than before the step, not in the
# faked past
my ($max_before, $min_back) = (max_of(@before), min_of(@back));
my ($not_earlier, $back_t) = split /\|/, $node->safe_psql('postgres',
	"SELECT snowseq_time($min_back) >= snowseq_time($max_before), extract(epoch FROM snowseq_time($min_back))");
is($not_earlier, 't', 'stepped back: snowseq_time() of the first ID after the step is not earlier than the last before');
# (a minute of slack for a slow machine between the last ID before the
# step and the step; the faked past is ten minutes back)
cmp_ok($back_t, '>', $step_back_at - 60,
	'stepped back: snowseq_time() of the IDs after the step is the real time, not 10 minutes back');

# 3. the clock steps forward again
set_fake_offset($fake, '+0');
($skew) = server_skew($node);
ok(abs($skew) < 5, sprintf('stepped forward: the server clock is ours again (off by %.3f s)', $skew));
my @forward = phase('forward');
push @{ $phase{forward} }, @forward;
# a fresh ID against the server's wall clock read in the same expression
my $fwd_off = $node->safe_psql('postgres',
	'SELECT extract(epoch FROM snowseq_time(snowseq_next()) - clock_timestamp())');
ok(abs($fwd_off) < 1, sprintf('stepped forward: IDs carry the wall clock again (off by %.3f s)', $fwd_off));
cmp_ok(status($node, 'extract(epoch FROM drift)'), '<', 5, 'stepped forward: drift is gone');

is(wait_clients($straddle), 0, 'the statement running across the step succeeded');
push @all_clients, @$straddle;
cmp_ok(scalar(read_ids($straddle->[0][1])), '==', 1_000_000, 'the statement running across the step received every ID');
push @all_clients, map { session_close($_) } @sessions;
is(join('', map { ${ $_->[2] } } @all_clients), '', 'no client printed an error');

# the whole run: unique, positive, each session increasing (the long-lived
# sessions span all three phases), and each phase above the one before
my $all = check_ids(\@all_clients, 'whole run');
is(scalar(@$all), 3 * 4 * $n + 10_000 + 1_000_000, 'whole run: every ID is counted');
cmp_ok(max_of(@{ $phase{before} }), '<', min_of(@{ $phase{back} }), 'every ID after the step back is above every ID before it');
cmp_ok(max_of(@{ $phase{back} }), '<', min_of(@{ $phase{forward} }), 'every ID after the step forward is above every ID before it');

my $log = server_log_since($node, $log_from);
unlike($log, qr/\b(?:ERROR|FATAL|PANIC):/, 'no error in the server log during the run');
note "events: " . status($node, 'clock_backward_events') . ', borrows: ' . status($node, 'overflow_borrows');

$node->stop;
done_testing();
