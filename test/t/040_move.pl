# Elastic shards: gene ranges move between servers online, with nothing
# lost, duplicated or double-applied, while clients write through the router.
#
#   router  (node 1): orders PARTITION BY RANGE (order_id), postgres_fdw
#                       orders_0 -> shard_a.orders: genes     0..16383
#                       orders_1 -> shard_b.orders: genes 16384..32767
#   shard_a (node 2), shard_b (node 3), shard_c (node 4): wal_level = logical
#
# Two clients insert and update through the router the whole time, and a
# third reads; every row a client saw inserted, and every update it saw
# applied, is recorded outside the servers.  Steps: move genes 0..4095 from
# A to C; split B's range between B and C; merge both back.  After each step
# every row exists exactly once, on the server the map names, in the table
# the router's partition reads; the router returns exactly the reference
# rows; each row's amount equals the updates its client saw.  Then: bad
# input and overlapping moves are refused with nothing changed; a cancelled
# move, a destination stopped during the copy and a router restarted during
# the copy leave the old placement serving, and a retry succeeds.
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
my @shard_conf = ('wal_level = logical', 'max_replication_slots = 10', 'max_wal_senders = 10', 'max_prepared_transactions = 10',
	'wal_sender_timeout = 5s');
my $router = snowseq_node('router', node_id => 1);
my $sa = snowseq_node('shard_a', node_id => 2, conf => \@shard_conf);
my $sb = snowseq_node('shard_b', node_id => 3, conf => \@shard_conf);
my $sc = snowseq_node('shard_c', node_id => 4, conf => \@shard_conf);
my %node = (shard_a => $sa, shard_b => $sb, shard_c => $sc);

my $shard_table = q{CREATE TABLE orders (
	order_id bigint PRIMARY KEY CHECK (order_id <@ int8range(%s, %s)),
	buyer_id text NOT NULL,
	amount numeric NOT NULL DEFAULT 0)};
$sa->safe_psql('postgres', sprintf($shard_table, '0', '16384::bigint << 48'));
$sb->safe_psql('postgres', sprintf($shard_table, '16384::bigint << 48', 'NULL'));

my $servers = '';
for my $s ([ 'shard_a', $sa ], [ 'shard_b', $sb ], [ 'shard_c', $sc ], [ 'shard_a2', $sa ], [ 'myself', $router ])
{
	$servers .= sprintf("CREATE SERVER %s FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '%s', port '%s', dbname 'postgres');\n"
		  . "CREATE USER MAPPING FOR CURRENT_USER SERVER %s;\n", $s->[0], $s->[1]->host, $s->[1]->port, $s->[0]);
}
$router->safe_psql('postgres', "CREATE EXTENSION postgres_fdw;\n$servers" . q{
CREATE TABLE orders (order_id bigint NOT NULL, buyer_id text NOT NULL, amount numeric NOT NULL DEFAULT 0)
	PARTITION BY RANGE (order_id);
CREATE FOREIGN TABLE orders_0 PARTITION OF orders FOR VALUES FROM (0) TO (16384::bigint << 48)
	SERVER shard_a OPTIONS (table_name 'orders');
CREATE FOREIGN TABLE orders_1 PARTITION OF orders FOR VALUES FROM (16384::bigint << 48) TO (MAXVALUE)
	SERVER shard_b OPTIONS (table_name 'orders');
INSERT INTO snowseq_shard_map VALUES (16383, 'shard_a'), (32767, 'shard_b');
});
my @initial = split /\n/, $router->safe_psql('postgres', q{
	INSERT INTO orders (order_id, buyer_id)
	SELECT snowseq_gene_next('b' || i % 700), 'b' || i % 700 FROM generate_series(1, 5000) i
	RETURNING order_id});
is(scalar(@initial), 5000, 'router: 5000 orders to begin with');

# ---------------------------------------------------------------------
# Clients: two writers and a reader, through the router, all along
# ---------------------------------------------------------------------
my ($stop, $pause) = ("$tmp/move_stop", "$tmp/move_pause");
unlink $stop, $pause;
# however the test ends, the client loops end with it
END
{
	for my $f ($stop, "$tmp/move_hot_stop")
	{
		my $fh;
		close $fh if open $fh, '>', $f;
	}
}

# writer k: inserts for its own buyers, and updates all orders of one of
# them (amount + 1), printing what it saw committed
sub writer_batch
{
	my ($k, $file) = @_;
	open my $fh, '>', $file or die "cannot write $file: $!";
	for my $i (1 .. 60)
	{
		my $b = "c${k}_" . int(rand(400));
		if ($i % 4)
		{
			print $fh "INSERT INTO orders (order_id, buyer_id) VALUES (snowseq_gene_next('$b'), '$b') "
			  . "RETURNING 'i', order_id;\n";
		}
		else
		{
			print $fh "UPDATE orders SET amount = amount + 1 WHERE order_id <\@ snowseq_key_range('$b') "
			  . "AND buyer_id = '$b' RETURNING 'u', order_id, amount;\n";
		}
	}
	close $fh;
}

# the reader: duplicates seen and rows seen, again and again
open my $rfh, '>', "$tmp/move_reader.sql" or die;
print $rfh "SELECT 'r', count(*) - count(DISTINCT order_id), count(*) FROM orders;\n" for 1 .. 20;
close $rfh;

# the batch writer for writers, as a one-liner (a fresh random batch each round)
my $gen = q{
	my ($k, $f) = @ARGV; open my $fh, '>', $f or die;
	for my $i (1 .. 60) {
		my $b = "c${k}_" . int(rand(400));
		if ($i % 4) { print $fh "INSERT INTO orders (order_id, buyer_id) VALUES (snowseq_gene_next('$b'), '$b') RETURNING 'i', order_id;\n"; }
		else { print $fh "UPDATE orders SET amount = amount + 1 WHERE order_id <\@ snowseq_key_range('$b') AND buyer_id = '$b' RETURNING 'u', order_id, amount;\n"; }
	}
};
# a client: psql runs its batch again and again (a new batch each time for
# writers) until the stop file appears, and idles while the pause file exists
sub client
{
	my ($tag, $batch, $k) = @_;
	return batch_client($router, batch => $batch, out => "$tmp/move_$tag.out", err => "$tmp/move_$tag.err",
		stop => $stop, pause => $pause, defined $k ? (key => $k, gen => $gen) : ());
}

writer_batch($_, "$tmp/move_w$_.sql") for 1 .. 2;
my @writers = map { client("w$_", "$tmp/move_w$_.sql", $_) } 1 .. 2;
my $reader = client('r', "$tmp/move_reader.sql");
my @clients = (@writers, $reader);

# stop the clients between two batches, so that the servers hold still
sub pause_clients { pause_batch_clients($pause, @clients); }
sub resume_clients { resume_batch_clients($pause); }

# How many complete lines a file holds.
sub count_lines { return scalar(read_lines($_[0])); }

# Let the clients work under the layout as it stands: until each writer has
# received another 100 rows and the reader 2 more results (not a length of
# time).
sub let_clients_write
{
	my ($what) = @_;
	my %n = map { $_->{out} => count_lines($_->{out}) } @clients;
	ok(wait_until(sub { !grep { count_lines($_->{out}) < $n{ $_->{out} } + ($_ == $reader ? 2 : 100) } @clients }),
		"$what: the clients write and read");
}

# lines a client printed, complete ones only
sub lines_of
{
	my ($c) = @_;
	open my $fh, '<', $c->{out} or return ();
	my @l;
	while (my $l = <$fh>) { last unless $l =~ /\n\z/; chomp $l; push @l, $l; }
	return @l;
}

# ---------------------------------------------------------------------
# The state of the system, checked from every side
# ---------------------------------------------------------------------
my @up = ('shard_a', 'shard_b', 'shard_c');

# every (server, table, order_id, amount) row on the shard servers
sub rows_on_shards
{
	my @rows;
	for my $s (@up)
	{
		my $tables = $node{$s}->safe_psql('postgres', q{
			SELECT string_agg(format('SELECT %L, order_id, amount FROM %I', relname, relname), ' UNION ALL ')
			FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace AND relname NOT LIKE 'snowseq%'
			AND coalesce(obj_description(oid, 'pg_class'), '') NOT LIKE '%copy in progress'});
		next unless $tables;
		push @rows, map { [ $s, split /\|/ ] } split /\n/, $node{$s}->safe_psql('postgres', $tables);
	}
	return @rows;
}

# after a router crash, a write may have committed on a shard without its
# client hearing of it: such rows, and such an update (one statement updates
# all orders of a buyer), are taken into the reference, once
my $crashed = 0;
my %unseen_updates;
sub check_state
{
	my ($step) = @_;
	pause_clients();

	# the reference: what the clients saw committed
	my (%ref, %updates, %max_amount);
	$ref{$_} = 1 for @initial;
	my $dup_inserts = 0;
	for my $w (@writers)
	{
		for (lines_of($w))
		{
			my @f = split /\|/;
			if ($f[0] eq 'i') { $dup_inserts++ if $ref{ $f[1] }++; }
			elsif ($f[0] eq 'u')
			{
				$updates{ $f[1] }++;
				$max_amount{ $f[1] } = $f[2] if ($max_amount{ $f[1] } // -1) < $f[2];
			}
		}
	}
	is($dup_inserts, 0, "$step: no ID was issued twice to the clients");

	# the shard servers: each reference row exactly once, nothing else
	my (%where, %amount);
	for my $r (rows_on_shards())
	{
		my ($s, $t, $id, $a) = @$r;
		push @{ $where{$id} }, "$s.$t";
		$amount{$id} = $a;
	}
	my @twice = grep { @{ $where{$_} } > 1 } keys %where;
	my @lost = grep { !$where{$_} } keys %ref;
	my @extra = grep { !$ref{$_} } keys %where;
	$updates{$_} += $unseen_updates{$_} for keys %unseen_updates;
	if ($crashed)
	{
		note "$step: " . scalar(@extra) . " rows committed while the router crashed, unseen by their clients";
		ok(@extra <= 2, "$step: at most the writes in flight at the crash committed unseen");
		push @initial, @extra;
		$ref{$_} = 1 for @extra;
		@extra = ();
		# an update in flight at the crash: one buyer's orders each one ahead
		my @ahead = grep { defined $amount{$_} && $amount{$_} == ($updates{$_} // 0) + 1 } keys %ref;
		my %buyers;
		$buyers{ $_ >> 48 }++ for @ahead;
		note "$step: " . scalar(@ahead) . " rows updated unseen while the router crashed";
		ok(keys(%buyers) <= 2, "$step: at most the updates in flight at the crash committed unseen");
		for (@ahead) { $unseen_updates{$_}++; $updates{$_}++; }
		$crashed = 0;
	}
	is(scalar(@twice), 0, "$step: no row exists twice across the servers")
	  or diag "twice: @{[ map { \"$_ @{$where{$_}}\" } @twice[0 .. ($#twice < 4 ? $#twice : 4)] ]}";
	is(scalar(@lost), 0, "$step: every row a client saw inserted exists (" . scalar(keys %ref) . ')')
	  or diag "lost: @lost[0 .. ($#lost < 9 ? $#lost : 9)]";
	is(scalar(@extra), 0, "$step: no row exists that no client saw inserted");

	# updates: neither lost nor applied twice
	# (the last amount a client saw may lag by an update that committed unseen)
	my @bad = grep { ($amount{$_} // -1) != ($updates{$_} // 0)
		  || ($updates{$_} && ($max_amount{$_} // 0) != $updates{$_}
			&& ($max_amount{$_} // 0) != $updates{$_} - ($unseen_updates{$_} // 0)) } keys %ref;
	is(scalar(@bad), 0, "$step: every row's amount is the number of updates its client saw ("
		  . scalar(keys %updates) . ' rows updated)')
	  or diag join ', ', map { "$_: amount " . ($amount{$_} // '-') . ', updates ' . ($updates{$_} // 0) } @bad[0 .. ($#bad < 4 ? $#bad : 4)];

	# the router: exactly the reference rows, each read from the table it lives in
	my %read;
	for (split /\n/, $router->safe_psql('postgres', q{
			SELECT o.order_id, s.srvname || '.' || coalesce((SELECT option_value FROM pg_options_to_table(ft.ftoptions)
				WHERE option_name = 'table_name'), c.relname)
			FROM orders o JOIN pg_foreign_table ft ON ft.ftrelid = o.tableoid
			JOIN pg_foreign_server s ON s.oid = ft.ftserver JOIN pg_class c ON c.oid = o.tableoid}))
	{
		my ($id, $at) = split /\|/;
		$read{$id}++;
		push @{ $read{"at$id"} }, $at;
	}
	is(scalar(grep { !/^at/ } keys %read), scalar(keys %ref), "$step: the router returns as many rows as the reference");
	is(scalar(grep { !/^at/ && $read{$_} != 1 } keys %read), 0, "$step: the router returns no row twice");
	is(scalar(grep { !$read{$_} } keys %ref), 0, "$step: the router returns every reference row");
	is(scalar(grep { $where{$_} && $read{"at$_"} && $read{"at$_"}[0] ne $where{$_}[0] } keys %ref), 0,
		"$step: each row is read from the server and table it lives in");

	# the map names the server each row lives on
	for my $s (@up)
	{
		my @ids = grep { $where{$_}[0] =~ /^\Q$s\E\./ } keys %where;
		next unless @ids;
		is($router->safe_psql('postgres', "SELECT count(*) FILTER (WHERE snowseq_route(id) <> '$s') "
				  . "FROM unnest('{" . join(',', @ids) . "}'::bigint[]) id"),
			0, "$step: the map routes all " . scalar(@ids) . " rows on $s to $s");
	}

	# partition bounds and the map agree on every gene
	is($router->safe_psql('postgres', q{
		WITH p AS (
			SELECT s.srvname, b[1] AS lo, b[2] AS hi
			FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
			JOIN pg_foreign_table ft ON ft.ftrelid = c.oid JOIN pg_foreign_server s ON s.oid = ft.ftserver,
			LATERAL regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \(''?([^)'']*)''?\) TO \(''?([^)'']*)''?\)') b
			WHERE i.inhparent = 'orders'::regclass)
		SELECT count(*) FROM generate_series(0, 32767) g
		WHERE (SELECT count(*) FROM p WHERE (g::bigint << 48) >= CASE lo WHEN 'MINVALUE' THEN 0 ELSE lo::bigint END
				AND (hi = 'MAXVALUE' OR (g::bigint << 48) < hi::bigint) AND srvname = snowseq_route_gene(g)) <> 1}),
		0, "$step: every gene is in exactly one partition, on the server the map names");
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
			UNION ALL SELECT 'fence ' || token || ' ' || state FROM snowseq_fence WHERE state <> 'moved'
			UNION ALL SELECT 'copy ' || c.relname FROM pg_class c
				WHERE obj_description(c.oid, 'pg_class') LIKE '%copy in progress%'});
	}
	push @l, map { "router: $_" } grep { length } split /\n/, $router->safe_psql('postgres', q{
		SELECT 'foreign table ' || c.relname FROM pg_foreign_table ft JOIN pg_class c ON c.oid = ft.ftrelid
		WHERE NOT c.relispartition});
	return @l;
}

sub moves { return $router->safe_psql('postgres', 'SELECT move_id, state FROM snowseq_moves ORDER BY move_id'); }
sub layout
{
	return $router->safe_psql('postgres', q{
		SELECT string_agg(upper_gene || '=' || shard, ',' ORDER BY upper_gene) FROM snowseq_shard_map})
	  . ' ' . $router->safe_psql('postgres', q{
		SELECT string_agg(c.relname || ' ' || pg_get_expr(c.relpartbound, c.oid), '; ' ORDER BY c.relname)
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'orders'::regclass});
}

# run a move; returns (rc, stderr)
sub move
{
	my ($call) = @_;
	my ($rc, $out, $err) = $router->psql('postgres', "CALL $call");
	note "CALL $call:\n$err";
	return ($rc, $err);
}

let_clients_write('before any move');
check_state('before any move');

# ---------------------------------------------------------------------
# (1) Genes 0..4095 from A to C: A's partition is split
# ---------------------------------------------------------------------
my ($rc, $err) = move(q{snowseq_move_genes('orders', 0, 4095, 'shard_c')});
is($rc, 0, '(1) genes 0..4095 move from shard_a to shard_c');
like($err, qr/writes were held back for [\d.]+ ms/, '(1) the move says how long writes were held back');
is(layout(), '4095=shard_c,16383=shard_a,32767=shard_b '
	  . q{orders_0 FOR VALUES FROM ('1152921504606846976') TO ('4611686018427387904'); }
	  . q{orders_1 FOR VALUES FROM ('4611686018427387904') TO (MAXVALUE); }
	  . q{orders_g0_4095 FOR VALUES FROM ('0') TO ('1152921504606846976')},
	'(1) the map and the partitions: genes 0..4095 on shard_c, 4096..16383 left on shard_a');
let_clients_write('(1) after A -> C');
check_state('(1) after A -> C');

# a direct write on A of a moved gene is refused; other genes still pass
my ($g0_key) = grep { length } split /\n/, $router->safe_psql('postgres',
	q{SELECT b FROM (SELECT 'k' || i AS b FROM generate_series(1, 300) i) s WHERE snowseq_gene(b) < 4096 LIMIT 1});
my ($ga_key) = grep { length } split /\n/, $router->safe_psql('postgres',
	q{SELECT b FROM (SELECT 'k' || i AS b FROM generate_series(1, 300) i) s WHERE snowseq_gene(b) BETWEEN 4096 AND 16383 LIMIT 1});
my ($drc, $dout, $derr) = $sa->psql('postgres',
	"INSERT INTO orders (order_id, buyer_id) VALUES (snowseq_gene_next('$g0_key'), '$g0_key')");
like($derr, qr/ERROR:  genes 0 to 4095 of table "orders" have moved to server "shard_c"/,
	'(1) shard_a refuses a direct write of a gene that moved away');
($drc, $dout, $derr) = $sa->psql('postgres',
	"BEGIN; INSERT INTO orders (order_id, buyer_id) VALUES (snowseq_gene_next('$ga_key'), '$ga_key'); ROLLBACK");
is($derr, '', '(1) shard_a still takes direct writes of the genes it keeps');

# ---------------------------------------------------------------------
# (2) Split B's range between B and C
# ---------------------------------------------------------------------
($rc, $err) = move(q{snowseq_split_partition('orders', 24576, 'shard_c')});
is($rc, 0, '(2) snowseq_split_partition (the clear name of snowseq_split_shard) moves genes 24576..32767 from shard_b to shard_c');
like(layout(), qr/^4095=shard_c,16383=shard_a,24575=shard_b,32767=shard_c /, '(2) the map: B keeps 16384..24575');
let_clients_write('(2) after splitting B');
check_state('(2) after splitting B');

# ---------------------------------------------------------------------
# (3) Merge back: C's ranges go to the servers of their neighbours
# ---------------------------------------------------------------------
($rc, $err) = move(q{snowseq_merge_shards('orders', 0)});
is($rc, 0, '(3) snowseq_merge_shards moves genes 0..4095 back to shard_a');
($rc, $err) = move(q{snowseq_move_to_neighbour('orders', 30000)});
is($rc, 0, '(3) snowseq_move_to_neighbour, its clearer name, moves genes 24576..32767 back to shard_b');
like(layout(), qr/^16383=shard_a,32767=shard_b /, '(3) the map is two rows again: adjacent ranges on one server are joined');
let_clients_write('(3) after merging back');
check_state('(3) after merging back');
is(join(',', leftovers()), '', '(3) no slot, publication, subscription, fence or copy is left anywhere');
is($router->safe_psql('postgres', q{SELECT string_agg(state::text, ',' ORDER BY move_id) FROM snowseq_moves}),
	'done,done,done,done', '(3) four moves, all done');
note "pauses (ms): " . $router->safe_psql('postgres', q{SELECT string_agg(pause_ms::text, ', ' ORDER BY move_id) FROM snowseq_moves});

pause_clients();
my $stats = $router->safe_psql('postgres', q{SELECT first_gene, last_gene, shard, rows FROM snowseq_shard_stats('orders')});
note "shard stats:\n$stats";
my $stat_rows = 0;
$stat_rows += (split /\|/)[3] for split /\n/, $stats;
is($stat_rows, $router->safe_psql('postgres', 'SELECT count(*) FROM orders'),
	'snowseq_shard_stats counts every row once');
resume_clients();

# ---------------------------------------------------------------------
# (4) Refusals: clear ERRORs, nothing changed
# ---------------------------------------------------------------------
$router->safe_psql('postgres', q{
	CREATE TABLE plain_orders (order_id bigint NOT NULL, buyer_id text);
	CREATE TABLE by_text (order_id bigint NOT NULL, buyer_id text) PARTITION BY RANGE (buyer_id);
	CREATE TABLE local_orders (order_id bigint NOT NULL, buyer_id text) PARTITION BY RANGE (order_id);
	CREATE TABLE local_orders_0 PARTITION OF local_orders FOR VALUES FROM (0) TO (MAXVALUE);
	CREATE TABLE odd_orders (order_id bigint NOT NULL, buyer_id text) PARTITION BY RANGE (order_id);
	CREATE TABLE odd_orders_0 PARTITION OF odd_orders FOR VALUES FROM (MINVALUE) TO (1000);
	CREATE TABLE def_orders (order_id bigint NOT NULL, buyer_id text) PARTITION BY RANGE (order_id);
	CREATE TABLE def_orders_d PARTITION OF def_orders DEFAULT});
my @refusals = (
	[ q{snowseq_move_genes('orders', 16000, 17000, 'shard_c')}, qr/genes 16000 to 17000 are in more than one partition of table "orders"/, 'a range across two partitions' ],
	[ q{snowseq_move_genes('orders', 5000, 6000, 'shard_c')}, qr/genes 5000 to 6000 are in the middle of partition "orders_0", which holds genes 4096 to 16383/, 'a range in the middle of a partition' ],
	[ q{snowseq_move_genes('orders', 10, 5, 'shard_c')}, qr/genes 10 to 5 are not a gene range/, 'first gene above the last' ],
	[ q{snowseq_move_genes('orders', 0, 40000, 'shard_c')}, qr/genes 0 to 40000 are not a gene range/, 'a gene above 32767' ],
	[ q{snowseq_move_genes('orders', 0, 4095, 'nope')}, qr/server "nope" does not exist/, 'an unknown server' ],
	[ q{snowseq_move_genes('orders', 0, 4095, 'shard_a')}, qr/genes 0 to 4095 of table "orders" are already on server "shard_a"/, 'a range already on that server' ],
	[ q{snowseq_move_genes('plain_orders', 0, 4095, 'shard_c')}, qr/table "plain_orders" is not partitioned/, 'a table that is not partitioned' ],
	[ q{snowseq_move_genes('by_text', 0, 4095, 'shard_c')}, qr/table "by_text" must be partitioned by range on one bigint column/, 'a table partitioned on text' ],
	[ q{snowseq_move_genes('local_orders', 0, 4095, 'shard_c')}, qr/partition "local_orders_0" of table "local_orders" is not a foreign table/, 'a local partition' ],
	# partition bounds as the partition descriptor gives them
	[ q{snowseq_move_genes('odd_orders', 0, 0, 'shard_c')}, qr/partition "odd_orders_0" of table "odd_orders" is not aligned on gene boundaries/, 'a partition off gene boundaries' ],
	[ q{snowseq_move_genes('def_orders', 0, 4095, 'shard_c')}, qr/table "def_orders" has a default partition, "def_orders_d"/, 'a default partition' ],
	[ q{snowseq_split_shard('odd_orders', 0, 'shard_c')}, qr/no partition of table "odd_orders" holds gene 0/, 'a split where no gene-aligned partition holds the gene' ],
	[ q{snowseq_split_shard('plain_orders', 0, 'shard_c')}, qr/no partition of table "plain_orders" holds gene 0/, 'a split of a table that is not partitioned' ],
	[ q{snowseq_split_shard('def_orders', 5, 'shard_c')}, qr/table "def_orders" has a default partition, "def_orders_d"/, 'a split of a table with a default partition' ],
	[ q{snowseq_merge_shards('def_orders', 0)}, qr/the partition holding gene 0 has no neighbour on another server/, 'a merge where only a default partition exists' ],
	# a procedure cannot be STRICT: each NULL is named (a NULL server crashed
	# the backend, a NULL gene was read as gene 0)
	[ q{snowseq_split_partition('orders', 24576, NULL)}, qr/the server of a split must not be NULL/, 'a split to a NULL server' ],
	[ q{snowseq_split_shard('orders', NULL, 'shard_c')}, qr/the gene of a split must not be NULL/, 'a split at a NULL gene' ],
	[ q{snowseq_move_to_neighbour('orders', NULL)}, qr/the gene of a move to a neighbour must not be NULL/, 'a move to a neighbour of a NULL gene' ],
	[ q{snowseq_move_revert(NULL)}, qr/the move of a revert must not be NULL/, 'a revert of a NULL move' ],
	[ q{snowseq_move_finalize(NULL)}, qr/the move of a finalize must not be NULL/, 'a finalize of a NULL move' ],
	[ q{snowseq_move_genes('orders', 0, 4095, 'shard_a2')}, qr/server "shard_a2" has node id 2, the same as server "shard_a"/, 'a destination with the node id of the source' ],
	[ q{snowseq_move_genes('orders', 0, 4095, 'myself')}, qr/server "myself" has node id 1, the same as this server/, 'a destination with the node id of the router' ],
	[ q{snowseq_move_genes('orders', 16384, 24575, 'shard_a')}, qr/server "shard_a" already has a table public.orders, read by partition orders_0/, 'a destination whose table of the same name is in use' ],
);
for my $r (@refusals)
{
	my ($call, $re, $what) = @$r;
	my ($before, $m_before) = (layout(), moves());
	my ($frc, $ferr) = move($call);
	like($ferr, qr/ERROR:  $re/, "(4) refused: $what");
	is(layout(), $before, "(4) $what: map and partitions unchanged");
	is(join(',', leftovers()), '', "(4) $what: nothing left behind");
}
$router->safe_psql('postgres', q{UPDATE snowseq_shard_map SET shard = 'shard_b' WHERE upper_gene = 16383});
($rc, $err) = move(q{snowseq_move_genes('orders', 0, 4095, 'shard_c')});
like($err, qr/ERROR:  snowseq_shard_map gives genes 0 to 4095 to "shard_b", but partition \S+ reads them from server "shard_a"/,
	'(4) refused: a map that disagrees with the partitions');
$router->safe_psql('postgres', q{UPDATE snowseq_shard_map SET shard = 'shard_a' WHERE upper_gene = 16383});
($rc, my $o, $err) = $router->psql('postgres', q{BEGIN; CALL snowseq_move_genes('orders', 0, 4095, 'shard_c'); COMMIT});
like($err, qr/ERROR:  a move of genes must run as a CALL of its own/, '(4) refused: a move inside a transaction block');

# ---------------------------------------------------------------------
# (5) Overlapping moves; a cancelled move
# ---------------------------------------------------------------------
# A transaction open on shard_a holds the slot creation (it waits for
# running transactions), so the first move stays in its copy step.
my $holder = $sa->background_psql('postgres');
$holder->query_safe('BEGIN; SELECT txid_current();');
my $bg_err = '';
my $bg = IPC::Run::start([ 'psql', '-X', '-Atq', '-d', $router->connstr('postgres'), '-c',
	q{CALL snowseq_move_genes('orders', 0, 4095, 'shard_c')} ], '>', \my $bg_out, '2>', \$bg_err);
$router->poll_query_until('postgres', q{SELECT count(*) = 1 FROM snowseq_moves WHERE state IN ('prepare', 'copy')})
  or die 'the first move did not start';
my $before = layout();
($rc, $err) = move(q{snowseq_move_genes('orders', 4000, 4095, 'shard_b')});
like($err, qr/ERROR:  genes 0 to 4095 of table "orders" are being moved by move \d+ \(to server "shard_c"\)/,
	'(5) a second move of overlapping genes is refused while the first runs');
($rc, $err) = move(q{snowseq_move_genes('orders', 0, 2047, 'shard_b')});
like($err, qr/ERROR:  genes 0 to 4095 of table "orders" are being moved by move \d+/,
	'(5) so is a second move of part of the same genes');
is(layout(), $before, '(5) the refused moves changed nothing');

# cancel the first move while it waits
$router->safe_psql('postgres', q{SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE 'CALL snowseq_move_genes%'});
$bg->finish;
like($bg_err, qr/ERROR:  canceling statement due to user request/, '(5) the cancelled move fails with the cancel');
$holder->query_safe('COMMIT');
$holder->quit;
is(layout(), $before, '(5) the cancelled move left the placement as it was');
is(join(',', leftovers()), '', '(5) the cancelled move removed everything it had made');
like(moves(), qr/\|failed$/, '(5) the cancelled move is recorded as failed');
check_state('(5) after a cancelled move');

# ---------------------------------------------------------------------
# (6) The destination stops during the copy; a retry succeeds
# ---------------------------------------------------------------------
# A table big enough that its copy takes a while, in a database of its own
# (the map belongs to a database, and describes all its sharded tables).
# IDs carry a node field no server has, so no server can issue them again.
for my $n ($router, $sa, $sb, $sc) { $n->safe_psql('postgres', 'CREATE DATABASE bulk'); $n->safe_psql('bulk', 'CREATE EXTENSION snowseq'); }
my $events = q{CREATE TABLE events (event_id bigint PRIMARY KEY, payload text NOT NULL)};
$sa->safe_psql('bulk', $events);
$sb->safe_psql('bulk', $events);
$sa->safe_psql('bulk', q{INSERT INTO events SELECT ((i % 16384)::bigint << 48) | (i::bigint << 10) | 1023, 'a' FROM generate_series(1, 1000) i});
$sb->safe_psql('bulk', q{INSERT INTO events SELECT ((16384 + i % 4096)::bigint << 48) | (i::bigint << 10) | 1023, 'b' FROM generate_series(1, 300000) i});
$servers = '';
for my $s ([ 'bulk_a', $sa ], [ 'bulk_b', $sb ], [ 'bulk_c', $sc ])
{
	$servers .= sprintf("CREATE SERVER %s FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '%s', port '%s', dbname 'bulk');\n"
		  . "CREATE USER MAPPING FOR CURRENT_USER SERVER %s;\n", $s->[0], $s->[1]->host, $s->[1]->port, $s->[0]);
}
$router->safe_psql('bulk', "CREATE EXTENSION postgres_fdw;\n$servers" . q{
CREATE TABLE events (event_id bigint NOT NULL, payload text NOT NULL) PARTITION BY RANGE (event_id);
CREATE FOREIGN TABLE events_0 PARTITION OF events FOR VALUES FROM (0) TO (16384::bigint << 48) SERVER bulk_a OPTIONS (table_name 'events');
CREATE FOREIGN TABLE events_1 PARTITION OF events FOR VALUES FROM (16384::bigint << 48) TO (MAXVALUE) SERVER bulk_b OPTIONS (table_name 'events');
INSERT INTO snowseq_shard_map VALUES (16383, 'bulk_a'), (32767, 'bulk_b');
});
my %bulk_node = (bulk_a => $sa, bulk_b => $sb, bulk_c => $sc);

# the events: 301000 rows and what the hot writer saw inserted, each once,
# on the server the map names
my $hot_out = "$tmp/move_hot.out";
my $extra_events = 0;
sub hot_ids { open my $fh, '<', $hot_out or return (); return map { /^(\d+)\n\z/ ? $1 : () } <$fh>; }
sub check_events
{
	my ($step, @servers) = @_;
	my @hot = hot_ids();
	my $want = 301000 + @hot + $extra_events;
	my ($n, $distinct) = split /\|/, $router->safe_psql('bulk', 'SELECT count(*), count(DISTINCT event_id) FROM events');
	is("$n/$distinct", "$want/$want", "$step: the router returns each of the $want events once");
	if (@hot)
	{
		is($router->safe_psql('bulk', "SELECT count(*) FROM unnest('{" . join(',', @hot) . "}'::bigint[]) id "
				  . "WHERE NOT EXISTS (SELECT 1 FROM events WHERE event_id = id)"),
			0, "$step: every one of the " . scalar(@hot) . " events the hot writer saw inserted exists");
	}
	my $on = 0;
	for my $s (@servers)
	{
		my $tables = $bulk_node{$s}->safe_psql('bulk', q{
			SELECT string_agg(format('SELECT event_id FROM %I', relname), ' UNION ALL ')
			FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace AND relname NOT LIKE 'snowseq%'
			AND coalesce(obj_description(oid, 'pg_class'), '') NOT LIKE '%copy in progress'});
		next unless $tables;
		$on += $bulk_node{$s}->safe_psql('bulk', "SELECT count(*) FROM ($tables) t");
		is($router->safe_psql('bulk', "SELECT count(*) FROM events WHERE snowseq_route(event_id) = '$s'"),
			$bulk_node{$s}->safe_psql('bulk', "SELECT count(*) FROM ($tables) t"),
			"$step: $s holds exactly the events the map routes to it");
	}
	is($on, $want, "$step: the servers hold $want events between them");
}
sub bulk_leftovers
{
	my @l;
	for my $s (@_)
	{
		push @l, map { "$s: $_" } grep { length } split /\n/, $bulk_node{$s}->safe_psql('bulk', q{
			SELECT 'slot ' || slot_name FROM pg_replication_slots
			UNION ALL SELECT 'publication ' || pubname FROM pg_publication
			UNION ALL SELECT 'subscription ' || subname FROM pg_subscription
			UNION ALL SELECT 'fence ' || token || ' ' || state FROM snowseq_fence WHERE state <> 'moved'
			UNION ALL SELECT 'copy ' || c.relname FROM pg_class c
				WHERE obj_description(c.oid, 'pg_class') LIKE '%copy in progress%'});
	}
	return @l;
}
sub bulk_layout
{
	return $router->safe_psql('bulk', q{SELECT string_agg(upper_gene || '=' || shard, ',' ORDER BY upper_gene) FROM snowseq_shard_map})
	  . ' ' . $router->safe_psql('bulk', q{
		SELECT string_agg(c.relname || ' ' || pg_get_expr(c.relpartbound, c.oid), '; ' ORDER BY c.relname)
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'events'::regclass});
}
sub bulk_move
{
	my ($call) = @_;
	return IPC::Run::start([ 'psql', '-X', '-Atq', '-d', $router->connstr('bulk'), '-c', "CALL $call" ],
		'>', \my $o, '2>', \$bg_err);
}
check_events('(6) before', 'bulk_a', 'bulk_b');

my $bulk_before = bulk_layout();
$bg_err = '';
$bg = bulk_move(q{snowseq_move_genes('events', 16384, 20479, 'bulk_c')});
$sc->poll_query_until('bulk', q{SELECT count(*) > 0 FROM pg_stat_subscription WHERE relid IS NOT NULL}, 't')
  or die 'the copy did not start';
$sc->stop('immediate');
$bg->finish;
note "move with the destination stopped:\n$bg_err";
like($bg_err, qr/ERROR:  could not .* on server "bulk_c"/, '(6) the move fails when the destination stops during the copy');
like($bg_err, qr/WARNING:  move \d+ left objects behind/, '(6) ... and says it left objects on the destination');
is(bulk_layout(), $bulk_before, '(6) the old placement is untouched');
check_events('(6) destination down', 'bulk_a', 'bulk_b');
is(join(',', bulk_leftovers('bulk_a', 'bulk_b')), '', '(6) the source kept no slot, publication or fence');
@up = ('shard_a', 'shard_b');
check_state('(6) destination down: the orders');
$sc->start;
@up = ('shard_a', 'shard_b', 'shard_c');
is($router->safe_psql('bulk', q{SELECT state FROM snowseq_moves}), 'rollback',
	'(6) the move is recorded as undone with leftovers');
my $cleanup = $router->safe_psql('bulk', q{SELECT server || ' ' || object || ': ' || action FROM snowseq_move_cleanup()});
note "cleanup:\n$cleanup";
like($cleanup, qr/bulk_c table public.events: dropped/, '(6) snowseq_move_cleanup() drops the half copy once the destination is back');
is(join(',', bulk_leftovers('bulk_a', 'bulk_b', 'bulk_c')), '', '(6) ... and the subscription: nothing is left');
is($router->safe_psql('bulk', q{SELECT state FROM snowseq_moves}), 'failed', '(6) the move is now recorded as failed');

# The retry lands in a table made beforehand (empty, matching: the move
# takes it), whose ALWAYS trigger slows the subscriber down for the rows a
# hot writer inserts into the moving genes all the while: the subscriber
# lags, and only the final catch-up under held-back writes brings the last
# of them over.
$sc->safe_psql('bulk', q{
	CREATE TABLE events (event_id bigint PRIMARY KEY, payload text NOT NULL);
	CREATE FUNCTION slow_apply() RETURNS trigger LANGUAGE plpgsql AS
		$$BEGIN IF NEW.payload = 'hot' THEN PERFORM pg_sleep(0.004); END IF; RETURN NEW; END$$;
	CREATE TRIGGER slow_apply BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION slow_apply();
	ALTER TABLE events ENABLE ALWAYS TRIGGER slow_apply});
my @hot_keys = grep { length } split /\n/, $router->safe_psql('bulk', q{
	SELECT k FROM (SELECT 'hot' || i AS k FROM generate_series(1, 5000) i) s
	WHERE snowseq_gene(k) BETWEEN 16384 AND 20479 LIMIT 40});
open my $hfh, '>', "$tmp/move_hot.sql" or die;
# about 200 rows a second, a little slower than the subscriber applies them
print $hfh "INSERT INTO events VALUES (snowseq_gene_next('$hot_keys[$_ % @hot_keys]'), 'hot') RETURNING event_id;\n"
  . "SELECT pg_sleep(0.003);\n" for 0 .. 199;
close $hfh;
unlink $hot_out;
my $hot_stop = "$tmp/move_hot_stop";
# (|| sleep 0.1 in these loops: a pause before running a failed psql again,
# while a server is busy with a move; nothing waits on it)
my $hot = IPC::Run::start([ 'bash', '-c', q{while [ ! -e "$3" ] && [ -d "${3%/*}" ]; do psql -X -Atq -d "$1" -f "$2" >> "$4" 2>> "$4.err" || sleep 0.1; done},
	'hot', $router->connstr('bulk'), "$tmp/move_hot.sql", $hot_stop, $hot_out ]);
# and a reader of the events, which only ever grow
open my $erfh, '>', "$tmp/move_events_reader.sql" or die;
print $erfh "SELECT count(*) FROM events;\n" for 1 .. 50;
close $erfh;
my $events_reads = "$tmp/move_events_reads.out";
unlink $events_reads;
my $ereader = IPC::Run::start([ 'bash', '-c', q{while [ ! -e "$3" ] && [ -d "${3%/*}" ]; do psql -X -Atq -d "$1" -f "$2" >> "$4" 2>/dev/null || sleep 0.1; done},
	'ereader', $router->connstr('bulk'), "$tmp/move_events_reader.sql", $hot_stop, $events_reads ]);
# the hot writer and the reader run before the move (11 reads), and go on
# after it (10 more): reads all along, on any machine
ok(wait_until(sub { count_lines($hot_out) > 0 && count_lines($events_reads) > 10 }), '(6) the hot writer and the reader run');
$bg_err = '';
$bg = bulk_move(q{snowseq_move_genes('events', 16384, 20479, 'bulk_c')});
$bg->finish;
my $reads_after = count_lines($events_reads) + 10;
ok(wait_until(sub { count_lines($events_reads) >= $reads_after }), '(6) the reader goes on after the move');
open my $hsfh, '>', $hot_stop or die;
close $hsfh;
$hot->finish;
$ereader->finish;
my @counts = map { /^(\d+)\n\z/ ? $1 : () } do { open my $fh, '<', $events_reads or die; <$fh> };
ok(@counts > 20, '(6) the events were read all along (' . scalar(@counts) . ' reads)');
is(scalar(grep { $counts[$_] < $counts[ $_ - 1 ] } 1 .. $#counts), 0,
	'(6) no read of the events ever missed a row an earlier read saw')
  or diag join ' ', @counts[0 .. ($#counts < 40 ? $#counts : 40)];
# the hot writer adds a few rows between two reads; a row counted twice
# (the moved rows on both servers) would show as a jump of thousands
is(scalar(grep { $counts[$_] - $counts[ $_ - 1 ] > 2000 } 1 .. $#counts), 0,
	'(6) no read of the events ever counted the moved rows twice')
  or diag join ' ', @counts[0 .. ($#counts < 40 ? $#counts : 40)];
note "retry:\n$bg_err";
unlike($bg_err, qr/ERROR/, '(6) the retry succeeds, into the table made for it');
unlike($bg_err, qr/deleting under the router's lock/,
	'(6) with inserts only, the split deleted the source rows before taking the router\'s lock');
my $lagged = $router->safe_psql('bulk', q{SELECT count(*) FROM events WHERE payload = 'hot' AND snowseq_route(event_id) = 'bulk_c'});
ok($lagged > 0, "(6) the hot writer wrote to the moving genes throughout ($lagged rows on bulk_c)");
like(slurp_file("$hot_out.err"), qr/are moving to server "bulk_c"/, '(6) ... and some of its writes were turned away during the switch, to retry');
$sc->safe_psql('bulk', 'DROP TRIGGER slow_apply ON events_g16384_20479');
like(bulk_layout(), qr/^16383=bulk_a,20479=bulk_c,32767=bulk_b /, '(6) genes 16384..20479 are on bulk_c');
check_events('(6) after the retry', 'bulk_a', 'bulk_b', 'bulk_c');
check_state('(6) after the retry: the orders');

# ---------------------------------------------------------------------
# (7) The router restarts during the copy; its resolver undoes the move
# ---------------------------------------------------------------------
$bulk_before = bulk_layout();
$bg_err = '';
$bg = bulk_move(q{snowseq_move_genes('events', 16384, 20479, 'bulk_b')});
$sb->poll_query_until('bulk', q{SELECT count(*) > 0 FROM pg_stat_subscription WHERE relid IS NOT NULL}, 't')
  or die 'the copy did not start';
$router->stop('immediate');
$bg->finish;
$router->start;
$crashed = 1;
is(bulk_layout(), $bulk_before, '(7) after the restart, the old placement is untouched');
ok($router->poll_query_until('bulk', q{SELECT state = 'failed' FROM snowseq_moves ORDER BY move_id DESC LIMIT 1}),
	'(7) the router\'s resolver undoes the move cut in its copy, at its start');
check_events('(7) after the router restart', 'bulk_a', 'bulk_b', 'bulk_c');
check_state('(7) after the router restart: the orders');
$bg_err = '';
$bg = bulk_move(q{snowseq_move_genes('events', 16384, 20479, 'bulk_b')});
$bg->finish;
note "retry:\n$bg_err";
unlike($bg_err, qr/interrupted move/, '(7) the next move finds nothing left to undo');
unlike($bg_err, qr/ERROR/, '(7) and then succeeds');
like(bulk_layout(), qr/^16383=bulk_a,32767=bulk_b /, '(7) genes 16384..20479 are back on bulk_b');
check_events('(7) after the retry', 'bulk_a', 'bulk_b', 'bulk_c');
is(join(',', bulk_leftovers('bulk_a', 'bulk_b', 'bulk_c')), '', '(7) nothing is left anywhere');

# cleanup reads the records of moves, never names: a slot named like a move
# of this router that no record names (each move records its slots,
# committed, before they are made) and one named like another router's are
# neither listed nor dropped
$sb->safe_psql('bulk', q{SELECT pg_create_logical_replication_slot('snowseq_move_1_999', 'pgoutput');
	SELECT pg_create_logical_replication_slot('snowseq_move_77_1', 'pgoutput')});
$cleanup = $router->safe_psql('bulk', q{SELECT coalesce(move_id::text, '-') || ' ' || server || ' ' || object || ': ' || action FROM snowseq_move_cleanup()});
note "cleanup:\n$cleanup";
unlike($cleanup, qr/snowseq_move_1_999|snowseq_move_77_1/, '(7) snowseq_move_cleanup() lists no slot that no record names');
is($sb->safe_psql('bulk', q{SELECT string_agg(slot_name, ',' ORDER BY slot_name) FROM pg_replication_slots}), 'snowseq_move_1_999,snowseq_move_77_1',
	'(7) ... and drops neither');
is($router->safe_psql('bulk', q{SELECT count(*) FROM snowseq_move_objects}), '0', '(7) the moves that are over left no record');
$sb->safe_psql('bulk', q{SELECT pg_drop_replication_slot('snowseq_move_1_999')});
$sb->safe_psql('bulk', q{SELECT pg_drop_replication_slot('snowseq_move_77_1')});

# ---------------------------------------------------------------------
# (8) A split while a writer updates the moved rows
# ---------------------------------------------------------------------
# The split deletes the moved rows in a source transaction before the
# router takes its lock; an update of a moved row through the router then
# waits for that transaction while holding the router's lock.  The move sees
# it, rolls the source transaction back (the update fails at the fence) and
# deletes under the router's lock instead: no deadlock, no lost update.
# the rows the writer updates come first, in the heap and in ID order, so
# that the delete reaches them first whatever its plan
$sb->safe_psql('bulk', q{INSERT INTO events SELECT (20480::bigint << 48) | (i::bigint << 10) | 1022, 'u0'
	FROM generate_series(1, 50) i});
$sb->safe_psql('bulk', q{INSERT INTO events SELECT ((20481 + i % 4095)::bigint << 48) | (i::bigint << 10) | 1022, 'b'
	FROM generate_series(1, 100000) i});
$extra_events = 100050;
my @upd_ids = split /\n/, $sb->safe_psql('bulk', q{SELECT event_id FROM events WHERE payload = 'u0' ORDER BY event_id});
open my $ufh, '>', "$tmp/move_upd.sql" or die;
for my $i (0 .. 399)
{
	my $id = $upd_ids[ $i % @upd_ids ];
	print $ufh "UPDATE events SET payload = 'u' || (substr(payload, 2)::int + 1) WHERE event_id = $id RETURNING event_id, payload;\n";
}
close $ufh;
my $upd_out = "$tmp/move_upd.out";
unlink $upd_out, $hot_stop;
my $upd = IPC::Run::start([ 'bash', '-c', q{while [ ! -e "$3" ] && [ -d "${3%/*}" ]; do psql -X -Atq -d "$1" -f "$2" >> "$4" 2>> "$4.err" || sleep 0.1; done},
	'upd', $router->connstr('bulk'), "$tmp/move_upd.sql", $hot_stop, $upd_out ]);
# the updater runs before the move and after it (its rows, not a time)
ok(wait_until(sub { count_lines($upd_out) >= 20 }), '(8) the updater runs');
$bulk_before = bulk_layout();
$bg_err = '';
$bg = bulk_move(q{snowseq_move_genes('events', 20480, 24575, 'bulk_c')});
$bg->finish;
my $upd_after = count_lines($upd_out) + 20;
ok(wait_until(sub { count_lines($upd_out) >= $upd_after }), '(8) the updater goes on after the split');
open $hsfh, '>', $hot_stop or die;
close $hsfh;
$upd->finish;
note "split under updates:\n$bg_err";
unlike($bg_err, qr/ERROR/, '(8) the split succeeds while a writer updates the moved rows');
SKIP:
{
	# which path the switch takes depends on an update arriving in the
	# delete's window; on a loaded machine it may miss it: the checks
	# below hold on either path
	skip('(8) no update arrived while the source delete ran this time', 1)
	  unless $bg_err =~ /writes to moved rows waited on their delete/;
	like($bg_err, qr/writes to moved rows waited on their delete: deleting under the router's lock/,
		'(8) an update waiting on the source delete made the switch delete under the router\'s lock instead');
}
like(bulk_layout(), qr/20479=bulk_b,24575=bulk_c,32767=bulk_b /, '(8) genes 20480..24575 are on bulk_c');
# every update the writer saw applied is there: per row, the last payload it saw
my %last;
for (split /\n/, slurp_file($upd_out))
{
	my ($id, $p) = split /\|/;
	$p =~ s/^u//;
	$last{$id} = $p if $p > ($last{$id} // 0);
}
my %have = map { my ($id, $p) = split /\|/; $p =~ s/^u//; ($id => $p) } split /\n/, $router->safe_psql('bulk',
	"SELECT event_id, payload FROM events WHERE event_id IN (" . join(',', @upd_ids) . ")");
is(scalar(grep { $have{$_} != $last{$_} } keys %last), 0,
	'(8) every row ends with the last update its writer saw applied (' . scalar(keys %last) . ' rows updated)')
  or diag join ' ', map { "$_: $have{$_} vs $last{$_}" } grep { $have{$_} != $last{$_} } keys %last;
check_events('(8) after the split', 'bulk_a', 'bulk_b', 'bulk_c');

# ---------------------------------------------------------------------
# The end: every ID unique
# ---------------------------------------------------------------------
open my $sfh, '>', $stop or die;
close $sfh;
$_->{h}->finish for @clients;
my @ids = map { (split /\|/)[1] } grep { /^i\|/ } map { lines_of($_) } @writers;
ok(all_unique([ @ids, @initial ]), 'no ID was issued twice (' . scalar(@ids) . ' inserted by the clients)');
my @reads = grep { /^r\|/ } lines_of($reader);
ok(@reads > 20, 'the reader read all along (' . scalar(@reads) . ' reads)');
is(scalar(grep { (split /\|/)[1] != 0 } @reads), 0, 'no read through the router ever returned a row twice');
# no deletes in the workload: a row once seen is seen by every later read
my @seen = map { (split /\|/)[2] } @reads;
is(scalar(grep { $seen[$_] < $seen[ $_ - 1 ] } 1 .. $#seen), 0, 'no read through the router ever missed a row an earlier read saw');
my $err_w = join '', map { -e $_->{err} ? slurp_file($_->{err}) : '' } @writers;
note "writer errors: " . scalar(() = $err_w =~ /ERROR/g);
unlike($err_w, qr/duplicate key|violates check constraint/, 'no writer hit a duplicate key or a wrong shard');
done_testing();
