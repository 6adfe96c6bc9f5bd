# The lifecycle of a key version of public IDs: whatever happens to the
# key, its table, its database or its cluster, a public ID that ever left
# the server decrypts to its own ID or fails, no version is made twice with
# another key, and no key is left unusable.
#
# Every public ID a client ever received is kept in %left (ID => public
# ID); after each event, check() asks the server about all of them: none
# may decrypt to another ID, and those of keys still in use decrypt to
# their own.
#
# | event                              | what is checked                                   |
# |------------------------------------|---------------------------------------------------|
# | transaction rollback               | encrypt with a key made in the open transaction  |
# |                                    | is refused; the next key gets the next version    |
# | savepoint rollback                 | the same inside a savepoint                       |
# | drop and re-create (retire + new)  | the retired version's public IDs fail, the new   |
# |                                    | key gets a new version                            |
# | DROP / CREATE EXTENSION            | the re-created extension's first key gets a      |
# |                                    | version above every one made before              |
# | DROP / CREATE DATABASE             | the same for a database dropped and made again   |
# | clean restart                      | every key still decrypts; versions go on above   |
# | crash                              | a key made with synchronous_commit = off and     |
# |                                    | used at once survives an immediate stop; a       |
# |                                    | version rolled back before the crash stays burned |
# | promotion of a standby             | the standby, cloned before the first key (so the |
# |                                    | keyring came through the WAL), decrypts every     |
# |                                    | public ID once promoted, and makes versions above |
# |                                    | every one its primary made                        |
# | pg_dump / restore, same cluster    | another database restored from the dump decrypts |
# |                                    | and goes on above                                 |
# | pg_dump / restore, other cluster   | an ERROR naming the missing wrap key until the    |
# |                                    | keyring copy is imported, then every public ID    |
# |                                    | decrypts                                          |
# | an older dump restored elsewhere,  | the source made a key after the dump and issued   |
# | with the source's keyring          | public IDs with it: no key is made there while    |
# |                                    | the dump's key rows wait for their keyring; once  |
# |                                    | it is imported, new versions go on above every    |
# |                                    | one the source made, so the source's newer public |
# |                                    | IDs never decrypt there to another ID             |
# | pg_upgrade                         | with the keyring file copied (as the state files  |
# |                                    | are), every public ID decrypts and versions go on |
# |                                    | above; without it, an ERROR, never a wrong ID     |
# | key rotation                       | public IDs of the old key still decrypt; new ones |
# |                                    | carry the new version                             |
# | update from 1.1                    | a key stored as it is gets wrapped; its public    |
# |                                    | IDs still decrypt                                 |
# | another public_version_bits        | snowseq_new_key refuses; retiring works at either |
# |                                    | width; back at the keys' width all works again    |
# | period switch                      | does not apply: keys have no period               |
use strict;
use warnings;
use lib 'test';
use File::Copy qw(copy);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use SnowseqTest;
use Test::More;

my $dir = $PostgreSQL::Test::Utils::tmp_check;
my %left;			# ID => public ID, every one a client received
my $next_id = 1;	# segment of the next ID to encrypt (gene 5)

# Encrypt n new IDs in psql; the public IDs a client received (an ERROR
# leaves none) join %left.  Returns (exit code, stderr, how many received).
sub encrypt_batch
{
	my ($node, $db, $n, $before, $after) = @_;
	my $first = $next_id;
	$next_id += $n;
	my ($rc, $out, $err) = $node->psql($db,
		($before // '') . "\nSELECT (5::bigint << 48 | g) || '|' || snowseq_encrypt(5::bigint << 48 | g)"
		  . " FROM generate_series($first, " . ($first + $n - 1) . ") g;\n" . ($after // ''),
		on_error_stop => 0);
	my $got = 0;
	for (split /\n/, $out)
	{
		next unless /^(\d+)\|(\d+)$/;
		$left{$1} = $2;
		$got++;
	}
	return ($rc, $err, $got);
}

# Ask a server about every public ID that left: "wrong/own/failed".
sub check
{
	my ($node, $db) = @_;
	my $vals = join(',', map { "($_, $left{$_})" } sort { $a <=> $b } keys %left);
	return $node->safe_psql($db, qq{
		CREATE TEMP TABLE pids (id bigint, p bigint);
		INSERT INTO pids VALUES $vals;
		SELECT count(*) FILTER (WHERE snowseq_is_public_id(p) AND snowseq_decrypt(p) <> id)
			|| '/' || count(*) FILTER (WHERE snowseq_is_public_id(p) AND snowseq_decrypt(p) = id)
			|| '/' || count(*) FILTER (WHERE NOT snowseq_is_public_id(p))
		FROM pids});
}

# What check() must say when $own public IDs decrypt to their own ID and
# every other one fails.
sub expect
{
	my ($own) = @_;
	return "0/$own/" . (scalar(keys %left) - $own);
}

# Make a key and use it; returns its version.
sub new_key
{
	my ($node, $db) = @_;
	return $node->safe_psql($db || 'postgres',
		'SELECT v FROM (SELECT snowseq_new_key() AS v) k, LATERAL (SELECT snowseq_use_key(v)) u');
}

my $primary = snowseq_node('primary', streaming => 1);
# a standby cloned before any key exists: the keyring reaches it by WAL
$primary->backup('empty');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'empty', has_streaming => 1);
$standby->start;

my $v1 = new_key($primary);
my ($rc, $err, $got) = encrypt_batch($primary, 'postgres', 1000);
is($got, 1000, "key version $v1: 1000 public IDs made");
my $made = $v1;

# ---- transaction rollback ----
($rc, $err, $got) = encrypt_batch($primary, 'postgres', 2000,
	'BEGIN; SELECT snowseq_use_key(snowseq_new_key());', 'ROLLBACK;');
like($err, qr/snowseq key version \d+ was made in this transaction, which has not committed/,
	'rollback: a key made in the open transaction does not encrypt');
is($got, 0, 'rollback: no public ID left the server');
my $v = new_key($primary);
cmp_ok($v, '>', $made + 1, "rollback: the next key gets version $v, not the rolled-back one");
$made = $v;
encrypt_batch($primary, 'postgres', 1000);
is(check($primary, 'postgres') =~ s{/.*}{}r, '0', 'rollback: no public ID decrypts to another ID');

# ---- savepoint rollback ----
($rc, $err, $got) = encrypt_batch($primary, 'postgres', 2000,
	'BEGIN; SAVEPOINT s; SELECT snowseq_use_key(snowseq_new_key());',
	'ROLLBACK TO s; SELECT snowseq_use_key(snowseq_new_key()); COMMIT;');
is($got, 0, 'savepoint: no public ID left the server');
$v = $primary->safe_psql('postgres', "SELECT version FROM snowseq_keys WHERE state = 'current'");
cmp_ok($v, '>', $made + 1, "savepoint: the key made after ROLLBACK TO has version $v, not the rolled-back one");
$made = $v;
encrypt_batch($primary, 'postgres', 1000);
is(check($primary, 'postgres') =~ s{/.*}{}r, '0', 'savepoint: no public ID decrypts to another ID');

# ---- drop and re-create: retire and make a new key ----
my $old = $made;
$v = new_key($primary);
$primary->safe_psql('postgres', "SELECT snowseq_retire_key($old)");
cmp_ok($v, '>', $old, 'retire + new: the new key has a new version');
$made = $v;
encrypt_batch($primary, 'postgres', 1000);
my ($wrong, $own, $failed) = split m{/}, check($primary, 'postgres');
is($wrong, 0, 'retire + new: no public ID decrypts to another ID');
cmp_ok($failed, '>=', 1000, "retire + new: the retired key's public IDs fail ($failed)");

# ---- DROP / CREATE EXTENSION ----
$primary->safe_psql('postgres', 'DROP EXTENSION snowseq; CREATE EXTENSION snowseq');
$v = new_key($primary);
cmp_ok($v, '>', $made, "DROP/CREATE EXTENSION: the first new key gets version $v, above every one made");
$made = $v;
encrypt_batch($primary, 'postgres', 1000);
($wrong, $own) = split m{/}, check($primary, 'postgres');
is($wrong, 0, 'DROP/CREATE EXTENSION: no public ID decrypts to another ID');
is($own, 1000, 'DROP/CREATE EXTENSION: the new key decrypts its own');

# ---- DROP / CREATE DATABASE ----
$primary->safe_psql('postgres', 'CREATE DATABASE shop');
$primary->safe_psql('shop', 'CREATE EXTENSION snowseq');
my %saved = %left;
%left = ();
$v = new_key($primary, 'shop');
cmp_ok($v, '>', $made, 'a new database goes on above the versions of the others');
encrypt_batch($primary, 'shop', 1000);
$primary->safe_psql('postgres', 'DROP DATABASE shop');
$primary->safe_psql('postgres', 'CREATE DATABASE shop');
$primary->safe_psql('shop', 'CREATE EXTENSION snowseq');
my $v2 = new_key($primary, 'shop');
cmp_ok($v2, '>', $v, "DROP/CREATE DATABASE: the re-created database's first key gets version $v2");
$made = $v2;
($wrong, $own, $failed) = split m{/}, check($primary, 'shop');
is("$wrong/$own", '0/0', 'DROP/CREATE DATABASE: no public ID of the dropped database decrypts there');
%left = %saved;

# ---- key rotation ----
$v = new_key($primary);
$made = $v;
my $rot = $next_id;
encrypt_batch($primary, 'postgres', 500);
is($primary->safe_psql('postgres', "SELECT count(*) FROM generate_series($rot, $rot + 499) g
	WHERE ((snowseq_encrypt(5::bigint << 48 | g) >> 42) & 63) = $v"), '500',
	'rotation: new public IDs carry the new version');
($wrong, $own) = split m{/}, check($primary, 'postgres');
is($wrong, 0, 'rotation: no public ID decrypts to another ID');
is($own, 1500, 'rotation: the previous key and the new one decrypt their own');

# ---- clean restart ----
$primary->restart;
is(check($primary, 'postgres'), expect(1500), 'clean restart: every answer as before');
$v = new_key($primary);
cmp_ok($v, '>', $made, 'clean restart: versions go on above');
$made = $v;

# ---- crash ----
($rc, $err, $got) = encrypt_batch($primary, 'postgres', 100,
	'SET synchronous_commit = off; SELECT snowseq_use_key(snowseq_new_key());');
is($got, 100, 'crash: a key committed with synchronous_commit = off encrypts at once');
$primary->safe_psql('postgres', 'BEGIN; SELECT snowseq_new_key(); ROLLBACK;');
my $burned = $made + 2;
$primary->stop('immediate');
$primary->start;
($wrong, $own) = split m{/}, check($primary, 'postgres');
is($wrong, 0, 'crash: no public ID decrypts to another ID');
is($own, 1600, 'crash: the key made just before the crash decrypts its public IDs');
$v = new_key($primary);
cmp_ok($v, '>', $burned, "crash: the version rolled back before the crash stays burned (next: $v)");
$made = $v;
encrypt_batch($primary, 'postgres', 100);

# ---- promotion of a standby ----
$primary->wait_for_catchup($standby);
ok(-f $standby->data_dir . '/snowseq_keyring', 'the standby rebuilt the keyring from the WAL');
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()') or die 'no promotion';
is(check($standby, 'postgres'), expect(1700), 'promotion: every answer as on the primary');
$v = new_key($standby);
cmp_ok($v, '>', $made, "promotion: the promoted standby's first key gets version $v, above the primary's");
$standby->stop;

# ---- pg_dump / restore into the same cluster ----
my $dump = "$dir/postgres.dump";
command_ok([ 'pg_dump', '-Fc', '-d', $primary->connstr('postgres'), '-f', $dump ], 'pg_dump');
$primary->safe_psql('postgres', 'CREATE DATABASE copy');
command_ok([ 'pg_restore', '-d', $primary->connstr('copy'), $dump ], 'restore into another database');
is(check($primary, 'copy'), expect(1700), 'restore, same cluster: every answer as in the source');
$v = new_key($primary, 'copy');
cmp_ok($v, '>', $made, 'restore, same cluster: new versions above every one made');
$made = $v;

# ---- pg_dump / restore into another cluster ----
my $other = snowseq_node('other', node_id => 2, extension => 0);
$other->safe_psql('postgres', 'CREATE DATABASE copy');
command_ok([ 'pg_restore', '-d', $other->connstr('copy'), $dump ], 'restore into another cluster');
my ($orc, $oout, $oerr) = $other->psql('copy', 'SELECT snowseq_decrypt(' . (values %left)[0] . ')');
like($oerr, qr/is wrapped with wrap key [0-9a-f]{16}, which this cluster's keyring does not have/,
	'restore, other cluster: an ERROR names the missing wrap key');
copy($primary->data_dir . '/snowseq_keyring', "$dir/keyring.copy") or die "copy: $!";
is($other->safe_psql('copy', "SELECT snowseq_import_wrap_keys('$dir/keyring.copy')"), '1',
	'restore, other cluster: the wrap key imported');
is(check($other, 'copy'), expect(1700), 'restore, other cluster: every answer as in the source');
my $restored_max = $other->safe_psql('copy', 'SELECT max(version) FROM snowseq_key_store');
$v = new_key($other, 'copy');
cmp_ok($v, '>', $restored_max, 'restore, other cluster: new versions go on above the restored ones');
$other->stop;

# ---- an older dump restored elsewhere, with the source's keyring ----
$primary->safe_psql('postgres', 'CREATE DATABASE newer');
$primary->safe_psql('newer', 'CREATE EXTENSION snowseq');
my $newer = new_key($primary, 'newer');
cmp_ok($newer, '>', $made, "older dump: the source makes version $newer after the dump");
$made = $newer;
my %newer = map { split /\|/ } grep { /^\d+\|\d+$/ } split /\n/, $primary->safe_psql('newer',
	"SELECT (5::bigint << 48 | g) || '|' || snowseq_encrypt(5::bigint << 48 | g) FROM generate_series(1, 2000) g");
is(scalar(keys %newer), 2000, 'older dump: the source issues 2000 public IDs with it');
my $third = snowseq_node('third', node_id => 3, extension => 0);
$third->safe_psql('postgres', 'CREATE DATABASE copy');
command_ok([ 'pg_restore', '-d', $third->connstr('copy'), $dump ], 'older dump: restored into a third cluster');
($orc, $oout, $oerr) = $third->psql('copy', 'SELECT snowseq_new_key()');
like($oerr, qr/cannot make a snowseq key while key version \d+ of another cluster waits for its keyring/,
	'older dump: no key is made while the restored key rows wait for their keyring');
copy($primary->data_dir . '/snowseq_keyring', "$dir/keyring.now") or die "copy: $!";
$third->safe_psql('copy', "SELECT snowseq_import_wrap_keys('$dir/keyring.now')");
$v = new_key($third, 'copy');
cmp_ok($v, '>', $newer, "older dump: with the source's keyring imported, the next version ($v) is above every one the source made");
my $vals = join(',', map { "($_, $newer{$_})" } keys %newer);
is($third->safe_psql('copy', qq{
	SELECT count(*) FROM (VALUES $vals) t(id, p)
	WHERE snowseq_is_public_id(p) AND snowseq_decrypt(p) <> id}), '0',
	"older dump: none of the source's newer public IDs decrypts there to another ID");
$third->stop;

# ---- pg_upgrade (to this installation itself) ----
$primary->stop;
for my $with (0, 1)
{
	my $name = $with ? 'upgraded' : 'upgraded_bare';
	my $new = snowseq_node($name, start => 0);
	my $cwd = PostgreSQL::Test::Utils::tempdir();
	chdir $cwd or die "cannot chdir to $cwd: $!";
	command_ok([ 'pg_upgrade', '--no-sync', '-d', $primary->data_dir, '-D', $new->data_dir,
		'-b', $primary->config_data('--bindir'), '-B', $new->config_data('--bindir'),
		'-s', $new->host, '-p', $primary->port, '-P', $new->port ], "$name: pg_upgrade");
	if ($with)
	{
		# the files snowseq keeps in the data directory (the state files
		# exist once IDs were issued; this test issues none)
		copy($primary->data_dir . "/$_", $new->data_dir . "/$_") or die "copy $_: $!"
		  for grep { -e $primary->data_dir . "/$_" } ('snowseq.state', 'snowseq.state.copy', 'snowseq_keyring');
	}
	$new->start;
	if ($with)
	{
		is(check($new, 'postgres'), expect(1700), 'pg_upgrade with the keyring: every answer as before');
		$v = new_key($new);
		cmp_ok($v, '>', $made, 'pg_upgrade with the keyring: new versions go on above');
	}
	else
	{
		my ($urc, $uout, $uerr) = $new->psql('postgres', 'SELECT snowseq_decrypt(' . (values %left)[0] . ')');
		like($uerr, qr/which this cluster's keyring does not have/,
			'pg_upgrade without the keyring: an ERROR, never another ID');
	}
	$new->stop;
}
$primary->start;

# ---- another snowseq.public_version_bits ----
$primary->append_conf('postgresql.conf', 'snowseq.public_version_bits = 5');
$primary->restart;
($rc, my $out, $err) = $primary->psql('postgres', 'SELECT snowseq_new_key()');
like($err, qr/cannot make a snowseq key for snowseq\.public_version_bits = 5: \d+ existing key version\(s\) were made for 6/,
	'width 5: snowseq_new_key refuses while keys of width 6 exist');
like($err, qr/HINT:\s+Set snowseq\.public_version_bits = 6 again and restart the server/, 'and says how to go back');
my $some = $primary->safe_psql('postgres', "SELECT min(version) FROM snowseq_key_store WHERE state = 'active'");
($rc, $out, $err) = $primary->psql('postgres', "SELECT snowseq_retire_key($some)");
is($rc, 0, "width 5: key version $some (made for 6) can still be retired") or diag($err);
$primary->append_conf('postgresql.conf', 'snowseq.public_version_bits = 6');
$primary->restart;
($wrong, $own) = split m{/}, check($primary, 'postgres');
is($wrong, 0, 'back at width 6: no public ID decrypts to another ID');
cmp_ok($own, '>', 0, "back at width 6: the keys decrypt ($own)");
$v = new_key($primary);
cmp_ok($v, '>', $made, 'back at width 6: new keys again');

# a key stored as it is by 1.1 is wrapped by the update to 1.2, and its
# public IDs still decrypt
$primary->safe_psql('postgres', 'CREATE DATABASE legacy');
$primary->safe_psql('legacy', q{
	CREATE EXTENSION snowseq VERSION '1.1';
	ALTER TABLE snowseq_key_store DISABLE TRIGGER snowseq_key_store_row;
	INSERT INTO snowseq_key_store (version, state, key, version_bits, check_bits)
		VALUES (60, 'current', decode(repeat('cd', 32), 'hex'), 6, 4);
	ALTER TABLE snowseq_key_store ENABLE ALWAYS TRIGGER snowseq_key_store_row});
my $lp = $primary->safe_psql('legacy', 'SELECT snowseq_encrypt(5::bigint << 48 | 424242)');
$primary->safe_psql('legacy', 'ALTER EXTENSION snowseq UPDATE');
is($primary->safe_psql('legacy', 'SELECT octet_length(key) FROM snowseq_key_store WHERE version = 60'), '48',
	'update to 1.2: a key stored as it is by 1.1 is wrapped');
is($primary->safe_psql('legacy', "SELECT snowseq_decrypt($lp) = (5::bigint << 48 | 424242)"), 't',
	'update to 1.2: its public IDs still decrypt');

# keys of two widths in one table (as 1.1 let them be made): the way out
$primary->safe_psql('postgres', q{
	ALTER TABLE snowseq_key_store DISABLE TRIGGER snowseq_key_store_row;
	INSERT INTO snowseq_key_store (version, state, key, version_bits, check_bits)
		VALUES (31, 'active', decode(repeat('ab', 32), 'hex'), 5, 4);
	ALTER TABLE snowseq_key_store ENABLE ALWAYS TRIGGER snowseq_key_store_row});
($rc, $out, $err) = $primary->psql('postgres', 'SELECT snowseq_encrypt(1)');
like($err, qr/HINT:.*retire it: SELECT snowseq_retire_key\(31\);/, 'mixed widths: the ERROR names the way out');
($rc, $out, $err) = $primary->psql('postgres', 'SELECT snowseq_retire_key(31)');
is($rc, 0, 'mixed widths: the key of the other width is retired') or diag($err);
($wrong, $own) = split m{/}, check($primary, 'postgres');
is($wrong, 0, 'mixed widths: afterwards no public ID decrypts to another ID');
cmp_ok($own, '>', 0, 'mixed widths: and the keys decrypt again');
($rc, $out, $err) = $primary->psql('postgres', 'SELECT snowseq_new_key()');
like($err, qr/1 existing key version\(s\) were made for 5/,
	'mixed widths: no new key while the table holds a key of another width, even retired');
$primary->stop;

done_testing();
