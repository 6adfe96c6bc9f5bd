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

done_testing();
