# Elastic shards, replication faults: a move rides out what PostgreSQL's
# logical replication heals by itself, and fails on an error that persists,
# with that error's text.
#
#   router  (node 1): events PARTITION BY RANGE (event_id), one postgres_fdw
#                     partition on shard_a for every gene
#   shard_a (node 2), shard_b (node 3): wal_level = logical
#
# The faults are injected on purpose, at instants the test holds still: the
# table the copy lands in on shard_b carries an ENABLE ALWAYS trigger that,
# for a row whose payload is 'gate', waits for an advisory lock the test
# holds (the gate), so the copy or the streaming stops at that row until the
# test opens it.
# (1) Mid-copy (the table synchronisation stopped at a gate row of the
#     source): the table synchronisation worker is terminated, then the apply
#     worker, then the walsender that serves the copy.  Mid-catch-up (the
#     move paused after its copy, the apply worker stopped at a gate row
#     written through the router, then the move let go into its catch-up):
#     the apply worker is terminated, then its walsender.  Each worker comes
#     back (PostgreSQL restarts them), the walsenders' ends are errors of
#     the subscription; the move goes on, says so, and every row is on
#     shard_b once, none of the moved genes left on shard_a.
# (2) An error that persists: a row the destination's trigger refuses
#     (RAISE, SQLSTATE P0001) makes every retry of the copy fail the same
#     way; the move fails with that error's text once it has repeated,
#     and is undone.  A row that breaks a CHECK constraint there (SQLSTATE
#     23514, which no retry heals) fails the move at once, with its text.
#     Without the bad rows the move succeeds.
# (3) The table-sync slots a move records before it enables its
#     subscription are the ones PostgreSQL makes, named after shard_b's
#     system identifier printed unsigned: shard_b's was made in 2040, so
#     its top bit is set.  A move begun under 1.2 recorded none: one stopped
#     mid-copy, its records of them deleted as 1.2 had none, its
#     subscription dropped on shard_b while shard_a could not be reached
#     (which leaves the table-sync slots on shard_a), is cleaned up by
#     snowseq_move_cleanup(), which drops them by the prefix PostgreSQL
#     gives the slots of that subscription.
# (4) Another database of shard_b has a subscription of the name the next
#     move's will have (pg_subscription is shared by a server's databases;
#     a name is unique in one database only): the move takes its own for
#     it nowhere, succeeds, and leaves the other one alone.
# (5) Two databases of the router move from shard_a at once, each with its
#     own move of the same number (every router database numbers its moves
#     from 1): the second one's slot, publication and prepared transaction
#     on shard_a, which are one name space per server, are not the first
#     one's.  Before, both moves took one name: the second failed ("replication
#     slot ... already exists") and its undo dropped the first one's slot.
use strict;
use warnings;
use lib 'test';
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $pause_lock = 7236949375;
my $gate_lock = 4242;

# a worker that failed is started again after wal_retrieve_retry_interval:
# short here, so that the retries of (2) do not take long
my @shard_conf = ('wal_level = logical', 'max_replication_slots = 10', 'max_wal_senders = 10',
	'max_prepared_transactions = 10', 'wal_retrieve_retry_interval = 200ms');
my $router = snowseq_node('router', node_id => 1);
my $sa = snowseq_node('shard_a', node_id => 2, conf => \@shard_conf);
my $sb = snowseq_node('shard_b', node_id => 3, conf => \@shard_conf, init_at => '@2040-01-02 00:00:00');
is($sb->safe_psql('postgres', 'SELECT system_identifier < 0 FROM pg_control_system()'), 't',
	'shard_b, made in 2040, has a system identifier with its top bit set');

my $events = q{CREATE TABLE events (event_id bigint PRIMARY KEY, payload text NOT NULL)};
$sa->safe_psql('postgres', $events);
# genes 0..8191 move: 2000 rows, the gate row among them in the middle of
# the heap, and 2000 rows of other genes; IDs carry a node field no server
# has (1023), so no server issues them again
$sa->safe_psql('postgres', qq{
	INSERT INTO events SELECT ((i % 8192)::bigint << 48) | (i::bigint << 10) | 1023, 'a' FROM generate_series(1, 1000) i;
	INSERT INTO events VALUES ((4000::bigint << 48) | 1023, 'gate');
	INSERT INTO events SELECT ((i % 8192)::bigint << 48) | (i::bigint << 10) | 1023, 'a' FROM generate_series(1001, 2000) i;
	INSERT INTO events SELECT ((8192 + i % 24576)::bigint << 48) | (i::bigint << 10) | 1023, 'a' FROM generate_series(1, 2000) i});
my $total = 4001;

my $servers = fdw_servers_sql('postgres', [ 'shard_a', $sa ], [ 'shard_b', $sb ]);
$router->safe_psql('postgres', "CREATE EXTENSION postgres_fdw;\n$servers" . q{
CREATE TABLE events (event_id bigint NOT NULL, payload text NOT NULL) PARTITION BY RANGE (event_id);
CREATE FOREIGN TABLE events_0 PARTITION OF events FOR VALUES FROM (0) TO (MAXVALUE)
	SERVER shard_a OPTIONS (table_name 'events');
INSERT INTO snowseq_shard_map VALUES (32767, 'shard_a');
});

# The table the copy lands in, made beforehand (empty and matching: the move
# takes it), with the gate, the poison and, if asked, a CHECK constraint.
sub landing_table
{
	my ($check) = @_;
	$sb->safe_psql('postgres', qq{
		CREATE TABLE events (event_id bigint PRIMARY KEY, payload text NOT NULL
			@{[ $check ? ", CONSTRAINT no_bad CHECK (payload <> 'bad')" : '' ]});
		CREATE OR REPLACE FUNCTION gate() RETURNS trigger LANGUAGE plpgsql AS \$\$
		BEGIN
			IF NEW.payload = 'gate' THEN PERFORM pg_advisory_xact_lock_shared($gate_lock); END IF;
			IF NEW.payload = 'poison' THEN RAISE EXCEPTION 'poison row % refused', NEW.event_id; END IF;
			RETURN NEW;
		END \$\$;
		CREATE TRIGGER gate BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION gate();
		ALTER TABLE events ENABLE ALWAYS TRIGGER gate});
}

sub layout { return shard_layout($router, 'postgres', 'events'); }
sub leftovers { return move_leftovers('postgres', $sa, $sb); }

# A backend of shard_b waits at the gate: its pid, or '' (none).
sub gate_waiter
{
	return $sb->safe_psql('postgres', qq{SELECT string_agg(pid::text, ',') FROM pg_locks
		WHERE locktype = 'advisory' AND objid = $gate_lock AND NOT granted});
}
sub wait_gate_waiter
{
	my ($not, $what) = @_;
	ok($sb->poll_query_until('postgres', qq{SELECT count(*) > 0 FROM pg_locks WHERE locktype = 'advisory'
		AND objid = $gate_lock AND NOT granted AND pid::text <> '$not'}), $what);
	return gate_waiter();
}
# the pid of the subscription's apply worker (relid IS NULL) or table
# synchronisation worker on shard_b
sub worker_pid
{
	my ($sync) = @_;
	return $sb->safe_psql('postgres', 'SELECT pid FROM pg_stat_subscription WHERE pid IS NOT NULL AND relid IS '
		  . ($sync ? 'NOT NULL' : 'NULL'));
}
sub terminate
{
	my ($node, $pid, $what) = @_;
	ok($pid =~ /^\d+$/ && $node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)") eq 't', $what);
}

# ---------------------------------------------------------------------
# (1) Transient faults mid-copy and mid-catch-up
# ---------------------------------------------------------------------
landing_table(0);
my $gate = $sb->background_psql('postgres');
$gate->query_safe("SELECT pg_advisory_lock($gate_lock)");
my $locker = $router->background_psql('postgres');
$locker->query_safe("SELECT pg_advisory_lock($pause_lock)");
my ($out, $err) = ('', '');
my $move = IPC::Run::start([ 'psql', '-X', '-d', $router->connstr('postgres'),
	'-c', "SET snowseq.test_pause_at = 'move_after_copy'",
	'-c', q{CALL snowseq_move_genes('events', 0, 8191, 'shard_b')} ], '>', \$out, '2>', \$err);

# mid-copy: the table synchronisation stops at the gate row
my $waiter = wait_gate_waiter('', '(1) the copy stops at the gate row');
# the slots of the copies in progress, and those the move recorded
sub sync_slots
{
	return $sa->safe_psql('postgres', q{SELECT string_agg(slot_name, ',' ORDER BY slot_name)
		FROM pg_replication_slots WHERE slot_name ~ '^pg_[0-9]+_sync_'});
}
sub recorded_sync_slots
{
	return $router->safe_psql('postgres', q{SELECT string_agg(o.name, ',' ORDER BY o.name)
		FROM snowseq_move_objects o JOIN snowseq_moves m USING (move_id)
		WHERE m.move_id = (SELECT max(move_id) FROM snowseq_moves) AND o.kind = 'replication slot' AND o.name <> m.token});
}
my $slots = sync_slots();
like($slots, qr/^pg_\d+_sync_\d+_(?:9[2-9]|1)\d{17,18}$/,
	"(1) shard_a has the copy's table-sync slot, named with shard_b's identifier unsigned ($slots)");
is(recorded_sync_slots(), $slots, '(1) ... and the move recorded it before it existed, by that name');
my $sync = worker_pid(1);
is($waiter, $sync, '(1) ... in the table synchronisation worker');
terminate($sb, $sync, '(1) mid-copy: the table synchronisation worker is terminated');
$waiter = wait_gate_waiter($waiter, '(1) ... PostgreSQL starts it again, and it copies up to the gate again');

my $apply = worker_pid(0);
terminate($sb, $apply, '(1) mid-copy: the apply worker is terminated');
ok($sb->poll_query_until('postgres', qq{SELECT count(*) = 1 FROM pg_stat_subscription
	WHERE relid IS NULL AND pid IS NOT NULL AND pid <> $apply}), '(1) ... PostgreSQL starts it again');
$waiter = wait_gate_waiter('', '(1) ... and the copy is at the gate');

my $copy_sender = $sa->safe_psql('postgres', q{SELECT pid FROM pg_stat_activity
	WHERE backend_type = 'walsender' AND application_name ~ '^pg_[0-9]+_sync_' ORDER BY backend_start DESC LIMIT 1});
terminate($sa, $copy_sender, '(1) mid-copy: the walsender serving the copy is terminated on shard_a');
$gate->query_safe("SELECT pg_advisory_unlock($gate_lock)");

# the copy is done and the move pauses before its catch-up
ok($router->poll_query_until('postgres', q{
	SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event = 'advisory' AND query LIKE 'CALL%'}),
	'(1) the copy ends, the move pauses before catching up');
# what the move said so far (psql prints notices as they come)
ok(wait_until(sub { $move->pump_nb; $err =~ /a replication worker failed/ }),
	'(1) the move saw the copy fail when its walsender ended, and goes on');
my $copy_err = $err;
note "so far:\n$copy_err";
like($copy_err, qr/NOTICE:  copying genes 0 to 8191 to server "shard_b": a replication worker failed \(.+\); PostgreSQL restarts it and the move goes on/s,
	'(1) ... saying so');

# mid-catch-up: a row written through the router stops the apply worker at the gate
$gate->query_safe("SELECT pg_advisory_lock($gate_lock)");
$router->safe_psql('postgres', q{INSERT INTO events VALUES ((5000::bigint << 48) | (1 << 10) | 1023, 'gate'),
	((5000::bigint << 48) | (2 << 10) | 1023, 'after the gate')});
$total += 2;
$waiter = wait_gate_waiter('', '(1) the streaming stops at a gate row written during the move');
is($waiter, worker_pid(0), '(1) ... in the apply worker');
$locker->query_safe("SELECT pg_advisory_unlock($pause_lock)");
ok($router->poll_query_until('postgres', q{
	SELECT count(*) = 0 FROM pg_stat_activity WHERE wait_event = 'advisory' AND query LIKE 'CALL%'}),
	'(1) the move goes on into its catch-up, which waits for the gate row');
$router->safe_psql('postgres', q{INSERT INTO events VALUES ((6000::bigint << 48) | (3 << 10) | 1023, 'during the catch-up')});
$total++;

$apply = worker_pid(0);
terminate($sb, $apply, '(1) mid-catch-up: the apply worker is terminated');
$waiter = wait_gate_waiter($waiter, '(1) ... PostgreSQL starts it again, and it applies up to the gate row again');
my $token = $router->safe_psql('postgres', q{SELECT token FROM snowseq_moves ORDER BY move_id DESC LIMIT 1});
my $sender = $sa->safe_psql('postgres', qq{SELECT pid FROM pg_stat_activity
	WHERE backend_type = 'walsender' AND application_name = '$token' ORDER BY backend_start DESC LIMIT 1});
terminate($sa, $sender, '(1) mid-catch-up: the walsender serving the apply worker is terminated on shard_a');
$gate->query_safe("SELECT pg_advisory_unlock($gate_lock)");

$move->finish;
note "move with faults:\n$err";
is($move->result(0), 0, '(1) the move succeeds through every fault');
unlike($err, qr/ERROR|WARNING/, '(1) ... with no error and no warning');
my $failed = () = $err =~ /a replication worker failed/g;
ok($failed >= 2, "(1) ... and says each time a worker failed and was restarted ($failed)");
my $failed_after = () = substr($err, length($copy_err)) =~ /a replication worker failed/g;
ok($failed_after >= 1, "(1) ... the catch-up's failure among them ($failed_after)");
like(layout(), qr/^8191=shard_b,32767=shard_a /, '(1) genes 0..8191 are on shard_b');
is($router->safe_psql('postgres', 'SELECT count(*) || \' \' || count(DISTINCT event_id) FROM events'), "$total $total",
	"(1) the router returns each of the $total rows once");
is($sb->safe_psql('postgres', q{SELECT count(*) FROM events_g0_8191}),
	$router->safe_psql('postgres', q{SELECT count(*) FROM events WHERE event_id < 8192::bigint << 48}),
	'(1) every row of genes 0..8191 is on shard_b');
is($sa->safe_psql('postgres', q{SELECT count(*) FROM events WHERE event_id < 8192::bigint << 48}), 0,
	'(1) none of them is left on shard_a');
is($sb->safe_psql('postgres', q{SELECT string_agg(payload, ',' ORDER BY event_id) FROM events_g0_8191 WHERE payload <> 'a'}),
	'gate,gate,after the gate,during the catch-up', '(1) the rows written during the move are there, once');
is(join(',', leftovers()), '', '(1) nothing is left behind');
$sb->safe_psql('postgres', 'DROP TRIGGER gate ON events_g0_8191');

# ---------------------------------------------------------------------
# (2) Errors that persist
# ---------------------------------------------------------------------
sub move
{
	my ($call) = @_;
	my ($rc, $o, $e) = $router->psql('postgres', "CALL $call");
	note "CALL $call:\n$e";
	return ($rc, $e);
}
landing_table(1);
my $poison = (9000 << 48) | (7 << 10) | 1023;
$sa->safe_psql('postgres', "INSERT INTO events VALUES ($poison, 'poison')");
my $before = layout();
my ($rc, $e) = move(q{snowseq_move_genes('events', 8192, 16383, 'shard_b')});
isnt($rc, 0, '(2) a move whose copy fails the same way each time fails');
like($e, qr/ERROR:  copying genes 8192 to 16383 of table "events" to server "shard_b" failed: poison row $poison refused/,
	'(2) ... with the text of the error');
like($e, qr/DETAIL:  The subscription's workers failed \d+ times in a row with this error \(SQLSTATE P0001\), making no progress in between\./,
	'(2) ... saying that it repeated without progress');
my $retried = () = $e =~ /a replication worker failed \(poison row/g;
ok($retried >= 1, "(2) ... after riding out its first occurrences ($retried)");
is(layout(), $before, '(2) the placement is unchanged');
is(join(',', leftovers()), '', '(2) nothing is left behind');
is($sb->safe_psql('postgres', 'SELECT count(*) FROM events'), 0, '(2) the table made for the copy is empty again');

$sa->safe_psql('postgres', "UPDATE events SET payload = 'bad' WHERE event_id = $poison");
($rc, $e) = move(q{snowseq_move_genes('events', 8192, 16383, 'shard_b')});
like($e, qr/ERROR:  copying genes 8192 to 16383 of table "events" to server "shard_b" failed: new row for relation "events" violates check constraint "no_bad"/,
	'(2) a row that breaks a CHECK constraint on the destination fails the move with the error\'s text');
like($e, qr/DETAIL:  The subscription's worker failed with SQLSTATE 23514, an error that retrying does not heal\./,
	'(2) ... at once: retrying does not heal it');
unlike($e, qr/a replication worker failed/, '(2) ... with no retry');
is(layout(), $before, '(2) the placement is unchanged');
is(join(',', leftovers()), '', '(2) nothing is left behind');

$sa->safe_psql('postgres', "DELETE FROM events WHERE event_id = $poison");
($rc, $e) = move(q{snowseq_move_genes('events', 8192, 16383, 'shard_b')});
is($rc, 0, '(2) without the bad row the move succeeds');
like(layout(), qr/^16383=shard_b,32767=shard_a /, '(2) genes 8192..16383 are on shard_b');
is($router->safe_psql('postgres', 'SELECT count(*) || \' \' || count(DISTINCT event_id) FROM events'), "$total $total",
	"(2) the router returns each of the $total rows once");
is(join(',', leftovers()), '', '(2) nothing is left behind');

# ---------------------------------------------------------------------
# (3) A move begun under 1.2, stopped mid-copy, with its subscription gone
# ---------------------------------------------------------------------
landing_table(0);
$sa->safe_psql('postgres', q{INSERT INTO events VALUES ((20000::bigint << 48) | (8 << 10) | 1023, 'gate')});
$total++;
$gate->query_safe("SELECT pg_advisory_lock($gate_lock)");
($out, $err) = ('', '');
$move = IPC::Run::start([ 'psql', '-X', '-d', $router->connstr('postgres'),
	'-c', q{CALL snowseq_move_genes('events', 16384, 24575, 'shard_b')} ], '>', \$out, '2>', \$err);
wait_gate_waiter('', '(3) the copy stops at the gate row');
$slots = sync_slots();
ok($slots ne '' && recorded_sync_slots() eq $slots, "(3) shard_a has the copy's table-sync slot, recorded ($slots)");
my ($id3, $token3) = split /\|/, $router->safe_psql('postgres',
	q{SELECT move_id || '|' || token FROM snowseq_moves ORDER BY move_id DESC LIMIT 1});
is($router->safe_psql('postgres', q{SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
	WHERE query LIKE 'CALL snowseq_move_genes%' AND pid <> pg_backend_pid()}), 1, '(3) the move is stopped (its session ends)');
$move->finish;
$router->safe_psql('postgres', qq{DELETE FROM snowseq_move_objects WHERE move_id = $id3 AND kind = 'replication slot' AND name <> '$token3'});
$sb->safe_psql('postgres', qq{ALTER SUBSCRIPTION "$token3" DISABLE;
	ALTER SUBSCRIPTION "$token3" CONNECTION 'host=127.0.0.1 port=1 dbname=postgres connect_timeout=5';
	ALTER SUBSCRIPTION "$token3" SET (slot_name = NONE);
	DROP SUBSCRIPTION "$token3"});
is(sync_slots(), $slots, '(3) as 1.2 left it: no table-sync slot recorded, the subscription gone, its slot left on shard_a');
$gate->query_safe("SELECT pg_advisory_unlock($gate_lock)");
my $cleaned = $router->safe_psql('postgres', 'SELECT string_agg(server || \' \' || object || \' \' || action, \';\') FROM snowseq_move_cleanup()');
note "cleanup: $cleaned";
like($cleaned, qr/shard_a replication slot \Q$slots\E dropped/, '(3) the cleanup drops the table-sync slot by its prefix');
is(sync_slots(), '', '(3) ... none is left on shard_a');
is(join(',', leftovers()), '', '(3) nothing is left behind');
like(layout(), qr/^16383=shard_b,32767=shard_a /, '(3) the placement is unchanged');
is($router->safe_psql('postgres', 'SELECT count(*) || \' \' || count(DISTINCT event_id) FROM events'), "$total $total",
	"(3) the router returns each of the $total rows once");

# ---------------------------------------------------------------------
# (4) A subscription of the same name in another database of shard_b
# ---------------------------------------------------------------------
$sb->safe_psql('postgres', 'CREATE DATABASE other');
my $twin = $router->safe_psql('postgres', q{SELECT 'snowseq_move_' || (SELECT node_id FROM snowseq_status) || '_'
	|| (SELECT oid FROM pg_database WHERE datname = current_database()) || '_'
	|| pg_sequence_last_value(pg_get_serial_sequence('snowseq_moves', 'move_id')) + 1});
$sb->safe_psql('other', qq{CREATE SUBSCRIPTION "$twin" CONNECTION 'host=127.0.0.1 port=1 dbname=postgres'
	PUBLICATION p WITH (connect = false)});
($rc, $e) = move(q{snowseq_move_genes('events', 24576, 32767, 'shard_b')});
is($rc, 0, "(4) with a subscription $twin in another database of shard_b, the move of that name succeeds");
is($router->safe_psql('postgres', q{SELECT token FROM snowseq_moves ORDER BY move_id DESC LIMIT 1}), $twin,
	'(4) ... its subscription had that name');
like(layout(), qr/^16383=shard_b,24575=shard_a,32767=shard_b /, '(4) genes 24576..32767 are on shard_b');
is($router->safe_psql('postgres', 'SELECT count(*) || \' \' || count(DISTINCT event_id) FROM events'), "$total $total",
	"(4) the router returns each of the $total rows once");
is($sb->safe_psql('other', qq{SELECT count(*) FROM pg_subscription WHERE subname = '$twin' AND subdbid =
	(SELECT oid FROM pg_database WHERE datname = 'other')}), 1, '(4) the other database\'s subscription is still there');
$sb->safe_psql('other', qq{ALTER SUBSCRIPTION "$twin" SET (slot_name = NONE); DROP SUBSCRIPTION "$twin"});
is(join(',', leftovers()), '', '(4) nothing else is left behind');

# ---------------------------------------------------------------------
# (5) Moves of the same number from two router databases at once
# ---------------------------------------------------------------------
$sa->safe_psql('postgres', 'CREATE DATABASE other2');
$sa->safe_psql('other2', q{CREATE EXTENSION snowseq;
	CREATE TABLE events (event_id bigint PRIMARY KEY, payload text NOT NULL);
	INSERT INTO events SELECT ((i % 8192)::bigint << 48) | (i::bigint << 10) | 1023, 'r2' FROM generate_series(1, 500) i});
$sb->safe_psql('other', 'CREATE EXTENSION snowseq');
$router->safe_psql('postgres', 'CREATE DATABASE r2');
$router->safe_psql('r2', "CREATE EXTENSION snowseq; CREATE EXTENSION postgres_fdw;\n"
	  . fdw_servers_sql('other2', [ 'shard_a', $sa ]) . fdw_servers_sql('other', [ 'shard_b', $sb ]) . q{
	CREATE TABLE events (event_id bigint NOT NULL, payload text NOT NULL) PARTITION BY RANGE (event_id);
	CREATE FOREIGN TABLE events_0 PARTITION OF events FOR VALUES FROM (0) TO (MAXVALUE)
		SERVER shard_a OPTIONS (table_name 'events');
	INSERT INTO snowseq_shard_map VALUES (32767, 'shard_a');
});
# the first database's move stops at the gate mid-copy
landing_table(0);
$gate->query_safe("SELECT pg_advisory_lock($gate_lock)");
($out, $err) = ('', '');
# (before the fix the second move's undo dropped this one's slot, and it waited for ever)
my $timer = IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default);
$move = IPC::Run::start([ 'psql', '-X', '-d', $router->connstr('postgres'),
	'-c', q{CALL snowseq_move_genes('events', 16384, 24575, 'shard_b')} ], '>', \$out, '2>', \$err, $timer);
wait_gate_waiter('', '(5) the move of the first router database stops at the gate row mid-copy');
my $id5 = $router->safe_psql('postgres', q{SELECT max(move_id) FROM snowseq_moves});
# the second database's next move gets the same number
$router->safe_psql('r2', qq{SELECT setval(pg_get_serial_sequence('snowseq_moves', 'move_id'), @{[ $id5 - 1 ]}, true)});
my ($rc5, $o5, $e5) = $router->psql('r2', q{CALL snowseq_move_genes('events', 0, 8191, 'shard_b')});
note "second database's move:\n$e5";
is($rc5, 0, "(5) the move of the second router database, also move $id5, succeeds meanwhile");
my $token5 = $router->safe_psql('postgres', "SELECT token FROM snowseq_moves WHERE move_id = $id5");
my $token5b = $router->safe_psql('r2', "SELECT token FROM snowseq_moves WHERE move_id = $id5");
isnt($token5b, $token5, "(5) ... under a name of its own ($token5b, the first one's $token5)");
is($router->safe_psql('r2', 'SELECT count(*) FROM events'), 500, '(5) ... and its router returns each of its 500 rows once');
like(shard_layout($router, 'r2', 'events'), qr/^8191=shard_b,32767=shard_a /, '(5) ... genes 0..8191 of the second database are on shard_b');
$gate->query_safe("SELECT pg_advisory_unlock($gate_lock)");
my $finished = eval { $move->finish; 1 };
$move->kill_kill unless $finished;
note "first database's move:\n$err";
ok($finished && $move->result(0) == 0, '(5) the move of the first router database, its copy let go, succeeds too');
like(layout(), qr/^32767=shard_b /, '(5) ... genes 16384..24575 are on shard_b: shard_b holds every gene');
is($router->safe_psql('postgres', 'SELECT count(*) || \' \' || count(DISTINCT event_id) FROM events'), "$total $total",
	"(5) ... and the router returns each of the $total rows once");
is(join(',', leftovers()), '', '(5) nothing is left behind');

$gate->quit;
$locker->quit;
done_testing();
