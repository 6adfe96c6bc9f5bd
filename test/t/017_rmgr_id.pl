# snowseq's WAL resource manager ID.  Since 1.2 reservation records are
# written under snowseq's own ID (184), not RM_EXPERIMENTAL_ID (128), which
# PostgreSQL keeps for extensions in development.  WAL written by 1.0 and
# 1.1 under 128 stays replayable while snowseq.replay_rmgr_128 is on (the
# default); turned off, 128 is left to other extensions.
#
# WAL of 1.1 itself cannot be made here (this tree builds 1.2 only), so the
# test setting snowseq.test_write_rmgr_128 writes the same records under
# 128, as 1.1 did; the record format is the same.
#
# 1. Records are written under 184, none under 128 (pg_waldump names
#    custom resource managers by ID).
# 2. Records under 128, then a crash: recovery replays them (ID 128
#    registered for redo) and the counter continues above what was issued.
# 3. The same WAL with snowseq.replay_rmgr_128 = off: recovery stops at the
#    first record under 128 and says the ID is not registered; back on, it
#    starts.  After a clean shutdown (no WAL left to replay) the server
#    starts with it off.
use strict;
use warnings;
use lib 'test';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

# WAL records of a server between two LSNs, counted by resource manager
sub records_by_rmgr
{
	my ($node, $from, $to) = @_;
	my ($out, $err) = run_command(
		[ 'pg_waldump', '-p', $node->data_dir . '/pg_wal', '-s', $from, '-e', $to ]);
	my %n;
	$n{$1}++ while $out =~ /^rmgr: (\S+)/mg;
	return \%n;
}

# values of counter c, taken one statement at a time
sub take
{
	my ($node, $k) = @_;
	return [ map { $node->safe_psql('postgres', "SELECT snowseq_counter_next('c')") } 1 .. $k ];
}

# 1. the own ID
my $a = snowseq_node('rmgr_own', node_id => 1);
my $from = $a->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
$a->safe_psql('postgres', "SELECT snowseq_create_counter('c')");
take($a, 3);
my $to = $a->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
my $n = records_by_rmgr($a, $from, $to);
ok(($n->{custom184} // 0) > 0, "reservation records are written under ID 184 ($n->{custom184})");
is($n->{custom128} // 0, 0, 'no record is written under ID 128');
$a->stop;

# 2. records under 128 (as 1.1 wrote them), a crash, recovery replays them
my $b = snowseq_node('rmgr_128', node_id => 2, conf => [ 'snowseq.test_write_rmgr_128 = on' ]);
$from = $b->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
$b->safe_psql('postgres', "SELECT snowseq_create_counter('c')");
my $before = take($b, 3);
$to = $b->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
$n = records_by_rmgr($b, $from, $to);
ok(($n->{custom128} // 0) > 0, "test setting: records written under ID 128 ($n->{custom128})");
$b->stop('immediate');

# 3. without the old ID, recovery cannot replay them
$b->append_conf('postgresql.conf', "snowseq.test_write_rmgr_128 = off\nsnowseq.replay_rmgr_128 = off\n");
my $log_offset = -s $b->logfile;
ok(!$b->start(fail_ok => 1), 'replay_rmgr_128 off with WAL under 128 to replay: recovery stops');
ok($b->log_contains(qr/resource manager with ID 128 not registered/, $log_offset),
	'the log names the unregistered ID 128');

# with it (the default), crash recovery replays them and the counter continues
$b->append_conf('postgresql.conf', "snowseq.replay_rmgr_128 = on\n");
$b->start;
my $after = take($b, 1)->[0];
ok($after > $before->[-1], "after the crash the counter continues above $before->[-1] ($after)");

# no WAL under 128 left after a clean shutdown: the server starts without it
$b->append_conf('postgresql.conf', "snowseq.replay_rmgr_128 = off\n");
$b->restart;
my $next = take($b, 1)->[0];
ok($next > $after, "replay_rmgr_128 off after a clean shutdown: starts and continues ($next)");
$b->stop;

# the test setting needs the old ID registered
my $c = snowseq_node('rmgr_bad', conf => [ 'snowseq.test_write_rmgr_128 = on', 'snowseq.replay_rmgr_128 = off' ],
	start => 0);
ok(!$c->start(fail_ok => 1), 'test_write_rmgr_128 without replay_rmgr_128: refuses to start');
like(slurp_file($c->logfile), qr/snowseq\.test_write_rmgr_128 needs snowseq\.replay_rmgr_128/, 'the log says why');

done_testing();
