# What an ordinary role without grants can do to others, tried as a hostile
# one would: push the logical clock ahead, block a table through a function
# it was granted, or leave another session's routing broken.  Each is
# bounded: the clock leads the wall clock by at most snowseq.max_lead_ms,
# ownership is checked before any lock is taken, and a failed load of the
# routing map leaves nothing stale behind.
use strict;
use warnings;
use lib 'test';
use Time::HiRes qw(time usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

# 51/10/2: four IDs per millisecond, so a loop of snowseq_next() in one
# session borrows far faster than the wall clock moves
my $LEAD_MS = 2000;
my $node = snowseq_node('abuse', node_id => 3,
	conf => [ 'snowseq.time_bits = 51', 'snowseq.node_bits = 10', 'snowseq.seq_bits = 2',
			  "snowseq.max_lead_ms = $LEAD_MS", "timezone = 'UTC'" ]);
$node->safe_psql('postgres', q{
	CREATE ROLE regress_hostile LOGIN;
	CREATE ROLE regress_loader LOGIN;
	GRANT EXECUTE ON FUNCTION snowseq_next_n(integer) TO regress_loader;
});
my @hostile = ('-U', 'regress_hostile');

# Run SQL as a role; returns (exit code, stdout, stderr).
sub psql_as
{
	my ($role, $sql) = @_;
	my ($rc, $out, $err) = $node->psql('postgres', $sql, extra_params => [ '-U', $role ]);
	return ($rc, $out, $err);
}

###########################################################################
# 1. The clock: a flood of snowseq_next() leads the wall clock by at most
#    max_lead_ms; a batch is a grant; callers wait rather than borrow on.
###########################################################################

my ($rc, $out, $err) = psql_as('regress_hostile', 'SELECT count(*) FROM snowseq_next_n(1000)');
like($err, qr/permission denied for function snowseq_next_n/, 'batches are not for PUBLIC');
($rc, $out, $err) = psql_as('regress_loader', 'SELECT count(*) FROM snowseq_next_n(1000)');
is($out, '1000', 'a role granted EXECUTE takes batches');
# at most 2^(seq_bits + 10), and what the lead allows: (lead + 1) << seq_bits
my $max_batch = 1 << 12;
$max_batch = (($LEAD_MS + 1) << 2) if (($LEAD_MS + 1) << 2) < $max_batch;
($rc, $out, $err) = psql_as('regress_loader', 'SELECT count(*) FROM snowseq_next_n(' . ($max_batch + 1) . ')');
like($err, qr/count must be between 0 and $max_batch, not \d+/,
	'a batch larger than the lead allows is refused, not waited for');

# two hostile sessions generate as fast as they can for 4 seconds
my $flood = "SET statement_timeout = '4s'; DO \$\$ BEGIN LOOP PERFORM snowseq_next(); END LOOP; END \$\$";
my @floods = map {
	IPC::Run::start([ 'psql', '-X', '-At', '-U', 'regress_hostile', '-d', $node->connstr('postgres'),
					  '-c', $flood ], '>', \my $o, '2>', \my $e)
} 1 .. 2;

# meanwhile: the drift, and how long an ordinary caller waits for an ID
my ($max_drift, $max_call) = (0, 0);
my $t_end = time() + 3.5;
usleep(300_000);
while (time() < $t_end)
{
	my $t0 = time();
	my ($drift) = $node->safe_psql('postgres',
		'SELECT extract(epoch FROM drift) FROM snowseq_status, snowseq_next()');
	my $call = time() - $t0;
	$max_drift = $drift if $drift > $max_drift;
	$max_call = $call if $call > $max_call;
	usleep(100_000);
}
$_->finish for @floods;
note sprintf('under the flood: largest drift %.3f s, slowest snowseq_next() %.3f s', $max_drift, $max_call);
cmp_ok($max_drift, '<=', $LEAD_MS / 1000 + 0.01, "the clock never led the wall clock by more than $LEAD_MS ms");
cmp_ok($max_call, '<', 3, 'an ordinary caller still got its ID within a few seconds');
my $st = $node->safe_psql('postgres', 'SELECT lead_waits, overflow_borrows, extract(epoch FROM max_lead) FROM snowseq_status');
my ($lead_waits, $borrows, $max_lead) = split /\|/, $st;
note "under the flood: $lead_waits lead waits, $borrows borrows";
cmp_ok($borrows, '>', 0, 'the flood borrowed logical time');
cmp_ok($lead_waits, '>', 0, 'callers waited at the lead bound instead of borrowing on');
cmp_ok($max_lead, '==', $LEAD_MS / 1000, 'snowseq_status shows max_lead');

# once the flood stops, the wall clock catches up
usleep(($LEAD_MS + 500) * 1000);
is($node->safe_psql('postgres', "SELECT drift = interval '0' FROM snowseq_status, snowseq_next()"), 't',
	'after the flood the drift is gone');

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
my $t0 = time();
($rc, $out, $err) = psql_as('regress_hostile',
	"SET statement_timeout = '3s'; SELECT snowseq_create_shards('victim', 4)");
my $took = time() - $t0;
like($err, qr/ERROR:  must be owner of table victim/, 'a role that does not own the table is refused');
cmp_ok($took, '<', 2, sprintf('at once (%.2f s), not after waiting for a lock', $took));
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
