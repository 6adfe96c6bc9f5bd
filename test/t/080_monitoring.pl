# Monitoring through Prometheus: Debian's PostgreSQL exporter
# (prometheus-postgres-exporter) runs with snowseq's query file,
# monitoring/queries.yaml, connected as a role granted pg_monitor and
# nothing else; the alert rules, monitoring/alerts.yml, pass their unit
# tests.  Both programs come from Debian (test/lib.sh installs them): a
# missing one is a failure, not a skip.
#
# (1) promtool: the rules load and their unit tests pass
#     (monitoring/alerts_test.yml); every alert has a case where it fires and
#     one where it stays quiet, and a section of docs/monitoring.md.
# (2) Two servers, each with an exporter on a free port, scraped over HTTP:
#     "router" (node 1, backfill node id 1000, the default layout; shard
#     servers "shard_a" and "shard_b" for a move) and "clock" (node 5,
#     time units of a day, 4 sequence bits, a lead of up to a day, under
#     libfaketime: 32 IDs take it to its bound, deterministically, whatever
#     the machine's speed; two steps back of its wall clock).  snowseq_status() and snowseq_reservations() are EXECUTE for
#     pg_monitor only (the install script's grants).  Every metric of the guide's table is
#     there, of its type, with its labels, no other snowseq metric, every
#     query of the file in the table, the names pass promtool check metrics,
#     and no query fails.
# (3) Values, each against what the server says before and after the
#     scrape: node ids, system identifier, start time, standby; the lead of
#     a clock held at its bound (between the two readings, to the ms), its
#     bound, its waits, borrows and backward steps; the lifetime of the time
#     field (68 years, 2871 years); IDs taken raise the issued counter;
#     reservations of the clock and of a named counter; key versions left
#     (63, then 61 after two keys); the state file and the worker.
# (4) A move (a split of "orders" to shard_b) paused right after the
#     router committed its switch (where no lock_timeout of the switch
#     cuts the pause short): one move in progress, its labels, phase
#     "switched" with a phase age that grows, rows copied and to copy equal
#     to the rows moved, bytes copied, lag, progress last recorded before
#     the phase began; once it is done, no move.
# (4b) A merge of the two partitions (the split's genes moved back) paused
#     before the router's commit: one merge in progress, its labels and
#     phase, none failed; once done, no merge series.  A rebalance filling
#     shard_b, paused after its first move's copy: the run's series (its
#     session there, steps planned, none done or failed); its session
#     terminated: the open run shows no runner; given up: no series.
# (5) The exporter's role, a member of pg_monitor only, reads nothing else
#     of snowseq: not the keys (nor the key list beyond its versions), not
#     the move records beyond their phases' instants, not the fences, not the
#     state files (of other roles' counters: the state, as pg_read_all_stats);
#     and calls no function
#     that is not for PUBLIC (counters, serials, batches, backfill, public
#     IDs, keys, resets, node checks, moves, conversion).
use strict;
use warnings;
use lib 'test';
use HTTP::Tiny;
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $tmp = $PostgreSQL::Test::Utils::tmp_check;
my $pause_lock = 7236949375;

# ---------------------------------------------------------------------
# The programs
# ---------------------------------------------------------------------
sub program
{
	my ($name) = @_;
	for my $dir (split /:/, $ENV{PATH} // '')
	{
		return "$dir/$name" if -x "$dir/$name";
	}
	return undef;
}
my $exporter_bin = program('prometheus-postgres-exporter');
my $promtool = program('promtool');
ok($exporter_bin, 'Debian\'s prometheus-postgres-exporter is installed');
ok($promtool, 'promtool (Debian\'s prometheus) is installed');
if (!$exporter_bin || !$promtool)
{
	diag 'test/lib.sh lists the packages prometheus-postgres-exporter and prometheus';
	done_testing();
	exit 1;
}

# ---------------------------------------------------------------------
# (1) The alert rules
# ---------------------------------------------------------------------
sub run_promtool
{
	my ($in, @args) = @_;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run([ $promtool, @args ], '<', \$in, '>', \$out, '2>', \$err);
	return ($ok, "$out$err");
}
my ($ok, $out) = run_promtool('', 'check', 'rules', 'monitoring/alerts.yml');
ok($ok, '(1) promtool check rules: the rules load') or diag $out;
($ok, $out) = run_promtool('', 'test', 'rules', 'monitoring/alerts_test.yml');
ok($ok, '(1) promtool test rules: every unit test of the rules passes') or diag $out;

my @alerts = slurp_file('monitoring/alerts.yml') =~ /^\s*- alert: (\w+)$/mg;
my $guide = slurp_file('docs/monitoring.md');
my (%fires, %quiet);
for my $case (split /- eval_time:/, slurp_file('monitoring/alerts_test.yml'))
{
	my ($name) = $case =~ /alertname: (\w+)/ or next;
	if ($case =~ /exp_labels:/) { $fires{$name}++; }
	else { $quiet{$name}++; }
}
is(scalar(@alerts), 16, '(1) the rules hold 16 alerts');
for my $alert (@alerts)
{
	ok($fires{$alert} && $quiet{$alert}, "(1) $alert: a unit test where it fires and one where it stays quiet");
	like($guide, qr/^### $alert$/m, "(1) $alert: a section of docs/monitoring.md");
}

# ---------------------------------------------------------------------
# What the guide and the query file say
# ---------------------------------------------------------------------
# The guide's table: | `name` | type | `label`, ... | meaning |
my %doc;
for my $line (split /\n/, $guide)
{
	next unless $line =~ /^\| `(snowseq_\w+)` \| (gauge|counter) \| ([^|]*)\|/;
	my ($m, $type, $l) = ($1, $2, $3);
	my @labels = $l =~ /`(\w+)`/g;
	$doc{$m} = { type => $type, labels => [ sort @labels ] };
}
ok(scalar(keys %doc) >= 20, 'the guide lists ' . scalar(keys %doc) . ' metrics');

# The query file: each query's columns, metrics or labels.
my (%file_metric, %file_labels, $ns, $col);
for my $line (split /\n/, slurp_file('monitoring/queries.yaml'))
{
	if ($line =~ /^(snowseq\w*):$/) { $ns = $1; $file_labels{$ns} = []; }
	elsif ($line =~ /^    - (\w+):$/) { $col = $1; }
	elsif ($line =~ /^        usage: "(\w+)"$/)
	{
		if ($1 eq 'LABEL') { push @{ $file_labels{$ns} }, $col; }
		else { $file_metric{"${ns}_$col"} = [ $ns, lc $1 ]; }
	}
}
for my $m (sort keys %file_metric)
{
	my ($q, $type) = @{ $file_metric{$m} };
	my @labels = sort @{ $file_labels{$q} };
	is_deeply($doc{$m}, { type => $type, labels => \@labels },
		"query file: $m, a $type, labels (@labels), is in the guide's table");
}
is_deeply([ sort keys %doc ], [ sort keys %file_metric ], 'the guide lists no metric the query file lacks');

# ---------------------------------------------------------------------
# (2) Servers and exporters
# ---------------------------------------------------------------------
my @shard_conf = shard_conf();
my $router = snowseq_node('router', node_id => 1, conf => [ 'snowseq.backfill_node_id = 1000' ]);
# the clock server's wall clock starts 60 s past a unit boundary (libfaketime)
my $fake = "$tmp/clock_offset";
my $to_unit = seconds_to_next_unit(86400000) + 60;
set_fake_offset($fake, "+${to_unit}s");
my $clock = snowseq_node('clock', node_id => 5, faketime => $fake, conf => [ 'snowseq.time_unit_ms = 86400000',
	'snowseq.time_bits = 20', 'snowseq.seq_bits = 4', 'snowseq.max_lead_ms = 86400000' ]);
my $sa = snowseq_node('shard_a', node_id => 2, conf => \@shard_conf);
my $sb = snowseq_node('shard_b', node_id => 3, conf => \@shard_conf);

# the exporter's role, and the status functions as 1.3 grants them
for my $n ($router, $clock)
{
	$n->safe_psql('postgres', q{
		CREATE ROLE prometheus LOGIN;
		GRANT pg_monitor TO prometheus;
	});
}
is($router->safe_psql('postgres', q{
	SELECT string_agg(g.rolname, ',') || ' ' || bool_or(r.rolsuper)::text
	FROM pg_roles r JOIN pg_auth_members m ON m.member = r.oid JOIN pg_roles g ON g.oid = m.roleid
	WHERE r.rolname = 'prometheus'}), 'pg_monitor false', '(2) the exporter\'s role is a member of pg_monitor only, no superuser');

# A counter of another role, on the router
$router->safe_psql('postgres', q{
	CREATE ROLE app LOGIN;
	GRANT EXECUTE ON FUNCTION snowseq_create_counter(text, bigint, integer, boolean, bigint) TO app;
	GRANT EXECUTE ON FUNCTION snowseq_counter_next(text) TO app;
	SET ROLE app;
	SELECT snowseq_create_counter('orders_no');
	SELECT snowseq_counter_next('orders_no') FROM generate_series(1, 10);
});

# Start an exporter for $node; returns [harness, url, log].  Releases that
# have the stat_user_tables collector (on by default) run without it, as
# docs/monitoring.md advises for a router: it locks every table at each
# scrape, so a scrape would wait for the move that (4) holds paused with its
# table locked.
my @collectors;
{
	my $help = '';
	IPC::Run::run([ $exporter_bin, '--help' ], '>', \$help, '2>&1');
	push @collectors, '--no-collector.stat_user_tables' if $help =~ /collector\.stat_user_tables/;
}
sub start_exporter
{
	my ($node) = @_;
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $log = "$tmp/exporter_" . $node->name . '.log';
	local $ENV{DATA_SOURCE_NAME} = sprintf('host=%s port=%d user=prometheus dbname=postgres sslmode=disable',
		$node->host, $node->port);
	my $h = IPC::Run::start([ $exporter_bin, '--extend.query-path=monitoring/queries.yaml',
			"--web.listen-address=127.0.0.1:$port", @collectors ],
		'<', \undef, '>', $log, '2>&1');
	return [ $h, "http://127.0.0.1:$port/metrics", $log ];
}
my %exporter = (router => start_exporter($router), clock => start_exporter($clock));
END
{
	# (the exporters' exit status must not become the test's)
	local $?;
	for my $e (values %exporter) { eval { $e->[0]->kill_kill }; }
}

my $http = HTTP::Tiny->new(timeout => $PostgreSQL::Test::Utils::timeout_default);

# One scrape of an exporter: its text, or undef.
sub scrape_text
{
	my ($name) = @_;
	my $r = $http->get($exporter{$name}[1]);
	return $r->{success} ? $r->{content} : undef;
}

# A scrape as { text, types => {name => type}, samples => [[name, {labels}, value], ...] }.
sub scrape
{
	my ($name) = @_;
	my $text;
	wait_until(sub { $text = scrape_text($name); defined $text && $text =~ /^snowseq_state_ok/m })
	  or die "no snowseq metrics from the $name exporter:\n" . ($text // 'no answer') . "\n"
	  . slurp_file($exporter{$name}[2]);
	my %s = (text => $text, types => {}, samples => []);
	for my $line (split /\n/, $text)
	{
		if ($line =~ /^# TYPE (\S+) (\S+)$/) { $s{types}{$1} = $2; next; }
		next if $line =~ /^#/ || $line !~ /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/;
		my ($metric, $labels, $value) = ($1, $2 // '', $3);
		my %l = $labels =~ /(\w+)="((?:[^"\\]|\\.)*)"/g;
		push @{ $s{samples} }, [ $metric, \%l, $value ];
	}
	return \%s;
}

# The samples of a metric whose labels include %want.
sub samples_of
{
	my ($s, $metric, %want) = @_;
	return grep {
		my $l = $_->[1];
		$_->[0] eq $metric && !grep { ($l->{$_} // "\0") ne $want{$_} } keys %want
	} @{ $s->{samples} };
}

# The value of the one sample of a metric with those labels (undef: not one).
sub value_of
{
	my @s = samples_of(@_);
	return @s == 1 ? $s[0][2] : undef;
}

# The state of a server as snowseq_status() gives it, as a hash.
sub status
{
	my ($node) = @_;
	my @cols = qw(lead max_lead lead_waits backward borrows issued remaining state_ok worker);
	my @v = split /\|/, $node->safe_psql('postgres', q{
		SELECT EXTRACT(epoch FROM drift), EXTRACT(epoch FROM max_lead), lead_waits, clock_backward_events,
			overflow_borrows, ids_issued, COALESCE(EXTRACT(epoch FROM lifetime_left)::text, 'inf'),
			(state = 'ok')::int, worker_running::int
		FROM snowseq_status()});
	my %h;
	@h{@cols} = @v;
	return \%h;
}

# Between, with the slack of a ms rounding: $lo <= $v <= $hi.
sub between { my ($v, $lo, $hi) = @_; return defined $v && $v >= $lo - 0.001 && $v <= $hi + 0.001; }

# the worker runs on both (worker_running), before anything is compared
for my $n ($router, $clock)
{
	$n->poll_query_until('postgres', 'SELECT worker_running FROM snowseq_status()')
	  or die 'the reservation worker did not start on ' . $n->name;
}

# The clock server's events, each counted a different number of times (a
# value read from the wrong column does not pass): the wall clock steps
# back twice, 20 s each time (still past the unit boundary), with an ID
# after each step (2 backward events at least: readings of backends racing
# around a step under libfaketime may count more); then IDs fill today's
# unit and tomorrow's (the bound on the lead is one unit), the first of
# tomorrow's borrowing it (1 borrow); then each call waits for tomorrow,
# counted as a lead wait as it begins to wait, and is cancelled, until
# there are more lead waits than backward events.
for my $back (40, 20)
{
	$clock->safe_psql('postgres', 'SELECT snowseq_next()');
	set_fake_offset($fake, '+' . ($to_unit - 60 + $back) . 's');
	$clock->safe_psql('postgres', 'SELECT snowseq_next()');
}
sub lead_waits { return $clock->safe_psql('postgres', 'SELECT lead_waits FROM snowseq_status()'); }

# One call of snowseq_next() on the clock server: returns whether it waited
# at the bound on the lead (then it was cancelled).
sub next_or_wait
{
	my $before = lead_waits();
	my ($o, $e) = ('', '');
	my $h = IPC::Run::start([ 'psql', '-X', '-At', '-d', $clock->connstr('postgres'), '-c', 'SELECT snowseq_next()' ],
		'<', \undef, '>', \$o, '2>', \$e);
	my $waited = 0;
	wait_until(sub {
			$h->pump_nb if $h->pumpable;
			return 1 unless $h->pumpable;
			$waited = lead_waits() > $before;
			return $waited;
		}) or die 'snowseq_next() on the clock server neither returned nor waited at the bound';
	$clock->safe_psql('postgres', q{SELECT pg_cancel_backend(pid) FROM pg_stat_activity
		WHERE query = 'SELECT snowseq_next()' AND pid <> pg_backend_pid()}) if $waited;
	$h->finish;
	return $waited;
}
my ($calls, $waits) = (0, 0);
sub events
{
	return split / /, $clock->safe_psql('postgres',
		q{SELECT clock_backward_events || ' ' || overflow_borrows || ' ' || lead_waits FROM snowseq_status()});
}
while ($calls < 200)
{
	my ($backward, $borrows, $lead_waits) = events();
	last if $lead_waits > $backward && $lead_waits >= 3;
	$calls++;
	$waits += next_or_wait();
}
my ($backward, $borrows, $lead_waits) = events();
ok($waits >= 3 && $waits == $lead_waits, "(3) clock: of $calls more calls of snowseq_next(), the last $waits waited at the bound on the lead");
ok($backward >= 2 && $borrows == 1 && $lead_waits > $backward,
	"(3) clock: $backward backward steps of the wall clock, $borrows borrow, $lead_waits lead waits");

my %s;
my %before = (router => status($router), clock => status($clock));
$s{$_} = scrape($_) for qw(router clock);
my %after = (router => status($router), clock => status($clock));

# Every documented metric, of its type, with its labels; nothing else
my %seen;
for my $name (qw(router clock))
{
	for my $sample (@{ $s{$name}{samples} })
	{
		my ($m, $l) = @$sample;
		next unless $m =~ /^snowseq_/;
		$seen{$m} = 1;
		my @labels = sort grep { $_ ne 'server' } keys %$l;
		is_deeply(\@labels, $doc{$m} ? $doc{$m}{labels} : ['(not in the guide)'], "(2) $name: $m has the guide's labels")
		  unless $seen{"$name $m"}++;
	}
	for my $m (grep { $seen{"$name $_"} } sort keys %doc)
	{
		is($s{$name}{types}{$m}, $doc{$m}{type}, "(2) $name: $m is a $doc{$m}{type}");
	}
}
# the moves' series appear with a move (4)
my @missing = grep { !$seen{$_} && !/^snowseq_(?:move|merge|rebalance)_/ } sort keys %doc;
is_deeply(\@missing, [], '(2) every metric of the guide is scraped (moves, merges, rebalance runs: below)');

# the names pass promtool's lint
my $snowseq_text = join("\n", grep { /^(# (HELP|TYPE) )?snowseq_/ } split /\n/, $s{router}{text}) . "\n";
($ok, $out) = run_promtool($snowseq_text, 'check', 'metrics');
ok($ok && $out !~ /\S/, '(2) promtool check metrics: the names and types follow Prometheus\' rules') or diag $out;

# no query failed
for my $name (qw(router clock))
{
	my $log = slurp_file($exporter{$name}[2]);
	my %failed = map { $_ => 1 } $log =~ /Error running query on database[^\n]*?(snowseq\w*)/g;
	is_deeply([ sort keys %failed ], [], "(2) $name: no query of the file fails");
	unlike($log, qr/permission denied/, "(2) $name: the exporter's role is refused nothing");
}

# ---------------------------------------------------------------------
# (3) Values
# ---------------------------------------------------------------------
my %node_sql = (router => $router, clock => $clock);
for my $name (qw(router clock))
{
	my $n = $node_sql{$name};
	my ($sysid, $start) = split /\|/, $n->safe_psql('postgres', q{
		SELECT system_identifier, EXTRACT(epoch FROM date_trunc('second', pg_postmaster_start_time()))::bigint
		FROM pg_control_system()});
	my %want = (router => [ '1', '1000' ], clock => [ '5', '' ]);
	is(value_of($s{$name}, 'snowseq_node_info', node_id => $want{$name}[0], backfill_node_id => $want{$name}[1],
			system_identifier => $sysid, start_time => $start, standby => 'false'),
		1, "(3) $name: node_info names node $want{$name}[0], backfill node id '$want{$name}[1]', the system identifier and start time, no standby");
	is(value_of($s{$name}, 'snowseq_state_ok'), 1, "(3) $name: the state file is ok");
	is(value_of($s{$name}, 'snowseq_reservation_worker_up'), 1, "(3) $name: the worker runs");
	my ($b, $a) = ($before{$name}, $after{$name});
	is(value_of($s{$name}, 'snowseq_clock_max_lead_seconds'), $name eq 'clock' ? 86400 : 10,
		"(3) $name: the bound on the lead is snowseq.max_lead_ms");
	for my $c ([ 'lead_waits', 'snowseq_clock_lead_waits_total' ], [ 'backward', 'snowseq_clock_backward_events_total' ],
		[ 'borrows', 'snowseq_clock_overflow_borrows_total' ], [ 'issued', 'snowseq_ids_issued_total' ])
	{
		my ($col, $m) = @$c;
		ok(between(value_of($s{$name}, $m), $b->{$col}, $a->{$col}),
			"(3) $name: $m " . (value_of($s{$name}, $m) // 'missing') . " is what snowseq_status() says ($b->{$col} .. $a->{$col})");
	}
	# the lead falls as the wall clock runs: the scrape's lies between the
	# readings before and after it
	ok(between(value_of($s{$name}, 'snowseq_clock_lead_seconds'), $a->{lead}, $b->{lead}),
		"(3) $name: the lead " . (value_of($s{$name}, 'snowseq_clock_lead_seconds') // 'missing')
		  . " s lies between the server's readings ($b->{lead} .. $a->{lead})");
	ok(between(value_of($s{$name}, 'snowseq_time_field_remaining_seconds'), $a->{remaining}, $b->{remaining}),
		"(3) $name: the time field's lifetime left is snowseq_status()'s");
}
my $day = 86400;
ok(between(value_of($s{clock}, 'snowseq_clock_lead_seconds'), 0, $day),
	'(3) clock: at its bound it leads by up to a day');
my ($w, $b, $o) = map { value_of($s{clock}, "snowseq_clock_$_") // -1 } qw(lead_waits_total backward_events_total overflow_borrows_total);
ok($w > $b && $b >= 2 && $o == 1, "(3) clock: more lead waits ($w) than backward steps ($b), at least 2, and one borrow ($o)");
is(value_of($s{router}, 'snowseq_clock_backward_events_total'), 0, '(3) router: no backward step of the clock');
ok(between(value_of($s{router}, 'snowseq_time_field_remaining_seconds'), 67 * 365 * $day, 70 * 365 * $day),
	'(3) router: 41 bits of ms from 2025 leave 67 to 70 years');
ok(between(value_of($s{clock}, 'snowseq_time_field_remaining_seconds'), 2860 * 365 * $day, 2880 * 365 * $day),
	'(3) clock: 20 bits of days from 2025 leave about 2871 years');

# IDs taken raise the issued counter
my $issued = value_of($s{router}, 'snowseq_ids_issued_total');
$router->safe_psql('postgres', 'SELECT count(snowseq_next()) FROM generate_series(1, 1000)');
$s{router} = scrape('router');
ok(value_of($s{router}, 'snowseq_ids_issued_total') >= $issued + 1000,
	"(3) router: 1000 IDs taken raise ids_issued_total from $issued to " . value_of($s{router}, 'snowseq_ids_issued_total'));

# Reservations: the clock's and the named counter's, as snowseq_reservations() says
sub reservations
{
	return { map { split /\|/ } split /\n/, $router->safe_psql('postgres',
			q{SELECT kind, sum(advances) || ',' || sum(waits) FROM snowseq_reservations() GROUP BY kind}) };
}
my $res_before = reservations();
$s{router} = scrape('router');
my $res_after = reservations();
for my $kind ('clock', 'orders_no')
{
	my %l = (reservation => $kind, database => $kind eq 'clock' ? '' : 'postgres');
	my ($adv, $waits) = (value_of($s{router}, 'snowseq_reservation_advances_total', %l),
		value_of($s{router}, 'snowseq_reservation_waits_total', %l));
	ok(defined $adv && $adv >= 1, "(3) router: reservation $kind advanced (" . ($adv // 'missing') . ')');
	my ($a0, $w0) = split /,/, $res_before->{$kind} // '';
	my ($a1, $w1) = split /,/, $res_after->{$kind} // '';
	ok(between($adv, $a0, $a1) && between($waits, $w0, $w1),
		"(3) router: reservation $kind: advances and waits as snowseq_reservations() says");
}

# Key versions left: 2^6 - 1, then two fewer
is(value_of($s{router}, 'snowseq_key_versions_remaining', database => 'postgres'), 63, '(3) router: 63 key versions left');
$router->safe_psql('postgres', 'SELECT snowseq_new_key(); SELECT snowseq_new_key();');
$s{router} = scrape('router');
is(value_of($s{router}, 'snowseq_key_versions_remaining', database => 'postgres'), 61, '(3) router: 61 after two keys');

# What is left of bounded spaces, as snowseq_capacity says: key versions
# (the server's), and a counter with a maximum and a serial (the database's)
$router->safe_psql('postgres', q{
	SELECT snowseq_create_counter('tickets', maximum => 100);
	SELECT snowseq_counter_next('tickets') FROM generate_series(1, 30);
	SELECT snowseq_create_serial('receipts', 'R-YYYY-###');
	SELECT snowseq_serial('receipts') FROM generate_series(1, 99);});
$s{router} = scrape('router');
is(value_of($s{router}, 'snowseq_capacity_remaining', kind => 'key version', name => 'key versions of this cluster'), 61,
	'(3) router: capacity: 61 key versions left');
is(value_of($s{router}, 'snowseq_capacity_remaining_ratio', kind => 'key version', name => 'key versions of this cluster'),
	$router->safe_psql('postgres', q{SELECT remaining_ratio FROM snowseq_capacity WHERE kind = 'key version'}),
	'(3) router: capacity: their ratio is the view\'s');
is(value_of($s{router}, 'snowseq_database_capacity_remaining', database => 'postgres', kind => 'counter', name => 'tickets'), 70,
	'(3) router: counter capacity: 70 of tickets\' 100 values left, read by a role of pg_monitor alone');
is(value_of($s{router}, 'snowseq_database_capacity_remaining_ratio', database => 'postgres', kind => 'counter', name => 'tickets'), 0.7,
	'(3) router: counter capacity: a ratio of 0.7');
is(value_of($s{router}, 'snowseq_database_capacity_remaining', database => 'postgres', kind => 'serial', name => 'receipts'), 900,
	'(3) router: counter capacity: 900 of the serial\'s 999 numbers of this year left');
is(scalar(grep { $_->[0] =~ /^snowseq_capacity_remaining/ && exists $_->[1]{database} && length $_->[1]{database} }
		@{ $s{router}{samples} }), 0, '(3) router: the server\'s spaces carry no database');

# ---------------------------------------------------------------------
# (4) A move paused after the router's commit of its switch
# ---------------------------------------------------------------------
$sa->safe_psql('postgres', q{CREATE TABLE orders (order_id bigint PRIMARY KEY, buyer_id text NOT NULL)});
my $servers = '';
for my $sv ([ 'shard_a', $sa ], [ 'shard_b', $sb ])
{
	$servers .= sprintf("CREATE SERVER %s FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '%s', port '%s', dbname 'postgres');\n"
		  . "CREATE USER MAPPING FOR CURRENT_USER SERVER %s;\n", $sv->[0], $sv->[1]->host, $sv->[1]->port, $sv->[0]);
}
$router->safe_psql('postgres', "CREATE EXTENSION postgres_fdw;\n$servers" . q{
CREATE TABLE orders (order_id bigint NOT NULL, buyer_id text NOT NULL) PARTITION BY RANGE (order_id);
CREATE FOREIGN TABLE orders_0 PARTITION OF orders FOR VALUES FROM (0) TO (MAXVALUE)
	SERVER shard_a OPTIONS (table_name 'orders');
INSERT INTO snowseq_shard_map VALUES (32767, 'shard_a');
INSERT INTO orders SELECT snowseq_gene_next('b' || i), 'b' || i FROM generate_series(1, 2000) i;
});
my $moving = $router->safe_psql('postgres', q{SELECT count(*) FROM orders WHERE order_id >= 16384::bigint << 48});
ok($moving > 500 && $moving < 1500, "(4) genes 16384 to 32767 hold $moving of 2000 orders");

is(value_of($s{router}, 'snowseq_moves_in_progress', database => 'postgres'), 0, '(4) no move in progress yet');
is(scalar(samples_of($s{router}, 'snowseq_move_phase_age_seconds')), 0, '(4) and no move\'s series');

my $locker = $router->background_psql('postgres');
$locker->query_safe("SELECT pg_advisory_lock($pause_lock)");
my ($mout, $merr) = ('', '');
my $mover = IPC::Run::start([ 'psql', '-X', '-d', $router->connstr('postgres'),
		'-c', "SET snowseq.test_pause_at = 'move_after_router_commit'",
		'-c', q{CALL snowseq_split_shard('orders', 16384, 'shard_b')} ],
	'<', \undef, '>', \$mout, '2>', \$merr);
ok($router->poll_query_until('postgres', q{
	SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event = 'advisory' AND query LIKE 'CALL%'}),
	'(4) the split paused after the router committed its switch');

$s{router} = scrape('router');
is(value_of($s{router}, 'snowseq_moves_in_progress', database => 'postgres'), 1, '(4) one move in progress');
my ($move_id) = $router->safe_psql('postgres', 'SELECT max(move_id) FROM snowseq_moves');
my %labels = (database => 'postgres', move_id => $move_id, parent => 'orders', first_gene => '16384',
	last_gene => '32767', source_server => 'shard_a', dest_server => 'shard_b', phase => 'switched');
my %move = map { $_ => value_of($s{router}, "snowseq_move_$_", %labels) }
  qw(phase_age_seconds progress_age_seconds lag_bytes copied_bytes copied_rows source_rows);
ok(defined $move{phase_age_seconds} && $move{phase_age_seconds} >= 0,
	"(4) its phase is switched, of genes 16384 to 32767 of orders from shard_a to shard_b, for $move{phase_age_seconds} s")
  or diag explain [ samples_of($s{router}, 'snowseq_move_phase_age_seconds') ];
is("$move{copied_rows} $move{source_rows}", "$moving $moving", "(4) rows copied and to copy: the $moving rows moved");
ok(defined $move{copied_bytes} && $move{copied_bytes} > 0, "(4) bytes copied: $move{copied_bytes}");
ok(defined $move{lag_bytes} && $move{lag_bytes} >= 0, "(4) lag: $move{lag_bytes} bytes");
ok(defined $move{progress_age_seconds} && $move{progress_age_seconds} >= $move{phase_age_seconds} - 0.001,
	"(4) progress last recorded before the phase began ($move{progress_age_seconds} s ago)");
# the phase's age grows while it waits (a condition, not a time)
my $first_age = $move{phase_age_seconds};
ok(wait_until(sub {
			my $age = value_of(scrape('router'), 'snowseq_move_phase_age_seconds', %labels);
			defined $age && $age > $first_age + 1;
		}), '(4) the phase\'s age grows while the move waits');

$locker->query_safe("SELECT pg_advisory_unlock($pause_lock)");
$mover->finish;
$locker->quit;
is($router->safe_psql('postgres', "SELECT state FROM snowseq_moves WHERE move_id = $move_id"), 'done',
	'(4) the split finished') or diag $merr;
$s{router} = scrape('router');
is(value_of($s{router}, 'snowseq_moves_in_progress', database => 'postgres'), 0, '(4) then no move in progress');
is(scalar(samples_of($s{router}, 'snowseq_move_phase_age_seconds')), 0, '(4) and no move\'s series');

# ---------------------------------------------------------------------
# (4b) A merge paused before the router's commit; a rebalance run whose
# session is killed during its first move
# ---------------------------------------------------------------------
is(value_of($s{router}, 'snowseq_merges_in_progress', database => 'postgres'), 0, '(4b) no merge in progress');
is(value_of($s{router}, 'snowseq_merges_failed_total', database => 'postgres'), 0, '(4b) and none failed');
is(scalar(samples_of($s{router}, 'snowseq_rebalance_runner_up')), 0, '(4b) no rebalance run\'s series');
# the split's genes come back: two neighbouring partitions on shard_a
$router->safe_psql('postgres', q{CALL snowseq_move_to_neighbour('orders', 30000)});
$locker = $router->background_psql('postgres');
$locker->query_safe("SELECT pg_advisory_lock($pause_lock)");
my $merger = IPC::Run::start([ 'psql', '-X', '-d', $router->connstr('postgres'),
		'-c', "SET snowseq.test_pause_at = 'merge_before_router_commit'",
		'-c', q{CALL snowseq_merge_partitions('orders', 0, 32767)} ],
	'<', \undef, '>', \$mout, '2>', \$merr);
ok($router->poll_query_until('postgres', q{
	SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event = 'advisory' AND query LIKE 'CALL%'}),
	'(4b) the merge paused before the router\'s commit');
$s{router} = scrape('router');
my ($merge_id, $merge_phase) = split /\|/, $router->safe_psql('postgres',
	'SELECT merge_id, state FROM snowseq_merges WHERE group_merge IS NULL ORDER BY merge_id DESC LIMIT 1');
is(value_of($s{router}, 'snowseq_merges_in_progress', database => 'postgres'), 1, '(4b) one merge in progress');
my $merge_age = value_of($s{router}, 'snowseq_merge_phase_age_seconds', database => 'postgres', merge_id => $merge_id,
	parent => 'orders', first_gene => '0', last_gene => '32767', shard_server => 'shard_a', phase => $merge_phase);
ok(defined $merge_age && $merge_age >= 0, "(4b) merge $merge_id of orders, genes 0 to 32767 on shard_a, in phase $merge_phase for $merge_age s")
  or diag explain [ samples_of($s{router}, 'snowseq_merge_phase_age_seconds') ];
$locker->query_safe("SELECT pg_advisory_unlock($pause_lock)");
$merger->finish;
is($router->safe_psql('postgres', "SELECT state FROM snowseq_merges WHERE merge_id = $merge_id"), 'done', '(4b) the merge finished')
  or diag $merr;
$s{router} = scrape('router');
is(value_of($s{router}, 'snowseq_merges_in_progress', database => 'postgres'), 0, '(4b) then no merge in progress');
is(scalar(samples_of($s{router}, 'snowseq_merge_phase_age_seconds')), 0, '(4b) and no merge\'s series');

# a rebalance that gives shard_b (not in the map now) its share, its first
# move paused after its copy
$locker->query_safe("SELECT pg_advisory_lock($pause_lock)");
my $runner = IPC::Run::start([ 'psql', '-X', '-d', $router->connstr('postgres'),
		'-c', "SET snowseq.test_pause_at = 'move_after_copy'",
		'-c', q{CALL snowseq_rebalance('orders', fill => '{shard_b}')} ],
	'<', \undef, '>', \$mout, '2>', \$merr);
ok($router->poll_query_until('postgres', q{
	SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event = 'advisory' AND query LIKE 'CALL%'}),
	'(4b) the rebalance\'s first move paused after its copy');
my $run_id = $router->safe_psql('postgres', 'SELECT max(run_id) FROM snowseq_rebalance_runs');
my %rl = (database => 'postgres', run_id => $run_id, parent => 'orders', state => 'running');
$s{router} = scrape('router');
my %run = map { $_ => value_of($s{router}, "snowseq_rebalance_$_", %rl) } qw(runner_up age_seconds steps steps_done steps_failed copied_rows);
is("$run{runner_up} $run{steps_done} $run{steps_failed} $run{copied_rows}", '1 0 0 0',
	'(4b) the run is running, its session there, no step done or failed yet')
  or diag explain [ samples_of($s{router}, 'snowseq_rebalance_runner_up') ];
ok($run{steps} >= 1 && $run{age_seconds} >= 0, "(4b) $run{steps} steps planned, begun $run{age_seconds} s ago");
# the session goes (a closed laptop): the run stays open, no one runs it
$router->safe_psql('postgres', q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity
	WHERE query LIKE 'CALL snowseq_rebalance%' AND pid <> pg_backend_pid()});
$locker->query_safe("SELECT pg_advisory_unlock($pause_lock)");
$runner->finish;
$locker->quit;
$s{router} = scrape('router');
is(value_of($s{router}, 'snowseq_rebalance_runner_up', %rl), 0,
	'(4b) its session gone, the open run shows no runner (SnowseqRebalanceRunnerGone)');
$router->safe_psql('postgres', q{SELECT count(*) FROM snowseq_move_cleanup();
	SELECT snowseq_rebalance_stop('orders', abandon => true)});
$s{router} = scrape('router');
is(scalar(samples_of($s{router}, 'snowseq_rebalance_runner_up')), 0, '(4b) given up: no rebalance run\'s series');

# ---------------------------------------------------------------------
# (5) What the exporter's role cannot do
# ---------------------------------------------------------------------
my @refused = (
	[ 'SELECT * FROM snowseq_key_store', qr/permission denied for table snowseq_key_store/ ],
	[ 'SELECT * FROM snowseq_keys', qr/permission denied for view snowseq_keys/ ],
	[ 'SELECT state, created FROM snowseq_keys', qr/permission denied for view snowseq_keys/ ],
	[ 'SELECT token FROM snowseq_moves', qr/permission denied for table snowseq_moves/ ],
	[ 'SELECT error FROM snowseq_moves', qr/permission denied for table snowseq_moves/ ],
	[ 'SELECT * FROM snowseq_fence', qr/permission denied for table snowseq_fence/ ],
	[ 'SELECT token FROM snowseq_merges', qr/permission denied for table snowseq_merges/ ],
	[ 'SELECT error FROM snowseq_merges', qr/permission denied for table snowseq_merges/ ],
	[ 'SELECT error FROM snowseq_rebalance_steps', qr/permission denied for table snowseq_rebalance_steps/ ],
	[ 'SELECT drain FROM snowseq_rebalance_runs', qr/permission denied for table snowseq_rebalance_runs/ ],
	[ q{SELECT snowseq_counter_state('orders_no')}, qr/permission denied for counter "orders_no"/ ],
	[ q{SELECT snowseq_counter_next('orders_no')}, qr/permission denied for function snowseq_counter_next/ ],
	[ q{SELECT snowseq_counter_raise('orders_no', 100)}, qr/permission denied for function snowseq_counter_raise/ ],
	[ q{SELECT snowseq_serial('orders_no')}, qr/permission denied for function snowseq_serial/ ],
	[ q{SELECT snowseq_create_counter('mine')}, qr/permission denied/ ],
	[ 'SELECT snowseq_next_n(1)', qr/permission denied for function snowseq_next_n/ ],
	[ q{SELECT snowseq_id_at(now() - interval '1 day')}, qr/permission denied for function snowseq_id_at/ ],
	[ q{SELECT snowseq_uuid_at(now() - interval '1 day')}, qr/permission denied for function snowseq_uuid_at/ ],
	[ 'SELECT snowseq_encrypt(1)', qr/permission denied for function snowseq_encrypt/ ],
	[ 'SELECT snowseq_decrypt(1)', qr/permission denied for function snowseq_decrypt/ ],
	[ 'SELECT snowseq_public_text(1)', qr/permission denied for function snowseq_public_text/ ],
	[ 'SELECT snowseq_new_key()', qr/permission denied for function snowseq_new_key/ ],
	[ q{SELECT snowseq_import_wrap_keys('snowseq_keyring')}, qr/permission denied for function snowseq_import_wrap_keys/ ],
	[ 'SELECT snowseq_reset_state()', qr/permission denied for function snowseq_reset_state/ ],
	[ 'SELECT * FROM snowseq_check_nodes()', qr/permission denied for function snowseq_check_nodes/ ],
	[ 'SELECT * FROM snowseq_move_cleanup()', qr/permission denied for function snowseq_move_cleanup/ ],
	[ q{CALL snowseq_move_genes('orders', 0, 1, 'shard_b')}, qr/permission denied for procedure snowseq_move_genes/ ],
	[ q{SELECT snowseq_convert('orders', 'order_id')}, qr/permission denied for function snowseq_convert/ ],
	[ q{INSERT INTO snowseq_shard_map VALUES (1, 'x')}, qr/permission denied for table snowseq_shard_map/ ],
	[ q{SELECT pg_read_binary_file('snowseq.state')}, qr/permission denied for function pg_read_binary_file/ ],
	[ q{SELECT pg_read_binary_file('snowseq_keyring')}, qr/permission denied for function pg_read_binary_file/ ],
);
for my $r (@refused)
{
	my ($sql, $re) = @$r;
	my ($ret, $o, $e) = $router->psql('postgres', $sql, extra_params => [ '-U', 'prometheus' ]);
	ok($ret != 0 && $e =~ $re, "(5) the exporter's role is refused: $sql") or diag "returned $ret: $o $e";
}
# the state of every counter, as pg_read_all_stats sees every statement's
# statistics: to watch what is left (drawing, raising: refused above)
is($router->safe_psql('postgres', 'SELECT string_agg(name, \',\' ORDER BY name) FROM snowseq_counter_status',
		extra_params => [ '-U', 'prometheus' ]),
	'orders_no,receipts,tickets', '(5) snowseq_counter_status shows the exporter\'s role the state of every counter, other roles\' too (pg_read_all_stats)');
# what it reads, it reads through pg_monitor
$router->safe_psql('postgres', 'REVOKE pg_monitor FROM prometheus');
for my $sql ('SELECT node_id FROM snowseq_status()', 'SELECT count(*) FROM snowseq_reservations()',
	'SELECT max(version) FROM snowseq_keys', 'SELECT count(*) FROM snowseq_move_progress',
	'SELECT max(started_at) FROM snowseq_moves')
{
	my ($ret, $o, $e) = $router->psql('postgres', $sql, extra_params => [ '-U', 'prometheus' ]);
	ok($ret != 0 && $e =~ /permission denied/, "(5) without pg_monitor the role is refused: $sql");
}

done_testing();
