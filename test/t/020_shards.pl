# Distribution with PostgreSQL's own machinery: a router whose orders table
# is partitioned by gene range into two postgres_fdw foreign tables, each on
# a shard server of its own with its own snowseq.node_id; and the same with
# local partitions made by snowseq_create_shards.
#
#   router  (node 1): orders PARTITION BY RANGE (order_id)
#                       orders_0  FOREIGN TABLE on shard_a: genes     0..16383
#                       orders_1  FOREIGN TABLE on shard_b: genes 16384..32767
#   shard_a (node 2): orders, CHECK (order_id <@ genes 0..16383)
#   shard_b (node 3): orders, CHECK (order_id <@ genes 16384..32767)
use strict;
use warnings;
use lib 'test';
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;
use Time::HiRes qw(time usleep);

my $tmp = $PostgreSQL::Test::Utils::tmp_check;

# ---------------------------------------------------------------------
# Topology
# ---------------------------------------------------------------------

my $router = snowseq_node('router', node_id => 1);
my $sa = snowseq_node('shard_a', node_id => 2);
my $sb = snowseq_node('shard_b', node_id => 3);

# each shard server: a plain local table holding its half of the gene range
my $shard_table = <<'SQL';
CREATE TABLE orders (
	order_id bigint PRIMARY KEY CHECK (order_id <@ int8range(%s, %s)),
	buyer_id text NOT NULL,
	amount numeric
);
SQL
$sa->safe_psql('postgres', sprintf($shard_table, '0', '16384::bigint << 48'));
$sb->safe_psql('postgres', sprintf($shard_table, '16384::bigint << 48', 'NULL'));

# the router: postgres_fdw servers, one foreign partition on each, the map
my $router_sql = <<'SQL';
CREATE EXTENSION postgres_fdw;
CREATE SERVER shard_a FOREIGN DATA WRAPPER postgres_fdw
	OPTIONS (host '%s', port '%s', dbname 'postgres');
CREATE SERVER shard_b FOREIGN DATA WRAPPER postgres_fdw
	OPTIONS (host '%s', port '%s', dbname 'postgres');
CREATE USER MAPPING FOR CURRENT_USER SERVER shard_a;
CREATE USER MAPPING FOR CURRENT_USER SERVER shard_b;
CREATE TABLE orders (
	order_id bigint NOT NULL,
	buyer_id text NOT NULL,
	amount numeric
) PARTITION BY RANGE (order_id);
CREATE FOREIGN TABLE orders_0 PARTITION OF orders
	FOR VALUES FROM (0) TO (16384::bigint << 48)
	SERVER shard_a OPTIONS (table_name 'orders');
CREATE FOREIGN TABLE orders_1 PARTITION OF orders
	FOR VALUES FROM (16384::bigint << 48) TO (MAXVALUE)
	SERVER shard_b OPTIONS (table_name 'orders');
INSERT INTO snowseq_shard_map (upper_gene, shard) VALUES (16383, 'shard_a'), (32767, 'shard_b');
SQL
$router->safe_psql('postgres',
	sprintf($router_sql, $sa->host, $sa->port, $sb->host, $sb->port));
note "router topology:\n"
  . sprintf($router_sql, '<shard_a socket dir>', '<port>', '<shard_b socket dir>', '<port>');

# the partition each shard name of the map stands for
my %part_of = (shard_a => 'orders_0', shard_b => 'orders_1');
my %node_of = (shard_a => $sa, shard_b => $sb);

# ---------------------------------------------------------------------
# The fill trigger on the router's partitioned parent
# ---------------------------------------------------------------------
# PostgreSQL 15 allows a BEFORE ROW trigger on a partitioned table, but it
# is cloned to the partitions and fires on the partition the row was routed
# to: routing comes first.  A row whose partition key (order_id) is NULL has
# no partition, so the trigger never gets to fill it.  Through the router
# the ID is generated in the INSERT itself, snowseq_gene_next(buyer_id).
$router->safe_psql('postgres', q{
	CREATE TRIGGER orders_fill_id BEFORE INSERT ON orders
		FOR EACH ROW EXECUTE FUNCTION snowseq_fill_gene_id('order_id', 'buyer_id')});
is($router->safe_psql('postgres', q{
	SELECT string_agg(tgrelid::regclass || ':' || tgname, ',' ORDER BY tgrelid::regclass::text)
	FROM pg_trigger WHERE tgname = 'orders_fill_id'}),
	'orders:orders_fill_id,orders_0:orders_fill_id,orders_1:orders_fill_id',
	'router: a BEFORE ROW trigger on the partitioned parent is cloned to both foreign partitions');
my ($rc, $out, $err) = $router->psql('postgres',
	q{INSERT INTO orders (buyer_id, amount) VALUES ('buyer_1', 1)});
like($err, qr/no partition of relation "orders" found for row/,
	'router: a NULL order_id is routed before the fill trigger runs, so the trigger cannot fill it');
is($sa->safe_psql('postgres', 'SELECT count(*) FROM orders') + $sb->safe_psql('postgres', 'SELECT count(*) FROM orders'),
	0, 'router: the failed insert left no row on either shard');
# with an ID given, the cloned trigger leaves the row alone (it is on the
# partition, which the router already chose)
my $given = $router->safe_psql('postgres', q{
	INSERT INTO orders (order_id, buyer_id, amount) VALUES (snowseq_gene_next('buyer_1'), 'buyer_1', 1)
	RETURNING order_id});
my $holder = $node_of{ $router->safe_psql('postgres', "SELECT snowseq_route($given)") };
is($holder->safe_psql('postgres', "SELECT buyer_id FROM orders WHERE order_id = $given"), 'buyer_1',
	'router: an order with its ID given in the INSERT is stored as given, on its shard');
$router->safe_psql('postgres', 'DROP TRIGGER orders_fill_id ON orders; TRUNCATE orders');

# On a shard server's own (unpartitioned) table the trigger does fill the ID
# of a direct write, and the CHECK keeps keys of the other half out.
for my $s ([ $sa, 'shard_a', 0, 16383 ], [ $sb, 'shard_b', 16384, 32767 ])
{
	my ($node, $name, $lo, $hi) = @$s;
	$node->safe_psql('postgres', q{
		CREATE TRIGGER orders_fill_id BEFORE INSERT ON orders
			FOR EACH ROW EXECUTE FUNCTION snowseq_fill_gene_id('order_id', 'buyer_id')});
	my ($own, $other) = split /\|/, $router->safe_psql('postgres', qq{
		SELECT (SELECT b FROM (SELECT 'buyer_' || i AS b FROM generate_series(1, 200) i) s
				WHERE snowseq_route_key(b) = '$name' ORDER BY b LIMIT 1),
			   (SELECT b FROM (SELECT 'buyer_' || i AS b FROM generate_series(1, 200) i) s
				WHERE snowseq_route_key(b) <> '$name' ORDER BY b LIMIT 1)});
	my $id = $node->safe_psql('postgres',
		"INSERT INTO orders (buyer_id, amount) VALUES ('$own', 1) RETURNING order_id");
	is($node->safe_psql('postgres', "SELECT shard_of($id) = snowseq_gene('$own') AND shard_of($id) BETWEEN $lo AND $hi"),
		't', "$name: the fill trigger fills a direct write's ID with its key's gene");
	($rc, $out, $err) = $node->psql('postgres',
		"INSERT INTO orders (buyer_id, amount) VALUES ('$other', 1)");
	like($err, qr/violates check constraint "orders_order_id_check"/,
		"$name: a key of the other shard is refused by the CHECK");
	$node->safe_psql('postgres', 'TRUNCATE orders');
}

# ---------------------------------------------------------------------
# (1) Inserts through the router land where the map says
# ---------------------------------------------------------------------
$router->safe_psql('postgres', q{
	INSERT INTO orders (order_id, buyer_id, amount)
	SELECT snowseq_gene_next(b), b, i
	FROM (SELECT i, 'buyer_' || (i % 200) AS b FROM generate_series(1, 2000) i) s});

my %count;
for my $name ('shard_a', 'shard_b')
{
	my $node = $node_of{$name};
	$count{$name} = $node->safe_psql('postgres', 'SELECT count(*) FROM orders');
	ok($count{$name} > 0, "(1) $name holds some of the orders ($count{$name})");
	# read the IDs off the shard server itself and route them on the router
	my $ids = $node->safe_psql('postgres', q{SELECT '{' || string_agg(order_id::text, ',') || '}' FROM orders});
	is($router->safe_psql('postgres',
			"SELECT count(*) FILTER (WHERE snowseq_route(id) IS DISTINCT FROM '$name') FROM unnest('$ids'::bigint[]) id"),
		0, "(1) every order on $name is routed to $name by the map");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM orders WHERE shard_of(order_id) <> snowseq_gene(buyer_id)'),
		0, "(1) every order on $name carries its buyer's gene");
}
is($count{shard_a} + $count{shard_b}, 2000, '(1) the shard servers hold 2000 orders between them');
is($router->safe_psql('postgres', 'SELECT count(*) FROM orders'), 2000, '(1) the router sees all 2000');
is($router->safe_psql('postgres', q{
	SELECT string_agg(p || ':' || r, ',' ORDER BY p)
	FROM (SELECT DISTINCT tableoid::regclass::text AS p, snowseq_route(order_id) AS r FROM orders) s}),
	'orders_0:shard_a,orders_1:shard_b', '(1) router: partition and map agree on every row');
is($router->safe_psql('postgres', q{
	SELECT count(*) FROM orders WHERE snowseq_route(order_id) <> snowseq_route_key(buyer_id)}),
	0, '(1) router: each order is on its buyer\'s shard');

# ---------------------------------------------------------------------
# (2) One buyer, one server
# ---------------------------------------------------------------------
# a buyer of each shard
my %buyer;
for my $name ('shard_a', 'shard_b')
{
	$buyer{$name} = $router->safe_psql('postgres', qq{
		SELECT b FROM (SELECT 'buyer_' || i AS b FROM generate_series(1, 199) i) s
		WHERE snowseq_route_key(b) = '$name' ORDER BY b = 'buyer_42' DESC, b LIMIT 1});
}
for my $name ('shard_a', 'shard_b')
{
	my $b = $buyer{$name};
	my $plan = $router->safe_psql('postgres', qq{
		EXPLAIN (VERBOSE, COSTS OFF)
		SELECT order_id, amount FROM orders WHERE order_id <@ snowseq_key_range('$b')});
	note "plan for $b:\n$plan";
	my @scans = ($plan =~ /Foreign Scan on (\S+)/g);
	is(scalar(@scans), 1, "(2) $b: <@ snowseq_key_range plans one foreign scan");
	like($scans[0] // '', qr/^(public\.)?$part_of{$name}$/, "(2) $b: the scan is of $part_of{$name}, on $name");
	unlike($plan, qr/Append/, "(2) $b: no Append: the other partition is pruned");
	like($plan, qr/Remote SQL: .*WHERE \(\(order_id >= \d+::bigint\)\) AND \(\(order_id <=? \d+::bigint\)\)/, "(2) $b: the range goes to the shard as a WHERE clause");
	my $n_router = $router->safe_psql('postgres', qq{
		SELECT count(*) FROM orders WHERE order_id <@ snowseq_key_range('$b') AND buyer_id = '$b'});
	my $n_shard = $node_of{$name}->safe_psql('postgres', "SELECT count(*) FROM orders WHERE buyer_id = '$b'");
	is($n_router, $n_shard, "(2) $b: the pruned query finds all $n_shard of the buyer's orders");
	ok($n_shard > 0, "(2) $b has orders");
	# the commuted spelling, range @> id, means the same
	my ($crc, $cout, $cerr) = $router->psql('postgres', qq{
		SELECT count(*) FROM orders WHERE snowseq_key_range('$b') @> order_id AND buyer_id = '$b'});
	is($cout, $n_shard, "(2) $b: snowseq_key_range(...) \@> order_id finds the same orders")
	  or diag $cerr;
	note "plan of the \@> spelling:\n" . ($router->psql('postgres', qq{
		EXPLAIN (COSTS OFF) SELECT * FROM orders WHERE snowseq_key_range('$b') \@> order_id}))[1];

	# one order by its ID: a constant prunes at plan time ...
	my $id = $node_of{$name}->safe_psql('postgres', "SELECT min(order_id) FROM orders WHERE buyer_id = '$b'");
	$plan = $router->safe_psql('postgres', qq{
		EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM orders WHERE order_id = $id});
	@scans = ($plan =~ /Foreign Scan on (\S+)/g);
	ok(@scans == 1 && $scans[0] =~ /^(public\.)?$part_of{$name}$/,
		"(2) order_id = constant plans one foreign scan, of $part_of{$name}")
	  or diag $plan;
	# ... and a parameter of a generic plan prunes when the plan starts
	$plan = $router->safe_psql('postgres', qq{
		SET plan_cache_mode = force_generic_plan;
		PREPARE one(bigint) AS SELECT * FROM orders WHERE order_id = \$1;
		EXPLAIN (VERBOSE, COSTS OFF) EXECUTE one($id)});
	note "generic plan:\n$plan";
	@scans = ($plan =~ /Foreign Scan on (\S+)/g);
	ok(@scans == 1 && $scans[0] =~ /^(public\.)?$part_of{$name}$/ && $plan =~ /Subplans Removed: 1/,
		"(2) order_id = \$1 (generic plan) runs one foreign scan, of $part_of{$name}")
	  or diag $plan;
	is($router->safe_psql('postgres', "SELECT buyer_id FROM orders WHERE order_id = $id"), $b,
		"(2) order_id = constant finds the order");
}

# ---------------------------------------------------------------------
# (3) IDs from the router and both shard servers never collide
# ---------------------------------------------------------------------
my $n3 = 50000;
my @clients;
for my $c ([ $router, 'router', 1 ], [ $sa, 'shard_a', 2 ], [ $sb, 'shard_b', 3 ])
{
	my ($node, $name, $nid) = @$c;
	push @clients, [ $name, $nid, 'gene',
		id_clients($node, 1, "SELECT snowseq_gene_next('buyer_' || (i % 200)) FROM generate_series(1, $n3) i", "gene_$name")->[0] ];
	push @clients, [ $name, $nid, 'snowflake',
		id_clients($node, 1, "SELECT snowseq_next() FROM generate_series(1, $n3) i", "flake_$name")->[0] ];
}
is(wait_clients([ map { $_->[3] } @clients ]), 0, '(3) all six generating clients finished');
my (@all, @gene_all, @flake_all);
my $layout_ok = 1;
for my $c (@clients)
{
	my ($name, $nid, $kind, $cl) = @$c;
	my @ids = read_ids($cl->[1]);
	is(scalar(@ids), $n3, "(3) $name received $n3 $kind IDs");
	if ($kind eq 'gene')
	{
		# default node_bits = 10: a gene segment ends in the node id
		$layout_ok = 0 if grep { ($_ & 1023) != $nid } @ids;
		push @gene_all, @ids;
	}
	else
	{
		# default layout 41/10/12: the node id sits above the 12 sequence bits
		$layout_ok = 0 if grep { (($_ >> 12) & 1023) != $nid } @ids;
		push @flake_all, @ids;
	}
	push @all, @ids;
}
ok($layout_ok, '(3) every ID carries the node id of the server that issued it');
ok(all_unique(\@gene_all), '(3) no duplicate among ' . scalar(@gene_all) . ' gene IDs of router, shard_a and shard_b');
ok(all_unique(\@flake_all), '(3) no duplicate among ' . scalar(@flake_all) . ' snowflake IDs of router, shard_a and shard_b');
ok(all_unique(\@all), '(3) no ID of either kind issued twice across the three servers (' . scalar(@all) . ' IDs)');

# ---------------------------------------------------------------------
# (4) A shard server restarted under load loses and duplicates nothing
# ---------------------------------------------------------------------
# Clients run psql in a loop, each psql a long batch of one-row autocommit
# INSERT ... RETURNING order_id: a printed ID is an ID whose commit the
# client saw.  While shard_b is down, statements through the router that
# route to it fail and the router's clients go on; a client connected to
# shard_b itself loses its connection, and its loop starts a new psql.
my @b_buyers = grep { length } split /\n/, $router->safe_psql('postgres', q{
	SELECT b FROM (SELECT 'buyer_' || i AS b FROM generate_series(0, 199) i) s
	WHERE snowseq_route_key(b) = 'shard_b' ORDER BY b});
my @any_buyers = map { "buyer_$_" } 0 .. 199;

sub batch_file
{
	my ($file, $buyers, $n) = @_;
	open my $fh, '>', $file or die "cannot write $file: $!";
	for my $i (1 .. $n)
	{
		my $b = $buyers->[ ($i * 7919) % @$buyers ];
		print $fh "INSERT INTO orders (order_id, buyer_id, amount) "
		  . "VALUES (snowseq_gene_next('$b'), '$b', $i) RETURNING order_id;\n";
	}
	close $fh;
}

# a client: psql runs the batch $sql again and again until the file $stop
# exists (0.2 s between retries after a failure: pacing, while a shard is
# down); IDs to $tag.out, errors to $tag.err
sub loop_client
{
	my ($node, $sql, $tag, $stop) = @_;
	my ($out, $err) = ("$tmp/restart_$tag.out", "$tmp/restart_$tag.err");
	unlink $out, $err;
	my $script = q{
		while [ ! -e "$3" ]; do
			psql -X -Atq -d "$1" -f "$2" >> "$4" 2>> "$5" || sleep 0.2
		done
	};
	my $h = IPC::Run::start(
		[ 'bash', '-c', $script, 'client', $node->connstr('postgres'), $sql, $stop, $out, $err ]);
	return { h => $h, out => $out, err => $err, tag => $tag };
}

sub ids_of { my @ids; push @ids, read_ids($_->{out}) for @_; return @ids; }
sub on_shard_b { return grep { ($_ >> 48) >= 16384 } @_; }

batch_file("$tmp/batch_router.sql", \@any_buyers, 1000);
batch_file("$tmp/batch_shard_b.sql", \@b_buyers, 1000);
my $stop = "$tmp/restart_stop";
unlink $stop;
my @via_router = map { loop_client($router, "$tmp/batch_router.sql", "router_$_", $stop) } 1 .. 2;
my @direct_b = map { loop_client($sb, "$tmp/batch_shard_b.sql", "shard_b_$_", $stop) } 1 .. 2;
my @load = (@via_router, @direct_b);

# the load runs (every client has committed orders, the router's on
# shard_b too); shard_b crashes under it; it stays down until a statement
# through the router has failed for it; it starts again, and the load goes
# on until both kinds of client have written to it again.  Each step waits
# for what it needs, not for a length of time.
ok(wait_until(sub { !(grep { !read_ids($_->{out}) } @load) && on_shard_b(ids_of(@via_router)) > 0 }),
	'(4) every client commits orders, the router on shard_b too');
my $before = scalar(ids_of(@load));
$sb->stop('immediate');
ok(wait_until(sub { grep { -e $_->{err} && slurp_file($_->{err}) =~ /could not connect to server "shard_b"/ } @via_router }),
	'(4) a statement through the router failed while shard_b was down');
$sb->start;
my $restarted_router_b = scalar(on_shard_b(ids_of(@via_router)));
my $restarted_direct = scalar(ids_of(@direct_b));
ok(wait_until(sub { on_shard_b(ids_of(@via_router)) > $restarted_router_b && ids_of(@direct_b) > $restarted_direct }),
	'(4) after the restart both kinds of client write to shard_b again');
open my $stop_fh, '>', $stop or die "cannot write $stop: $!";
close $stop_fh;
$_->{h}->finish for @load;
my @seen = ids_of(@load);
note "restart: " . scalar(@seen) . " orders seen committed, $before of them before the crash";
ok($before > 0, "(4) the clients committed orders before the crash ($before)");
ok(on_shard_b(ids_of(@via_router)) > $restarted_router_b,
	'(4) after the restart the router writes to shard_b again (postgres_fdw reconnects)');
ok(ids_of(@direct_b) > $restarted_direct, '(4) after the restart the direct clients write to shard_b again');

my %errs = map { $_->{tag} => (-e $_->{err} ? slurp_file($_->{err}) : '') } @load;
my $errors = join '', values %errs;
like(join('', @errs{ map { $_->{tag} } @direct_b }),
	qr/server closed the connection unexpectedly|terminating connection/,
	'(4) the crash cut off sessions connected to shard_b');
like(join('', @errs{ map { $_->{tag} } @via_router }), qr/ERROR:  could not connect to server "shard_b"/,
	'(4) statements through the router failed while shard_b was down');
unlike($errors, qr/duplicate key/, '(4) no statement hit a duplicate key');
unlike($errors, qr/violates check constraint/, '(4) no row was routed to the wrong shard');
ok(all_unique(\@seen), '(4) no order_id was returned twice (' . scalar(@seen) . ' returned)');

# every ID a client saw committed is on exactly one shard server, once
my %where;
for my $name ('shard_a', 'shard_b')
{
	$where{$_}++ for split /\n/, $node_of{$name}->safe_psql('postgres', 'SELECT order_id FROM orders');
}
my @lost = grep { !$where{$_} } @seen;
my @twice = grep { $where{$_} > 1 } keys %where;
is(scalar(@lost), 0, '(4) every order_id a client saw committed exists after the restart')
  or diag "lost: @lost[0 .. ($#lost < 9 ? $#lost : 9)]";
is(scalar(@twice), 0, '(4) no order_id exists on both shard servers');
is($router->safe_psql('postgres', 'SELECT count(*) FROM orders'), scalar(keys %where),
	'(4) the router sees the rows of both shard servers, ' . scalar(keys %where) . ' in all');
is($router->safe_psql('postgres', q{
	SELECT count(*) FROM orders
	WHERE snowseq_route(order_id) <> snowseq_route_key(buyer_id)
	   OR tableoid::regclass::text <> CASE snowseq_route(order_id) WHEN 'shard_a' THEN 'orders_0' ELSE 'orders_1' END}),
	0, '(4) after the restart every order is still where the map says');

# ---------------------------------------------------------------------
# Local partitions: snowseq_create_shards
# ---------------------------------------------------------------------
# The map is a table of the extension, one per database: a database of its
# own on the router holds the local variant.
$router->safe_psql('postgres', 'CREATE DATABASE local_shards');
$router->safe_psql('local_shards', q{
	CREATE EXTENSION snowseq;
	CREATE TABLE local_orders (order_id bigint NOT NULL, buyer_id text NOT NULL, amount numeric)
		PARTITION BY RANGE (order_id);
	CREATE TABLE plain_orders (order_id bigint NOT NULL, buyer_id text);
	CREATE TABLE by_buyer (order_id bigint NOT NULL, buyer_id text) PARTITION BY RANGE (buyer_id);
	CREATE TABLE by_int4 (order_id integer NOT NULL, buyer_id text) PARTITION BY RANGE (order_id);
	CREATE TABLE by_expr (order_id bigint NOT NULL, buyer_id text) PARTITION BY RANGE ((order_id + 0));
	CREATE TABLE by_two (order_id bigint NOT NULL, amount bigint) PARTITION BY RANGE (order_id, amount);
	CREATE TABLE by_list (order_id bigint NOT NULL, buyer_id text) PARTITION BY LIST (order_id);
	CREATE TABLE by_hash (order_id bigint NOT NULL, buyer_id text) PARTITION BY HASH (order_id);});

my $map_sql = q{SELECT coalesce(string_agg(upper_gene || '=' || shard, ',' ORDER BY upper_gene), '') FROM snowseq_shard_map};
sub parts_of
{
	my ($t) = @_;
	return $router->safe_psql('local_shards',
		"SELECT count(*) FROM pg_inherits WHERE inhparent = '$t'::regclass");
}

# each refusal: a clear ERROR, no partition, map unchanged
sub refused
{
	my ($call, $table, $re, $what) = @_;
	my $map = $router->safe_psql('local_shards', $map_sql);
	my $parts = parts_of($table);
	my ($rc, $out, $err) = $router->psql('local_shards', "SELECT snowseq_create_shards($call)");
	like($err, $re, "create_shards: $what: clear ERROR");
	is(parts_of($table), $parts, "create_shards: $what: no partition created");
	is($router->safe_psql('local_shards', $map_sql), $map, "create_shards: $what: map unchanged");
}

refused("'local_orders', 3", 'local_orders', qr/ERROR:  number of partitions must be a power of two from 1 to 32768, not 3/,
	'n = 3');
refused("'local_orders', 0", 'local_orders', qr/ERROR:  number of partitions must be a power of two from 1 to 32768, not 0/,
	'n = 0');
refused("'local_orders', 65536", 'local_orders', qr/ERROR:  number of partitions must be a power of two from 1 to 32768, not 65536/,
	'n = 65536');
refused("'plain_orders', 4", 'plain_orders', qr/ERROR:  table "plain_orders" is not partitioned/,
	'non-partitioned parent');
for my $t ([ 'by_buyer', 'a text column' ], [ 'by_int4', 'an integer column' ], [ 'by_expr', 'an expression' ],
	[ 'by_two', 'two columns' ], [ 'by_list', 'LIST' ], [ 'by_hash', 'HASH' ])
{
	refused("'$t->[0]', 4", $t->[0], qr/ERROR:  table "$t->[0]" must be partitioned by range on one bigint column/,
		"parent partitioned by $t->[1]");
}

$router->safe_psql('local_shards', q{SELECT snowseq_create_shards('local_orders', 4)});
is($router->safe_psql('local_shards', $map_sql),
	'8191=public.local_orders_0,16383=public.local_orders_1,24575=public.local_orders_2,32767=public.local_orders_3',
	'create_shards: 4 shards fill the empty map, one row per partition');
is($router->safe_psql('local_shards', q{
	SELECT string_agg(c.relname || ' ' || pg_get_expr(c.relpartbound, c.oid), '; ' ORDER BY c.relname)
	FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'local_orders'::regclass}),
	'local_orders_0 FOR VALUES FROM (\'0\') TO (\'2305843009213693952\'); '
	  . 'local_orders_1 FOR VALUES FROM (\'2305843009213693952\') TO (\'4611686018427387904\'); '
	  . 'local_orders_2 FOR VALUES FROM (\'4611686018427387904\') TO (\'6917529027641081856\'); '
	  . 'local_orders_3 FOR VALUES FROM (\'6917529027641081856\') TO (MAXVALUE)',
	'create_shards: 4 gene-aligned partitions, the last one open-ended');

$router->safe_psql('local_shards', q{
	INSERT INTO local_orders (order_id, buyer_id, amount)
	SELECT snowseq_gene_next(b), b, i
	FROM (SELECT i, 'buyer_' || (i % 200) AS b FROM generate_series(1, 2000) i) s;
	ANALYZE local_orders});
is($router->safe_psql('local_shards', q{
	SELECT count(*) FILTER (WHERE snowseq_route(order_id)::regclass <> tableoid) || '/' || count(*)
		|| '/' || count(DISTINCT tableoid) FROM local_orders}),
	'0/2000/4', 'create_shards: 2000 orders spread over the 4 partitions, each where the map says');

for my $k ('x', 'buyer_42')
{
	my $part = $router->safe_psql('local_shards', "SELECT snowseq_route_key('$k')::regclass::text");
	my $plan = $router->safe_psql('local_shards',
		"EXPLAIN (COSTS OFF) SELECT * FROM local_orders WHERE order_id <@ snowseq_key_range('$k')");
	note "local plan for $k:\n$plan";
	my %scanned = map { $_ => 1 } ($plan =~ /\b(local_orders_\d+)\b/g);
	is(join(',', sort keys %scanned), $part, "create_shards: <@ snowseq_key_range('$k') scans only $part");
}
my ($lid, $lpart) = split /\|/, $router->safe_psql('local_shards',
	q{SELECT order_id, tableoid::regclass FROM local_orders WHERE buyer_id = 'buyer_7' LIMIT 1});
my $plan = $router->safe_psql('local_shards', "EXPLAIN (COSTS OFF) SELECT * FROM local_orders WHERE order_id = $lid");
my %scanned = map { $_ => 1 } ($plan =~ /\b(local_orders_\d+)\b/g);
is(join(',', sort keys %scanned), $lpart, "create_shards: order_id = constant scans only $lpart");

# refusals once the map is there: still no partition and the map unchanged
refused("'local_orders', 4", 'local_orders', qr/ERROR:  table "local_orders" already has partitions/,
	'a parent that already has partitions');
$router->safe_psql('local_shards', q{
	CREATE TABLE other_orders (order_id bigint NOT NULL, buyer_id text) PARTITION BY RANGE (order_id)});
refused("'other_orders', 2", 'other_orders', qr/ERROR:  snowseq_shard_map already describes 4 shards with other gene ranges/,
	'a map of 4 shards and n = 2');
refused("'other_orders', 3", 'other_orders', qr/ERROR:  number of partitions must be a power of two/,
	'n = 3 with the map filled');
($rc, $out, $err) = $router->psql('local_shards', q{SELECT snowseq_create_shards('other_orders', 4)});
like($err, qr/NOTICE:  snowseq_shard_map already matches 4 shards and was left as it is/,
	'create_shards: a map of the same shape is left as it is, with a NOTICE');
is(parts_of('other_orders'), 4, 'create_shards: ... and the 4 partitions are created');

done_testing();
