# The SQL examples of README.md and the guides that need a router with shard
# servers run, as 063_docs runs the others: every ```sql block preceded by
# <!-- shards: where --> runs here, in the order of its page, and must not
# fail.  Where it runs:
#   "on each shard server, database shop": in database shop of shard_a and
#      shard_b (shard_b with the CHECK of its genes that the example's
#      comment gives);
#   "on the router, database shop": in database shop of the router, with
#      the servers' addresses in place of the example's host and port;
#   "on the router, orders on shard_a and shard_b, ...": in a database of
#      its own on every server, made for the block: orders partitioned by
#      gene range on the router, genes 0..16383 on shard_a (table orders_a),
#      16384..32767 on shard_b (orders_b: a move copies into the table of
#      the same name on the destination), 3,000 rows; shard_c and shard_d are postgres_fdw servers
#      with snowseq and nothing else (moves number from 1).
# After each block of moves, every row is still there once.
use strict;
use warnings;
use lib 'test';
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $router = snowseq_node('router', node_id => 1);
my %shard = map { ("shard_$_->[0]" => snowseq_node("shard_$_->[0]", node_id => $_->[1], conf => [shard_conf()])) }
  ([ 'a', 2 ], [ 'b', 3 ], [ 'c', 4 ], [ 'd', 5 ]);
my @nodes = ($router, values %shard);
$_->safe_psql('postgres', 'CREATE ROLE app LOGIN') for @nodes;

my @blocks;
for my $p ('README.md', glob('docs/*.md'))
{
	my $t = slurp_file($p);
	utf8::decode($t);
	push @blocks, map { [ $p, @$_ ] } grep { defined $_->[2] && $_->[2][0] eq 'shards' } doc_sql_blocks($t);
}
cmp_ok(scalar(@blocks), '>=', 7, scalar(@blocks) . ' SQL examples need shard servers');

my $orders = qr/^on the router, orders on shard_a and shard_b/;
my %made;
for my $b (@blocks)
{
	my ($p, $line, $sql, $marker) = @$b;
	my $where = $marker->[1];
	my @runs;
	if ($where eq 'on each shard server, database shop')
	{
		for my $s ('shard_a', 'shard_b')
		{
			$shard{$s}->safe_psql('postgres', 'CREATE DATABASE shop') unless $made{"$s/shop"}++;
			my $x = $sql;
			$x =~ s/int8range\(0, 16384::bigint << 48\)/int8range(16384::bigint << 48, NULL)/ if $s eq 'shard_b';
			push @runs, [ $shard{$s}, 'shop', $x ];
		}
	}
	elsif ($where eq 'on the router, database shop')
	{
		$router->safe_psql('postgres', 'CREATE DATABASE shop') unless $made{'router/shop'}++;
		my $x = $sql;
		for my $s ('shard_a', 'shard_b')
		{
			my ($h, $port) = ($shard{$s}->host, $shard{$s}->port);
			(my $host = $s) =~ s/_/-/;
			$x =~ s/host '$host', port '5432'/host '$h', port '$port'/;
		}
		push @runs, [ $router, 'shop', $x ];
	}
	elsif ($where =~ $orders)
	{
		(my $db = lc "doc_${p}_$line") =~ s/[^a-z0-9]+/_/g;
		orders_fixture($db);
		push @runs, [ $router, $db, $sql ];
	}
	else
	{
		fail("$p:$line: an unknown place to run: $where");
		next;
	}
	for my $r (@runs)
	{
		my ($node, $db, $x) = @$r;
		my ($out, $err) = ('', '');
		my $rc = $node->psql($db, $x, stdout => \$out, stderr => \$err, on_error_stop => 1);
		is($rc, 0, "$p: the SQL example at line $line runs on " . $node->name . " ($where)")
		  or diag("$err\n--- the example:\n$x");
	}
	if ($where =~ $orders)
	{
		my ($db) = map { $_->[1] } @runs;
		is($router->safe_psql($db, 'SELECT count(*), count(DISTINCT order_id) FROM orders'), '3000|3000',
			"$p:$line: every order is there once after the example");
		is($router->safe_psql($db, q{SELECT count(*) FROM snowseq_moves WHERE state NOT IN ('done', 'reverted')}),
			'0', "$p:$line: every move of the example is over");
	}
}

# A database $db on every server: orders on shard_a and shard_b, postgres_fdw
# servers shard_a .. shard_d on the router, 3,000 orders.
sub orders_fixture
{
	my ($db) = @_;
	$_->safe_psql('postgres', "CREATE DATABASE $db") for @nodes;
	$_->safe_psql($db, 'CREATE EXTENSION snowseq') for @nodes;
	my $table = q{CREATE TABLE %s (
		order_id bigint PRIMARY KEY,
		buyer_id text NOT NULL,
		amount numeric NOT NULL DEFAULT 0)};
	# no CHECK of the genes of each server: a merge gives the merged table
	# the checks of the first table it merges
	$shard{$_->[0]}->safe_psql($db, sprintf($table, $_->[1])) for [ 'shard_a', 'orders_a' ], [ 'shard_b', 'orders_b' ];
	$router->safe_psql($db, "CREATE EXTENSION postgres_fdw;\n"
		  . fdw_servers_sql($db, map { [ $_, $shard{$_} ] } sort keys %shard) . q{
CREATE TABLE orders (order_id bigint NOT NULL, buyer_id text NOT NULL, amount numeric NOT NULL DEFAULT 0)
	PARTITION BY RANGE (order_id);
CREATE FOREIGN TABLE orders_0 PARTITION OF orders FOR VALUES FROM (0) TO (16384::bigint << 48)
	SERVER shard_a OPTIONS (table_name 'orders_a');
CREATE FOREIGN TABLE orders_1 PARTITION OF orders FOR VALUES FROM (16384::bigint << 48) TO (MAXVALUE)
	SERVER shard_b OPTIONS (table_name 'orders_b');
INSERT INTO snowseq_shard_map VALUES (16383, 'shard_a'), (32767, 'shard_b');
INSERT INTO orders (order_id, buyer_id)
	SELECT snowseq_gene_next('b' || i % 900), 'b' || i % 900 FROM generate_series(1, 3000) i;
});
}

$_->stop for @nodes;
done_testing();
