# Node ids across a fleet: two servers with the same snowseq.node_id issue
# the same IDs, and neither can see it alone.  A router asks every
# postgres_fdw server for its node id, backfill node id and layout (field
# order included): snowseq_check_nodes() reports duplicates (a backfill
# node id equal to another's node id or backfill node id too), other
# layouts, servers that cannot be asked and servers without snowseq;
# snowseq_create_shards and gene-range moves refuse when a duplicate
# concerns them.
use strict;
use warnings;
use lib 'test';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $router = snowseq_node('router', node_id => 1, conf => [ "timezone = 'UTC'" ]);
my $a = snowseq_node('node_a', node_id => 2);
my $b = snowseq_node('node_b', node_id => 2);                 # a's node id
my $c = snowseq_node('node_c', node_id => 3,                  # another layout
	conf => [ 'snowseq.time_bits = 42', 'snowseq.node_bits = 9', 'snowseq.seq_bits = 12' ]);
my $d = snowseq_node('node_d', node_id => 4);                 # will be down
my $e = snowseq_node('node_e', node_id => 5, extension => 0); # no snowseq in its database
my $f = snowseq_node('node_f', node_id => 1);                 # the router's node id

$router->safe_psql('postgres', 'CREATE EXTENSION postgres_fdw');
# a2 is a second server object for a's cluster, self one for the router's
# own: one cluster has one clock, so they share its node id rightly
for my $s ([ 'a', $a ], [ 'a2', $a ], [ 'b', $b ], [ 'c', $c ], [ 'd', $d ], [ 'e', $e ], [ 'f', $f ],
	[ 'self', $router ])
{
	my ($name, $n) = @$s;
	$router->safe_psql('postgres', sprintf(
		"CREATE SERVER %s FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '%s', port '%s', dbname 'postgres');
		 CREATE USER MAPPING FOR CURRENT_USER SERVER %s;", $name, $n->host, $n->port, $name));
}
$d->stop;

my $rows = $router->safe_psql('postgres',
	"SELECT coalesce(server, '(here)'), coalesce(node_id::text, '-'), coalesce(layout, '-'),
	        coalesce(version, '-'), coalesce(problem, 'ok'), coalesce(cluster, '-')
	 FROM snowseq_check_nodes() ORDER BY server NULLS FIRST");
note "snowseq_check_nodes():\n$rows";
my %r = map { my @f = split /\|/; ($f[0] => \@f) } split /\n/, $rows;
is(scalar(keys %r), 9, 'this server and the eight foreign servers are listed');
like($r{'(here)'}[4], qr/^node id 1 is also used by f: their IDs collide$/,
	'this server: its node id is also used by f, another cluster');
is($r{self}[4], 'node id 1 is also used by f: their IDs collide',
	'"self" is this server\'s cluster: no collision with it, only with f');
is($r{self}[5], $r{'(here)'}[5], '"self" shows the cluster of this server');
isnt($r{f}[5], $r{'(here)'}[5], 'f is another cluster');
is($r{'(here)'}[2], '41/10/12@1ms', 'this server: its layout');
like($r{a}[4], qr/^node id 2 is also used by b: their IDs collide$/, 'a: the duplicate node id of b (not of a2, its own cluster)');
like($r{b}[4], qr/^node id 2 is also used by a, a2: their IDs collide$/, 'b: the duplicate node id of a, by both its names');
is($r{a2}[5], $r{a}[5], 'a2 shows the cluster of a');
like($r{c}[4], qr/^layout 42\/9\/12\@1ms differs from this server's 41\/10\/12\@1ms/, 'c: another layout');
is($r{c}[1], '3', 'c: its node id');
like($r{d}[4], qr/^cannot be asked: could not connect to server "d"/, 'd: down, cannot be asked');
like($r{e}[4], qr/^snowseq is not installed in its database$/, 'e: no snowseq');
like($r{a}[3], qr/^1\.\d+$/, 'a: its snowseq version');

# snowseq_create_shards refuses while this server's node id is another's
$router->safe_psql('postgres', 'CREATE TABLE local_orders (id bigint NOT NULL) PARTITION BY RANGE (id)');
my ($rc, $out, $err) = $router->psql('postgres', "SELECT snowseq_create_shards('local_orders', 4)");
like($err, qr/ERROR:  cannot create shards: node id 1 of this server is also used by f/,
	'create_shards refuses while this server\'s node id is used by another');
like($err, qr/WARNING:  server "d": cannot be asked/, 'and warns of the server it could not ask');
is($router->safe_psql('postgres', "SELECT count(*) FROM pg_inherits WHERE inhparent = 'local_orders'::regclass"), '0',
	'no partition was created');
$router->safe_psql('postgres', 'DROP SERVER f CASCADE');
($rc, $out, $err) = $router->psql('postgres', "SELECT snowseq_create_shards('local_orders', 4)");
is($rc, 0, 'without the duplicate, create_shards proceeds (a duplicate elsewhere does not concern it)');

# a move to a server whose node id another server has is refused
$c->safe_psql('postgres', 'CREATE TABLE orders (order_id bigint PRIMARY KEY, buyer text)');
$a->safe_psql('postgres', 'CREATE TABLE orders (order_id bigint PRIMARY KEY, buyer text)');
$router->safe_psql('postgres', q{
	CREATE TABLE orders (order_id bigint NOT NULL, buyer text) PARTITION BY RANGE (order_id);
	CREATE FOREIGN TABLE orders_0 PARTITION OF orders FOR VALUES FROM (0) TO (16384::bigint << 48)
		SERVER c OPTIONS (table_name 'orders');
	CREATE FOREIGN TABLE orders_1 PARTITION OF orders FOR VALUES FROM (16384::bigint << 48) TO (MAXVALUE)
		SERVER a OPTIONS (table_name 'orders');
	DELETE FROM snowseq_shard_map;
	INSERT INTO snowseq_shard_map VALUES (16383, 'c'), (32767, 'a');
});
($rc, $out, $err) = $router->psql('postgres', "CALL snowseq_move_genes('orders', 0, 16383, 'b')");
like($err, qr/ERROR:  cannot move genes there: node id 2 of b is also used by a, a2/,
	'a move to a server that shares its node id with another is refused');
is($router->safe_psql('postgres', "SELECT string_agg(upper_gene || '=' || shard, ',' ORDER BY upper_gene) FROM snowseq_shard_map"),
	'16383=c,32767=a', 'the map is unchanged');

# backfill node ids and the field order: g's backfill node id is the
# router's node id, h and i share a backfill node id, j has the router's
# widths in another field order
my $g = snowseq_node('node_g', node_id => 6, conf => [ 'snowseq.backfill_node_id = 1' ]);
my $h = snowseq_node('node_h', node_id => 7, conf => [ 'snowseq.backfill_node_id = 100' ]);
my $i = snowseq_node('node_i', node_id => 8, conf => [ 'snowseq.backfill_node_id = 100' ]);
my $j = snowseq_node('node_j', node_id => 9, conf => [ "snowseq.layout = 'time:41,seq:12,node:10'" ]);
for my $s ([ 'g', $g ], [ 'h', $h ], [ 'i', $i ], [ 'j', $j ])
{
	my ($name, $n) = @$s;
	$router->safe_psql('postgres', sprintf(
		"CREATE SERVER %s FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '%s', port '%s', dbname 'postgres');
		 CREATE USER MAPPING FOR CURRENT_USER SERVER %s;", $name, $n->host, $n->port, $name));
}
$rows = $router->safe_psql('postgres',
	"SELECT coalesce(server, '(here)'), coalesce(node_id::text, '-'), coalesce(layout, '-'),
	        coalesce(version, '-'), coalesce(problem, 'ok'), coalesce(cluster, '-')
	 FROM snowseq_check_nodes() ORDER BY server NULLS FIRST");
note "snowseq_check_nodes() with backfill node ids and another field order:\n$rows";
%r = map { my @f = split /\|/; ($f[0] => \@f) } split /\n/, $rows;
is($r{g}[4], 'backfill node id 1 is also the node id of this server, self: their IDs collide',
	'g: its backfill node id is the router\'s node id');
is($r{'(here)'}[4], 'node id 1 is also the backfill node id of g: their IDs collide',
	'this server: its node id is g\'s backfill node id');
is($r{h}[4], 'backfill node id 100 is also the backfill node id of i: their IDs collide',
	'h: the same backfill node id as i');
is($r{i}[4], 'backfill node id 100 is also the backfill node id of h: their IDs collide',
	'i: the same backfill node id as h');
is($r{j}[2], '41/10/12@1ms seq above node', 'j: its layout shows the field order');
is($r{j}[4], "layout 41/10/12\@1ms seq above node differs from this server's 41/10/12\@1ms: IDs of different layouts can collide",
	'j: the same widths in another field order are another layout');
like($r{c}[4], qr/^layout 42\/9\/12\@1ms differs from this server's 41\/10\/12\@1ms/,
	'c: no backfill node id (-1 is off), still only its other layout');
$router->safe_psql('postgres', 'CREATE TABLE local_orders2 (id bigint NOT NULL) PARTITION BY RANGE (id)');
($rc, $out, $err) = $router->psql('postgres', "SELECT snowseq_create_shards('local_orders2', 4)");
like($err, qr/ERROR:  cannot create shards: node id 1 of this server is also the backfill node id of g/,
	'create_shards refuses while this server\'s node id is another\'s backfill node id');
($rc, $out, $err) = $router->psql('postgres', "CALL snowseq_move_genes('orders', 0, 16383, 'h')");
like($err, qr/ERROR:  cannot move genes there: backfill node id 100 of h is also the backfill node id of i/,
	'a move to a server whose backfill node id another server has is refused');
is($router->safe_psql('postgres', "SELECT string_agg(upper_gene || '=' || shard, ',' ORDER BY upper_gene) FROM snowseq_shard_map"),
	'16383=c,32767=a', 'the map is unchanged');

# and without a grant nobody asks
$router->safe_psql('postgres', 'CREATE ROLE regress_plain LOGIN');
($rc, $out, $err) = $router->psql('postgres', 'SELECT * FROM snowseq_check_nodes()', extra_params => [ '-U', 'regress_plain' ]);
like($err, qr/permission denied for function snowseq_check_nodes/, 'snowseq_check_nodes is not for PUBLIC');

$_->stop for ($router, $a, $b, $c, $e, $f, $g, $h, $i, $j);
done_testing();
