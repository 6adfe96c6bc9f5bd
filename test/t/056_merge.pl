# Merging neighbouring partitions of one server (snowseq_merge_partitions)
# while they take writes, and a merge cut at its switch.
#
#   router  (node 1): items PARTITION BY RANGE (item_id), postgres_fdw;
#                     notes, its placement group (note_id = the item's id)
#                       items_0  -> s1.items_1   notes_0  -> s1.notes_1    genes     0..4095
#                       items_0b -> s1.items_1b  notes_0b -> s1.notes_1b   genes  4096..8191
#                       items_1  -> s2.items_2   notes_1  -> s2.notes_2    genes  8192..16383
#                       items_1b -> s2.items_2b  notes_1b -> s2.notes_2b   genes 16384..32767
#   s1, s2  (nodes 2, 3): notes reference items (ON DELETE CASCADE); on s1 a
#                     trigger of items audits inserts, a check and a grant
#
# (1) Two writers insert, update and delete items through the router, and
#     keep a ledger on the router in the same transactions.  The merge of
#     genes 0..8191 pauses after its triggers are on (before its backfill)
#     until the writers have written more; then it runs to its end.  Every
#     row is there once and as the ledger says, in one partition per table
#     on one table per table on s1, with the check, the grant, the audit
#     trigger (which fired once per insert: not for the copies) and a
#     validated foreign key between the merged tables; nothing of the merge
#     is left.
# (2) A merge killed in its switch before the router's commit: cleanup rolls
#     the server's prepared transaction back and undoes it.
# (3) A move of genes under a merge is refused; the merge killed after its
#     triggers are on is undone by cleanup, and again by the router's
#     resolver at its next start.
# (4) A merge whose server goes down after the router's commit: the CALL
#     reports a WARNING, not an ERROR (the merge is done); the router's
#     resolver, at its next start, commits the server's transaction.
# (5) Bad requests.
# (6) The rebalance plans merges of cold neighbouring partitions of one
#     server (merge_below), where the placement group's partitions lie
#     inside them, and CALL snowseq_rebalance runs them; a merge refuses
#     what it would not carry over (a view, a unique index, a publication,
#     FORCE ROW LEVEL SECURITY), takes another name where its table's is
#     taken, and its switch waits for a query on the server to end.
use strict;
use warnings;
use lib 'test';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my @shard_conf = shard_conf();
my $router = snowseq_node('router', node_id => 1);
my %node = (s1 => snowseq_node('s1', node_id => 2, conf => \@shard_conf),
	s2 => snowseq_node('s2', node_id => 3, conf => \@shard_conf));
my $pause_lock = 7236949375;

for my $s (1, 2)
{
	my $audit = $s == 1 ? q{
		CREATE TABLE audit (item_id bigint);
		CREATE FUNCTION audit_item() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO public.audit VALUES (NEW.item_id); RETURN NEW; END $$;
		CREATE TRIGGER audit AFTER INSERT ON items_1 FOR EACH ROW EXECUTE FUNCTION audit_item();
		CREATE TRIGGER audit AFTER INSERT ON items_1b FOR EACH ROW EXECUTE FUNCTION audit_item();
		CREATE ROLE reader; GRANT SELECT ON items_1, items_1b TO reader;} : '';
	$node{"s$s"}->safe_psql('postgres', qq{
		CREATE TABLE items_$s (item_id bigint PRIMARY KEY, k text NOT NULL CHECK (k <> ''));
		CREATE TABLE items_${s}b (item_id bigint PRIMARY KEY, k text NOT NULL CHECK (k <> ''));
		CREATE TABLE notes_$s (note_id bigint PRIMARY KEY, item_id bigint NOT NULL REFERENCES items_$s ON DELETE CASCADE, body text);
		CREATE TABLE notes_${s}b (note_id bigint PRIMARY KEY, item_id bigint NOT NULL REFERENCES items_${s}b ON DELETE CASCADE, body text);
		$audit});
}
$router->safe_psql('postgres', "CREATE EXTENSION postgres_fdw;\n"
	  . fdw_servers_sql('postgres', map { [ $_, $node{$_} ] } qw(s1 s2)) . q{
	CREATE TABLE items (item_id bigint NOT NULL, k text NOT NULL) PARTITION BY RANGE (item_id);
	CREATE TABLE notes (note_id bigint NOT NULL, item_id bigint NOT NULL, body text) PARTITION BY RANGE (note_id);
	CREATE FOREIGN TABLE items_0 PARTITION OF items FOR VALUES FROM (0) TO (4096::bigint << 48) SERVER s1 OPTIONS (table_name 'items_1');
	CREATE FOREIGN TABLE items_0b PARTITION OF items FOR VALUES FROM (4096::bigint << 48) TO (8192::bigint << 48) SERVER s1 OPTIONS (table_name 'items_1b');
	CREATE FOREIGN TABLE items_1 PARTITION OF items FOR VALUES FROM (8192::bigint << 48) TO (16384::bigint << 48) SERVER s2 OPTIONS (table_name 'items_2');
	CREATE FOREIGN TABLE items_1b PARTITION OF items FOR VALUES FROM (16384::bigint << 48) TO (MAXVALUE) SERVER s2 OPTIONS (table_name 'items_2b');
	CREATE FOREIGN TABLE notes_0 PARTITION OF notes FOR VALUES FROM (0) TO (4096::bigint << 48) SERVER s1 OPTIONS (table_name 'notes_1');
	CREATE FOREIGN TABLE notes_0b PARTITION OF notes FOR VALUES FROM (4096::bigint << 48) TO (8192::bigint << 48) SERVER s1 OPTIONS (table_name 'notes_1b');
	CREATE FOREIGN TABLE notes_1 PARTITION OF notes FOR VALUES FROM (8192::bigint << 48) TO (16384::bigint << 48) SERVER s2 OPTIONS (table_name 'notes_2');
	CREATE FOREIGN TABLE notes_1b PARTITION OF notes FOR VALUES FROM (16384::bigint << 48) TO (MAXVALUE) SERVER s2 OPTIONS (table_name 'notes_2b');
	INSERT INTO snowseq_shard_map VALUES (8191, 's1'), (32767, 's2');
	INSERT INTO items SELECT (g::bigint << 48) | n, 'k' || g || '.' || n FROM generate_series(0, 32767, 7) g, generate_series(1, 2) n;
	INSERT INTO notes SELECT item_id, item_id, 'note of ' || k FROM items WHERE (item_id & 1) = 1;
	-- the ledger of the writers, of genes 0..8191: what items and notes should hold
	CREATE TABLE expected AS SELECT * FROM items WHERE item_id < 8192::bigint << 48;
	CREATE TABLE expected_notes AS SELECT note_id FROM notes WHERE note_id < 8192::bigint << 48;
	CREATE TABLE inserted (item_id bigint);
	CREATE SEQUENCE wseq;});
my $total = $router->safe_psql('postgres', 'SELECT count(*) FROM items');
is($total, 9364, 'the router reads every row');
my $audited0 = $node{s1}->safe_psql('postgres', 'SELECT count(*) FROM audit');
is($audited0, $router->safe_psql('postgres', 'SELECT count(*) FROM expected'), 'the audit trigger saw each insert on s1');

# the partitions of a table as "name:server.table" in bound order
sub parts
{
	my ($parent) = @_;
	return $router->safe_psql('postgres', qq{
		SELECT string_agg(c.relname || ':' || s.srvname || '.'
			|| (SELECT option_value FROM pg_options_to_table(ft.ftoptions) WHERE option_name = 'table_name'), ' '
			ORDER BY c.relname COLLATE "C")
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		JOIN pg_foreign_table ft ON ft.ftrelid = c.oid JOIN pg_foreign_server s ON s.oid = ft.ftserver
		WHERE i.inhparent = '$parent'::regclass});
}
sub bounds_of
{
	my ($part) = @_;
	return $router->safe_psql('postgres', "SELECT pg_get_expr(relpartbound, oid) FROM pg_class WHERE relname = '$part'");
}
# what merges leave on a server: their triggers, tables still marked, prepared transactions
sub merge_leftovers
{
	my ($n) = @_;
	return $n->safe_psql('postgres', q{
		SELECT string_agg(x, ', ' ORDER BY x COLLATE "C") FROM (
			SELECT 'trigger ' || tgname || ' on ' || tgrelid::regclass AS x FROM pg_trigger WHERE tgname ~ '^snowseq_merge'
			UNION ALL SELECT 'marked ' || c.oid::regclass FROM pg_class c
				WHERE obj_description(c.oid, 'pg_class') ~ 'merge in progress'
			UNION ALL SELECT 'prepared ' || gid FROM pg_prepared_xacts) l(x)});
}

# The records of the last merge's objects on the router (snowseq_move_objects):
# kind, name and policy, one a line.
sub merge_records
{
	return $router->safe_psql('postgres', q{
		SELECT coalesce(string_agg(o.kind || ' ' || o.name || ' ' || o.policy, E'\n' ORDER BY o.kind, o.name), '')
		FROM snowseq_move_objects o JOIN snowseq_merges g USING (merge_id)
		WHERE coalesce(g.group_merge, g.merge_id) = (SELECT max(merge_id) FROM snowseq_merges WHERE group_merge IS NULL)});
}

# ---------------------------------------------------------------------
# (1) A merge under two writers
# ---------------------------------------------------------------------
my $dir = $PostgreSQL::Test::Utils::tmp_check;
my @writers;
for my $w (0, 1)
{
	my $batch = "$dir/merge_writer_$w.sql";
	open my $fh, '>', $batch or die;
	print $fh qq{
BEGIN;
WITH s AS (SELECT nextval('wseq') AS s),
	i AS (INSERT INTO items SELECT (((s.s * 37) % 8192)::bigint << 48) | (1000000 + s.s), 'w' || s.s FROM s RETURNING *),
	n AS (INSERT INTO inserted SELECT item_id FROM i)
INSERT INTO expected SELECT * FROM i;
WITH pick AS (SELECT item_id FROM expected WHERE item_id % 2 = $w ORDER BY random() LIMIT 1),
	u AS (UPDATE items SET k = k || '+' WHERE item_id = (SELECT item_id FROM pick) RETURNING *)
UPDATE expected e SET k = u.k FROM u WHERE e.item_id = u.item_id;
WITH pick AS (SELECT item_id FROM expected WHERE item_id % 2 = $w ORDER BY random() LIMIT 1),
	d AS (DELETE FROM items WHERE item_id = (SELECT item_id FROM pick) RETURNING item_id),
	dn AS (DELETE FROM expected_notes WHERE note_id IN (SELECT item_id FROM d))
DELETE FROM expected e USING d WHERE e.item_id = d.item_id;
COMMIT;
};
	close $fh;
	push @writers, batch_client($router, batch => $batch, stop => "$dir/merge_stop", pause => "$dir/merge_pause_$w",
		out => "$dir/merge_writer_$w.out", err => "$dir/merge_writer_$w.err");
}
sub written { return $router->safe_psql('postgres', q{SELECT last_value FROM wseq}); }
sub wait_written
{
	my ($n, $what) = @_;
	my $from = written();
	ok($router->poll_query_until('postgres', "SELECT last_value >= $from + $n FROM wseq"), "$what ($n more inserts)");
}
wait_written(20, '(1) the writers write');

my $locker = $router->background_psql('postgres');
$locker->query_safe("SELECT pg_advisory_lock($pause_lock)");
my ($mout, $merr) = ('', '');
my $merge = IPC::Run::start([ 'psql', '-X', '-d', $router->connstr('postgres'),
	'-c', "SET snowseq.test_pause_at = 'merge_before_backfill'",
	'-c', q{CALL snowseq_merge_partitions('items', 0, 8191)} ], '>', \$mout, '2>', \$merr);
ok($router->poll_query_until('postgres', q{
	SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event = 'advisory' AND query LIKE 'CALL%'}),
	'(1) the merge paused before its backfill');
is(merge_leftovers($node{s1}), join(', ', 'marked items_g0_8191', 'marked notes_g0_8191',
	'trigger snowseq_merge on items_1', 'trigger snowseq_merge on items_1b',
	'trigger snowseq_merge on notes_1', 'trigger snowseq_merge on notes_1b',
	'trigger snowseq_merge_truncate on items_1', 'trigger snowseq_merge_truncate on items_1b',
	'trigger snowseq_merge_truncate on notes_1', 'trigger snowseq_merge_truncate on notes_1b'),
	'(1) ... with the merged tables made and the triggers on the tables it merges');
my $before = $node{s1}->safe_psql('postgres', 'SELECT count(*) FROM items_g0_8191');
wait_written(20, '(1) the writers go on meanwhile');
my $mirrored = $node{s1}->safe_psql('postgres', 'SELECT count(*) FROM items_g0_8191');
cmp_ok($mirrored, '>', $before, "(1) their writes reach the merged table before the backfill ($before, then $mirrored rows)");
$locker->query_safe("SELECT pg_advisory_unlock($pause_lock)");
ok($merge->finish, '(1) the merge runs to its end');
note "merge:\n$merr";
like($merr, qr/genes 0 to 8191 of table "items" are one partition, public.items_g0_8191, on server "s1"; the switch held the table for [\d.]+ ms/,
	'(1) ... and says so, with its pause');
wait_written(20, '(1) the writers write after it');
open my $stop, '>', "$dir/merge_stop" or die;
close $stop;
$_->{h}->finish for @writers;
for my $w (0, 1)
{
	is(slurp_file("$dir/merge_writer_$w.err"), '', "(1) writer $w had no error");
}

is(parts('items'), 'items_1:s2.items_2 items_1b:s2.items_2b items_g0_8191:s1.items_g0_8191',
	'(1) items: one partition for genes 0..8191, reading one table on s1');
is(parts('notes'), 'notes_1:s2.notes_2 notes_1b:s2.notes_2b notes_g0_8191:s1.notes_g0_8191',
	'(1) notes, its placement group: the same');
is(bounds_of('items_g0_8191'), "FOR VALUES FROM ('0') TO ('2305843009213693952')", '(1) its bounds are those of genes 0..8191');
is($router->safe_psql('postgres', q{SELECT count(*) FROM expected}), $router->safe_psql('postgres', q{
	SELECT count(*) FROM items WHERE item_id < 8192::bigint << 48}), '(1) as many items as the ledger has');
is($router->safe_psql('postgres', q{SELECT count(*) FROM expected e FULL JOIN
	(SELECT * FROM items WHERE item_id < 8192::bigint << 48) i USING (item_id) WHERE e.k IS DISTINCT FROM i.k}), '0',
	'(1) every item is there once, as the ledger says');
is($router->safe_psql('postgres', q{SELECT count(*) FROM expected_notes e FULL JOIN
	(SELECT * FROM notes WHERE note_id < 8192::bigint << 48) n USING (note_id) WHERE e.note_id IS NULL OR n.note_id IS NULL}), '0',
	'(1) every note is there once, as the ledger says (those of deleted items went with them)');
is($node{s1}->safe_psql('postgres', q{SELECT string_agg(relname, ' ' ORDER BY relname) FROM pg_class
	WHERE relkind = 'r' AND relname ~ '^(items|notes)_'}), 'items_g0_8191 notes_g0_8191',
	'(1) on s1 the merged tables replace the four');
is($node{s1}->safe_psql('postgres', q{SELECT string_agg(conname || ':' || contype::text || ':' || convalidated, ' ' ORDER BY conname)
	FROM pg_constraint WHERE conrelid = 'items_g0_8191'::regclass AND contype <> 'n'}),
	'items_g0_8191_genes:c:true items_g0_8191_k_check:c:true items_g0_8191_pkey:p:true',
	'(1) the merged table has a check of its genes, the check of the table it merges and the primary key');
is($node{s1}->safe_psql('postgres', q{SELECT confrelid::regclass || ' ' || convalidated FROM pg_constraint
	WHERE conrelid = 'notes_g0_8191'::regclass AND contype = 'f'}), 'items_g0_8191 true',
	'(1) notes\' merged table references items\' merged table, validated');
is($node{s1}->safe_psql('postgres', q{SELECT has_table_privilege('reader', 'items_g0_8191', 'SELECT')}), 't',
	'(1) the grant is there');
is($node{s1}->safe_psql('postgres', q{SELECT count(*) || ' ' || count(DISTINCT item_id) FROM audit}),
	$router->safe_psql('postgres', qq{SELECT ($audited0 + count(*)) || ' ' || ($audited0 + count(*)) FROM inserted}),
	'(1) the audit trigger fired once per insert, not for the rows the merge copied');
is($node{s1}->safe_psql('postgres', q{SELECT string_agg(tgname || ':' || tgenabled::text, ' ') FROM pg_trigger
	WHERE tgrelid = 'items_g0_8191'::regclass AND NOT tgisinternal}), 'audit:O', '(1) and it is on the merged table');
is(merge_leftovers($node{s1}), '', '(1) no merge trigger, marked table or prepared transaction is left');
is(merge_records(), '', '(1) ... and no record of its objects: the merged tables serve, the triggers went with the tables merged');
my $rec = $router->safe_psql('postgres', q{SELECT state, rows_copied > 0, pause_ms IS NOT NULL, switched_at IS NOT NULL
	FROM snowseq_merges WHERE group_merge IS NULL});
is($rec, 'done|t|t|t', '(1) its record: done, with the rows copied and the pause');
note 'pause: ' . $router->safe_psql('postgres', q{SELECT pause_ms FROM snowseq_merges WHERE group_merge IS NULL});
is($router->safe_psql('postgres', q{SELECT string_agg(parent::text || ' ' || array_to_string(parts, ','), '; ' ORDER BY merge_id)
	FROM snowseq_merges}), 'items public.items_0,public.items_0b; notes public.notes_0,public.notes_0b', '(1) a record per table, naming its partitions');

# ---------------------------------------------------------------------
# (2) Killed in the switch, before the router's commit
# ---------------------------------------------------------------------
my $s2_rows = $router->safe_psql('postgres', q{SELECT count(*) || ' ' || count(DISTINCT item_id) FROM items
	WHERE item_id >= 8192::bigint << 48});
my $merge_err = '';	# what the paused merge's psql printed on stderr
sub merge_paused_at
{
	my ($point, $label, $role) = @_;
	my $out = '';
	my $err = \$merge_err;
	$merge_err = '';
	$locker->query_safe("SELECT pg_advisory_lock($pause_lock)");
	my $h = IPC::Run::start([ 'psql', '-X', '-d', $router->connstr('postgres'),
		'-c', "SET snowseq.test_pause_at = '$point'", '-c', ($role ? "SET ROLE $role" : 'SELECT 1'),
		'-c', q{CALL snowseq_merge_partitions('items', 8192, 32767)} ], '>', \$out, '2>', $err);
	ok($router->poll_query_until('postgres', q{
		SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event = 'advisory' AND query LIKE 'CALL%'}),
		"$label: the merge paused at $point");
	return $h;
}
sub kill_merge
{
	my ($h, $label) = @_;
	$router->safe_psql('postgres', q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'CALL snowseq_merge%'});
	$locker->query_safe("SELECT pg_advisory_unlock($pause_lock)");
	$h->finish;
}
my $h = merge_paused_at('merge_before_router_commit', '(2)');
is($node{s2}->safe_psql('postgres', q{SELECT count(*) FROM pg_prepared_xacts}), '1', '(2) the server\'s transaction is prepared');
kill_merge($h, '(2)');
is($router->safe_psql('postgres', q{SELECT state FROM snowseq_merges WHERE group_merge IS NULL ORDER BY merge_id DESC LIMIT 1}),
	'switch', '(2) the killed merge is left in its switch');
my $cleanup = $router->safe_psql('postgres', q{SELECT object || ': ' || action FROM snowseq_move_cleanup()});
note "cleanup:\n$cleanup";
like($cleanup, qr/prepared transaction snowseq_merge_\S+: rolled back/, '(2) cleanup rolls the prepared transaction back');
like($cleanup, qr/^merge: undone$/m, '(2) ... and undoes the merge');
is(merge_leftovers($node{s2}), '', '(2) nothing of it is left on s2');
is($node{s2}->safe_psql('postgres', q{SELECT count(*) FROM pg_class WHERE relname ~ '_g8192_32767$'}), '0',
	'(2) no merged table either');
is(parts('items'), 'items_1:s2.items_2 items_1b:s2.items_2b items_g0_8191:s1.items_g0_8191', '(2) the partitions are as they were');
is($router->safe_psql('postgres', q{SELECT count(*) || ' ' || count(DISTINCT item_id) FROM items WHERE item_id >= 8192::bigint << 48}),
	$s2_rows, '(2) every row is there once');
is($router->safe_psql('postgres', q{SELECT state FROM snowseq_merges WHERE group_merge IS NULL ORDER BY merge_id DESC LIMIT 1}),
	'failed', '(2) the merge is failed');

# ---------------------------------------------------------------------
# (3) A move under a merge is refused; killed before its backfill, undone
# ---------------------------------------------------------------------
$h = merge_paused_at('merge_before_backfill', '(3)');
my ($rc, $out, $err) = $router->psql('postgres', q{CALL snowseq_move_genes('items', 8192, 16383, 's1')});
like($err, qr/genes 8192 to 16383 of table "items" are in merge \d+ \(copy\)/, '(3) a move of its genes is refused');
($rc, $out, $err) = $router->psql('postgres', q{CALL snowseq_merge_partitions('notes', 8192, 32767)});
like($err, qr/genes 8192 to 32767 of table "notes" are in merge \d+, which is not over/, '(3) so is another merge of them');
# what it made and will make is recorded, each before it is made: its
# prepared transaction too, which does not exist yet
is(merge_records(), join("\n",
	'prepared transaction ' . $router->safe_psql('postgres', q{SELECT token FROM snowseq_merges WHERE group_merge IS NULL
		ORDER BY merge_id DESC LIMIT 1}) . ' always',
	'merged table public.items_g8192_32767 on_failure', 'merged table public.notes_g8192_32767 on_failure',
	'merge trigger public.items_2 on_failure', 'merge trigger public.items_2b on_failure',
	'merge trigger public.notes_2 on_failure', 'merge trigger public.notes_2b on_failure'),
	'(3) the merge recorded its merged tables, triggers and prepared transaction, with their policies');
is($node{s2}->safe_psql('postgres', q{SELECT count(*) FROM pg_prepared_xacts}), '0',
	'(3) ... the prepared transaction before it is made');
kill_merge($h, '(3)');
$cleanup = $router->safe_psql('postgres', q{SELECT object || ': ' || action FROM snowseq_move_cleanup()});
note "cleanup:\n$cleanup";
like($cleanup, qr/^trigger snowseq_merge on public.items_2: dropped$/m, '(3) cleanup drops the triggers');
like($cleanup, qr/^table public.items_g8192_32767: dropped$/m, '(3) ... and the merged tables');
is(merge_leftovers($node{s2}), '', '(3) nothing of it is left on s2');
is(merge_records(), '', '(3) ... and no record of its objects');
is($router->safe_psql('postgres', q{SELECT count(*) || ' ' || count(DISTINCT item_id) FROM items WHERE item_id >= 8192::bigint << 48}),
	$s2_rows, '(3) every row is there once');
# cut again before its backfill, and no one runs cleanup: the router's
# resolver undoes it at the next start (its trigger would tax every write)
$h = merge_paused_at('merge_before_backfill', '(3)');
kill_merge($h, '(3)');
like(merge_leftovers($node{s2}), qr/trigger snowseq_merge on items_2/, '(3) a merge cut before its backfill leaves its triggers');
$locker->quit;
$router->restart;
$locker = $router->background_psql('postgres');
ok($router->poll_query_until('postgres', q{SELECT state = 'failed' FROM snowseq_merges WHERE group_merge IS NULL
	ORDER BY merge_id DESC LIMIT 1}), '(3) the resolver undoes it at the router\'s start');
is(merge_leftovers($node{s2}), '', '(3) ... and nothing of it is left on s2');
is($node{s2}->safe_psql('postgres', q{SELECT count(*) FROM pg_class WHERE relname ~ '_g8192_32767$'}), '0',
	'(3) ... no merged table either');
is(merge_records(), '', '(3) ... and no record of its objects on the router');

# ---------------------------------------------------------------------
# (4) Its server down after the router's commit: no ERROR; the resolver commits at the start
# ---------------------------------------------------------------------
# run by a router administrator, whose user mapping alone reaches s2 when
# the resolver acts for it
my $su = $router->safe_psql('postgres', 'SELECT current_user');
$router->safe_psql('postgres', qq{CREATE ROLE madmin;
	GRANT EXECUTE ON PROCEDURE snowseq_merge_partitions(regclass, integer, integer) TO madmin;
	GRANT CREATE ON SCHEMA public TO madmin;
	GRANT USAGE ON FOREIGN SERVER s2 TO madmin;
	ALTER TABLE items OWNER TO madmin;
	ALTER TABLE notes OWNER TO madmin;
	ALTER FOREIGN TABLE items_1 OWNER TO madmin;
	ALTER FOREIGN TABLE items_1b OWNER TO madmin;
	ALTER FOREIGN TABLE notes_1 OWNER TO madmin;
	ALTER FOREIGN TABLE notes_1b OWNER TO madmin;
	CREATE USER MAPPING FOR madmin SERVER s2 OPTIONS (user '$su', password_required 'false')});
$h = merge_paused_at('merge_after_router_commit', '(4)', 'madmin');
# the server goes down right after the router's commit: the merge is done
# on the router, so the CALL reports no ERROR, a WARNING that the server
# did not finish it
$node{s2}->stop('immediate');
$locker->query_safe("SELECT pg_advisory_unlock($pause_lock)");
$h->finish;
unlike($merge_err, qr/ERROR/, '(4) with its server down after the router\'s commit, the merge reports no ERROR');
like($merge_err, qr/WARNING:  merge \d+ is done on the router, but server "s2" did not finish it/,
	'(4) ... but a WARNING that the server did not finish it') or diag $merge_err;
$node{s2}->start;
is($router->safe_psql('postgres', q{SELECT state || ' ' || mover::regrole FROM snowseq_merges WHERE group_merge IS NULL
	ORDER BY merge_id DESC LIMIT 1}), 'switched madmin', '(4) the merge is left switched, madmin its mover');
is($node{s2}->safe_psql('postgres', q{SELECT count(*) FROM pg_prepared_xacts}), '1', '(4) ... its server transaction prepared');
$router->safe_psql('postgres', 'DROP USER MAPPING FOR CURRENT_USER SERVER s2');
$router->restart;
ok($router->poll_query_until('postgres', q{SELECT state = 'done' FROM snowseq_merges WHERE group_merge IS NULL
	ORDER BY merge_id DESC LIMIT 1}), '(4) the resolver finishes it at the router\'s start, as madmin');
$router->safe_psql('postgres', 'CREATE USER MAPPING FOR CURRENT_USER SERVER s2');
is(merge_leftovers($node{s2}), '', '(4) nothing of it is left on s2');
is(parts('items'), 'items_g0_8191:s1.items_g0_8191 items_g8192_32767:s2.items_g8192_32767', '(4) one partition per server');
is($router->safe_psql('postgres', q{SELECT count(*) || ' ' || count(DISTINCT item_id) FROM items WHERE item_id >= 8192::bigint << 48}),
	$s2_rows, '(4) every row is there once');

# ---------------------------------------------------------------------
# (5) Bad requests
# ---------------------------------------------------------------------
for my $bad (
	[ q{CALL snowseq_merge_partitions('items', 0, 8191)}, qr/genes 0 to 8191 of table "items" are in one partition already/, 'one partition' ],
	[ q{CALL snowseq_merge_partitions('items', 0, 32767)}, qr/partition "items_g8192_32767" of table "items" reads server "s2", not server "s1"/, 'two servers' ],
	[ q{CALL snowseq_merge_partitions('items', 100, 8191)}, qr/partition "items_g0_8191" of table "items" holds genes 0 to 8191, not all of them in genes 100 to 8191/, 'half a partition' ],
	[ q{CALL snowseq_merge_partitions('items', 9000, 8000)}, qr/genes 9000 to 8000 are not a gene range/, 'no range' ],
	[ q{CALL snowseq_merge_partitions('items', NULL, 8191)}, qr/table and genes of a merge must not be NULL/, 'NULL' ],
	[ q{BEGIN; CALL snowseq_merge_partitions('items', 0, 8191); COMMIT}, qr/a merge of partitions must run as a CALL of its own/, 'in a transaction block' ],
	[ q{CREATE ROLE someone; SET ROLE someone; CALL snowseq_merge_partitions('items', 0, 8191)}, qr/permission denied for procedure snowseq_merge_partitions/, 'a role without the grant' ])
{
	($rc, $out, $err) = $router->psql('postgres', $bad->[0]);
	like($err, $bad->[1], "(5) refused: $bad->[2]");
}

# the records and the trigger, as other actors would use them
($rc, $out, $err) = $router->psql('postgres', q{CREATE ROLE grantee; GRANT SELECT, UPDATE ON snowseq_merges TO grantee;
	SET ROLE grantee; UPDATE snowseq_merges SET state = 'switched'});
like($err, qr/table snowseq_merges is written by snowseq's functions alone/, '(5) a grantee of the records cannot mark a merge switched');
($rc, $out, $err) = $node{s1}->psql('postgres', q{CREATE ROLE tenant; GRANT CREATE ON SCHEMA public TO tenant; SET ROLE tenant;
	CREATE TABLE mine (id bigint PRIMARY KEY);
	CREATE TRIGGER steal AFTER INSERT ON mine FOR EACH ROW EXECUTE FUNCTION snowseq_merge_mirror('public.items_g0_8191', 'id')});
like($err, qr/permission denied for function snowseq_merge_mirror/, '(5) a role cannot make the merge trigger write for it');
my $merged_rows = $node{s1}->safe_psql('postgres', 'SELECT count(*) FROM items_g0_8191');
($rc, $out, $err) = $node{s1}->psql('postgres', q{
	CREATE TRIGGER steal AFTER INSERT ON mine FOR EACH ROW EXECUTE FUNCTION snowseq_merge_mirror('public.items_g0_8191', 'id');
	SET ROLE tenant; INSERT INTO mine VALUES (1)});
like($err, qr/table "mine" has another owner than table "items_g0_8191", which it would write into/,
	'(5) nor write into a table of another owner through one a superuser made on its table');
is($node{s1}->safe_psql('postgres', 'SELECT count(*) FROM items_g0_8191'), $merged_rows, '(5) nothing was written there');

# ---------------------------------------------------------------------
# (6) The rebalance plans merges of cold neighbours (merge_below)
# ---------------------------------------------------------------------
# s2's genes cut by hand: items in three partitions (8192..12287,
# 12288..16383 cold, 16384..32767), notes in one over all of them
$router->safe_psql('postgres', q{DELETE FROM notes WHERE note_id >= 8192::bigint << 48 AND note_id < 16384::bigint << 48
		AND (note_id >> 48) % 5 <> 0;
	DELETE FROM items WHERE item_id >= 8192::bigint << 48 AND item_id < 16384::bigint << 48 AND (item_id >> 48) % 5 <> 0});
$node{s2}->safe_psql('postgres', q{
	CREATE TABLE items_3 (item_id bigint PRIMARY KEY, k text NOT NULL);
	CREATE TABLE items_4 (item_id bigint PRIMARY KEY, k text NOT NULL);
	CREATE TABLE items_5 (item_id bigint PRIMARY KEY, k text NOT NULL);
	CREATE TABLE notes_3 (note_id bigint PRIMARY KEY, item_id bigint NOT NULL, body text);
	INSERT INTO items_3 SELECT * FROM items_g8192_32767 WHERE item_id < 12288::bigint << 48;
	INSERT INTO items_4 SELECT * FROM items_g8192_32767 WHERE item_id >= 12288::bigint << 48 AND item_id < 16384::bigint << 48;
	INSERT INTO items_5 SELECT * FROM items_g8192_32767 WHERE item_id >= 16384::bigint << 48;
	INSERT INTO notes_3 SELECT * FROM notes_g8192_32767});
$router->safe_psql('postgres', q{BEGIN;
	ALTER TABLE items DETACH PARTITION items_g8192_32767;
	DROP FOREIGN TABLE items_g8192_32767;
	CREATE FOREIGN TABLE items_3 PARTITION OF items FOR VALUES FROM (8192::bigint << 48) TO (12288::bigint << 48) SERVER s2 OPTIONS (table_name 'items_3');
	CREATE FOREIGN TABLE items_4 PARTITION OF items FOR VALUES FROM (12288::bigint << 48) TO (16384::bigint << 48) SERVER s2 OPTIONS (table_name 'items_4');
	CREATE FOREIGN TABLE items_5 PARTITION OF items FOR VALUES FROM (16384::bigint << 48) TO (MAXVALUE) SERVER s2 OPTIONS (table_name 'items_5');
	ALTER TABLE notes DETACH PARTITION notes_g8192_32767;
	DROP FOREIGN TABLE notes_g8192_32767;
	CREATE FOREIGN TABLE notes_3 PARTITION OF notes FOR VALUES FROM (8192::bigint << 48) TO (MAXVALUE) SERVER s2 OPTIONS (table_name 'notes_3');
	COMMIT});
$node{s2}->safe_psql('postgres', 'DROP TABLE notes_g8192_32767, items_g8192_32767');
my $rows6 = $router->safe_psql('postgres', q{SELECT count(*) || ' ' || count(DISTINCT item_id) FROM items});
my $notes6 = $router->safe_psql('postgres', q{SELECT count(*) FROM notes});
note 'loads: ' . $router->safe_psql('postgres', q{SELECT string_agg(partition || ' ' || rows, ', ') FROM snowseq_shard_stats('items')});
sub merge_steps
{
	my ($args) = @_;
	return $router->safe_psql('postgres', qq{SELECT string_agg(first_gene || '-' || last_gene || ' ' || from_server, ', ')
		FROM snowseq_rebalance_plan('items', threshold => 10$args) WHERE from_server = to_server});
}
is(merge_steps(''), '', '(6) no merge is planned without merge_below');
is(merge_steps(', merge_below => 0.5'), '',
	'(6) nor with it where a partition of the placement group reaches past the cold neighbours (notes_3: genes 8192 to 32767)');
# notes cut at 16384 too: its partition of the cold genes lies inside them
$node{s2}->safe_psql('postgres', q{CREATE TABLE notes_5 (note_id bigint PRIMARY KEY, item_id bigint NOT NULL, body text);
	WITH d AS (DELETE FROM notes_3 WHERE note_id >= 16384::bigint << 48 RETURNING *) INSERT INTO notes_5 SELECT * FROM d});
$router->safe_psql('postgres', q{BEGIN;
	ALTER TABLE notes DETACH PARTITION notes_3;
	ALTER TABLE notes ATTACH PARTITION notes_3 FOR VALUES FROM (8192::bigint << 48) TO (16384::bigint << 48);
	CREATE FOREIGN TABLE notes_5 PARTITION OF notes FOR VALUES FROM (16384::bigint << 48) TO (MAXVALUE) SERVER s2 OPTIONS (table_name 'notes_5');
	COMMIT});
is(merge_steps(', merge_below => 0.5'), '8192-16383 s2', '(6) with notes cut alike, the two cold neighbours on s2 merge');
is(merge_steps(', merge_below => 0.01'), '', '(6) not below a load they exceed');
($rc, $out, $err) = $router->psql('postgres', q{SELECT * FROM snowseq_rebalance_plan('items', merge_below => 2)});
like($err, qr/rebalance merge_below '2' is not between 0 and 1/, '(6) merge_below above 1 is refused');
# what a merge would not carry over is refused before anything is made
for my $bad (
	[ 'CREATE VIEW items_3_v AS SELECT * FROM items_3', 'DROP VIEW items_3_v', qr/the view or rule (public\.)?items_3_v on table (public\.)?items_3 on server "s2" keeps genes 8192 to 16383 from being merged/ ],
	[ 'CREATE UNIQUE INDEX items_4_k ON items_4 (k)', 'DROP INDEX items_4_k', qr/the unique index (public\.)?items_4_k of table (public\.)?items_4 on server "s2" keeps genes 8192 to 16383 from being merged/ ],
	[ 'CREATE PUBLICATION items_pub FOR TABLE items_3', 'DROP PUBLICATION items_pub', qr/the publication items_pub of table (public\.)?items_3 on server "s2" keeps genes 8192 to 16383 from being merged/ ],
	[ 'ALTER TABLE items_4 FORCE ROW LEVEL SECURITY', 'ALTER TABLE items_4 NO FORCE ROW LEVEL SECURITY', qr/the FORCE ROW LEVEL SECURITY of table (public\.)?items_4 on server "s2" keeps genes 8192 to 16383 from being merged/ ])
{
	$node{s2}->safe_psql('postgres', $bad->[0]);
	($rc, $out, $err) = $router->psql('postgres', q{CALL snowseq_merge_partitions('items', 8192, 16383)});
	like($err, $bad->[2], "(6) refused: $bad->[0]");
	$node{s2}->safe_psql('postgres', $bad->[1]);
}
is(merge_leftovers($node{s2}), '', '(6) the refused merges left nothing');
# a table of the merged table's name there already; and a query on s2
# holding items_3 when the switch comes: the switch tries again until it
# has gone
$node{s2}->safe_psql('postgres', 'CREATE TABLE items_g8192_16383 (x int)');
# and a tombstone of genes moved away from items_4 once (a fence "moved")
$node{s2}->safe_psql('postgres', q{SELECT snowseq_fence_state(snowseq_fence_open('tomb', 'items_4', 0, 1, 'elsewhere'), 'moved')});
my $holder = $node{s2}->background_psql('postgres');
$holder->query_safe('BEGIN; LOCK TABLE items_3 IN ACCESS SHARE MODE');
my ($rout, $rerr) = ('', '');
my $rebalance = IPC::Run::start([ 'psql', '-X', '-d', $router->connstr('postgres'),
	'-c', q{CALL snowseq_rebalance('items', threshold => 10, merge_below => 0.5)} ], '>', \$rout, '2>', \$rerr);
ok(wait_until(sub { $rebalance->pump_nb; $rerr =~ /the switch found the tables busy/ }),
	'(6) the switch finds items_3 busy, and will try again');
$holder->query_safe('COMMIT');
$holder->quit;
ok($rebalance->finish, '(6) CALL snowseq_rebalance runs the merge');
note "rebalance:\n$rerr";
like($rerr, qr/step 1 of 1: the partitions of genes 8192 to 16383 of table items on server "s2" merge/, '(6) ... saying so');
like(parts('items'), qr/^items_5:s2.items_5 items_g0_8191:s1.items_g0_8191 items_g8192_16383:s2.items_g8192_16383_j\d+$/,
	'(6) items: genes 8192..16383 in one partition, its table named after the merge (the name was taken)');
is(parts('notes'), 'notes_3:s2.notes_3 notes_5:s2.notes_5 notes_g0_8191:s1.notes_g0_8191',
	'(6) notes: already one partition there, as it was');
is($router->safe_psql('postgres', q{SELECT count(*) || ' ' || count(DISTINCT item_id) FROM items}), $rows6, '(6) every item is there once');
is($router->safe_psql('postgres', q{SELECT count(*) FROM notes}), $notes6, '(6) every note too');
is($router->safe_psql('postgres', q{SELECT state || ' ' || (rows_copied > 0) FROM snowseq_rebalance_steps
	WHERE from_server = to_server}), 'done true', '(6) the step is done, with the rows it copied');
is(merge_leftovers($node{s2}), '', '(6) nothing of the merge is left on s2');
is($node{s2}->safe_psql('postgres', q{SELECT count(*) FROM snowseq_fence}), '0', '(6) the fences of the tables it dropped went with them');

$router->stop;
$node{$_}->stop for sort keys %node;
done_testing();
