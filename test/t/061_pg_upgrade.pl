# pg_upgrade of a cluster that uses snowseq, from the PostgreSQL installation
# named by SNOWSEQ_OLD_INSTALL (a directory with bin/, snowseq installed in
# it: test/matrix.sh passes 17's to the 18 run, 18's to the 19 run) or else from this
# installation to itself.
#
# pg_upgrade moves databases, not the files snowseq keeps in the data
# directory: the state files snowseq.state and snowseq.state.copy (the
# durable reservations) stay behind, and the new cluster's WAL starts
# empty.  Copied into the new data directory before its first start, they
# carry the reservations along: every snowflake ID of the new cluster is
# greater than every one the old cluster issued (here the old clock runs
# minutes ahead of the wall clock, borrowed by a burst), and gene IDs keep
# increasing within their gene.  Without them the new cluster starts from
# the wall clock and from segment zero, and issues old IDs again: the test
# shows that too, on a second new cluster upgraded from the same old one,
# which is why the copy is part of the procedure (README, Upgrading).
#
# The extension's catalog after pg_upgrade equals a fresh install on the
# new server, and the rows stored before are all there.
use strict;
use warnings;
use lib 'test';
use File::Copy qw(copy);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $old_install = $ENV{SNOWSEQ_OLD_INSTALL};

# Whether pg_upgrade between the two installations works at all, for a
# cluster without snowseq: one plain table, upgraded.  This test is about
# what snowseq keeps outside the databases, not about the distribution's
# pg_upgrade; where the two builds cannot upgrade a plain table (Debian's
# 17.12 writes a column option, pg_attver, that its 18.6 refuses), the
# upgrade is tested from this installation to itself, as on 15, and the
# reason is said.
sub plain_upgrade_works
{
	my ($from) = @_;
	my $o = PostgreSQL::Test::Cluster->new('plain_old', install_path => $from);
	$o->init;
	$o->start;
	my $from_version = $o->safe_psql('postgres', 'SHOW server_version_num');
	$o->safe_psql('postgres', 'CREATE TABLE plain (a int, b text); INSERT INTO plain VALUES (1, 2)');
	$o->stop;
	my $n = PostgreSQL::Test::Cluster->new('plain_new');
	$n->init(extra => ($n->pg_version >= 18 && $from_version < 180000) ? ['--no-data-checksums'] : []);
	my $cwd = PostgreSQL::Test::Utils::tempdir();
	chdir $cwd or die "cannot chdir to $cwd: $!";
	my ($stdout, $stderr);
	my $ok = IPC::Run::run(
		[
			'pg_upgrade', '--no-sync',
			'-d', $o->data_dir, '-D', $n->data_dir,
			'-b', $o->config_data('--bindir'), '-B', $n->config_data('--bindir'),
			'-s', $n->host, '-p', $o->port, '-P', $n->port
		],
		'>', \$stdout, '2>', \$stderr);
	note("plain pg_upgrade from $from: " . ($ok ? 'works' : "fails:\n$stdout$stderr"));
	return $ok;
}
if ($old_install && !plain_upgrade_works($old_install))
{
	diag("pg_upgrade from $old_install fails for a cluster without snowseq too (see the log): "
		  . 'upgrading from this installation to itself instead');
	$old_install = undef;
}
my @KEYS = ('alice', 'bob', 'carol');

# seq_bits = 2: 4 IDs per ms, so that a burst of 1.2M IDs puts the clock
# five minutes ahead of the wall clock, where a cluster that lost the
# reservation would issue its IDs again.  The burst is 293 batches of 4,096
# (the most one call takes): the clock gets there in a few hundred calls,
# however fast the machine runs, not only if 1.2M single calls take less
# than a minute.
my @CONF = ('snowseq.seq_bits = 2', 'snowseq.max_lead_ms = 600000', "timezone = 'UTC'");

my $old = snowseq_node('old', conf => \@CONF, extension => 0,
	$old_install ? (install_path => $old_install) : ());
my $old_version = $old->safe_psql('postgres', 'SHOW server_version_num');
my $this_version = PostgreSQL::Test::Cluster->new('probe')->pg_version;
my $NEW_INITDB = ($this_version >= 18 && $old_version < 180000) ? ['--no-data-checksums'] : [];
note('old cluster: PostgreSQL ' . $old->safe_psql('postgres', 'SHOW server_version')
	  . ($old_install ? " from $old_install" : ' (this installation)'));

$old->safe_psql('postgres', 'CREATE DATABASE shop');
$old->safe_psql('shop', q{
	CREATE EXTENSION snowseq;
	CREATE TABLE events (id bigint PRIMARY KEY DEFAULT snowseq_next(), what text);
	CREATE TABLE orders (order_id bigint PRIMARY KEY, buyer text NOT NULL);
	CREATE TRIGGER orders_id BEFORE INSERT ON orders
		FOR EACH ROW EXECUTE FUNCTION snowseq_fill_gene_id('order_id', 'buyer');
	INSERT INTO snowseq_shard_map VALUES (16383, 'shard_a'), (32767, 'shard_b');
});

# IDs as received by the client: from the tables' DEFAULT and trigger, or
# (rows => 0) from the functions alone
sub take_ids
{
	my ($node, %o) = @_;
	my $rows = $o{rows} // 1;
	my @sf = split /\n/, $node->safe_psql('shop', $rows
		? "INSERT INTO events (what) SELECT 'e' FROM generate_series(1, 200) RETURNING id"
		: 'SELECT snowseq_next() FROM generate_series(1, 200)');
	my %gene;
	for my $k (@KEYS)
	{
		$gene{$k} = [ split /\n/, $node->safe_psql('shop', $rows
			? "INSERT INTO orders (buyer) SELECT '$k' FROM generate_series(1, 100) RETURNING order_id"
			: "SELECT snowseq_gene_next('$k'::text) FROM generate_series(1, 100)") ];
	}
	return (\@sf, \%gene);
}

my ($old_sf, $old_gene) = take_ids($old);
# the burst: the logical clock runs ahead of the wall clock
my $burst_max = $old->safe_psql('shop',
	'SELECT max(x) FROM generate_series(1, 293) g, LATERAL snowseq_next_n(4096 + 0 * g) x');
my ($more_sf, $more_gene) = take_ids($old);
push @$old_sf, $burst_max, @$more_sf;
push @{ $old_gene->{$_} }, @{ $more_gene->{$_} } for @KEYS;
my $old_sf_max = max_of(@$old_sf);
my %old_gene_max = map { $_ => max_of(@{ $old_gene->{$_} }) } @KEYS;
my %old_ids = map { $_ => 1 } @$old_sf, map { @$_ } values %$old_gene;
my $drift = $old->safe_psql('shop', 'SELECT extract(epoch FROM drift)::int FROM snowseq_status');
cmp_ok($drift, '>=', 240, "the old cluster's clock runs ahead of the wall clock ($drift s)");
my $rows = $old->safe_psql('shop', q{
	SELECT (SELECT count(*) || ':' || md5(string_agg(id::text, ',' ORDER BY id)) FROM events)
		|| ' ' || (SELECT count(*) || ':' || md5(string_agg(order_id || buyer, ',' ORDER BY order_id)) FROM orders)
		|| ' ' || (SELECT string_agg(upper_gene || '=' || shard, ',' ORDER BY upper_gene) FROM snowseq_shard_map)});
$old->stop;
ok(-f $old->data_dir . '/snowseq.state' && -f $old->data_dir . '/snowseq.state.copy',
	'the old data directory holds the state files');

# A new cluster of this installation, upgraded from the old one.
sub upgraded
{
	my ($name) = @_;
	# initdb of 18 turns data checksums on by default, older ones off:
	# pg_upgrade needs both clusters alike
	my $new = snowseq_node($name, conf => \@CONF, start => 0,
		initdb => $NEW_INITDB);
	my $cwd = PostgreSQL::Test::Utils::tempdir();
	chdir $cwd or die "cannot chdir to $cwd: $!";
	command_ok(
		[
			'pg_upgrade', '--no-sync',
			'-d', $old->data_dir, '-D', $new->data_dir,
			'-b', $old->config_data('--bindir'), '-B', $new->config_data('--bindir'),
			'-s', $new->host, '-p', $old->port, '-P', $new->port
		],
		"$name: pg_upgrade");
	ok(!-e $new->data_dir . '/snowseq.state', "$name: pg_upgrade did not bring the state file");
	return $new;
}

# ---- without the state files: old IDs come again ----
my $bare = upgraded('new_bare');
$bare->start;
my ($bare_sf, $bare_gene) = take_ids($bare, rows => 0);
my @again = grep { $old_ids{$_} } map { @$_ } values %$bare_gene;
cmp_ok(scalar(@again), '>', 0,
	'without the state files, the new cluster issues gene IDs the old one issued (' . scalar(@again) . ' of 300)');
cmp_ok($bare_sf->[0], '<', $old_sf_max,
	'without the state files, its snowflake IDs start below the old ones (the old clock ran ahead)');
$bare->stop;

# ---- with the state files copied from the old data directory ----
my $new = upgraded('new');
for my $f ('snowseq.state', 'snowseq.state.copy')
{
	copy($old->data_dir . "/$f", $new->data_dir . "/$f") or die "cannot copy $f: $!";
}
$new->start;
note('new cluster: PostgreSQL ' . $new->safe_psql('postgres', 'SHOW server_version'));
is($new->safe_psql('shop', q{
	SELECT (SELECT count(*) || ':' || md5(string_agg(id::text, ',' ORDER BY id)) FROM events)
		|| ' ' || (SELECT count(*) || ':' || md5(string_agg(order_id || buyer, ',' ORDER BY order_id)) FROM orders)
		|| ' ' || (SELECT string_agg(upper_gene || '=' || shard, ',' ORDER BY upper_gene) FROM snowseq_shard_map)}),
	$rows, 'the rows and the routing map came along');
my ($new_sf, $new_gene) = take_ids($new);
ok($new_sf->[0] > $old_sf_max && strictly_increasing($new_sf),
	"snowflake IDs after pg_upgrade start above every old one ($new_sf->[0] > $old_sf_max)");
for my $k (@KEYS)
{
	ok($new_gene->{$k}[0] > $old_gene_max{$k} && strictly_increasing($new_gene->{$k}),
		"gene IDs of '$k' after pg_upgrade start above the old ones");
}
# and after a restart of the new cluster
$new->restart;
my ($re_sf, $re_gene) = take_ids($new);
my @all = (@$old_sf, @$new_sf, @$re_sf, map { (@{ $old_gene->{$_} }, @{ $new_gene->{$_} }, @{ $re_gene->{$_} }) } @KEYS);
ok(all_unique(\@all), 'no ID issued twice by the old and the new cluster (' . scalar(@all) . ' IDs)');
ok($re_sf->[0] > $new_sf->[-1], 'and the clock keeps increasing across a restart of the new cluster');

# the extension's catalog equals a fresh install on the new server
$new->safe_psql('postgres', 'CREATE DATABASE fresh');
$new->safe_psql('fresh', 'CREATE EXTENSION snowseq');
compare_fingerprints(extension_fingerprint($new, 'shop'), extension_fingerprint($new, 'fresh'),
	'after pg_upgrade the extension has the catalog of a fresh install', 'upgraded', 'fresh');

$new->stop;
done_testing();
