# Colocated tables move together: a move acts on the placement group (every
# table the shard map governs), not on one table.
#
#   router  (node 1): orders, order_items, payments, each PARTITION BY RANGE
#                     on its ID, postgres_fdw partitions
#                       *_0 -> shard_a: genes     0..16383
#                       *_1 -> shard_b: genes 16384..32767
#   shard_a (node 2), shard_b (node 3), shard_c (node 4): wal_level = logical;
#   order_items REFERENCES orders ON DELETE CASCADE on each shard, and each
#   table has a secondary index and a trigger.
#
# Two writers insert an order, an item of it and a payment of it (one
# buyer's gene for all three) through the router the whole time; a reader
# samples, in one statement, whether every row of every table is read from
# the server snowseq_route names for it, duplicates, and items without their
# order.  Steps: move genes 0..4095 from A to C (named by orders); split B
# (named by payments); merge both back (named by order_items); move genes
# 0..4095 with no table named.  After each step every row exists exactly
# once, on the server the map names, with no orphan on any server, and the
# partitions of every table agree with the map; every sample the reader took
# agreed.  A foreign key whose rows cross the moved range is refused.
use strict;
use warnings;
use lib 'test';
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $tmp = $PostgreSQL::Test::Utils::tmp_check;
my @tables = ([ 'orders', 'order_id' ], [ 'order_items', 'item_id' ], [ 'payments', 'payment_id' ]);

# ---------------------------------------------------------------------
# Topology
# ---------------------------------------------------------------------
my @shard_conf = shard_conf();
my $router = snowseq_node('router', node_id => 1);
my $sa = snowseq_node('shard_a', node_id => 2, conf => \@shard_conf);
my $sb = snowseq_node('shard_b', node_id => 3, conf => \@shard_conf);
my $sc = snowseq_node('shard_c', node_id => 4, conf => \@shard_conf);
my %node = (shard_a => $sa, shard_b => $sb, shard_c => $sc);
my @up = sort keys %node;

my $shard_tables = q{
CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN NEW.buyer_id := lower(NEW.buyer_id); RETURN NEW; END $$;
CREATE TABLE orders (order_id bigint PRIMARY KEY, buyer_id text NOT NULL, amount numeric NOT NULL DEFAULT 0);
CREATE INDEX orders_buyer ON orders (buyer_id);
CREATE TRIGGER orders_touch BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION touch();
CREATE TABLE order_items (item_id bigint PRIMARY KEY,
	order_id bigint NOT NULL REFERENCES orders ON DELETE CASCADE, buyer_id text NOT NULL, qty int NOT NULL DEFAULT 1);
CREATE INDEX order_items_order ON order_items (order_id);
CREATE TRIGGER order_items_touch BEFORE INSERT ON order_items FOR EACH ROW EXECUTE FUNCTION touch();
CREATE TABLE payments (payment_id bigint PRIMARY KEY, order_id bigint NOT NULL, buyer_id text NOT NULL,
	amount numeric NOT NULL DEFAULT 1);
CREATE INDEX payments_order ON payments (order_id);
CREATE TRIGGER payments_touch BEFORE INSERT ON payments FOR EACH ROW EXECUTE FUNCTION touch();
};
$sa->safe_psql('postgres', $shard_tables);
$sb->safe_psql('postgres', $shard_tables);
$sc->safe_psql('postgres', q{CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN NEW.buyer_id := lower(NEW.buyer_id); RETURN NEW; END $$;});

my $servers = '';
for my $s (@up)
{
	$servers .= sprintf("CREATE SERVER %s FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '%s', port '%s', dbname 'postgres');\n"
		  . "CREATE USER MAPPING FOR CURRENT_USER SERVER %s;\n", $s, $node{$s}->host, $node{$s}->port, $s);
}
my %cols = (
	orders => 'order_id bigint NOT NULL, buyer_id text NOT NULL, amount numeric NOT NULL DEFAULT 0',
	order_items => 'item_id bigint NOT NULL, order_id bigint NOT NULL, buyer_id text NOT NULL, qty int NOT NULL DEFAULT 1',
	payments => 'payment_id bigint NOT NULL, order_id bigint NOT NULL, buyer_id text NOT NULL, amount numeric NOT NULL DEFAULT 1');
my $router_sql = "CREATE EXTENSION postgres_fdw;\n$servers";
for (@tables)
{
	my ($t, $id) = @$_;
	$router_sql .= qq{
CREATE TABLE $t ($cols{$t}) PARTITION BY RANGE ($id);
CREATE FOREIGN TABLE ${t}_0 PARTITION OF $t FOR VALUES FROM (0) TO (16384::bigint << 48)
	SERVER shard_a OPTIONS (table_name '$t');
CREATE FOREIGN TABLE ${t}_1 PARTITION OF $t FOR VALUES FROM (16384::bigint << 48) TO (MAXVALUE)
	SERVER shard_b OPTIONS (table_name '$t');
};
}
$router->safe_psql('postgres', $router_sql . q{
INSERT INTO snowseq_shard_map VALUES (16383, 'shard_a'), (32767, 'shard_b');
-- a local table partitioned like them is not governed by the map: it stays out of moves
CREATE TABLE local_log (log_id bigint NOT NULL) PARTITION BY RANGE (log_id);
CREATE TABLE local_log_0 PARTITION OF local_log FOR VALUES FROM (0) TO (MAXVALUE);
});

# one buyer's order, item and payment, in one statement: all of it or nothing
sub new_order_sql
{
	my ($b) = @_;
	return "WITH o AS (INSERT INTO orders (order_id, buyer_id) VALUES (snowseq_gene_next('$b'), '$b') RETURNING order_id), "
	  . "i AS (INSERT INTO order_items (item_id, order_id, buyer_id) SELECT snowseq_gene_next('$b'), order_id, '$b' FROM o RETURNING item_id), "
	  . "p AS (INSERT INTO payments (payment_id, order_id, buyer_id) SELECT snowseq_gene_next('$b'), order_id, '$b' FROM o RETURNING payment_id) "
	  . "SELECT 'n', (SELECT order_id FROM o), (SELECT item_id FROM i), (SELECT payment_id FROM p);\n";
}
my @initial;
for my $line (split /\n/, $router->safe_psql('postgres', join('', map { new_order_sql('b' . $_ % 700) } 1 .. 600)))
{
	my @f = split /\|/, $line;
	push @initial, @f[1 .. 3];
}
is(scalar(@initial), 1800, 'router: 600 orders with an item and a payment each to begin with');

# ---------------------------------------------------------------------
# Clients: two writers and a reader, through the router, all along
# ---------------------------------------------------------------------
my ($stop, $pause) = ("$tmp/group_stop", "$tmp/group_pause");
unlink $stop, $pause;
END
{
	my $fh;
	close $fh if open $fh, '>', $stop;
}

# the reader: in one statement (one snapshot of the router), rows read from
# another server than the map names, duplicates, items without their order
my $sample = "SELECT 'r', count(*) FILTER (WHERE snowseq_route(x.id) <> s.srvname), count(*) - count(DISTINCT x.id), "
  . "(SELECT count(*) FROM order_items i WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.order_id = i.order_id)), count(*) "
  . "FROM (SELECT order_id AS id, tableoid FROM orders UNION ALL SELECT item_id, tableoid FROM order_items "
  . "UNION ALL SELECT payment_id, tableoid FROM payments) x "
  . "JOIN pg_foreign_table ft ON ft.ftrelid = x.tableoid JOIN pg_foreign_server s ON s.oid = ft.ftserver;\n";
open my $rfh, '>', "$tmp/group_reader.sql" or die;
print $rfh $sample for 1 .. 10;
close $rfh;

# the batch writer for writers, as a one-liner (a fresh random batch each round)
my $gen = q{
	my ($k, $f) = @ARGV; open my $fh, '>', $f or die;
	for my $i (1 .. 30) {
		my $b = "c${k}_" . int(rand(400));
		print $fh "WITH o AS (INSERT INTO orders (order_id, buyer_id) VALUES (snowseq_gene_next('$b'), '$b') RETURNING order_id), "
		  . "i AS (INSERT INTO order_items (item_id, order_id, buyer_id) SELECT snowseq_gene_next('$b'), order_id, '$b' FROM o RETURNING item_id), "
		  . "p AS (INSERT INTO payments (payment_id, order_id, buyer_id) SELECT snowseq_gene_next('$b'), order_id, '$b' FROM o RETURNING payment_id) "
		  . "SELECT 'n', (SELECT order_id FROM o), (SELECT item_id FROM i), (SELECT payment_id FROM p);\n";
	}
};
# a client: psql runs its batch again and again (a fresh batch each round for
# writers) until the stop file appears; idles while the pause file exists
sub client
{
	my ($tag, $batch, $k) = @_;
	return batch_client($router, batch => $batch, out => "$tmp/group_$tag.out", err => "$tmp/group_$tag.err",
		stop => $stop, pause => $pause, defined $k ? (key => $k, gen => $gen) : ());
}

my @writers = map { client("w$_", "$tmp/group_w$_.sql", $_) } 1 .. 2;
my $reader = client('r', "$tmp/group_reader.sql");
my @clients = (@writers, $reader);

my $clients_stopped = 0;
sub pause_clients
{
	return if $clients_stopped;
	pause_batch_clients($pause, @clients);
}
sub resume_clients { resume_batch_clients($pause); }

# until each writer has another 30 orders and the reader 2 more samples
sub let_clients_write
{
	my ($what) = @_;
	my %n = map { $_->{out} => scalar(read_lines($_->{out})) } @clients;
	ok(wait_until(sub { !grep { scalar(read_lines($_->{out})) < $n{ $_->{out} } + ($_ == $reader ? 2 : 30) } @clients }),
		"$what: the clients write and read");
}

# ---------------------------------------------------------------------
# The state of the system, checked from every side
# ---------------------------------------------------------------------
my $table_re = qr/^(orders|order_items|payments)(?:_g\d+_\d+(?:_m\d+)?)?$/;

# every (server, table kind, relname, id) row on the shard servers
sub rows_on_shards
{
	my @rows;
	for my $s (@up)
	{
		for my $rel (split /\n/, $node{$s}->safe_psql('postgres', q{
				SELECT relname FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace
				AND coalesce(obj_description(oid, 'pg_class'), '') NOT LIKE '%copy in progress' ORDER BY 1}))
		{
			next unless $rel =~ $table_re;
			my $kind = $1;
			my ($id) = map { $_->[1] } grep { $_->[0] eq $kind } @tables;
			push @rows, map { [ $s, $kind, $rel, $_ ] } split /\n/,
			  $node{$s}->safe_psql('postgres', "SELECT $id FROM $rel");
		}
	}
	return @rows;
}

# items whose order is not on their server, on every server
sub orphans
{
	my @o;
	for my $s (@up)
	{
		my @rels = split /\n/, $node{$s}->safe_psql('postgres', q{
			SELECT relname FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace ORDER BY 1});
		my @items = grep { /^order_items/ && $_ =~ $table_re } @rels;
		my @orders = grep { /^orders/ && $_ =~ $table_re } @rels;
		next unless @items;
		my $all_orders = @orders ? join(' UNION ALL ', map { "SELECT order_id FROM $_" } @orders) : 'SELECT NULL::bigint WHERE false';
		my $n = $node{$s}->safe_psql('postgres', 'SELECT count(*) FROM ('
			  . join(' UNION ALL ', map { "SELECT order_id FROM $_" } @items)
			  . ") i WHERE NOT EXISTS (SELECT 1 FROM ($all_orders) o WHERE o.order_id = i.order_id)");
		push @o, "$s: $n" if $n;
	}
	return @o;
}

sub layout
{
	my ($t) = @_;
	return $router->safe_psql('postgres', q{
		SELECT string_agg(upper_gene || '=' || shard, ',' ORDER BY upper_gene) FROM snowseq_shard_map});
}

my $samples_checked = 0;
sub check_state
{
	my ($step) = @_;
	pause_clients();

	# the reference: what the writers saw committed
	my %ref;
	$ref{$_} = 1 for @initial;
	my $dup = 0;
	for my $w (@writers)
	{
		for (read_lines($w->{out}, qr/^n\|/))
		{
			my @f = split /\|/;
			$dup++ if grep { $ref{$_}++ } @f[1 .. 3];
		}
	}
	is($dup, 0, "$step: no ID was issued twice to the writers");

	# the shard servers: each reference row exactly once, nothing else
	my %where;
	push @{ $where{ $_->[3] } }, "$_->[0].$_->[2]" for rows_on_shards();
	my @twice = grep { @{ $where{$_} } > 1 } keys %where;
	my @lost = grep { !$where{$_} } keys %ref;
	my @extra = grep { !$ref{$_} } keys %where;
	is(scalar(@twice), 0, "$step: no row of any table exists twice across the servers")
	  or diag "twice: @{[ map { \"$_ @{$where{$_}}\" } @twice[0 .. ($#twice < 4 ? $#twice : 4)] ]}";
	is(scalar(@lost), 0, "$step: every row a writer saw inserted exists (" . scalar(keys %ref) . ')')
	  or diag "lost: @lost[0 .. ($#lost < 9 ? $#lost : 9)]";
	is(scalar(@extra), 0, "$step: no row exists that no writer saw inserted");

	# the map names the server each row of each table lives on
	for my $s (@up)
	{
		my @ids = grep { $where{$_}[0] =~ /^\Q$s\E\./ } keys %where;
		next unless @ids;
		is($router->safe_psql('postgres', "SELECT count(*) FILTER (WHERE snowseq_route(id) <> '$s') "
				  . "FROM unnest('{" . join(',', @ids) . "}'::bigint[]) id"),
			0, "$step: the map routes all " . scalar(@ids) . " rows on $s to $s");
	}
	is(join(', ', orphans()), '', "$step: no item without its order on any server");

	# every table's partitions agree with the map on every gene
	for (@tables)
	{
		my ($t) = @$_;
		is($router->safe_psql('postgres', qq{
			WITH p AS (
				SELECT s.srvname, b[1] AS lo, b[2] AS hi
				FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
				JOIN pg_foreign_table ft ON ft.ftrelid = c.oid JOIN pg_foreign_server s ON s.oid = ft.ftserver,
				LATERAL regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \\(''?([^)'']*)''?\\) TO \\(''?([^)'']*)''?\\)') b
				WHERE i.inhparent = '$t'::regclass)
			SELECT count(*) FROM generate_series(0, 32767) g
			WHERE (SELECT count(*) FROM p WHERE (g::bigint << 48) >= CASE lo WHEN 'MINVALUE' THEN 0 ELSE lo::bigint END
					AND (hi = 'MAXVALUE' OR (g::bigint << 48) < hi::bigint) AND srvname = snowseq_route_gene(g)) <> 1}),
			0, "$step: every gene of $t is in exactly one partition, on the server the map names");
	}

	# every sample the reader took so far agreed with the map, whole
	my @samples = read_lines($reader->{out}, qr/^r\|/);
	my @bad = grep { !/^r\|0\|0\|0\|\d+$/ } @samples;
	is(scalar(@bad), 0, "$step: in all " . scalar(@samples) . " reader samples, every row is read from the server the map names, once, with its order")
	  or diag "samples (misrouted|duplicates|orphans|rows): @bad[0 .. ($#bad < 4 ? $#bad : 4)]";
	$samples_checked = scalar(@samples);
	resume_clients();
}

# what moves left behind on the servers
sub leftovers
{
	my @l;
	for my $s (@up)
	{
		push @l, map { "$s: $_" } grep { length } split /\n/, $node{$s}->safe_psql('postgres', q{
			SELECT 'slot ' || slot_name FROM pg_replication_slots
			UNION ALL SELECT 'publication ' || pubname FROM pg_publication
			UNION ALL SELECT 'subscription ' || subname FROM pg_subscription
			UNION ALL SELECT 'prepared ' || gid FROM pg_prepared_xacts
			UNION ALL SELECT 'fence ' || token || ' ' || state FROM snowseq_fence WHERE state <> 'moved'
			UNION ALL SELECT 'copy ' || c.relname FROM pg_class c
				WHERE obj_description(c.oid, 'pg_class') LIKE '%copy in progress%'});
	}
	push @l, map { "router: $_" } grep { length } split /\n/, $router->safe_psql('postgres', q{
		SELECT 'foreign table ' || c.relname FROM pg_foreign_table ft JOIN pg_class c ON c.oid = ft.ftrelid
		WHERE NOT c.relispartition});
	return @l;
}

# A move that could not hold the writers back long enough to catch up (the
# write pause is bounded: on a busy machine the clients' writes may outrun
# it) is refused with nothing changed and the hint to retry; the test does
# what the hint says, a few times at most, as a user would.
sub move
{
	my ($call) = @_;
	my ($rc, $out, $err);
	for my $try (1 .. 5)
	{
		($rc, $out, $err) = $router->psql('postgres', "CALL $call");
		note "CALL $call (try $try):\n$err";
		last unless $rc != 0 && $err =~ /HINT:  Retry when the source is less busy/;
	}
	return ($rc, $err);
}

let_clients_write('before any move');
check_state('before any move');

# ---------------------------------------------------------------------
# (1) Genes 0..4095 from A to C, named by orders: all three tables move
# ---------------------------------------------------------------------
my ($rc, $err) = move(q{snowseq_move_genes('orders', 0, 4095, 'shard_c')});
is($rc, 0, '(1) genes 0..4095 move from shard_a to shard_c');
like($err, qr/genes 0 to 4095 of tables "orders", "order_items", "payments" from server "shard_a" to server "shard_c"/,
	'(1) one move names the three tables of the group');
is(layout(), '4095=shard_c,16383=shard_a,32767=shard_b', '(1) the map: genes 0..4095 on shard_c');
is($router->safe_psql('postgres', q{
	SELECT string_agg(parent::text || ' ' || state || ' ' || CASE WHEN group_move IS NULL THEN 'lead'
		WHEN group_move = (SELECT l.move_id FROM snowseq_moves l WHERE l.group_move IS NULL AND l.state = 'done')
		THEN 'of the lead' ELSE 'of another' END, ', ' ORDER BY move_id)
	FROM snowseq_moves WHERE state <> 'failed'}),
	'orders done lead, order_items done of the lead, payments done of the lead', '(1) snowseq_moves: one move, a record per table, all done');
is($router->safe_psql('postgres', q{SELECT count(*) FROM pg_class WHERE relname = 'local_log_g0_4095'}), 0,
	'(1) a local partitioned table is no part of the group');
# the destination's tables: every index, constraint and trigger of the source,
# and the foreign key between the moved tables, validated
is($sc->safe_psql('postgres', q{
	SELECT string_agg(x, ', ' ORDER BY x) FROM (
		SELECT 'index ' || indexrelid::regclass::text AS x FROM pg_index
		WHERE indrelid::regclass::text IN ('orders_g0_4095', 'order_items_g0_4095', 'payments_g0_4095')
		UNION ALL SELECT 'trigger ' || tgname || ' on ' || tgrelid::regclass::text FROM pg_trigger
		WHERE NOT tgisinternal AND tgname NOT LIKE 'snowseq%'
		AND tgrelid::regclass::text IN ('orders_g0_4095', 'order_items_g0_4095', 'payments_g0_4095')
		UNION ALL SELECT 'fk ' || conrelid::regclass::text || ' -> ' || confrelid::regclass::text
			|| CASE WHEN convalidated THEN ' valid' ELSE ' not valid' END || ' on delete ' || confdeltype::text
		FROM pg_constraint WHERE contype = 'f'
		AND conrelid IN ('orders_g0_4095'::regclass, 'order_items_g0_4095'::regclass, 'payments_g0_4095'::regclass)) s}),
	'fk order_items_g0_4095 -> orders_g0_4095 valid on delete c, '
	  . 'index order_items_g0_4095_order, index order_items_g0_4095_pkey, '
	  . 'index orders_g0_4095_buyer, index orders_g0_4095_pkey, '
	  . 'index payments_g0_4095_order, index payments_g0_4095_pkey, '
	  . 'trigger order_items_touch on order_items_g0_4095, trigger orders_touch on orders_g0_4095, '
	  . 'trigger payments_touch on payments_g0_4095',
	'(1) shard_c: every index and trigger of the source tables, and the foreign key between the moved tables');
my ($c_key) = grep { length } split /\n/, $router->safe_psql('postgres',
	q{SELECT b FROM (SELECT 'k' || i AS b FROM generate_series(1, 500) i) s WHERE snowseq_gene(b) < 4096 LIMIT 1});
my ($frc, $fout, $ferr) = $sc->psql('postgres', qq{
	INSERT INTO order_items_g0_4095 (item_id, order_id, buyer_id) VALUES (snowseq_gene_next('$c_key'), snowseq_gene_next('$c_key'), '$c_key')});
like($ferr, qr/violates foreign key constraint/, '(1) shard_c refuses an item without its order');
let_clients_write('(1) after A -> C');
check_state('(1) after A -> C');

# ---------------------------------------------------------------------
# (2) Split B, named by payments
# ---------------------------------------------------------------------
($rc, $err) = move(q{snowseq_split_shard('payments', 24576, 'shard_c')});
is($rc, 0, '(2) snowseq_split_shard moves genes 24576..32767 of the group from shard_b to shard_c');
is(layout(), '4095=shard_c,16383=shard_a,24575=shard_b,32767=shard_c', '(2) the map: B keeps 16384..24575');
let_clients_write('(2) after splitting B');
check_state('(2) after splitting B');

# ---------------------------------------------------------------------
# (3) Merge back, named by order_items
# ---------------------------------------------------------------------
($rc, $err) = move(q{snowseq_merge_shards('order_items', 0)});
is($rc, 0, '(3) snowseq_merge_shards moves genes 0..4095 of the group back to shard_a');
($rc, $err) = move(q{snowseq_merge_shards('order_items', 30000)});
is($rc, 0, '(3) snowseq_merge_shards moves genes 24576..32767 of the group back to shard_b');
is(layout(), '16383=shard_a,32767=shard_b', '(3) the map is two rows again');
let_clients_write('(3) after merging back');
check_state('(3) after merging back');

# ---------------------------------------------------------------------
# (4) No table named: every gene-sharded table
# ---------------------------------------------------------------------
($rc, $err) = move(q{snowseq_move_genes(0, 4095, 'shard_c')});
is($rc, 0, '(4) snowseq_move_genes without a table moves genes 0..4095 of every gene-sharded table');
like($err, qr/of tables "orders", "order_items", "payments"/, '(4) the three tables, in one move');
let_clients_write('(4) after the move of every table');
check_state('(4) after the move of every table');
is(join(',', leftovers()), '', '(4) no slot, publication, subscription, prepared transaction, fence or copy is left anywhere');
is($router->safe_psql('postgres', q{SELECT count(*) FILTER (WHERE state = 'done'),
		count(*) FILTER (WHERE state NOT IN ('done', 'failed')) FROM snowseq_moves}),
	'15|0', '(4) five moves of three tables each, all done (and none left unfinished by a refused try)');

# ---------------------------------------------------------------------
# (5) A foreign key across the moved range is refused, nothing changed
# ---------------------------------------------------------------------
pause_clients();
my ($in_key) = grep { length } split /\n/, $router->safe_psql('postgres',
	q{SELECT b FROM (SELECT 'k' || i AS b FROM generate_series(1, 500) i) s WHERE snowseq_gene(b) BETWEEN 4096 AND 8191 LIMIT 1});
my ($out_key) = grep { length } split /\n/, $router->safe_psql('postgres',
	q{SELECT b FROM (SELECT 'k' || i AS b FROM generate_series(1, 500) i) s WHERE snowseq_gene(b) BETWEEN 8192 AND 16383 LIMIT 1});
$router->safe_psql('postgres', qq{
	WITH o AS (INSERT INTO orders (order_id, buyer_id) VALUES (snowseq_gene_next('$in_key'), '$in_key') RETURNING order_id)
	INSERT INTO order_items (item_id, order_id, buyer_id) SELECT snowseq_gene_next('$out_key'), order_id, '$out_key' FROM o});
my $before = layout();
($rc, $err) = move(q{snowseq_move_genes('orders', 4096, 8191, 'shard_c')});
isnt($rc, 0, '(5) a move whose rows reference rows that stay is refused');
like($err, qr/ERROR:  foreign key \S+ of table public\.order_items on server "shard_a" links 1 rows inside genes 4096 to 8191 with rows outside them/,
	'(5) the error names the foreign key and what crosses the range');
is(layout(), $before, '(5) the map is unchanged');
is(join(',', leftovers()), '', '(5) nothing is left behind');
$router->safe_psql('postgres', qq{DELETE FROM order_items WHERE buyer_id = '$out_key'; DELETE FROM orders WHERE buyer_id = '$in_key'});
resume_clients();

open my $fh, '>', $stop or die;
close $fh;
$_->{h}->finish for @clients;
$clients_stopped = 1;
ok($samples_checked > 0, "the reader took $samples_checked samples");

# ---------------------------------------------------------------------
# (6) The router dies between the two commits of a group's switch: the
# resolver at its start undoes or finishes every table of the move
# ---------------------------------------------------------------------
my $pause_lock = 7236949375;
sub crash_at
{
	my ($point, $call) = @_;
	my $locker = $router->background_psql('postgres');
	$locker->query_safe("SELECT pg_advisory_lock($pause_lock)");
	my ($mout, $merr) = ('', '');
	my $mover = IPC::Run::start([ 'psql', '-X', '-d', $router->connstr('postgres'),
		'-c', "SET snowseq.test_pause_at = '$point'", '-c', $call ], '>', \$mout, '2>', \$merr);
	my $paused = $router->poll_query_until('postgres', q{
		SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event = 'advisory' AND query LIKE 'CALL%'});
	$router->stop('immediate');
	$mover->finish;
	eval { $locker->quit };
	$router->start;
	return $paused;
}
my $all_rows = q{SELECT count(*) || ' ' || count(DISTINCT id) FROM (SELECT order_id AS id FROM orders
	UNION ALL SELECT item_id FROM order_items UNION ALL SELECT payment_id FROM payments) x};
my $total = $router->safe_psql('postgres', $all_rows);
$before = layout();

# (6a) after the source prepared, before the router committed: undone
ok(crash_at('move_after_source_commit', q{CALL snowseq_split_shard('order_items', 12288, 'shard_c')}),
	'(6a) the group split paused after the source prepared its transaction');
is($router->safe_psql('postgres', $all_rows), $total, "(6a) the first query after the restart returns every row once ($total)");
is(layout(), $before, '(6a) the old placement serves');
$router->poll_query_until('postgres', q{SELECT count(*) = 0 FROM snowseq_moves WHERE state IN ('switch', 'switched')})
  or diag $router->safe_psql('postgres', 'SELECT move_id, parent, state, error FROM snowseq_moves');
is($router->safe_psql('postgres', q{SELECT string_agg(parent::text || ' ' || state, ', ' ORDER BY move_id) FROM snowseq_moves
	WHERE move_id >= (SELECT max(move_id) FROM snowseq_moves WHERE group_move IS NULL)}),
	'order_items failed, orders failed, payments failed', '(6a) the resolver undid the move of every table, with no manual step');
check_state('(6a) after the resolution');
is(join(',', leftovers()), '', '(6a) nothing is left behind');

# (6b) after the router committed, before the source did: finished
ok(crash_at('move_after_router_commit', q{CALL snowseq_split_shard('order_items', 12288, 'shard_c')}),
	'(6b) the group split paused after the router committed its switch');
is($router->safe_psql('postgres', $all_rows), $total, "(6b) the first query after the restart returns every row once ($total)");
is(layout(), '4095=shard_c,12287=shard_a,16383=shard_c,32767=shard_b', '(6b) the map: genes 12288..16383 on shard_c');
$router->poll_query_until('postgres', q{SELECT count(*) = 0 FROM snowseq_moves WHERE state IN ('switch', 'switched')})
  or diag $router->safe_psql('postgres', 'SELECT move_id, parent, state, error FROM snowseq_moves');
is($router->safe_psql('postgres', q{SELECT string_agg(parent::text || ' ' || state, ', ' ORDER BY move_id) FROM snowseq_moves
	WHERE move_id >= (SELECT max(move_id) FROM snowseq_moves WHERE group_move IS NULL)}),
	'order_items done, orders done, payments done', '(6b) the resolver finished the move of every table');
check_state('(6b) after the resolution');
is(join(',', leftovers()), '', '(6b) nothing is left behind');
note 'pauses (ms): ' . $router->safe_psql('postgres',
	q{SELECT string_agg(pause_ms::text, ', ' ORDER BY move_id) FROM snowseq_moves WHERE group_move IS NULL});
done_testing();
