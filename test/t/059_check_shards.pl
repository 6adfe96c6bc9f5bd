# snowseq_check_shards(): the router's gene-sharded tables against their
# tables on the shard servers, from the router alone.
#
#   router (node 1): items PARTITION BY RANGE (item_id), partitions items_0
#                    (genes 0..16383, on s1's items_1) and items_1 (the
#                    rest, on s2's items_2)
#   s1 (node 2), s2 (node 3)
#
# (1) As made: no row.
# (2) Each drift is one row per table it touches, naming server, table,
#     kind, object, the router's and the shard's definition: a column added
#     on one shard alone; a column added on the router (its parent and
#     foreign partitions) and not on the shards; an index made on the
#     router's parent (CREATE INDEX skips foreign partitions); an index, a
#     foreign key and a trigger on one shard and not the other; a column of
#     another type; NOT NULL dropped on a shard.
# (3) snowseq's own triggers (a fence) are no drift.
# (4) Another snowseq version on a server is a row; a server that cannot be
#     asked is a row, not an ERROR.
# (5) A role without a grant cannot call it (REVOKE FROM PUBLIC).
use strict;
use warnings;
use lib 'test';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $router = snowseq_node('router', node_id => 1);
my %nodes = (s1 => snowseq_node('s1', node_id => 2), s2 => snowseq_node('s2', node_id => 3));
gene_sharded_items($router, \%nodes, [ [ 0, 16383 ], [ 16384, 32767 ] ], 100);

my $check = q{SELECT coalesce(server, '-') || '|' || coalesce(remote_table, '-') || '|' || kind || '|'
	|| coalesce(object, '-') || '|' || coalesce(router, '-') || '|' || coalesce(shard, '-') || '|' || problem
	FROM snowseq_check_shards() ORDER BY server, remote_table, kind, object};
sub drift { return $router->safe_psql('postgres', $check); }

# (1)
is(drift(), '', '(1) as made: no difference');

# (2) one change at a time, each undone after
$nodes{s1}->safe_psql('postgres', 'ALTER TABLE items_1 ADD COLUMN note text');
is(drift(), 's1|public.items_1|column|note|-|text|on the shard, not on the router',
	'(2) a column added on one shard alone: one row, its server, table and type');
$router->safe_psql('postgres', 'SET snowseq.shard_ddl = off; ALTER TABLE items ADD COLUMN note text');
is(drift(), 's2|public.items_2|column|note|text|-|on the router, not on the shard',
	'(2) added on the router too: now the other shard lacks it');
$router->safe_psql('postgres', 'SET snowseq.shard_ddl = off; ALTER TABLE items DROP COLUMN note');
$nodes{s1}->safe_psql('postgres', 'ALTER TABLE items_1 DROP COLUMN note');
is(drift(), '', '(2) dropped on both: no difference');

$router->safe_psql('postgres', 'SET snowseq.shard_ddl = off; CREATE INDEX items_k_idx ON items (k)');
is(drift(), join("\n", map { "$_|index|btree (k)|btree (k)|-|on the router, not on the shard" }
	  ('s1|public.items_1', 's2|public.items_2')),
	'(2) CREATE INDEX on the router\'s parent reached no shard: a row for each');
$nodes{$_}->safe_psql('postgres', "CREATE INDEX ON items_" . substr($_, 1) . " (k)") for qw(s1 s2);
is(drift(), '', '(2) made on both shards: no difference');

$nodes{s1}->safe_psql('postgres', q{CREATE INDEX ON items_1 (lower(k)) WHERE k <> ''});
is(drift(), q{s2|public.items_2|index|btree (lower(k)) WHERE k <> ''::text|-|-|on public.items_1 of server "s1", not on this shard},
	'(2) an index on one shard alone: the other is named as lacking it');
$nodes{s1}->safe_psql('postgres', q{DROP INDEX items_1_lower_idx});

$nodes{$_}->safe_psql('postgres', 'CREATE TABLE buyers (k text PRIMARY KEY)') for qw(s1 s2);
$nodes{s2}->safe_psql('postgres', 'INSERT INTO buyers SELECT k FROM items_2; ALTER TABLE items_2 ADD CONSTRAINT items_buyer_fk FOREIGN KEY (k) REFERENCES buyers');
is(drift(), 's1|public.items_1|foreign key|FOREIGN KEY (k) REFERENCES public.buyers(k)|-|-|on public.items_2 of server "s2", not on this shard',
	'(2) a foreign key on one shard alone');
$nodes{s2}->safe_psql('postgres', 'ALTER TABLE items_2 DROP CONSTRAINT items_buyer_fk');

$nodes{$_}->safe_psql('postgres', q{CREATE FUNCTION stamp() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$})
  for qw(s1 s2);
$nodes{s2}->safe_psql('postgres', 'CREATE TRIGGER items_stamp BEFORE INSERT ON items_2 FOR EACH ROW EXECUTE FUNCTION stamp()');
is(drift(), 's1|public.items_1|trigger|items_stamp|-|-|on public.items_2 of server "s2", not on this shard',
	'(2) a trigger on one shard alone');
$nodes{s1}->safe_psql('postgres', 'CREATE TRIGGER items_stamp BEFORE UPDATE ON items_1 FOR EACH ROW EXECUTE FUNCTION stamp()');
is(drift(), join("\n",
		's1|public.items_1|trigger|items_stamp|-|public.stamp() type 19 enabled O|public.stamp() type 7 enabled O on public.items_2 of server "s2"',
		's2|public.items_2|trigger|items_stamp|-|public.stamp() type 7 enabled O|public.stamp() type 19 enabled O on public.items_1 of server "s1"'),
	'(2) the same trigger name firing on other events: each side shows its own and the other\'s');
$nodes{$_}->safe_psql('postgres', 'DROP TRIGGER items_stamp ON items_' . substr($_, 1)) for qw(s1 s2);

$nodes{s2}->safe_psql('postgres', 'ALTER TABLE items_2 ALTER COLUMN k TYPE varchar(40)');
is(drift(), 's2|public.items_2|column|k|text|character varying(40)|another type on the shard',
	'(2) a column of another type on one shard');
$nodes{s2}->safe_psql('postgres', 'ALTER TABLE items_2 ALTER COLUMN k TYPE text, ALTER COLUMN k DROP NOT NULL');
is(drift(), 's2|public.items_2|column|k|NOT NULL|NULL|NOT NULL on the router, not on the shard',
	'(2) NOT NULL on the router, dropped on a shard');
$nodes{s2}->safe_psql('postgres', 'ALTER TABLE items_2 ALTER COLUMN k SET NOT NULL');
is(drift(), '', '(2) all undone: no difference');

# (3) a fence is snowseq's trigger on a shard table, made by a move as
# here: no drift
$nodes{s1}->safe_psql('postgres', q{CREATE TRIGGER snowseq_fence BEFORE INSERT OR UPDATE OR DELETE ON items_1
	FOR EACH ROW EXECUTE FUNCTION snowseq_fence('0')});
like($nodes{s1}->safe_psql('postgres', q{SELECT string_agg(tgname, ',') FROM pg_trigger WHERE tgrelid = 'items_1'::regclass AND NOT tgisinternal}),
	qr/snowseq_fence/, '(3) s1\'s table has snowseq\'s fence trigger');
is(drift(), '', '(3) and that is no difference');
$nodes{s1}->safe_psql('postgres', q{DROP TRIGGER snowseq_fence ON items_1});

# (4) another version on s2; then s2 down
$nodes{s2}->safe_psql('postgres', q{DROP EXTENSION snowseq; CREATE EXTENSION snowseq VERSION '1.2'});
is(drift(), 's2|-|snowseq|version|1.3|1.2|another snowseq version than the router\'s',
	'(4) another snowseq version on a server: one row');
$nodes{s2}->safe_psql('postgres', q{ALTER EXTENSION snowseq UPDATE});
$nodes{s2}->stop;
like(drift(), qr/^s2\|public\.items_2\|table\|-\|-\|-\|cannot be asked: .+$/,
	'(4) a server that cannot be asked: a row saying why, no ERROR');
$nodes{s2}->start;
is(drift(), '', '(4) back: no difference');

# (5) rights
$router->safe_psql('postgres', q{CREATE ROLE watcher LOGIN});
my ($rc, $out, $err) = $router->psql('postgres', 'SELECT * FROM snowseq_check_shards()', extra_params => [ '-U', 'watcher' ]);
like($err, qr/permission denied for function snowseq_check_shards/, '(5) a role without a grant cannot call it');

done_testing();
