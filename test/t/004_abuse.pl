# What an ordinary role without grants can do to others, tried as a hostile
# one would: push the logical clock ahead, block a table through a function
# it was granted, or leave another session's routing broken.  Each is
# bounded: the clock leads the wall clock by at most snowseq.max_lead_ms,
# ownership is checked before any lock is taken, and a failed load of the
# routing map leaves nothing stale behind.
use strict;
use warnings;
use lib 'test';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $timeout = $PostgreSQL::Test::Utils::timeout_default;

# The lead bound is reached by construction, not by speed: a layout of two
# IDs per one-hour time unit (seq_bits 1) and a lead of two units, so the
# logical clock may run at most 6 IDs ahead of the wall clock and any loop
# of snowseq_next() out-runs it, however slow the machine.  The wall clock
# is libfaketime's: set a second past the start of a time unit, so that no
# unit ends while the test runs (the next one is an hour away), and stepped
# by the test, so a waiter goes on when the test moves the clock, not when
# enough real time has passed.
my $UNIT_MS = 3600000;
my $LEAD_MS = 2 * $UNIT_MS;
my $clock = "$PostgreSQL::Test::Utils::tmp_check/abuse_clock_offset";
my $to_unit = seconds_to_next_unit($UNIT_MS) + 1;
set_fake_offset($clock, "+${to_unit}s");
my $node = snowseq_node('abuse_clock', node_id => 3, faketime => $clock,
	conf => [ 'snowseq.time_bits = 41', 'snowseq.node_bits = 10', 'snowseq.seq_bits = 1',
			  "snowseq.time_unit_ms = $UNIT_MS", "snowseq.max_lead_ms = $LEAD_MS", "timezone = 'UTC'" ]);
$node->safe_psql('postgres', q{
	CREATE ROLE regress_hostile LOGIN;
	CREATE ROLE regress_loader LOGIN;
	GRANT EXECUTE ON FUNCTION snowseq_next_n(integer) TO regress_loader;
});

# Run SQL as a role on a node; returns (exit code, stdout, stderr).
sub psql_as
{
	my ($n, $role, $sql) = @_;
	my ($rc, $out, $err) = $n->psql('postgres', $sql, extra_params => [ '-U', $role ]);
	return ($rc, $out, $err);
}

# A psql running $sql as $role in the background, named $app in
# pg_stat_activity; returns [harness, \stdout, \stderr].
sub background_call
{
	my ($role, $app, $sql) = @_;
	my ($o, $e) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-At', '-U', $role, '-d', $node->connstr('postgres') . " application_name=$app",
		  '-c', $sql ],
		'>', \$o, '2>', \$e, IPC::Run::timeout(4 * $timeout));
	return [ $h, \$o, \$e ];
}

# How many sessions named $app wait at the lead bound (the clock's wait is
# the extension's wait event).
sub waiting
{
	my ($app) = @_;
	return "SELECT count(*) FROM pg_stat_activity WHERE application_name = '$app' "
	  . "AND wait_event_type = 'Extension' AND state = 'active'";
}

sub status_of
{
	my ($col) = @_;
	return $node->safe_psql('postgres', "SELECT $col FROM snowseq_status");
}

###########################################################################
# 1. The clock: a flood of snowseq_next() leads the wall clock by at most
#    max_lead_ms; a batch is a grant; callers wait rather than borrow on,
#    and go on when the wall clock does.
###########################################################################

my ($rc, $out, $err) = psql_as($node, 'regress_hostile', 'SELECT count(*) FROM snowseq_next_n(2)');
like($err, qr/permission denied for function snowseq_next_n/, 'batches are not for PUBLIC');
# at most 2^(seq_bits + 10), and what the lead allows: (lead + 1) << seq_bits
my $max_batch = ((($LEAD_MS / $UNIT_MS) + 1) << 1);
($rc, $out, $err) = psql_as($node, 'regress_loader', 'SELECT count(*) FROM snowseq_next_n(' . ($max_batch + 1) . ')');
like($err, qr/count must be between 0 and $max_batch, not \d+/,
	'a batch larger than the lead allows is refused, not waited for');
# the first batch takes the whole lead: the clock stands at its bound
($rc, $out, $err) = psql_as($node, 'regress_loader', "SELECT count(*) FROM snowseq_next_n($max_batch)");
is($out, $max_batch, "a role granted EXECUTE takes a batch of $max_batch, all the lead allows");
is(status_of('lead_waits'), '0', 'a batch the lead allows never waits for itself');

# two hostile sessions generate as fast as they can, without end: whatever
# the time units the wall clock has passed since the batch hold two IDs
# each, so both soon wait at the bound
my $flood = 'DO $$ BEGIN LOOP PERFORM snowseq_next(); END LOOP; END $$';
my @floods = map { background_call('regress_hostile', 'flood', $flood) } 1 .. 2;
ok($node->poll_query_until('postgres', waiting('flood'), '2'), 'both flooding sessions wait at the lead bound');
cmp_ok(status_of('lead_waits'), '>', 0, 'callers waited at the lead bound instead of borrowing on');
cmp_ok(status_of('overflow_borrows'), '>', 0, 'the batch and the flood borrowed logical time');
my $drift = status_of('extract(epoch FROM drift)');
note sprintf('at the bound: drift %.3f s, lead bound %.3f s', $drift, $LEAD_MS / 1000);
cmp_ok($drift, '<=', $LEAD_MS / 1000 + 0.01, "the clock never led the wall clock by more than $LEAD_MS ms");
cmp_ok($drift, '>', ($LEAD_MS - $UNIT_MS) / 1000, 'the clock stands at the lead bound (within one time unit)');
cmp_ok(status_of('extract(epoch FROM max_lead)'), '==', $LEAD_MS / 1000, 'snowseq_status shows max_lead');

# an ordinary caller waits at the bound too (no unit ends before the test
# steps the clock); it is the cluster's bootstrap superuser, which is named
# after whoever ran initdb (postgres only when that user did)
my $superuser = $node->safe_psql('postgres', 'SELECT current_user');
my $caller = background_call($superuser, 'caller', 'SELECT snowseq_next()');
ok($node->poll_query_until('postgres', waiting('caller'), '1'),
	'an ordinary caller waits behind the flood at the bound');

# the wall clock moves on (stepped by the lead and a unit; each waiter looks
# again at least once a second): the flood takes the new room and waits
# again, still within the bound
my $waits = status_of('lead_waits');
set_fake_offset($clock, '+' . ($to_unit + ($LEAD_MS + $UNIT_MS) / 1000) . 's');
ok($node->poll_query_until('postgres', "SELECT lead_waits > $waits FROM snowseq_status", 't'),
	'after the step the flood reaches the moved bound');
ok($node->poll_query_until('postgres', waiting('flood'), '2'), 'and waits there again');
$drift = status_of('extract(epoch FROM drift)');
cmp_ok($drift, '<=', $LEAD_MS / 1000 + 0.01, sprintf('after the step the lead is still bounded (%.3f s)', $drift));

# the flood stops (cancelled); waiting at the bound is not a queue, so the
# caller may still be waiting: once the wall clock moves on again it gets
# its ID, and the wall clock has passed the logical clock: no drift
$node->safe_psql('postgres', "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'flood'");
for my $f (@floods)
{
	eval { $f->[0]->finish; 1 };
	like(${ $f->[2] }, qr/canceling statement due to user request/, 'a flooding session ends when cancelled');
}
set_fake_offset($clock, '+' . ($to_unit + 2 * ($LEAD_MS + $UNIT_MS) / 1000) . 's');
$caller->[0]->finish;
like(${ $caller->[1] }, qr/^\d+$/, 'the caller got its ID once the wall clock moved on');
is(${ $caller->[2] }, '', 'the caller saw no error');
ok($node->poll_query_until('postgres', "SELECT drift = interval '0' FROM snowseq_status", 't'),
	'after the flood the drift is gone');
$node->stop;

# sections 2 and 3 on a server with the real clock: lock_timeout and
# statement_timeout are computed from the wall clock
$node = snowseq_node('abuse', node_id => 3);
$node->safe_psql('postgres', 'CREATE ROLE regress_hostile LOGIN');

###########################################################################
# 2. snowseq_create_shards, granted to a role that does not own the table,
#    refuses before it locks anything: it cannot queue an exclusive lock
#    that every other session would wait behind.
###########################################################################

$node->safe_psql('postgres', q{
	CREATE TABLE victim (id bigint) PARTITION BY RANGE (id);
	GRANT EXECUTE ON FUNCTION snowseq_create_shards(regclass, integer) TO regress_hostile;
});
my $reader = $node->background_psql('postgres');
$reader->query_safe('BEGIN; SELECT count(*) FROM victim;');
# had it queued for the table's lock behind the reader, it would wait until
# the lock timeout (the reader never lets go meanwhile) and fail with that:
# the timeout only bounds a wrong wait, the error tells which happened
($rc, $out, $err) = psql_as($node, 'regress_hostile',
	"SET lock_timeout = '${timeout}s'; SELECT snowseq_create_shards('victim', 4)");
like($err, qr/ERROR:  must be owner of table victim/, 'a role that does not own the table is refused');
unlike($err, qr/lock timeout/, 'at once, not after waiting for a lock');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_locks WHERE NOT granted"), '0',
	'nobody is left waiting for the table');
$reader->query_safe('COMMIT');
$reader->quit;

###########################################################################
# 3. A failed load of the routing map (a lock timeout) leaves nothing
#    cached: the next lookup in that session routes correctly.
###########################################################################

$node->safe_psql('postgres', "INSERT INTO snowseq_shard_map VALUES (32767, 'only_shard')");
my $locker = $node->background_psql('postgres');
$locker->query_safe('BEGIN; LOCK TABLE snowseq_shard_map IN ACCESS EXCLUSIVE MODE;');
my $router = $node->background_psql('postgres', on_error_stop => 0);
# the lock is held until COMMIT below, so the timeout always fires: the
# time only decides how soon the failure comes
$router->query_safe("SET lock_timeout = '200ms'");
$router->{stderr} = '';
$router->query('SELECT snowseq_route(1)');
like($router->{stderr}, qr/canceling statement due to lock timeout/, 'the map load times out while it is locked');
$locker->query_safe('COMMIT');
$locker->quit;
$router->{stderr} = '';
my $route = $router->query('SELECT snowseq_route(1)');
is($route . $router->{stderr}, 'only_shard', 'the next lookup loads the map and routes');
$router->quit;

done_testing();
