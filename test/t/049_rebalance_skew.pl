# The rebalancer where the rows are not spread evenly over a partition's
# genes (a hot range of keys): a cut is sized by a histogram of the
# partition's rows, counted where they live, not on the assumption that
# rows are even over genes.
#
#   router  (node 1): items PARTITION BY RANGE (item_id), postgres_fdw
#                       items_0 -> s1.items_1: genes     0..16383
#                       items_1 -> s2.items_2: genes 16384..32767
#   s1, s2  (nodes 2, 3): wal_level = logical
#
# 1,000 rows of hashed keys over all genes, and 3,072 more in s1's last 384
# genes (16000..16383, 8 each): s1 holds about 3,572 rows, s2 about 500.
# Evening them out moves about 1,536 rows from the end of s1's partition.
# Assuming rows even over genes, the plan would cut 7,000 genes or so,
# which hold about 3,400 rows (all of the hot ones); the histogram cuts a
# little over 200 genes, which hold what the plan says.  The CALL then
# evens the servers out in one move, in its first round.
# Then a second table, notes, partitioned as items are (a placement group:
# it moves with them), gets 4,000 rows in s2's genes: items alone are
# even, the group is not.  The plan by rows counts both tables (its
# histogram too: each step's genes hold the rows it says) and the CALL
# evens the group out; the plan by writes counts the writes of notes.
use strict;
use warnings;
use lib 'test';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my @shard_conf = shard_conf();
my $router = snowseq_node('router', node_id => 1);
my %node = map { ("s$_" => snowseq_node("s$_", node_id => $_ + 1, conf => \@shard_conf)) } 1 .. 2;
my @servers = sort keys %node;

gene_sharded_items($router, \%node, [ [ 0, 16383 ], [ 16384, 32767 ] ], 1000);
is($router->safe_psql('postgres', q{
	WITH i AS (INSERT INTO items (item_id, k)
		SELECT (g::bigint << 48) | n, 'hot ' || g || ' ' || n FROM generate_series(16000, 16383) g, generate_series(1, 8) n
		RETURNING 1) SELECT count(*) FROM i}), '3072', 'the hot range: 3,072 rows in genes 16000 to 16383');

sub loads
{
	return { map { split /\|/ } split /\n/, $router->safe_psql('postgres',
			q{SELECT shard, sum(rows) FROM snowseq_shard_stats('items') GROUP BY shard}) };
}
my $before = loads();
note 'rows per server: ' . join(', ', map { "$_ $before->{$_}" } @servers);
cmp_ok($before->{s1}, '>', 3 * $before->{s2}, 's1 holds most rows');

# the rows a gene range holds, counted
sub rows_in
{
	my ($f, $l) = @_;
	return $router->safe_psql('postgres',
		"SELECT count(*) FROM items WHERE item_id >= (${f}::bigint << 48) AND (item_id >> 48) <= $l");
}

my @plan = map { [ split /\|/ ] } split /\n/, $router->safe_psql('postgres',
	q{SELECT step, first_gene, last_gene, from_server, to_server, rows FROM snowseq_rebalance_plan('items', 'rows', 1.1)});
note 'plan: ' . join('; ', map { join ' ', @$_ } @plan);
is(scalar(@plan), 1, 'the plan is one move');
my ($step, $first, $last, $from, $to, $planned) = @{ $plan[0] };
is("$from $to $last", 's1 s2 16383', 'the last genes of s1 go to s2');
my $actual = rows_in($first, $last);
my $mean = ($before->{s1} + $before->{s2}) / 2;
note "genes $first to $last: planned $planned rows, hold $actual; s1 should give " . ($before->{s1} - $mean);
ok(abs($actual - $planned) <= 0.1 * $planned, "the genes cut hold the rows the plan says (planned $planned, hold $actual)");
cmp_ok($first, '>', 16000 - 400, "the cut takes a few hundred genes, not thousands (from gene $first)");
ok(abs($actual - ($before->{s1} - $mean)) <= 0.1 * $mean, 'and about what evens the servers out');

# the plan by writes has no histogram: while nothing is written it plans nothing
my ($rc, $out, $err) = $router->psql('postgres', q{SELECT count(*) FROM snowseq_rebalance_plan('items', 'writes', sample => '1 s')});
is("$rc $out", '0 0', 'the plan by writes, with nothing written, moves nothing');

($rc, $out, $err) = $router->psql('postgres', q{CALL snowseq_rebalance('items', 'rows', 1.1)},
	timeout => $PostgreSQL::Test::Utils::timeout_default * 3);
is($rc, 0, 'the rebalance succeeds') or diag($err);
note $err;
my $after = loads();
note 'rows per server after: ' . join(', ', map { "$_ $after->{$_}" } @servers);
my $amean = ($after->{s1} + $after->{s2}) / 2;
ok(!grep({ $after->{$_} > 1.1 * $amean } @servers), 'no server holds more than 1.1 x the mean rows');
is($router->safe_psql('postgres', q{SELECT rounds || ' ' || (SELECT count(*) FROM snowseq_rebalance_steps st WHERE st.run_id = r.run_id)
	FROM snowseq_rebalance_runs r}), '1 1', 'in one move, planned in the first round');
is($after->{s1} + $after->{s2}, 4072, 'every row is there');
is($router->safe_psql('postgres', 'SELECT count(*) || \' \' || count(DISTINCT item_id) FROM items'), '4072 4072',
	'once');
is(join(', ', move_leftovers('postgres', map { $node{$_} } @servers)), '', 'no replication object or fence is left');

# ---------------------------------------------------------------------
# The placement group: a second gene-sharded table moves with items, and
# its rows and writes count with theirs
# ---------------------------------------------------------------------
# notes: a partition for each of items' partitions, on its server, reading
# a table of its own name (a move copies into the table of that name)
my @parts = map { [ split /\|/ ] } split /\n/, $router->safe_psql('postgres', q{
	SELECT pg_get_expr(c.relpartbound, c.oid), s.srvname FROM pg_inherits i
	JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_foreign_table ft ON ft.ftrelid = c.oid
	JOIN pg_foreign_server s ON s.oid = ft.ftserver
	WHERE i.inhparent = 'items'::regclass ORDER BY c.oid});
my $notes_sql = "CREATE TABLE notes (note_id bigint NOT NULL, body text NOT NULL) PARTITION BY RANGE (note_id);\n";
for my $i (0 .. $#parts)
{
	my ($bound, $server) = @{ $parts[$i] };
	$node{$server}->safe_psql('postgres', "CREATE TABLE notes_$i (note_id bigint PRIMARY KEY, body text NOT NULL)");
	$notes_sql .= "CREATE FOREIGN TABLE notes_$i PARTITION OF notes $bound SERVER $server OPTIONS (table_name 'notes_$i');\n";
}
$router->safe_psql('postgres', $notes_sql);
is($router->safe_psql('postgres', q{SELECT string_agg(member::text, ',') FROM snowseq_placement_group('items')}),
	'items,notes', 'group: snowseq_placement_group says notes moves with items');
is($router->safe_psql('postgres', q{SELECT string_agg(member::text, ',') FROM snowseq_placement_group('pg_class')}),
	'pg_class', 'group: a table that is not gene-sharded moves alone');
# 4,000 notes in genes 20000..23999, all on s2: items are even, the group is not
$router->safe_psql('postgres', q{INSERT INTO notes SELECT (g::bigint << 48) | 1, 'note ' || g FROM generate_series(20000, 23999) g});
sub group_loads
{
	return { map { split /\|/ } split /\n/, $router->safe_psql('postgres',
			q{SELECT shard, sum(rows) FROM snowseq_placement_group('items') g, LATERAL snowseq_shard_stats(g.member) s GROUP BY shard}) };
}
my $items = loads();
$before = group_loads();
note 'group rows per server: ' . join(', ', map { "$_ $before->{$_}" } @servers) . '; items alone: ' . join(', ', map { "$_ $items->{$_}" } @servers);
ok(!grep({ $items->{$_} > 1.1 * ($items->{s1} + $items->{s2}) / 2 } @servers), 'group: items alone are even');
cmp_ok($before->{s2}, '>', 2 * $before->{s1}, 'group: with notes, s2 holds most rows');
sub group_rows_in
{
	my ($f, $l) = @_;
	return rows_in($f, $l) + $router->safe_psql('postgres',
		"SELECT count(*) FROM notes WHERE note_id >= (${f}::bigint << 48) AND (note_id >> 48) <= $l");
}
@plan = map { [ split /\|/ ] } split /\n/, $router->safe_psql('postgres',
	q{SELECT step, first_gene, last_gene, from_server, to_server, rows FROM snowseq_rebalance_plan('items', 'rows', 1.1)});
note 'plan: ' . join('; ', map { join ' ', @$_ } @plan);
ok(scalar(@plan) >= 1 && !grep({ $_->[3] ne 's2' || $_->[4] ne 's1' } @plan),
	'group: the plan by rows counts the notes: genes go from s2 to s1');
$mean = ($before->{s1} + $before->{s2}) / 2;
my ($planned_all, $actual_all) = (0, 0);
for my $p (@plan)
{
	($step, $first, $last, $from, $to, $planned) = @$p;
	$actual = group_rows_in($first, $last);
	ok(abs($actual - $planned) <= 0.1 * $planned,
		"group: step $step, genes $first to $last hold the rows of both tables the plan says (planned $planned, hold $actual)");
	$planned_all += $planned;
	$actual_all += $actual;
}
note "planned $planned_all rows of items and notes, the genes hold $actual_all; s2 should give " . ($before->{s2} - $mean);
ok(abs($actual_all - ($before->{s2} - $mean)) <= 0.1 * $mean, 'group: the plan moves about what evens the servers out');

($rc, $out, $err) = $router->psql('postgres', q{CALL snowseq_rebalance('items', 'rows', 1.1)},
	timeout => $PostgreSQL::Test::Utils::timeout_default * 3);
is($rc, 0, 'group: the rebalance succeeds') or diag($err);
note $err;
$after = group_loads();
note 'group rows per server after: ' . join(', ', map { "$_ $after->{$_}" } @servers);
$amean = ($after->{s1} + $after->{s2}) / 2;
ok(!grep({ $after->{$_} > 1.1 * $amean } @servers), 'group: no server holds more than 1.1 x the mean rows of both tables');
is($router->safe_psql('postgres', q{SELECT count(*) || ' ' || count(DISTINCT item_id) FROM items})
	. ' ' . $router->safe_psql('postgres', q{SELECT count(*) || ' ' || count(DISTINCT note_id) FROM notes}),
	'4072 4072 4000 4000', 'group: every item and note is there, once');
is(join(', ', move_leftovers('postgres', map { $node{$_} } @servers)), '', 'group: no replication object or fence is left');

# writes: the notes of s1's genes are updated, items are not written; the
# plan by writes, given the counters read before, counts them
# the moves' sessions and workers are gone (a backend reports its counts
# as it exits): what is counted from here on is the updates
for my $server (@servers)
{
	ok($node{$server}->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity
		WHERE application_name = 'snowseq move' OR backend_type = 'logical replication worker'}),
		"group: no session or worker of a move is left on $server");
}
# the first reading: each partition's write counters and its server's next
# transaction id
sub first_reading
{
	return split /\|/, $router->safe_psql('postgres', q{SELECT array_agg(sc.partition::oid)::text || '|'
		|| array_agg(sc.writes)::text || '|' || array_agg(sc.next_xid)::text
		FROM snowseq_placement_group('items') g, LATERAL snowseq_shard_counters(g.member) sc});
}
my ($w0p, $w0, $w0x) = first_reading();
my $updated = $router->safe_psql('postgres', q{WITH u AS (UPDATE notes n SET body = body || '.' FROM snowseq_shard_stats('notes') s
	WHERE s.shard = 's1' AND (n.note_id >> 48) BETWEEN s.first_gene AND s.last_gene RETURNING 1) SELECT count(*) FROM u});
note "notes updated on s1: $updated";
cmp_ok($updated, '>', 100, 'group: notes on s1 are updated');
ok($router->poll_query_until('postgres', qq{SELECT sum(writes) >= (SELECT sum(w) FROM unnest('$w0'::bigint[]) w) + $updated
	FROM snowseq_placement_group('items') g, LATERAL snowseq_shard_counters(g.member) sc}),
	'group: the servers have counted the updates');
@plan = map { [ split /\|/ ] } split /\n/, $router->safe_psql('postgres',
	qq{SELECT step, first_gene, last_gene, from_server, to_server, rows FROM snowseq_rebalance_plan_from('items', 'writes', 1.1,
		'{}', '{}', '1 s', '$w0p', '$w0', '$w0x', now() - interval '10 s', false)});
note 'plan by writes: ' . join('; ', map { join ' ', @$_ } @plan);
ok(scalar(@plan) >= 1 && !grep({ $_->[3] ne 's1' || $_->[4] ne 's2' } @plan),
	'group: the plan by writes counts the writes of notes: genes go from s1 to s2');

# a table of the group with no partition for most of the map's genes: the
# genes it lacks count nothing (they were taken for a partition of no
# server, on several servers, and refused)
$node{s1}->safe_psql('postgres', 'CREATE TABLE tags_0 (tag_id bigint PRIMARY KEY)');
$router->safe_psql('postgres', q{CREATE TABLE tags (tag_id bigint NOT NULL) PARTITION BY RANGE (tag_id);
	CREATE FOREIGN TABLE tags_0 PARTITION OF tags FOR VALUES FROM (0) TO (100::bigint << 48) SERVER s1 OPTIONS (table_name 'tags_0');
	INSERT INTO tags SELECT (g::bigint << 48) | 1 FROM generate_series(0, 99) g});
is($router->safe_psql('postgres', q{SELECT string_agg(member::text, ',') FROM snowseq_placement_group('items')}),
	'items,notes,tags', 'group: tags, on genes 0 to 99 alone, is in the group');
($rc, $out, $err) = $router->psql('postgres', q{SELECT count(*) FROM snowseq_rebalance_plan('items', 'rows', 1.1)});
is($rc, 0, 'group: a table of the group without a partition for most genes does not stop the plan') or diag($err);

# ---------------------------------------------------------------------
# Writes inside a partition: the cut of a plan by writes is sized by the
# rows written during the sample, counted by genes where they live (their
# xmin against the first reading's transaction id), not on the assumption
# that the writes are even over the partition's genes
# ---------------------------------------------------------------------
# s1's widest partition of items; 512 rows in its last 512 genes, before
# the first reading
my ($hf, $hl) = split /\|/, $router->safe_psql('postgres', q{SELECT first_gene, last_gene FROM snowseq_shard_stats('items')
	WHERE shard = 's1' ORDER BY last_gene - first_gene DESC LIMIT 1});
cmp_ok($hl - $hf + 1, '>=', 8192, "s1 has a wide partition of items: genes $hf to $hl");
my $hot = $hl - 511;
$router->safe_psql('postgres', qq{INSERT INTO items (item_id, k) SELECT (g::bigint << 48) | 77, 'warm ' || g
	FROM generate_series($hot, $hl) g});
for my $server (@servers)
{
	ok($node{$server}->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity
		WHERE application_name = 'snowseq move' OR backend_type = 'logical replication worker'}),
		"writes inside: no session or worker of a move is left on $server");
}
($w0p, $w0, $w0x) = first_reading();
# during the sample: every item in the last 512 genes is updated, and
# every one in the first half of the partition; nothing else is written
my $written = $router->safe_psql('postgres', qq{WITH u AS (UPDATE items SET k = k || ' w'
	WHERE item_id >= (${hot}::bigint << 48) AND (item_id >> 48) <= $hl
		OR item_id >= (${hf}::bigint << 48) AND (item_id >> 48) < $hf + ($hl - $hf + 1) / 2 RETURNING 1)
	SELECT count(*) FROM u});
my $hot_written = $router->safe_psql('postgres', qq{SELECT count(*) FROM items WHERE k LIKE '% w'
	AND item_id >= (${hot}::bigint << 48) AND (item_id >> 48) <= $hl});
note "writes inside: $written items updated, $hot_written of them in genes $hot to $hl";
cmp_ok($hot_written, '>', $written / 2, 'writes inside: most of the rows written are in the last 512 genes');
ok($router->poll_query_until('postgres', qq{SELECT sum(writes) >= (SELECT sum(w) FROM unnest('$w0'::bigint[]) w) + $written
	FROM snowseq_placement_group('items') g, LATERAL snowseq_shard_counters(g.member) sc}),
	'writes inside: the servers have counted the updates');
# the histogram of the partition: its rows, and those written since
my $part = $router->safe_psql('postgres', qq{SELECT partition FROM snowseq_shard_stats('items') WHERE first_gene = $hf AND shard = 's1'});
is($router->safe_psql('postgres', qq{SELECT sum(rows) || ' ' || sum(written) FROM snowseq_shard_histogram('$part', 'item_id', $hf, $hl, 64,
		(SELECT x FROM unnest('$w0p'::oid[], '$w0x'::bigint[]) u(p, x) WHERE p = '$part'::regclass))}),
	$router->safe_psql('postgres', qq{SELECT count(*) || ' ' || count(*) FILTER (WHERE k LIKE '% w') FROM items
		WHERE item_id >= (${hf}::bigint << 48) AND (item_id >> 48) <= $hl}),
	'snowseq_shard_histogram: the rows of the partition, and those written since the first reading');
@plan = map { [ split /\|/ ] } split /\n/, $router->safe_psql('postgres',
	qq{SELECT step, first_gene, last_gene, from_server, to_server, rows FROM snowseq_rebalance_plan_from('items', 'writes', 1.1,
		'{}', '{}', '1 s', '$w0p', '$w0', '$w0x', now() - interval '10 s', false)});
note 'writes inside: plan ' . join('; ', map { join ' ', @$_ } @plan);
is(scalar(@plan), 1, 'writes inside: the plan is one move');
my ($cf, $cl, $cfrom, $cto, $crows) = @{ $plan[0] }[ 1 .. 5 ];
is("$cfrom $cto $cl", "s1 s2 $hl", 'writes inside: the last genes of the partition go from s1 to s2');
my ($cut_written, $cut_rows) = split /\|/, $router->safe_psql('postgres', qq{SELECT count(*) FILTER (WHERE k LIKE '% w') || '|' || count(*)
	FROM items WHERE item_id >= (${cf}::bigint << 48) AND (item_id >> 48) <= $cl});
note "writes inside: genes $cf to $cl hold $cut_written of the $written rows written, and $cut_rows rows (planned $crows)";
cmp_ok($cf, '>=', $hot, "writes inside: the cut lies in the hot genes (from gene $cf)");
ok(abs($cut_written - $written / 2) <= 0.1 * $written,
	"writes inside: the cut holds about half the rows written ($cut_written of $written)");
ok(abs($cut_rows - $crows) <= 0.1 * $cut_rows + 2, "writes inside: and the rows the plan says (planned $crows, hold $cut_rows)");


# ---------------------------------------------------------------------
# A server can take genes only if no table read there has the name of a
# table the move takes along: a move copies each table of the group into
# the table of that name on the destination
# ---------------------------------------------------------------------
# tags of genes 16384 to 16483, which the map puts on s2, in a table there
# named as s1's table of tags of genes 0 to 99
$node{s2}->safe_psql('postgres', 'CREATE TABLE tags_0 (tag_id bigint PRIMARY KEY)');
is($router->safe_psql('postgres', q{SELECT DISTINCT shard FROM snowseq_shard_map WHERE upper_gene >= 16384 AND upper_gene <= 16483
	OR upper_gene = (SELECT min(upper_gene) FROM snowseq_shard_map WHERE upper_gene >= 16483)}), 's2', 'the map puts genes 16384 to 16483 on s2');
$router->safe_psql('postgres', q{CREATE FOREIGN TABLE tags_1 PARTITION OF tags FOR VALUES FROM (16384::bigint << 48) TO (16484::bigint << 48)
	SERVER s2 OPTIONS (table_name 'tags_0')});
# draining s1: its partition of genes 0 to 16190 would take s1's tags_0
# into s2's tags_0
($rc, $out, $err) = $router->psql('postgres', q{SELECT * FROM snowseq_rebalance_plan('items', 'rows', 1.1, drain => '{s1}')});
like($err, qr/no server can take genes 0 to $hl of server "s1": each reads a table named as one that they are read from there \(.*tags_0.*\)/,
	'can take: a drain is refused where a table of the group has the name of one read on the destination');
note $err;
# balancing: no step takes the genes of s1's tags to s2
@plan = map { [ split /\|/ ] } split /\n/, $router->safe_psql('postgres',
	q{SELECT step, first_gene, last_gene, from_server, to_server FROM snowseq_rebalance_plan('items', 'rows', 1.0)});
note 'can take: plan at 1.0: ' . join('; ', map { join ' ', @$_ } @plan);
ok(!grep({ $_->[1] <= 99 && $_->[3] eq 's1' && $_->[4] eq 's2' } @plan), 'can take: no step takes genes 0 to 99 from s1 to s2');
# tags of genes 16484 to 16583 on s2 in a table named as the one s1's items
# of genes 0 to 16190 read: no step takes genes of that partition to s2
my $items_remote = $router->safe_psql('postgres', q{SELECT option_value FROM pg_foreign_table ft, pg_options_to_table(ft.ftoptions)
	WHERE ft.ftrelid = (SELECT partition FROM snowseq_shard_stats('items') WHERE first_gene = 0) AND option_name = 'table_name'});
$node{s2}->safe_psql('postgres', qq{CREATE TABLE "$items_remote" (tag_id bigint PRIMARY KEY)});
$router->safe_psql('postgres', qq{CREATE FOREIGN TABLE tags_2 PARTITION OF tags FOR VALUES FROM (16484::bigint << 48) TO (16584::bigint << 48)
	SERVER s2 OPTIONS (table_name '$items_remote')});
@plan = map { [ split /\|/ ] } split /\n/, $router->safe_psql('postgres',
	q{SELECT step, first_gene, last_gene, from_server, to_server FROM snowseq_rebalance_plan('items', 'rows', 1.0)});
note "can take: plan at 1.0 with tags in a table named $items_remote on s2: " . join('; ', map { join ' ', @$_ } @plan);
is($router->safe_psql('postgres', q{SELECT DISTINCT shard FROM snowseq_shard_map WHERE upper_gene >= 16484 AND upper_gene <= 16583
	OR upper_gene = (SELECT min(upper_gene) FROM snowseq_shard_map WHERE upper_gene >= 16583)}), 's2', 'the map puts genes 16484 to 16583 on s2');
ok(grep({ $_->[3] eq 's1' && $_->[4] eq 's2' } @plan), 'can take: the plan at 1.0 still moves genes from s1 to s2');
ok(!grep({ $_->[2] <= $hl && $_->[3] eq 's1' && $_->[4] eq 's2' } @plan),
	"can take: no step takes genes 0 to $hl (table $items_remote) from s1 to s2, where tags are read from a table of that name");

done_testing();
