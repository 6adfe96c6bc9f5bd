# pg_dump and restore: a database whose tables take snowflake IDs from
# DEFAULT snowseq_next() and gene IDs from the snowseq_fill_gene_id trigger,
# with a routing map in snowseq_shard_map (an extension configuration
# table), dumped in custom and in plain format and restored into a fresh
# cluster with another node id.  The restore is clean, every row and map
# entry comes along unchanged, and new rows get IDs of the new node that
# collide with no restored one.
use strict;
use warnings;
use lib 'test';
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my ($OLD_NODE, $NEW_NODE) = (1, 2);
my $NODE_MASK = (1 << 10) - 1;    # default node_bits
my $dir       = $PostgreSQL::Test::Utils::tmp_check;

# Run a client program; returns (exit code, stdout, stderr).
sub run_prog
{
	my (@cmd) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(\@cmd, '>', \$out, '2>', \$err);
	return ($? >> 8, $out, $err);
}

# Lines of psql output as a list.
sub lines { return grep { length } split /\n/, $_[0]; }

# A fingerprint of every table's rows and of the routing map.
my %FP = (
	customers => 'SELECT count(*) || \':\' || md5(string_agg(id || \'/\' || name, \',\' ORDER BY id)) FROM customers',
	events    => 'SELECT count(*) || \':\' || md5(string_agg(id || \'/\' || customer_id || \'/\' || kind, \',\' ORDER BY id)) FROM events',
	orders    => 'SELECT count(*) || \':\' || md5(string_agg(order_id || \'/\' || buyer_id || \'/\' || amount, \',\' ORDER BY order_id)) FROM orders',
	shard_map => 'SELECT count(*) || \':\' || string_agg(upper_gene || \'=\' || shard, \',\' ORDER BY upper_gene) FROM snowseq_shard_map',
);

sub fingerprint
{
	my ($node, $db) = @_;
	return { map { $_ => $node->safe_psql($db, $FP{$_}) } keys %FP };
}

# ---- the source: node 1 ----
my $src = snowseq_node('source', node_id => $OLD_NODE);
$src->safe_psql('postgres', 'CREATE DATABASE shop');
$src->safe_psql('shop', q{
	CREATE EXTENSION snowseq;
	CREATE TABLE customers (
		id bigint PRIMARY KEY DEFAULT snowseq_next(),
		name text NOT NULL
	);
	CREATE TABLE events (
		id bigint PRIMARY KEY DEFAULT snowseq_next(),
		customer_id bigint NOT NULL REFERENCES customers,
		kind text NOT NULL
	);
	CREATE INDEX ON events (customer_id);
	CREATE TABLE orders (
		order_id bigint PRIMARY KEY,
		buyer_id bigint NOT NULL,
		amount numeric NOT NULL,
		shard integer GENERATED ALWAYS AS (shard_of(order_id)) STORED
	);
	CREATE TRIGGER orders_gene_id BEFORE INSERT ON orders
		FOR EACH ROW EXECUTE FUNCTION snowseq_fill_gene_id('order_id', 'buyer_id');
	INSERT INTO snowseq_shard_map VALUES (8191, 'shard_a'), (16383, 'shard_b'), (24575, 'shard_c'), (32767, 'shard_d');
});
my @old_snow = lines($src->safe_psql('shop',
	"INSERT INTO customers (name) SELECT 'customer ' || g FROM generate_series(1, 300) g RETURNING id"));
push @old_snow, lines($src->safe_psql('shop',
	"INSERT INTO events (customer_id, kind) SELECT c.id, 'kind ' || g FROM customers c, generate_series(1, 3) g RETURNING id"));
my @old_gene = lines($src->safe_psql('shop',
	'INSERT INTO orders (buyer_id, amount) SELECT 1000 + g % 37, g * 1.5 FROM generate_series(1, 500) g RETURNING order_id'));
is(scalar(@old_snow), 1200, 'source: 1200 snowflake IDs issued by DEFAULT snowseq_next()');
is(scalar(@old_gene), 500, 'source: 500 gene IDs issued by the trigger');
ok(!(grep { (($_ >> 12) & $NODE_MASK) != $OLD_NODE } @old_snow), "source: snowflake IDs carry node id $OLD_NODE");
ok(!(grep { (segment_of($_) & $NODE_MASK) != $OLD_NODE } @old_gene), "source: gene segments carry node id $OLD_NODE");
is($src->safe_psql('shop', 'SELECT count(*) FROM orders WHERE shard_of(order_id) <> snowseq_gene(buyer_id) OR shard IS DISTINCT FROM shard_of(order_id)'),
	'0', 'source: every order ID carries the gene of its buyer');
my $src_fp = fingerprint($src, 'shop');
my $src_routes = $src->safe_psql('shop', 'SELECT string_agg(snowseq_route(order_id), \',\' ORDER BY order_id) FROM orders');

# ---- dump in both formats ----
my $custom = "$dir/shop.dump";
my $plain  = "$dir/shop.sql";
my ($rc, $out, $err) = run_prog('pg_dump', '-Fc', '-d', $src->connstr('shop'), '-f', $custom);
is($rc, 0, 'pg_dump -Fc succeeds');
is($err, '', 'pg_dump -Fc: nothing on stderr');
($rc, $out, $err) = run_prog('pg_dump', '-d', $src->connstr('shop'), '-f', $plain);
is($rc, 0, 'pg_dump (plain) succeeds');
is($err, '', 'pg_dump (plain): nothing on stderr');
my $sql = slurp_file($plain);
like($sql, qr/^CREATE EXTENSION IF NOT EXISTS snowseq /m, 'plain dump creates the extension');
like($sql, qr/^COPY public\.snowseq_shard_map /m, 'plain dump carries the rows of snowseq_shard_map');
unlike($sql, qr/^CREATE (TABLE|VIEW|FUNCTION) public\.snowseq_/m, 'plain dump leaves the extension objects to CREATE EXTENSION');
$src->stop;

# ---- restore into a fresh cluster: node 2 ----
my $dst = snowseq_node('target', node_id => $NEW_NODE, extension => 0);
$dst->safe_psql('postgres', 'CREATE DATABASE shop; CREATE DATABASE shop_plain');
($rc, $out, $err) = run_prog('pg_restore', '--exit-on-error', '-d', $dst->connstr('shop'), $custom);
is($rc, 0, 'pg_restore of the custom dump succeeds');
is($err, '', 'pg_restore: no error or warning');
($rc, $out, $err) = run_prog('psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $dst->connstr('shop_plain'), '-f', $plain);
is($rc, 0, 'psql restore of the plain dump succeeds');
is($err, '', 'psql restore: no error or warning');

my %new_ids;    # every ID issued on the target, all databases
for my $db ('shop', 'shop_plain')
{
	my $fp = fingerprint($dst, $db);
	for my $t (sort keys %FP)
	{
		is($fp->{$t}, $src_fp->{$t}, "$db: $t restored row for row ($src_fp->{$t})");
	}
	my ($rrc, $routes, $rerr) = $dst->psql($db, 'SELECT string_agg(snowseq_route(order_id), \',\' ORDER BY order_id) FROM orders');
	is($routes . $rerr, $src_routes, "$db: the restored map routes every order as before");
	is($dst->safe_psql($db, "SELECT e.extversion = a.default_version FROM pg_extension e
		JOIN pg_available_extensions a ON a.name = e.extname WHERE e.extname = 'snowseq'"), 't',
		"$db: the extension came along");

	# new rows: IDs of the new node, none equal to a restored one
	my @snow = lines($dst->safe_psql($db,
		"INSERT INTO customers (name) SELECT 'new customer ' || g FROM generate_series(1, 200) g RETURNING id"));
	push @snow, lines($dst->safe_psql($db,
		"INSERT INTO events (customer_id, kind) SELECT id, 'new' FROM customers RETURNING id"));
	my @gene = lines($dst->safe_psql($db,
		'INSERT INTO orders (buyer_id, amount) SELECT 1000 + g % 41, g FROM generate_series(1, 300) g RETURNING order_id'));
	is(scalar(@snow), 200 + 500, "$db: new customers and events got IDs");
	is(scalar(@gene), 300, "$db: new orders got gene IDs from the restored trigger");
	is($dst->safe_psql($db, "SELECT count(*) FROM customers WHERE name LIKE 'new %' AND snowseq_node(id) <> $NEW_NODE"),
		'0', "$db: snowseq_node() of every new customer ID is $NEW_NODE");
	ok(!(grep { (($_ >> 12) & $NODE_MASK) != $NEW_NODE } @snow), "$db: every new snowflake ID carries node id $NEW_NODE");
	ok(!(grep { (segment_of($_) & $NODE_MASK) != $NEW_NODE } @gene), "$db: every new gene segment carries node id $NEW_NODE");
	is($dst->safe_psql($db,
			'SELECT count(*) FROM orders WHERE shard_of(order_id) <> snowseq_gene(buyer_id) OR shard IS DISTINCT FROM shard_of(order_id)'),
		'0', "$db: every order ID, restored or new, carries the gene of its buyer");
	is($dst->safe_psql($db, "SELECT count(*) FROM customers WHERE name NOT LIKE 'new %' AND snowseq_node(id) <> $OLD_NODE"),
		'0', "$db: restored IDs are unchanged (node $OLD_NODE)");
	ok(all_unique([ @old_snow, @old_gene, @snow, @gene, keys %new_ids ]),
		"$db: no new ID equals a restored one or one issued in the other database");
	$new_ids{$_} = 1 for @snow, @gene;
	is($dst->safe_psql($db, 'SELECT (SELECT count(*) FROM customers) + (SELECT count(*) FROM events) + (SELECT count(*) FROM orders)'),
		1200 + 500 + 700 + 300, "$db: every row is there");
}

done_testing();
