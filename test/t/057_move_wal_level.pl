# Elastic shards: the wal_level a move needs on its source.
#
#   router (node 1): items PARTITION BY RANGE (item_id), genes 0..16383 on
#                    s1, genes 16384..32767 on s2
#   s1     (node 2): wal_level = replica (slots, senders and prepared
#                    transactions as a shard server has them)
#   s2     (node 3): wal_level = logical
#
# (1) A split from s1 to s2.  Before PostgreSQL 19, logical decoding needs
#     wal_level = logical set at server start: the split is refused, naming
#     the setting and the server, with a hint, and changes nothing.  From 19
#     on, the first logical replication slot raises s1's
#     effective_wal_level to logical without a restart: the split runs,
#     every row is read once through the router afterwards, and s1 was not
#     restarted.
# (2) wal_level = minimal on s1 (no logical decoding in any version): the
#     split is refused and changes nothing.
use strict;
use warnings;
use lib 'test';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my @replica_conf = map { s/^wal_level = logical$/wal_level = replica/r } shard_conf();
my $router = snowseq_node('router', node_id => 1);
my %node = (
	s1 => snowseq_node('s1', node_id => 2, conf => \@replica_conf),
	s2 => snowseq_node('s2', node_id => 3, conf => [ shard_conf() ]));
my $s1 = $node{s1};
is($s1->safe_psql('postgres', 'SHOW wal_level'), 'replica', 's1 runs with wal_level = replica');
my $dynamic = $s1->safe_psql('postgres', 'SELECT current_setting(\'server_version_num\')::int >= 190000');
my $rows = 2000;
gene_sharded_items($router, \%node, [ [ 0, 16383 ], [ 16384, 32767 ] ], $rows);

sub count_once
{
	return $router->safe_psql('postgres', q{SELECT count(*) || ' ' || count(DISTINCT item_id) FROM items});
}

# ---------------------------------------------------------------------
# (1) A source with wal_level = replica
# ---------------------------------------------------------------------
my $before = shard_layout($router, 'postgres', 'items');
my $moving = $router->safe_psql('postgres',
	q{SELECT count(*) FROM items WHERE item_id >= 8192::bigint << 48 AND item_id < 16384::bigint << 48});
cmp_ok($moving, '>', 0, "genes 8192..16383 hold $moving of the $rows rows");
my $started = $s1->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
my ($rc, $out, $err) = $router->psql('postgres', q{CALL snowseq_split_shard('items', 8192, 's2')});
if ($dynamic eq 't')
{
	is($rc, 0, '(1) from PostgreSQL 19 on, a split from a source with wal_level = replica runs')
	  or diag($err);
	like(shard_layout($router, 'postgres', 'items'), qr/^8191=s1,32767=s2 .*items_g8192_16383 FOR VALUES .* s2\.items_g8192_16383/,
		'(1) the map gives genes 8192..16383 to s2, read from their new table there');
	is(count_once(), "$rows $rows", '(1) every row is read once through the router after the split');
	is($node{s2}->safe_psql('postgres', 'SELECT count(*) FROM items_g8192_16383'), $moving, '(1) s2 holds the moved rows');
	is($s1->safe_psql('postgres', 'SELECT count(*) FROM items_1 WHERE item_id >= 8192::bigint << 48'), 0,
		'(1) s1 holds none of them');
	is($s1->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $started, '(1) s1 was not restarted');
	is($s1->safe_psql('postgres', 'SHOW wal_level'), 'replica', '(1) s1 still has wal_level = replica');
}
else
{
	isnt($rc, 0, '(1) before PostgreSQL 19, a split from a source with wal_level = replica is refused');
	like($err, qr/wal_level is "replica" on server "s1"/, '(1) the error names the setting and the server');
	like($err, qr/HINT:  Set wal_level = logical on the source server and restart it/, '(1) the hint says what to do');
	is(shard_layout($router, 'postgres', 'items'), $before, '(1) the refused split changed nothing on the router');
	is(count_once(), "$rows $rows", '(1) every row is read once through the router');
}
is_deeply([ move_leftovers('postgres', values %node) ], [], '(1) no slot, publication or subscription is left');

# ---------------------------------------------------------------------
# (2) wal_level = minimal: no logical decoding in any version
# ---------------------------------------------------------------------
$s1->append_conf('postgresql.conf', "wal_level = minimal\nmax_wal_senders = 0\n");
$s1->restart;
$before = shard_layout($router, 'postgres', 'items');
($rc, $out, $err) = $router->psql('postgres', q{CALL snowseq_split_shard('items', 4096, 's2')});
isnt($rc, 0, '(2) a split from a source with wal_level = minimal is refused');
like($err, qr/wal_level is "minimal" on server "s1".*HINT:  Set wal_level = logical/s,
	'(2) the error names the setting and the server, with a hint');
is(shard_layout($router, 'postgres', 'items'), $before, '(2) the refused split changed nothing on the router');
is(count_once(), "$rows $rows", '(2) every row is read once through the router');

done_testing();
