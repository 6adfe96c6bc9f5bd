# Physical standbys, with asynchronous and with synchronous replication:
# a standby refuses to generate, replays the primary's reservations into its
# own state file, and once promoted after a crash of the primary continues
# above every ID the primary issued.  With a synchronous standby, an advance
# of a reservation waits for the standby's confirmation.
#
# The standby's clock runs an hour behind the primary's (libfaketime on the
# standby's postmaster), so after promotion nothing but the replayed
# reservations and the promotion margin can keep its IDs above the
# primary's: its own wall clock lies an hour behind them.  (The primary keeps
# the real clock: under a libfaketime offset statement_timeout never fires.)
use strict;
use warnings;
use lib 'test';
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;
use Time::HiRes qw(time sleep);

my $NODE_ID   = 5;
my $NODE_BITS = 10;                     # default layout 41/10/12 at 1 ms
my $SEQ_BITS  = 12;
my $MARGIN    = 10000 << $SEQ_BITS;     # default promote_margin_ms as clock units
my @KEYS      = ('alpha', 'beta', 'gamma', 'delta');

# The clock counter value, (time << seq_bits) | seq, of a snowflake ID.
sub clock_of
{
	my ($id) = @_;
	return (($id >> ($NODE_BITS + $SEQ_BITS)) << $SEQ_BITS) | ($id & ((1 << $SEQ_BITS) - 1));
}

# Node field of a snowflake ID.
sub node_of { return ($_[0] >> $SEQ_BITS) & ((1 << $NODE_BITS) - 1); }

# The node counter inside a gene ID's segment.
sub segment_counter_of { return segment_of($_[0]) >> $NODE_BITS; }

# The saved bounds of a state file: { node_id, clock, segment, ... }, or
# undef when the file is missing or not a snowseq state file.
sub read_state { return read_state_file($_[0]); }

# Clients that read a script of statements from a file, one result printed
# per statement as it arrives: what a client printed, it received.  Same
# shape as id_clients, so wait_clients and check_ids apply.
sub standby_clients
{
	my ($node, $n, $lines, $tag, $make) = @_;
	my @c;
	for my $i (1 .. $n)
	{
		my $script = "$PostgreSQL::Test::Utils::tmp_check/script_${tag}_$i.sql";
		open my $fh, '>', $script or die "cannot write $script: $!";
		print $fh $make->($i, $_) for 1 .. $lines;
		close $fh;
		my $file = "$PostgreSQL::Test::Utils::tmp_check/ids_${tag}_$i.txt";
		my $err  = '';
		my $h    = IPC::Run::start(
			[ 'psql', '-X', '-At', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'), '-f', '-' ],
			'<', $script, '>', $file, '2>', \$err);
		push @c, [ $h, $file, \$err ];
	}
	return \@c;
}

sub snow_clients
{
	my ($node, $n, $lines, $tag, $pace) = @_;
	my $from = $pace ? " FROM pg_sleep($pace)" : '';
	return standby_clients($node, $n, $lines, $tag, sub { "SELECT snowseq_next()$from;\n" });
}

sub gene_clients
{
	my ($node, $n, $lines, $tag, $pace) = @_;
	my $from = $pace ? " FROM pg_sleep($pace)" : '';
	return standby_clients($node, $n, $lines, $tag,
		sub { my ($i, $l) = @_; "SELECT snowseq_gene_next('$KEYS[($i + $l) % @KEYS]')$from;\n" });
}

# Gene IDs of clients: positive, unique, and within each session the
# segments strictly increase (one counter per node, whatever the key).
# Returns the union.
sub check_gene_ids
{
	my ($clients, $what) = @_;
	my (@all, $inc);
	$inc = 1;
	for my $c (@$clients)
	{
		my @ids = read_ids($c->[1]);
		for my $i (1 .. $#ids)
		{
			$inc = 0 unless segment_of($ids[$i]) > segment_of($ids[ $i - 1 ]);
		}
		push @all, @ids;
	}
	ok($inc, "$what: each session's segments strictly increase");
	ok(all_unique(\@all), "$what: no duplicate among " . scalar(@all) . " IDs");
	ok(!(grep { $_ <= 0 } @all), "$what: every ID is positive");
	ok(!(grep { (segment_of($_) & ((1 << $NODE_BITS) - 1)) != $NODE_ID } @all),
		"$what: every segment carries node id $NODE_ID");
	return \@all;
}

# The generating calls a standby must refuse, with the recovery ERROR.
sub check_refuses
{
	my ($standby, $what) = @_;
	for my $f ('snowseq_next()', "snowseq_gene_next('x')", 'snowseq_next_n(3)')
	{
		my ($rc, $out, $err) = $standby->psql('postgres', "SELECT $f");
		like($err, qr/ERROR:\s+cannot generate snowseq IDs during recovery/,
			"$what: standby refuses $f with the recovery ERROR");
		is($out, '', "$what: standby returned no ID for $f");
	}
	is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 't',
		"$what: standby still up and in recovery");
}

# Synchronous standby down: an advance waits for it, can be cancelled, the
# primary stays up (and can be shut down), and with the standby back the
# advance completes.  Returns the IDs issued along the way.
sub sync_standby_down
{
	my ($primary, $standby, $fake) = @_;
	my (@snow, @gene);

	$standby->stop;
	# restarted, the counters stand at their saved bounds: the first ID of
	# either kind needs an advance, which only the absent standby can confirm
	$primary->restart;
	for my $f ('snowseq_next()', "snowseq_gene_next('beta')")
	{
		my $t0 = time;
		my ($rc, $out, $err) = $primary->psql('postgres', "SET statement_timeout = '3s'; SELECT $f");
		my $took = time - $t0;
		like($err,
			qr/ERROR:\s+(canceling statement due to statement timeout|snowseq reservation was not confirmed by the synchronous standby)/,
			"sync, standby down: $f waits for the standby and is cancelled by statement_timeout");
		is($out, '', "sync, standby down: $f returned no ID");
		# a lower bound: a slow machine only makes the wait longer
		cmp_ok($took, '>=', 2.5, sprintf('sync, standby down: %s waited until the timeout (%.1f s)', $f, $took));
	}
	is($primary->safe_psql('postgres', 'SELECT 1'), '1', 'sync, standby down: primary stays up');

	# an administrator must still be able to stop the primary
	{
		local $ENV{PGCTLTIMEOUT} = $PostgreSQL::Test::Utils::timeout_default;
		my $log_at  = -s $primary->logfile;
		my $t0      = time;
		my $stopped = $primary->stop('fast', fail_ok => 1);
		ok($stopped,
			sprintf('sync, standby down: fast shutdown completes while an advance waits for the standby (%.1f s)',
				time - $t0));
		if (!$stopped)
		{
			my $pm = $primary->{_pid};
			diag "processes left under the postmaster:\n" . `ps -o pid=,args= --ppid $pm` if $pm;
			diag "server log of the hung shutdown:\n" . server_log_since($primary, $log_at);
			$primary->stop('immediate');
		}
	}
	$primary->start;
	my ($rc, $out, $err) = $primary->psql('postgres', "SET statement_timeout = '2s'; SELECT snowseq_gene_next('gamma')");
	like($err, qr/ERROR:/, 'sync, standby down, after restart: still no ID without the standby');
	is($out, '', 'sync, standby down, after restart: no ID returned');

	# the standby comes back: the waiting advance is confirmed, IDs flow
	start_faketime($standby, $fake);
	my $t0 = time;
	push @snow, $primary->safe_psql('postgres', 'SELECT snowseq_next()',
		timeout => $PostgreSQL::Test::Utils::timeout_default);
	push @gene, $primary->safe_psql('postgres', "SELECT snowseq_gene_next('beta')",
		timeout => $PostgreSQL::Test::Utils::timeout_default);
	like("$snow[0] $gene[0]", qr/^\d+ \d+$/,
		sprintf('sync, standby back: the primary generates again (after %.1f s)', time - $t0));
	ok($primary->poll_query_until('postgres',
			"SELECT sync_state FROM pg_stat_replication WHERE application_name = '" . $standby->name . "'", 'sync'),
		'sync, standby back: it is the synchronous standby again');
	return (\@snow, \@gene);
}

sub scenario
{
	my ($mode) = @_;
	my $sync = $mode eq 'sync';
	my (@p_snow, @p_gene);    # what the primary issued outside the clients

	my $primary = snowseq_node("primary_$mode", streaming => 1, node_id => $NODE_ID);
	push @p_snow, $primary->safe_psql('postgres', 'SELECT snowseq_next()');
	push @p_gene, $primary->safe_psql('postgres', "SELECT snowseq_gene_next('alpha')");

	$primary->backup('base');
	my $backup_state = read_state($primary->backup_dir . '/base/' . 'snowseq.state');
	ok($backup_state, "$mode: the base backup holds the primary's state file");
	my $standby = PostgreSQL::Test::Cluster->new("standby_$mode");
	$standby->init_from_backup($primary, 'base', has_streaming => 1);
	my $fake = "$PostgreSQL::Test::Utils::tmp_check/faketime_$mode";
	set_fake_offset($fake, '-1h');
	start_faketime($standby, $fake);
	$primary->wait_for_catchup($standby);
	my $t = $standby->safe_psql('postgres', 'SELECT extract(epoch FROM clock_timestamp())');
	cmp_ok($t, '<', time() - 1800, "$mode: the standby's clock runs an hour behind the primary's");
	check_refuses($standby, $mode);

	if ($sync)
	{
		$primary->append_conf('postgresql.conf', "synchronous_standby_names = '" . $standby->name . "'");
		$primary->reload;
		ok($primary->poll_query_until('postgres',
				"SELECT sync_state FROM pg_stat_replication WHERE application_name = '" . $standby->name . "'",
				'sync'),
			'sync: pg_stat_replication shows the standby as sync');
		my ($s, $g) = sync_standby_down($primary, $standby, $fake);
		push @p_snow, @$s;
		push @p_gene, @$g;
		check_refuses($standby, "$mode, after the standby's restart");
	}

	# clients generate on the primary, paced, until it stops under them; a
	# burst of batches meanwhile runs the clock some 20 s of logical time
	# ahead, past anything the base backup's state file plus the promotion
	# margin would cover: only replayed reservations keep the promoted
	# standby above it
	# The number of batches is sized by what is left: each batch takes
	# 4194304 consecutive clock values (1024 ms of logical time), so N
	# batches raise the clock by at least N * 4194304 above where it stands
	# now, whatever the speed of the machine (the lead bound only makes them
	# wait for the wall clock)
	my $now_id = $primary->safe_psql('postgres', 'SELECT snowseq_next()');
	push @p_snow, $now_id;
	my $left    = $backup_state->{clock} + 2 * $MARGIN - clock_of($now_id);
	my $batches = $left > 0 ? int($left / 4194304) + 2 : 2;
	$batches = 20 if $batches < 20;
	my $snow  = snow_clients($primary, 2, 30000, "${mode}_primary_snow", 0.002);
	my $gene  = gene_clients($primary, 2, 30000, "${mode}_primary_gene", 0.002);
	my $burst = standby_clients($primary, 1, $batches, "${mode}_primary_burst",
		sub { "SELECT max(x) FROM (SELECT snowseq_next_n(4194304) x) s;\n" });
	is(wait_clients($burst), 0, "$mode: a burst of $batches batches of 4194304 IDs completed");
	my $pb_ids = check_ids($burst, "$mode, primary burst (last ID of each batch)");
	push @p_snow, @$pb_ids;
	cmp_ok(clock_of(max_of(@$pb_ids)) - $backup_state->{clock}, '>', 2 * $MARGIN,
		"$mode: the burst ran the clock beyond the backup's bound plus twice the promotion margin");
	ok($primary->poll_query_until('postgres',
			"SELECT (SELECT bound FROM snowseq_reservations WHERE kind = 'clock') > $backup_state->{clock}
			    AND (SELECT bound FROM snowseq_reservations WHERE kind = 'segment') > $backup_state->{segment}"),
		"$mode: under load the primary advanced both reservations beyond the backup's");

	# while they run: the standby's state file follows the primary's
	# published reservations (written by redo, beyond the backup's)
	my %pb = map { split /\|/ } split /\n/,
	  $primary->safe_psql('postgres', 'SELECT kind, bound FROM snowseq_reservations');
	$primary->wait_for_catchup($standby);
	my $st = read_state($standby->data_dir . '/snowseq.state');
	ok($st, "$mode: the standby's data directory has a snowseq.state after replay");
	ok($st && $st->{node_id} == $NODE_ID && $st->{clock} >= $pb{clock} && $st->{segment} >= $pb{segment},
		"$mode: the standby's state file covers the primary's published bounds");
	ok($st && $st->{clock} > $backup_state->{clock} && $st->{segment} > $backup_state->{segment},
		"$mode: replay moved the standby's state file beyond the backup's");
	check_refuses($standby, "$mode, under load");

	# the paced clients (30,000 statements each, 2 ms apart) take another
	# 200 IDs, then the primary stops under them
	my $issued = $primary->safe_psql('postgres', 'SELECT ids_issued FROM snowseq_status');
	ok($primary->poll_query_until('postgres', "SELECT ids_issued >= $issued + 200 FROM snowseq_status", 't'),
		"$mode: the primary's clients go on generating");
	$primary->stop('immediate');
	is(wait_clients([ @$snow, @$gene ]), 4, "$mode: the primary stopped while all 4 clients were generating");
	my $ps = check_ids($snow, "$mode, primary snowflake");
	my $pg = check_gene_ids($gene, "$mode, primary gene");
	push @p_snow, @$ps;
	push @p_gene, @$pg;
	cmp_ok(scalar(@$ps), '>', 100, "$mode: the primary's clients received snowflake IDs");
	cmp_ok(scalar(@$pg), '>', 100, "$mode: the primary's clients received gene IDs");

	# the standby replays whatever it received, then is promoted.  The
	# primary may have died with a record half sent (received up to a page
	# boundary, never completed): all is replayed once the WAL receiver has
	# gone (it flushes what it got as it exits) and the startup process
	# waits for more WAL, or when replay reached what was received
	ok($standby->poll_query_until('postgres', q{
			SELECT pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn()
				OR (NOT EXISTS (SELECT 1 FROM pg_stat_wal_receiver)
					AND EXISTS (SELECT 1 FROM pg_stat_activity WHERE backend_type = 'startup'
								AND wait_event IN ('RecoveryWalStream', 'RecoveryRetrieveRetryInterval')))}),
		"$mode: the standby replayed all it received");
	my $rs = read_state($standby->data_dir . '/snowseq.state');
	my $p_clock_max = max_of(map { clock_of($_) } @p_snow);
	my $p_seg_max   = max_of(map { segment_counter_of($_) } @p_gene);
	if ($sync)
	{
		# each advance was confirmed by the standby before any ID used it
		cmp_ok($p_clock_max, '<=', $rs->{clock},
			'sync: the replayed clock bound covers every snowflake ID the primary issued');
		cmp_ok($p_seg_max, '<=', $rs->{segment},
			'sync: the replayed segment bound covers every gene ID the primary issued');
	}
	else
	{
		note sprintf('async: replayed clock bound minus the highest clock issued: %.0f ms',
			($rs->{clock} - $p_clock_max) / (1 << $SEQ_BITS));
	}
	$standby->promote;
	is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 'f', "$mode: standby promoted");
	like(slurp_file($standby->logfile), qr/snowseq resumes above the replayed reservations/,
		"$mode: the promoted standby logs where it resumes");

	my $qs = snow_clients($standby, 2, 1500, "${mode}_promoted_snow");
	my $qg = gene_clients($standby, 2, 1500, "${mode}_promoted_gene");
	is(wait_clients([ @$qs, @$qg ]), 0, "$mode: clients on the promoted standby finished");
	my $s_snow = check_ids($qs, "$mode, promoted snowflake");
	my $s_gene = check_gene_ids($qg, "$mode, promoted gene");
	is(scalar(@$s_snow) + scalar(@$s_gene), 6000, "$mode: the promoted standby issued every ID asked for");
	ok(!(grep { node_of($_) != $NODE_ID } @$s_snow), "$mode: promoted snowflake IDs carry node id $NODE_ID");

	my $p_snow_max = max_of(@p_snow);
	my $s_snow_min = min_of(@$s_snow);
	cmp_ok($s_snow_min, '>', $p_snow_max,
		"$mode: every snowflake ID of the promoted standby > every one the primary issued");
	cmp_ok(clock_of($s_snow_min), '>', $rs->{clock} + $MARGIN,
		"$mode: the promoted clock starts promote_margin_ms above the replayed bound");
	my $p_seg = max_of(map { segment_of($_) } @p_gene);
	my $s_seg = min_of(map { segment_of($_) } @$s_gene);
	cmp_ok($s_seg, '>', $p_seg, "$mode: every gene segment of the promoted standby > every one of the primary");
	cmp_ok(segment_counter_of($s_seg), '>', $rs->{segment},
		"$mode: the promoted segments start above the replayed segment bound");
	ok(all_unique([ @p_snow, @p_gene, @$s_snow, @$s_gene ]),
		sprintf('%s: the union of %d IDs of primary and promoted standby is unique',
			$mode, @p_snow + @p_gene + @$s_snow + @$s_gene));

	# the promoted server saved its own reservations before using them
	my $ps2 = read_state($standby->data_dir . '/snowseq.state');
	ok($ps2 && $ps2->{clock} >= max_of(map { clock_of($_) } @$s_snow)
		  && $ps2->{segment} >= max_of(map { segment_counter_of($_) } @$s_gene),
		"$mode: the promoted standby's state file covers every ID it issued");

	$standby->stop;
}

# A synchronous standby, connected and healthy: whatever the session's
# synchronous_commit, an advance made by the session itself waits for the
# standby's flush and then succeeds.  Reservation blocks are kept far smaller
# than one snowseq_next_n(1000000) (about 250 ms of logical time), so each
# call passes the bound and its backend advances the reservation itself.
sub sync_session_settings
{
	my $primary = snowseq_node('primary_sc', streaming => 1, node_id => $NODE_ID,
		conf => [ 'snowseq.clock_block_min_ms = 1', 'snowseq.clock_block_max_ms = 50',
				  'snowseq.segment_block_min = 1', 'snowseq.segment_block_max = 10' ]);
	$primary->safe_psql('postgres', 'SELECT snowseq_next()');
	$primary->backup('base');
	my $standby = PostgreSQL::Test::Cluster->new('standby_sc');
	$standby->init_from_backup($primary, 'base', has_streaming => 1);
	$standby->start;
	$primary->append_conf('postgresql.conf', "synchronous_standby_names = '" . $standby->name . "'");
	$primary->reload;
	ok($primary->poll_query_until('postgres',
			"SELECT sync_state FROM pg_stat_replication WHERE application_name = '" . $standby->name . "'", 'sync'),
		'sync, session settings: the standby is synchronous');
	my $batches = 'SELECT count(*) FROM snowseq_next_n(1000000);' x 3;
	for my $sc ('on', 'off', 'local', 'remote_write', 'remote_apply')
	{
		my ($rc, $out, $err) = $primary->psql('postgres', "SET synchronous_commit = $sc; $batches");
		is("$out$err", "1000000\n1000000\n1000000",
			"sync, session synchronous_commit = $sc: batches past the reservation wait for the standby and succeed");
		($rc, $out, $err) = $primary->psql('postgres',
			"SET synchronous_commit = $sc; SELECT count(snowseq_gene_next(g)) FROM generate_series(1, 200) g");
		is("$out$err", '200',
			"sync, session synchronous_commit = $sc: gene IDs past small segment blocks succeed");
	}

	# the same with synchronous_commit = local for the whole server, which
	# the reservation worker follows too
	$primary->append_conf('postgresql.conf', 'synchronous_commit = local');
	my $log_at = -s $primary->logfile;
	$primary->restart;
	my ($rc, $out, $err) = $primary->psql('postgres', $batches);
	is("$out$err", "1000000\n1000000\n1000000", 'sync, server-wide synchronous_commit = local: batches past the reservation succeed');
	($rc, $out, $err) = $primary->psql('postgres', 'SELECT count(snowseq_gene_next(g)) FROM generate_series(1, 200) g');
	is("$out$err", '200', 'sync, server-wide synchronous_commit = local: gene IDs succeed');
	unlike(server_log_since($primary, $log_at), qr/reservation was not confirmed by the synchronous standby/,
		'sync, server-wide synchronous_commit = local: no advance failed, in the worker or a session');

	my %pb = map { split /\|/ } split /\n/,
	  $primary->safe_psql('postgres', 'SELECT kind, bound FROM snowseq_reservations');
	$primary->wait_for_catchup($standby);
	my $st = read_state($standby->data_dir . '/snowseq.state');
	ok($st && $st->{clock} >= $pb{clock} && $st->{segment} >= $pb{segment},
		'sync, session settings: the standby replayed every reservation the primary published');
	$primary->stop;
	$standby->stop;
}

scenario('async');
scenario('sync');
sync_session_settings();

done_testing();
