# The routing map replicated by logical replication, as a router's map may
# be kept on a standby router or moved with the shards: the subscriber's
# apply worker runs with session_replication_role = replica and fires row
# triggers only, and every open session there must still see each change.
use strict;
use warnings;
use lib 'test';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $pub = snowseq_node('map_pub', node_id => 1, streaming => 'logical');
my $sub = snowseq_node('map_sub', node_id => 2);
$pub->safe_psql('postgres', q{
	INSERT INTO snowseq_shard_map VALUES (16383, 'shard_a'), (32767, 'shard_b');
	CREATE PUBLICATION map_pub FOR TABLE snowseq_shard_map;
});
my $conn = $pub->connstr('postgres');
$sub->safe_psql('postgres', "CREATE SUBSCRIPTION map_sub CONNECTION \$\$$conn\$\$ PUBLICATION map_pub");
$sub->wait_for_subscription_sync($pub, 'map_sub');
is($sub->safe_psql('postgres', 'SELECT snowseq_route_gene(20000)'), 'shard_b', 'the initial copy routes');

# an open session on the subscriber caches the map
my $s = $sub->background_psql('postgres');
is($s->query_safe('SELECT snowseq_route_gene(20000)'), 'shard_b', 'an open session routes from its copy');

# an UPDATE, an INSERT and a DELETE applied by the subscription
$pub->safe_psql('postgres', "UPDATE snowseq_shard_map SET shard = 'shard_c' WHERE upper_gene = 32767");
$pub->wait_for_catchup('map_sub');
is($s->query_safe('SELECT snowseq_route_gene(20000)'), 'shard_c', 'the open session sees a replicated UPDATE');
$pub->safe_psql('postgres', "INSERT INTO snowseq_shard_map VALUES (24575, 'shard_d')");
$pub->wait_for_catchup('map_sub');
is($s->query_safe('SELECT snowseq_route_gene(20000)'), 'shard_d', 'a replicated INSERT');
$pub->safe_psql('postgres', "DELETE FROM snowseq_shard_map WHERE upper_gene = 24575");
$pub->wait_for_catchup('map_sub');
is($s->query_safe('SELECT snowseq_route_gene(20000)'), 'shard_c', 'a replicated DELETE');
$s->quit;

$sub->stop;
$pub->stop;
done_testing();
