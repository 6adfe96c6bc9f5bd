# The state file: a changed layout, epoch or node id, a corrupt file and a
# missing one.  A mismatch or a corrupt file makes every generating
# function raise an ERROR (the server stays up, no ID is issued, the file is
# left alone) until a role granted it calls snowseq_reset_state(); after the
# reset every ID is greater than every ID issued before it, whatever the
# new layout, epoch or node id, and gene segments keep increasing; a reset
# that cannot promise that refuses and says which epoch would do.  A missing file is logged and the counters
# start from the clock and the WAL replayed.  No ID is received twice over
# the whole test.
use strict;
use warnings;
use lib 'test';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;
use Time::HiRes qw(usleep);


my $node = snowseq_node('state', conf => [ "timezone = 'UTC'" ]);
my $state_file = $node->data_dir . '/snowseq.state';
my $state_copy = $node->data_dir . '/snowseq.state.copy';
$node->safe_psql('postgres', 'CREATE ROLE regress_plain LOGIN');

sub ids_issued { return $node->safe_psql('postgres', 'SELECT ids_issued FROM snowseq_status'); }
sub state_bytes { return slurp_file($state_file); }

# Corrupt a state file: flip one byte of its bounds.
sub flip_byte
{
	my ($f) = @_;
	open my $fh, '+<:raw', $f or die "cannot open $f: $!";
	sysseek($fh, 40, 0);
	sysread($fh, my $byte, 1) == 1 or die "state file too short";
	sysseek($fh, 40, 0);
	syswrite($fh, chr(ord($byte) ^ 0x5A));
	close $fh;
}

my %seen;    # every ID received, and the batch that received it
my @sf_maxima;    # the largest snowflake ID of each batch, in order
my @dups;
my $batch_no = 0;

# Generate IDs through clients (recorded in files), check them and return
# { sf => [...], gene => [...], seg => [...], t_min, t_max } with the
# snowflake times parsed now, under the configuration that issued them.
sub generate
{
	my ($what, %o) = @_;
	$batch_no++;
	my $issued = ids_issued();
	my $sf_c = id_clients($node, 1, 'SELECT snowseq_next() FROM generate_series(1, 200)', "b${batch_no}_sf");
	my $gene_c = $o{no_gene} ? [] : id_clients($node, 1,
		"SELECT snowseq_gene_next(k) FROM (SELECT 'customer-' || (g % 4) AS k FROM generate_series(1, 100) g) s",
		"b${batch_no}_gene");
	is(wait_clients($sf_c) + wait_clients($gene_c), 0, "$what: clients generated IDs");
	my @sf = read_ids($sf_c->[0][1]);
	my @gene = $o{no_gene} ? () : read_ids($gene_c->[0][1]);
	my @seg = map { segment_of($_) } @gene;
	is(scalar(@sf), 200, "$what: 200 snowflake IDs received");
	is(scalar(@gene), 100, "$what: 100 gene IDs received") unless $o{no_gene};
	ok(strictly_increasing(\@sf) && strictly_increasing(\@seg), "$what: IDs and gene segments increase");
	is(ids_issued() - $issued, @sf + @gene, "$what: ids_issued counts the IDs received");

	my $n_dups = @dups;
	for my $id (@sf, @gene)
	{
		if (exists $seen{$id}) { push @dups, "$id ($seen{$id} and $what)"; }
		else { $seen{$id} = $what; }
	}
	is(scalar(@dups) - $n_dups, 0, "$what: no ID received before")
	  or diag('duplicates: ' . join(', ', @dups[ $n_dups .. ($n_dups + 4 > $#dups ? $#dups : $n_dups + 4) ]));

	my ($t_min, $t_max) = split /\|/, $node->safe_psql('postgres',
		"SELECT min(t), max(t) FROM (SELECT (extract(epoch FROM snowseq_time(id)) * 1000)::bigint AS t
		   FROM unnest('{" . join(',', @sf) . "}'::bigint[]) id) s");
	push @sf_maxima, max_of(@sf);
	return { sf => \@sf, gene => \@gene, seg => \@seg, t_min => $t_min, t_max => $t_max };
}

# After a reset (or a start): later IDs parse to times not before the
# earlier ones, every snowflake ID is greater than every snowflake ID
# received before (under any configuration), and gene segments are above
# the earlier ones.
sub check_after
{
	my ($before, $after, $what, %o) = @_;
	my $max_sf = max_of(@sf_maxima[ 0 .. $#sf_maxima - 1 ]);
	cmp_ok($after->{t_min}, '>=', $before->{t_max},
		"$what: snowflake IDs carry times not before those issued before");
	cmp_ok((sort { $a <=> $b } @{ $after->{sf} })[0], '>', $max_sf,
		"$what: snowflake IDs are greater than every one issued before");
	cmp_ok((sort { $a <=> $b } @{ $after->{seg} })[0], '>', max_of(@{ $before->{seg} }),
		"$what: gene segments are greater than those issued before") unless $o{no_gene};
}

# Every generating function refuses with the same ERROR, DETAIL and HINT;
# no ID is received or issued, the state file is left as it is, and the
# server stays up.
sub expect_refusal
{
	my ($what, $state, $msg, $detail, $hint) = @_;
	is($node->safe_psql('postgres', 'SELECT state FROM snowseq_status'), $state, "$what: state is $state");
	my $issued = ids_issued();
	my $file = state_bytes();
	for my $f ('snowseq_next()', 'snowseq_next_n(3)', "snowseq_gene_next('customer-1')",
		'snowseq_gene_next(42::bigint)', "snowseq_gene_next('\\x0102'::bytea)")
	{
		my ($rc, $out, $err) = $node->psql('postgres', "SELECT $f");
		ok($rc != 0 && $out eq '', "$what: $f fails and returns nothing");
		like($err, qr/ERROR:  $msg/, "$what: $f says why");
		like($err, qr/DETAIL:  $detail/, "$what: $f details what changed");
		like($err, qr/HINT:  $hint/, "$what: $f hints at the way out");
	}
	# give the reservation worker a moment, in case it would write anyway:
	# a time on purpose, since what is checked is that nothing happens, and
	# there is no event to wait for (a worker that wrote would do so at
	# once, woken by the failed calls)
	usleep(300_000);
	is(ids_issued(), $issued, "$what: no ID issued by the failed calls");
	ok(state_bytes() eq $file, "$what: state file left as it was");
	is($node->safe_psql('postgres', 'SELECT 1'), '1', "$what: server still up");
}

# Restart with settings appended to postgresql.conf; returns the server log
# of the start.
sub restart_with
{
	my (@conf) = @_;
	$node->stop;
	$node->append_conf('postgresql.conf', join("\n", @conf) . "\n") if @conf;
	my $pos = -s $node->logfile;
	$node->start;
	return server_log_since($node, $pos);
}

sub reset_state
{
	my ($what, $re, @as) = @_;
	my $r = $node->safe_psql('postgres', 'SELECT snowseq_reset_state()', extra_params => [@as]);
	like($r, $re, "$what: snowseq_reset_state(): $r");
	is($node->safe_psql('postgres', 'SELECT state FROM snowseq_status'), 'ok', "$what: state ok after the reset");
}

# A reset that must refuse, because the new configuration's IDs would lie
# below earlier ones; it changes nothing.  Returns the epoch its hint says
# would do.
sub reset_refused
{
	my ($what, @as) = @_;
	my $file = state_bytes();
	my ($rc, $out, $err) = $node->psql('postgres', 'SELECT snowseq_reset_state()', extra_params => [@as]);
	like($err, qr/ERROR:  the new snowseq configuration would issue IDs below those of the old one until/,
		"$what: the reset refuses");
	like($err, qr/DETAIL:  To stay above every ID the old configuration could have issued, the clock would have to lead the wall clock by \d+ ms, more than snowseq\.max_lead_ms = 10000\./,
		"$what: the refusal says by how much");
	my ($epoch) = $err =~ /HINT:  .*set snowseq\.epoch to '([^']+)' or earlier and restart/;
	ok(defined $epoch, "$what: the hint names an epoch that would do (" . ($epoch // 'none') . ')');
	is($node->safe_psql('postgres', 'SELECT state FROM snowseq_status'), 'mismatch', "$what: still refusing to generate");
	ok(state_bytes() eq $file, "$what: the refused reset left the state file as it was");
	return $epoch;
}

my $MISMATCH = qr/snowseq configuration does not match its saved state/;
my $MISMATCH_HINT = qr/Restore the previous settings, or call snowseq_reset_state\(\) to adopt the new ones/;

my $initial = generate('initial');
ok(-f $state_file, 'state file written');

# ---------------------------------------------------------------------
# (a) layout changed
# ---------------------------------------------------------------------
my $log = restart_with('snowseq.time_bits = 42', 'snowseq.seq_bits = 11');
like($log, qr/LOG:  snowseq configuration does not match state file "snowseq.state", no ID will be generated\n.*DETAIL:  The layout was 41\/10\/12 bits at 1 ms and is now 42\/10\/11 bits at 1 ms\./,
	'layout changed: start logs the mismatch');
expect_refusal('layout changed', 'mismatch', $MISMATCH,
	qr/The layout was 41\/10\/12 bits at 1 ms and is now 42\/10\/11 bits at 1 ms\./, $MISMATCH_HINT);

# (c) who may reset is a GRANT, not a superuser check
my ($rc, $out, $err) = $node->psql('postgres', 'SELECT snowseq_reset_state()',
	extra_params => [ '-U', 'regress_plain' ]);
like($err, qr/ERROR:  permission denied for function snowseq_reset_state/,
	'reset by a role without the grant: permission denied');
expect_refusal('after the refused reset', 'mismatch', $MISMATCH,
	qr/The layout was 41\/10\/12 bits/, $MISMATCH_HINT);
$node->safe_psql('postgres', 'GRANT EXECUTE ON FUNCTION snowseq_reset_state(bigint) TO regress_plain');

# 42/10/11 halves the IDs of an instant: from the same epoch the new IDs
# would lie below the old ones for as long again, so the reset refuses and
# names an earlier epoch; with that one it goes through
my $earlier = reset_refused('layout changed', '-U', 'regress_plain');
restart_with("snowseq.epoch = '$earlier'");
reset_state('layout changed, earlier epoch', qr/snowseq state reset: previous state converted/,
	'-U', 'regress_plain');
$node->safe_psql('postgres', 'REVOKE EXECUTE ON FUNCTION snowseq_reset_state(bigint) FROM regress_plain');
my $layout = generate('after the layout reset');
check_after($initial, $layout, 'layout reset');

# ---------------------------------------------------------------------
# (d) corrupt state file: one byte flipped while stopped
# ---------------------------------------------------------------------
$node->stop;
flip_byte($state_file);
my $pos = -s $node->logfile;
$node->start;
$log = server_log_since($node, $pos);
like($log, qr/LOG:  snowseq state file "snowseq.state" is corrupt, no ID will be generated\n.*DETAIL:  The checksum is/,
	'corrupt: start logs the corruption');
expect_refusal('corrupt', 'corrupt', qr/snowseq state file "snowseq.state" is corrupt/,
	qr/The checksum is [0-9a-f]{8}, expected [0-9a-f]{8}\./,
	qr/Restore the file from a backup, or call snowseq_reset_state\(\) after checking that the clock has not gone back/);
reset_state('corrupt', qr/snowseq state reset: previous state file unreadable, its copy converted/);
my $corrupt = generate('after the reset of the corrupt file');
check_after($layout, $corrupt, 'corrupt reset');

# ---------------------------------------------------------------------
# (b) epoch moved later, time unit changed, then node id changed
# ---------------------------------------------------------------------
# a later epoch makes the IDs of an instant smaller: refused
$log = restart_with("snowseq.epoch = '2025-06-01 00:00:00+00'");
like($log, qr/DETAIL:  snowseq\.epoch was \S+ \S+ and is now 2025-06-01 00:00:00\+00\./,
	'epoch changed: start logs the mismatch');
expect_refusal('epoch changed', 'mismatch', $MISMATCH,
	qr/snowseq\.epoch was \S+ \S+ and is now 2025-06-01 00:00:00\+00\./, $MISMATCH_HINT);
$earlier = reset_refused('epoch moved later');
restart_with("snowseq.epoch = '$earlier'");
reset_state('epoch changed, earlier epoch', qr/snowseq state reset: previous state converted/);
my $epoch = generate('after the epoch reset');
check_after($corrupt, $epoch, 'epoch reset');

# 10 ms time units make the IDs of an instant ten times smaller: refused
restart_with('snowseq.time_unit_ms = 10');
$earlier = reset_refused('time unit 1 ms to 10 ms');
restart_with("snowseq.epoch = '$earlier'");
reset_state('time unit changed, earlier epoch', qr/snowseq state reset: previous state converted/);
my $unit = generate('after the time unit reset');
check_after($epoch, $unit, 'time unit reset');
$epoch = $unit;

$log = restart_with('snowseq.node_id = 2');
like($log, qr/DETAIL:  snowseq\.node_id was 1 and is now 2\./, 'node id changed: start logs the mismatch');
expect_refusal('node id changed', 'mismatch', $MISMATCH,
	qr/snowseq\.node_id was 1 and is now 2\./, $MISMATCH_HINT);
reset_state('node id changed', qr/snowseq state reset: previous state converted/);
my $nodeid = generate('after the node id reset');
check_after($epoch, $nodeid, 'node id reset');
is($node->safe_psql('postgres',
		"SELECT bool_and(snowseq_node(id) = 2) FROM unnest('{" . join(',', @{ $nodeid->{sf} }) . "}'::bigint[]) id"),
	't', 'node id reset: snowflake IDs carry node 2');
ok(!(grep { ($_ & 1023) != 2 } @{ $nodeid->{seg} }), 'node id reset: gene segments carry node 2');

# ---------------------------------------------------------------------
# (e) state file deleted while stopped
# ---------------------------------------------------------------------
# only the state file lost: its copy carries on, gene segments included
$node->stop;
unlink $state_file or die "cannot remove $state_file: $!";
$pos = -s $node->logfile;
$node->start;
$log = server_log_since($node, $pos);
like($log, qr/LOG:  snowseq state file "snowseq.state" not found, using its copy "snowseq.state.copy"/,
	'state file deleted, copy kept: start logs it');
my $from_copy = generate('state file deleted, copy kept');
check_after($nodeid, $from_copy, 'state file deleted, copy kept');
ok(-f $state_file, 'copy used: state file written again');

# Stop, delete the state file and its copy, start: the start says so.
sub restart_without_state
{
	my ($mode, $what) = @_;
	$node->stop($mode);
	unlink $state_file, $state_copy or die "cannot remove the state files: $!";
	my $from = -s $node->logfile;
	$node->start;
	like(server_log_since($node, $from),
		qr/LOG:  snowseq state file "snowseq.state" not found, starting from the clock and any WAL replayed/,
		"$what: start logs it");
}

# both lost after an immediate shutdown: the WAL replayed raises the counters
restart_without_state('immediate', 'deleted after an immediate shutdown');
is($node->safe_psql('postgres', 'SELECT state FROM snowseq_status'), 'ok', 'deleted: state ok');
my $deleted = generate('deleted after an immediate shutdown');
check_after($from_copy, $deleted, 'deleted after an immediate shutdown');
ok(-f $state_file && -f $state_copy, 'deleted: state file and copy written again');

# both lost after a clean shutdown: nothing is replayed, snowflake IDs start
# from the clock, which has moved on past every ID issued once the logical
# clock no longer runs ahead.  (The gene segment counter has no clock to
# fall back on, so no gene ID is generated after this.)
$node->poll_query_until('postgres', "SELECT drift = interval '0' AND last_time < wall_clock FROM snowseq_status")
  or die 'logical clock still ahead';
restart_without_state('fast', 'deleted after a clean shutdown');
my $deleted_clean = generate('deleted after a clean shutdown', no_gene => 1);
check_after($deleted, $deleted_clean, 'deleted after a clean shutdown', no_gene => 1);

# both copies corrupt: a reset cannot tell where the segments stood and asks
my $max_seg = max_of(map { $_ >> 10 } map { @{ $_->{seg} } } ($deleted));
$node->stop;
flip_byte($_) for ($state_file, $state_copy);
$node->start;
($rc, $out, $err) = $node->psql('postgres', 'SELECT snowseq_reset_state()');
like($err, qr/ERROR:  cannot tell where the gene segment counter stood.*\n.*HINT:  Pass the highest segment counter/s,
	'both copies corrupt: reset without segment_floor refuses and says what to pass');
is($node->safe_psql('postgres', 'SELECT state FROM snowseq_status'), 'corrupt', 'both corrupt: still refusing');
($rc, $out, $err) = $node->psql('postgres', 'SELECT snowseq_reset_state(segment_floor => -1)');
like($err, qr/segment_floor must not be negative/, 'negative segment_floor refused');
like($node->safe_psql('postgres', "SELECT snowseq_reset_state(segment_floor => $max_seg)"),
	qr/previous state file unreadable/, 'both corrupt: reset with segment_floor');
my $after_floor = generate('after a reset with segment_floor');
ok(!(grep { ($_ >> 10) <= $max_seg } @{ $after_floor->{seg} }), 'segments after the reset are above segment_floor');

is(scalar(@dups), 0, 'no ID received twice over the whole test (' . scalar(keys %seen) . ' IDs)');
$node->stop;
done_testing();
