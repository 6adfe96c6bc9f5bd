# A rebalance whose moves are kept revertable (snowseq.move_revert_window):
# until such a move is finalized, its destination keeps a table of the
# source table's name (the way back publishes through it), so a second
# move of a table of that name to the same server fails.  The plan counts
# those names as read on the destination.
#
#   router  (node 1): items PARTITION BY RANGE (item_id), postgres_fdw
#                       items_0 -> s1.items_1: genes     0..14999
#                       items_1 -> s2.items_1: genes 15000..29999  (the same name)
#                       items_2 -> s3.items_3: genes 30000..32767
#   s1..s3  (nodes 2..4): wal_level = logical
#
# s1 and s2 hold about 46% of the rows each, s3 about 8%.  Without the
# window the plan sends a cut of each to s3; with it, only one of them (the
# other would be copied into the table that the first one's way back
# keeps there), and while that move is revertable no plan does (its record
# names the table it keeps).  The CALL with the window runs to its end;
# once its move is finalized, every row is there once and nothing of it is
# left.  Then a table of the placement group spans two of items'
# partitions on s1: with the window, a drain of s1 is refused (its second
# move would be, since the first takes genes from that table's partition).
use strict;
use warnings;
use lib 'test';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my @shard_conf = shard_conf();
my $router = snowseq_node('router', node_id => 1);
my %node = map { ("s$_" => snowseq_node("s$_", node_id => $_ + 1, conf => \@shard_conf)) } 1 .. 3;
my @servers = sort keys %node;

gene_sharded_items($router, \%node, [ [ 0, 14999 ], [ 15000, 29999 ], [ 30000, 32767 ] ], 3000);
# s2's table takes the name of s1's (tables of different servers may share one)
$node{s2}->safe_psql('postgres', 'ALTER TABLE items_2 RENAME TO items_1');
$router->safe_psql('postgres', q{ALTER FOREIGN TABLE items_1 OPTIONS (SET table_name 'items_1')});
is($router->safe_psql('postgres', 'SELECT count(*) FROM items'), '3000', 'the router reads every row');

# the plan's steps as "from>to"
sub plan_of
{
	my ($set) = @_;
	return join ' ', map { my @f = split /\|/; "$f[3]>$f[4]" } split /\n/,
	  $router->safe_psql('postgres', "$set SELECT * FROM snowseq_rebalance_plan('items')");
}
my $plain = plan_of('');
note "plan: $plain";
like($plain, qr/^s[12]>s3 s[12]>s3$/, 'without the window, s1 and s2 each send genes to s3');
my $keep = plan_of(q{SET snowseq.move_revert_window = '1h';});
note "plan with moves kept revertable: $keep";
like($keep, qr/^s[12]>s3$/,
	'with the window, only one of them does: the other table of that name would be copied into the one kept there');

my ($rc, $out, $err) = $router->psql('postgres', q{SET snowseq.move_revert_window = '1h'; CALL snowseq_rebalance('items')});
is($rc, 0, 'a rebalance whose moves are kept revertable runs to its end') or diag($err);
my $kept = $router->safe_psql('postgres', q{SELECT string_agg(move_id::text, ',' ORDER BY move_id) FROM snowseq_moves
	WHERE state = 'revertable' AND group_move IS NULL});
like($kept, qr/^\d+$/, "one move, revertable ($kept)");
# the next plan, with the window or without, reads what that move keeps on
# s3 from its record
my $after = plan_of('');
note "plan while it is revertable: $after";
unlike($after, qr/>s3/, 'while it is revertable, no plan sends the other table of that name to s3');
$router->safe_psql('postgres', "CALL snowseq_move_finalize($kept)");
is($router->safe_psql('postgres', q{SELECT count(*) || ' ' || count(DISTINCT item_id) FROM items}), '3000 3000',
	'every row is there once');
is($router->safe_psql('postgres', q{SELECT count(*) FROM items t JOIN pg_foreign_table ft ON ft.ftrelid = t.tableoid
	JOIN pg_foreign_server s ON s.oid = ft.ftserver WHERE snowseq_route(t.item_id) <> s.srvname}), '0',
	'map and partitions agree');
is(join(', ', move_leftovers('postgres', map { $node{$_} } @servers)), '', 'no replication object or fence is left');

# A table of the placement group whose partition spans two of items'
# partitions on s1 (s1's genes, 0 to 10889, cut in two by hand: 0 to 4999
# and 5000 to 10889): a move of either takes genes from it and re-attaches
# the rest under its name, a partition of a revertable move, so with the
# window a drain of s1 would be refused at its second move; the plan says so
is($router->safe_psql('postgres', q{SELECT string_agg(upper_gene || ':' || shard, ' ' ORDER BY upper_gene) FROM snowseq_shard_map}),
	'10889:s1 14999:s3 29999:s2 32767:s3', 'the map the cut by hand starts from: s1 holds genes 0 to 10889');
$node{s1}->safe_psql('postgres', q{CREATE TABLE items_1b (item_id bigint PRIMARY KEY, k text NOT NULL);
	WITH d AS (DELETE FROM items_1 WHERE item_id >= (5000::bigint << 48) RETURNING *) INSERT INTO items_1b SELECT * FROM d;
	CREATE TABLE tags_1 (tag_id bigint PRIMARY KEY, k text NOT NULL)});
$router->safe_psql('postgres', q{BEGIN;
	ALTER TABLE items DETACH PARTITION items_0;
	ALTER TABLE items ATTACH PARTITION items_0 FOR VALUES FROM (0) TO (5000::bigint << 48);
	CREATE FOREIGN TABLE items_0b PARTITION OF items FOR VALUES FROM (5000::bigint << 48) TO (10890::bigint << 48)
		SERVER s1 OPTIONS (table_name 'items_1b');
	CREATE TABLE tags (tag_id bigint NOT NULL, k text NOT NULL) PARTITION BY RANGE (tag_id);
	CREATE FOREIGN TABLE tags_0 PARTITION OF tags FOR VALUES FROM (0) TO (10890::bigint << 48) SERVER s1 OPTIONS (table_name 'tags_1');
	INSERT INTO tags SELECT (g::bigint << 48) | 1, 't' || g FROM generate_series(0, 10889, 99) g;
	COMMIT});
is($router->safe_psql('postgres', q{SELECT count(*) || ' ' || count(DISTINCT item_id) FROM items}), '3000 3000',
	'every row is there once after the cut by hand');
is($router->safe_psql('postgres', q{SELECT count(*) FROM items WHERE (tableoid = 'items_0'::regclass AND (item_id >> 48) >= 5000)
	OR (tableoid = 'items_0b'::regclass AND ((item_id >> 48) < 5000 OR (item_id >> 48) > 10889))}), '0',
	'each row of the two partitions is inside its bounds');
is($router->safe_psql('postgres', q{SELECT string_agg(first_gene || '-' || last_gene, ' ' ORDER BY first_gene)
	FROM snowseq_rebalance_plan('items', drain => '{s1}') WHERE from_server = 's1'}), '0-4999 5000-10889',
	'without the window, the drain of s1 moves both partitions');
($rc, $out, $err) = $router->psql('postgres', q{SET snowseq.move_revert_window = '1h';
	SELECT * FROM snowseq_rebalance_plan('items', drain => '{s1}')});
like($err, qr/genes \d+ to \d+ of server "s1" cannot be drained with moves kept revertable: an earlier step of the drain takes along a partition of its placement group that holds them too/,
	'with it, the drain is refused: its second move would be');

# A plan must take genes from a partition of items where tags' partition
# can give them too (one partition of each table, at one end of it). 2,000
# more rows in genes 0 to 4999 and 982 in 5000 to 10889 make s1 the most
# loaded server, items_0 its biggest partition; a cut of its last genes
# would take genes from the middle of tags_0 (0 to 10889), which a move
# refuses, so the plan takes genes from the end of items_0b instead
is($router->safe_psql('postgres', q{WITH i AS (INSERT INTO items (item_id, k)
		SELECT (g::bigint << 48) | n, 'hot ' || g || ' ' || n FROM generate_series(0, 4999, 5) g, generate_series(1, 2) n
		UNION ALL SELECT (g::bigint << 48) | 1, 'warm ' || g FROM generate_series(5000, 10889, 6) g
		RETURNING 1) SELECT count(*) FROM i}), '2982', '2,982 more rows on s1');
my $shape_plan = $router->safe_psql('postgres', q{SELECT * FROM snowseq_rebalance_plan('items')});
note "plan with tags_0 over both of s1's partitions:\n$shape_plan";
like($shape_plan, qr/^\d+\|\d+\|\d+\|s1\|/m, 'the plan takes genes from s1');
ok(!grep({ my @f = split /\|/; $f[3] eq 's1' && $f[1] >= 1 && $f[1] <= 4999 } split /\n/, $shape_plan),
	'none that starts inside items_0, in the middle of tags_0');
($rc, $out, $err) = $router->psql('postgres', q{CALL snowseq_rebalance('items')});
is($rc, 0, 'and every move of it is one a move accepts: the run ends') or diag($err);
is($router->safe_psql('postgres', q{SELECT count(*) || ' ' || count(DISTINCT item_id) FROM items}), '5982 5982',
	'every row is there once after the run');
is($router->safe_psql('postgres', q{SELECT count(*) FROM items t JOIN pg_foreign_table ft ON ft.ftrelid = t.tableoid
	JOIN pg_foreign_server s ON s.oid = ft.ftserver WHERE snowseq_route(t.item_id) <> s.srvname}), '0',
	'map and partitions agree after the run');
is($router->safe_psql('postgres', q{SELECT count(*) FROM tags t JOIN pg_foreign_table ft ON ft.ftrelid = t.tableoid
	JOIN pg_foreign_server s ON s.oid = ft.ftserver WHERE snowseq_route(t.tag_id) <> s.srvname}), '0',
	'and tags\' partitions agree with the map');
is(join(', ', move_leftovers('postgres', map { $node{$_} } @servers)), '', 'no replication object or fence is left after the run');

# A drain the group cannot give: tags' partition of s1's genes cut in two
# by hand (genes 0 to 2499 and 2500 to 4999), items' one partition there
# holding both; a move of it would be refused ("in more than one
# partition"), so the plan refuses the drain and names them
is($router->safe_psql('postgres', q{SELECT pg_get_expr(relpartbound, oid) FROM pg_class WHERE relname = 'tags_0'}),
	"FOR VALUES FROM ('0') TO ('" . (5000 << 48) . "')", 'tags_0 holds genes 0 to 4999 after the run');
$node{s1}->safe_psql('postgres', q{CREATE TABLE tags_1c (tag_id bigint PRIMARY KEY, k text NOT NULL);
	WITH d AS (DELETE FROM tags_1 WHERE tag_id >= (2500::bigint << 48) RETURNING *) INSERT INTO tags_1c SELECT * FROM d});
$router->safe_psql('postgres', q{BEGIN;
	ALTER TABLE tags DETACH PARTITION tags_0;
	ALTER TABLE tags ATTACH PARTITION tags_0 FOR VALUES FROM (0) TO (2500::bigint << 48);
	CREATE FOREIGN TABLE tags_0c PARTITION OF tags FOR VALUES FROM (2500::bigint << 48) TO (5000::bigint << 48)
		SERVER s1 OPTIONS (table_name 'tags_1c');
	COMMIT});
($rc, $out, $err) = $router->psql('postgres', q{SELECT * FROM snowseq_rebalance_plan('items', drain => '{s1}')});
like($err, qr/genes 0 to 4999 of server "s1" cannot be drained: a move cannot take them from partitions of their placement group \((public\.)?tags_0, (public\.)?tags_0c\)/,
	'a drain the group cannot give is refused, naming the partitions');

# A drain whose order matters: tags' partition whole again (0 to 4999),
# items' cut in three by hand (0 to 999, 1000 to 3999, 4000 to 4999); the
# biggest, in the middle of tags_0, can be given only once one of the
# others is, so it waits for one of them
$node{s1}->safe_psql('postgres', q{INSERT INTO tags_1 SELECT * FROM tags_1c; DROP TABLE tags_1c;
	CREATE TABLE items_1m (item_id bigint PRIMARY KEY, k text NOT NULL);
	CREATE TABLE items_1z (item_id bigint PRIMARY KEY, k text NOT NULL);
	WITH d AS (DELETE FROM items_1 WHERE item_id >= (4000::bigint << 48) RETURNING *) INSERT INTO items_1z SELECT * FROM d;
	WITH d AS (DELETE FROM items_1 WHERE item_id >= (1000::bigint << 48) RETURNING *) INSERT INTO items_1m SELECT * FROM d});
$router->safe_psql('postgres', q{BEGIN;
	DROP FOREIGN TABLE tags_0c;
	ALTER TABLE tags DETACH PARTITION tags_0;
	ALTER TABLE tags ATTACH PARTITION tags_0 FOR VALUES FROM (0) TO (5000::bigint << 48);
	ALTER TABLE items DETACH PARTITION items_0;
	ALTER TABLE items ATTACH PARTITION items_0 FOR VALUES FROM (0) TO (1000::bigint << 48);
	CREATE FOREIGN TABLE items_0m PARTITION OF items FOR VALUES FROM (1000::bigint << 48) TO (4000::bigint << 48)
		SERVER s1 OPTIONS (table_name 'items_1m');
	CREATE FOREIGN TABLE items_0z PARTITION OF items FOR VALUES FROM (4000::bigint << 48) TO (5000::bigint << 48)
		SERVER s1 OPTIONS (table_name 'items_1z');
	COMMIT});
is($router->safe_psql('postgres', q{SELECT count(*) || ' ' || count(DISTINCT item_id) FROM items}), '5982 5982',
	'every row is there once after the second cut by hand');
my @drain = split /\n/, $router->safe_psql('postgres', q{SELECT first_gene || '-' || last_gene
	FROM snowseq_rebalance_plan('items', drain => '{s1}') WHERE from_server = 's1' ORDER BY step});
note 'drain of s1: ' . join(' ', @drain);
is(join(' ', sort { (split /-/, $a)[0] <=> (split /-/, $b)[0] } @drain), '0-999 1000-3999 4000-4999',
	'the drain of s1 moves all three partitions');
isnt($drain[0], '1000-3999', 'the biggest, in the middle of tags\' partition, not first');

# At threshold 1 the plan gives down to the mean; a cut whose genes hold
# no row evens nothing out (the plan cut one empty range of items_0z's
# genes after another, 20 of them)
my @even = split /\n/, $router->safe_psql('postgres', q{SELECT * FROM snowseq_rebalance_plan('items', 'rows', 1.0)});
note "plan at 1.0:\n" . join("\n", @even);
cmp_ok(scalar(@even), '>=', 1, 'the plan at threshold 1 moves genes');
is(join(' ', map { (split /\|/)[1] . '-' . (split /\|/)[2] } grep { (split /\|/)[5] == 0 } @even), '',
	'and no step of it moves no row');

done_testing();
