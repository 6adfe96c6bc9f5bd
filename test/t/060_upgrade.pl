# Extension upgrades.  For every version that can reach the default one
# (pg_extension_update_paths), a database installs that version, takes IDs
# and stores rows that use the extension, then walks the update path one
# step at a time (ALTER EXTENSION snowseq UPDATE TO each version on it),
# taking IDs after every step.  At the end its catalog (every member object,
# functions with their markings and C symbols, operators, views, tables,
# triggers, privileges, comments, configuration tables) must equal that of
# a fresh CREATE EXTENSION of the default version, line for line.  IDs taken
# after a step are greater than every ID taken before it (gene IDs: within
# their gene), no ID comes twice, and the rows and the routing map stored
# before the update are still there.
#
# The library serves every version's SQL: a database left at each old
# version calls its record-returning C functions and reads its views with
# the current library; every C function of every version finds its symbol
# (the C language validator loads it); and a C symbol that two versions
# share has the same arguments and result in both, so an old definition
# never meets a C function whose row shape has changed (a changed shape
# needs a new symbol, such as snowseq_status_1_1).
#
# Nothing here names today's objects or versions: what is compared comes
# from the catalog, so the test keeps passing as objects are added to the
# install script and the upgrade script alike, and fails when one of them
# forgets what the other does.
use strict;
use warnings;
use lib 'test';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $node = snowseq_node('upgrade', extension => 0);
sub sql { return $node->safe_psql(@_); }

my $default = sql('postgres', "SELECT default_version FROM pg_available_extensions WHERE name = 'snowseq'");
my @all_versions = split /\n/,
  sql('postgres', "SELECT version FROM pg_available_extension_versions WHERE name = 'snowseq' ORDER BY version");
my %paths = map { split /\|/, $_, 2 } split /\n/, sql('postgres', qq{
	SELECT source, coalesce(path, '') FROM pg_extension_update_paths('snowseq')
	WHERE target = '$default' AND source <> target ORDER BY source});
note("default version $default; installable: @all_versions");
note("update path from $_: $paths{$_}") for sort keys %paths;
ok(exists $paths{'1.0'} && $paths{'1.0'} ne '', "1.0 has an update path to $default");
for my $v (sort keys %paths)
{
	isnt($paths{$v}, '', "$v can be updated to $default");
}

# ---- the reference: a fresh install of the default version ----
sql('postgres', 'CREATE DATABASE fresh');
sql('fresh', 'CREATE EXTENSION snowseq');
my $fresh = extension_fingerprint($node, 'fresh');
cmp_ok(scalar(@$fresh), '>', 50, 'the fingerprint of a fresh install has content');

# ---- IDs, recorded here as they are received ----
my %seen;        # every ID received => where
my @dups;
my $sf_max = 0;    # the largest snowflake ID received so far
my %gene_max;      # key => the largest gene ID received so far for it
my @KEYS = ('alice', 'bob', 'ünïcode-キー');

# Take snowflake and gene IDs in $db; check them against everything taken
# before (across all databases: the clock and segments are cluster-wide).
sub take_ids
{
	my ($db, $what) = @_;
	my @sf = split /\n/, sql($db, 'SELECT snowseq_next() FROM generate_series(1, 300)');
	my %gene;
	for my $k (@KEYS)
	{
		my $lit = $node->safe_psql($db, "SELECT quote_literal(\$k\$$k\$k\$)");
		$gene{$k} = [ split /\n/, sql($db, "SELECT snowseq_gene_next(${lit}::text) FROM generate_series(1, 50)") ];
	}
	is(scalar(@sf), 300, "$what: 300 snowflake IDs");
	ok(strictly_increasing(\@sf) && $sf[0] > $sf_max,
		"$what: snowflake IDs increase and start above every ID taken before ($sf[0] > $sf_max)");
	for my $k (@KEYS)
	{
		my $g = $gene{$k};
		my $before = $gene_max{$k} // 0;
		ok(strictly_increasing($g) && $g->[0] > $before,
			"$what: gene IDs of '$k' increase and start above those taken before");
		$gene_max{$k} = $g->[-1];
	}
	for my $id (@sf, map { @$_ } values %gene)
	{
		push @dups, "$id ($seen{$id} and $what)" if exists $seen{$id};
		$seen{$id} = $what;
	}
	$sf_max = $sf[-1];
}

# Rows that use the extension: DEFAULT snowseq_next(), the gene trigger, and
# the routing map (a configuration table).
sub store_rows
{
	my ($db) = @_;
	sql($db, q{
		CREATE TABLE events (id bigint PRIMARY KEY DEFAULT snowseq_next(), what text);
		CREATE TABLE orders (order_id bigint PRIMARY KEY, buyer text NOT NULL);
		CREATE TRIGGER orders_id BEFORE INSERT ON orders
			FOR EACH ROW EXECUTE FUNCTION snowseq_fill_gene_id('order_id', 'buyer');
		INSERT INTO events (what) SELECT 'e' || g FROM generate_series(1, 20) g;
		INSERT INTO orders (buyer) SELECT 'b' || g FROM generate_series(1, 20) g;
		INSERT INTO snowseq_shard_map VALUES (16383, 'shard_a'), (32767, 'shard_b');
	});
}

sub rows_digest
{
	my ($db) = @_;
	return sql($db, q{
		SELECT (SELECT count(*) || ':' || md5(string_agg(id || what, ',' ORDER BY id)) FROM events)
			|| ' ' || (SELECT count(*) || ':' || md5(string_agg(order_id || buyer, ',' ORDER BY order_id)) FROM orders)
			|| ' ' || (SELECT string_agg(upper_gene || '=' || shard, ',' ORDER BY upper_gene) FROM snowseq_shard_map)});
}

# Every C function of the extension in $db finds its symbol in the library;
# every record-returning one that needs no argument can be called, and
# every view of the extension read.  Returns { symbol => "args -> result" }.
sub check_library
{
	my ($db, $what) = @_;
	my %shape;
	my @c = split /\n/, sql($db, q{
		SELECT p.oid::regprocedure || '|' || p.prosrc || '|' || pg_get_function_identity_arguments(p.oid)
			|| ' -> ' || pg_get_function_result(p.oid)
		FROM pg_proc p
		JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
		JOIN pg_extension x ON x.oid = d.refobjid AND x.extname = 'snowseq'
		WHERE p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'c')
		ORDER BY 1});
	my @missing;
	for my $line (@c)
	{
		my ($f, $symbol, $shape) = split /\|/, $line, 3;
		my ($rc, $out, $err) = $node->psql($db, "SELECT pg_catalog.fmgr_c_validator('$f'::regprocedure)");
		push @missing, "$f ($symbol): $err" if $rc != 0;
		$shape{$symbol} = $shape;
	}
	cmp_ok(scalar(@c), '>', 10, "$what: the extension has C functions (" . scalar(@c) . ')');
	is(join("\n", @missing), '', "$what: every C function finds its symbol in the library");

	my @calls = split /\n/, sql($db, q{
		SELECT p.oid::regprocedure
		FROM pg_proc p
		JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
		JOIN pg_extension x ON x.oid = d.refobjid AND x.extname = 'snowseq'
		JOIN pg_type t ON t.oid = p.prorettype
		WHERE p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'c')
		  AND p.pronargs = p.pronargdefaults AND (t.typtype = 'c' OR t.oid = 'record'::regtype)
		ORDER BY 1});
	my @views = split /\n/, sql($db, q{
		SELECT c.oid::regclass FROM pg_class c
		JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
		JOIN pg_extension x ON x.oid = d.refobjid AND x.extname = 'snowseq'
		WHERE c.relkind = 'v' ORDER BY 1});
	ok(@calls && @views, "$what: record-returning functions (@calls) and views (@views) to read");
	my @failed;
	for my $sql ((map { "SELECT * FROM $_" } map { s/\(.*\)$/()/r } @calls), map { "SELECT * FROM $_" } @views)
	{
		my ($rc, $out, $err) = $node->psql($db, $sql);
		# status and reservations have rows on every installation; the
		# others (moves, counters, keys, servers) may have none here
		push @failed, "$sql: $err" if $rc != 0;
		push @failed, "$sql: no rows" if $rc == 0 && $out eq '' && $sql =~ /snowseq_(status|reservations)\b/;
	}
	is(join("\n", @failed), '', "$what: each runs with the current library (status and reservations have rows)");
	return \%shape;
}

my $fresh_shapes = check_library('fresh', "fresh $default");
take_ids('fresh', "fresh $default");

for my $from (sort keys %paths)
{
	next if $paths{$from} eq '';
	my @steps = split /--/, $paths{$from};
	shift @steps;

	# a database left at $from: its SQL with the current library
	my $stay = "stay_$from" =~ s/\W/_/gr;
	sql('postgres', "CREATE DATABASE $stay");
	sql($stay, "CREATE EXTENSION snowseq VERSION '$from'");
	my $old_shapes = check_library($stay, "$from, not updated");
	take_ids($stay, "$from, not updated");
	# the statistics of a gene-sharded table: every version's
	# snowseq_shard_stats runs the library's C, which must ask nothing of
	# the catalog that this version lacks (the map comes from route.c)
	if (sql($stay, "SELECT count(*) FROM pg_proc WHERE proname = 'snowseq_shard_stats'") ne '0')
	{
		sql($stay, q{CREATE TABLE stats_t (id bigint NOT NULL) PARTITION BY RANGE (id);
			SELECT snowseq_create_shards('stats_t', 4);
			INSERT INTO stats_t SELECT snowseq_gene_next(i::text) FROM generate_series(1, 100) i});
		my ($rc, $out, $err) = $node->psql($stay, "SELECT count(*) || ' partitions, ' || sum(rows) || ' rows' FROM snowseq_shard_stats('stats_t')");
		is($rc == 0 ? $out : $err, '4 partitions, 100 rows', "$from, not updated: snowseq_shard_stats of a gene-sharded table runs with the current library");
	}
	my @clash;
	for my $symbol (sort keys %$old_shapes)
	{
		push @clash, "$symbol: $old_shapes->{$symbol} in $from, $fresh_shapes->{$symbol} in $default"
		  if exists $fresh_shapes->{$symbol} && $fresh_shapes->{$symbol} ne $old_shapes->{$symbol};
	}
	is(join("\n", @clash), '', "a C symbol of $from and $default has the same arguments and result in both");
	my @versioned = grep { !exists $fresh_shapes->{$_} } sort keys %$old_shapes;
	note("C symbols of $from that $default no longer uses: @versioned");

	# a database updated from $from, one step at a time
	my $db = "from_$from" =~ s/\W/_/gr;
	sql('postgres', "CREATE DATABASE $db");
	sql($db, "CREATE EXTENSION snowseq VERSION '$from'");
	store_rows($db);
	take_ids($db, "$from before the update");
	my $rows = rows_digest($db);
	my $at = $from;
	for my $to (@steps)
	{
		sql($db, "ALTER EXTENSION snowseq UPDATE TO '$to'");
		is(sql($db, "SELECT extversion FROM pg_extension WHERE extname = 'snowseq'"), $to,
			"$at -> $to: updated");
		take_ids($db, "after $at -> $to");
		$at = $to;
	}
	is(rows_digest($db), $rows, "$from -> $default: the rows and the routing map are unchanged");
	sql($db, q{
		INSERT INTO events (what) VALUES ('after');
		INSERT INTO orders (buyer) VALUES ('after');});
	ok(sql($db, q{SELECT (SELECT min(id) FROM events WHERE what = 'after') > (SELECT max(id) FROM events WHERE what <> 'after')
			AND (SELECT count(*) FROM orders WHERE buyer = 'after' AND shard_of(order_id) = snowseq_gene('after'::text)) = 1})
		  eq 't', "$from -> $default: DEFAULT snowseq_next() and the gene trigger still fill IDs");

	compare_fingerprints(extension_fingerprint($node, $db), $fresh,
		"$from updated to $default has the catalog of a fresh $default",
		"$from updated", "fresh $default");
	check_library($db, "$from updated to $default");
}

# Moves that began under 1.2 recorded nothing of what they made; 1.3's
# cleanup reads records alone, so the update writes those that moves not
# yet over need (the lead's publication, slot, subscription and prepared
# transaction, each table's fence, the copy it created, a split's keep
# view) and the keep view of a split that is done (dropped after it
# finished, it may be left); a whole move that is done and a failed one
# need none.
if (exists $paths{'1.2'})
{
	sql('postgres', 'CREATE DATABASE moves_1_2');
	sql('moves_1_2', q{CREATE EXTENSION snowseq VERSION '1.2';
		CREATE TABLE orders (order_id bigint PRIMARY KEY) PARTITION BY RANGE (order_id);
		CREATE TABLE order_items (item_id bigint PRIMARY KEY) PARTITION BY RANGE (item_id);
		INSERT INTO snowseq_moves (move_id, parent, first_gene, last_gene, source_server, dest_server, kind,
			part_name, new_part_name, source_table, dest_table, id_column, dest_created, token, fence_id, state, group_move)
		OVERRIDING SYSTEM VALUE VALUES
		(1, 'orders', 0, 99, 'shard_a', 'shard_b', 'prefix', 'orders_a', 'orders_g0_99', 'public.orders', 'public.orders_g0_99',
		 'order_id', true, 'snowseq_move_1_1', 4, 'copy', NULL),
		(2, 'order_items', 0, 99, 'shard_a', 'shard_b', 'prefix', 'order_items_a', 'order_items_g0_99', 'public.order_items',
		 'public.order_items_g0_99', 'item_id', false, 'snowseq_move_1_2', 5, 'copy', 1),
		(3, 'orders', 200, 299, 'shard_a', 'shard_c', 'whole', 'orders_c', 'orders_g200_299', 'public.orders', 'public.orders_g200_299',
		 'order_id', true, 'snowseq_move_1_3', 6, 'done', NULL),
		(4, 'orders', 300, 399, 'shard_a', 'shard_c', 'suffix', 'orders_d', 'orders_g300_399', 'public.orders', 'public."Orders_g300_399"',
		 'order_id', true, 'snowseq_move_1_4', 7, 'done', NULL),
		(5, 'orders', 400, 499, 'shard_a', 'shard_c', 'suffix', 'orders_e', 'orders_g400_499', 'public.orders', 'public.orders_g400_499',
		 'order_id', true, 'snowseq_move_1_5', 8, 'failed', NULL),
		(6, 'orders', 500, 599, 'shard_a', 'shard_c', 'whole', 'orders_f', 'orders_g500_599', 'public.orders', 'public.orders_g500_599',
		 'order_id', NULL, 'snowseq_move_1_6', NULL, 'prepare', NULL)});
	# a move on the 1.2 catalog (the library already new) is refused: it
	# would make objects with nowhere to record them
	my ($mrc, $mout, $merr) = $node->psql('moves_1_2', "CALL snowseq_move_genes('orders', 0, 99, 'shard_b')");
	like($merr, qr/ERROR:  moves need snowseq 1\.3 in this database; it is older.*HINT:  Run ALTER EXTENSION snowseq UPDATE, then move\./s,
		'1.2 catalog, new library: a move is refused until the update');
	# a role granted the older names of two moves gets their clear names
	sql('moves_1_2', q{CREATE ROLE "Mover 1.2"; CREATE ROLE other_1_2;
		GRANT EXECUTE ON PROCEDURE snowseq_split_shard(regclass, integer, name) TO "Mover 1.2";
		GRANT EXECUTE ON PROCEDURE snowseq_merge_shards(regclass, integer) TO "Mover 1.2", other_1_2});
	sql('moves_1_2', "ALTER EXTENSION snowseq UPDATE TO '$default'");
	is(sql('moves_1_2', q{SELECT r || ' ' || has_function_privilege(r, 'snowseq_split_partition(regclass, integer, name)', 'EXECUTE')
			|| ' ' || has_function_privilege(r, 'snowseq_move_to_neighbour(regclass, integer)', 'EXECUTE')
			FROM unnest(ARRAY['Mover 1.2', 'other_1_2']) r ORDER BY r}),
		"Mover 1.2 true true\nother_1_2 false true",
		'1.2 -> 1.3: each role granted snowseq_split_shard or snowseq_merge_shards may call its clear name, and no other');
	is(sql('moves_1_2', q{SELECT string_agg(move_id || ' ' || server || ' ' || kind || ' ' || name, E'\n' ORDER BY move_id, kind, name)
			FROM snowseq_move_objects}),
		join("\n",
			'1 shard_a publication snowseq_move_1_1',
			'1 shard_a replication slot snowseq_move_1_1',
			'1 shard_b subscription snowseq_move_1_1',
			'1 shard_a fence snowseq_move_1_1',
			'1 shard_a prepared transaction snowseq_move_1_1',
			'1 shard_a view public.snowseq_move_1_1_keep_4',
			'1 shard_b half copy public.orders',
			'2 shard_a fence snowseq_move_1_2',
			'2 shard_a view public.snowseq_move_1_1_keep_5',
			'4 shard_a view public.snowseq_move_1_4_keep_7',
			'6 shard_a publication snowseq_move_1_6',
			'6 shard_a replication slot snowseq_move_1_6',
			'6 shard_c subscription snowseq_move_1_6',
			'6 shard_a fence snowseq_move_1_6',
			'6 shard_a prepared transaction snowseq_move_1_6'),
		'1.2 -> 1.3: the records that the moves of 1.2 not over (and a split that is done, its keep view) need are written');
}

# the IDs of every database, and the fresh one again after all updates
take_ids('fresh', "fresh $default, after the updates");
is(join("\n", @dups), '', 'no ID was received twice (' . scalar(keys %seen) . ' IDs)');

# and across a restart
$node->restart;
take_ids('fresh', 'after a restart');
is(join("\n", @dups), '', 'no ID was received twice, also after a restart');

$node->stop;
done_testing();
