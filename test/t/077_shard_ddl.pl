# Schema changes of a gene-sharded table made on the router reach the tables
# of its shard servers, in one two-phase transaction with the router's own
# change, while writers go on through the router.
#
#   router (node 1): items, partitions items_0 (genes 0..16383, on s1's
#                    items_1) and items_1 (the rest, on s2's items_2)
#   s1 (node 2), s2 (node 3)
#
# (1) ALTER TABLE ADD COLUMN with a default, under writers: every server has
#     the column; writes through the router fill it; no row lost or doubled.
# (2) CREATE INDEX reaches both shard tables, DROP INDEX drops them there
#     (by definition, not by name); COMMENT and RENAME COLUMN reach them;
#     IF NOT EXISTS makes no second index; a role that does not own the
#     table drops nothing; a savepoint rolled back takes its change off the
#     shards; a literal is read there under the router session's settings.
# (3) A shard server that refuses (a column it already has): nothing changes
#     anywhere, the router's ERROR says which server.
# (4) A mix of carried and router-only subcommands is refused; with
#     snowseq.shard_ddl = off a change stays on the router.
# (5) A shard server killed after every server prepared and before the
#     router committed: the router commits, the server's part stays prepared
#     until it is back and snowseq_move_cleanup() commits it: every server
#     has the new definition.
# (6) A shard server killed before it prepared: the router's commit fails,
#     every server keeps the old definition, no prepared transaction is left.
# (7) A revertable move: the change is refused until it is finalized; a move
#     after the change copies the new column with its values (and its new
#     foreign partition gets the parent's CHECK constraint, which ATTACH
#     PARTITION wants).
# (8) The router killed with every server prepared: at its start the
#     resolver rolls their parts back.
use strict;
use warnings;
use lib 'test';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my @conf = shard_conf();
my $router = snowseq_node('router', node_id => 1, conf => \@conf);
my %nodes = (s1 => snowseq_node('s1', node_id => 2, conf => \@conf),
	s2 => snowseq_node('s2', node_id => 3, conf => \@conf));
gene_sharded_items($router, \%nodes, [ [ 0, 16383 ], [ 16384, 32767 ] ], 100);
my @tables = ([ $nodes{s1}, 'items_1' ], [ $nodes{s2}, 'items_2' ]);

# columns of a table as name:type:notnull:default
sub columns
{
	my ($node, $t) = @_;
	return $node->safe_psql('postgres', qq{SELECT string_agg(a.attname || ':' || format_type(a.atttypid, a.atttypmod)
		|| ':' || a.attnotnull || ':' || coalesce(pg_get_expr(d.adbin, d.adrelid), '-'), ',' ORDER BY a.attnum)
		FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		WHERE a.attrelid = '$t'::regclass AND a.attnum > 0 AND NOT a.attisdropped});
}
sub shard_columns { return join(' | ', map { columns(@$_) } @tables); }
sub prepared
{
	return join(',', map { $_->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts') } map { $_->[0] } @tables);
}

# writers through the router, each printing the ids it inserted
my $dir = "$PostgreSQL::Test::Utils::tmp_check/077";
mkdir $dir;
open my $bf, '>', "$dir/batch.sql" or die;
# one row a statement: each is on one shard server, committed there or not
print $bf "INSERT INTO items (item_id, k) VALUES (snowseq_gene_next(md5(random()::text)), 'w') RETURNING item_id;\n" x 5;
close $bf;
my @clients = map { batch_client($router, batch => "$dir/batch.sql", stop => "$dir/stop", pause => "$dir/pause",
		out => "$dir/out$_", err => "$dir/err$_") } 1 .. 2;
ok(wait_until(sub { -s "$dir/out1" && -s "$dir/out2" }), 'two writers insert through the router');

# (1)
$router->safe_psql('postgres', q{ALTER TABLE items ADD COLUMN note text NOT NULL DEFAULT 'none'});
is(shard_columns(), join(' | ', ("item_id:bigint:true:-,k:text:true:-,note:text:true:'none'::text") x 2),
	'(1) ADD COLUMN with NOT NULL and a default reached both shard tables');
is($router->safe_psql('postgres', q{INSERT INTO items (item_id, k, note) VALUES (snowseq_gene_next('a'), 'a', 'first') RETURNING note}),
	'first', '(1) a write through the router fills the new column');
is(prepared(), '0,0', '(1) no prepared transaction is left on the shard servers');

# (2)
$router->safe_psql('postgres', q{CREATE INDEX items_note_idx ON items (note)});
sub indexes
{
	return join(' | ', map { $_->[0]->safe_psql('postgres', qq{SELECT coalesce(string_agg(regexp_replace(pg_get_indexdef(indexrelid), '^.* USING ', ''), ',' ORDER BY 1), '-')
		FROM pg_index WHERE indrelid = '$_->[1]'::regclass AND NOT indisprimary}) } @tables);
}
is(indexes(), 'btree (note) | btree (note)', '(2) CREATE INDEX reached both shard tables');
$router->safe_psql('postgres', q{DROP INDEX items_note_idx});
is(indexes(), '- | -', '(2) DROP INDEX dropped them (by their definition: their names are the shards\' own)');
$router->safe_psql('postgres', q{COMMENT ON COLUMN items.note IS 'what the buyer wrote'; COMMENT ON TABLE items IS 'items sold'});
is(join(' | ', map { $_->[0]->safe_psql('postgres', "SELECT col_description('$_->[1]'::regclass, 3) || '/' || obj_description('$_->[1]'::regclass, 'pg_class')") } @tables),
	'what the buyer wrote/items sold | what the buyer wrote/items sold', '(2) COMMENT ON COLUMN and ON TABLE reached both');
# a session that carries many changes keeps no memory of each one's
# servers (their sessions and connection options lived on in
# TopMemoryContext): 30 more carried in one session, after one to warm up
is($router->safe_psql('postgres', q{COMMENT ON TABLE items IS 'warm';
	DO $$BEGIN PERFORM set_config('snowseq_test.base', used_bytes::text, false) FROM pg_backend_memory_contexts WHERE name = 'TopMemoryContext'; END$$;
	} . join('', map { "COMMENT ON TABLE items IS 'items sold $_';\n" } 1 .. 30) . q{
	SELECT CASE WHEN d <= 1024 THEN 't' ELSE d || ' bytes more' END
	FROM (SELECT used_bytes - current_setting('snowseq_test.base')::bigint AS d
		FROM pg_backend_memory_contexts WHERE name = 'TopMemoryContext') m}), 't',
	'(2) 30 changes carried in one session leave the session\'s top memory as it was (within 1 kB)');
$router->safe_psql('postgres', q{ALTER TABLE items RENAME COLUMN note TO memo});
like(shard_columns(), qr/^item_id:bigint:true:-,k:text:true:-,memo:text:true:'none'::text \| item_id:bigint:true:-,k:text:true:-,memo:text:true:'none'::text$/,
	'(2) RENAME COLUMN reached both');
$router->safe_psql('postgres', q{ALTER TABLE items ALTER COLUMN memo DROP NOT NULL, ALTER COLUMN memo SET DEFAULT 'n/a',
	ADD CONSTRAINT memo_short CHECK (length(memo) < 100)});
is(shard_columns(), join(' | ', ("item_id:bigint:true:-,k:text:true:-,memo:text:false:'n/a'::text") x 2),
	'(2) DROP NOT NULL and SET DEFAULT reached both');
is(join(',', map { $_->[0]->safe_psql('postgres', "SELECT count(*) FROM pg_constraint WHERE conrelid = '$_->[1]'::regclass AND conname = 'memo_short'") } @tables),
	'1,1', '(2) ... and the CHECK constraint');
# a constraint added NOT VALID is validated on the shards by the router's VALIDATE CONSTRAINT
$router->safe_psql('postgres', q{ALTER TABLE items ADD CONSTRAINT k_given CHECK (k IS NOT NULL) NOT VALID});
my $k_given = sub { join(',', map { $_->[0]->safe_psql('postgres', "SELECT convalidated FROM pg_constraint WHERE conrelid = '$_->[1]'::regclass AND conname = 'k_given'") } @tables) };
is($k_given->(), 'f,f', '(2) ADD CONSTRAINT ... NOT VALID reached both, not validated');
$router->safe_psql('postgres', q{ALTER TABLE items VALIDATE CONSTRAINT k_given});
is($k_given->(), 't,t', '(2) VALIDATE CONSTRAINT validated it on both');

# (2) again: IF NOT EXISTS twice makes one index; a role that does not own
# the table drops nothing; a savepoint rolled back takes its change off the
# shards too; text is read there under the router session's settings
$router->safe_psql('postgres', 'CREATE INDEX IF NOT EXISTS items_k2_idx ON items (k)') for 1 .. 2;
is(indexes(), 'btree (k) | btree (k)', '(2) CREATE INDEX IF NOT EXISTS twice: one index on each shard table');
$router->safe_psql('postgres', 'CREATE ROLE intruder LOGIN');
my ($rc, $out, $err) = $router->psql('postgres', 'DROP INDEX items_k2_idx', extra_params => [ '-U', 'intruder' ]);
like($err, qr/ERROR:  must be owner of index items_k2_idx/, '(2) a role that does not own the table cannot drop its index');
is(indexes(), 'btree (k) | btree (k)', '(2) ... and the shard tables keep theirs');
$router->safe_psql('postgres', 'DROP INDEX items_k2_idx');
is(indexes(), '- | -', '(2) dropped by the owner, on the shards too');
$router->safe_psql('postgres', q{BEGIN; SAVEPOINT a; ALTER TABLE items ADD COLUMN sp1 integer; ROLLBACK TO a;
	ALTER TABLE items ADD COLUMN sp2 integer; COMMIT});
is(join(' | ', map { my $c = columns(@$_); ($c =~ /sp1/ ? 'sp1' : '-') . ($c =~ /sp2/ ? ' sp2' : ' -') } [ $router, 'items' ], @tables),
	'- sp2 | - sp2 | - sp2', '(2) a change in a savepoint rolled back is on no server; the next one is on all');
$router->safe_psql('postgres', q{SET standard_conforming_strings = off; SET escape_string_warning = off;
	ALTER TABLE items ADD COLUMN quoted text DEFAULT 'a\'; DROP TABLE items; --'});
is(join(' | ', map { $_->[0]->safe_psql('postgres', "SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef d JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum WHERE d.adrelid = '$_->[1]'::regclass AND a.attname = 'quoted'") } [ $router, 'items' ], @tables),
	join(' | ', (q{'a''; DROP TABLE items; --'::text}) x 3),
	'(2) a literal read under the session\'s standard_conforming_strings is the same default everywhere, one statement');
$router->safe_psql('postgres', 'ALTER TABLE items DROP COLUMN sp2, DROP COLUMN quoted');

# (3)
$nodes{s2}->safe_psql('postgres', 'ALTER TABLE items_2 ADD COLUMN extra integer');
($rc, $out, $err) = $router->psql('postgres', 'ALTER TABLE items ADD COLUMN extra integer');
like($err, qr/ERROR:.*column "extra" of relation "items_2" already exists/, '(3) a shard server that refuses: the router\'s ERROR says why');
is(columns($router, 'items') =~ /extra/ ? 'router has it' : 'router has not', 'router has not', '(3) the router kept its definition');
unlike(columns($nodes{s1}, 'items_1'), qr/extra/, '(3) ... and so did the other shard server');
is(prepared(), '0,0', '(3) no prepared transaction is left');
$nodes{s2}->safe_psql('postgres', 'ALTER TABLE items_2 DROP COLUMN extra');

# (4)
($rc, $out, $err) = $router->psql('postgres', 'ALTER TABLE items ADD COLUMN extra integer, REPLICA IDENTITY FULL');
like($err, qr/ERROR:  cannot change gene-sharded table "items" and its shard tables with this mix of subcommands.*HINT:  Split the statement/s,
	'(4) a mix of carried and router-only subcommands is refused');
$router->safe_psql('postgres', q{SET snowseq.shard_ddl = off; COMMENT ON COLUMN items.memo IS 'router only'});
is($nodes{s1}->safe_psql('postgres', "SELECT col_description('items_1'::regclass, 3)"), 'what the buyer wrote',
	'(4) with snowseq.shard_ddl = off the change stays on the router');

# (5) s2 dies once every server prepared, before the router commits
my $locker = $router->background_psql('postgres');
$locker->query_safe('SELECT pg_advisory_lock(7236949375)');
my ($dout, $derr) = ('', '');
my $ddl = IPC::Run::start([ 'psql', '-X', '-d', $router->connstr('postgres'),
	'-c', "SET snowseq.test_pause_at = 'shard_ddl_prepared'",
	'-c', 'ALTER TABLE items ADD COLUMN flag boolean' ], '>', \$dout, '2>', \$derr);
ok($router->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event = 'advisory' AND query LIKE 'ALTER TABLE items%'}),
	'(5) the change waits with every shard server prepared');
is(prepared(), '1,1', '(5) ... each shard server has its prepared transaction');
$nodes{s2}->stop('immediate');
$locker->query_safe('SELECT pg_advisory_unlock(7236949375)');
$ddl->finish;
like($derr, qr/WARNING:  the change of the shard table on server "s2" is prepared and not yet committed/,
	'(5) the router commits and warns that s2\'s part is prepared, not committed');
like(columns($router, 'items'), qr/flag:boolean/, '(5) the router has the new column');
like(columns($nodes{s1}, 'items_1'), qr/flag:boolean/, '(5) ... and s1');
$nodes{s2}->start;
# (the prepared transaction holds its lock on items_2: the catalog is read
# without opening the table)
sub has_flag
{
	return $nodes{s2}->safe_psql('postgres', q{SELECT count(*) FROM pg_attribute WHERE attrelid = 'items_2'::regclass AND attname = 'flag'});
}
is(has_flag(), '0', '(5) s2, back, has its part prepared, not committed');
like($router->safe_psql('postgres', 'SELECT server || \' \' || object || \' \' || action FROM snowseq_move_cleanup()'),
	qr/^s2 prepared transaction snowseq_ddl_\d+_\d+_\d+_\d+ committed$/, '(5) snowseq_move_cleanup() commits it');
is(has_flag(), '1', '(5) every server has the new column');
is(prepared(), '0,0', '(5) no prepared transaction is left');

# (6) s2 dies before it prepared
$locker->query_safe('SELECT pg_advisory_lock(7236949375)');
($dout, $derr) = ('', '');
$ddl = IPC::Run::start([ 'psql', '-X', '-d', $router->connstr('postgres'),
	'-c', "SET snowseq.test_pause_at = 'shard_ddl_prepare'",
	'-c', 'ALTER TABLE items DROP COLUMN flag' ], '>', \$dout, '2>', \$derr);
ok($router->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event = 'advisory' AND query LIKE 'ALTER TABLE items%'}),
	'(6) the change waits before the shard servers prepare');
$nodes{s2}->stop('immediate');
$locker->query_safe('SELECT pg_advisory_unlock(7236949375)');
$ddl->finish;
like($derr, qr/ERROR:.*(server "s2"|connection|terminat)/i, '(6) the router\'s commit fails: s2 cannot prepare');
$nodes{s2}->start;
is(join(' | ', map { columns(@$_) =~ /flag/ ? 'has flag' : 'no flag' } [ $router, 'items' ], @tables),
	'has flag | has flag | has flag', '(6) every server keeps the old definition');
is(prepared(), '0,0', '(6) no prepared transaction is left');
$locker->quit;

# writers: nothing lost, nothing doubled (a row whose commit the client
# did not hear of, when s2 died, may be stored too)
open my $stop, '>', "$dir/stop" or die;
close $stop;
$_->{h}->finish for @clients;
my @ids = map { read_lines($_->{out}, qr/^\d+$/) } @clients;
my %stored;
for my $t (@tables)
{
	$stored{$_}++ for split /\n/, $t->[0]->safe_psql('postgres', "SELECT item_id FROM $t->[1] WHERE k = 'w'");
}
is(scalar(grep { !$stored{$_} } @ids), 0, sprintf('writers: every one of the %d rows they were told of is stored', scalar(@ids)));
is(scalar(grep { $stored{$_} > 1 } keys %stored), 0, 'writers: no id twice');

# (7) a revertable move: refused until finalized; a move copies the new column
$router->safe_psql('postgres', q{UPDATE items SET memo = 'kept ' || item_id WHERE k = 'w'});
($rc, $out, $err) = $router->psql('postgres', q{SET snowseq.move_revert_window = '1h'; CALL snowseq_move_genes('items', 0, 8191, 's2')});
is($rc, 0, '(7) a revertable move of genes 0..8191 to s2') or diag($err);
my $move = $router->safe_psql('postgres', q{SELECT max(move_id) FROM snowseq_moves WHERE group_move IS NULL});
($rc, $out, $err) = $router->psql('postgres', 'ALTER TABLE items ADD COLUMN later text');
like($err, qr/ERROR:  cannot change the definition of gene-sharded table "items" while move $move is not over.*HINT:  Change it once the move or merge is done/s,
	'(7) a change while the move is revertable is refused');
$router->safe_psql('postgres', "CALL snowseq_move_finalize($move)");
$router->safe_psql('postgres', 'ALTER TABLE items ADD COLUMN later text');
is($router->safe_psql('postgres', q{SELECT count(*) FILTER (WHERE memo = 'kept ' || item_id) = count(*) AND count(*) > 0
	FROM items WHERE shard_of(item_id) <= 8191 AND k = 'w'}), 't', '(7) the moved rows kept their values of the added column');
is($router->safe_psql('postgres', q{SELECT count(*) FROM snowseq_check_shards()}), '0',
	'(7) after the move and the change, snowseq_check_shards() finds no difference');

# (8) the router dies with every server prepared, before it commits: at its
# start the resolver rolls their parts back
$locker = $router->background_psql('postgres');
$locker->query_safe('SELECT pg_advisory_lock(7236949375)');
($dout, $derr) = ('', '');
$ddl = IPC::Run::start([ 'psql', '-X', '-d', $router->connstr('postgres'),
	'-c', "SET snowseq.test_pause_at = 'shard_ddl_prepared'",
	'-c', 'ALTER TABLE items ADD COLUMN gone integer' ], '>', \$dout, '2>', \$derr);
ok($router->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event = 'advisory' AND query LIKE 'ALTER TABLE items%'}),
	'(8) the change waits with every shard server prepared');
is(prepared(), '1,1', '(8) ... each has its prepared transaction');
$router->stop('immediate');
$ddl->finish;
eval { $locker->quit };
$router->start;
ok(wait_until(sub { prepared() eq '0,0' }), '(8) after the router\'s restart its resolver rolled both back');
is(join(' | ', map { columns(@$_) =~ /gone/ ? 'has gone' : 'no gone' } [ $router, 'items' ], @tables),
	'no gone | no gone | no gone', '(8) no server has the change');

done_testing();
